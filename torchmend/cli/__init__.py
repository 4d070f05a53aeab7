"""Terminal I/O: typer commands, rich rendering, exit codes."""
