"""How chapter 8 measures a history: the UTF-8 bytes of its transcript, one compact JSON line
per message in the wire shape. Every budget in the chapter is counted this way."""

from __future__ import annotations

import orjson

from agent_tutorial.core.messages import ChatMessage, History, to_wire
from agent_tutorial.core.text import encodable, plain_json

_JSON_OPTIONS = orjson.OPT_SORT_KEYS | orjson.OPT_APPEND_NEWLINE


def encode_utf8(text: str) -> bytes:
    """The UTF-8 bytes of `text`; a byte of a file name that is not UTF-8 (a lone
    surrogate) is written `\\xe9`, as everywhere else it is shown (`core.text`)."""
    try:
        return text.encode()
    except UnicodeEncodeError:
        return encodable(text).encode()


def serialize_message(message: ChatMessage) -> bytes:
    """One transcript line: the wire shape as compact sorted-keys JSON with non-ASCII kept,
    and a newline."""
    wire = to_wire(message)
    try:
        return orjson.dumps(wire, option=_JSON_OPTIONS)
    except orjson.JSONEncodeError:  # a lone surrogate: written `\xe9`, as encode_utf8 does
        return orjson.dumps(plain_json(wire), option=_JSON_OPTIONS)


def message_utf8_bytes(message: ChatMessage) -> int:
    return len(serialize_message(message))


def history_utf8_bytes(history: History) -> int:
    """The byte length of the history's transcript (`transcript_jsonl`)."""
    return sum(len(serialize_message(message)) for message in history)


def transcript_jsonl(history: History) -> bytes:
    return b"".join(serialize_message(message) for message in history)
