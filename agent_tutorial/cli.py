"""The `agent-tutorial` command line: `run` one prompt (or open the REPL), and inspect
artifacts and sessions. This is the edge where errors become one-line messages and exit
codes: 0 done, 1 runtime failure, 2 usage or configuration error, 130 interrupted (143 on
SIGTERM, 129 on SIGHUP)."""

import os
import stat
import sys
import time
from collections.abc import Mapping
from contextlib import ExitStack, closing
from dataclasses import replace
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NamedTuple, NoReturn

import typer

from agent_tutorial import __version__

# Everything heavy is imported where it is used, so `--help`, `--version` and completion
# start in a few dozen milliseconds (tests/test_startup.py guards this).
if TYPE_CHECKING:
    from rich.console import Console

    from agent_tutorial.config import Settings
    from agent_tutorial.conversation import Conversation, ConversationSetup
    from agent_tutorial.core.events import EventSink
    from agent_tutorial.core.loop import RunResult
    from agent_tutorial.core.model import ModelClient
    from agent_tutorial.features.bench import BenchReport
    from agent_tutorial.features.bench.trace import TraceStep
    from agent_tutorial.features.compaction import CompactionStrategy
    from agent_tutorial.headless import ResultSubtype, RunReport
    from agent_tutorial.render import TerminalRenderer
    from agent_tutorial.resuming import ResumeChoice

EXIT_OK, EXIT_FAILURE, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130  # 128 + SIGINT

app = typer.Typer(
    no_args_is_help=True,
    # Plain help: rich-formatted help alone would take several times a bare interpreter's
    # start-up, and it breaks docstring lines where the source does.
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
    help="A terminal coding agent built one chapter at a time.",
)


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"agent-tutorial {__version__}")
        raise typer.Exit()


@app.callback()
def main_options(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_print_version, is_eager=True, help="Print the version and exit."
        ),
    ] = False,
) -> None:
    """A terminal coding agent built one chapter at a time."""


class OutputFormat(StrEnum):
    text = "text"
    json = "json"
    stream_json = "stream-json"


class PermissionModeOption(StrEnum):
    ask = "ask"
    accept_edits = "accept-edits"
    auto = "auto"


class CompactionOption(StrEnum):
    seed = "seed"
    cache_aware = "cache-aware"


ChapterOption = Annotated[
    int | None,
    typer.Option(
        "--chapter",
        "-c",
        min=1,
        max=8,
        help="Chapter profile 1–8 (default 8, or a resumed session's own chapter).",
        show_default=False,
    ),
]


class RunFailed(Exception):
    """The run stops with a one-line message and an exit code; with a JSON output format
    it still ends with one result object."""

    def __init__(
        self,
        message: str,
        exit_code: int,
        subtype: "ResultSubtype" = "error_during_execution",
    ) -> None:
        super().__init__(message)
        self.exit_code = exit_code
        self.subtype: ResultSubtype = subtype


@app.command()
def run(
    chapter: ChapterOption = None,
    prompt: Annotated[
        str | None,
        typer.Option(
            "--prompt", "-p", help="Run once with this prompt (piped input is added before it)."
        ),
    ] = None,
    model: Annotated[
        str | None, typer.Option(help="Model name, or 'demo' for the offline demo.")
    ] = None,
    base_url: Annotated[str | None, typer.Option(help="OpenAI-compatible endpoint.")] = None,
    max_turns: Annotated[int | None, typer.Option(min=1, help="Model calls per prompt.")] = None,
    output_format: Annotated[
        OutputFormat, typer.Option("--output-format", help="text, json or stream-json.")
    ] = OutputFormat.text,
    permission_mode: Annotated[
        PermissionModeOption | None, typer.Option(help="ask, accept-edits or auto.")
    ] = None,
    yes: Annotated[
        bool, typer.Option("--yes", "-y", help="Same as --permission-mode auto.")
    ] = False,
    verbose: Annotated[
        bool,
        typer.Option("--verbose", "-v", help="Show every permission decision and compaction step."),
    ] = False,
    no_color: Annotated[
        bool, typer.Option("--no-color", help="Plain output without colour.")
    ] = False,
    continue_: Annotated[
        bool, typer.Option("--continue", help="Resume the most recent session.")
    ] = False,
    resume: Annotated[str | None, typer.Option(help="Resume the session with this id.")] = None,
    compaction: Annotated[
        CompactionOption | None, typer.Option(help="Chapter 8's strategy: seed or cache-aware.")
    ] = None,
    context_window: Annotated[
        int | None,
        typer.Option(
            min=256, help="The model's context window in tokens (default: ask the server)."
        ),
    ] = None,
) -> None:
    """Run one prompt, or open the REPL.

    With --prompt, or with piped standard input, run once and print the answer; with both,
    the piped input comes first, as context. Without a prompt on a terminal, open the REPL.
    """
    from agent_tutorial.headless import RunOutcome, RunReport
    from agent_tutorial.render import make_consoles

    options = RunOptions(
        chapter=chapter,
        prompt=prompt,
        flags={
            "model": model,
            "base_url": base_url,
            "max_turns": max_turns,
            "permission_mode": "auto" if yes else (permission_mode and permission_mode.value),
            "context_window_tokens": context_window,
        },
        output_format=output_format,
        verbose=verbose,
        resume_latest=continue_,
        resume_id=resume,
        compaction=None if compaction is None else compaction.value,
    )
    out, err = make_consoles(no_color=no_color)
    report = RunReport(output_format.value, file=sys.stdout, started=time.monotonic())
    try:
        with ExitStack() as opened:  # what the run opened (the model's connections)
            _run(options, report, out, err, opened)
    except RunFailed as failure:
        _print_error(err, str(failure))
        report.finish(RunOutcome(failure.subtype, error=str(failure)), chapter=chapter or 8)
        raise typer.Exit(failure.exit_code) from None


class RunOptions(NamedTuple):
    """The `run` command's flags, as the steps below need them. (A NamedTuple: it costs
    less to define than a dataclass, and this module is on every command's start-up path.)"""

    chapter: int | None
    """None unless --chapter was given: then 8, or a resumed session's own chapter."""
    prompt: str | None
    flags: Mapping[str, object]
    output_format: OutputFormat
    verbose: bool
    resume_latest: bool
    resume_id: str | None
    compaction: "CompactionStrategy | None" = None


_adopt_orphans = False
"""Set by `main()`: `run` then makes this process a subreaper (`adapters.processes`). Done
there, not in `main()`, so `--help` and `--version` do not load ctypes for it."""


def _run(
    options: RunOptions, report: "RunReport", out: "Console", err: "Console", opened: ExitStack
) -> None:
    """Settle the settings and the session, open the conversation, then either hand it to
    the REPL or run the one prompt and report its answer."""
    from agent_tutorial.render import rendering

    _become_subreaper_if_asked()
    workspace = Path.cwd().resolve()
    settings = _settings_or_exit(workspace, options.flags)
    resume = _resume_choice(workspace, options.resume_latest, options.resume_id, err)
    chapter = _chapter_or_note(resume, options.chapter, err)
    interactive = options.prompt is None and _stdin_is_terminal()
    if interactive:
        _refuse_json_repl(options.output_format)
    text = "" if interactive else _prompt_or_exit(options.prompt, settings.max_stdin_bytes)
    # Only now ask the server for its window: a usage error should not wait on the network.
    settings = _with_strategy(_with_probed_window(settings, chapter), options.compaction)
    renderer = _renderer(options, out, err, interactive=interactive)
    setup = _conversation_setup(settings, workspace, chapter, report.sinks(renderer), err, opened)
    conversation = _open_or_exit(setup, resume, err)
    _start_report(report, conversation, settings)
    with closing(conversation):
        if interactive:
            _repl_or_exit(conversation, report, renderer, settings)
            return
        with rendering(renderer):
            result = _run_or_exit(conversation, text)
    _finish_run(report, result, renderer, chapter, options.output_format)


def _refuse_json_repl(output_format: OutputFormat) -> None:
    """The REPL speaks text: opening it would silently drop the JSON that was asked for."""
    if output_format is not OutputFormat.text:
        raise RunFailed(
            f"--output-format {output_format.value} needs a prompt: pass --prompt TEXT or "
            "pipe one on standard input",
            EXIT_USAGE,
        )


def _become_subreaper_if_asked() -> None:
    if _adopt_orphans:
        from agent_tutorial.adapters.processes import become_subreaper

        become_subreaper()


def _with_strategy(settings: "Settings", strategy: "CompactionStrategy | None") -> "Settings":
    """The settings with `--compaction`'s strategy, when it was given."""
    if strategy is None:
        return settings
    compaction = replace(settings.compaction, strategy=strategy)
    return settings.model_copy(update={"compaction": compaction})


def _renderer(
    options: RunOptions, out: "Console", err: "Console", *, interactive: bool
) -> "TerminalRenderer":
    """The REPL streams and renders markdown; a one-shot run streams its answer only as
    text to a terminal (otherwise it is written whole at the end, or as JSON)."""
    from agent_tutorial.render import TerminalRenderer

    text_output = options.output_format is OutputFormat.text
    return TerminalRenderer(
        out,
        err,
        stream_answer=interactive or (text_output and out.is_terminal),
        verbose=options.verbose,
        markdown=interactive,
    )


def _conversation_setup(
    settings: "Settings",
    workspace: Path,
    chapter: int,
    sinks: "list[EventSink]",
    err: "Console",
    opened: ExitStack,
) -> "ConversationSetup":
    """What the conversation is built from; approval is asked only when a person is there
    to answer on a terminal."""
    from agent_tutorial.approval import TerminalApprover
    from agent_tutorial.conversation import ConversationSetup
    from agent_tutorial.profiles import profile_for_chapter

    return ConversationSetup(
        profile=profile_for_chapter(chapter),
        settings=settings,
        workspace=workspace,
        model=_model_for(settings, workspace, chapter, opened),
        approver=TerminalApprover(err) if _stdin_is_terminal() and err.is_terminal else None,
        sinks=sinks,
    )


def _start_report(report: "RunReport", conversation: "Conversation", settings: "Settings") -> None:
    window = conversation.agent.context_meter.window
    report.summary.context_window_tokens = None if window is None else window.tokens
    report.start(
        _init_record(conversation, settings.model or ""), lambda: conversation.saved_session_id
    )


def _finish_run(
    report: "RunReport",
    result: "RunResult",
    renderer: "TerminalRenderer",
    chapter: int,
    output_format: OutputFormat,
) -> None:
    """Text output not streamed as it came is written whole; then the result record."""
    from agent_tutorial.core.text import printable
    from agent_tutorial.headless import RunOutcome

    if output_format is OutputFormat.text and not renderer.stream_answer:
        sys.stdout.write(printable(result.final_text.rstrip("\n")) + "\n")
    report.finish(RunOutcome("success", final_text=result.final_text), chapter=chapter)


def _init_record(conversation: "Conversation", model: str) -> dict[str, Any]:
    from agent_tutorial.headless import init_record

    agent = conversation.agent
    return init_record(
        session_id=conversation.session_id,
        chapter=agent.profile.chapter,
        model=model,
        tools=[spec.name for spec in agent.runner.tools.specs()],
        cwd=str(agent.workspace),
    )


def _resume_choice(
    workspace: Path, latest: bool, session_id: str | None, err: "Console"
) -> "ResumeChoice | None":
    """The session to resume, validated; the newer ones `--continue` skipped are named."""
    from agent_tutorial.features.sessions import SessionError, SessionLookupError
    from agent_tutorial.resuming import NothingToContinue, choose_session

    if latest and session_id is not None:  # which one was meant is a guess: ask
        raise RunFailed("--continue and --resume each choose a session; pass one", EXIT_USAGE)
    try:
        choice = choose_session(workspace, latest, session_id)
    except NothingToContinue as error:
        _print_warnings(err, error.skipped)
        raise RunFailed(str(error), EXIT_USAGE) from None
    except SessionLookupError as error:
        raise RunFailed(str(error), EXIT_USAGE) from None
    except SessionError as error:
        raise RunFailed(f"cannot resume: {error}", EXIT_FAILURE) from None
    if choice is not None:
        _print_warnings(err, choice.skipped)
    return choice


def _chapter_or_note(choice: "ResumeChoice | None", requested: int | None, err: "Console") -> int:
    from agent_tutorial.resuming import chapter_for

    chapter, note = chapter_for(choice, requested)
    if note is not None:
        _print_warnings(err, [note])
    return chapter


def _print_warnings(err: "Console", lines: list[str]) -> None:
    from rich.text import Text

    from agent_tutorial.core.text import printable

    for line in lines:
        err.print(Text.assemble(("warning: ", "yellow"), printable(line)), highlight=False)


def _open_or_exit(
    setup: "ConversationSetup", resume: "ResumeChoice | None", err: "Console"
) -> "Conversation":
    """A new conversation, or the resumed one, which is then named on stderr."""
    from agent_tutorial.conversation import Conversation
    from agent_tutorial.features.sessions import SessionError

    try:
        conversation = Conversation.open(setup, None if resume is None else resume.path)
    except SessionError as error:
        raise RunFailed(f"cannot resume: {error}", EXIT_FAILURE) from None
    if resume is not None:
        err.print(resume.resumed_line(setup.profile.chapter), style="dim", highlight=False)
    return conversation


def _settings_or_exit(workspace: Path, flags: Mapping[str, object]) -> "Settings":
    from agent_tutorial.config import ConfigError, load_settings, missing_settings

    try:
        settings = load_settings(workspace, flags)
    except ConfigError as error:
        raise RunFailed(str(error), EXIT_USAGE) from None
    missing = missing_settings(settings)
    if missing:
        raise RunFailed(
            f"missing setting(s): {', '.join(missing)}. Set them in the environment or in "
            ".agent_tutorial/ (see .agent_tutorial.example/), or use --model demo.",
            EXIT_USAGE,
        )
    return settings


def _with_probed_window(settings: "Settings", chapter: int) -> "Settings":
    """Chapter 8 budgets against the model's window: unset, ask the server (briefly; a
    server that does not say leaves it unknown)."""
    from agent_tutorial.profiles import Capability, profile_for_chapter

    compaction = Capability.COMPACTION in profile_for_chapter(chapter)
    if settings.context_window_tokens is not None or settings.is_demo or not compaction:
        return settings
    from agent_tutorial.adapters.context_probe import probe_context_window

    key = settings.api_key.get_secret_value() if settings.api_key else None
    window = probe_context_window(settings.base_url or "", key, settings.model or "")
    return settings.model_copy(update={"context_window_tokens": window})


def _stdin_is_terminal() -> bool:
    return sys.stdin is not None and sys.stdin.isatty()  # None: started with stdin closed


def _prompt_or_exit(prompt: str | None, max_stdin_bytes: int) -> str:
    """The prompt to run: `--prompt`, piped input, or both joined as Claude Code does
    (the piped text first, as context, then the prompt)."""
    piped = _piped_input(max_stdin_bytes)
    if prompt is None and piped is None:
        raise RunFailed("no prompt: pass --prompt TEXT or pipe one on standard input", EXIT_USAGE)
    if prompt is not None:
        # An argument in another encoding arrives with surrogate escapes for its bytes.
        prompt = _decode_prompt(os.fsencode(prompt), "the --prompt text")
    if piped and prompt:
        prompt = f"{piped.rstrip()}\n\n{prompt}"
    prompt = prompt or piped or ""
    if not prompt.strip():
        raise RunFailed("the prompt is empty", EXIT_USAGE)
    return prompt


def _piped_input(max_bytes: int) -> str | None:
    """Standard input when it is a pipe or a file, read up to `max_bytes`; None for a
    terminal, /dev/null, a socket or a closed stdin, which are never waited on."""
    if sys.stdin is None or sys.stdin.isatty() or not _is_pipe_or_file(sys.stdin):
        return None
    data = sys.stdin.buffer.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise RunFailed(
            f"standard input is larger than {max_bytes:,} bytes (max_stdin_bytes); "
            "save it to a file in the workspace and name the file in the prompt instead",
            EXIT_USAGE,
        )
    return _decode_prompt(data, "standard input")


def _is_pipe_or_file(stream: object) -> bool:
    try:
        mode = os.fstat(stream.fileno()).st_mode  # type: ignore[attr-defined]
    except (AttributeError, OSError, ValueError):
        return True  # an in-memory stream (a test runner's): read it
    return stat.S_ISFIFO(mode) or stat.S_ISREG(mode)


def _decode_prompt(data: bytes, source: str) -> str:
    """Strict UTF-8: a guessed decoding would hand the model text the user never wrote."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise RunFailed(
            f"{source} is not UTF-8 text (byte 0x{data[error.start]:02x} at offset "
            f"{error.start}); convert it first, e.g. with iconv -t UTF-8",
            EXIT_USAGE,
        ) from None


def _model_for(
    settings: "Settings", workspace: Path, chapter: int, opened: ExitStack
) -> "ModelClient":
    """The model for the run; an adapter's connections are closed with `opened`."""
    if settings.is_demo:
        from agent_tutorial.adapters.demo import DemoModel

        return DemoModel(workspace, long_session=chapter == 8)
    from agent_tutorial.adapters.chat_wire import WireOptions
    from agent_tutorial.adapters.openai_chat import OpenAIChatModel
    from agent_tutorial.core.model import clamp_output_tokens

    key = settings.api_key.get_secret_value() if settings.api_key else "not-needed"
    wire = WireOptions(
        send_tool_choice=settings.send_tool_choice,
        stream=settings.stream,
        # A quarter of a known window at most, so that a prompt plus the cap still fits.
        max_output_tokens=clamp_output_tokens(
            settings.max_output_tokens, settings.context_window_tokens
        ),
        merge_reminders=settings.merge_reminders,
    )
    adapter = OpenAIChatModel(
        base_url=settings.base_url or "",
        api_key=key,
        model=settings.model or "",
        max_retries=settings.max_retries,
        timeout_s=settings.request_timeout_s,
        wire=wire,
    )
    return opened.enter_context(adapter)


def _run_or_exit(conversation: "Conversation", prompt: str) -> "RunResult":
    from agent_tutorial.core.loop import AgentRunError, MaxTurnsExceeded, TurnInterrupted
    from agent_tutorial.core.model import ModelError

    try:
        return conversation.run(prompt)
    except (TurnInterrupted, KeyboardInterrupt):
        raise _interrupted() from None
    except MaxTurnsExceeded as error:
        raise RunFailed(str(error), EXIT_FAILURE, "error_max_turns") from None
    except (AgentRunError, ModelError) as error:
        raise RunFailed(str(error), EXIT_FAILURE) from None


def _repl_or_exit(
    conversation: "Conversation",
    report: "RunReport",
    renderer: "TerminalRenderer",
    settings: "Settings",
) -> None:
    """The REPL until it ends; SIGTERM or SIGHUP end it as an interrupted run."""
    from agent_tutorial.adapters.processes import termination_exit_code
    from agent_tutorial.core.loop import TurnInterrupted
    from agent_tutorial.repl import Repl

    repl = Repl(conversation, report.summary, renderer, model_name=settings.model or "")
    try:
        repl.loop()
    except (TurnInterrupted, KeyboardInterrupt):
        if termination_exit_code() is None:
            raise  # a bug: the REPL handles Ctrl-C itself
    if termination_exit_code() is not None:
        raise _interrupted()


def _interrupted() -> RunFailed:
    """Ctrl-C (130), or SIGTERM (143) and SIGHUP (129), which end a run the same way."""
    from agent_tutorial.adapters.processes import termination_exit_code, termination_name

    code = termination_exit_code()
    if code is None:
        return RunFailed("interrupted", EXIT_INTERRUPTED)
    return RunFailed(f"interrupted by {termination_name()}", code)


def _fail(err: "Console", message: str, code: int) -> NoReturn:
    _print_error(err, message)
    raise typer.Exit(code)


def _print_error(err: "Console", message: str) -> None:
    from agent_tutorial.render import error_line

    err.print(error_line(message), highlight=False)


artifacts_app = typer.Typer(help="Chapter 8's persisted tool results and transcripts.")
app.add_typer(artifacts_app, name="artifacts")


@artifacts_app.command("list")
def artifacts_list() -> None:
    """Every artifact in .agent_tutorial/artifacts, newest first."""
    from agent_tutorial.features.artifact_catalog import list_artifacts
    from agent_tutorial.render import artifact_table, make_consoles

    out, _ = make_consoles()
    found = list_artifacts(Path.cwd().resolve())
    if not found:
        out.print("no artifacts yet (chapter 8 writes them when results are large)")
        return
    out.print(artifact_table(found))


@artifacts_app.command("show")
def artifacts_show(
    reference: Annotated[str, typer.Argument(help="An id, id prefix, file name or path.")],
    raw: Annotated[bool, typer.Option("--raw", help="Print the stored bytes as they are.")] = False,
) -> None:
    """Print one artifact in full (a transcript as a table unless --raw). A tool's output
    may hold escape sequences: they are shown as text (`\\x1b`) unless --raw."""
    from agent_tutorial.features.artifact_catalog import ArtifactLookupError, find_artifact
    from agent_tutorial.render import make_consoles, messages_table, transcript_records

    out, err = make_consoles()
    try:
        info = find_artifact(Path.cwd().resolve(), reference)
        data = info.path.read_bytes()
    except (ArtifactLookupError, OSError) as error:
        _fail(
            err, str(error), EXIT_USAGE if isinstance(error, ArtifactLookupError) else EXIT_FAILURE
        )
    if raw:
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
        return
    if info.kind != "transcript":
        from agent_tutorial.core.text import printable

        sys.stdout.write(printable(data.decode("utf-8", "surrogateescape")))
        sys.stdout.flush()
        return
    out.print(messages_table(transcript_records(data), title=info.relative_path))


@artifacts_app.command("prune")
def artifacts_prune(
    older_than: Annotated[str, typer.Option(help="Age such as 12h, 7d or 2w.")] = "7d",
    yes: Annotated[bool, typer.Option("--yes", help="Really delete (default: dry run).")] = False,
) -> None:
    """Delete artifacts older than an age; only lists them unless --yes."""
    from agent_tutorial.features.artifact_catalog import (
        artifacts_older_than,
        delete_artifacts,
        parse_age,
    )
    from agent_tutorial.render import format_bytes, make_consoles

    out, err = make_consoles()
    try:
        age = parse_age(older_than)
    except ValueError as error:
        _fail(err, str(error), EXIT_USAGE)
    old = artifacts_older_than(Path.cwd().resolve(), age)
    for info in old:
        out.print(f"{info.relative_path}  {format_bytes(info.size)}", highlight=False)
    if not yes:
        out.print(f"{len(old)} artifact(s) older than {older_than}; dry run, pass --yes to delete")
        return
    freed = delete_artifacts(old)
    out.print(f"deleted {len(old)} artifact(s), {format_bytes(freed)} freed")


sessions_app = typer.Typer(help="Saved conversations in .agent_tutorial/sessions.")
app.add_typer(sessions_app, name="sessions")


@sessions_app.command("list", short_help="Saved sessions, newest first, damaged ones too.")
def sessions_list(
    check: Annotated[
        bool, typer.Option("--check", help="Read every file whole and show its first bad line.")
    ] = False,
) -> None:
    """Saved sessions, newest first, damaged ones too (listing reads only each file's first
    lines; --check reads them whole, as resuming would). With --check, exit 1 if any is
    damaged."""
    from rich.text import Text

    from agent_tutorial.core.text import printable
    from agent_tutorial.features.sessions import SessionError, check_session, list_sessions
    from agent_tutorial.render import make_consoles, session_table

    out, err = make_consoles()
    try:
        found = list_sessions(Path.cwd().resolve())
    except SessionError as error:
        _fail(err, str(error), EXIT_FAILURE)
    if not found:
        out.print("no saved sessions in this workspace")
        return
    if not check:
        out.print(session_table(found))
        return
    problems = [check_session(info).problem for info in found]
    out.print(session_table(found, problems))
    damaged = [(info, problem) for info, problem in zip(found, problems, strict=True) if problem]
    for info, problem in damaged:
        out.print(Text(f"{info.session_id}: {printable(problem)}"), soft_wrap=True)
    if damaged:
        _fail(err, f"{len(damaged)} of {len(found)} session(s) cannot be resumed", EXIT_FAILURE)


@sessions_app.command(
    "prune", short_help="Delete sessions older than an age (a dry run without --yes)."
)
def sessions_prune(
    older_than: Annotated[
        str, typer.Option(help="Age since the last write, such as 12h, 30d or 2w.")
    ] = "30d",
    yes: Annotated[bool, typer.Option("--yes", help="Really delete (default: dry run).")] = False,
) -> None:
    """Delete sessions last written before an age; only lists them unless --yes. A session
    open in another process is kept."""
    from agent_tutorial.features.artifact_catalog import parse_age
    from agent_tutorial.features.sessions import (
        SessionError,
        delete_sessions,
        sessions_older_than,
    )
    from agent_tutorial.render import format_bytes, make_consoles

    out, err = make_consoles()
    try:
        age = parse_age(older_than)
        old = sessions_older_than(Path.cwd().resolve(), age)
    except ValueError as error:
        _fail(err, str(error), EXIT_USAGE)
    except SessionError as error:
        _fail(err, str(error), EXIT_FAILURE)
    for info in old:
        out.print(f"{info.path.name}  {format_bytes(info.size_bytes)}", highlight=False)
    if not yes:
        out.print(f"{len(old)} session(s) older than {older_than}; dry run, pass --yes to delete")
        return
    deleted, kept = delete_sessions(old)
    _print_warnings(err, kept)
    freed = sum(info.size_bytes for info in deleted)
    out.print(f"deleted {len(deleted)} session(s), {format_bytes(freed)} freed")


@sessions_app.command("show")
def sessions_show(
    session_id: Annotated[str, typer.Argument(help="An id or unique prefix.")],
) -> None:
    """One session's conversation as a table."""
    from agent_tutorial.core.messages import to_wire
    from agent_tutorial.features.sessions import SessionError, find_session, load_session
    from agent_tutorial.render import make_consoles, messages_table

    out, err = make_consoles()
    try:
        path = find_session(Path.cwd().resolve(), session_id)
        loaded = load_session(path, repair=False)
    except (SessionError, OSError) as error:
        _fail(err, str(error), EXIT_USAGE)
    out.print(messages_table([to_wire(m) for m in loaded.history], title=path.name))


@app.command(short_help="Compare chapter 8's context strategies on one conversation.")
def bench(
    turns: Annotated[
        int | None, typer.Option(min=1, max=5_000, help="Model calls of the synthetic trace.")
    ] = None,
    seed: Annotated[int | None, typer.Option(help="Seed of the synthetic trace.")] = None,
    session: Annotated[
        str | None, typer.Option(help="Replay this recorded session (an id or prefix) instead.")
    ] = None,
    context_window: Annotated[
        int, typer.Option(min=1_024, help="The model's context window in tokens.")
    ] = 128_000,
    json_output: Annotated[bool, typer.Option("--json", help="One JSON object on stdout.")] = False,
    plot: Annotated[
        Path | None,
        typer.Option(help="Also save cost against retention as a PNG (needs matplotlib)."),
    ] = None,
) -> None:
    """Replay one conversation through chapter 8's strategies and its peers, and compare
    bytes, modelled prefix-cache hits and input cost."""
    from agent_tutorial.features.bench import run_bench
    from agent_tutorial.render import make_consoles

    out, err = make_consoles()
    if session is not None and (turns is not None or seed is not None):
        _fail(err, "--session replays a recorded session; drop --turns and --seed", EXIT_USAGE)
    if plot is not None:
        _check_plot_or_exit(err)
    if session is not None:
        trace, source = _session_trace_or_exit(session, err)
    else:
        trace, source = _synthetic_trace(turns, seed)
    report = run_bench(trace, source, context_window)
    _print_bench(report, out, json_output=json_output)
    if plot is not None:
        _save_plot_or_exit(report, plot, err)


def _synthetic_trace(turns: int | None, seed: int | None) -> tuple[list["TraceStep"], str]:
    from agent_tutorial.features.bench import synthetic_trace

    steps, chosen_seed = turns or 300, 591 if seed is None else seed
    trace = synthetic_trace(steps, chosen_seed)
    return trace, f"synthetic trace, {steps:,} steps, seed {chosen_seed}"


def _print_bench(report: "BenchReport", out: "Console", *, json_output: bool) -> None:
    """One JSON object, or the table: as wide as the terminal, or a fixed width in a pipe."""
    from agent_tutorial.features.bench.report import TABLE_WIDTH, bench_record, print_bench

    if json_output:
        import orjson

        sys.stdout.write(orjson.dumps(bench_record(report), option=orjson.OPT_INDENT_2).decode())
        sys.stdout.write("\n")
        return
    from rich.console import Console

    width = None if out.is_terminal else TABLE_WIDTH
    print_bench(report, Console(file=sys.stdout, width=width))


def _check_plot_or_exit(err: "Console") -> None:
    from agent_tutorial.features.bench.report import PlotUnavailableError, check_plot_available

    try:
        check_plot_available()
    except PlotUnavailableError as error:
        _fail(err, str(error), EXIT_USAGE)


def _save_plot_or_exit(report: "BenchReport", plot: Path, err: "Console") -> None:
    from agent_tutorial.features.bench.report import PlotUnavailableError, save_plot

    try:
        save_plot(report, plot)
    except PlotUnavailableError as error:
        _fail(err, str(error), EXIT_USAGE)
    except OSError as error:
        _fail(err, f"cannot write {plot}: {error.strerror or error}", EXIT_FAILURE)


def _session_trace_or_exit(session_id: str, err: "Console") -> tuple[list["TraceStep"], str]:
    from agent_tutorial.features.bench import session_trace
    from agent_tutorial.features.sessions import SessionError, find_session, load_session

    try:
        path = find_session(Path.cwd().resolve(), session_id)
        loaded = load_session(path, repair=False)
    except (SessionError, OSError) as error:
        _fail(err, str(error), EXIT_USAGE)
    trace = session_trace(loaded.history)
    if not trace:
        _fail(err, f"session {loaded.meta.session_id} has no model calls to replay", EXIT_USAGE)
    return trace, f"session {loaded.meta.session_id}, {len(trace):,} model calls"


def main() -> None:
    global _adopt_orphans
    from agent_tutorial.adapters.processes import terminate_like_ctrl_c

    # Only the real command adopts orphans and turns SIGTERM/SIGHUP into Ctrl-C: a test
    # runner that calls `app` in-process keeps its own signal handling and children.
    _adopt_orphans = True
    try:
        with terminate_like_ctrl_c():
            app()
    except BrokenPipeError:  # `agent-tutorial … | head` closed our stdout: not an error
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # so the interpreter's final flush stays quiet
        sys.exit(EXIT_OK)
