"""The last turns a resumed REPL shows: a heading that counts the turns, each prompt on
one line, its tool calls counted on one line, and the first lines of its answer."""

from __future__ import annotations

import io

from rich.console import Console

from agent_tutorial.core.messages import (
    ChatMessage,
    assistant_message,
    tool_call,
    tool_message,
    user_message,
)
from agent_tutorial.recap import ANSWER_LINES, RECAP_TURNS, recap


def shown(history: list[ChatMessage], width: int = 60) -> list[str]:
    out = io.StringIO()
    Console(file=out, width=width, color_system=None).print(recap(history, width, markdown=False))
    return out.getvalue().splitlines()


def turn(number: int) -> list[ChatMessage]:
    return [user_message(f"question {number}"), assistant_message(f"answer {number}")]


def test_only_the_last_turns_are_shown_and_the_heading_counts_them_all() -> None:
    history = [message for number in range(1, 6) for message in turn(number)]

    lines = shown(history)

    assert RECAP_TURNS == 3
    assert lines == [
        "earlier in this session (the last 3 of 5 turns):",
        "› question 3",
        "answer 3",
        "› question 4",
        "answer 4",
        "› question 5",
        "answer 5",
    ]


def test_as_many_turns_as_shown_need_no_count() -> None:
    assert shown(turn(1) + turn(2) + turn(3))[0] == "earlier in this session:"


def test_tool_calls_are_counted_by_name_most_used_first_with_failures() -> None:
    calls = [tool_call(f"c{n}", name, "{}") for n, name in enumerate(["grep", "bash", "grep"])]
    history: list[ChatMessage] = [
        user_message("look around"),
        assistant_message("Looking.", tool_calls=calls),
        tool_message("a:1", "c0"),
        tool_message("Error [timeout]: killed", "c1"),
        tool_message("b:2", "c2"),
    ]

    lines = shown(history)

    assert lines[2] == "• 3 tool calls (1 failed): grep ×2, bash"
    assert lines[3] == "Looking."


def test_a_turn_without_an_answer_says_so() -> None:
    assert shown([user_message("hello?")])[1:] == ["› hello?", "(no answer)"]


def test_a_long_prompt_shows_its_first_line_cut_at_a_word_and_counts_the_rest() -> None:
    prompt = "please summarise the following log file for me\n" + "log line\n" * 799

    lines = shown([user_message(prompt), assistant_message("ok")], width=40)

    assert lines[1] == "› please summarise the… (+799 lines)"


def test_a_long_answer_shows_its_first_lines_and_counts_the_rest() -> None:
    answer = "\n".join(f"line {n}" for n in range(1, ANSWER_LINES + 3))

    lines = shown([user_message("go"), assistant_message(answer)])

    assert lines[2:] == [f"line {n}" for n in range(1, ANSWER_LINES + 1)] + ["… 2 more lines"]


def test_escape_sequences_in_a_saved_turn_are_shown_as_text() -> None:
    lines = shown([user_message("hi \x1b[2J"), assistant_message("\x1b]0;pwned\x07 done")])

    assert lines[1:] == ["› hi \\x1b[2J", "\\x1b]0;pwned\\x07 done"]
