"""TLS to the model: the system's certificates are loaded at the first TLS connection, not
at every start, and a peer is verified against them exactly as before.

A start used to load them twice (the model client and the window probe each built a
context), about 150 ms of CPU, though a local server is reached over plain http.
"""

from __future__ import annotations

import shutil
import ssl
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent_tutorial.adapters import bounded_transport
from agent_tutorial.adapters.openai_chat import OpenAIChatModel
from agent_tutorial.core.messages import user_message
from agent_tutorial.core.model import ConnectionFailedError, make_request
from tests.conftest import LOOPBACK_MODEL, TEST_API_KEY, MakeAdapter, key_redactor
from tests.loopback import LoopbackServer, text_stream


def test_a_plain_http_endpoint_loads_no_certificates(
    make_adapter: MakeAdapter, loopback: LoopbackServer
) -> None:
    bounded_transport._system_trust.cache_clear()
    loopback.queue(text_stream("hello"))

    reply = make_adapter().complete(make_request([user_message("hi")]))

    assert reply.message.content == "hello"
    assert bounded_transport._system_trust.cache_info().currsize == 0
    assert bounded_transport.tls_verification().cert_store_stats()["x509_ca"] == 0


def test_the_shared_context_alone_refuses_every_peer() -> None:
    """What does not pass through the three delegated methods fails closed."""
    context = bounded_transport.tls_verification()

    assert context.verify_mode == ssl.CERT_REQUIRED
    assert context.check_hostname is True


def self_signed(folder: Path, name: str) -> Path:
    """A self-signed certificate for 127.0.0.1 in `folder` (NAME.pem, its key NAME.key)."""
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("the openssl command is not installed: cannot make a test certificate")
    certificate = folder / f"{name}.pem"
    subprocess.run(
        [
            *(openssl, "req", "-x509", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1"),
            *("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1"),
            *("-addext", "subjectAltName=IP:127.0.0.1"),
            *("-keyout", str(certificate.with_suffix(".key")), "-out", str(certificate)),
        ],
        check=True,
        capture_output=True,
    )
    return certificate


@pytest.fixture
def certificate(tmp_path: Path) -> Path:
    return self_signed(tmp_path, "server")


@pytest.fixture
def tls_loopback(certificate: Path) -> Iterator[LoopbackServer]:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(certificate, certificate.with_suffix(".key"))
    server = LoopbackServer()
    server.use_tls(context)
    server.start()
    try:
        yield server
    finally:
        server.stop()


def adapter_for(server: LoopbackServer) -> OpenAIChatModel:
    return OpenAIChatModel(
        base_url=server.base_url,
        api_key=TEST_API_KEY,
        model=LOOPBACK_MODEL,
        redaction=key_redactor(),
        max_retries=0,
    )


@pytest.mark.parametrize("trusted", [True, False])
def test_an_https_endpoint_is_verified_against_the_systems_certificates(
    tls_loopback: LoopbackServer,
    certificate: Path,
    trusted: bool,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    trusted_file = certificate if trusted else self_signed(certificate.parent, "another")
    monkeypatch.setenv("SSL_CERT_FILE", str(trusted_file))
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    bounded_transport._system_trust.cache_clear()  # they are read when first needed
    tls_loopback.queue(text_stream("over tls"))
    adapter = adapter_for(tls_loopback)

    try:
        with adapter:
            if trusted:
                reply = adapter.complete(make_request([user_message("hi")]))
                assert reply.message.content == "over tls"
            else:
                with pytest.raises(ConnectionFailedError, match="CERTIFICATE_VERIFY_FAILED"):
                    adapter.complete(make_request([user_message("hi")]))
                assert tls_loopback.requests == []
    finally:
        bounded_transport._system_trust.cache_clear()  # later tests load their own


def test_certificates_that_cannot_be_loaded_are_a_failed_connection_saying_why(
    tls_loopback: LoopbackServer, certificate: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SSL_CERT_FILE", str(certificate.parent))  # a folder, not a file
    bounded_transport._system_trust.cache_clear()
    adapter = adapter_for(tls_loopback)

    try:
        with adapter, pytest.raises(ConnectionFailedError) as caught:
            adapter.complete(make_request([user_message("hi")]))
    finally:
        bounded_transport._system_trust.cache_clear()
    assert "the certificates to trust could not be loaded: [Errno 21] Is a directory" in str(
        caught.value
    )
