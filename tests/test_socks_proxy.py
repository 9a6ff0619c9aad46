"""A SOCKS proxy in the environment (issue 17): `ALL_PROXY=socks5://…` is honoured as the
SDK's HTTP client honours any proxy variable, instead of an ImportError traceback (the
`socks` extra of httpx2 is declared)."""

from __future__ import annotations

from urllib.parse import urlsplit

from tests.conftest import RunCli
from tests.loopback import LoopbackServer, refused_port, text_stream
from tests.socks_proxy import socks5_proxy

ONE_PROMPT = ("run", "-c", "1", "-p", "hi")
NO_OTHER_PROXY: dict[str, str | None] = dict.fromkeys(
    ("NO_PROXY", "no_proxy", "HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "all_proxy")
)
"""Unset, so that only the test's own ALL_PROXY decides the route."""


def endpoint_address(loopback: LoopbackServer) -> tuple[str, int]:
    where = urlsplit(loopback.base_url)
    assert where.hostname is not None and where.port is not None
    return where.hostname, where.port


def test_a_run_reaches_the_endpoint_through_a_socks5_proxy(
    run_cli: RunCli, loopback: LoopbackServer
) -> None:
    loopback.queue(text_stream("through the proxy"))

    with socks5_proxy() as proxy:
        result = run_cli(*ONE_PROMPT, env={**NO_OTHER_PROXY, "ALL_PROXY": proxy.url})

    assert (result.exit_code, result.stdout) == (0, "through the proxy\n"), result.stderr
    assert proxy.relayed and set(proxy.relayed) == {endpoint_address(loopback)}


def test_a_socks5_proxy_that_refuses_is_a_clear_connection_error(
    run_cli: RunCli, loopback: LoopbackServer
) -> None:
    proxy = f"socks5://127.0.0.1:{refused_port()}"

    once = {"AGENT_TUTORIAL_MAX_RETRIES": "0"}
    result = run_cli(*ONE_PROMPT, env={**NO_OTHER_PROXY, "ALL_PROXY": proxy, **once})

    assert result.exit_code == 1 and result.stdout == ""
    assert "Traceback" not in result.stderr and "ImportError" not in result.stderr
    assert "connect" in result.stderr.lower(), result.stderr
    assert loopback.requests == []


def test_a_socks_proxy_passed_over_by_no_proxy_leaves_the_endpoint_direct(
    run_cli: RunCli, loopback: LoopbackServer
) -> None:
    loopback.queue(text_stream("direct"))
    proxy = f"socks5://127.0.0.1:{refused_port()}"

    result = run_cli(
        *ONE_PROMPT, env={**NO_OTHER_PROXY, "ALL_PROXY": proxy, "NO_PROXY": "127.0.0.1"}
    )

    assert (result.exit_code, result.stdout) == (0, "direct\n"), result.stderr
