"""Text that came from outside the process (a model's reply, a tool's output, a file's
name) made safe to show: on a terminal it carries no control character.

A file name that is not valid UTF-8 reaches Python with each byte that does not decode as
a lone surrogate (the file system's `surrogateescape`); such a byte is shown as `\\xe9`.
"""

from __future__ import annotations

import re

_CONTROLS = "\x00-\x08\x0b-\x1f\x7f-\x9f"  # C0 but tab and newline, DEL, C1 (ESC among them)
_BIDI_OVERRIDES = "\u202a-\u202e\u2066-\u2069"
_SURROGATES = "\ud800-\udfff"
_UNPRINTABLE = re.compile(f"[{_CONTROLS}{_BIDI_OVERRIDES}{_SURROGATES}]")
_ESCAPED_BYTE_OFFSET = 0xDC00  # surrogateescape keeps byte 0xe9 as U+DCE9


def printable(text: str) -> str:
    """`text` with control characters, bidi overrides and undecodable bytes shown as
    escapes (`\\x1b`, `\\u202e`, `\\xe9`), so a model's reply, a command's output or a
    file's name cannot move the cursor, set the title or clipboard, open a link, or hide
    or reorder what the user reads. Newlines and tabs are kept. Each character is escaped
    on its own, so text shown in pieces (a streamed reply) cannot rebuild a sequence that
    a piece split."""
    return _UNPRINTABLE.sub(_escape_match, text)


def _escape_match(match: re.Match[str]) -> str:
    code = ord(match[0])
    if _ESCAPED_BYTE_OFFSET + 0x80 <= code <= _ESCAPED_BYTE_OFFSET + 0xFF:
        return f"\\x{code - _ESCAPED_BYTE_OFFSET:02x}"
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"
