"""The bench's outputs: a rich table for people, a JSON record for scripts, and an
optional plot of cost against retention (matplotlib, the `plot` extra). A front end, beside
`render`: it lays the table out for the terminal (`layout`), which `features/bench` may not."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from agent_tutorial.core.errors import EXIT_USAGE, AgentTutorialError
from agent_tutorial.features.bench import SUMMARIZER_TEXT, BenchReport
from agent_tutorial.features.bench.cache_model import CACHE_MODEL_TEXT
from agent_tutorial.features.bench.replay import RECENT_RESULTS, StrategyResult
from agent_tutorial.layout import KeepUnits, Trimmed, pack_cells

PLOT_SHEET = "Anthropic"
TABLE_WIDTH = 160
"""The table's width when stdout is not a terminal (a file, a pipe, a guide)."""


PLOT_UNAVAILABLE = (
    "--plot needs matplotlib: pip install 'agent-tutorial[plot]' "
    "(or .venv/bin/pip install matplotlib)"
)


class PlotUnavailableError(AgentTutorialError):
    """matplotlib is not installed (exit code 2: `--plot` asked for what cannot be done)."""

    exit_code = EXIT_USAGE


def print_bench(report: BenchReport, console: Console) -> None:
    """The table where it fits; on a terminal narrower than its columns (80 is), one block
    per strategy instead, since the table would be cropped at the right edge."""
    table = bench_table(report)
    # The natural width: rich would squeeze a table into less by eliding its cells ("1.5…").
    unbounded = console.options.update_width(10_000)
    if Measurement.get(console, unbounded, table).maximum <= console.width:
        console.print(Trimmed(table))
    else:
        console.print(KeepUnits(bench_blocks(report, console.width)))


def bench_table(report: BenchReport) -> Table:
    table = Table(title=_title(report), caption=_caption(report), caption_justify="left")
    table.add_column("strategy", no_wrap=True)
    for heading in _headings(report):
        table.add_column(heading, justify="right", no_wrap=True, min_width=len(heading))
    for result in report.results:
        table.add_row(*_row(report, result))
    return table


def bench_blocks(report: BenchReport, width: int) -> Text:
    """The table's cells as one paragraph per strategy, each `heading value` whole on a
    line of at most `width` cells."""
    blocks = Text(_title(report) + "\n\n")
    for result in report.results:
        name, *values = _row(report, result)
        cells = [f"{h} {v}" for h, v in zip(_headings(report), values, strict=True)]
        blocks.append(name, style="bold")
        blocks.append("\n" + "\n".join(pack_cells(cells, width, "  ·  ")) + "\n\n")
    return blocks.append_text(_caption(report))


def _headings(report: BenchReport) -> list[str]:
    costs = [f"{sheet.name} $" for sheet in report.sheets]
    after = ["largest", "over window", "summaries", f"last {RECENT_RESULTS} kept", "prep"]
    return ["sent", "cache hit", *costs, *after]


def _title(report: BenchReport) -> str:
    window = report.context_window_tokens
    where = f"{window:,}-token window" if window is not None else "no window"
    return f"{report.source}, {where}, {report.output_cap_tokens:,} tokens kept for the reply"


def _caption(report: BenchReport) -> Text:
    sheets = "; ".join(f"{s.name}: {s.model} ({s.as_of})" for s in report.sheets)
    return Text(
        f"{CACHE_MODEL_TEXT}\nPrices: input per million tokens, {sheets}.\n{SUMMARIZER_TEXT}\n"
        f"'last {RECENT_RESULTS} kept': mean share of the {RECENT_RESULTS} latest tool results "
        "a request carries verbatim.",
        style="dim",
    )


def _row(report: BenchReport, result: StrategyResult) -> list[str]:
    costs = [f"{result.costs[sheet.name]:.2f}" for sheet in report.sheets]
    return [
        result.name,
        f"{result.bytes_sent / 1_000_000:,.1f} MB",
        f"{result.cache_hit_share:.0%}",
        *costs,
        f"{result.largest_request_tokens:,} tok",
        str(result.over_window),
        str(result.summary_calls),
        f"{result.verbatim_share:.0%}",
        f"{result.prepare_seconds * 1000:,.0f} ms",
    ]


def bench_record(report: BenchReport) -> dict[str, Any]:
    return {
        "source": report.source,
        "context_window_tokens": report.context_window_tokens,
        "output_cap_tokens": report.output_cap_tokens,
        "cache_model": CACHE_MODEL_TEXT,
        "summarizer": SUMMARIZER_TEXT,
        "price_sheets": [
            {
                "name": s.name,
                "model": s.model,
                "input": s.input,
                "cached_input": s.cached_input,
                "cache_write": s.cache_write,
                "as_of": s.as_of,
                "source": s.source,
            }
            for s in report.sheets
        ],
        "strategies": [_result_record(result) for result in report.results],
    }


def _result_record(result: StrategyResult) -> dict[str, Any]:
    return {
        "name": result.name,
        "requests": result.requests,
        "bytes_sent": result.bytes_sent,
        "prompt_tokens": result.prompt_tokens,
        "cached_tokens": result.cached_tokens,
        "cache_hit_share": round(result.cache_hit_share, 4),
        "input_cost_usd": {name: round(cost, 4) for name, cost in result.costs.items()},
        "largest_request_tokens": result.largest_request_tokens,
        "requests_over_window": result.over_window,
        "summary_calls": result.summary_calls,
        f"last_{RECENT_RESULTS}_verbatim_share": round(result.verbatim_share, 4),
        "prepare_seconds": round(result.prepare_seconds, 4),
    }


def check_plot_available() -> None:
    """Raise `PlotUnavailableError` now, before a replay whose plot could not be saved."""
    if importlib.util.find_spec("matplotlib") is None:
        raise PlotUnavailableError(PLOT_UNAVAILABLE)


def save_plot(report: BenchReport, path: Path) -> None:
    """Cost under the Anthropic sheet against retention, one labelled point per strategy."""
    try:
        import matplotlib

        matplotlib.use("Agg")  # files only; never open a window
        from matplotlib import pyplot
    except ImportError:
        raise PlotUnavailableError(PLOT_UNAVAILABLE) from None
    figure, axes = pyplot.subplots(figsize=(8, 5))
    for result in report.results:
        x, y = result.verbatim_share * 100, result.costs[PLOT_SHEET]
        axes.scatter([x], [y])
        axes.annotate(result.name, (x, y), textcoords="offset points", xytext=(5, 5))
    axes.set_xlabel(f"last {RECENT_RESULTS} tool results kept verbatim (%)")
    axes.set_ylabel(f"input cost, {PLOT_SHEET} sheet ($)")
    axes.set_title(_title(report), fontsize=9)
    figure.tight_layout()
    figure.savefig(path)
    pyplot.close(figure)
