"""The last turns of a resumed conversation, shown before the REPL's prompt so the reader
sees where it left off: each prompt, its tool calls on one line, and the first lines of
its answer."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from rich.console import Group, RenderableType
from rich.text import Text

from agent_tutorial.core.messages import AssistantMessage, ChatMessage, ToolMessage, UserMessage
from agent_tutorial.core.text import printable
from agent_tutorial.layout import shorten_at_word

RECAP_TURNS = 3
"""Turns shown; the heading counts them all."""
ANSWER_LINES = 6
"""Lines of an answer shown; the rest are counted."""


def recap(
    history: Sequence[ChatMessage], width: int, *, markdown: bool, turns: int = RECAP_TURNS
) -> Group:
    """The last `turns` turns of `history`, each line shortened to `width` columns except
    an answer's, which wrap (as Markdown with `markdown`, as the REPL showed them)."""
    every_turn = _turns(history)
    shown = every_turn[-turns:]
    heading = "earlier in this session"
    if len(shown) < len(every_turn):
        heading += f" (the last {len(shown)} of {len(every_turn)} turns)"
    parts: list[RenderableType] = [Text(heading + ":", style="dim")]
    for turn in shown:
        parts += _turn(turn, width, markdown=markdown)
    return Group(*parts)


def _turns(history: Sequence[ChatMessage]) -> list[list[ChatMessage]]:
    """`history` cut before each user message: a turn starts with its prompt."""
    turns: list[list[ChatMessage]] = []
    for message in history:
        if isinstance(message, UserMessage) or not turns:
            turns.append([])
        turns[-1].append(message)
    return turns


def _turn(turn: Sequence[ChatMessage], width: int, *, markdown: bool) -> list[RenderableType]:
    parts: list[RenderableType] = []
    prompts = [message.content for message in turn if isinstance(message, UserMessage)]
    if prompts:
        parts.append(Text(_prompt_line(prompts[0], width), style="bold"))
    calls = [call.name for m in turn if isinstance(m, AssistantMessage) for call in m.tool_calls]
    if calls:
        failed = sum(m.content.startswith("Error [") for m in turn if isinstance(m, ToolMessage))
        parts.append(Text(shorten_at_word(_tools_line(calls, failed), width), style="dim"))
    answers = [m.content for m in turn if isinstance(m, AssistantMessage) and m.content]
    if not answers:
        return [*parts, Text("(no answer)", style="dim")]
    lines = printable(answers[-1].strip()).splitlines()
    head = "\n".join(lines[:ANSWER_LINES])
    parts.append(_markdown(head) if markdown else Text(head))
    if len(lines) > ANSWER_LINES:
        parts.append(Text(f"… {_count(len(lines) - ANSWER_LINES, 'more line')}", style="dim"))
    return parts


def _prompt_line(prompt: str, width: int) -> str:
    """`› the first line` with `(+12 lines)` when there are more."""
    lines = printable(prompt.strip()).splitlines() or [""]
    more = f" (+{_count(len(lines) - 1, 'line')})" if len(lines) > 1 else ""
    return "› " + shorten_at_word(lines[0], max(1, width - 2 - len(more))) + more


def _tools_line(names: Sequence[str], failed: int) -> str:
    """`• 7 tool calls (1 failed): read_file ×4, grep ×2, bash`, most used first."""
    counts = Counter(printable(name) for name in names)
    listed = ", ".join(f"{name} ×{n}" if n > 1 else name for name, n in counts.most_common())
    errors = f" ({failed} failed)" if failed else ""
    return f"• {_count(len(names), 'tool call')}{errors}: {listed}"


def _markdown(text: str) -> RenderableType:
    from rich.markdown import Markdown  # as the REPL imports it: on first use

    return Markdown(text, hyperlinks=False)  # a link shows its address, as in render.py


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}{'' if number == 1 else 's'}"
