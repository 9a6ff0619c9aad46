"""Reading tool calls a model wrote as text (`adapters.text_calls`), and holding them back
while the text streams (`adapters.text_call_stream`). Pure tests; the end-to-end runs
against the loopback server are in test_text_tool_calls_cli.py."""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from typing import Literal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent_tutorial.adapters.text_call_stream import HeldCallText
from agent_tutorial.adapters.text_calls import (
    OPEN,
    CallsInText,
    Offered,
    TextCall,
    call_key,
    calls_from,
    calls_quoted_in,
    echoes_tool_list,
    offered_tools,
    partial_trigger_length,
    quotes_any,
    read_calls,
    trigger_positions,
)
from agent_tutorial.adapters.text_tool_calls import TextToolCalls
from agent_tutorial.core.messages import (
    assistant_message,
    tool_call,
    tool_message,
    user_message,
)
from agent_tutorial.core.model import ModelRequest, ToolSpec
from agent_tutorial.testing import ScriptedModel, text_reply

OFFERED = {
    "glob": frozenset({"pattern", "path"}),
    "read_file": frozenset({"path"}),
    "bash": frozenset({"command"}),
    "task": frozenset({"prompt"}),
}
GLOB = '{"name": "glob", "arguments": {"pattern": "*.py"}}'
READ = '{"name": "read_file", "arguments": {"path": "a.txt"}}'
GLOB_CALL = TextCall("glob", '{"pattern": "*.py"}')
READ_CALL = TextCall("read_file", '{"path": "a.txt"}')

# Every shape issue 16 names, as the whole reply.
SHAPES = {
    "bare": GLOB,
    "parameters": '{"name": "glob", "parameters": {"pattern": "*.py"}}',
    "json fence": f"```json\n{GLOB}\n```",
    "plain fence": f"```\n{GLOB}\n```",
    "tool_call tags": f"<tool_call>\n{GLOB}\n</tool_call>",
    "doubled braces": "{" + GLOB + "}",
    "functions.N: object": 'functions.glob:\n{"pattern": "*.py"}',
    "arguments as text": '{"name": "glob", "arguments": "{\\"pattern\\": \\"*.py\\"}"}',
    "tags without the closing tag": f"<tool_call>\n{GLOB}",
    "tags inside a fence": f"```\n<tool_call>\n{GLOB}\n</tool_call>\n```",
    "stray closing braces": "{" + GLOB + "}}",  # as the 1.5B model wrote a bash call
    "tools tags": f"<tools>\n{GLOB}\n</tools>",  # Qwen's template lists its tools in these
    "indented": f"```json\n{json.dumps(json.loads(GLOB), indent=2)}\n```",  # as small models do
}


@pytest.mark.parametrize("shape", SHAPES)
def test_each_shape_is_read_as_the_call(shape: str) -> None:
    assert read_calls(SHAPES[shape], OFFERED) == CallsInText("", (GLOB_CALL,))


@pytest.mark.parametrize("shape", SHAPES)
def test_each_shape_naming_a_tool_not_offered_stays_an_answer(shape: str) -> None:
    without_glob = {name: parameters for name, parameters in OFFERED.items() if name != "glob"}

    assert read_calls(SHAPES[shape], without_glob) is None


@pytest.mark.parametrize(
    "text",
    [
        f"{GLOB}\n{READ}",
        f"<tool_call>\n{GLOB}\n</tool_call>\n<tool_call>\n{READ}\n</tool_call>",
        f"```json\n{GLOB}\n{READ}\n```",
        'functions.glob:\n{"pattern": "*.py"}\nfunctions.read_file:\n{"path": "a.txt"}',
        f"{GLOB}\n```json\n{READ}\n```",
    ],
)
def test_several_calls_in_a_row_are_read_in_order(text: str) -> None:
    assert read_calls(text, OFFERED) == CallsInText("", (GLOB_CALL, READ_CALL))


def test_prose_before_the_calls_is_kept_as_the_reply_text() -> None:
    text = f"I will list the Python files.\n\n```json\n{GLOB}\n```\n"

    assert read_calls(text, OFFERED) == CallsInText("I will list the Python files.", (GLOB_CALL,))


@pytest.mark.parametrize(
    "after",
    [
        "\n\nThis will list every Python file; then count them.",
        "\nThe output shows 3 files: a.py, b.py, c.py.",  # the result it imagines
        "\n```python\nprint('an example')\n```",
        "\n{",  # an unfinished object after the call
        "x",  # one character is enough
    ],
)
@pytest.mark.parametrize(
    "block", [f"```json\n{GLOB}\n```", f"```\n{GLOB}\n```", f"<tool_call>\n{GLOB}\n</tool_call>"]
)
def test_text_after_a_fenced_or_tagged_call_makes_the_reply_an_answer(
    block: str, after: str
) -> None:
    text = f"To count them, I'd list them:\n\n{block}{after}"

    assert read_calls(text, OFFERED) is None


@pytest.mark.parametrize("after", ["", "\n", " \n\t\n"])
@pytest.mark.parametrize(
    "block", [f"```json\n{GLOB}\n```", f"```\n{GLOB}\n```", f"<tool_call>\n{GLOB}\n</tool_call>"]
)
def test_a_fenced_or_tagged_call_followed_only_by_whitespace_is_a_call(
    block: str, after: str
) -> None:
    text = f"To count them, I'll list them:\n\n{block}{after}"

    assert read_calls(text, OFFERED) == CallsInText("To count them, I'll list them:", (GLOB_CALL,))


def test_text_after_calls_in_a_row_makes_the_reply_an_answer() -> None:
    text = f"```json\n{GLOB}\n```\n<tool_call>\n{READ}\n</tool_call>\nThat shows both."

    assert read_calls(text, OFFERED) is None


@pytest.mark.parametrize(
    "text",
    [
        f"{GLOB}\nThat lists the Python files.",  # an unfenced call must end the reply
        f"Call {GLOB} to list them, then read each.",
        f"{GLOB} {{",  # an unfinished second block
        'functions.glob: {"pattern": "*.py"} and then read them',
    ],
)
def test_an_unfenced_call_that_is_not_the_last_thing_in_the_reply_stays_an_answer(
    text: str,
) -> None:
    assert read_calls(text, OFFERED) is None


@pytest.mark.parametrize(
    ("text", "call"),
    [
        ('{"name": "task", "prompt": "fix it"}', TextCall("task", '{"prompt": "fix it"}')),
        ('```json\n{"name": "glob", "pattern": "*.py"}\n```', GLOB_CALL),
    ],
)
def test_arguments_beside_the_name_are_read_when_each_is_a_parameter(
    text: str, call: TextCall
) -> None:
    assert read_calls(text, OFFERED) == CallsInText("", (call,))


@pytest.mark.parametrize(
    "text",
    [
        '{"name": "glob", "pattern": "*.py", "description": "lists files"}',  # not a parameter
        '{"name": "task", "description": "runs a helper"}',
        '{"name": "glob"}',  # no arguments at all
    ],
)
def test_keys_beside_the_name_that_are_not_all_parameters_stay_an_answer(text: str) -> None:
    assert read_calls(text, OFFERED) is None


def test_explicit_arguments_are_read_whatever_they_hold() -> None:
    """The tool checks them and the model reads its error: an unknown argument is a call
    the tool refuses, not an answer to print."""
    text = '{"name": "glob", "arguments": {"pattern": "*.py", "colour": "red"}}'

    (call,) = read_calls(text, OFFERED).calls  # type: ignore[union-attr]

    assert json.loads(call.arguments) == {"pattern": "*.py", "colour": "red"}


@pytest.mark.parametrize(
    "text",
    [
        "The answer is 42.",
        'Reply in JSON, for example {"answer": 42}.',
        '```json\n{"name": "glob", "description": "lists files"}\n```',  # no arguments
        '{"name": "glob", "arguments": ["*.py"]}',  # arguments not an object
        '{"name": 7, "arguments": {}}',
        '{"name": "glob", "arguments": "not json"}',
        "functions.glob: lists files",
        "```python\nprint('hi')\n```",
        "<tool_call>\nnot json\n</tool_call>",
        "{" * 5000 + "}" * 5000,  # deeper than the decoder goes
        "",
    ],
)
def test_text_that_only_looks_like_json_stays_an_answer(text: str) -> None:
    assert read_calls(text, OFFERED) is None


def test_a_bare_functions_marker_names_the_tool_to_ask_for() -> None:
    assert read_calls("functions.glob:", OFFERED) == CallsInText("", named_tool="glob")
    assert read_calls("Let me look.\nfunctions.glob:\n", OFFERED) == CallsInText(
        "Let me look.", named_tool="glob"
    )


@pytest.mark.parametrize("text", ["functions.write_file:", "functions.:", "functions.glob"])
def test_a_bare_marker_for_a_tool_not_offered_stays_an_answer(text: str) -> None:
    assert read_calls(text, OFFERED) is None


def test_no_tools_offered_means_no_calls() -> None:
    assert read_calls(GLOB, {}) is None


GLOB_DEFINITION = '{"type": "function", "function": {"name": "glob", "description": "Find'


@pytest.mark.parametrize(
    "text",
    [
        f"<tools>\n{GLOB_DEFINITION}",  # as the 1.5B model began one reply, cut at its cap
        f"  {GLOB_DEFINITION} files by name",  # untagged, after spaces
        '<tools> { "type" : "function" , "function" : { "name" : "glob" } }\n</tools>',
    ],
)
def test_a_reply_opening_with_an_offered_tools_definition_echoes_the_tool_list(
    text: str,
) -> None:
    assert echoes_tool_list(text, OFFERED)
    assert read_calls(text, OFFERED) is None  # a definition is never a call


@pytest.mark.parametrize(
    "text",
    [
        GLOB_DEFINITION.replace("glob", "write_file"),  # not a tool that was offered
        f"Here is the tool I would use: {GLOB_DEFINITION}",  # prose first: an answer
        GLOB,  # a call, not a definition
        '{"type": "object", "function": {"name": "glob"}}',
        "<tools>\n</tools>",
    ],
)
def test_other_replies_do_not_echo_the_tool_list(text: str) -> None:
    assert not echoes_tool_list(text, OFFERED)


def test_a_tool_list_is_looked_for_where_the_stream_says() -> None:
    text = f"Some prose. {GLOB_DEFINITION}"

    assert echoes_tool_list(text, OFFERED, start=text.index("{"))
    assert not echoes_tool_list(text, OFFERED)


def test_raw_newlines_inside_a_string_are_read_as_a_model_means_them() -> None:
    text = '{"name": "bash", "arguments": {"command": "echo a\nb"}}'

    (call,) = read_calls(text, OFFERED).calls  # type: ignore[union-attr]

    assert json.loads(call.arguments) == {"command": "echo a\nb"}


# --- streaming -------------------------------------------------------------------------------


def streamed(text: str, cuts: list[int], offered: Offered = OFFERED) -> tuple[str, str]:
    """What a renderer is shown of `text` sent in pieces cut at `cuts`: while it streams, and
    in all once the reply's fate is known (`read_calls` decides it, as the client does)."""
    shown: list[str] = []
    held = HeldCallText(shown.append, offered)
    bounds = [0, *sorted(set(cuts)), len(text)]
    for start, end in itertools.pairwise(bounds):
        held(text[start:end])
    during = "".join(shown)
    held.finish(were_calls=read_calls(text, offered) is not None)
    return during, "".join(shown)


@pytest.mark.parametrize("shape", SHAPES)
def test_call_text_is_never_shown_whatever_the_pieces(shape: str) -> None:
    text = "Let me check.\n" + SHAPES[shape]
    for cut in range(len(text)):
        assert streamed(text, [cut]) == ("Let me check.\n", "Let me check.\n")


@given(st.lists(st.integers(min_value=0, max_value=120), max_size=12))
def test_an_answer_is_shown_whole_and_in_order_whatever_the_pieces(cuts: list[int]) -> None:
    text = 'Use {x} in a format string, `glob` to list files, and <b>bold</b>: {"a": 1}.'

    during, after = streamed(text, [cut % (len(text) + 1) for cut in cuts])

    assert after == text
    assert text.startswith(during)


@given(st.lists(st.integers(min_value=0, max_value=200), max_size=12))
def test_prose_before_calls_is_shown_and_the_calls_are_not(cuts: list[int]) -> None:
    text = f"I'll read both.\n<tool_call>\n{GLOB}\n</tool_call>\n<tool_call>\n{READ}\n</tool_call>"

    during, after = streamed(text, [cut % (len(text) + 1) for cut in cuts])

    assert (during, after) == ("I'll read both.\n", "I'll read both.\n")


@given(st.lists(st.integers(min_value=0, max_value=200), max_size=12))
def test_a_fenced_call_with_prose_after_it_is_shown_whole_as_the_answer(cuts: list[int]) -> None:
    text = f"The README says:\n```json\n{GLOB}\n```\nThis lists the files: a.py, b.py."

    during, after = streamed(text, [cut % (len(text) + 1) for cut in cuts])

    assert after == text
    assert text.startswith(during)


ECHO = f'<tools>\n{GLOB_DEFINITION} files by name.", "parameters": {{"type": "object"}}}}}}\n'


@given(st.lists(st.integers(min_value=0, max_value=150), max_size=12))
def test_a_repeated_tool_list_is_held_while_it_streams(cuts: list[int]) -> None:
    """`auto` asks again instead (the reply is then dropped); elsewhere it is shown at the
    end, whole."""
    shown: list[str] = []
    held = HeldCallText(shown.append, OFFERED)
    bounds = [0, *sorted({cut % (len(ECHO) + 1) for cut in cuts}), len(ECHO)]
    for start, end in itertools.pairwise(bounds):
        held(ECHO[start:end])

    assert shown == []
    held.finish(were_calls=False)
    assert "".join(shown) == ECHO


def test_prose_with_a_brace_is_let_through_before_the_reply_ends() -> None:
    shown: list[str] = []
    held = HeldCallText(shown.append, OFFERED)

    for piece in ["Use {x", "} here, ", "then more text"]:
        held(piece)

    assert "".join(shown) == "Use {x} here, then more text"


def test_a_long_object_that_is_not_a_call_is_shown_once_it_closes() -> None:
    shown: list[str] = []
    held = HeldCallText(shown.append, OFFERED)
    value = "x" * 200

    held('Config: {"key": "')
    held(value)
    assert "".join(shown) == "Config: "
    held('"}\nDone.')

    assert "".join(shown) == f'Config: {{"key": "{value}"}}\nDone.'


# --- the pieces the streaming holder relies on ---------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "",
        '{"name": "gl',  # a string still being written
        '{"name": "glob", "arguments": {"n": tr',  # a literal
        '{"name": "glob", "arguments": {"n": -',  # a number
        '{"name": "glob", "arguments": {"n": 1',
        "functio",
        "functions.gl",
        "```",
        "```js",
        "```json\n",
        "<tool_",
        "<tool_call>\n",
        '<tool_call>\n{"name": "glob"',
        f"{GLOB}\n<tool_c",
    ],
)
def test_a_block_still_being_written_may_become_a_call(text: str) -> None:
    assert calls_from(text, 0, OFFERED) is OPEN


@pytest.mark.parametrize(
    "text",
    [
        '{"name": x',
        "{x}",
        '{"a": 1}',  # an object, not a call
        "functionsX",
        "functions.x y",
        "```py",
        "```json\n```",  # an empty fence
        '```json\n{"a": 1}\n```',
        "<tool_call>\n</tool_call>",
        "<toolbox>",
    ],
)
def test_a_block_that_cannot_become_a_call_is_let_go(text: str) -> None:
    assert calls_from(text, 0, OFFERED) is None


def test_calls_then_a_bare_marker_are_not_one_run_of_calls() -> None:
    assert calls_from(f"{GLOB}\nfunctions.read_file:", 0, OFFERED) is None


def test_two_objects_in_one_tag_are_both_read() -> None:
    text = f"<tool_call>\n{GLOB}\n{READ}\n</tool_call>"

    assert read_calls(text, OFFERED) == CallsInText("", (GLOB_CALL, READ_CALL))


def test_a_call_in_doubled_braces_may_be_followed_at_once_by_another() -> None:
    assert read_calls("{" + GLOB + "}" + READ, OFFERED) == CallsInText("", (GLOB_CALL, READ_CALL))


def test_arguments_keep_their_characters() -> None:
    (call,) = read_calls('{"name": "bash", "arguments": {"command": "echo é"}}', OFFERED).calls  # type: ignore[union-attr]

    assert call.arguments == '{"command": "echo é"}'


def test_offered_tools_names_each_tools_parameters() -> None:
    tools = [
        ToolSpec("task", "runs a helper", {"type": "object", "properties": {"prompt": {}}}),
        ToolSpec("todo_clear", "clears the plan", {"type": "object"}),
    ]

    assert offered_tools(tools) == {"task": frozenset({"prompt"}), "todo_clear": frozenset()}


def test_trigger_positions_start_where_asked() -> None:
    assert trigger_positions('{a} ```b {"c"', 3) == [4, 9]


@pytest.mark.parametrize(
    ("text", "start", "length"), [("abc<tool_c", 0, 7), ("x``", 2, 1), ("x``", 0, 2), ("ab", 0, 0)]
)
def test_the_partial_trigger_is_the_longest_end_that_may_open_a_block(
    text: str, start: int, length: int
) -> None:
    assert partial_trigger_length(text, start) == length


# A call shown in what a tool returned (a README's example) is a quote when a reply repeats it.
MAKE_TEST_JSON = '{"name": "bash", "arguments": {"command": "make test"}}'
README = f"""# Project

Run the tests the way the agent would:

```json
{MAKE_TEST_JSON}
```

Then read <tool_call>{READ}</tool_call> for the results, or call {GLOB} yourself.
"""
MAKE_TEST = TextCall("bash", '{"command": "make test"}')


def test_every_call_a_text_shows_is_found_wherever_it_stands() -> None:
    assert calls_quoted_in(README, OFFERED) == {
        call_key(MAKE_TEST),
        call_key(READ_CALL),
        call_key(GLOB_CALL),
    }


@pytest.mark.parametrize(
    "text",
    [
        "no call here, only {braces} and ```fences```",
        '{"name": "delete_everything", "arguments": {}}',  # not an offered tool
        "functions.glob:",  # a bare marker names a tool but calls nothing
        "",
    ],
)
def test_a_text_without_a_call_quotes_none(text: str) -> None:
    assert calls_quoted_in(text, OFFERED) == frozenset()


def test_a_call_inside_another_calls_arguments_is_found_too() -> None:
    text = f'{{"name": "task", "arguments": {{"prompt": "run it", "then": {GLOB}}}}}'

    assert calls_quoted_in(text, OFFERED) == {
        call_key(TextCall("task", json.dumps({"prompt": "run it", "then": json.loads(GLOB)}))),
        call_key(GLOB_CALL),
    }


def test_the_same_call_has_the_same_key_whatever_its_spacing_and_key_order() -> None:
    spaced = TextCall("glob", '{ "path" : ".",  "pattern": "*.py" }')
    ordered = TextCall("glob", '{"pattern": "*.py", "path": "."}')

    assert call_key(spaced) == call_key(ordered)
    assert call_key(ordered) != call_key(TextCall("glob", '{"pattern": "*.py"}'))
    assert call_key(ordered) != call_key(TextCall("grep", '{"pattern": "*.py", "path": "."}'))


def test_calls_quote_a_result_when_any_one_of_them_was_shown_in_it() -> None:
    quoted = {call_key(MAKE_TEST)}

    assert quotes_any(CallsInText("", (GLOB_CALL, MAKE_TEST)), quoted)
    assert not quotes_any(CallsInText("", (GLOB_CALL, READ_CALL)), quoted)
    assert not quotes_any(CallsInText("", named_tool="bash"), quoted)


TOOLS = tuple(
    ToolSpec(
        name, f"the {name} tool", {"type": "object", "properties": {key: {} for key in params}}
    )
    for name, params in OFFERED.items()
)
MODES: list[Literal["auto", "text"]] = ["auto", "text"]


def request_after_reading(
    readme: str, on_text: Callable[[str], None] | None = None
) -> ModelRequest:
    """The request after the model read a README."""
    read = tool_call("call_1", "read_file", '{"path": "README.md"}')
    messages = (
        user_message("How do I run the tests?"),
        assistant_message(None, (read,)),
        tool_message(readme, "call_1"),
    )
    return ModelRequest(messages, TOOLS, on_text=on_text)


@pytest.mark.parametrize("mode", MODES)
def test_a_reply_repeating_a_call_a_tool_result_showed_is_the_answer(
    mode: Literal["auto", "text"],
) -> None:
    answer = f"The README says to run:\n```json\n{MAKE_TEST_JSON}\n```"
    shown: list[str] = []
    reading = TextToolCalls(ScriptedModel([text_reply(answer)]), mode)

    reply = reading.complete(request_after_reading(README, shown.append))

    assert (reply.message.content, reply.message.tool_calls) == (answer, ())
    assert "".join(shown) == answer
    assert reading.describes_tools == (mode == "text")  # a quote does not switch auto


@pytest.mark.parametrize("mode", MODES)
def test_a_call_no_tool_result_showed_still_runs_after_a_read(
    mode: Literal["auto", "text"],
) -> None:
    written = f"Now the listing.\n<tool_call>\n{GLOB}\n</tool_call>\n"
    reading = TextToolCalls(ScriptedModel([text_reply(written)]), mode)

    reply = reading.complete(request_after_reading(README.replace(GLOB, "glob")))

    (call,) = reply.message.tool_calls
    assert (call.name, json.loads(call.arguments)) == ("glob", {"pattern": "*.py"})
    assert reply.message.content == "Now the listing."


def test_a_quoted_call_is_remembered_once_its_result_has_left_the_request() -> None:
    """Compaction may drop the result from later requests; the session still read it."""
    model = ScriptedModel([text_reply("Reading it."), text_reply(f"```json\n{GLOB}\n```")])
    reading = TextToolCalls(model, "text")
    reading.complete(request_after_reading(README))

    reply = reading.complete(ModelRequest((user_message("List the files."),), TOOLS))

    assert reply.message.tool_calls == ()
