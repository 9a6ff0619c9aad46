"""The `agent-tutorial` command line: `run` one prompt (or open the REPL), and inspect
artifacts and sessions. This is the edge where errors become one-line messages and exit
codes: 0 done, 1 runtime failure, 2 usage or configuration error, 130 interrupted."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, NoReturn

import orjson
import typer
from rich.console import Console
from rich.text import Text

from agent_tutorial.approval import TerminalApprover
from agent_tutorial.config import (
    DEMO_MODEL,
    ConfigError,
    Settings,
    load_settings,
    missing_settings,
)
from agent_tutorial.conversation import Conversation, ConversationSetup
from agent_tutorial.core.loop import AgentRunError, RunResult, TurnInterrupted
from agent_tutorial.core.messages import to_wire
from agent_tutorial.core.model import ModelClient, ModelError
from agent_tutorial.features.artifact_catalog import (
    ArtifactLookupError,
    artifacts_older_than,
    delete_artifacts,
    find_artifact,
    list_artifacts,
    parse_age,
)
from agent_tutorial.features.sessions import (
    SessionError,
    find_session,
    latest_session,
    list_sessions,
    load_session,
)
from agent_tutorial.profiles import Capability, profile_for_chapter
from agent_tutorial.render import (
    RunSummary,
    StreamJsonSink,
    TerminalRenderer,
    artifact_table,
    format_bytes,
    make_consoles,
    messages_table,
    rendering,
    session_table,
    transcript_records,
)
from agent_tutorial.repl import Repl

EXIT_OK, EXIT_FAILURE, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="A terminal coding agent built one chapter at a time.",
)


class OutputFormat(StrEnum):
    text = "text"
    json = "json"
    stream_json = "stream-json"


class PermissionModeOption(StrEnum):
    ask = "ask"
    accept_edits = "accept-edits"
    auto = "auto"


ChapterOption = Annotated[
    int, typer.Option("--chapter", "-c", min=1, max=8, help="Chapter profile 1–8.")
]


@app.command()
def run(
    chapter: ChapterOption = 8,
    prompt: Annotated[
        str | None, typer.Option("--prompt", "-p", help="Run once with this prompt.")
    ] = None,
    model: Annotated[
        str | None, typer.Option(help=f"Model name, or '{DEMO_MODEL}' for the offline demo.")
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
    no_color: Annotated[bool, typer.Option(help="Plain output without colour.")] = False,
    continue_: Annotated[
        bool, typer.Option("--continue", help="Resume the most recent session.")
    ] = False,
    resume: Annotated[str | None, typer.Option(help="Resume the session with this id.")] = None,
    context_window: Annotated[
        int | None,
        typer.Option(
            min=256, help="The model's context window in tokens (default: ask the server)."
        ),
    ] = None,
) -> None:
    """Run the agent once on a prompt (or on standard input when it is piped); without a
    prompt on a terminal, open the REPL."""
    out, err = make_consoles(no_color=no_color)
    workspace = Path.cwd().resolve()
    mode = "auto" if yes else (permission_mode.value if permission_mode else None)
    flags = {
        "model": model,
        "base_url": base_url,
        "max_turns": max_turns,
        "permission_mode": mode,
        "context_window_tokens": context_window,
    }
    settings = _with_probed_window(_settings_or_exit(workspace, flags, err), chapter)
    interactive = prompt is None and _stdin_is_terminal()
    text = "" if interactive else _prompt_or_exit(prompt, err)
    summary = RunSummary()
    renderer = TerminalRenderer(
        out,
        err,
        stream_answer=interactive or (output_format is OutputFormat.text and out.is_terminal),
        verbose=verbose,
        markdown=interactive,
    )
    json_lines = output_format is OutputFormat.stream_json
    setup = ConversationSetup(
        profile=profile_for_chapter(chapter),
        settings=settings,
        workspace=workspace,
        model=_model_for(settings, workspace, chapter),
        approver=TerminalApprover(err) if _stdin_is_terminal() and err.is_terminal else None,
        sinks=[summary, StreamJsonSink(sys.stdout) if json_lines else renderer],
    )
    conversation = _open_or_exit(setup, _resume_path(workspace, continue_, resume, err), err)
    try:
        if interactive:
            Repl(conversation, summary, renderer, model_name=settings.model or "").loop()
            return
        with rendering(renderer):
            result = _run_or_exit(conversation, text, err)
    finally:
        conversation.close()
    _print_result(result, summary, conversation, output_format, renderer)


def _resume_path(
    workspace: Path, latest: bool, session_id: str | None, err: Console
) -> Path | None:
    try:
        if session_id is not None:
            return find_session(workspace, session_id)
        if latest:
            path = latest_session(workspace)
            if path is None:
                _fail(err, "no saved session to continue in this workspace", EXIT_USAGE)
            return path
    except SessionError as error:
        _fail(err, str(error), EXIT_USAGE)
    return None


def _open_or_exit(setup: ConversationSetup, resume: Path | None, err: Console) -> Conversation:
    try:
        return Conversation.open(setup, resume)
    except SessionError as error:
        _fail(err, f"cannot resume: {error}", EXIT_FAILURE)


def _settings_or_exit(workspace: Path, flags: Mapping[str, object], err: Console) -> Settings:
    try:
        settings = load_settings(workspace, flags)
    except ConfigError as error:
        _fail(err, str(error), EXIT_USAGE)
    missing = missing_settings(settings)
    if missing:
        _fail(
            err,
            f"missing setting(s): {', '.join(missing)}. Set them in the environment or in "
            ".agent_tutorial/ (see .agent_tutorial.example/), or use --model demo.",
            EXIT_USAGE,
        )
    return settings


def _with_probed_window(settings: Settings, chapter: int) -> Settings:
    """Chapter 8 budgets against the model's window: unset, ask the server (briefly; a
    server that does not say leaves it unknown)."""
    compaction = Capability.COMPACTION in profile_for_chapter(chapter)
    if settings.context_window_tokens is not None or settings.is_demo or not compaction:
        return settings
    from agent_tutorial.adapters.context_probe import probe_context_window

    key = settings.api_key.get_secret_value() if settings.api_key else None
    window = probe_context_window(settings.base_url or "", key, settings.model or "")
    return settings.model_copy(update={"context_window_tokens": window})


def _stdin_is_terminal() -> bool:
    return sys.stdin is not None and sys.stdin.isatty()  # None: started with stdin closed


def _prompt_or_exit(prompt: str | None, err: Console) -> str:
    if prompt is None and sys.stdin is not None and not sys.stdin.isatty():
        prompt = _decode_prompt(sys.stdin.buffer.read(), "standard input", err)
    if prompt is None:
        _fail(err, "no prompt: pass --prompt TEXT or pipe one on standard input", EXIT_USAGE)
    # An argument in another encoding arrives with surrogate escapes for its bytes.
    prompt = _decode_prompt(os.fsencode(prompt), "the --prompt text", err)
    if not prompt.strip():
        _fail(err, "the prompt is empty", EXIT_USAGE)
    return prompt


def _decode_prompt(data: bytes, source: str, err: Console) -> str:
    """Strict UTF-8: a guessed decoding would hand the model text the user never wrote."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        _fail(
            err,
            f"{source} is not UTF-8 text (byte 0x{data[error.start]:02x} at offset "
            f"{error.start}); convert it first, e.g. with iconv -t UTF-8",
            EXIT_USAGE,
        )


def _model_for(settings: Settings, workspace: Path, chapter: int) -> ModelClient:
    if settings.is_demo:
        from agent_tutorial.adapters.demo import DemoModel

        return DemoModel(workspace, long_session=chapter == 8)
    from agent_tutorial.adapters.openai_chat import OpenAIChatModel

    key = settings.api_key.get_secret_value() if settings.api_key else "not-needed"
    return OpenAIChatModel(
        base_url=settings.base_url or "",
        api_key=key,
        model=settings.model or "",
        max_retries=settings.max_retries,
        timeout_s=settings.request_timeout_s,
    )


def _run_or_exit(conversation: Conversation, prompt: str, err: Console) -> RunResult:
    try:
        return conversation.run(prompt)
    except (TurnInterrupted, KeyboardInterrupt):
        _fail(err, "interrupted", EXIT_INTERRUPTED)
    except (AgentRunError, ModelError) as error:
        _fail(err, str(error), EXIT_FAILURE)


def _print_result(
    result: RunResult,
    summary: RunSummary,
    conversation: Conversation,
    output_format: OutputFormat,
    renderer: TerminalRenderer,
) -> None:
    if output_format is OutputFormat.json:
        record = {
            "final_text": result.final_text,
            "turns": result.turns,
            "usage": {
                "prompt_tokens": summary.usage.prompt_tokens,
                "completion_tokens": summary.usage.completion_tokens,
                "total_tokens": summary.usage.total_tokens,
            },
            "chapter": conversation.agent.profile.chapter,
            "session_id": conversation.session_id,
            "tool_calls": summary.tool_calls,
            "tool_errors": summary.tool_errors,
            "compaction": summary.compaction,
        }
        sys.stdout.write(orjson.dumps(record, option=orjson.OPT_INDENT_2).decode() + "\n")
    elif output_format is OutputFormat.text and not renderer.stream_answer:
        sys.stdout.write(result.final_text.rstrip("\n") + "\n")


def _fail(err: Console, message: str, code: int) -> NoReturn:
    err.print(Text.assemble(("error: ", "bold red"), message), highlight=False)
    raise typer.Exit(code)


artifacts_app = typer.Typer(help="Chapter 8's persisted tool results and transcripts.")
app.add_typer(artifacts_app, name="artifacts")


@artifacts_app.command("list")
def artifacts_list() -> None:
    """Every artifact in .agent_tutorial/artifacts, newest first."""
    out, _ = make_consoles()
    found = list_artifacts(Path.cwd().resolve())
    if not found:
        out.print("no artifacts yet (chapter 8 writes them when results are large)")
        return
    out.print(artifact_table(found))


@artifacts_app.command("show")
def artifacts_show(
    reference: Annotated[str, typer.Argument(help="An id, id prefix, file name or path.")],
    raw: Annotated[bool, typer.Option(help="Print the stored bytes as they are.")] = False,
) -> None:
    """Print one artifact in full (a transcript as a table unless --raw)."""
    out, err = make_consoles()
    try:
        info = find_artifact(Path.cwd().resolve(), reference)
        data = info.path.read_bytes()
    except (ArtifactLookupError, OSError) as error:
        _fail(
            err, str(error), EXIT_USAGE if isinstance(error, ArtifactLookupError) else EXIT_FAILURE
        )
    if raw or info.kind != "transcript":
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
        return
    out.print(messages_table(transcript_records(data), title=info.relative_path))


@artifacts_app.command("prune")
def artifacts_prune(
    older_than: Annotated[str, typer.Option(help="Age such as 12h, 7d or 2w.")] = "7d",
    yes: Annotated[bool, typer.Option("--yes", help="Really delete (default: dry run).")] = False,
) -> None:
    """Delete artifacts older than an age; only lists them unless --yes."""
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


@sessions_app.command("list")
def sessions_list() -> None:
    """Saved sessions, newest first."""
    out, _ = make_consoles()
    found = list_sessions(Path.cwd().resolve())
    out.print(session_table(found) if found else "no saved sessions in this workspace")


@sessions_app.command("show")
def sessions_show(
    session_id: Annotated[str, typer.Argument(help="An id or unique prefix.")],
) -> None:
    """One session's conversation as a table."""
    out, err = make_consoles()
    try:
        path = find_session(Path.cwd().resolve(), session_id)
        loaded = load_session(path, repair=False)
    except (SessionError, OSError) as error:
        _fail(err, str(error), EXIT_USAGE)
    out.print(messages_table([to_wire(m) for m in loaded.history], title=path.name))


@app.command()
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
    from agent_tutorial.features import bench as bench_feature
    from agent_tutorial.features.bench.report import (
        TABLE_WIDTH,
        PlotUnavailableError,
        bench_record,
        bench_table,
        save_plot,
    )

    out, err = make_consoles()
    if session is not None and (turns is not None or seed is not None):
        _fail(err, "--session replays a recorded session; drop --turns and --seed", EXIT_USAGE)
    if session is not None:
        trace, source = _session_trace_or_exit(session, err)
    else:
        steps, chosen_seed = turns or 300, 591 if seed is None else seed
        trace = bench_feature.synthetic_trace(steps, chosen_seed)
        source = f"synthetic trace, {steps:,} steps, seed {chosen_seed}"
    report = bench_feature.run_bench(trace, source, context_window)
    if json_output:
        sys.stdout.write(orjson.dumps(bench_record(report), option=orjson.OPT_INDENT_2).decode())
        sys.stdout.write("\n")
    else:
        width = None if out.is_terminal else TABLE_WIDTH
        Console(file=sys.stdout, width=width).print(bench_table(report))
    if plot is not None:
        try:
            save_plot(report, plot)
        except PlotUnavailableError as error:
            _fail(err, str(error), EXIT_USAGE)
        except OSError as error:
            _fail(err, f"cannot write {plot}: {error.strerror or error}", EXIT_FAILURE)


def _session_trace_or_exit(session_id: str, err: Console) -> tuple[list[Any], str]:
    from agent_tutorial.features.bench import session_trace

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
    try:
        app()
    except BrokenPipeError:  # `agent-tutorial … | head` closed our stdout: not an error
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # so the interpreter's final flush stays quiet
        sys.exit(EXIT_OK)


def run_chapter(chapter: int, argv: list[str] | None = None) -> None:
    """The fixed entry `python chapters/chNN.py ARGS` = `agent-tutorial run -c NN ARGS`."""
    args = sys.argv[1:] if argv is None else argv
    app(["run", "--chapter", str(chapter), *args])
