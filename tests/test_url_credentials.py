"""A password in a URL (`OPENAI_BASE_URL=http://alice:S3cret@host/v1`, a proxy variable's
`http://user:password@proxy`) is never shown: error messages, the JSON `error`, tool
output, session files and requests show `http://alice:[REDACTED:url_password]@host`, and
such variables leave bash's environment like other secrets. The host and the path stay
visible. Before, the password was printed in the connection error and the JSON `error`,
and bash's `env` showed every such variable whole."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent_tutorial.features.redaction import (
    Redactor,
    known_secrets,
    mask_url_passwords,
    url_password,
)
from agent_tutorial.features.shell_environment import shell_environment
from tests.conftest import RunCli
from tests.loopback import LoopbackServer, conversation, refused_port, text_stream, tool_stream

SHORT = "S3cret"  # shorter than a known secret's 8 characters: masked in URLs only
PROXY_PASSWORDS = {
    "HTTP_PROXY": "HttpPr0xyPass",
    "https_proxy": "HttpsPr0xyPass",
    "ALL_PROXY": "AllPr0xyPass",
    "all_proxy": "allpr0xypass-lower",
}
OTHER_URL = ("MY_DB", "postgres://dave:DbPassw0rd!@db.invalid/app")
EVERY_PASSWORD = [SHORT, *PROXY_PASSWORDS.values(), "DbPassw0rd!", "EchoedPassw0rd"]


def with_password(base_url: str, password: str = SHORT) -> str:
    return base_url.replace("http://", f"http://alice:{password}@", 1)


def proxy_environment() -> dict[str, str]:
    """Proxy variables with passwords, pointing nowhere; the loopback is reached directly."""
    proxies = {
        name: f"http://bob:{password}@proxy.invalid:3128"
        for name, password in PROXY_PASSWORDS.items()
    }
    return {**proxies, "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost"}


# --- messages -------------------------------------------------------------------------------


@pytest.mark.parametrize("output_format", ["text", "json"])
def test_a_refused_connection_names_the_url_without_its_password(
    run_cli: RunCli, output_format: str
) -> None:
    base_url = with_password(f"http://127.0.0.1:{refused_port()}/v1")

    result = run_cli(
        "run",
        "-c",
        "1",
        "-p",
        "hi",
        "--output-format",
        output_format,
        env={"OPENAI_BASE_URL": base_url, "AGENT_TUTORIAL_MAX_RETRIES": "0"},
    )

    assert result.exit_code == 1
    assert SHORT not in result.stdout + result.stderr
    shown = "http://alice:[REDACTED:url_password]@127.0.0.1:"
    if output_format == "json":
        error = json.loads(result.stdout)["error"]
        assert error.startswith(f"could not reach the endpoint: {shown}")
    else:
        assert result.stderr.startswith(f"error: could not reach the endpoint: {shown}")


def test_an_invalid_base_url_is_named_without_its_password(run_cli: RunCli) -> None:
    result = run_cli("run", "-p", "hi", env={"OPENAI_BASE_URL": "http://alice:S3cret@host:9x/v1"})

    assert result.exit_code == 2
    assert SHORT not in result.stderr
    assert "'http://alice:[REDACTED:url_password]@host:9x/v1' is not a valid URL" in result.stderr


# --- tool output, requests and session files --------------------------------------------------


def test_no_password_from_a_url_reaches_bash_the_model_or_a_file(
    run_cli_process: RunCli, loopback: LoopbackServer, workspace: Path
) -> None:
    # The echoed URL's password is built by the command, so only its output holds it whole.
    command = "env; printf 'http://eve:%s%s@host.invalid/x\\n' Echoed Passw0rd"
    loopback.queue(tool_stream([("c1", "bash", {"command": command})]), text_stream("done"))

    result = run_cli_process(
        "run",
        "-c",
        "2",
        "-y",
        "-p",
        "look",
        "--output-format",
        "stream-json",
        env={
            "OPENAI_BASE_URL": with_password(loopback.base_url),
            **proxy_environment(),
            OTHER_URL[0]: OTHER_URL[1],
        },
    )

    assert result.exit_code == 0, result.stderr
    [output] = [m["content"] for m in conversation(loopback.requests[1]) if m["role"] == "tool"]
    for name in ("OPENAI_BASE_URL", *PROXY_PASSWORDS, OTHER_URL[0]):
        assert f"{name}=" not in output  # left out of bash's environment
    assert "NO_PROXY=127.0.0.1,localhost" in output  # no password: kept
    assert "http://eve:[REDACTED:url_password]@host.invalid/x" in output
    session = next((workspace / ".agent_tutorial" / "sessions").glob("*.jsonl")).read_text()
    everything = json.dumps(loopback.requests) + result.stdout + result.stderr + session
    assert [password for password in EVERY_PASSWORD if password in everything] == []


@pytest.mark.parametrize("redact_secrets", ["true", "false"])
def test_an_included_proxy_variable_reaches_bash_with_its_password_masked(
    run_cli: RunCli, loopback: LoopbackServer, workspace: Path, redact_secrets: str
) -> None:
    state = workspace / ".agent_tutorial"
    state.mkdir()
    (state / "config.toml").write_text(
        f'redact_secrets = {redact_secrets}\n[shell_environment]\ninclude = ["HTTP_PROXY"]\n'
    )
    loopback.queue(
        tool_stream([("c1", "bash", {"command": "echo $HTTP_PROXY"})]), text_stream("done")
    )

    result = run_cli("run", "--trust-project", "-c", "2", "-p", "look", env=proxy_environment())

    assert result.exit_code == 0, result.stderr
    [output] = [m["content"] for m in conversation(loopback.requests[1]) if m["role"] == "tool"]
    assert output.startswith("http://bob:[REDACTED:url_password]@proxy.invalid:3128\n")


# --- the rules ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "password"),
    [
        ("http://alice:S3cret@host/v1", "S3cret"),
        ("socks5://u:p@proxy:1080", "p"),
        ("http://me@example.com:pw@host", "pw"),  # the user may hold an @
        ("http://alice@host/v1", None),  # a user, no password
        ("http://alice:@host/v1", None),
        ("http://host:8080/v1", None),  # a port is not a password
        ("alice:S3cret@host", None),  # not a URL
        ("http://u:p@host:9x/", "p"),  # a bad port does not hide the password
        ("http://u:p@[::1", "p"),  # however malformed the rest
        ("proxy is http://u:p@h, see", "p"),
        (None, None),
    ],
)
def test_url_password_reads_the_password_of_a_url(value: str | None, password: str | None) -> None:
    assert url_password(value) == password


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        (
            "at http://alice:S3cret@h/v1: refused",
            "at http://alice:[REDACTED:url_password]@h/v1: refused",
        ),
        ("u=https://:tok@h", "u=https://:[REDACTED:url_password]@h"),
        (
            "a http://u:p@h and b http://v:q@k",
            "a http://u:[REDACTED:url_password]@h and b http://v:[REDACTED:url_password]@k",
        ),
        ("http://u:p@ss@host/x mail@me.org", "http://u:[REDACTED:url_password]@host/x mail@me.org"),
        ("http://host:8080/x@y", "http://host:8080/x@y"),
        ("ssh://git@host:22/repo", "ssh://git@host:22/repo"),
        ("http://alice@host", "http://alice@host"),
        ("http://u:@host", "http://u:@host"),
    ],
)
def test_mask_url_passwords_masks_only_a_password(text: str, shown: str) -> None:
    assert mask_url_passwords(text) == shown


@pytest.mark.parametrize("patterns", [True, False])
def test_the_redactor_masks_a_url_password_even_without_token_shapes(patterns: bool) -> None:
    redactor = Redactor({}, patterns=patterns)

    redacted = redactor.redact("git remote: https://me:ghp-not-a-shape@example.com/r.git")

    assert redacted.text == "git remote: https://me:[REDACTED:url_password]@example.com/r.git"
    assert redacted.count == 1


def test_a_url_password_split_across_stream_pieces_is_masked() -> None:
    stream = Redactor({}).stream(overlap_chars=64, batch_chars=1)

    shown = (
        stream.feed("proxy http://bob:Pr0x") + stream.feed("yPass@proxy:3128 ok") + stream.finish()
    )

    assert shown == "proxy http://bob:[REDACTED:url_password]@proxy:3128 ok"


def test_a_url_password_is_a_known_secret_from_eight_characters() -> None:
    environ = {
        "HTTPS_PROXY": "http://bob:Pr0xyPas@proxy",  # 8 characters
        "HTTP_PROXY": "http://bob:Pr0xyPa@proxy",  # 7
        "PATH": "/bin",
    }

    secrets = known_secrets(
        [environ],
        api_key=None,
        api_key_name="OPENAI_API_KEY",
        public=["http://alice:BaseUrlPass@host/v1", "http://alice:S3cret@host/v1"],
    )

    assert secrets == {"Pr0xyPas": "HTTPS_PROXY", "BaseUrlPass": "url_password"}
    assert Redactor(secrets).redact("echo Pr0xyPas").text == "echo [REDACTED:HTTPS_PROXY]"


def test_every_url_password_in_a_value_is_a_known_secret() -> None:
    """pip's extra index URL lists several URLs: the second password printed on its own
    (a script that parses the URL) leaked, as only the first was a known secret."""
    environ = {"PIP_EXTRA_INDEX_URL": "https://u:FirstPassw0rd@a/simple https://u:SecondPassw0rd@b"}

    secrets = known_secrets([environ], api_key=None, api_key_name="OPENAI_API_KEY")

    assert secrets == {
        "FirstPassw0rd": "PIP_EXTRA_INDEX_URL",
        "SecondPassw0rd": "PIP_EXTRA_INDEX_URL",
    }


def test_a_variable_holding_a_url_with_a_password_leaves_bash_environment() -> None:
    environ = {
        "HTTPS_PROXY": "http://bob:pw@proxy:3128",
        "MY_DB": "postgres://dave:pw@db/app",
        "HTTP_PROXY": "http://proxy:3128",  # no password: kept
        "NO_PROXY": "localhost",
        "HOME_PAGE": "https://example.com/a@b",
    }

    kept = shell_environment(environ, include=["MY_DB"])

    assert kept == {
        "MY_DB": "postgres://dave:pw@db/app",  # let through by name
        "HTTP_PROXY": "http://proxy:3128",
        "NO_PROXY": "localhost",
        "HOME_PAGE": "https://example.com/a@b",
    }
