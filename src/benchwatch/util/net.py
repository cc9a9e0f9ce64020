"""Loopback ports and plain HTTP checks, for starting and probing local components."""

from __future__ import annotations

import socket
import urllib.error
import urllib.request

# Where every server, exporter and web page benchwatch starts listens: loopback only.
LISTEN_HOST = "127.0.0.1"


def port_free(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def http_get(url: str, timeout: float = 2.0) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def http_ok(url: str, timeout: float = 1.0) -> bool:
    try:
        return http_get(url, timeout)[0] == 200
    except OSError:
        return False
