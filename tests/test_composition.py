"""One composition call per session: a `run` reads the project's `.env` and `config.toml`
once each, builds one `Redactor` and one model connection, and `/clear` and `/resume`
reuse them."""

from __future__ import annotations

import sys
from contextlib import ExitStack
from dataclasses import replace
from pathlib import Path

import pytest

from agent_tutorial.composition import FrontEnd, ReadProject, open_session
from agent_tutorial.config import load_settings, read_project_settings
from agent_tutorial.conversation import Conversation
from agent_tutorial.core.errors import AgentTutorialError
from agent_tutorial.core.loop import ContextOverflowError
from agent_tutorial.core.window import ContextWindow
from agent_tutorial.features.redaction import Redactor
from agent_tutorial.profiles import profile_for_chapter
from agent_tutorial.project import Project
from tests.conftest import TEST_API_KEY, cli_environment, run_process, write_state
from tests.contracts import overflow, request_kinds
from tests.event_log import EventLog
from tests.loopback import LoopbackServer, text_stream

# Counts the opens of the two project files with an audit hook (audit event "open": every
# `open()`, `io.open` and `os.open`, whoever calls it), then runs the CLI as `python -m
# agent_tutorial` would. The counts are written at exit, after the run's own exit code.
_COUNTING_OPENS = """
import atexit, os, runpy, sys

report, *watched = sys.argv[1:4]
opens = {path: 0 for path in watched}

def count(event, args):
    if event == "open" and isinstance(args[0], (str, bytes, os.PathLike)):
        path = os.path.abspath(os.fsdecode(args[0]))
        if path in opens:
            opens[path] += 1

def write_report():
    with open(report, "w") as file:
        file.write(" ".join(str(opens[path]) for path in watched))

sys.addaudithook(count)
atexit.register(write_report)
module = sys.argv[4]
sys.argv = [module, *sys.argv[5:]]
runpy.run_module(module, run_name="__main__", alter_sys=True)
"""


def run_counting_opens(
    workspace: Path,
    loopback: LoopbackServer,
    *args: str,
    env: dict[str, str] | None = None,
    module: str = "agent_tutorial",
) -> tuple[int, int, str]:
    """`agent-tutorial ARGS` as a real process in `workspace`: how many times it opened the
    project's `.env` and `config.toml`, and its stderr (asserted empty of tracebacks)."""
    state = workspace / ".agent_tutorial"
    report = workspace.parent / "opens.txt"
    watched = [str(state / ".env"), str(state / "config.toml")]
    argv = [sys.executable, "-c", _COUNTING_OPENS, str(report), *watched, module, *args]
    environment = {**cli_environment(loopback), **(env or {})}
    done = run_process(argv, workspace, environment)
    assert done.returncode == 0, done.stderr
    dotenv_opens, toml_opens = (int(count) for count in report.read_text().split())
    return dotenv_opens, toml_opens, done.stderr


def write_project_files(workspace: Path, *, config: str = 'permission_mode = "auto"\n') -> None:
    """Both project files, with a setting an untrusted folder ignores and a secret."""
    write_state(workspace, "config.toml", config)
    write_state(workspace, ".env", "SERVICE_TOKEN=tok-0123456789abcdef\n")


def test_a_chapter_8_run_in_an_untrusted_folder_opens_each_project_file_once(
    workspace: Path, loopback: LoopbackServer
) -> None:
    write_project_files(workspace)
    loopback.queue(text_stream("done"))

    dotenv_opens, toml_opens, stderr = run_counting_opens(
        workspace, loopback, "run", "--chapter", "8", "-p", "hi"
    )

    assert "project settings not trusted, ignored: permission_mode" in stderr
    assert (dotenv_opens, toml_opens) == (1, 1)


def test_a_key_named_by_api_key_env_is_read_from_the_same_single_open(
    workspace: Path, loopback: LoopbackServer
) -> None:
    """The `.env` is read once even when it holds the key that `api_key_env` names (the
    fifth read before: the key was looked up in the file again)."""
    write_project_files(workspace, config='api_key_env = "SERVICE_TOKEN"\n')
    loopback.queue(text_stream("done"))

    dotenv_opens, toml_opens, stderr = run_counting_opens(
        workspace,
        loopback,
        *("run", "--trust-project", "--chapter", "8", "-p", "hi"),
        env={"OPENAI_API_KEY": ""},
    )

    assert "using SERVICE_TOKEN from .agent_tutorial/.env in " in stderr
    assert loopback.headers[0]["authorization"] == "Bearer tok-0123456789abcdef"
    assert (dotenv_opens, toml_opens) == (1, 1)


def test_the_count_sees_every_open(workspace: Path, loopback: LoopbackServer) -> None:
    """The other side of the line: a program that opens `.env` twice is counted twice
    (zipfile adds the file once per name given)."""
    write_project_files(workspace)

    dotenv_opens, toml_opens, _ = run_counting_opens(
        workspace,
        loopback,
        "-c",
        "../out.zip",
        ".agent_tutorial/.env",
        ".agent_tutorial/.env",
        module="zipfile",
    )

    assert (dotenv_opens, toml_opens) == (2, 0)


# --- one redactor, one connection, one window per session ----------------------------------


def open_chapter_8(workspace: Path, loopback: LoopbackServer, opened: ExitStack) -> Conversation:
    """A chapter 8 session against the loopback server, opened as `run` opens one."""
    files = read_project_settings(workspace)
    flags = {"base_url": loopback.base_url, "model": "m", "api_key": TEST_API_KEY}
    settings = load_settings(workspace, flags, project=files)
    read = ReadProject(Project.at(workspace), files, settings)
    front_end = FrontEnd(sinks=[EventLog()], approver=None, warn=lambda _text: None)
    conversation = open_session(read, profile_for_chapter(8), front_end, opened)
    opened.callback(conversation.close)
    return conversation


def test_clear_builds_a_new_agent_with_the_sessions_redactor_and_connection(
    workspace: Path, loopback: LoopbackServer
) -> None:
    write_project_files(workspace)
    loopback.queue(text_stream("done"))
    with ExitStack() as opened:
        conversation = open_chapter_8(workspace, loopback, opened)
        first = conversation.agent
        conversation.run("hi")
        (workspace / ".agent_tutorial" / ".env").unlink()  # a second read would lose it
        probes = list(loopback.get_paths)
        assert probes  # chapter 8 asked the server for its window, once, at the start

        conversation.start_new()  # what /clear does

        assert conversation.agent is not first
        assert conversation.agent.runner.redaction is first.runner.redaction
        assert loopback.get_paths == probes  # the same connection: not asked again
        redactor = conversation.agent.runner.redaction
        assert isinstance(redactor, Redactor)
        masked = redactor.redact("tok-0123456789abcdef").text
        assert masked == "[REDACTED:SERVICE_TOKEN]"


def test_resume_builds_a_new_agent_with_the_sessions_redactor(
    workspace: Path, loopback: LoopbackServer
) -> None:
    write_project_files(workspace)
    loopback.queue(text_stream("done"))
    with ExitStack() as opened:
        conversation = open_chapter_8(workspace, loopback, opened)
        first = conversation.agent
        conversation.run("hi")
        saved = conversation.log.path if conversation.log is not None else None
        assert saved is not None
        conversation.start_new()

        conversation.resume(saved)

        assert conversation.agent.runner.redaction is first.runner.redaction
        assert len(conversation.agent.runner.history) == 2


def test_a_window_stated_in_an_overflow_reaches_the_cap_the_meter_and_the_budget(
    workspace: Path, loopback: LoopbackServer
) -> None:
    """One window for the session: the adapter learns 8,192 tokens from llama.cpp's
    overflow error, and the output cap it sends, the meter (`/context`) and compaction's
    budget all follow, in this agent and in the next one (`/clear`)."""
    loopback.queue(overflow("llama.cpp-as-served"), text_stream("again"), text_stream("anew"))
    with ExitStack() as opened:
        conversation = open_chapter_8(workspace, loopback, opened)
        assert conversation.agent.context_meter.window is None

        first = conversation.agent
        with pytest.raises(ContextOverflowError):  # one short message: nothing to remove
            conversation.run("hi")
        assert first.compaction is not None
        assert first.compaction.settings.context_window_tokens == 8_192  # learned mid-session
        assert first.context_meter.window is not None
        assert first.context_meter.window.tokens == 8_192
        conversation.run("again")
        conversation.start_new()
        conversation.run("anew")

        agent = conversation.agent
        assert agent.context_meter.window is not None
        assert agent.context_meter.window.tokens == 8_192
        assert agent.compaction is not None
        assert agent.compaction.settings.context_window_tokens == 8_192
    assert request_kinds(loopback) == ["agent", "agent", "agent"]
    caps = [body["max_tokens"] for body in loopback.requests]
    assert caps == [8_192, 2_048, 2_048]


def test_a_window_holder_never_widens_and_clamps_the_cap() -> None:
    window = ContextWindow(max_output_tokens=8_192)
    assert (window.tokens, window.output_cap_tokens) == (None, 8_192)

    assert window.learn(40_000) is True
    assert (window.tokens, window.output_cap_tokens) == (40_000, 8_192)
    assert window.learn(40_000) is False
    assert window.learn(40_001) is False
    assert window.learn(39_999) is True
    assert (window.tokens, window.output_cap_tokens) == (39_999, 8_192)
    assert window.learn(4_096) is True
    assert window.output_cap_tokens == 1_024
    with pytest.raises(ValueError, match="must be positive"):
        window.learn(0)


def test_a_window_holder_learns_a_window_of_one_token_but_not_of_none() -> None:
    window = ContextWindow(max_output_tokens=8_192)

    with pytest.raises(ValueError, match=r"^the context window must be positive, got 0$"):
        window.learn(0)
    assert window.learn(1) is True
    assert (window.tokens, window.output_cap_tokens) == (1, 1)


@pytest.mark.parametrize(("tokens", "max_output_tokens"), [(0, 8_192), (-1, 8_192), (4_096, 0)])
def test_a_window_holder_refuses_a_size_that_is_not_positive(
    tokens: int, max_output_tokens: int
) -> None:
    with pytest.raises(ValueError, match="must be positive"):
        ContextWindow(tokens, max_output_tokens=max_output_tokens)


def test_the_smallest_window_holder_is_one_token_with_a_one_token_cap() -> None:
    window = ContextWindow(1, max_output_tokens=1)

    assert (window.tokens, window.output_cap_tokens) == (1, 1)


def test_every_agent_of_a_session_holds_its_hooks_to_the_scripts_at_its_start(
    workspace: Path, loopback: LoopbackServer
) -> None:
    # The REPL's Shift-Tab replaces the session's setup; an agent built after it (`/clear`)
    # must still refuse a script rewritten since the start, not take it as the new normal.
    guard = workspace / "hooks" / "guard.py"
    guard.parent.mkdir()
    guard.write_text("import sys\nsys.stdin.read()\n")
    user_settings = workspace.parent / "home" / ".config" / "agent-tutorial" / "config.toml"
    user_settings.parent.mkdir(parents=True)
    command = f"{sys.executable} hooks/guard.py"
    user_settings.write_text(f"[[hooks.UserPromptSubmit]]\ncommand = '{command}'\n")
    loopback.queue(text_stream("before"))
    with ExitStack() as opened:
        conversation = open_chapter_8(workspace, loopback, opened)
        conversation.run("hi")
        setup = conversation.setup
        settings = setup.settings.model_copy(update={"permission_mode": "auto"})
        conversation.setup = replace(setup, deps=replace(setup.deps, settings=settings))
        guard.write_text("open('pwned', 'w').write('ran outside the sandbox')\n")
        conversation.start_new()

        with pytest.raises(AgentTutorialError, match=r"hooks/guard\.py changed since"):
            conversation.run("again")

    assert not (workspace / "pwned").exists()
    assert len(loopback.requests) == 1
