"""benchwatch.util.keepalive against a real HTTP/1.1 server on 127.0.0.1: one connection, kept."""

from __future__ import annotations

import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from benchwatch.model.samples import sample
from benchwatch.query import prometheus
from benchwatch.sink.remote_write import RemoteWriteError, RemoteWriter
from benchwatch.util.keepalive import KeepAlive


class Server:
    """Counts the TCP connections it accepts; answers 204, or closes after each answer when told."""

    def __init__(self):
        self.connections = 0
        self.close_each = False
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def setup(self):
                outer.connections += 1
                super().setup()

            def _answer(self):
                length = int(self.headers.get("Content-Length") or 0)
                self.rfile.read(length)
                if self.path.startswith("/api/v1/query"):  # as Prometheus answers an instant query
                    body = b'{"status":"success","data":{"resultType":"vector","result":[]}}'
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                    return
                self.send_response(204 if not self.path.startswith("/redirect") else 302)
                if self.path.startswith("/redirect"):
                    self.send_header("Location", "/elsewhere")
                self.send_header("Content-Length", "0")
                self.end_headers()
                if outer.close_each:
                    self.close_connection = True

            do_GET = do_POST = _answer

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def stop(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server():
    s = Server()
    yield s
    s.stop()


def test_requests_share_one_connection(server):
    client = KeepAlive(server.url)
    for _ in range(20):
        assert client.request("POST", "/api/v1/write", b"x" * 100)[0] == 204
    assert server.connections == 1
    client.close()


def test_a_connection_the_server_closed_is_replaced(server):
    client = KeepAlive(server.url)
    server.close_each = True  # like a server's idle timeout closing between two requests
    for _ in range(5):
        assert client.request("GET", "/")[0] == 204
    assert server.connections == 5


def test_no_server_is_an_oserror():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, not listening: refused
        with pytest.raises(OSError):
            KeepAlive(f"http://127.0.0.1:{port}", timeout_s=2).request("GET", "/")


def test_remote_writer_keeps_its_connection_and_follows_no_redirect(server):
    writer = RemoteWriter(server.url + "/api/v1/write")
    for i in range(10):
        writer.send([sample("x", {}, float(i), 1_000 + i)])
    assert server.connections == 1
    with pytest.raises(RemoteWriteError) as err:
        RemoteWriter(server.url + "/redirect").send([sample("x", {}, 1.0, 1_000)])
    assert err.value.status == 302 and not err.value.retryable


def test_queries_from_short_lived_threads_share_a_connection(server):
    """The dips collector asks from a new thread each pass: the connection outlives the thread."""
    for _ in range(3):
        t = threading.Thread(target=prometheus.query, args=(server.url, "up"))
        t.start()
        t.join()
    assert prometheus.query(server.url, "up") == []
    assert server.connections == 1
