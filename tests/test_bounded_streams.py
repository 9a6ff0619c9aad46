"""A server's reply is bounded as it arrives: one deadline for the whole reply whatever
keepalives come, and caps on its text, each call's arguments and its bytes on the wire.
Each side of each line is pinned through the real SDK over real HTTP (the adapter), and
each attack issue 17 reproduced is replayed through the CLI.

Before: `: keepalive` comments every 5 s kept a run alive past `request_timeout_s` for ever
(httpx's timeouts are per read); endless content reached ~346 MB and endless arguments
1.26 GB in 90 s (no cap was checked while the stream arrived); a server that accepted and
never answered was waited on for 600 s three times over, and the error said 600 s.
"""

from __future__ import annotations

import gzip
import json
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from agent_tutorial.adapters.bounded_transport import BoundedClient, DeadlinePassed, ReplyBounds
from agent_tutorial.adapters.chat_stream import MAX_TOOL_NAME_CHARS
from agent_tutorial.adapters.chat_wire import WireOptions
from agent_tutorial.adapters.openai_chat import OpenAIChatModel
from agent_tutorial.core.messages import user_message
from agent_tutorial.core.model import ModelRequest, ProviderError, ReplyTimeoutError, ToolSpec
from tests.conftest import MakeAdapter, RunCli, SteppedClock, run_cli_measuring_peak_rss
from tests.loopback import LoopbackServer, Reply, error_reply, text_stream, tool_stream
from tests.loopback_quirks import (
    KEEPALIVE,
    endless_arguments,
    endless_content,
    endless_line,
    keepalive_trickle,
    padded_to,
)

WRITE_FILE = ToolSpec(
    name="write_file",
    description="Write a file.",
    parameters={"type": "object", "properties": {"path": {"type": "string"}}},
)
OUTPUT_CAP_TOKENS = 100
TEXT_CAP_BYTES = OUTPUT_CAP_TOKENS * 32
BODY_CAP_BYTES = OUTPUT_CAP_TOKENS * 1024 + 1024 * 1024
ARGUMENT_CAP_BYTES = 1024


def ask() -> ModelRequest:
    return ModelRequest(messages=(user_message("go"),), tools=(WRITE_FILE,))


def capped(make_adapter: MakeAdapter, *, stream: bool = True) -> OpenAIChatModel:
    """An adapter with a 100-token output cap and the smallest argument cap."""
    return make_adapter(
        wire=WireOptions(max_output_tokens=OUTPUT_CAP_TOKENS, stream=stream),
        max_tool_argument_bytes=ARGUMENT_CAP_BYTES,
    )


@pytest.fixture
def released() -> Iterator[threading.Event]:
    """An event that holds a loopback reply back; set at the end so no server thread waits."""
    event = threading.Event()
    yield event
    event.set()


# --- one deadline for the whole reply ------------------------------------------------------


def keepalives_then_answer(clock: SteppedClock, keepalives: int) -> Reply:
    """`keepalives` comments 100 s apart, then an answer. The server moves the clock as it
    sends each comment, so which read sees the deadline pass does not depend on how fast
    anything runs."""
    answer = text_stream("made it").sse_events or ()
    trickle = keepalive_trickle(lambda: clock.advance(100), keepalives=keepalives, then=answer)
    return Reply(raw_stream=trickle)


def test_keepalives_that_end_by_the_deadline_give_the_answer(
    loopback: LoopbackServer, make_adapter: MakeAdapter
) -> None:
    clock = SteppedClock()
    loopback.queue(keepalives_then_answer(clock, keepalives=5))

    reply = make_adapter(timeout_s=500, clock=clock).complete(ask())

    assert reply.message.content == "made it"


def test_keepalives_past_the_deadline_end_the_reply_and_it_is_not_sent_again(
    loopback: LoopbackServer, make_adapter: MakeAdapter
) -> None:
    clock = SteppedClock()
    loopback.queue(keepalives_then_answer(clock, keepalives=5), text_stream("a retry"))

    with pytest.raises(ReplyTimeoutError) as caught:
        make_adapter(timeout_s=499, clock=clock, max_retries=2).complete(ask())

    assert str(caught.value) == (
        f"{loopback.base_url}: no complete reply within request_timeout_s = 499 s; gave up "
        "after 500.0 s in all (a request that timed out is not sent again: the server may "
        "still be working on it)"
    )
    assert len(loopback.requests) == 1


def test_a_server_that_never_answers_is_waited_on_once_for_the_deadline(
    loopback: LoopbackServer, make_adapter: MakeAdapter, released: threading.Event
) -> None:
    loopback.queue(Reply(hold=released), text_stream("a retry"))

    with pytest.raises(ReplyTimeoutError, match=r"within request_timeout_s = 0\.3 s; gave up"):
        make_adapter(timeout_s=0.3, max_retries=2).complete(ask())

    assert len(loopback.requests) == 1


def test_a_connection_dropped_without_a_reply_is_still_retried(
    loopback: LoopbackServer, make_adapter: MakeAdapter
) -> None:
    loopback.queue(Reply(hang_up=True), text_stream("second time lucky"))

    reply = make_adapter(max_retries=1).complete(ask())

    assert reply.message.content == "second time lucky"
    assert len(loopback.requests) == 2


def after(seconds: float, clock: SteppedClock, reply: Reply) -> Callable[[dict[str, Any]], Reply]:
    """`reply`, served once `seconds` have passed on the stepped clock (a slow failure)."""

    def served(body: dict[str, Any]) -> Reply:
        clock.advance(seconds)
        return reply

    return served


def dropped_after(seconds: float, clock: SteppedClock) -> Callable[[dict[str, Any]], Reply]:
    def dropped(body: dict[str, Any]) -> Reply:
        clock.advance(seconds)
        raise ConnectionAbortedError("loopback drops this connection on purpose")

    return dropped


@pytest.mark.parametrize(
    "first_failure",
    [
        lambda clock: after(7, clock, error_reply(503, {"error": {"message": "overloaded"}})),
        lambda clock: after(7, clock, error_reply(429, {"error": {"message": "slow down"}})),
        lambda clock: dropped_after(7, clock),
    ],
    ids=["503", "429", "dropped"],
)
def test_the_sdk_retries_a_failure_and_the_timeout_counts_every_attempt(
    loopback: LoopbackServer,
    make_adapter: MakeAdapter,
    first_failure: Callable[[SteppedClock], Callable[[dict[str, Any]], Reply]],
) -> None:
    """Both sides of the retry line in one run: the 5xx, 429 or dropped connection is sent
    again by the SDK; the timeout that follows is not, and the error counts from the first
    attempt (7 s there, then 5 keepalives 100 s apart past a 499 s deadline)."""
    clock = SteppedClock()
    loopback.queue(
        first_failure(clock), keepalives_then_answer(clock, keepalives=5), text_stream("late")
    )

    with pytest.raises(ReplyTimeoutError, match=r"499 s; gave up after 507\.0 s in all"):
        make_adapter(timeout_s=499, clock=clock, max_retries=2).complete(ask())

    assert len(loopback.requests) == 2


def test_a_body_gone_silent_is_cut_at_the_deadline_with_no_read_timeout_at_all(
    loopback: LoopbackServer, released: threading.Event
) -> None:
    """The watchdog alone ends it: httpx's own timeout is off here, so without the watchdog
    this read would wait for ever (and the test time out)."""

    def one_keepalive_then_silence() -> Iterator[bytes]:
        yield KEEPALIVE
        released.wait()
        yield KEEPALIVE

    loopback.queue(Reply(raw_stream=one_keepalive_then_silence))
    bounds = ReplyBounds(timeout_s=0.3, max_body_bytes=1024)

    with (
        BoundedClient(bounds=bounds, timeout=None) as client,
        client.stream("POST", f"{loopback.base_url}/chat/completions", json={}) as response,
        pytest.raises(DeadlinePassed),
    ):
        for _ in response.iter_bytes():
            pass


# --- the text cap: the output cap, in bytes ------------------------------------------------


@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "whole"])
def test_text_up_to_the_cap_is_the_answer(
    loopback: LoopbackServer, make_adapter: MakeAdapter, stream: bool
) -> None:
    text = "é" * (TEXT_CAP_BYTES // 2)  # the cap counts UTF-8 bytes, not characters
    loopback.queue(text_stream(text, pieces=7))

    reply = capped(make_adapter, stream=stream).complete(ask())

    assert reply.message.content == text


@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "whole"])
def test_one_byte_of_text_past_the_cap_ends_the_reply(
    loopback: LoopbackServer, make_adapter: MakeAdapter, stream: bool
) -> None:
    loopback.queue(text_stream("é" * (TEXT_CAP_BYTES // 2) + "!", pieces=7))

    with pytest.raises(ProviderError) as caught:
        capped(make_adapter, stream=stream).complete(ask())

    assert str(caught.value) == (
        f"the endpoint sent more than {TEXT_CAP_BYTES} bytes of text in one reply, more than "
        "its output cap allows (it may ignore max_tokens); the reply was stopped there"
    )
    assert len(loopback.requests) == 1


# --- the argument cap: max_tool_argument_bytes -----------------------------------------------


def arguments_of(size: int) -> str:
    """A write_file call's arguments, exactly `size` bytes of JSON."""
    empty = json.dumps({"path": "a.txt", "content": ""})
    return json.dumps({"path": "a.txt", "content": "x" * (size - len(empty))})


@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "whole"])
def test_arguments_up_to_the_cap_make_the_call(
    loopback: LoopbackServer, make_adapter: MakeAdapter, stream: bool
) -> None:
    arguments = arguments_of(ARGUMENT_CAP_BYTES)
    loopback.queue(tool_stream([("call_1", "write_file", arguments)], split=5))

    reply = capped(make_adapter, stream=stream).complete(ask())

    [call] = reply.message.tool_calls
    assert call.arguments == arguments


@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "whole"])
def test_one_byte_of_arguments_past_the_cap_ends_the_reply(
    loopback: LoopbackServer, make_adapter: MakeAdapter, stream: bool
) -> None:
    arguments = arguments_of(ARGUMENT_CAP_BYTES + 1)
    loopback.queue(tool_stream([("call_1", "write_file", arguments)], split=5))

    with pytest.raises(ProviderError) as caught:
        capped(make_adapter, stream=stream).complete(ask())

    assert str(caught.value) == (
        f"the endpoint sent a tool call ('write_file') whose arguments pass "
        f"{ARGUMENT_CAP_BYTES} bytes (max_tool_argument_bytes); the reply was stopped there"
    )


@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "whole"])
@pytest.mark.parametrize("length", [MAX_TOOL_NAME_CHARS, MAX_TOOL_NAME_CHARS + 1])
def test_a_tool_name_past_its_cap_ends_the_reply(
    loopback: LoopbackServer, make_adapter: MakeAdapter, stream: bool, length: int
) -> None:
    name = "n" * length
    loopback.queue(tool_stream([("call_1", name, "{}")]))

    if length > MAX_TOOL_NAME_CHARS:
        with pytest.raises(ProviderError, match="tool name longer than 256 characters"):
            capped(make_adapter, stream=stream).complete(ask())
    else:
        [call] = capped(make_adapter, stream=stream).complete(ask()).message.tool_calls
        assert call.name == name


def test_the_argument_cap_is_per_call(loopback: LoopbackServer, make_adapter: MakeAdapter) -> None:
    calls = [(f"call_{n}", "write_file", arguments_of(ARGUMENT_CAP_BYTES)) for n in range(3)]
    loopback.queue(tool_stream(calls))

    reply = capped(make_adapter).complete(ask())

    assert len(reply.message.tool_calls) == 3


# --- the body cap: bytes on the wire -----------------------------------------------------------


def test_a_body_of_exactly_the_cap_is_read(
    loopback: LoopbackServer, make_adapter: MakeAdapter
) -> None:
    events = text_stream("padded").sse_events or ()
    loopback.queue(Reply(raw_stream=padded_to(BODY_CAP_BYTES, events)))

    reply = capped(make_adapter).complete(ask())

    assert reply.message.content == "padded"


def test_one_byte_of_body_past_the_cap_ends_the_reply(
    loopback: LoopbackServer, make_adapter: MakeAdapter
) -> None:
    events = text_stream("padded").sse_events or ()
    loopback.queue(Reply(raw_stream=padded_to(BODY_CAP_BYTES + 1, events)))

    with pytest.raises(ProviderError) as caught:
        capped(make_adapter).complete(ask())

    assert str(caught.value) == (
        f"the endpoint's reply passed {BODY_CAP_BYTES} bytes, more than its output cap allows "
        "(it may ignore max_tokens, or send a line that never ends); the reply was stopped there"
    )


def test_a_whole_reply_past_the_body_cap_is_not_read(
    loopback: LoopbackServer, make_adapter: MakeAdapter
) -> None:
    loopback.queue(Reply(raw_body=b'{"x": "' + b"y" * BODY_CAP_BYTES + b'"}'))

    with pytest.raises(ProviderError, match=f"reply passed {BODY_CAP_BYTES} bytes"):
        capped(make_adapter, stream=False).complete(ask())


def test_replies_are_asked_for_uncompressed_and_a_compressed_one_is_refused(
    loopback: LoopbackServer, make_adapter: MakeAdapter
) -> None:
    """A few KB of gzip can inflate to gigabytes inside httpx, before any cap could count."""
    bomb = gzip.compress(b"data: " + b"x" * 10_000_000)
    loopback.queue(Reply(raw_body=bomb, headers={"content-encoding": "gzip"}))

    with pytest.raises(ProviderError) as caught:
        make_adapter(wire=WireOptions(stream=False)).complete(ask())

    assert loopback.headers[0]["accept-encoding"] == "identity"
    assert str(caught.value) == (
        "the endpoint sent its reply compressed (gzip) although asked not to; replies are read "
        "uncompressed so that their size can be bounded"
    )


# --- the attacks, through the CLI ---------------------------------------------------------------


def test_a_keepalive_trickle_ends_the_run_at_the_deadline(
    loopback: LoopbackServer, run_cli: RunCli
) -> None:
    loopback.queue(Reply(raw_stream=keepalive_trickle(lambda: time.sleep(0.05))))

    run = run_cli("run", "-p", "hi", env={"AGENT_TUTORIAL_REQUEST_TIMEOUT_S": "1"})

    assert run.exit_code == 1
    assert "no complete reply within request_timeout_s = 1 s; gave up after" in run.stderr
    assert len(loopback.requests) == 1


def test_a_server_that_accepts_and_never_answers_is_not_asked_three_times(
    loopback: LoopbackServer, run_cli: RunCli, released: threading.Event
) -> None:
    loopback.queue(Reply(hold=released), Reply(hold=released), Reply(hold=released))

    run = run_cli(
        "run", "-p", "hi", "--output-format", "json", env={"AGENT_TUTORIAL_REQUEST_TIMEOUT_S": "1"}
    )

    assert run.exit_code == 1
    result = json.loads(run.stdout)
    assert result["is_error"] is True
    assert "no complete reply within request_timeout_s = 1 s; gave up after" in result["error"]
    assert len(loopback.requests) == 1


def test_endless_content_ends_the_run_with_memory_flat(
    workspace: Path, loopback: LoopbackServer
) -> None:
    loopback.queue(Reply(raw_stream=endless_content()))

    cli = run_cli_measuring_peak_rss(workspace, loopback, "run", "--chapter", "2", "-p", "talk")

    assert cli.returncode == 1
    assert cli.peak_rss_bytes < 150 * 2**20
    assert len(loopback.requests) == 1


def test_endless_arguments_end_the_run_and_write_nothing(
    workspace: Path, loopback: LoopbackServer, run_cli: RunCli
) -> None:
    loopback.queue(Reply(raw_stream=endless_arguments("write_file")))

    run = run_cli("run", "--chapter", "2", "-y", "-p", "write")

    assert run.exit_code == 1
    assert (
        "the endpoint sent a tool call ('write_file') whose arguments pass 1048576 bytes "
        "(max_tool_argument_bytes); the reply was stopped there"
    ) in run.stderr
    assert not (workspace / "a").exists()
    assert len(loopback.requests) == 1


def test_one_endless_line_ends_the_run(loopback: LoopbackServer, run_cli: RunCli) -> None:
    loopback.queue(Reply(raw_stream=endless_line()))

    run = run_cli("run", "-p", "hi", env={"AGENT_TUTORIAL_MAX_OUTPUT_TOKENS": "1000"})

    assert run.exit_code == 1
    body_cap = 1000 * 1024 + 1024 * 1024
    assert f"the endpoint's reply passed {body_cap} bytes" in run.stderr
    assert len(loopback.requests) == 1


def test_a_proxy_from_the_environment_is_bounded_too(
    loopback: LoopbackServer, run_cli: RunCli, monkeypatch: pytest.MonkeyPatch
) -> None:
    """httpx builds a proxy's transport apart from the direct one; both are bounded."""
    monkeypatch.setenv("HTTP_PROXY", loopback.base_url.removesuffix("/v1"))
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    loopback.queue(Reply(raw_stream=keepalive_trickle(lambda: time.sleep(0.05))))

    run = run_cli(
        "run",
        "-p",
        "hi",
        env={
            "OPENAI_BASE_URL": "http://model.invalid/v1",
            "AGENT_TUTORIAL_REQUEST_TIMEOUT_S": "1",
        },
    )

    assert run.exit_code == 1
    assert "http://model.invalid/v1: no complete reply within request_timeout_s = 1 s" in (
        run.stderr
    )
    assert len(loopback.requests) == 1


def test_a_lone_surrogate_counts_three_bytes_of_text(
    loopback: LoopbackServer, make_adapter: MakeAdapter
) -> None:
    """JSON can carry `\\udce9`; the count goes on instead of failing to encode it."""
    at_the_cap = "\udce9" * (TEXT_CAP_BYTES // 3) + "x" * (TEXT_CAP_BYTES % 3)
    loopback.queue(text_stream(at_the_cap), text_stream(at_the_cap + "!"))
    model = capped(make_adapter)

    assert model.complete(ask()).message.content == at_the_cap
    with pytest.raises(ProviderError, match=f"more than {TEXT_CAP_BYTES} bytes of text"):
        model.complete(ask())
