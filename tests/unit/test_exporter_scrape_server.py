"""The exporter's HTTP server: a scraper that hangs up early is no traceback; any other failure is logged."""

from __future__ import annotations

import logging
from http.server import BaseHTTPRequestHandler

import pytest

from benchwatch.exporter.server import ScrapeServer


@pytest.fixture
def server():
    httpd = ScrapeServer(("127.0.0.1", 0), BaseHTTPRequestHandler)
    yield httpd
    httpd.server_close()


def test_a_scraper_gone_before_the_body_is_written_is_not_a_traceback(server, capsys, caplog):
    caplog.set_level(logging.DEBUG, "benchwatch.exporter")
    for error in (BrokenPipeError(32, "Broken pipe"), ConnectionResetError(104, "Connection reset by peer")):
        try:
            raise error
        except ConnectionError:
            server.handle_error(None, ("127.0.0.1", 53322))
    assert capsys.readouterr().err == ""  # socketserver's default prints the traceback to stderr
    assert [r.levelno for r in caplog.records] == [logging.DEBUG, logging.DEBUG]


def test_any_other_failure_of_a_request_is_logged_with_its_traceback(server, caplog):
    try:
        raise ValueError("a bug")
    except ValueError:
        server.handle_error(None, ("127.0.0.1", 53322))
    (record,) = caplog.records
    assert record.levelno == logging.ERROR and record.exc_info and "127.0.0.1" in record.getMessage()
