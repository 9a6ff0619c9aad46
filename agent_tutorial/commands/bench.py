"""`agent-tutorial bench`: replay one conversation through chapter 8's context strategies
and its peers, and compare bytes, modelled prefix-cache hits and input cost."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from agent_tutorial.commands.edge import CommandFailed
from agent_tutorial.commands.sessions import load_named_session
from agent_tutorial.core.errors import EXIT_FAILURE, EXIT_USAGE

if TYPE_CHECKING:
    from rich.console import Console

    from agent_tutorial.features.bench import BenchReport
    from agent_tutorial.features.bench.trace import TraceStep

SHORT_HELP = "Compare chapter 8's context strategies on one conversation."


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

    out, _ = make_consoles()
    if session is not None and (turns is not None or seed is not None):
        raise CommandFailed(
            "--session replays a recorded session; drop --turns and --seed", EXIT_USAGE
        )
    if plot is not None:  # before replaying: a missing matplotlib is a usage error (exit 2)
        from agent_tutorial.bench_report import check_plot_available

        check_plot_available()
    if session is not None:
        trace, source = _session_trace(session)
    else:
        trace, source = _synthetic_trace(turns, seed)
    report = run_bench(trace, source, context_window)
    _print_bench(report, out, json_output=json_output)
    if plot is not None:
        _save_plot(report, plot)


def _synthetic_trace(turns: int | None, seed: int | None) -> tuple[list[TraceStep], str]:
    from agent_tutorial.features.bench import synthetic_trace

    steps, chosen_seed = turns or 300, 591 if seed is None else seed
    trace = synthetic_trace(steps, chosen_seed)
    return trace, f"synthetic trace, {steps:,} steps, seed {chosen_seed}"


def _print_bench(report: BenchReport, out: Console, *, json_output: bool) -> None:
    """One JSON object, or the table: as wide as the terminal or COLUMNS, or a fixed
    width in a pipe."""
    from agent_tutorial.bench_report import TABLE_WIDTH, bench_record, print_bench

    if json_output:
        import orjson

        sys.stdout.write(orjson.dumps(bench_record(report), option=orjson.OPT_INDENT_2).decode())
        sys.stdout.write("\n")
        return
    from rich.console import Console

    chosen = out.is_terminal or os.environ.get("COLUMNS", "").isdigit()  # rich reads both
    width = None if chosen else TABLE_WIDTH
    print_bench(report, Console(file=sys.stdout, width=width))


def _save_plot(report: BenchReport, plot: Path) -> None:
    from agent_tutorial.bench_report import save_plot

    try:
        save_plot(report, plot)
    except OSError as error:
        raise CommandFailed(
            f"cannot write {plot}: {error.strerror or error}", EXIT_FAILURE
        ) from None


def _session_trace(session_id: str) -> tuple[list[TraceStep], str]:
    from agent_tutorial.features.bench import session_trace

    _, loaded = load_named_session(session_id)
    trace = session_trace(loaded.history)
    if not trace:
        raise CommandFailed(
            f"session {loaded.meta.session_id} has no model calls to replay", EXIT_USAGE
        )
    return trace, f"session {loaded.meta.session_id}, {len(trace):,} model calls"
