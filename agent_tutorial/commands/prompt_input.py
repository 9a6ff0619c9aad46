"""The prompt `run` sends: `--prompt`, piped standard input, or both, as strict UTF-8."""

from __future__ import annotations

import os
import stat
import sys

from agent_tutorial.commands.edge import CommandFailed
from agent_tutorial.core.errors import EXIT_USAGE


def stdin_is_terminal() -> bool:
    return sys.stdin is not None and sys.stdin.isatty()  # None: started with stdin closed


def read_prompt(prompt: str | None, max_stdin_bytes: int) -> str:
    """The prompt to run: `--prompt`, piped input, or both joined as Claude Code does
    (the piped text first, as context, then the prompt)."""
    piped = _piped_input(max_stdin_bytes)
    if prompt is None and piped is None:
        raise CommandFailed(
            "no prompt: pass --prompt TEXT or pipe one on standard input", EXIT_USAGE
        )
    if prompt is not None:
        # An argument in another encoding arrives with surrogate escapes for its bytes.
        prompt = _decode_prompt(os.fsencode(prompt), "the --prompt text")
    if piped and prompt:
        prompt = f"{piped.rstrip()}\n\n{prompt}"
    prompt = prompt or piped or ""
    if not prompt.strip():
        raise CommandFailed("the prompt is empty", EXIT_USAGE)
    return prompt


def _piped_input(max_bytes: int) -> str | None:
    """Standard input when it is a pipe or a file, read up to `max_bytes`; None for a
    terminal, /dev/null, a socket or a closed stdin, which are never waited on."""
    if sys.stdin is None or sys.stdin.isatty() or not _is_pipe_or_file(sys.stdin):
        return None
    data = sys.stdin.buffer.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise CommandFailed(
            f"standard input is larger than {max_bytes:,} bytes (max_stdin_bytes); "
            "save it to a file in the workspace and name the file in the prompt instead",
            EXIT_USAGE,
        )
    return _decode_prompt(data, "standard input")


def _is_pipe_or_file(stream: object) -> bool:
    try:
        mode = os.fstat(stream.fileno()).st_mode  # type: ignore[attr-defined]
    except (AttributeError, OSError, ValueError):
        return True  # an in-memory stream (a test runner's): read it
    return stat.S_ISFIFO(mode) or stat.S_ISREG(mode)


def _decode_prompt(data: bytes, source: str) -> str:
    """Strict UTF-8: a guessed decoding would hand the model text the user never wrote."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise CommandFailed(
            f"{source} is not UTF-8 text (byte 0x{data[error.start]:02x} at offset "
            f"{error.start}); convert it first, e.g. with iconv -t UTF-8",
            EXIT_USAGE,
        ) from None
