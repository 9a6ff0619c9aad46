"""Shared fixtures: a loopback OpenAI-compatible server and a scratch workspace."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from uuid import uuid4

import pytest
from hypothesis import HealthCheck
from hypothesis import settings as hypothesis_settings

from tests.launcher import Started, launched_environment, run_to_end, start
from tests.loopback import LoopbackServer
from tests.other_user import Runtime, others_can_enter, runtime_anyone_can_reach
from tests.terminal import Terminal

if TYPE_CHECKING:
    from agent_tutorial.adapters.openai_chat import OpenAIChatModel
    from agent_tutorial.conversation import Conversation
    from agent_tutorial.core.events import EventSink
    from agent_tutorial.features.redaction import Redactor

# A quick profile for everyday runs and a more thorough one where CI sets CI=true;
# HYPOTHESIS_PROFILE picks one by name. No deadline: two shared cores make timings noisy.
hypothesis_settings.register_profile(
    "quick", max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
hypothesis_settings.register_profile(
    "thorough", max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
hypothesis_settings.load_profile(
    os.environ.get("HYPOTHESIS_PROFILE", "thorough" if os.environ.get("CI") else "quick")
)
costly_property = pytest.mark.timeout(300)
"""For a property test whose examples are costly to draw: the thorough profile runs about a
minute of them on two cores, past the default 60 s timeout. The profile, never the test,
decides how many examples run."""


@pytest.fixture(scope="session")
def runtime_for_nobody() -> Iterator[Runtime]:
    """This checkout and its packages where `nobody` can reach them, whatever folder the
    clone is in (a private one too); made once per test process. Skipped, with the reason,
    on a machine whose /var/tmp other users cannot enter (it is 1777 by convention)."""
    parent = Path("/var/tmp")
    closed = [folder for folder in (parent, *parent.parents) if not others_can_enter(folder)]
    if closed:
        mode = stat.filemode(closed[0].stat().st_mode)
        pytest.skip(f"{closed[0]} is closed to other users ({mode})")
    with runtime_anyone_can_reach(parent) as runtime:
        yield runtime


@pytest.fixture
def sigint_raises_keyboard_interrupt() -> Iterator[None]:
    """Python's own SIGINT handler for the test, whatever pytest inherited.

    A shell that starts pytest in the background (`pytest &`, some CI runners) hands it an
    ignored SIGINT; Python keeps it ignored, and so do the CLI subprocesses a test starts.
    A Python-level handler is reset to the default on exec, so children get Ctrl-C back too.
    """
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        # None: the handler was set outside Python; the default is the closest we can restore.
        signal.signal(signal.SIGINT, signal.SIG_DFL if previous is None else previous)


def serving() -> Iterator[LoopbackServer]:
    """A loopback server for the length of a fixture."""
    server = LoopbackServer()
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def loopback() -> Iterator[LoopbackServer]:
    yield from serving()


_OPENAI_VARIABLES = frozenset({"OPENAI_BASE_URL", "OPENAI_API_KEY", "OPENAI_MODEL"})


@pytest.fixture
def workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty project directory, made the current directory, with no endpoint settings
    leaking in from the developer's environment."""
    root = tmp_path / "project"
    root.mkdir()
    monkeypatch.chdir(root)
    for name in list(os.environ):
        if name.startswith("AGENT_TUTORIAL_") or name in _OPENAI_VARIABLES:
            monkeypatch.delenv(name)
    # HOME is the project's parent: the search for a project root stops there, so a
    # `.agent_tutorial/` someone left in /tmp cannot become every test's project.
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "home" / ".config"))
    return root


TEST_API_KEY = "sk-test-secret-0123456789"

# Processes are found by a unique marker in their environment: bash replaces itself with a
# lone command, so a marker in the command line would not survive, but every process the
# agent starts inherits its environment (unless it clears it on purpose).
MARKER_VARIABLE = "AGENT_TUTORIAL_TEST_MARKER"
WAIT_S = 20.0


def processes_with_marker(marker: str) -> list[tuple[int, str]]:
    """(pid, command line) of every live process whose environment carries `marker`."""
    needle = f"{MARKER_VARIABLE}={marker}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        launched = launched_environment(int(entry.name))
        try:
            environment = (entry / "environ").read_bytes().split(b"\0")
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
        except (OSError, UnicodeDecodeError):  # gone, or not ours to read
            continue
        if launched is not None:  # a fork of the launcher: its environ is the launcher's
            environment = [f"{name}={value}".encode() for name, value in launched.items()]
        if needle in environment:
            found.append((int(entry.name), command))
    return found


def write_state(workspace: Path, name: str, text: str) -> Path:
    """`text` as the file `name` in the project's `.agent_tutorial/` (made if missing)."""
    state = workspace / ".agent_tutorial"
    state.mkdir(exist_ok=True)
    (state / name).write_text(text, encoding="utf-8")
    return state / name


def session_messages(workspace: Path) -> list[dict[str, Any]]:
    """Canonical history as the one session file in `workspace` saved it (wire form)."""
    (session,) = (workspace / ".agent_tutorial" / "sessions").glob("*.jsonl")
    records = [json.loads(line) for line in session.read_text().splitlines()]
    return [record["message"] for record in records if record["type"] == "message"]


def wait_until(condition: Callable[[], bool], timeout_s: float = WAIT_S) -> bool:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)  # polling interval only; correctness never depends on it
    return True


def sleeping(marker: str) -> bool:
    """Whether a `sleep` carrying `marker` runs: the bash tool a test interrupts has started."""
    return any(command.startswith("sleep") for _, command in processes_with_marker(marker))


@pytest.fixture
def marker(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A marker every process started from now on inherits; leftovers are killed by pid."""
    value = uuid4().hex
    monkeypatch.setenv(MARKER_VARIABLE, value)
    yield value
    # SIGTERM first: a leftover agent (this fixture is torn down before a terminal the test
    # opened after it) then removes its sandbox's temporary directory, as it would for a user.
    _signal_leftovers(value, signal.SIGTERM)
    wait_until(lambda: not _leftovers(value), timeout_s=5.0)
    _signal_leftovers(value, signal.SIGKILL)


def _leftovers(marker: str) -> list[int]:
    return [pid for pid, _ in processes_with_marker(marker) if pid != os.getpid()]


def _signal_leftovers(marker: str, number: signal.Signals) -> None:
    for pid in _leftovers(marker):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, number)


@dataclass
class CliRun:
    exit_code: int
    stdout: str
    stderr: str


OUTPUT_SIZE = {"COLUMNS": "80", "LINES": "24"}
"""What rich assumes without a terminal, pinned: a COLUMNS the test runner inherited would
otherwise rewrap the CLI's tables and help (a test that wants another width passes `env`)."""

RunCli = Callable[..., CliRun]
"""The type of the `run_cli` and `run_cli_process` fixtures: `run_cli("run", "-p", "hi")`."""


@pytest.fixture
def run_cli(workspace: Path, loopback: LoopbackServer) -> RunCli:
    """Runs `agent-tutorial ARGS` in-process against the loopback server, in `workspace`."""
    from typer.testing import CliRunner

    from agent_tutorial.cli import app

    def invoke(
        *args: str, input: str | None = None, env: Mapping[str, str | None] | None = None
    ) -> CliRun:
        """`env` adds to the endpoint's variables; a None value unsets one."""
        runner = CliRunner()
        environment = {
            "OPENAI_BASE_URL": loopback.base_url,
            "OPENAI_API_KEY": TEST_API_KEY,
            "AGENT_TUTORIAL_MODEL": LOOPBACK_MODEL,
            **OUTPUT_SIZE,
            **(env or {}),
        }
        result = runner.invoke(app, list(args), input=input, env=environment)
        if result.exception is not None and not isinstance(result.exception, SystemExit):
            raise result.exception
        return CliRun(result.exit_code, result.stdout, result.stderr)

    return invoke


@pytest.fixture
def make_terminal(workspace: Path, loopback: LoopbackServer) -> Iterator[Callable[..., Terminal]]:
    """Starts `agent-tutorial ARGS` on a real pty against the loopback server; every
    terminal it started is closed (its child killed if still running) after the test."""
    started: list[Terminal] = []

    def start(*args: str, **options: Any) -> Terminal:
        env = {
            "OPENAI_BASE_URL": loopback.base_url,
            "OPENAI_API_KEY": TEST_API_KEY,
            "AGENT_TUTORIAL_MODEL": LOOPBACK_MODEL,
            **options.pop("env", {}),
        }
        terminal = Terminal(args, cwd=workspace, env=env, **options)
        started.append(terminal)
        return terminal

    yield start
    for terminal in started:
        terminal.close()


@pytest.fixture
def run_cli_process(workspace: Path, loopback: LoopbackServer) -> RunCli:
    """Runs `agent-tutorial ARGS` as a real process against the loopback server, in
    `workspace`; it fails the test if the process outlives `timeout_s`."""

    def invoke(
        *args: str,
        env: dict[str, str] | None = None,
        timeout_s: float = 60,
        exec_fresh: bool = False,
    ) -> CliRun:
        """`exec_fresh`: see `tests.launcher.launch`."""
        environment = {**cli_environment(loopback), **(env or {})}
        done = run_to_end(
            ["-m", "agent_tutorial", *args],
            cwd=workspace,
            env=environment,
            timeout_s=timeout_s,
            exec_fresh=exec_fresh,
        )
        return CliRun(done.returncode, done.stdout, done.stderr)

    return invoke


class SteppedClock:
    """A clock only the test moves, for code that takes a `clock`: time passes exactly
    where the test (or a loopback reply it scripted) says, however fast anything runs."""

    def __init__(self, now: float = 0.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


LOOPBACK_MODEL = "loopback-model"

MakeAdapter = Callable[..., "OpenAIChatModel"]
"""The type of the `make_adapter` fixture: `make_adapter(max_retries=2, wire=WireOptions())`."""


def key_redactor(api_key: str = TEST_API_KEY) -> Redactor:
    """What the composition root hands the adapter, for the test key alone: it masks the
    key (as `OPENAI_API_KEY`) and the token shapes in error text."""
    from agent_tutorial.features.redaction import Redactor

    return Redactor({api_key: "OPENAI_API_KEY"})


@pytest.fixture
def make_adapter(loopback: LoopbackServer) -> Iterator[MakeAdapter]:
    """Makes the real OpenAI adapter for the loopback server, with the test key and model
    and no SDK retries unless a test asks for them (other keywords go to the adapter as
    they are); every adapter made is closed after the test."""
    from agent_tutorial.adapters.openai_chat import OpenAIChatModel

    with ExitStack() as made:

        def make(*, max_retries: int = 0, **options: Any) -> OpenAIChatModel:
            options.setdefault("redaction", key_redactor())
            adapter = OpenAIChatModel(
                base_url=loopback.base_url,
                api_key=TEST_API_KEY,
                model=LOOPBACK_MODEL,
                max_retries=max_retries,
                **options,
            )
            return made.enter_context(adapter)

        yield make


def open_loopback_conversation(
    cleanup: ExitStack,
    workspace: Path,
    loopback: LoopbackServer,
    chapter: int,
    sinks: Sequence[EventSink],
    *,
    project_root: Path | None = None,
) -> Conversation:
    """A conversation at `chapter` against the loopback server, opened as `run` opens one
    for the REPL: settings from `workspace` (or `project_root` above it), the real adapter,
    no approver. `cleanup` closes the conversation and then the adapter."""
    from agent_tutorial.adapters.openai_chat import OpenAIChatModel
    from agent_tutorial.bootstrap import AgentDeps
    from agent_tutorial.config import load_settings
    from agent_tutorial.conversation import Conversation, ConversationSetup
    from agent_tutorial.profiles import profile_for_chapter
    from agent_tutorial.project import Project

    flags = {"base_url": loopback.base_url, "model": LOOPBACK_MODEL}
    project = Project(project_root or workspace, workspace)
    settings = load_settings(project.root, flags)
    model = cleanup.enter_context(
        OpenAIChatModel(
            base_url=loopback.base_url,
            api_key=TEST_API_KEY,
            model=LOOPBACK_MODEL,
            redaction=key_redactor(),
            max_retries=0,
        )
    )
    setup = ConversationSetup(
        profile_for_chapter(chapter), AgentDeps(model, project, settings), sinks
    )
    conversation = Conversation.open(setup)
    cleanup.callback(conversation.close)
    return conversation


def cli_command(*args: str) -> list[str]:
    """`agent-tutorial ARGS` as a real subprocess: `main()` runs, with its signal handling
    and orphan reaping, which the in-process `run_cli` never sets up."""
    return [sys.executable, "-m", "agent_tutorial", *args]


def run_process(
    argv: list[str], cwd: Path, environment: dict[str, str], *, timeout_s: float = 120
) -> subprocess.CompletedProcess[str]:
    """`argv` run to its end with no input and its output captured; it fails the test if
    the process outlives `timeout_s`."""
    return subprocess.run(
        argv,
        cwd=cwd,
        env=environment,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )


# Runs a command under a small Python parent and reports the command's peak RSS. A child
# started straight from pytest inherits pytest's own high-water mark in its ru_maxrss (Linux
# carries it across fork and exec), so after a memory-hungry test every child would look big.
_PEAK_RSS_PARENT = """
import os, subprocess, sys
child = subprocess.Popen(sys.argv[2:])
_, status, usage = os.wait4(child.pid, 0)
child.returncode = os.waitstatus_to_exitcode(status)
with open(sys.argv[1], "w") as report:
    report.write(str(usage.ru_maxrss * 1024))
sys.exit(child.returncode)
"""


@dataclass
class MeasuredRun:
    returncode: int
    peak_rss_bytes: int


def run_measuring_peak_rss(
    command: list[str], report_dir: Path, **popen_options: Any
) -> MeasuredRun:
    """Runs `command` to the end; its exit code and the peak resident memory it reached."""
    report = report_dir / f"peak-rss-{uuid4().hex}"
    done = subprocess.run(
        [sys.executable, "-c", _PEAK_RSS_PARENT, str(report), *command],
        check=False,
        **popen_options,
    )
    return MeasuredRun(done.returncode, int(report.read_text()))


def run_cli_measuring_peak_rss(
    workspace: Path, loopback: LoopbackServer, *args: str, timeout_s: float = 120
) -> MeasuredRun:
    """`agent-tutorial ARGS` run to the end as a real process in `workspace` against the
    loopback server, its output discarded; its exit code and peak resident memory."""
    return run_measuring_peak_rss(
        cli_command(*args),
        workspace.parent,
        cwd=workspace,
        env=cli_environment(loopback),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        timeout=timeout_s,
    )


def start_cli(workspace: Path, loopback: LoopbackServer, *args: str) -> Started:
    """`agent-tutorial ARGS` started as a real process in `workspace` against the loopback
    server, stdin empty, its output on pipes."""
    return start(cli_command(*args)[1:], cwd=workspace, env=cli_environment(loopback))


def cli_environment(loopback: LoopbackServer) -> dict[str, str]:
    """Our environment plus the loopback endpoint, for `cli_command` subprocesses."""
    return {
        **os.environ,
        "OPENAI_BASE_URL": loopback.base_url,
        "OPENAI_API_KEY": TEST_API_KEY,
        "AGENT_TUTORIAL_MODEL": LOOPBACK_MODEL,
        **OUTPUT_SIZE,
    }
