"""The conversations the bench replays: a seeded synthetic coding trace, or the canonical
history of a recorded session, both as a list of model calls (`TraceStep`)."""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass

import orjson

from agent_tutorial.core.messages import (
    AssistantMessage,
    ChatMessage,
    ToolMessage,
    assistant_message,
    tool_call,
    user_message,
)
from agent_tutorial.core.tools import ToolResult

# Tool-result sizes: log-normal with a median of 3.4 KB and a heavy tail, the shape that
# published coding-agent traces report (most results a few KB, a few over 30 KB).
RESULT_MEDIAN_BYTES = 3_400
RESULT_SIGMA = 1.1
RESULT_MAX_BYTES = 400_000
STEPS_PER_TASK = 18
"""Mean model calls between two user prompts in the synthetic trace."""

_TOOLS = (("read_file", 0.40), ("grep", 0.20), ("bash", 0.25), ("edit_file", 0.10), ("glob", 0.05))
_WORDS = (
    *("def", "class", "return", "self", "value", "result", "config", "path", "request"),
    *("history", "message", "group", "token", "cache", "window", "budget", "prefix"),
    *("summary", "layer", "index", "error", "test", "assert", "import", "module"),
)


@dataclass(frozen=True, slots=True)
class TraceStep:
    """One model call: the messages appended before it (user prompts), the assistant reply
    it produced, and the tool results that answered the reply's calls, in call order."""

    before: tuple[ChatMessage, ...]
    reply: AssistantMessage
    results: tuple[ToolResult, ...]


def synthetic_trace(steps: int, seed: int) -> list[TraceStep]:
    """`steps` model calls of a coding session: tasks of about `STEPS_PER_TASK` tool calls
    each (reads, searches, commands, edits), each task ending with a text answer, the next
    starting with a new prompt. The same seed gives the same bytes."""
    if steps < 1:
        raise ValueError(f"steps must be at least 1, got {steps}")
    rng = random.Random(seed)
    trace: list[TraceStep] = []
    prompt: tuple[ChatMessage, ...] = (user_message(_prompt(rng, 1)),)
    task = 1
    for number in range(steps):
        ends_task = number == steps - 1 or rng.random() < 1 / STEPS_PER_TASK
        if ends_task:
            trace.append(TraceStep(prompt, assistant_message(_text(rng, 400, 1_200)), ()))
            task += 1
            prompt = (user_message(_prompt(rng, task)),)
            continue
        trace.append(_tool_step(rng, prompt, number))
        prompt = ()
    return trace


def _tool_step(rng: random.Random, before: tuple[ChatMessage, ...], number: int) -> TraceStep:
    parallel = 1 if rng.random() < 0.8 else rng.randint(2, 3)
    calls = []
    results = []
    for index in range(parallel):
        name = rng.choices([tool for tool, _ in _TOOLS], [weight for _, weight in _TOOLS])[0]
        arguments = _arguments(rng, name)
        calls.append(tool_call(f"call_{number}_{index}", name, orjson.dumps(arguments).decode()))
        results.append(ToolResult(_result_text(rng, name)))
    thought = _text(rng, 60, 300) if rng.random() < 0.6 else None
    return TraceStep(before, assistant_message(thought, calls), tuple(results))


def _arguments(rng: random.Random, name: str) -> dict[str, str]:
    path = f"src/{rng.choice(_WORDS)}/{rng.choice(_WORDS)}_{rng.randint(1, 99)}.py"
    if name == "bash":
        return {"command": f"pytest tests/test_{rng.choice(_WORDS)}.py -q"}
    if name == "grep":
        return {"pattern": f"{rng.choice(_WORDS)}_{rng.choice(_WORDS)}", "path": "src"}
    if name == "glob":
        return {"pattern": f"src/**/{rng.choice(_WORDS)}*.py"}
    if name == "edit_file":
        return {"path": path, "old": rng.choice(_WORDS), "new": rng.choice(_WORDS)}
    return {"path": path}


def _result_text(rng: random.Random, name: str) -> str:
    if name == "edit_file":
        return f"Edited {rng.choice(_WORDS)}.py: 1 replacement"
    size = int(rng.lognormvariate(math.log(RESULT_MEDIAN_BYTES), RESULT_SIGMA))
    return _lines(rng, min(RESULT_MAX_BYTES, max(40, size)))


def _lines(rng: random.Random, size: int) -> str:
    lines: list[str] = []
    total = 0
    number = rng.randint(1, 500)
    while total < size:
        words = " ".join(rng.choice(_WORDS) for _ in range(rng.randint(3, 10)))
        line = f"{number:>6}\t    {words}"
        lines.append(line)
        total += len(line) + 1
        number += 1
    return "\n".join(lines)[:size]


def _text(rng: random.Random, low: int, high: int) -> str:
    size = rng.randint(low, high)
    words: list[str] = []
    while sum(len(word) + 1 for word in words) < size:
        words.append(rng.choice(_WORDS))
    return " ".join(words).capitalize() + "."


def _prompt(rng: random.Random, task: int) -> str:
    return f"Task {task}: " + _text(rng, 80, 400)


def session_trace(history: Sequence[ChatMessage]) -> list[TraceStep]:
    """A recorded canonical history as model calls: each assistant message is a call, the
    messages before it that are not tool results are what was appended before it, and the
    tool messages after it are its results."""
    trace: list[TraceStep] = []
    before: list[ChatMessage] = []
    index = 0
    while index < len(history):
        message = history[index]
        index += 1
        if not isinstance(message, AssistantMessage):
            if not isinstance(message, ToolMessage):
                before.append(message)
            continue
        results: list[ToolResult] = []
        while index < len(history):
            result = history[index]
            if not isinstance(result, ToolMessage):
                break
            results.append(
                ToolResult(result.content, is_error=result.content.startswith("Error ["))
            )
            index += 1
        trace.append(TraceStep(tuple(before), message, tuple(results)))
        before = []
    return trace
