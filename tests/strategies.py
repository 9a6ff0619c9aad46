"""Hypothesis strategies for chat messages and paired histories, shared by the test modules.

`paired_message_groups` draws a history already split the way `iter_message_groups` splits
it; `paired_histories` flattens that into one list.
"""

from __future__ import annotations

import json

from hypothesis import strategies as st

from agent_tutorial.core.messages import (
    ChatMessage,
    ToolCall,
    assistant_message,
    system_message,
    tool_call,
    tool_message,
    user_message,
)

MessageGroup = tuple[ChatMessage, ...]

# Any text, unicode included (hypothesis leaves out lone surrogates, which JSON cannot carry).
texts = st.text(max_size=40)
call_ids = st.text(min_size=1, max_size=16)
tool_names = st.sampled_from(["bash", "read_file", "write_file", "edit_file", "glob", "grep"])
# Arguments are raw model output: usually JSON, sometimes not; the message types keep both.
arguments_texts = st.one_of(
    st.dictionaries(st.text(max_size=8), st.text(max_size=8), max_size=3).map(
        lambda value: json.dumps(value, ensure_ascii=False)
    ),
    texts,
)
# Pairing ignores content, so histories use short text: drawing long histories stays fast.
short_texts = st.text(max_size=6)
short_call_ids = st.text(min_size=1, max_size=4)
call_counts = st.integers(min_value=1, max_value=4)


def tool_calls(
    call_id: st.SearchStrategy[str] = call_ids,
    arguments: st.SearchStrategy[str] = arguments_texts,
) -> st.SearchStrategy[ToolCall]:
    return st.builds(tool_call, call_id, tool_names, arguments)


def plain_messages(text: st.SearchStrategy[str] = texts) -> st.SearchStrategy[ChatMessage]:
    """A message that is a group on its own: system, user, or an assistant without calls."""
    return st.one_of(
        st.builds(system_message, text),
        st.builds(user_message, text),
        st.builds(assistant_message, st.none() | text),
    )


def chat_messages() -> st.SearchStrategy[ChatMessage]:
    """Any single message, including assistant messages with calls and tool results."""
    return st.one_of(
        plain_messages(),
        st.builds(assistant_message, st.none() | texts, st.lists(tool_calls(), max_size=3)),
        st.builds(tool_message, texts, call_ids),
    )


@st.composite
def _tool_group(draw: st.DrawFn, ids: list[str]) -> MessageGroup:
    """An assistant message calling one tool per id, then every result in a drawn order."""
    calls = [draw(tool_calls(st.just(call_id), short_texts)) for call_id in ids]
    assistant = assistant_message(draw(st.none() | short_texts), calls)
    answer_order = draw(st.permutations(ids))
    return (assistant, *(tool_message(draw(short_texts), call_id) for call_id in answer_order))


@st.composite
def paired_message_groups(
    draw: st.DrawFn, min_tool_groups: int = 0, max_groups: int = 8
) -> list[MessageGroup]:
    """Groups of a paired history: single plain messages and tool groups of 1-4 calls.

    Call ids are unique across the whole history; results within a group come in any order.
    """
    # A shape is the number of calls in a group; 0 stands for a plain message.
    required = draw(st.lists(call_counts, min_size=min_tool_groups, max_size=min_tool_groups))
    extra = draw(st.lists(call_counts | st.just(0), max_size=max(max_groups - min_tool_groups, 0)))
    shapes = draw(st.permutations(required + extra))
    total_calls = sum(shapes)
    ids = draw(st.lists(short_call_ids, min_size=total_calls, max_size=total_calls, unique=True))
    groups: list[MessageGroup] = []
    for size in shapes:
        if size == 0:
            groups.append((draw(plain_messages(short_texts)),))
        else:
            groups.append(draw(_tool_group(ids[:size])))
            ids = ids[size:]
    return groups


@st.composite
def paired_histories(
    draw: st.DrawFn, min_tool_groups: int = 0, max_groups: int = 8
) -> list[ChatMessage]:
    """A history that obeys the pairing rule, with multi-call tool groups."""
    groups = draw(paired_message_groups(min_tool_groups, max_groups))
    return [message for group in groups for message in group]
