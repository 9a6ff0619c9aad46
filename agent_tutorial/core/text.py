"""Text that came from outside the process (a model's reply, a tool's output, a file's
name) made safe where it leaves: on a terminal it carries no control character, and
anywhere it is valid UTF-8.

A file name that is not valid UTF-8 reaches Python with each byte that does not decode as
a lone surrogate (the file system's `surrogateescape`). Such a byte is shown as `\\xe9`,
on the terminal and to the model alike, and `name_from_shown` turns that form back into
the name, so the model can pass a name it was shown to a file tool.
"""

from __future__ import annotations

import re

_CONTROLS = "\x00-\x08\x0b-\x1f\x7f-\x9f"  # C0 but tab and newline, DEL, C1 (ESC among them)
_DIRECTION = "\u200e\u200f\u061c\u202a-\u202e\u2066-\u2069"  # marks, embeddings, isolates
# Zero-width space, the two separators a terminal shows as nothing or as a line break no
# reader sees coming, and the tag characters (invisible letters that can spell a whole hidden
# sentence). Not the joiners U+200C and U+200D: Persian, Indic scripts and emoji need them.
_INVISIBLE = "\u200b\u2028\u2029\U000e0000-\U000e007f"
_SURROGATES = "\ud800-\udfff"
_UNPRINTABLE = re.compile(f"[{_CONTROLS}{_DIRECTION}{_INVISIBLE}{_SURROGATES}]")
_UNDECODABLE = re.compile(f"[{_SURROGATES}]")
_ESCAPED_BYTE = re.compile(r"\\x([89a-f][0-9a-f])")
_ESCAPED_BYTE_OFFSET = 0xDC00  # surrogateescape keeps byte 0xe9 as U+DCE9


def printable(text: str) -> str:
    """`text` with control characters, direction and invisible characters and undecodable
    bytes shown as escapes (`\\x1b`, `\\u202e`, `\\u200b`, `\\U000e0041`, `\\xe9`), never
    dropped, so a model's reply, a command's output or a file's name cannot move the cursor,
    set the title or clipboard, open a link, or hide or reorder what the user reads.
    Newlines and tabs are kept. Each character is escaped on its own, so text shown in
    pieces (a streamed reply) cannot rebuild a sequence that a piece split."""
    return _UNPRINTABLE.sub(_escape_match, text)


def encodable(text: str) -> str:
    """`text` with its undecodable bytes (lone surrogates) shown as `\\xe9`, and so valid
    to encode as UTF-8; everything else is kept as it is."""
    if text.isascii():  # the common case, and no surrogate is ASCII
        return text
    return _UNDECODABLE.sub(_escape_match, text)


def name_from_shown(shown: str) -> str:
    """The file name `shown` stands for: each `\\x80`…`\\xff` (as `encodable` writes a byte
    that is not UTF-8) becomes that byte again. A name whose own text holds such an escape
    cannot be reached by this form; bash reaches it (and any name) with `$'…'` quoting."""
    if "\\x" not in shown:
        return shown
    return _ESCAPED_BYTE.sub(lambda match: chr(_ESCAPED_BYTE_OFFSET + int(match[1], 16)), shown)


def _escape_match(match: re.Match[str]) -> str:
    code = ord(match[0])
    if _ESCAPED_BYTE_OFFSET + 0x80 <= code <= _ESCAPED_BYTE_OFFSET + 0xFF:
        return f"\\x{code - _ESCAPED_BYTE_OFFSET:02x}"
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


_MAX_PLAIN_DEPTH = 64
_INT64 = range(-(2**63), 2**64)  # the integers orjson writes as numbers


def plain_json(value: object, depth: int = 0) -> object:
    """`value` as plain JSON types, for a writer whose first attempt orjson refused:
    strings made `encodable`, string keys, 64-bit integers, lists; anything else (or
    nested too deep) becomes its `str()`. One odd value must not stop a log or a result."""
    if isinstance(value, str):
        return encodable(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return value if value in _INT64 else str(value)
    if value is None or isinstance(value, bool | float):
        return value
    if depth < _MAX_PLAIN_DEPTH and isinstance(value, dict):
        return {encodable(str(key)): plain_json(item, depth + 1) for key, item in value.items()}
    if depth < _MAX_PLAIN_DEPTH and isinstance(value, list | tuple | set | frozenset):
        return [plain_json(item, depth + 1) for item in value]
    return encodable(str(value))
