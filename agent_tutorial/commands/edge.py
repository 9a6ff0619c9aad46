"""The one edge where a command's failure becomes `error: …` on stderr and an exit code.

Every command fails the same way: by raising an `AgentTutorialError` (`core.errors`), most
often `CommandFailed` with the message and exit code that command chose. `FailureEdge`, the
app's click group, catches it once for every command and subcommand, and prints typer's own
usage errors (an unknown flag, a value out of range) the same way, `error: …`, exit 2. `run`
also ends its JSON output with a result object on the way out (see `cli.run`).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import typer
from typer.core import TyperGroup

from agent_tutorial.commands.help_format import fit_help_to_the_terminal
from agent_tutorial.core.errors import EXIT_FAILURE, EXIT_USAGE, AgentTutorialError

if TYPE_CHECKING:  # rich is imported only when something is printed: start-up stays light
    from rich.console import Console

    from agent_tutorial.headless import ResultSubtype

_ERROR_CONSOLE = "agent_tutorial.error_console"


class CommandFailed(AgentTutorialError):
    """The command stops with a one-line message and an exit code; with a JSON output
    format, `run` still ends with one result object of `subtype`."""

    def __init__(
        self,
        message: str,
        exit_code: int = EXIT_FAILURE,
        subtype: ResultSubtype = "error_during_execution",
    ) -> None:
        super().__init__(message)
        self.exit_code = exit_code
        self.subtype: ResultSubtype = subtype


class FailureEdge(TyperGroup):
    """The app's group: an `AgentTutorialError` from any command below it is printed as one
    line and exits with the error's code; nothing else is caught (a bug keeps its
    traceback). Its help, and every command's below it, fits the terminal's width."""

    def __init__(self, **attributes: Any) -> None:
        super().__init__(**attributes)
        fit_help_to_the_terminal(self)

    # `Any`: the base class types it as typer's private copy of click's Context.
    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        with _usage_errors_as_ours(ctx):  # the app's own flags: `agent-tutorial --bogus`
            return super().parse_args(ctx, args)

    def invoke(self, ctx: Any) -> Any:
        try:
            with _usage_errors_as_ours(ctx):  # every command's flags and arguments
                return super().invoke(ctx)
        except AgentTutorialError as error:
            print_error(_error_console(ctx), str(error))
            raise typer.Exit(error.exit_code) from None


def is_usage_error(error: typer.TyperException) -> bool:
    """A command line typer refused (typer's vendored click errors all derive from
    `TyperException`; it exports none of their classes but `BadParameter`)."""
    return error.exit_code == EXIT_USAGE and not _is_help(error)


def _is_help(error: typer.TyperException) -> bool:
    """The "error" `agent-tutorial` alone raises, whose message is the help page."""
    ctx = getattr(error, "ctx", None)
    return ctx is not None and error.format_message() == ctx.get_help()


@contextmanager
def _usage_errors_as_ours(ctx: Any) -> Iterator[None]:
    """Typer's usage errors as typer prints them (the usage line and where help is), but
    ending in `error: …` as every other error does, not `Error: …`; exit 2."""
    try:
        yield
    except typer.TyperException as error:
        if not is_usage_error(error):
            raise
        refused = getattr(error, "ctx", None) or ctx
        typer.echo(f"{refused.get_usage()}\n{_help_hint(refused)}", err=True)
        in_our_words(error)
        print_error(_error_console(ctx), error.format_message())
        raise typer.Exit(EXIT_USAGE) from None


def in_our_words(error: typer.TyperException) -> None:
    """A flag's value refused by the validation typer hands it to is said as a setting's
    is (`must be at least 1 (got 0)`), not in the library's words (`Input should be…`,
    `Value error, …`)."""
    from pydantic import ValidationError

    cause = error.__cause__
    if isinstance(cause, ValidationError) and isinstance(error, typer.BadParameter):
        from agent_tutorial.config_wording import config_value_problem

        problems = cause.errors(include_url=False)
        error.message = "; ".join(config_value_problem(item, as_typed=True) for item in problems)


def _help_hint(ctx: Any) -> str:
    return f"Try '{ctx.command_path} {ctx.help_option_names[0]}' for help.\n"


def use_error_console(ctx: typer.Context, err: Console) -> None:
    """Print this command's failure on `err` (the console `--no-color` shaped)."""
    ctx.meta[_ERROR_CONSOLE] = err


def _error_console(ctx: typer.Context) -> Console:
    """The console the command chose (`ctx.meta` is shared with every nested context), or
    a plain stderr one."""
    console: Console | None = ctx.meta.get(_ERROR_CONSOLE)
    if console is None:
        from agent_tutorial.render import make_consoles

        _, console = make_consoles()
    return console


def print_error(err: Console, message: str) -> None:
    from agent_tutorial.render import error_line

    err.print(error_line(message), highlight=False)


def print_warnings(err: Console, lines: list[str]) -> None:
    from rich.text import Text

    from agent_tutorial.core.text import printable

    for line in lines:
        err.print(Text.assemble(("warning: ", "yellow"), printable(line)), highlight=False)
