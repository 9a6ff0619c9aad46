"""The `agent-tutorial` command line: the app, `run`'s flags, and `main()`.

Here the flags are parsed; what `run` then does is `commands/run.py` (which hands the
settings and the chapter to the composition root, `bootstrap`), and the other subcommands
live in `commands/` too. Every failure is an `AgentTutorialError` (`core.errors`) that one
edge (`commands.edge.FailureEdge`) prints and turns into the exit code: 0 done, 1 runtime
failure, 2 usage or configuration error, 130 interrupted (143 on SIGTERM, 129 on SIGHUP).
"""

import os
import sys
from enum import StrEnum
from typing import Annotated, Any

import typer
from typer.core import TyperCommand, TyperOption

from agent_tutorial import __version__
from agent_tutorial.commands.artifacts import artifacts_app
from agent_tutorial.commands.bench import SHORT_HELP as BENCH_HELP
from agent_tutorial.commands.bench import bench
from agent_tutorial.commands.checkpoints import checkpoints_app, undo
from agent_tutorial.commands.edge import FailureEdge, in_our_words, is_usage_error
from agent_tutorial.commands.mcp import mcp_app
from agent_tutorial.commands.process import running_as_the_command
from agent_tutorial.commands.run import (
    OutputFormat,
    RunOptions,
    report_refused_command_line,
    run_command,
)
from agent_tutorial.commands.sessions import sessions_app
from agent_tutorial.commands.trust import trust
from agent_tutorial.core.errors import EXIT_OK

app = typer.Typer(
    cls=FailureEdge,  # the one place a failure becomes `error: …` and an exit code
    no_args_is_help=True,
    context_settings={"help_option_names": ["--help", "-h"]},  # every command inherits it
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


class PermissionModeOption(StrEnum):
    ask = "ask"
    accept_edits = "accept-edits"
    auto = "auto"


class CompactionOption(StrEnum):
    seed = "seed"
    cache_aware = "cache-aware"


class SandboxOption(StrEnum):
    workspace_write = "workspace-write"
    read_only = "read-only"
    off = "off"


class ToolCallsOption(StrEnum):
    auto = "auto"
    native = "native"
    text = "text"


ChapterOption = Annotated[
    int | None,
    typer.Option(
        "--chapter",
        "-c",
        min=1,
        max=9,
        help="Chapter profile 1–9 (default 9, or a resumed session's own chapter).",
        show_default=False,
    ),
]


class RunCommand(TyperCommand):
    """`run`, whose refused command line still ends a JSON run with one result object."""

    # `Any`: the base class types it as typer's private copy of click's Context.
    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        given = list(args)  # the parser consumes `args` as it goes
        try:
            return super().parse_args(ctx, args)
        except typer.TyperException as error:
            output_format = _given_value(self, given, "--output-format")
            if is_usage_error(error) and output_format in JSON_FORMATS:
                in_our_words(error)
                report_refused_command_line(output_format, error.format_message())
            raise


JSON_FORMATS = frozenset({OutputFormat.json.value, OutputFormat.stream_json.value})


def _given_value(command: TyperCommand, args: list[str], option: str) -> str | None:
    """`option`'s last value in `args`, read without the parser that just refused them:
    every option that takes a value skips it, so `-p --output-format` is a prompt."""
    takes_value = {
        name
        for param in command.params
        if isinstance(param, TyperOption) and not param.is_flag
        for name in param.opts
    }
    found = None
    tokens = iter(args)
    for token in tokens:
        name, equals, value = token.partition("=")
        if token == "--":
            break
        if name == option:
            found = value if equals else next(tokens, None)
        elif token in takes_value:
            next(tokens, None)
    return found


@app.command(cls=RunCommand)
def run(
    ctx: typer.Context,
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
    sandbox: Annotated[
        SandboxOption | None,
        typer.Option(
            help="What bash may touch: workspace-write (default where available), read-only "
            "or off.",
            show_default=False,
        ),
    ] = None,
    sandbox_network: Annotated[
        bool | None,
        typer.Option(
            "--sandbox-network/--no-sandbox-network",
            help="Let sandboxed commands use the network (default: off).",
            show_default=False,
        ),
    ] = None,
    trust_project: Annotated[
        bool,
        typer.Option(
            "--trust-project",
            help="Apply the project's hooks, mode, allow rules, base URL and other powerful "
            "settings for this run only (agent-tutorial trust records trust).",
        ),
    ] = False,
    tool_calls: Annotated[
        ToolCallsOption | None,
        typer.Option(
            help="auto (native, and calls written as text are read), native, or text "
            "(no tools on the wire; described in the prompt)."
        ),
    ] = None,
) -> None:
    """Run one prompt, or open the REPL.

    With --prompt, or with piped standard input, run once and print the answer; with both,
    the piped input comes first, as context. Without a prompt on a terminal, open the REPL.
    """
    options = RunOptions(
        chapter=chapter,
        prompt=prompt,
        flags={
            "model": model,
            "base_url": base_url,
            "max_turns": max_turns,
            "permission_mode": "auto" if yes else (permission_mode and permission_mode.value),
            "context_window_tokens": context_window,
            "sandbox": sandbox and sandbox.value,
            "sandbox_network": sandbox_network,
            "tool_calls": tool_calls and tool_calls.value,
        },
        output_format=output_format,
        verbose=verbose,
        resume_latest=continue_,
        resume_id=resume,
        compaction=None if compaction is None else compaction.value,
        trust_project=trust_project,
    )
    run_command(ctx, options, no_color=no_color)


# After `run`, so that help lists the commands in this order.
app.add_typer(artifacts_app, name="artifacts")
app.add_typer(sessions_app, name="sessions")
app.command(short_help="Put files back as they were before the last turns.")(undo)
app.add_typer(checkpoints_app, name="checkpoints")
app.add_typer(mcp_app, name="mcp")
app.command(short_help=BENCH_HELP)(bench)
app.command()(trust)


def main() -> None:
    # `agent-tutorial` alone does what `claude` and `codex` do: `run` with its defaults,
    # which opens the REPL on a terminal and reads a prompt from a pipe.
    arguments = sys.argv[1:] or ["run"]
    try:
        with running_as_the_command():
            app(args=arguments)
    except BrokenPipeError:  # `agent-tutorial … | head` closed our stdout: not an error
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # so the interpreter's final flush stays quiet
        sys.exit(EXIT_OK)
