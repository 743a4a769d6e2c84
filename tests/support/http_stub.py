"""Small servers on loopback that stand in for whatever a URL may point at: an HTTP server answering a
fixed response (recording what it got), and a TCP port that speaks no HTTP at all."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Stub:
    """What the HTTP stub answers, and the requests it got (path and headers)."""

    status: int = 200
    body: bytes = b""
    content_type: str = "text/html; charset=utf-8"
    port: int = 0
    requests: list[tuple[str, dict[str, str]]] = field(default_factory=list)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"


@contextmanager
def http_stub(
    status: int = 200, body: bytes = b"", content_type: str = "text/html; charset=utf-8"
) -> Iterator[Stub]:
    stub = Stub(status=status, body=body, content_type=content_type)

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            stub.requests.append((self.path, {k.lower(): v for k, v in self.headers.items()}))
            self.send_response(stub.status)
            self.send_header("Content-Type", stub.content_type)
            self.send_header("Content-Length", str(len(stub.body)))
            self.end_headers()
            self.wfile.write(stub.body)

        do_POST = do_GET

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    stub.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield stub
    finally:
        server.shutdown()
        server.server_close()


@contextmanager
def not_http_port() -> Iterator[int]:
    """A loopback port that accepts connections, writes a line that is not HTTP and hangs up."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    stop = threading.Event()

    def serve() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                continue
            with conn:
                conn.sendall(b"SSH-2.0-OpenSSH_9.6 internal-service\r\n")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1]
    finally:
        stop.set()
        thread.join(timeout=2)
        listener.close()


def closed_port() -> int:
    """A loopback port nothing listens on (bound and released: the kernel refuses connections to it)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
