"""How the agent's per-turn work grows with session length: a 2,000-turn session driven by the
scripted model (`agent_tutorial.testing.ScriptedModel`, not an LLM) through the real
composition root, in chapter 2 and chapter 8.

Each turn is one prompt: the model reads a small file, then answers (two model calls). Per
turn we time the agent's work (`runner.run`: requests built, pairing kept, the tool run,
events) and, after the session, what the adapter would spend encoding the request of each
checkpoint turn (every message in the wire shape, as JSON), which in chapters 1–7 carries
the whole history by design. Targets: chapter 8's agent work is flat (turn 2,000 / turn 100
≤ 2); chapter 2's grows by at most a quarter of what encoding its larger request grows by
(a request still holds a reference to every message; before the pairing rule was kept
incrementally, re-checking the whole history made it grow by more than half).

Run with `make bench` (`.venv/bin/python benchmarks/bench_long_session.py`).
"""

from __future__ import annotations

import gc
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import orjson

from agent_tutorial.bootstrap import AgentDeps, build_agent
from agent_tutorial.config import load_settings
from agent_tutorial.core.messages import to_wire, tool_call
from agent_tutorial.core.model import ModelReply, ModelRequest
from agent_tutorial.profiles import P02, P08, Capability, ChapterProfile
from agent_tutorial.project import Project
from agent_tutorial.testing import ScriptedModel, text_reply, tool_reply

TURNS = 2_000
CHECKPOINTS = (100, 500, 1_000, 2_000)
WINDOW = 50  # turns ending at each checkpoint; their median is reported
FLAT_RATIO = 2.0
ENCODING_SHARE = 0.25
FILE_LINES = 12  # about 500 bytes read per turn
ENCODINGS = 5  # of each checkpoint's request
FORGOTTEN = ModelRequest(messages=())


class ForgetfulModel:
    """The scripted model, keeping only the last request, as a real client keeps none:
    ScriptedModel records every request for tests, and in a chapter 2 session those hold
    millions of references that the garbage collector would walk."""

    def __init__(self, model: ScriptedModel) -> None:
        self.model = model
        self.last_request = FORGOTTEN

    def complete(self, request: ModelRequest) -> ModelReply:
        reply = self.model.complete(request)
        self.model.requests[-1] = FORGOTTEN
        self.last_request = request
        return reply


def encoding_seconds(request: ModelRequest) -> float:
    """Median time of encoding `request` as the adapter would: each message in the wire
    shape, as JSON."""
    times = []
    for _ in range(ENCODINGS):
        started = time.perf_counter()
        orjson.dumps([to_wire(message) for message in request.messages])
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def session_replies(turns: int) -> list[ModelReply]:
    replies = []
    for turn in range(turns):
        call = tool_call(f"call-{turn}", "read_file", '{"path": "notes.txt"}')
        replies += [tool_reply(call), text_reply(f"Turn {turn}: the notes say hello.")]
    return replies


@dataclass
class Session:
    agent_seconds: list[float]  # per turn
    checkpoint_requests: dict[int, ModelRequest]  # the last request of each checkpoint turn


def run_session(profile: ChapterProfile, workspace: Path) -> Session:
    model = ForgetfulModel(ScriptedModel(session_replies(TURNS)))
    settings = load_settings(workspace, {"model": "demo", "permission_mode": "auto"})
    runner = build_agent(profile, AgentDeps(model, Project.at(workspace), settings)).runner
    session = Session([], {})
    for turn in range(1, TURNS + 1):
        started = time.perf_counter()
        runner.run(f"What do the notes say now? ({turn})")
        session.agent_seconds.append(time.perf_counter() - started)
        if turn in CHECKPOINTS:
            session.checkpoint_requests[turn] = model.last_request
    model.model.assert_exhausted()
    return session


def agent_around(session: Session, turn: int) -> float:
    """Median agent time of the WINDOW turns ending at `turn`."""
    return statistics.median(session.agent_seconds[turn - WINDOW : turn])


def report(profile: ChapterProfile, session: Session) -> bool:
    print(f"chapter {profile.chapter} ({profile.title}), per turn")
    encodings = {turn: encoding_seconds(session.checkpoint_requests[turn]) for turn in CHECKPOINTS}
    for turn in CHECKPOINTS:
        agent, encoding = agent_around(session, turn), encodings[turn]
        print(
            f"  turn {turn:>5,}: agent {agent * 1e3:6.3f} ms (median of {WINDOW})"
            f"   encoding its request {encoding * 1e3:7.3f} ms"
        )
    first, last = CHECKPOINTS[0], CHECKPOINTS[-1]
    agent_growth = agent_around(session, last) - agent_around(session, first)
    encoding_growth = encodings[last] - encodings[first]
    ratio = agent_around(session, last) / agent_around(session, first)
    print(
        f"  turn {last:,} / {first:,}: agent x{ratio:.2f}, "
        f"{agent_growth * 1e3:+.3f} ms; encoding {encoding_growth * 1e3:+.3f} ms"
    )
    if Capability.COMPACTION in profile:
        ok = ratio <= FLAT_RATIO
        print(f"  target: flat (x{FLAT_RATIO} at most) {'ok' if ok else 'GROWS'}")
    else:
        ok = agent_growth <= ENCODING_SHARE * encoding_growth
        verdict = "ok" if ok else "GROWS MORE"
        print(f"  target: growth at most {ENCODING_SHARE:.0%} of the encoding's {verdict}")
    return ok


def main() -> int:
    ok = True
    for profile in (P02, P08):
        with tempfile.TemporaryDirectory() as directory:
            workspace = Path(directory)
            lines = [f"line {n}: hello from the notes file." for n in range(FILE_LINES)]
            (workspace / "notes.txt").write_text("\n".join(lines) + "\n")
            gc.collect()
            ok = report(profile, run_session(profile, workspace)) and ok
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
