"""Shipping a fix as a pull request: git plumbing, the remote's GitHub repository, the forge's REST API, the
Markdown body, and the flow that ties them together (`ship.py`).

Standard library only (subprocess for git, urllib for HTTP); no terminal I/O (the CLI's `pr.py` does that)
and no torch. The tests (tests/e2e/test_pr.py) drive it against a real git repository, a real bare remote and a
local HTTP server speaking the GitHub protocol, because no forge can be reached from where they run.
"""
