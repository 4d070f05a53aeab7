"""One answer at a prompt: a single key, taken without Enter, on a terminal (as `git add -p` with
interactive.singleKey); a line otherwise (stdin not a terminal, TERM unset or dumb, or no termios).

In single-key mode the terminal stays in its own signal mode (ISIG on), so Ctrl-C still interrupts with
KeyboardInterrupt; Ctrl-D reads as end of input (EOFError). An Enter typed out of line-mode habit after a
key is ignored at the next prompt instead of being taken as an answer.
"""

from __future__ import annotations

import os
import sys

from rich.console import Console

_ESCAPE_WAIT_S = 0.05  # the rest of an escape sequence (an arrow key) arrives within this


def single_key() -> bool:
    """Whether prompts read one key: stdin is a terminal that is not dumb, and termios exists."""
    if os.environ.get("TERM", "dumb") == "dumb" or not sys.stdin.isatty():
        return False
    try:
        import termios  # noqa: F401
    except ImportError:  # not a POSIX system
        return False
    return True


def ask(console: Console, prompt: str) -> str:
    """Show `prompt` (rich markup) and return the answer: one key on a terminal, else a line."""
    if not single_key():
        return console.input(prompt)
    console.print(prompt, end="")
    key = read_key(sys.stdin.fileno())
    console.print(key if key.isprintable() else "")  # echo it, as the terminal does a line
    return key


def read_key(fd: int) -> str:
    """One key from the terminal `fd`, without waiting for Enter and without echo. A key that is not one
    ASCII character (an arrow, a non-ASCII letter) reads as '' (not an answer)."""
    import select
    import termios

    saved = termios.tcgetattr(fd)
    raw = termios.tcgetattr(fd)
    raw[3] &= ~(termios.ICANON | termios.ECHO)  # lflag: no line editing, no echo; ISIG stays (Ctrl-C)
    raw[6][termios.VMIN], raw[6][termios.VTIME] = 1, 0
    try:
        termios.tcsetattr(fd, termios.TCSANOW, raw)
        while True:
            data = os.read(fd, 1)
            if data in (b"", b"\x04"):  # end of input, or Ctrl-D
                raise EOFError
            if data in (b"\r", b"\n"):
                continue
            if data == b"\x1b" or data[0] >= 0x80:  # an escape sequence or a multi-byte character: drain it
                while select.select([fd], [], [], _ESCAPE_WAIT_S)[0]:
                    os.read(fd, 16)
                return ""
            return data.decode("ascii")
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)
