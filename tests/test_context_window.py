"""The context window: set by flag, environment or config, or asked of the server; the
bytes-per-token calibration; cached prompt tokens as providers report them."""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path
from typing import Any

import orjson
import pytest

from agent_tutorial.adapters.context_probe import MAX_ANSWER_BYTES, probe_context_window
from agent_tutorial.adapters.openai_chat import OpenAIChatModel
from agent_tutorial.bootstrap import AgentDeps, build_agent
from agent_tutorial.config import Settings, load_settings
from agent_tutorial.core.messages import user_message
from agent_tutorial.core.model import PromptTooLongError, ToolSpec, Usage, make_request
from agent_tutorial.core.window import ContextWindow
from agent_tutorial.features.compaction import CompactionSettings, history_utf8_bytes
from agent_tutorial.features.compaction.budget import TokenCalibration, WindowSize
from agent_tutorial.features.context_window import (
    ContextMeter,
    WindowFromOverflow,
    request_utf8_bytes,
)
from agent_tutorial.profiles import profile_for_chapter
from agent_tutorial.project import Project
from agent_tutorial.testing import ScriptedModel
from tests.conftest import TEST_API_KEY, CliRun, RunCli, key_redactor, write_state
from tests.loopback import LoopbackServer, Reply, text_stream
from tests.loopback_quirks import keepalive_trickle


def models_reply(*entries: dict[str, Any]) -> Reply:
    return Reply(json_body={"object": "list", "data": list(entries)})


def with_usage(reply: Reply, **fields: Any) -> Reply:
    """`reply` whose final usage chunk carries extra fields, as some providers send."""
    assert reply.sse_events is not None
    reply.sse_events[-1]["usage"].update(fields)
    return reply


def probe(loopback: LoopbackServer, model: str = "m") -> int | None:
    return probe_context_window(loopback.base_url, TEST_API_KEY, model, timeout_s=2.0)


# --- asking the server ------------------------------------------------------------------


def test_vllm_reports_max_model_len_in_its_model_list(loopback: LoopbackServer) -> None:
    loopback.get_replies["/v1/models"] = models_reply(
        {"id": "other", "max_model_len": 4096}, {"id": "m", "max_model_len": 32768}
    )

    assert probe(loopback) == 32768


def test_a_context_length_field_is_read_too(loopback: LoopbackServer) -> None:
    loopback.get_replies["/v1/models"] = models_reply({"id": "m", "context_length": 131072})

    assert probe(loopback) == 131072


def test_llama_cpp_running_size_wins_over_the_trained_size(loopback: LoopbackServer) -> None:
    loopback.get_replies["/v1/models"] = models_reply(
        {"id": "x.gguf", "meta": {"n_ctx_train": 32768}}
    )
    loopback.get_replies["/props"] = Reply(
        json_body={"default_generation_settings": {"n_ctx": 2048}}
    )

    assert probe(loopback) == 2048


def test_the_trained_size_is_used_when_props_says_nothing(loopback: LoopbackServer) -> None:
    loopback.get_replies["/v1/models"] = models_reply(
        {"id": "x.gguf", "meta": {"n_ctx_train": 8192}}
    )

    assert probe(loopback) == 8192


def test_a_server_that_says_nothing_leaves_the_window_unknown(loopback: LoopbackServer) -> None:
    loopback.get_replies["/v1/models"] = models_reply({"id": "m"}, {"id": "n"})

    assert probe(loopback) is None
    assert loopback.get_paths == ["/v1/models", "/props"]


def test_an_error_reply_or_a_bad_body_leaves_the_window_unknown(loopback: LoopbackServer) -> None:
    loopback.get_replies["/v1/models"] = Reply(status=500, json_body={"error": "boom"})
    loopback.get_replies["/props"] = Reply(raw_body=b"not json")

    assert probe(loopback) is None


def test_a_model_list_nested_too_deeply_or_too_large_is_not_read(
    loopback: LoopbackServer,
) -> None:
    loopback.get_replies["/v1/models"] = Reply(raw_body=b"[" * 100_000 + b"]" * 100_000)
    props = b'{"default_generation_settings": {"n_ctx": 2048}}'
    loopback.get_replies["/props"] = Reply(raw_body=b" " * MAX_ANSWER_BYTES + props)

    assert probe(loopback) is None
    assert loopback.get_paths == ["/v1/models", "/props"]


def test_a_model_list_held_open_by_keepalives_ends_at_the_probes_deadline(
    loopback: LoopbackServer,
) -> None:
    """Each keepalive came within httpx's per-read timeout, so an answer that never ended
    held the start for ever; the probe's timeout now bounds the whole answer."""
    trickle = keepalive_trickle(lambda: time.sleep(0.05))
    loopback.get_replies["/v1/models"] = Reply(raw_stream=trickle)
    loopback.get_replies["/props"] = Reply(raw_stream=trickle)

    assert probe_context_window(loopback.base_url, None, "m", timeout_s=0.5) is None
    assert loopback.get_paths == ["/v1/models", "/props"]


def test_an_unreachable_server_leaves_the_window_unknown() -> None:
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]  # closed again before the probe: nothing listens

    assert probe_context_window(f"http://127.0.0.1:{port}/v1", None, "m", timeout_s=1.0) is None


def test_the_probe_sends_the_key_as_a_bearer_token(loopback: LoopbackServer) -> None:
    loopback.get_replies["/v1/models"] = models_reply({"id": "m", "max_model_len": 4096})

    probe(loopback)

    assert loopback.get_headers[0]["authorization"] == f"Bearer {TEST_API_KEY}"


# --- settings and the command line --------------------------------------------------------


def test_the_window_comes_from_the_environment_or_the_config_file(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_state(workspace, "config.toml", "context_window_tokens = 16000\n")
    assert load_settings(workspace, {"model": "demo"}).context_window_tokens == 16000

    monkeypatch.setenv("AGENT_TUTORIAL_CONTEXT_WINDOW", "8192")
    assert load_settings(workspace, {"model": "demo"}).context_window_tokens == 8192
    flags = {"model": "demo", "context_window_tokens": 4096}
    assert load_settings(workspace, flags).context_window_tokens == 4096


def test_a_window_under_the_compaction_table_is_the_one_window(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (workspace / ".agent_tutorial").mkdir()
    config = workspace / ".agent_tutorial" / "config.toml"
    config.write_text("[compaction]\ncontext_window_tokens = 16000\n")
    settings = load_settings(workspace, {"model": "demo"})
    assert (settings.context_window_tokens, settings.compaction.context_window_tokens) == (
        16000,
        None,
    )

    monkeypatch.setenv("AGENT_TUTORIAL_CONTEXT_WINDOW", "8192")
    assert load_settings(workspace, {"model": "demo"}).context_window_tokens == 8192


@pytest.mark.usefixtures("workspace")  # no AGENT_TUTORIAL_CONTEXT_WINDOW from the shell
def test_compaction_settings_given_whole_hand_their_window_to_the_top_level() -> None:
    settings = Settings(compaction=CompactionSettings(context_window_tokens=8_000))

    assert settings.context_window_tokens == 8_000
    assert settings.compaction == CompactionSettings()


def test_a_window_under_the_compaction_table_clamps_the_output_cap_without_asking(
    run_cli: RunCli, loopback: LoopbackServer, workspace: Path
) -> None:
    (workspace / ".agent_tutorial").mkdir(exist_ok=True)
    config = workspace / ".agent_tutorial" / "config.toml"
    config.write_text("[compaction]\ncontext_window_tokens = 8000\n")
    loopback.queue(text_stream("hi"))

    result: CliRun = run_cli("run", "-c", "8", "-p", "hello", "--output-format", "json")

    assert result.exit_code == 0, result.stderr
    assert loopback.get_paths == []
    assert loopback.requests[0]["max_tokens"] == 2_000
    assert json.loads(result.stdout)["usage"]["context_window_tokens"] == 8_000


def test_chapter_8_asks_the_server_once_when_no_window_is_set(
    run_cli: RunCli, loopback: LoopbackServer
) -> None:
    loopback.get_replies["/v1/models"] = models_reply(
        {"id": "loopback-model", "max_model_len": 9000}
    )
    loopback.queue(text_stream("hi"))

    result: CliRun = run_cli("run", "--chapter", "8", "--prompt", "hello")

    assert result.exit_code == 0, result.stderr
    assert loopback.get_paths == ["/v1/models"]


def test_a_window_given_on_the_command_line_is_not_asked_for(
    run_cli: RunCli, loopback: LoopbackServer
) -> None:
    loopback.queue(text_stream("hi"))

    # 8,192: at 4,096 chapter 8's system prompt and tools (about 3,070 tokens by the first
    # estimate) leave a prompt almost no room beside a quarter-window output cap.
    result: CliRun = run_cli("run", "-c", "8", "--context-window", "8192", "-p", "hello")

    assert result.exit_code == 0, result.stderr
    assert loopback.get_paths == []


def test_chapters_without_compaction_do_not_ask(run_cli: RunCli, loopback: LoopbackServer) -> None:
    loopback.queue(text_stream("hi"))

    assert run_cli("run", "--chapter", "2", "--prompt", "hello").exit_code == 0
    assert loopback.get_paths == []


CHAPTER_8_FLAGS = {
    "--compaction": (
        ("--compaction", "cache-aware"),
        "--compaction is for chapter 8; chapter 7 does not compact, so it does nothing here",
    ),
    "--context-window": (
        ("--context-window", "8000"),
        "--context-window is for chapter 8, which keeps requests within the window; "
        "chapter 7 only caps each reply at a quarter of it",
    ),
}


@pytest.mark.parametrize(("flags", "warning"), CHAPTER_8_FLAGS.values(), ids=list(CHAPTER_8_FLAGS))
def test_a_chapter_8_flag_given_to_another_chapter_says_what_it_does_there(
    run_cli: RunCli, loopback: LoopbackServer, flags: tuple[str, ...], warning: str
) -> None:
    loopback.queue(text_stream("hi"))

    result: CliRun = run_cli("run", "-c", "7", *flags, "-p", "hello")

    assert result.exit_code == 0, result.stderr
    assert f"warning: {warning}" in " ".join(result.stderr.split())
    cap = 2_000 if "--context-window" in flags else Settings().max_output_tokens
    assert loopback.requests[0]["max_tokens"] == cap  # what the warning says it still does


def test_chapter_8_flags_given_to_chapter_8_warn_of_nothing(
    run_cli: RunCli, loopback: LoopbackServer
) -> None:
    loopback.queue(text_stream("hi"))
    flags = [flag for flags, _ in CHAPTER_8_FLAGS.values() for flag in flags]

    result: CliRun = run_cli("run", "-c", "8", *flags, "-p", "hello")

    assert result.exit_code == 0, result.stderr
    assert "warning" not in result.stderr


def test_chapter_8_settings_from_the_environment_warn_of_nothing(
    run_cli: RunCli, loopback: LoopbackServer
) -> None:
    loopback.queue(text_stream("hi"))

    result: CliRun = run_cli(
        "run", "-c", "7", "-p", "hello", env={"AGENT_TUTORIAL_CONTEXT_WINDOW": "8000"}
    )

    assert result.exit_code == 0, result.stderr
    assert "warning" not in result.stderr


# --- tokens ---------------------------------------------------------------------------------

INITIAL = CompactionSettings().initial_bytes_per_token


def test_calibration_starts_conservative_and_follows_the_reported_counts() -> None:
    calibration = TokenCalibration()
    assert calibration.bytes_per_token == INITIAL

    for _ in range(20):
        calibration.observe(request_bytes=40_000, prompt_tokens=10_000)

    assert calibration.bytes_per_token == pytest.approx(4.0, abs=0.01)


def test_calibration_ignores_counts_that_cannot_be_about_the_request() -> None:
    calibration = TokenCalibration()

    calibration.observe(request_bytes=40_000, prompt_tokens=1)
    calibration.observe(request_bytes=40_000, prompt_tokens=0)

    assert calibration.bytes_per_token == INITIAL


@pytest.mark.parametrize(
    ("request_bytes", "prompt_tokens", "counted"),
    [(1, 1, True), (8, 1, True), (9, 1, False), (1, 2, False), (5, 0, False)],
)
def test_calibration_counts_1_to_8_bytes_a_token_both_ends_included(
    request_bytes: int, prompt_tokens: int, counted: bool
) -> None:
    calibration = TokenCalibration()

    calibration.observe(request_bytes, prompt_tokens)
    calibration.observe(request_bytes, prompt_tokens)

    assert calibration.observations == (2 if counted else 0)
    assert (calibration.bytes_per_token != TokenCalibration().bytes_per_token) is counted


def test_tokens_are_bytes_over_the_calibrated_bytes_per_token() -> None:
    calibration = TokenCalibration(CompactionSettings(initial_bytes_per_token=4.0))

    assert calibration.tokens_for(10_002) == 2_500
    assert calibration.bytes_for(2_500) == 10_000


@pytest.mark.parametrize("tokens", [0, -1])
def test_a_window_of_no_tokens_is_refused(tokens: int) -> None:
    with pytest.raises(ValueError, match=f"^the context window must be positive, got {tokens}$"):
        WindowSize.of(tokens)


def test_a_window_of_one_token_is_a_window() -> None:
    assert WindowSize.of(1, 8_192).tokens == 1


def test_the_reply_reserve_is_at_most_a_quarter_of_the_window() -> None:
    assert WindowSize.of(4_096, 8_192).output_cap_tokens == 1_024
    assert WindowSize.of(128_000, 8_192).output_cap_tokens == 8_192
    assert WindowSize.of(4_096, 8_192).prompt_tokens == 3_072


def test_cached_counts_add_up_and_stay_unknown_when_never_reported() -> None:
    assert (Usage(10, 1, 11) + Usage(5, 1, 6)).cached_prompt_tokens is None
    assert (Usage(10, 1, 11, 8) + Usage(5, 1, 6)).cached_prompt_tokens == 8


@pytest.mark.parametrize(
    ("fields", "cached"),
    [
        ({"prompt_tokens_details": {"cached_tokens": 1_536}}, 1_536),  # OpenAI, vLLM, llama.cpp
        ({"prompt_cache_hit_tokens": 640, "prompt_cache_miss_tokens": 10}, 640),  # DeepSeek
        ({}, None),
    ],
)
def test_the_adapter_reads_cached_prompt_tokens(
    loopback: LoopbackServer, fields: dict[str, Any], cached: int | None
) -> None:
    loopback.queue(with_usage(text_stream("ok", usage=(2_000, 3)), **fields))
    with OpenAIChatModel(
        base_url=loopback.base_url, api_key=TEST_API_KEY, model="m", redaction=key_redactor()
    ) as model:
        reply = model.complete(make_request([user_message("hi")]))

    assert reply.usage is not None
    assert reply.usage.cached_prompt_tokens == cached


def test_json_usage_shows_the_window_its_share_and_cached_tokens(
    run_cli: RunCli, loopback: LoopbackServer
) -> None:
    cached = {"prompt_tokens_details": {"cached_tokens": 1_024}}
    loopback.queue(with_usage(text_stream("hi", usage=(2_000, 5)), **cached))

    result: CliRun = run_cli(
        "run", "-c", "8", "--context-window", "8000", "-p", "hello", "--output-format", "json"
    )

    assert result.exit_code == 0, result.stderr
    usage = json.loads(result.stdout)["usage"]
    assert usage["cached_prompt_tokens"] == 1_024
    assert usage["context_window_tokens"] == 8_000
    assert usage["last_prompt_tokens"] == 2_000
    assert usage["last_prompt_window_share"] == 0.25


def test_chapter_8_calibrates_bytes_per_token_from_each_reply(
    loopback: LoopbackServer, workspace: Path
) -> None:
    settings = load_settings(workspace, {"model": "m", "base_url": loopback.base_url})
    loopback.queue(text_stream("hi", usage=(2_000, 1)))
    with OpenAIChatModel(
        base_url=loopback.base_url, api_key=TEST_API_KEY, model="m", redaction=key_redactor()
    ) as model:
        agent = build_agent(
            profile_for_chapter(8), AgentDeps(model, Project.at(workspace), settings)
        )
        agent.runner.run("hello")

    sent = len(json.dumps(loopback.requests[0]["messages"])) + len(
        json.dumps(loopback.requests[0]["tools"])
    )
    calibration = agent.context_meter.calibration
    assert calibration.observations == 1
    expected = 0.7 * INITIAL + 0.3 * (sent / 2_000)
    assert calibration.bytes_per_token == pytest.approx(expected, rel=0.1)


def test_chapter_8_calibrates_with_the_numbers_of_its_compaction_table(
    loopback: LoopbackServer, workspace: Path
) -> None:
    write_config = workspace / ".agent_tutorial" / "config.toml"
    write_config.parent.mkdir()
    write_config.write_text("[compaction]\ninitial_bytes_per_token = 4.5\ncalibration_share = 1\n")
    settings = load_settings(workspace, {"model": "m", "base_url": loopback.base_url})
    loopback.queue(text_stream("hi", usage=(2_000, 1)))
    with OpenAIChatModel(
        base_url=loopback.base_url, api_key=TEST_API_KEY, model="m", redaction=key_redactor()
    ) as model:
        agent = build_agent(
            profile_for_chapter(8), AgentDeps(model, Project.at(workspace), settings)
        )
        assert agent.context_meter.calibration.bytes_per_token == 4.5
        agent.runner.run("hello")

    sent = len(json.dumps(loopback.requests[0]["messages"])) + len(
        json.dumps(loopback.requests[0]["tools"])
    )
    assert agent.context_meter.calibration.bytes_per_token == pytest.approx(sent / 2_000, rel=0.1)


@pytest.mark.parametrize(
    ("known", "stated", "taken"),
    [(None, 6_000, True), (6_000, 5_999, True), (6_000, 6_000, False), (6_000, 60_000, False)],
)
def test_a_stated_window_is_taken_only_where_it_shrinks_the_known_one(
    known: int | None, stated: int, taken: bool
) -> None:
    meter = ContextMeter(ContextWindow(known, max_output_tokens=8_192))
    told: list[int] = []
    model = WindowFromOverflow(
        ScriptedModel([PromptTooLongError("too long", window_tokens=stated)]),
        meter,
        on_window=told.append,
    )

    with pytest.raises(PromptTooLongError):
        model.complete(make_request([user_message("hi")]))

    assert told == ([stated] if taken else [])
    assert meter.window is not None
    assert meter.window.tokens == (stated if taken else known)
    assert meter.window.output_cap_tokens == min(8_192, meter.window.tokens // 4)


@pytest.mark.parametrize(("tools", "count"), [(True, 1_000), (False, 1_000), (True, None)])
def test_a_refusal_calibrates_by_its_stated_count_and_an_agent_request_is_told_of(
    tools: bool, count: int | None
) -> None:
    """Issue 28: a count the refusal states is taken whole as bytes per token; the retry is
    sized from every refused request that carried tools (the agent's, not a summary's)."""
    meter = ContextMeter(ContextWindow(max_output_tokens=8_192))
    refusals: list[tuple[int, PromptTooLongError]] = []
    error = PromptTooLongError("too long", window_tokens=8_192, prompt_tokens=count)
    model = WindowFromOverflow(
        ScriptedModel([error]),
        meter,
        on_window=lambda _tokens: None,
        on_refusal=lambda size, refused: refusals.append((size, refused)),
    )
    spec = ToolSpec("read_file", "Read a file.", {"type": "object", "properties": {}})
    request = make_request([user_message("x" * 3_000)], tools=(spec,) if tools else ())

    with pytest.raises(PromptTooLongError):
        model.complete(request)

    size = request_utf8_bytes(request.messages, request.tools)
    assert refusals == ([(size, error)] if tools else [])
    assert meter.calibration.observations == (0 if count is None else 1)
    expected = TokenCalibration().bytes_per_token if count is None else size / count
    assert meter.calibration.bytes_per_token == expected


@pytest.mark.parametrize(
    ("window", "text"), [(None, "≈3,000 tok"), (12_000, "≈3,000 tok, 25% of window")]
)
def test_the_meter_shows_a_request_in_tokens_and_its_share_of_a_known_window(
    window: int | None, text: str
) -> None:
    meter = ContextMeter(ContextWindow(window, max_output_tokens=8_192))
    meter.calibration.learn_from_refusal(4_000, 1_000)  # 4 bytes a token

    assert meter.request_text(12_000) == text


READ_FILE = ToolSpec("read_file", "Read a file.", {"type": "object"})


@pytest.mark.parametrize(
    ("tools", "schema_bytes"), [((), 0), ((READ_FILE,), len(orjson.dumps([READ_FILE.to_wire()])))]
)
def test_a_request_counts_its_tool_schemas_and_no_schema_list_without_tools(
    tools: tuple[ToolSpec, ...], schema_bytes: int
) -> None:
    messages = [user_message("hi")]

    assert request_utf8_bytes(messages, tools) == history_utf8_bytes(messages) + schema_bytes


def test_an_overflow_that_states_no_window_leaves_it_unknown() -> None:
    meter = ContextMeter(ContextWindow(max_output_tokens=8_192))
    told: list[int] = []
    model = WindowFromOverflow(ScriptedModel([PromptTooLongError("too long")]), meter, told.append)

    with pytest.raises(PromptTooLongError):
        model.complete(make_request([user_message("hi")]))

    assert meter.window is None
    assert told == []
