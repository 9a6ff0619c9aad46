"""The request's wire shape, as a pure function: one leading system message, reminders as
`<system-reminder>` user turns, no null content, and the output-cap clamp."""

from __future__ import annotations

import pytest

from agent_tutorial.adapters.chat_wire import WireOptions, system_reminder, wire_messages
from agent_tutorial.config import Settings
from agent_tutorial.core.messages import (
    ChatMessage,
    assistant_message,
    system_message,
    to_wire,
    tool_call,
    tool_message,
    user_message,
)
from agent_tutorial.core.model import clamp_output_tokens

CALL = tool_call("call_1", "bash", '{"command": "ls"}')


def test_the_system_prompt_and_a_summary_after_it_become_one_system_message() -> None:
    wire = wire_messages(
        [
            system_message("You are an agent."),
            system_message('{"kind": "summary"}'),
            user_message("go"),
        ]
    )

    assert wire == [
        {"role": "system", "content": 'You are an agent.\n\n{"kind": "summary"}'},
        {"role": "user", "content": "go"},
    ]


def test_a_later_system_message_travels_as_a_reminder_in_place() -> None:
    wire = wire_messages(
        [
            system_message("prompt"),
            user_message("first"),
            system_message("[Compacted: 4 message groups omitted]"),
            user_message("second"),
            system_message("Reminder: plan"),
        ]
    )

    assert [message["role"] for message in wire] == ["system", "user", "user", "user", "user"]
    assert wire[2]["content"] == system_reminder("[Compacted: 4 message groups omitted]")
    assert wire[-1]["content"] == "<system-reminder>\nReminder: plan\n</system-reminder>"


def test_a_reminder_right_after_a_summary_does_not_change_the_system_message() -> None:
    """The request after a summary can be [prompt, summary, reminder]; the next request
    lacks the reminder, and must still start with the same system message."""
    with_reminder = wire_messages(
        [system_message("prompt"), system_message("summary"), system_message("Reminder: plan")]
    )
    without = wire_messages([system_message("prompt"), system_message("summary")])

    assert with_reminder[0] == without[0] == {"role": "system", "content": "prompt\n\nsummary"}
    assert with_reminder[1] == {"role": "user", "content": system_reminder("Reminder: plan")}


def test_an_assistant_tool_call_without_text_has_empty_content_not_null() -> None:
    message = assistant_message(None, [CALL])

    (wire,) = wire_messages([message])

    assert wire == {**to_wire(message), "content": ""}
    assert to_wire(message)["content"] is None  # the canonical shape, chapter 8 counts it


def test_other_messages_keep_their_canonical_wire_shape() -> None:
    history: list[ChatMessage] = [
        user_message("hi"),
        assistant_message("text", [CALL]),
        tool_message("a.py", "call_1"),
    ]

    assert wire_messages(history) == [to_wire(message) for message in history]


def test_merging_joins_a_reminder_to_the_user_turn_before_it() -> None:
    wire = wire_messages(
        [system_message("prompt"), user_message("do it"), system_message("Reminder: plan")],
        merge_reminders=True,
    )

    assert wire == [
        {"role": "system", "content": "prompt"},
        {"role": "user", "content": "do it\n\n" + system_reminder("Reminder: plan")},
    ]


def test_merging_joins_a_reminder_with_no_user_turn_before_it_to_the_one_after() -> None:
    wire = wire_messages(
        [
            system_message("prompt"),
            assistant_message("done"),
            system_message("[Compacted]"),
            user_message("next"),
        ],
        merge_reminders=True,
    )

    assert [message["role"] for message in wire] == ["system", "assistant", "user"]
    assert wire[2]["content"] == system_reminder("[Compacted]") + "\n\nnext"


def test_merging_joins_a_prompt_left_without_a_reply_to_the_next_one() -> None:
    # A failed request leaves the user's prompt unanswered; a template that demands
    # alternation would refuse every later request if the two stayed apart.
    history = [user_message("one"), user_message("two")]

    assert wire_messages(history, merge_reminders=True) == [
        {"role": "user", "content": "one\n\ntwo"}
    ]


def test_merging_keeps_each_tool_result_its_own_message() -> None:
    # Only user turns are joined: two results of one batch are adjacent too, and each must
    # keep its tool_call_id, or the server cannot pair them with the calls.
    second = tool_call("call_2", "read_file", '{"path": "a.py"}')
    history: list[ChatMessage] = [
        user_message("look"),
        assistant_message(None, [CALL, second]),
        tool_message("a.py", "call_1"),
        tool_message("print(1)", "call_2"),
        system_message("Reminder: plan"),
    ]

    wire = wire_messages(history, merge_reminders=True)

    assert wire[2:] == [
        to_wire(tool_message("a.py", "call_1")),
        to_wire(tool_message("print(1)", "call_2")),
        {"role": "user", "content": system_reminder("Reminder: plan")},
    ]


def test_merging_keeps_two_assistant_replies_apart() -> None:
    history: list[ChatMessage] = [
        user_message("go"),
        assistant_message("one"),
        assistant_message("two"),
    ]

    assert wire_messages(history, merge_reminders=True) == [to_wire(m) for m in history]


def test_without_merging_two_turns_of_the_user_stay_apart() -> None:
    history = [user_message("one"), user_message("two")]

    assert wire_messages(history) == [to_wire(m) for m in history]


def test_merging_is_off_by_default() -> None:
    wire = wire_messages([user_message("do it"), system_message("Reminder: plan")])

    assert len(wire) == 2


@pytest.mark.parametrize(
    ("configured", "window", "sent"),
    [(8_192, None, 8_192), (8_192, 128_000, 8_192), (8_192, 8_192, 2_048), (100, 2_000, 100)],
)
def test_the_output_cap_is_clamped_to_a_quarter_of_a_known_window(
    configured: int, window: int | None, sent: int
) -> None:
    assert clamp_output_tokens(configured, window) == sent


def test_the_adapter_defaults_are_the_documented_settings() -> None:
    settings = Settings()
    options = WireOptions()

    assert options.max_output_tokens == settings.max_output_tokens == 8_192
    assert options.send_tool_choice is settings.send_tool_choice is True
    assert options.stream is settings.stream is True
    assert options.merge_reminders is settings.merge_reminders is False


def test_an_output_cap_below_one_token_is_refused() -> None:
    with pytest.raises(ValueError, match=r"^max_output_tokens must be >= 1, got 0$"):
        WireOptions(max_output_tokens=0)
    assert WireOptions(max_output_tokens=1).max_output_tokens == 1
