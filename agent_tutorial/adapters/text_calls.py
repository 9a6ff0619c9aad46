"""Tool calls a model wrote as text, read back as calls.

Small and local models often answer a request that offers tools with the call written in
the text (llama.cpp's server then returns it as `content`, not `tool_calls`):

    {"name": "glob", "arguments": {"pattern": "*.py"}}           a bare object ("parameters" too)
    ```json {"name": ...} ```                                     the same, fenced (``` alone too)
    <tool_call> {"name": ...} </tool_call>                        Qwen's and Hermes' tags
    <tools> {"name": ...} </tools>                                the tag Qwen lists tools in
    {{"name": ...}}                                               doubled outer braces
    {"name": ..., "arguments": {...}}}}                           stray closing braces after it
    functions.glob: {"pattern": "*.py"}                           llama-cpp-python's format
    functions.glob:                                               ... with nothing after it

A reply is calls when its text is one or more of these in a row, alone or after prose, to
tools the request offered, with nothing but whitespace after them (the text protocol asks
for exactly that). Text after the calls makes the whole reply an answer: a model that quotes
a call (a README's fenced example) to explain it goes on explaining, and that answer is
what the user asked for. The arguments may also stand beside the name
(`{"name": "task", "prompt": …}`) when every one of them is a parameter of that tool. A
text that mentions JSON, shows an object that is not a call, or names a tool that was not
offered stays an answer. `calls_quoted_in` finds the calls a text shows anywhere in it (a
file's or a command's output), so a reply that repeats one of them can be told apart from
a call of the model's own.
Pure: no I/O, no SDK.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Literal, TypeAlias

from agent_tutorial.core.model import ToolSpec

Offered: TypeAlias = Mapping[str, Collection[str]]
"""The tools a request offered: each one's name and the names of its parameters."""

CallKey: TypeAlias = tuple[str, str]
"""A call's name and its arguments' canonical JSON: the same call whatever its shape,
spacing or key order."""


ToolCallMode: TypeAlias = Literal["auto", "native", "text"]
"""`auto`: native tools, and calls written as text are read too; `native`: never read from
text; `text`: no tools on the wire, the system prompt describes them and the format."""


@dataclass(frozen=True, slots=True)
class TextCall:
    name: str
    arguments: str
    """A JSON object's text, as a native call carries it."""


@dataclass(frozen=True, slots=True)
class CallsInText:
    """What a reply's text holds: the prose before the calls, then the calls, or the one
    tool a bare `functions.NAME:` names (its arguments never came: ask again for it)."""

    prose: str
    calls: tuple[TextCall, ...] = ()
    named_tool: str | None = None


@dataclass(frozen=True, slots=True)
class _Block:
    """One call block read from the text, and where it ends."""

    calls: tuple[TextCall, ...]
    end: int
    named_tool: str | None = None


class _Open:
    """The text ends inside a block that may still become a call (while streaming)."""


OPEN = _Open()
_Read: TypeAlias = "_Block | _Open | None"

_DECODER = json.JSONDecoder(strict=False)  # models write raw newlines inside strings
_TAGS = {"<tool_call>": "</tool_call>", "<tools>": "</tools>"}
"""Opening and closing tags around calls. Qwen's chat template lists the tools inside
`<tools>` and asks for calls inside `<tool_call>`; the 1.5B model sometimes mixes them up."""
_TRIGGER = re.compile(r"\{|```|<tool_call>|<tools>|functions\.")
_TRIGGER_WORDS = ("```", *_TAGS, "functions.")
_LONGEST_TRIGGER_WORD = max(map(len, _TRIGGER_WORDS))
_FENCE_OPEN = re.compile(r"```(?:json|tool_call)?[ \t]*\n?", re.IGNORECASE)
_FUNCTIONS = re.compile(r"functions\.([A-Za-z0-9_\-]+):")
_NAME_SO_FAR = re.compile(r"functions\.[A-Za-z0-9_\-]*")
_FENCE_LANGUAGES = ("json", "tool_call")
_SPACE = re.compile(r"\s*")
_OBJECT_OPENING = re.compile(r"\{\s*")
# Closing braces a model stutters after a call, copying the template's doubled `}}`:
# `{{"name": "bash", "arguments": {…}}}}` has one more than it opened.
_STRAY_CLOSERS = re.compile(r"\}*")
_FENCE = "```"
# What may follow where the decoder stopped for lack of text: a number, a literal or a
# \u escape still being written.
_UNFINISHED_VALUE = re.compile(r"-?\d*\.?\d*(?:[eE][-+]?\d*)?|u[0-9a-fA-F]{0,3}")
_LITERALS = ("true", "false", "null")


def read_calls(text: str, offered: Offered) -> CallsInText | None:
    """The calls `text` makes, or None when it is an answer. A call to a tool that is not
    in `offered` makes the text an answer."""
    if not offered:
        return None
    for start in trigger_positions(text, 0):
        found = calls_from(text, start, offered)
        if isinstance(found, CallsInText):
            return found
    return None


_TOOL_DEFINITION = re.compile(
    r'\s*(?:<tools>\s*)?\{\s*"type"\s*:\s*"function"\s*,'
    r'\s*"function"\s*:\s*\{\s*"name"\s*:\s*"([^"]+)"'
)


def echoes_tool_list(text: str, offered: Offered, start: int = 0) -> bool:
    """Whether `text` opens (at `start`) with an offered tool's definition as Qwen's chat
    template lists them (`<tools>` then `{"type": "function", "function": {"name": …`): the
    model repeated the list it was shown instead of calling a tool or answering. The
    opening is enough, as such a reply usually runs to its output cap."""
    match = _TOOL_DEFINITION.match(text, start)
    return match is not None and match.group(1) in offered


def offered_tools(tools: Iterable[ToolSpec]) -> Offered:
    """Each tool's name and the names of its parameters, as `read_calls` takes them."""
    return {tool.name: frozenset(tool.parameters.get("properties", ())) for tool in tools}


def trigger_positions(text: str, start: int) -> list[int]:
    """Where a call block could begin in `text`, from `start` on."""
    return [match.start() for match in _TRIGGER.finditer(text, start)]


def calls_from(text: str, start: int, offered: Offered) -> CallsInText | _Open | None:
    """Whether `text[start:]` is a run of call blocks to its end: the calls, `OPEN` when
    the text ends inside a block that may still become one (the caller is streaming), or
    None when it cannot (text after a block that is not another block is prose)."""
    position, calls = start, list[TextCall]()
    while True:
        position = _skip_space(text, position)
        if position == len(text):
            return CallsInText(text[:start].rstrip(), tuple(calls)) if calls else OPEN
        block = _block(text, position, offered)
        if not isinstance(block, _Block):
            return block
        calls += block.calls
        if block.named_tool is not None:  # the text ends there: its arguments never came
            if calls:  # calls, then a bare marker: neither a run of calls nor one to ask for
                return None
            return CallsInText(text[:start].rstrip(), named_tool=block.named_tool)
        position = block.end


def calls_quoted_in(text: str, offered: Offered) -> frozenset[CallKey]:
    """Every call block `text` shows, wherever it stands in it (prose around it or not, or
    inside another call's arguments), as `call_key`s: what a tool result holds, which a
    reply repeating it only quotes."""
    blocks = (_block(text, start, offered) for start in trigger_positions(text, 0))
    return frozenset(
        call_key(call) for block in blocks if isinstance(block, _Block) for call in block.calls
    )


def call_key(call: TextCall) -> CallKey:
    return call.name, json.dumps(json.loads(call.arguments), sort_keys=True)


def quotes_any(found: CallsInText, quoted: Collection[CallKey]) -> bool:
    """Whether one of the calls `found` is one a tool result showed: then the reply quotes
    what it read (or was made to repeat it) and is an answer, never a call."""
    return any(call_key(call) in quoted for call in found.calls)


def partial_trigger_length(text: str, start: int) -> int:
    """The length of the longest end of `text` (after `start`) that may be the beginning of
    a block's opening, such as "``" or "<tool_c", which the next streamed piece may
    complete."""
    for length in range(min(_LONGEST_TRIGGER_WORD, len(text) - start), 0, -1):
        if any(word.startswith(text[-length:]) for word in _TRIGGER_WORDS):
            return length
    return 0


def _could_become(word: str, text: str, position: int) -> bool:
    """Whether the rest of `text` from `position` is a start of `word` (all of it so far),
    without copying a long rest only to find it longer than the word."""
    return len(text) - position <= len(word) and word.startswith(text[position:])


def _block(text: str, position: int, offered: Offered) -> _Read:
    if (tag := _opening_tag(text, position)) is not None:
        return _tagged(text, position + len(tag), _TAGS[tag], offered)
    if text.startswith(_FENCE, position):
        return _fenced(text, position, offered)
    if text.startswith("functions.", position) or _could_become("functions.", text, position):
        return _functions(text, position, offered)
    if text.startswith("{", position):
        return _call_object(text, position, offered)
    if any(_could_become(word, text, position) for word in (*_TAGS, _FENCE)):
        return OPEN
    return None


def _opening_tag(text: str, position: int) -> str | None:
    return next((tag for tag in _TAGS if text.startswith(tag, position)), None)


def _tagged(text: str, position: int, closing_tag: str, offered: Offered) -> _Read:
    """`<tool_call>` one or more call objects `</tool_call>`; the closing tag may be
    missing at the very end (some models stop before it)."""
    inner = _objects(text, position, offered)
    if not isinstance(inner, _Block):
        return inner
    end = _skip_space(text, inner.end)
    if text.startswith(closing_tag, end):
        return _Block(inner.calls, end + len(closing_tag))
    if _could_become(closing_tag, text, end):  # nothing after it, or part of the tag so far
        return OPEN if end < len(text) else _Block(inner.calls, end)
    return None


def _fenced(text: str, position: int, offered: Offered) -> _Read:
    """A ``` fence (``json`` or no language) around call objects or tagged calls."""
    opening = _FENCE_OPEN.match(text, position)
    assert opening is not None  # `_FENCE` alone matches
    language_so_far = text[position + len(_FENCE) :].lower()
    if opening.end() == len(text) or any(
        language.startswith(language_so_far) for language in _FENCE_LANGUAGES
    ):
        return OPEN
    calls: list[TextCall] = []
    inner = opening.end()
    while True:
        inner = _skip_space(text, inner)
        if text.startswith(_FENCE, inner):
            return _Block(tuple(calls), inner + len(_FENCE)) if calls else None
        if _could_become(_FENCE, text, inner):
            return OPEN
        tag = _opening_tag(text, inner)
        block = (
            _call_object(text, inner, offered)
            if tag is None
            else _tagged(text, inner + len(tag), _TAGS[tag], offered)
        )
        if not isinstance(block, _Block):
            may_be_a_tag = any(_could_become(tag, text, inner) for tag in _TAGS)
            return OPEN if block is OPEN or may_be_a_tag else None
        calls += block.calls
        inner = block.end


def _objects(text: str, position: int, offered: Offered) -> _Read:
    """One or more call objects in a row."""
    calls: list[TextCall] = []
    while True:
        position = _skip_space(text, position)
        if position == len(text):
            return _Block(tuple(calls), position) if calls else OPEN
        if not text.startswith("{", position):
            return _Block(tuple(calls), position) if calls else None
        block = _call_object(text, position, offered)
        if not isinstance(block, _Block):
            return block
        calls += block.calls
        position = block.end


def _functions(text: str, position: int, offered: Offered) -> _Read:
    """`functions.NAME:` followed by the arguments object, or by nothing at all."""
    match = _FUNCTIONS.match(text, position)
    if match is None:  # still being written (`functions.gl`), or not this shape at all
        rest = text[position:]
        return OPEN if "functions.".startswith(rest) or _NAME_SO_FAR.fullmatch(rest) else None
    name = match.group(1)
    if name not in offered:
        return None
    after = _skip_space(text, match.end())
    if after == len(text):
        return _Block((), after, named_tool=name)
    if not text.startswith("{", after):
        return None
    decoded = _decode_object(text, after)
    if not isinstance(decoded, tuple):
        return decoded
    arguments, end = decoded
    return _Block((TextCall(name, _json_text(arguments)),), end)


def _call_object(text: str, position: int, offered: Offered) -> _Read:
    """`{"name": …, "arguments": {…}}`, or the same inside doubled braces."""
    doubled = text.startswith("{{", position)
    decoded = _decode_object(text, position + 1 if doubled else position)
    if not isinstance(decoded, tuple):
        return decoded
    value, end = decoded
    if doubled:
        end = _skip_space(text, end)
        if end == len(text):
            return OPEN
        if not text.startswith("}", end):
            return None
        end += 1
    call = _as_call(value, offered)
    return None if call is None else _Block((call,), _skip(_STRAY_CLOSERS, text, end))


def _decode_object(text: str, position: int) -> tuple[dict[str, object], int] | _Open | None:
    # An object's first key opens with a quote. Most braces in prose and code are followed
    # by something else, and each failed decode costs the decoder a count of every line
    # before it: tried at each brace of 250 KB of code, that took a second.
    first = _skip(_OBJECT_OPENING, text, position)
    if first < len(text) and text[first] not in '"}':
        return None
    try:
        value, end = _DECODER.raw_decode(text, position)
    except json.JSONDecodeError as error:
        return OPEN if _ran_out(error, text) else None
    except RecursionError:  # nested deeper than the decoder goes: no call looks like that
        return None
    return (value, end) if isinstance(value, dict) else None


def _ran_out(error: json.JSONDecodeError, text: str) -> bool:
    """Whether the decoder stopped because the text ended, not because it is not JSON.
    Without copying the rest of the text: a long answer full of code fails to decode at
    every brace, and a copy each time made reading 250 KB of it take a second."""
    return (
        error.msg.startswith("Unterminated string")
        or _UNFINISHED_VALUE.fullmatch(text, error.pos) is not None
        or any(_could_become(word, text, error.pos) for word in _LITERALS)
    )


def _as_call(value: dict[str, object], offered: Offered) -> TextCall | None:
    name = value.get("name")
    if not isinstance(name, str) or name not in offered:
        return None
    arguments = value.get("arguments", value.get("parameters"))
    if arguments is None:
        arguments = _beside_the_name(value, offered[name])
    if isinstance(arguments, str):  # some models send the arguments' text, as the wire does
        try:
            arguments = json.loads(arguments)
        except (json.JSONDecodeError, RecursionError):
            return None
    if not isinstance(arguments, dict):
        return None
    return TextCall(name, _json_text(arguments))


def _beside_the_name(value: dict[str, object], parameters: Collection[str]) -> object:
    """`{"name": "task", "prompt": …}`: the arguments written beside the name, when every
    other key is a parameter of that tool (`{"name": "glob", "description": …}` describes
    a tool, it does not call it)."""
    beside = {key: argument for key, argument in value.items() if key != "name"}
    return beside if beside and set(beside) <= set(parameters) else None


def _json_text(arguments: dict[str, object]) -> str:
    return json.dumps(arguments, ensure_ascii=False)


def _skip_space(text: str, position: int) -> int:
    return _skip(_SPACE, text, position)


def _skip(what: re.Pattern[str], text: str, position: int) -> int:
    match = what.match(text, position)
    return position if match is None else match.end()
