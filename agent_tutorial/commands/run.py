"""What `agent-tutorial run` does once its flags are parsed: settle the settings and the
session, have the composition root connect the model and build the conversation, then run
the one prompt (or open the REPL) and report. A failure goes on to the edge
(`commands.edge`) as an `AgentTutorialError`; a JSON run first ends with its result object.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Mapping
from contextlib import ExitStack, closing
from dataclasses import replace
from enum import StrEnum
from typing import TYPE_CHECKING, Any, NamedTuple

import typer

from agent_tutorial.commands.edge import CommandFailed, print_warnings, use_error_console
from agent_tutorial.commands.process import adopt_orphans, current_project
from agent_tutorial.commands.prompt_input import read_prompt, stdin_is_terminal
from agent_tutorial.core.errors import (
    EXIT_FAILURE,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    AgentTutorialError,
)

# Everything heavy is imported where it is used: this module is on every command's start-up
# path (tests/test_startup.py guards it).
if TYPE_CHECKING:
    from rich.console import Console

    from agent_tutorial.commands.trust import FolderTrust
    from agent_tutorial.config import Settings
    from agent_tutorial.conversation import Conversation
    from agent_tutorial.core.events import EventSink
    from agent_tutorial.core.loop import RunResult
    from agent_tutorial.features.compaction import CompactionStrategy
    from agent_tutorial.headless import ResultSubtype, RunReport
    from agent_tutorial.project import Project
    from agent_tutorial.render import TerminalRenderer
    from agent_tutorial.resuming import ResumeChoice


class OutputFormat(StrEnum):
    text = "text"
    json = "json"
    stream_json = "stream-json"


def run_command(ctx: typer.Context, options: RunOptions, *, no_color: bool) -> None:
    """The whole `run`: its output (text, or JSON ending with one result object either
    way) and, on failure, the error for the edge to print."""
    from agent_tutorial.headless import RunOutcome, RunReport
    from agent_tutorial.render import make_consoles

    out, err = make_consoles(no_color=no_color)
    use_error_console(ctx, err)
    report = RunReport(options.output_format.value, file=sys.stdout, started=time.monotonic())
    try:
        with ExitStack() as opened:  # what the run opened (the model's connections)
            _run(options, report, out, err, opened)
    except AgentTutorialError as failure:  # a JSON run still ends with its result object
        outcome = RunOutcome(_subtype(failure), error=str(failure))
        report.finish(outcome, chapter=options.chapter or 8)
        raise


def report_refused_command_line(output_format: str, message: str) -> None:
    """A JSON run whose command line typer refused (`-c 9`, `--max-turns 0`) still prints
    its one result object; the usage error itself goes to stderr as usual."""
    from agent_tutorial.headless import RunOutcome, RunReport

    report = RunReport(output_format, file=sys.stdout, started=time.monotonic())
    report.finish(RunOutcome("error_during_execution", error=message), chapter=None)


def _subtype(failure: AgentTutorialError) -> ResultSubtype:
    return failure.subtype if isinstance(failure, CommandFailed) else "error_during_execution"


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
    compaction: CompactionStrategy | None = None
    trust_project: bool = False
    """`--trust-project`: the project's powerful settings apply to this run, unrecorded."""


def _run(
    options: RunOptions, report: RunReport, out: Console, err: Console, opened: ExitStack
) -> None:
    """Settle the settings and the session, open the conversation, then either hand it to
    the REPL or run the one prompt and report its answer."""
    from agent_tutorial.render import rendering
    from agent_tutorial.resuming import chapter_for

    adopt_orphans()
    project = current_project()
    interactive = options.prompt is None and stdin_is_terminal()
    if interactive:
        _refuse_json_repl(options.output_format)
    trust = _folder_trust(project, options.trust_project, err, may_ask=interactive)
    settings = _with_strategy(_settings_or_exit(trust, options.flags, err), options.compaction)
    resume = _resume_choice(trust, options.resume_latest, options.resume_id, err)
    chapter = chapter_for(resume, options.chapter)
    _warn_of_chapter_8_flags(options, chapter, err)
    text = "" if interactive else read_prompt(options.prompt, settings.max_stdin_bytes)
    renderer = _renderer(options, out, err, interactive=interactive)
    # Only now connect (chapter 8 asks the server for its window): a usage error should not
    # wait on the network.
    sinks = report.sinks(renderer, waiting_interval_s=settings.waiting_event_interval_s)
    conversation = _open_or_exit(trust, settings, chapter, sinks, resume, err, opened)
    settings = conversation.setup.settings  # with the window the server named
    _start_report(report, conversation, settings, trust)
    with closing(conversation):
        if interactive:
            relaunch = _resume_command(options.flags)
            _repl_or_exit(conversation, report, renderer, settings, relaunch)
            return
        with rendering(renderer):
            result = _run_or_exit(conversation, text)
    _finish_run(report, result, renderer, chapter, options.output_format)


def _refuse_json_repl(output_format: OutputFormat) -> None:
    """The REPL speaks text: opening it would silently drop the JSON that was asked for."""
    if output_format is not OutputFormat.text:
        raise CommandFailed(
            f"--output-format {output_format.value} needs a prompt: pass --prompt TEXT or "
            "pipe one on standard input",
            EXIT_USAGE,
        )


def _with_strategy(settings: Settings, strategy: CompactionStrategy | None) -> Settings:
    """The settings with `--compaction`'s strategy, when it was given."""
    if strategy is None:
        return settings
    compaction = replace(settings.compaction, strategy=strategy)
    return settings.model_copy(update={"compaction": compaction})


def _renderer(
    options: RunOptions, out: Console, err: Console, *, interactive: bool
) -> TerminalRenderer:
    """An answer shown on a terminal (the REPL's, or a one-shot run's text) streams and is
    rendered as Markdown: `**Found**` reads as bold, not as asterisks; the REPL repaints
    it as it grows, a one-shot run prints each block once complete. To a pipe it is
    written whole at the end, as the model wrote it, or as JSON."""
    from agent_tutorial.render import TerminalRenderer

    text_output = options.output_format is OutputFormat.text
    on_terminal = interactive or (text_output and out.is_terminal)
    return TerminalRenderer(
        out,
        err,
        stream_answer=on_terminal,
        verbose=options.verbose,
        markdown=on_terminal,
        live=interactive,
    )


def _start_report(
    report: RunReport, conversation: Conversation, settings: Settings, trust: FolderTrust
) -> None:
    window = conversation.agent.context_meter.window
    report.summary.context_window_tokens = None if window is None else window.tokens
    init = _init_record(conversation, settings.model or "", trust.ignored_settings())
    report.start(init, lambda: conversation.saved_session_id)


def _finish_run(
    report: RunReport,
    result: RunResult,
    renderer: TerminalRenderer,
    chapter: int,
    output_format: OutputFormat,
) -> None:
    """Text output not streamed as it came is written whole; then the result record."""
    from agent_tutorial.core.text import printable
    from agent_tutorial.headless import RunOutcome

    if output_format is OutputFormat.text and not renderer.stream_answer:
        sys.stdout.write(printable(result.final_text.rstrip("\n")) + "\n")
    report.finish(RunOutcome("success", final_text=result.final_text), chapter=chapter)


def _init_record(
    conversation: Conversation, model: str, ignored_project_settings: list[str]
) -> dict[str, Any]:
    from agent_tutorial.headless import init_record

    agent = conversation.agent
    return init_record(
        session_id=conversation.session_id,
        chapter=agent.profile.chapter,
        model=model,
        tools=[spec.name for spec in agent.runner.tools.specs()],
        cwd=str(agent.workspace),
        project_root=str(agent.project_root),
        ignored_project_settings=ignored_project_settings,
        mcp_servers=conversation.setup.deps.mcp.started(),
    )


def _resume_choice(
    trust: FolderTrust, latest: bool, session_id: str | None, err: Console
) -> ResumeChoice | None:
    """The session to resume, validated; the newer ones `--continue` skipped are named (in
    an untrusted folder, those it did not write for this user too)."""
    from agent_tutorial.features.sessions import SessionError, SessionLookupError
    from agent_tutorial.resuming import NothingToContinue, choose_session

    if latest and session_id is not None:  # which one was meant is a guess: ask
        raise CommandFailed("--continue and --resume each choose a session; pass one", EXIT_USAGE)
    try:
        choice = choose_session(
            trust.project.root, latest, session_id, others_sessions=not latest or trust.trusted
        )
    except NothingToContinue as error:
        print_warnings(err, error.skipped)
        raise CommandFailed(str(error), EXIT_USAGE) from None
    except SessionLookupError as error:
        raise CommandFailed(str(error), EXIT_USAGE) from None
    except SessionError as error:
        raise CommandFailed(f"cannot resume: {error}", EXIT_FAILURE) from None
    if choice is not None:
        print_warnings(err, choice.skipped)
    return choice


def _warn_of_chapter_8_flags(options: RunOptions, chapter: int, err: Console) -> None:
    """`--compaction` and `--context-window` are chapter 8's flags: given to another
    chapter, say what they do there rather than let them pass in silence."""
    from agent_tutorial.bootstrap import compacts
    from agent_tutorial.profiles import profile_for_chapter

    if compacts(profile_for_chapter(chapter)):
        return
    warnings = []
    if options.compaction is not None:
        warnings.append(
            f"--compaction is for chapter 8; chapter {chapter} does not compact, so it does "
            "nothing here"
        )
    if options.flags.get("context_window_tokens") is not None:
        warnings.append(
            f"--context-window is for chapter 8, which keeps requests within the window; "
            f"chapter {chapter} only caps each reply at a quarter of it"
        )
    print_warnings(err, warnings)


def _resume_command(flags: Mapping[str, object]) -> str:
    """The command the REPL's farewell offers, up to its `-c N --resume ID`: the program as
    it was invoked, and the endpoint flags that were given (without them a `--model demo`
    session would resume asking for settings)."""
    import shlex

    from agent_tutorial.commands.process import command_as_invoked
    from agent_tutorial.features.redaction import mask_url_passwords

    words = [command_as_invoked(), "run"]
    for flag, key in (("--model", "model"), ("--base-url", "base_url")):
        value = flags.get(key)
        if value is not None:
            words += [flag, shlex.quote(mask_url_passwords(str(value)))]
    return " ".join(words)


def _open_or_exit(
    trust: FolderTrust,
    settings: Settings,
    chapter: int,
    sinks: list[EventSink],
    resume: ResumeChoice | None,
    err: Console,
    opened: ExitStack,
) -> Conversation:
    """The session, from the one composition call: a new conversation, or the resumed
    one, which is then named on stderr. Approval is asked only when a person is there to
    answer on a terminal."""
    from agent_tutorial.approval import TerminalApprover
    from agent_tutorial.composition import FrontEnd, ReadProject, open_session
    from agent_tutorial.features.sessions import SessionError
    from agent_tutorial.profiles import profile_for_chapter

    read = ReadProject(trust.project, trust.settings, settings)
    approver = TerminalApprover(err) if stdin_is_terminal() and err.is_terminal else None
    front_end = FrontEnd(sinks, approver, warn=lambda text: print_warnings(err, [text]))
    resume_path = None if resume is None else resume.path
    try:
        conversation = open_session(
            read, profile_for_chapter(chapter), front_end, opened, resume=resume_path
        )
    except SessionError as error:
        raise CommandFailed(f"cannot resume: {error}", EXIT_FAILURE) from None
    if resume is not None:
        err.print(resume.resumed_line(chapter), style="dim", highlight=False)
    return conversation


def _folder_trust(
    project: Project, for_this_run: bool, err: Console, *, may_ask: bool
) -> FolderTrust:
    """Whether the project's powerful settings apply: trusted already, by `--trust-project`,
    or (about to open the REPL on a terminal) by the user's answer; else the one line that
    names each ignored setting. `-p` never asks."""
    from agent_tutorial.commands.trust import FolderTrust
    from agent_tutorial.config import read_project_settings

    trust = FolderTrust(project, read_project_settings(project.root), for_this_run=for_this_run)
    if trust.needs_trust and may_ask and err.is_terminal:
        try:
            trust.ask(err)
        except KeyboardInterrupt:
            raise _interrupted() from None
    warning = trust.warning()
    if warning is not None:
        print_warnings(err, [warning])
    return trust


def _settings_or_exit(trust: FolderTrust, flags: Mapping[str, object], err: Console) -> Settings:
    """The settings of the project (a `ConfigError` is a usage error, exit 2), with every
    one set that a run needs; a key taken from the project's `.env` is named once, and so
    is each of its lines that would set nothing for lack of the `AGENT_TUTORIAL_` prefix."""
    from agent_tutorial.config import (
        key_from_project_dotenv,
        load_settings,
        missing_settings,
        unread_dotenv_lines,
    )
    from agent_tutorial.core.paths import STATE_DIR
    from agent_tutorial.core.text import printable

    project = trust.settings
    print_warnings(err, unread_dotenv_lines(project))
    settings = load_settings(
        trust.project.root, flags, project=project, trusted=not trust.needs_trust
    )
    key_name = key_from_project_dotenv(settings, project)
    if key_name is not None:
        shown = printable(f"{key_name} from {STATE_DIR}/.env in {trust.project.root}")
        note = f"using {shown}"
        err.print(note, style="dim", markup=False, highlight=False)
    missing = missing_settings(settings)
    if missing:
        raise CommandFailed(
            f"missing setting(s): {', '.join(missing)}. Set them in the environment or in "
            ".agent_tutorial/ (see .agent_tutorial.example/), or use --model demo.",
            EXIT_USAGE,
        )
    return settings


def _run_or_exit(conversation: Conversation, prompt: str) -> RunResult:
    """The run's result; a model or run error goes on to the edge as it is (exit 1)."""
    from agent_tutorial.core.loop import MaxTurnsExceeded, TurnInterrupted

    try:
        return conversation.run(prompt)
    except (TurnInterrupted, KeyboardInterrupt):
        raise _interrupted() from None
    except MaxTurnsExceeded as error:
        raise CommandFailed(str(error), EXIT_FAILURE, "error_max_turns") from None


def _repl_or_exit(
    conversation: Conversation,
    report: RunReport,
    renderer: TerminalRenderer,
    settings: Settings,
    resume_command: str,
) -> None:
    """The REPL until it ends; left with Ctrl-C twice it exits 130, and SIGTERM or SIGHUP
    end it as an interrupted run."""
    from agent_tutorial.commands.process import termination_exit_code
    from agent_tutorial.core.loop import TurnInterrupted
    from agent_tutorial.repl import Repl

    repl = Repl(
        conversation,
        report.summary,
        renderer,
        model_name=settings.model or "",
        resume_command=resume_command,
    )
    exit_code = EXIT_OK
    try:
        exit_code = repl.loop()
    except (TurnInterrupted, KeyboardInterrupt):
        if termination_exit_code() is None:
            raise  # a bug: the REPL handles Ctrl-C itself
    if termination_exit_code() is not None:
        raise _interrupted()
    if exit_code != EXIT_OK:
        raise typer.Exit(exit_code)  # Ctrl-C twice: the farewell said it all, no error line


def _interrupted() -> CommandFailed:
    """Ctrl-C (130), or SIGTERM (143) and SIGHUP (129), which end a run the same way."""
    from agent_tutorial.commands.process import termination_exit_code, termination_name

    code = termination_exit_code()
    if code is None:
        return CommandFailed("interrupted", EXIT_INTERRUPTED)
    return CommandFailed(f"interrupted by {termination_name()}", code)
