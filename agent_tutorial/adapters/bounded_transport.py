"""Every reply bounded as it arrives, in time and in bytes: an httpx transport wrapper
(httpx's one-method extension point, `BaseTransport.handle_request`) that the adapter's
HTTP client puts around each of its transports.

Why below the SDK: httpx's timeouts are per read, so a server that sends `: keepalive`
every few seconds is never timed out, and the SDK's SSE decoder drops such comments and
keeps a line until its newline before our code sees a chunk. Only the transport sees every
byte, and sees it first.

- **One deadline per request**, `timeout_s` from the moment it is sent: until the headers
  arrive each wait is httpx's own timeout (the same `timeout_s`); from then on every read
  checks the deadline, and a watchdog thread shuts the socket at the deadline, so a body
  that goes silent ends there too, not a whole timeout after its last byte.
- **A byte cap on the body**, counted as it arrives. The reply is asked for uncompressed
  (`Accept-Encoding: identity`) so that those are the bytes the SDK decodes; a reply that
  comes compressed anyway is refused, since a small compressed body can inflate to
  gigabytes inside httpx before anything could count them.
- What passes a bound raises `ReplyOverLimit`. It is not an httpx error on purpose: the SDK
  retries those (timeouts among them), and a reply that used up its time or bytes must
  not be asked for twice more.
"""

from __future__ import annotations

import functools
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import suppress
from dataclasses import dataclass
from typing import Any

import httpx2

Clock = Callable[[], float]


def tls_verification() -> ssl.SSLContext:
    """The TLS context every model client of this process verifies its peers with.

    Loading the system's certificates costs about 75 ms of CPU per client, and each start
    made one or two clients: paid at every start, though a local server (the usual home of
    a small model) is reached over plain `http://` and never needs them. This context loads
    them at its first TLS connection, once per process, exactly as httpx would have
    (`httpx2.create_ssl_context`, which honours `SSL_CERT_FILE` and `SSL_CERT_DIR`)."""
    return _SHARED_CONTEXT


class _SystemTrustOnFirstUse(ssl.SSLContext):
    """An `SSLContext` that hands the TLS work to the system-trust context, made when the
    first TLS connection asks for it. httpcore sets the protocols and wraps the socket
    through these methods only (and closes the socket when wrapping fails); anything else
    would see a context that trusts no certificate and so refuses every peer."""

    _protocols: list[str] | None = None

    def set_alpn_protocols(self, alpn_protocols: Iterable[str]) -> None:
        self._protocols = list(alpn_protocols)  # kept for the wrap: loading may fail

    def wrap_socket(self, *args: Any, **kwargs: Any) -> ssl.SSLSocket:
        return self._trust().wrap_socket(*args, **kwargs)

    def wrap_bio(self, *args: Any, **kwargs: Any) -> ssl.SSLObject:
        return self._trust().wrap_bio(*args, **kwargs)

    def _trust(self) -> ssl.SSLContext:
        trust = _system_trust()
        if self._protocols is not None:
            trust.set_alpn_protocols(self._protocols)
        return trust


@functools.cache
def _system_trust() -> ssl.SSLContext:
    try:
        return httpx2.create_ssl_context()
    except OSError as error:  # SSL_CERT_FILE names a folder, a missing or unreadable file
        # An SSLError is what httpx reports as a failed connection, in the endpoint's words.
        raise ssl.SSLError(f"the certificates to trust could not be loaded: {error}") from None


_SHARED_CONTEXT = _SystemTrustOnFirstUse(ssl.PROTOCOL_TLS_CLIENT)


class ReplyOverLimit(Exception):
    """A reply passed one of its `ReplyBounds`; `adapters.openai_chat` reports it."""


class DeadlinePassed(ReplyOverLimit):
    """No complete reply within the deadline."""


class TooManyBytes(ReplyOverLimit):
    """The body passed `max_body_bytes`."""


class CompressedReply(ReplyOverLimit):
    """The body came compressed although it was asked for without compression."""

    def __init__(self, encoding: str) -> None:
        super().__init__(encoding)
        self.encoding = encoding


@dataclass(frozen=True, slots=True)
class ReplyBounds:
    """How long one request may take and how large its reply may be."""

    timeout_s: float
    """Seconds from sending a request to the last byte of its reply."""
    max_body_bytes: int
    """Bytes of one reply's body, as they arrive on the wire."""


class BoundedTransport(httpx2.BaseTransport):
    """Sends through `inner`, and bounds every reply by `bounds` (see the module)."""

    def __init__(
        self, inner: httpx2.BaseTransport, bounds: ReplyBounds, clock: Clock = time.monotonic
    ) -> None:
        self._inner = inner
        self._bounds = bounds
        self._clock = clock

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        deadline = self._clock() + self._bounds.timeout_s
        request.headers["accept-encoding"] = "identity"
        try:
            response = self._inner.handle_request(request)
        except httpx2.TimeoutException:
            raise DeadlinePassed from None
        encoding = response.headers.get("content-encoding", "identity").strip().lower()
        if encoding not in ("", "identity"):
            response.close()
            raise CompressedReply(encoding)
        if self._clock() > deadline:
            response.close()
            raise DeadlinePassed
        watchdog = _Watchdog(_socket_of(response), deadline - self._clock())
        body = _BoundedBody(response.stream, self._bounds, deadline, self._clock, watchdog)
        return httpx2.Response(
            response.status_code,
            headers=response.headers,
            stream=body,
            extensions=response.extensions,
        )

    def close(self) -> None:
        self._inner.close()


class _BoundedBody(httpx2.SyncByteStream):
    """The body of one reply: every read counts its bytes and checks the deadline."""

    def __init__(
        self,
        inner: Any,
        bounds: ReplyBounds,
        deadline: float,
        clock: Clock,
        watchdog: _Watchdog,
    ) -> None:
        self._inner = inner
        self._max_bytes = bounds.max_body_bytes
        self._deadline = deadline
        self._clock = clock
        self._watchdog = watchdog
        self._received = 0

    def __iter__(self) -> Iterator[bytes]:
        try:
            for chunk in self._inner:
                self._received += len(chunk)
                if self._received > self._max_bytes:
                    raise TooManyBytes
                if self._clock() > self._deadline:
                    raise DeadlinePassed
                yield chunk
        except httpx2.TimeoutException:  # a read waited a whole timeout: the deadline is past
            raise DeadlinePassed from None
        except httpx2.TransportError:
            if self._watchdog.fired:  # the read broke because the watchdog shut the socket
                raise DeadlinePassed from None
            raise
        if self._watchdog.fired:  # a body that ends at the connection's close ended early
            raise DeadlinePassed

    def close(self) -> None:
        # First the watchdog: the connection may go back to the pool once the body closes.
        self._watchdog.cancel()
        self._inner.close()


class _Watchdog:
    """Shuts a socket down at the deadline, from a timer thread: a read blocked on a silent
    server then returns at once (a `shutdown` wakes it; a `close` from another thread
    would not). Without a socket (a transport that is not a network connection) it only
    waits to be cancelled."""

    def __init__(self, sock: socket.socket | None, delay_s: float) -> None:
        self.fired = False
        self._sock = sock
        self._lock = threading.Lock()
        self._cancelled = False
        self._timer = threading.Timer(max(delay_s, 0.0), self._fire)
        self._timer.daemon = True
        if sock is not None:
            self._timer.start()

    def cancel(self) -> None:
        with self._lock:
            self._cancelled = True
        self._timer.cancel()

    def _fire(self) -> None:
        with self._lock:
            if self._cancelled or self._sock is None:
                return
            self.fired = True
            with suppress(OSError):  # already closed by the other side
                self._sock.shutdown(socket.SHUT_RDWR)


def _socket_of(response: httpx2.Response) -> socket.socket | None:
    """The socket under the response (httpcore's documented `network_stream` extension)."""
    stream = response.extensions.get("network_stream")
    sock = stream.get_extra_info("socket") if stream is not None else None
    return sock if isinstance(sock, socket.socket) else None


class BoundedClient(httpx2.Client):
    """An httpx client whose every transport, the direct one and each proxy's from the
    environment (`HTTPS_PROXY`, `NO_PROXY`), is a `BoundedTransport`.

    Passing `transport=` to httpx would turn proxies from the environment off, so the two
    methods that build the transports are wrapped instead.
    """

    def __init__(self, *, bounds: ReplyBounds, clock: Clock = time.monotonic, **options: Any):
        self._bounds = bounds
        self._clock = clock
        super().__init__(**options)

    def _init_transport(self, *args: Any, **kwargs: Any) -> httpx2.BaseTransport:
        return BoundedTransport(super()._init_transport(*args, **kwargs), self._bounds, self._clock)

    def _init_proxy_transport(self, *args: Any, **kwargs: Any) -> httpx2.BaseTransport:
        inner = super()._init_proxy_transport(*args, **kwargs)
        return BoundedTransport(inner, self._bounds, self._clock)
