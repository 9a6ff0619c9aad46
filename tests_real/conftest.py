"""`make test-real`: the six tasks against a real model on a real OpenAI-compatible server
(`../shared/real-model/serve.sh 1.5b 18080 8192` on this machine). Opt-in, never part of
`make test` or CI (this folder is outside `testpaths`); every test skips when no server
answers. Settings, from the environment:

    REAL_BASE_URL      the server (default $OPENAI_BASE_URL, else http://127.0.0.1:18080/v1)
    REAL_MODEL         the model name it knows (default $AGENT_TUTORIAL_MODEL, else local)
    REAL_CHAPTER       the chapter profile to run (default 2)
    REAL_TOOL_CALLS    auto, native or text (default auto)
    REAL_MAX_TURNS     model calls per task (default 12)
    REAL_MAX_OUTPUT    the output cap per reply in tokens (default 1024: at 1-3 tokens a
                       second, a 1.5B model rambling to the default 8,192 takes an hour)
    REAL_TASK_TIMEOUT  seconds per task (default 1800: a loaded 2-core machine is slow)
    REAL_RESULTS       a folder that keeps each task's JSON result, stderr and session file
    REAL_WORKSPACES    where each task's project is made, the same path in every run so
                       that runs repeat (default ~/.cache/agent-tutorial-real-tasks: a
                       fixed name in the shared /tmp is one another user could plant a
                       symlink at, and each run empties it)

Temperature is 0 for every run. The summary at the end lists each task's outcome.
"""

from __future__ import annotations

import os
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest


@dataclass(frozen=True)
class RealServer:
    base_url: str
    model: str
    chapter: str
    tool_calls: str
    max_turns: str
    max_output_tokens: str
    timeout_s: float
    results: Path | None
    workspaces: Path


@dataclass
class Outcome:
    task: str
    done: bool
    tool_calls: int
    turns: int
    seconds: float
    prompt_tokens: int
    ending: str


OUTCOMES: list[Outcome] = []
"""Every task run so far in this session, for the summary and the pass count."""


def _configured() -> RealServer:
    results = os.environ.get("REAL_RESULTS")
    return RealServer(
        base_url=os.environ.get("REAL_BASE_URL")
        or os.environ.get("OPENAI_BASE_URL")
        or "http://127.0.0.1:18080/v1",
        model=os.environ.get("REAL_MODEL") or os.environ.get("AGENT_TUTORIAL_MODEL") or "local",
        chapter=os.environ.get("REAL_CHAPTER") or "2",
        tool_calls=os.environ.get("REAL_TOOL_CALLS") or "auto",
        max_turns=os.environ.get("REAL_MAX_TURNS") or "12",
        max_output_tokens=os.environ.get("REAL_MAX_OUTPUT") or "1024",
        timeout_s=float(os.environ.get("REAL_TASK_TIMEOUT") or 1800),
        results=Path(results).resolve() if results else None,
        workspaces=Path(
            os.environ.get("REAL_WORKSPACES")
            or Path.home() / ".cache" / "agent-tutorial-real-tasks"
        ),
    )


def _answers(base_url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{base_url.rstrip('/')}/models", timeout=5) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError, ValueError):
        return False


@pytest.fixture(scope="session")
def real_server() -> Iterator[RealServer]:
    server = _configured()
    if not _answers(server.base_url):
        pytest.skip(f"no real server answers at {server.base_url} (see tests_real/conftest.py)")
    if server.results is not None:
        server.results.mkdir(parents=True, exist_ok=True)
    yield server


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not OUTCOMES:
        return
    server = _configured()
    write = terminalreporter.write_line
    write("")
    write(f"real tasks, chapter {server.chapter}, tool_calls = {server.tool_calls}:")
    for outcome in OUTCOMES:
        write(
            f"  {outcome.task:<16} {'done' if outcome.done else 'NOT DONE':<9}"
            f"{outcome.tool_calls:>3} tool calls {outcome.turns:>3} turns "
            f"{outcome.prompt_tokens:>7,} prompt tokens {outcome.seconds:>7.0f} s  {outcome.ending}"
        )
    done = sum(outcome.done for outcome in OUTCOMES)
    write(f"  {done} of {len(OUTCOMES)} tasks done")
