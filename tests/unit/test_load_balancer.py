"""The loopback load balancer of the load benchmark's two-server topology, on two tiny HTTP servers."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx

from benchmarks.load_balancer import load_balancer


@contextmanager
def named_server(name: str) -> Iterator[str]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = f"{name} {self.path}".encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_each_new_connection_goes_to_the_next_server_in_turn_and_the_answer_comes_back_whole():
    with named_server("a") as a, named_server("b") as b, load_balancer([a, b]) as front:
        limits = httpx.Limits(max_keepalive_connections=0)
        with httpx.Client(base_url=front, limits=limits, timeout=10) as client:
            answers = [client.get(f"/turn/{n}").text for n in range(4)]
    assert answers == ["a /turn/0", "b /turn/1", "a /turn/2", "b /turn/3"]
