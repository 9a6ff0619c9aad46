"""One key press read from the terminal, without Enter: the approval question's answers.

The terminal is put in cbreak mode for the read (no line editing, no echo) with its signal
keys left on, so Ctrl-C still interrupts as it does everywhere else in a turn.
"""

from __future__ import annotations

import os
import select
import termios
import tty

ESCAPE = "\x1b"
END_OF_INPUT = ""
"""What `read_key` returns when the terminal has nothing more to give (hung up)."""
ESCAPE_SEQUENCE_WAIT_S = 0.05
"""An arrow key sends Esc and the rest of its sequence at once; Esc alone sends nothing
after it. Only this long is waited for the rest."""


def read_key(fd: int) -> str:
    """The next key pressed on the terminal `fd`: a character, `ESCAPE` for Esc alone, or
    `END_OF_INPUT`. A key that sends a sequence (an arrow) is skipped. Keys typed before
    the call are dropped: only a key pressed after the question was shown answers it."""
    saved = termios.tcgetattr(fd)
    try:
        tty.setcbreak(fd)
        termios.tcflush(fd, termios.TCIFLUSH)
        while True:
            key = _one_key(fd)
            if key is not None:
                return key
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)


def _one_key(fd: int) -> str | None:
    data = os.read(fd, 1)
    if data != ESCAPE.encode():
        return data.decode("utf-8", "replace")
    if select.select([fd], [], [], ESCAPE_SEQUENCE_WAIT_S)[0]:
        os.read(fd, 64)  # the rest of a sequence: not an answer
        return None
    return ESCAPE
