"""Benchmark: a request on a kept connection against one on a new connection, in the client's CPU.

Run from the repository root::

    .venv/bin/python bench/bench_keepalive.py [--requests 500]

What the exporter (a remote write per progress line), the alert printer (Alertmanager once a
second) and the query client do every second: a small HTTP request to 127.0.0.1. An HTTP/1.1
server in this process answers 204; the CPU of the requesting thread (RUSAGE_THREAD) is
counted for --requests POSTs through urllib (a new TCP connection each, as before) and
through benchwatch.util.keepalive (one connection).
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import threading
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchwatch.util.keepalive import KeepAlive

BODY = b"x" * 300  # about a progress line's remote-write request, snappy-compressed


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(204)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


def thread_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_THREAD)
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=500)
    n = parser.parse_args().requests
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{httpd.server_address[1]}/api/v1/write"
    try:
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        t0 = thread_cpu()
        for _ in range(n):
            with opener.open(urllib.request.Request(url, data=BODY, method="POST")) as response:
                response.read()
        t1 = thread_cpu()
        kept = KeepAlive(url)
        for _ in range(n):
            kept.request("POST", "/api/v1/write", body=BODY)
        t2 = thread_cpu()
        kept.close()
    finally:
        httpd.shutdown()
        httpd.server_close()
    print(f"{n} requests each, client thread CPU per request: new connection (urllib) {(t1 - t0) / n * 1000:.3f} ms, "
          f"kept connection {(t2 - t1) / n * 1000:.3f} ms")


if __name__ == "__main__":
    main()
