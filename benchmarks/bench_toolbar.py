"""What one redraw of the REPL's bottom toolbar costs (prompt-toolkit redraws it on every key
press) right after resuming a session of 50 and of 2,000 turns, in chapter 2 and chapter 8.

The session is written through the real session log and resumed through the real
`Conversation`; the model is never called. The first redraw measures the history once;
later ones read kept sizes (chapters 1–7: a running size of the append-only history;
chapter 8: the next request's size, remembered until the history or summary changes).
Target: a redraw at 2,000 turns costs at most twice one at 50 (flat in session length).

Run with `make bench` (`.venv/bin/python benchmarks/bench_toolbar.py`).
"""

from __future__ import annotations

import io
import statistics
import sys
import tempfile
import time
from pathlib import Path

from prompt_toolkit.input import create_pipe_input
from prompt_toolkit.output import DummyOutput
from rich.console import Console

from agent_tutorial.bootstrap import AgentDeps
from agent_tutorial.config import load_settings
from agent_tutorial.conversation import Conversation, ConversationSetup
from agent_tutorial.core.events import MessageAppended
from agent_tutorial.core.messages import assistant_message, user_message
from agent_tutorial.features.session_files import SessionMeta
from agent_tutorial.features.session_log import SessionLog
from agent_tutorial.profiles import profile_for_chapter
from agent_tutorial.project import Project
from agent_tutorial.render import TerminalRenderer
from agent_tutorial.repl import Repl
from agent_tutorial.run_summary import RunSummary
from agent_tutorial.testing import ScriptedModel

TURNS = (50, 2_000)
REDRAWS = 200
FLAT_RATIO = 2.0
ANSWER = "An answer of a few lines, about the size a real one has. " * 8


def write_session(workspace: Path, chapter: int, turns: int) -> Path:
    """A saved session of `turns` short question-and-answer turns."""
    with SessionLog.create(workspace, SessionMeta.new(chapter, "bench", None)) as log:
        for turn in range(turns):
            log.emit(MessageAppended(user_message(f"question {turn}")))
            log.emit(MessageAppended(assistant_message(f"{ANSWER}{turn}")))
            log.end_turn()
        return log.path


def redraw_seconds(chapter: int, turns: int) -> tuple[float, float]:
    """(first redraw, median of the later ones) after resuming the session."""
    with tempfile.TemporaryDirectory() as folder, create_pipe_input() as keys:
        workspace = Path(folder)
        path = write_session(workspace, chapter, turns)
        console = Console(file=io.StringIO())
        renderer = TerminalRenderer(console, console, stream_answer=False)
        deps = AgentDeps(
            ScriptedModel([]), Project.at(workspace), load_settings(workspace, {"model": "demo"})
        )
        setup = ConversationSetup(profile_for_chapter(chapter), deps, sinks=[renderer])
        conversation = Conversation.open(setup, path)
        try:
            repl = Repl(
                conversation,
                RunSummary(),
                renderer,
                model_name="bench",
                input=keys,
                output=DummyOutput(),
            )
            first = _timed(repl)
            later = [_timed(repl) for _ in range(REDRAWS)]
        finally:
            conversation.close()
    return first, statistics.median(later)


def _timed(repl: Repl) -> float:
    started = time.perf_counter()
    repl.toolbar()
    return time.perf_counter() - started


def main() -> int:
    print(f"toolbar redraw after resuming a session ({REDRAWS} redraws, median)")
    failed = False
    for chapter in (2, 8):
        results = {turns: redraw_seconds(chapter, turns) for turns in TURNS}
        for turns, (first, median) in results.items():
            print(
                f"  chapter {chapter}, {turns:>5,} turns: first {first * 1e3:7.2f} ms, "
                f"then {median * 1e6:7.1f} µs"
            )
        small, large = (results[turns][1] for turns in TURNS)
        ratio = large / small
        verdict = "ok" if ratio <= FLAT_RATIO else "TOO SLOW"
        print(f"  chapter {chapter}: {TURNS[1]:,} / {TURNS[0]} turns = {ratio:.2f} (≤ 2) {verdict}")
        failed = failed or ratio > FLAT_RATIO
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
