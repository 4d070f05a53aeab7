"""Run a script under torch.compile in a child process and turn what it showed into findings.

The parent side (runner, findings, report) never imports torch; collector and child run in the child.
"""
