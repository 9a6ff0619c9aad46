"""`agent-tutorial bench`: the synthetic trace, the cache and price model, the peers'
rules as their descriptions state them, and the command on a trace and a recorded session."""

from __future__ import annotations

import importlib.util
import io
import itertools
import json
import statistics
from pathlib import Path

import pytest
from rich.console import Console

from agent_tutorial.bench_report import print_bench
from agent_tutorial.core.messages import (
    ChatMessage,
    ToolMessage,
    assistant_message,
    tool_call,
    tool_message,
    user_message,
)
from agent_tutorial.core.tools import ToolResult
from agent_tutorial.features.bench import run_bench, session_trace, synthetic_trace
from agent_tutorial.features.bench.cache_model import (
    BYTES_PER_TOKEN,
    CACHE_BLOCK_TOKENS,
    PrefixCache,
)
from agent_tutorial.features.bench.contenders import CONTENDERS
from agent_tutorial.features.bench.peers import (
    OpencodePrune,
    OpenHandsSummarizing,
    SweAgentLastN,
)
from agent_tutorial.features.bench.prices import price_sheets
from agent_tutorial.features.bench.replay import RecordingSummarizer
from agent_tutorial.features.sessions import list_sessions
from tests.conftest import CliRun, RunCli
from tests.loopback import LoopbackServer, text_stream, tool_stream


def tool_group(number: int, size: int = 400) -> list[ChatMessage]:
    call = tool_call(f"call_{number}", "read_file", f'{{"path": "f{number}.py"}}')
    return [assistant_message(None, [call]), tool_message(f"{number}:" + "x" * size, call.id)]


def history_of(groups: int, size: int = 400) -> list[ChatMessage]:
    history: list[ChatMessage] = [user_message("go")]
    for number in range(groups):
        history += tool_group(number, size)
    return history


def is_prefix(shorter: list[ChatMessage], longer: list[ChatMessage]) -> bool:
    return list(longer[: len(shorter)]) == list(shorter)


# --- the trace ---------------------------------------------------------------------------


def test_the_same_seed_gives_the_same_trace_and_another_seed_another() -> None:
    assert synthetic_trace(60, 591) == synthetic_trace(60, 591)
    assert synthetic_trace(60, 591) != synthetic_trace(60, 592)


def test_the_trace_has_the_requested_number_of_model_calls() -> None:
    assert len(synthetic_trace(37, 1)) == 37


def test_result_sizes_are_log_normal_around_3_4_kb_with_a_heavy_tail() -> None:
    sizes = [
        len(result.content)
        for step in synthetic_trace(2_000, 7)
        for result in step.results
        if not result.content.startswith("Edited")
    ]
    assert 2_800 <= statistics.median(sizes) <= 4_000
    assert max(sizes) > 30_000  # the tail reaches layer 1's threshold


def test_a_recorded_history_becomes_one_step_per_assistant_message() -> None:
    history = [*history_of(2), assistant_message("done"), user_message("more")]

    trace = session_trace(history)

    assert [len(step.results) for step in trace] == [1, 1, 0]
    assert trace[0].before == (history[0],)
    assert trace[1].results == (ToolResult(history_of(2)[4].content or ""),)


# --- cache and prices --------------------------------------------------------------------


def test_an_identical_request_reads_its_prefix_in_whole_blocks() -> None:
    cache = PrefixCache()
    parts = [b"a" * 10_000, b"b" * 333]
    cache.read(parts)

    cached = cache.read(parts)

    assert cached % CACHE_BLOCK_TOKENS == 0
    assert cached == (10_333 // int(BYTES_PER_TOKEN)) // CACHE_BLOCK_TOKENS * CACHE_BLOCK_TOKENS


def test_a_request_that_changes_early_reads_only_what_came_before_the_change() -> None:
    cache = PrefixCache()
    cache.read([b"a" * 8_000, b"b" * 8_000])

    cached = cache.read([b"a" * 8_000, b"c" + b"b" * 7_999])

    assert cached == 2_000 // CACHE_BLOCK_TOKENS * CACHE_BLOCK_TOKENS


def test_a_shared_prefix_under_1024_tokens_reads_nothing() -> None:
    cache = PrefixCache()
    cache.read([b"a" * 4_000])

    assert cache.read([b"a" * 4_000, b"more"]) == 0


def test_uncached_tokens_are_billed_as_writes_where_a_sheet_prices_writes() -> None:
    sheets = {sheet.name: sheet for sheet in price_sheets()}
    anthropic, openai = sheets["Anthropic"], sheets["OpenAI"]

    assert anthropic.input_cost(1_000_000, 0) == anthropic.cache_write
    assert openai.input_cost(1_000_000, 0) == openai.input
    assert openai.input_cost(1_000_000, 1_000_000) == openai.cached_input


# --- the peers -----------------------------------------------------------------------------


def test_swe_agent_keeps_the_first_and_the_last_n_observations() -> None:
    request = list(SweAgentLastN(n=5).prepare(history_of(12)))

    results = [m for m in request if isinstance(m, ToolMessage)]
    elided = [m.content.startswith("Old environment output") for m in results]
    assert elided == [False] + [True] * 6 + [False] * 5


def test_swe_agent_polling_only_moves_the_cut_every_polling_steps() -> None:
    processor = SweAgentLastN(n=5, polling=10)
    history = history_of(20)
    requests = [list(processor.prepare(history[: 1 + 2 * count])) for count in range(20, 30)]

    for before, after in itertools.pairwise(requests):
        assert is_prefix(before, after)


def test_openhands_condenses_to_half_of_max_size_keeping_the_head() -> None:
    condenser = OpenHandsSummarizing(RecordingSummarizer())
    history = history_of(70)  # 141 messages > 120

    view = list(condenser.prepare(history))

    assert view[0] == history[0]
    assert len(view) <= OpenHandsSummarizing.max_size // 2
    assert view[-1] == history[-1]
    assert any("<summary>" in str(getattr(m, "content", "")) for m in view)


def test_opencode_prune_spares_the_last_two_user_turns() -> None:
    pruner = OpencodePrune(RecordingSummarizer(), window_tokens=None, output_cap=0)
    history: list[ChatMessage] = []
    for turn in range(3):
        history += [user_message(f"task {turn}")]
        history += [m for n in range(20) for m in tool_group(100 * turn + n, 12_000)]
        history += [assistant_message(f"done {turn}")]
    history.append(user_message("task 3"))

    request = list(pruner.prepare(history))

    cleared = {
        m.tool_call_id for m in request if isinstance(m, ToolMessage) and "cleared" in m.content
    }
    numbers = {int(call_id.removeprefix("call_")) for call_id in cleared}
    assert numbers  # turns 0 and 1 hold 120k tokens of output, 40k of them protected
    assert max(numbers) < 200  # turn 2 (and the new turn 3) are never pruned
    assert 119 not in numbers  # the most recent output before them is protected


# --- the whole bench -----------------------------------------------------------------------


def test_every_contender_answers_every_step_of_a_short_trace() -> None:
    report = run_bench(synthetic_trace(40, 3), "test", 128_000)

    assert [result.name for result in report.results] == [c.name for c in CONTENDERS]
    assert all(result.requests >= 40 for result in report.results)


def test_a_small_window_puts_raw_requests_over_it_and_the_seed_recovers() -> None:
    report = run_bench(synthetic_trace(80, 5), "test", 8_000)
    by_name = {result.name: result for result in report.results}

    assert by_name["raw"].over_window > 0
    assert by_name["seed"].summary_calls > 0


def test_bench_json_lists_every_strategy_and_states_the_cache_model(run_cli: RunCli) -> None:
    result: CliRun = run_cli("bench", "--turns", "30", "--seed", "4", "--json")

    assert result.exit_code == 0, result.stderr
    record = json.loads(result.stdout)
    assert [s["name"] for s in record["strategies"]] == [c.name for c in CONTENDERS]
    assert "128-token blocks" in record["cache_model"]
    assert "offline" in record["summarizer"]


def test_bench_prints_a_table_row_per_strategy(run_cli: RunCli) -> None:
    result: CliRun = run_cli("bench", "--turns", "20")

    assert result.exit_code == 0, result.stderr
    for contender in CONTENDERS:
        assert contender.name in result.stdout
    assert "Modelled, not billed" in " ".join(result.stdout.split())


def test_bench_replays_a_recorded_session(
    run_cli: RunCli, loopback: LoopbackServer, workspace: Path
) -> None:
    (workspace / "notes.txt").write_text("hello\n" * 50)
    loopback.queue(
        tool_stream([("call_1", "read_file", {"path": "notes.txt"})]),
        text_stream("It says hello."),
    )
    assert run_cli("run", "--chapter", "8", "-y", "--prompt", "Read notes.txt").exit_code == 0
    [info] = list_sessions(workspace)

    result: CliRun = run_cli("bench", "--session", info.session_id[:8], "--json")

    assert result.exit_code == 0, result.stderr
    record = json.loads(result.stdout)
    assert record["source"] == f"session {info.session_id}, 2 model calls"
    assert all(strategy["requests"] == 2 for strategy in record["strategies"])


def test_bench_refuses_a_session_together_with_a_synthetic_trace(run_cli: RunCli) -> None:
    result: CliRun = run_cli("bench", "--session", "abc", "--turns", "5")

    assert result.exit_code == 2
    assert "--session replays a recorded session" in result.stderr


def test_bench_with_an_unknown_session_is_a_usage_error(run_cli: RunCli) -> None:
    result: CliRun = run_cli("bench", "--session", "nosuch")

    assert result.exit_code == 2
    assert "nosuch" in result.stderr


@pytest.mark.skipif(
    importlib.util.find_spec("matplotlib") is not None, reason="matplotlib is installed"
)
def test_bench_plot_without_matplotlib_says_how_to_get_it(run_cli: RunCli, workspace: Path) -> None:
    result: CliRun = run_cli("bench", "--turns", "10", "--plot", "cost.png")

    assert result.exit_code == 2
    assert "pip install 'agent-tutorial[plot]'" in result.stderr
    assert not (workspace / "cost.png").exists()


@pytest.mark.skipif(
    importlib.util.find_spec("matplotlib") is not None, reason="matplotlib is installed"
)
def test_bench_plot_without_matplotlib_refuses_before_replaying(run_cli: RunCli) -> None:
    result: CliRun = run_cli("bench", "--turns", "10", "--plot", "cost.png")

    assert result.exit_code == 2
    assert result.stdout == ""  # no table first: the refusal is the whole output


@pytest.mark.skipif(importlib.util.find_spec("matplotlib") is None, reason="needs matplotlib")
def test_bench_plot_writes_a_png(run_cli: RunCli, workspace: Path) -> None:
    result: CliRun = run_cli("bench", "--turns", "10", "--plot", "cost.png")

    assert result.exit_code == 0, result.stderr
    assert (workspace / "cost.png").read_bytes().startswith(b"\x89PNG")


def test_cache_aware_beats_the_seed_at_85_percent_retention_on_the_reference_trace() -> None:
    chosen = [c for c in CONTENDERS if c.name in ("seed", "cache-aware")]
    report = run_bench(synthetic_trace(300, 591), "reference", 128_000, chosen)
    seed, cache_aware = report.results

    assert cache_aware.costs["Anthropic"] <= seed.costs["Anthropic"]
    assert cache_aware.verbatim_share >= 0.85
    assert cache_aware.over_window == 0


def test_a_terminal_too_narrow_for_the_table_gets_every_column_as_blocks() -> None:
    report = run_bench(synthetic_trace(20, 1), "test", 128_000)
    out = io.StringIO()

    print_bench(report, Console(file=out, width=80, color_system=None))

    lines = out.getvalue().splitlines()
    assert max(len(line) for line in lines) <= 80  # nothing cropped at the edge
    text = " ".join(out.getvalue().split())
    for result in report.results:
        assert result.name in text
    assert text.count("prep ") == len(report.results)  # the last column, for every row
    assert "Modelled, not billed" in text


def test_a_terminal_wide_enough_gets_the_table() -> None:
    report = run_bench(synthetic_trace(20, 1), "test", 128_000)
    out = io.StringIO()

    print_bench(report, Console(file=out, width=200, color_system=None))

    assert "┃ strategy" in out.getvalue()
