"""A SOCKS5 proxy on loopback for tests: no authentication, CONNECT only (RFC 1928), and it
counts the connections it relays, so a test can tell that a request went through it."""

from __future__ import annotations

import socket
import socketserver
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress

_NO_AUTHENTICATION = b"\x05\x00"
_SUCCEEDED = b"\x05\x00\x00\x01" + bytes(6)  # bound address 0.0.0.0:0: clients ignore it
_IPV4, _DOMAIN = 1, 3


class Socks5Proxy(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Relay)
        self.relayed: list[tuple[str, int]] = []

    @property
    def url(self) -> str:
        return f"socks5://127.0.0.1:{self.server_address[1]}"


class _Relay(socketserver.BaseRequestHandler):
    server: Socks5Proxy

    def handle(self) -> None:
        client: socket.socket = self.request
        methods = _read(client, _read(client, 2)[1])  # version, count, then the methods
        if 0 not in methods:
            return
        client.sendall(_NO_AUTHENTICATION)
        _, _, _, kind = _read(client, 4)  # version, CONNECT, reserved, address type
        if kind == _IPV4:
            host = socket.inet_ntoa(_read(client, 4))
        elif kind == _DOMAIN:
            host = _read(client, _read(client, 1)[0]).decode()
        else:
            return
        port = int.from_bytes(_read(client, 2), "big")
        self.server.relayed.append((host, port))
        with socket.create_connection((host, port)) as upstream:
            client.sendall(_SUCCEEDED)
            back = threading.Thread(target=_pipe, args=(upstream, client), daemon=True)
            back.start()
            _pipe(client, upstream)
            back.join()


def _read(connection: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = connection.recv(size - len(data))
        if not chunk:
            raise ConnectionError("the client left mid-handshake")
        data += chunk
    return data


def _pipe(source: socket.socket, target: socket.socket) -> None:
    with suppress(OSError):
        while chunk := source.recv(65536):
            target.sendall(chunk)
    with suppress(OSError):
        target.shutdown(socket.SHUT_WR)


@contextmanager
def socks5_proxy() -> Iterator[Socks5Proxy]:
    proxy = Socks5Proxy()
    thread = threading.Thread(target=proxy.serve_forever, daemon=True)
    thread.start()
    try:
        yield proxy
    finally:
        proxy.shutdown()
        proxy.server_close()
