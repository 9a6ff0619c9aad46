"""Specification of chat messages: builders, immutability, the OpenAI wire shape, the
tool-call pairing rule and the grouping compaction relies on."""

from __future__ import annotations

import dataclasses
import re

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent_tutorial.core.messages import (
    AssistantMessage,
    ChatMessage,
    PairingTracker,
    SystemMessage,
    ToolCall,
    ToolMessage,
    ToolPairingError,
    UserMessage,
    assistant_message,
    from_wire,
    is_project_context,
    is_tool_group,
    iter_message_groups,
    new_call_id,
    project_context_message,
    system_message,
    to_wire,
    tool_call,
    tool_message,
    user_message,
    validate_tool_pairing,
)
from tests.strategies import MessageGroup, chat_messages, paired_histories, paired_message_groups

READ = tool_call("call_1", "read_file", '{"path": "a.txt"}')
GREP = tool_call("call_2", "grep", '{"pattern": "todo"}')


# Builders and immutability


def test_builders_set_role_and_fields() -> None:
    assert system_message("be brief") == SystemMessage(content="be brief")
    assert user_message("hi") == UserMessage(content="hi")
    assert tool_message("42", "call_1") == ToolMessage(content="42", tool_call_id="call_1")
    assert tool_call("call_1", "bash", "{}") == ToolCall(id="call_1", name="bash", arguments="{}")
    assert [system_message("").role, user_message("").role, tool_message("", "x").role] == [
        "system",
        "user",
        "tool",
    ]


def test_assistant_builder_stores_tool_calls_as_a_tuple() -> None:
    message = assistant_message(None, [READ, GREP])

    assert message == AssistantMessage(content=None, tool_calls=(READ, GREP))
    assert isinstance(message.tool_calls, tuple)
    assert message.role == "assistant"


def test_assistant_builder_defaults_to_no_tool_calls() -> None:
    assert assistant_message("done").tool_calls == ()


@pytest.mark.parametrize(
    ("value", "field_name"),
    [
        (system_message("a"), "content"),
        (user_message("a"), "content"),
        (assistant_message("a"), "content"),
        (assistant_message("a"), "tool_calls"),
        (tool_message("a", "call_1"), "tool_call_id"),
        (READ, "arguments"),
    ],
)
def test_messages_are_frozen(value: object, field_name: str) -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(value, field_name, "changed")


def test_role_cannot_be_passed_to_a_constructor() -> None:
    with pytest.raises(TypeError):
        UserMessage(content="hi", role="system")  # type: ignore[call-arg]


# Wire shape


def test_system_and_user_messages_go_on_the_wire_as_role_and_content() -> None:
    assert to_wire(system_message("rules")) == {"role": "system", "content": "rules"}
    assert to_wire(user_message("hello")) == {"role": "user", "content": "hello"}


def test_assistant_message_without_calls_has_no_tool_calls_key() -> None:
    assert to_wire(assistant_message("done")) == {"role": "assistant", "content": "done"}


def test_assistant_message_with_null_content_keeps_content_null() -> None:
    assert to_wire(assistant_message(None, [READ])).get("content", "missing") is None


def test_assistant_tool_calls_go_on_the_wire_as_functions() -> None:
    wire = to_wire(assistant_message(None, [READ, GREP]))

    assert wire == {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "read_file", "arguments": '{"path": "a.txt"}'},
            },
            {
                "id": "call_2",
                "type": "function",
                "function": {"name": "grep", "arguments": '{"pattern": "todo"}'},
            },
        ],
    }


def test_tool_message_goes_on_the_wire_with_its_call_id() -> None:
    assert to_wire(tool_message("file text", "call_1")) == {
        "role": "tool",
        "content": "file text",
        "tool_call_id": "call_1",
    }


@given(chat_messages())
def test_from_wire_inverts_to_wire(message: ChatMessage) -> None:
    assert from_wire(to_wire(message)) == message


@given(chat_messages())
def test_wire_shape_survives_json_encoding(message: ChatMessage) -> None:
    assert from_wire(orjson.loads(orjson.dumps(to_wire(message)))) == message


@pytest.mark.parametrize(
    ("wire", "problem"),
    [
        ({"role": "narrator", "content": "x"}, "unknown message role 'narrator'"),
        ({"content": "x"}, "unknown message role None"),
        ({"role": "user", "content": None}, "content must be a string, got NoneType"),
        ({"role": "system", "content": 3}, "content must be a string, got int"),
        (
            {"role": "tool", "content": b"x", "tool_call_id": "c"},
            "content must be a string, got bytes",
        ),
        ({"role": "tool", "content": "x"}, "tool_call_id must be a string, got NoneType"),
        ({"role": "assistant", "content": 3}, "assistant content must be a string or null"),
        ({"role": "assistant", "tool_calls": {}}, "tool calls must be a list, got dict"),
        ({"role": "assistant", "tool_calls": ["c"]}, "a tool call must be an object, got str"),
        (
            {"role": "assistant", "tool_calls": [{"id": "c", "function": "f"}]},
            "a tool call's function must be an object, got str",
        ),
        (
            {"role": "assistant", "tool_calls": [{"function": {"name": "n", "arguments": ""}}]},
            "tool call id must be a string, got NoneType",
        ),
        (
            {"role": "assistant", "tool_calls": [{"id": "c", "function": {}}]},
            "tool call name must be a string, got NoneType",
        ),
        (
            {"role": "assistant", "tool_calls": [{"id": "c", "function": {"name": "n"}}]},
            "tool call arguments must be a string, got NoneType",
        ),
    ],
)
def test_from_wire_says_what_is_wrong_with_a_shape_it_does_not_know(
    wire: dict[str, object], problem: str
) -> None:
    with pytest.raises(ValueError) as raised:
        from_wire(wire)

    assert str(raised.value) == problem


def test_the_project_context_is_a_user_message_between_its_markers() -> None:
    message = project_context_message("root: /work/app")

    assert message == user_message("<project_context>\nroot: /work/app\n</project_context>")
    assert is_project_context(message)


def test_only_a_user_message_that_opens_with_the_marker_is_project_context() -> None:
    assert not is_project_context(user_message("see <project_context> below"))
    assert not is_project_context(system_message("<project_context>\nx\n</project_context>"))


def test_a_new_call_id_has_openais_shape_and_is_never_repeated() -> None:
    first, second = new_call_id(), new_call_id()

    assert re.fullmatch(r"call_[0-9a-f]{24}", first)
    assert first != second


# Pairing rule: valid histories


@given(paired_histories())
def test_paired_histories_are_accepted(history: list[ChatMessage]) -> None:
    validate_tool_pairing(history)


def test_results_may_answer_a_batch_in_any_order() -> None:
    validate_tool_pairing(
        [
            user_message("look"),
            assistant_message(None, [READ, GREP]),
            tool_message("matches", GREP.id),
            tool_message("text", READ.id),
            assistant_message("done"),
        ]
    )


def test_empty_history_is_paired() -> None:
    validate_tool_pairing([])


# Pairing rule: each way to break it


def test_pairing_error_is_a_value_error() -> None:
    assert issubclass(ToolPairingError, ValueError)


def test_orphan_tool_result_is_rejected() -> None:
    history: list[ChatMessage] = [user_message("hi"), tool_message("text", "call_9")]

    with pytest.raises(ToolPairingError, match="orphan"):
        validate_tool_pairing(history)


def test_tool_result_at_the_start_of_history_is_rejected() -> None:
    with pytest.raises(ToolPairingError, match="orphan"):
        validate_tool_pairing([tool_message("text", "call_1")])


def test_result_missing_when_the_next_message_arrives_is_rejected() -> None:
    history: list[ChatMessage] = [
        assistant_message(None, [READ, GREP]),
        tool_message("text", READ.id),
        user_message("next"),
    ]

    with pytest.raises(ToolPairingError, match=r"missing tool result.*call_2"):
        validate_tool_pairing(history)


def test_result_missing_at_the_end_of_history_is_rejected() -> None:
    history: list[ChatMessage] = [user_message("look"), assistant_message(None, [READ])]

    with pytest.raises(ToolPairingError, match=r"missing tool result.*call_1"):
        validate_tool_pairing(history)


def test_result_for_an_unknown_id_while_calls_are_pending_is_rejected() -> None:
    history: list[ChatMessage] = [
        assistant_message(None, [READ]),
        tool_message("text", "call_other"),
    ]

    with pytest.raises(ToolPairingError, match="call_other"):
        validate_tool_pairing(history)


def test_duplicate_call_ids_within_one_message_are_rejected() -> None:
    twin = tool_call(READ.id, "grep", "{}")
    history: list[ChatMessage] = [
        assistant_message(None, [READ, twin]),
        tool_message("a", READ.id),
        tool_message("b", READ.id),
    ]

    with pytest.raises(ToolPairingError, match="duplicate tool call id"):
        validate_tool_pairing(history)


def test_duplicate_call_ids_across_messages_are_rejected() -> None:
    history: list[ChatMessage] = [
        assistant_message(None, [READ]),
        tool_message("a", READ.id),
        assistant_message(None, [READ]),
        tool_message("b", READ.id),
    ]

    with pytest.raises(ToolPairingError, match="duplicate tool call id"):
        validate_tool_pairing(history)


def test_second_result_for_the_same_call_is_rejected() -> None:
    history: list[ChatMessage] = [
        assistant_message(None, [READ]),
        tool_message("a", READ.id),
        tool_message("a again", READ.id),
    ]

    with pytest.raises(ToolPairingError, match="duplicate tool result"):
        validate_tool_pairing(history)


def test_late_result_for_an_earlier_batch_is_rejected() -> None:
    history: list[ChatMessage] = [
        assistant_message(None, [READ]),
        tool_message("a", READ.id),
        assistant_message(None, [GREP]),
        tool_message("b", GREP.id),
        tool_message("a again", READ.id),
    ]

    with pytest.raises(ToolPairingError):
        validate_tool_pairing(history)


@given(paired_histories(min_tool_groups=1), st.data())
def test_deleting_any_tool_result_breaks_pairing(
    history: list[ChatMessage], data: st.DataObject
) -> None:
    tool_positions = [i for i, message in enumerate(history) if isinstance(message, ToolMessage)]
    position = data.draw(st.sampled_from(tool_positions))

    with pytest.raises(ToolPairingError):
        validate_tool_pairing(history[:position] + history[position + 1 :])


def test_a_tracker_refuses_a_message_that_would_unpair_and_keeps_its_state() -> None:
    tracker = PairingTracker.of([user_message("go")])
    tracker.append(assistant_message(None, [READ]))

    with pytest.raises(ToolPairingError, match=r"missing tool result.*call_1.*message 2"):
        tracker.append(user_message("too soon"))
    tracker.append(tool_message("text", READ.id))
    tracker.append(user_message("now"))

    tracker.check_answered()
    assert tracker.call_ids == {READ.id}


def test_a_tracker_refuses_a_call_id_repeated_within_one_message() -> None:
    tracker = PairingTracker()

    with pytest.raises(ToolPairingError, match="duplicate tool call id 'call_1'"):
        tracker.append(assistant_message(None, [READ, READ]))
    tracker.append(user_message("still usable"))


@given(paired_histories())
def test_a_tracker_fed_one_message_at_a_time_accepts_every_paired_history(
    history: list[ChatMessage],
) -> None:
    tracker = PairingTracker()
    for message in history:
        tracker.append(message)

    tracker.check_answered()
    calls = [c.id for m in history if isinstance(m, AssistantMessage) for c in m.tool_calls]
    assert tracker.call_ids == set(calls)


# Groups


def test_groups_keep_each_tool_batch_with_its_results() -> None:
    history: list[ChatMessage] = [
        system_message("rules"),
        user_message("look"),
        assistant_message("reading", [READ, GREP]),
        tool_message("text", READ.id),
        tool_message("matches", GREP.id),
        assistant_message("done"),
    ]

    assert list(iter_message_groups(history)) == [
        (history[0],),
        (history[1],),
        (history[2], history[3], history[4]),
        (history[5],),
    ]


def test_back_to_back_tool_batches_are_separate_groups() -> None:
    history: list[ChatMessage] = [
        assistant_message(None, [READ]),
        tool_message("text", READ.id),
        assistant_message(None, [GREP]),
        tool_message("matches", GREP.id),
    ]

    assert list(iter_message_groups(history)) == [tuple(history[:2]), tuple(history[2:])]


def test_is_tool_group_tells_tool_batches_from_plain_messages() -> None:
    batch = (assistant_message(None, [READ]), tool_message("text", READ.id))

    assert is_tool_group(batch)
    assert not is_tool_group((assistant_message("done"),))
    assert not is_tool_group((user_message("hi"),))


@given(paired_message_groups())
def test_groups_of_a_paired_history_are_its_batches_and_plain_messages(
    groups: list[MessageGroup],
) -> None:
    history: list[ChatMessage] = [message for group in groups for message in group]

    assert list(iter_message_groups(history)) == groups


@given(st.lists(chat_messages(), max_size=10))
def test_concatenating_groups_gives_back_the_history(history: list[ChatMessage]) -> None:
    regrouped = [message for group in iter_message_groups(history) for message in group]

    assert regrouped == history
