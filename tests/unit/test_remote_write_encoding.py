"""Remote-write encoding, writer behaviour (against a stub HTTP server) and
OpenMetrics output.

The protobuf reader below is written independently of the encoder: it knows
only the wire format and the prompb field numbers.
"""

from __future__ import annotations

import base64
import io
import math
import struct
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import cramjam
import pytest

from benchwatch.model.samples import Sample, group_by_series, sample
from benchwatch.sink.openmetrics import escape_label_value, format_timestamp, format_value, write_openmetrics
from benchwatch.sink.remote_write import (
    BufferedRemoteWriter,
    RemoteWriteError,
    RemoteWriter,
    compress,
    encode_write_request,
    is_retryable,
)

T0 = 1452074400000  # 2016-01-06T10:00:00Z


# ---------------------------------------------------------------------------
# an independent protobuf reader


def read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
        assert shift < 70, "varint too long"


def read_fields(buf: bytes) -> list[tuple[int, int, object]]:
    """(field number, wire type, value) of every field of one message."""
    fields = []
    pos = 0
    while pos < len(buf):
        key, pos = read_varint(buf, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = read_varint(buf, pos)
        elif wire == 1:
            value = buf[pos : pos + 8]
            pos += 8
        elif wire == 2:
            length, pos = read_varint(buf, pos)
            value = buf[pos : pos + length]
            assert len(value) == length, "truncated length-delimited field"
            pos += length
        elif wire == 5:
            value = buf[pos : pos + 4]
            pos += 4
        else:
            raise AssertionError(f"unexpected wire type {wire}")
        fields.append((number, wire, value))
    assert pos == len(buf)
    return fields


def as_int64(u: int) -> int:
    return u - (1 << 64) if u >= 1 << 63 else u


def decode_write_request(buf: bytes) -> list[dict]:
    """[{"labels": [(name, value), ...], "samples": [(value, ts), ...]}, ...]"""
    series = []
    for number, wire, ts_bytes in read_fields(buf):
        assert (number, wire) == (1, 2), "WriteRequest holds only timeseries (field 1)"
        labels, samples = [], []
        for n2, w2, v2 in read_fields(ts_bytes):
            assert w2 == 2
            if n2 == 1:
                lf = {n: v for n, w, v in read_fields(v2)}
                labels.append((lf.get(1, b"").decode(), lf.get(2, b"").decode()))
            elif n2 == 2:
                value, ts = 0.0, 0
                for n3, w3, v3 in read_fields(v2):
                    if n3 == 1:
                        assert w3 == 1
                        value = struct.unpack("<d", v3)[0]
                    elif n3 == 2:
                        assert w3 == 0
                        ts = as_int64(v3)
                    else:
                        raise AssertionError(f"unexpected Sample field {n3}")
                samples.append((value, ts))
            else:
                raise AssertionError(f"unexpected TimeSeries field {n2}")
        series.append({"labels": labels, "samples": samples})
    return series


# ---------------------------------------------------------------------------
# samples


def test_sample_helper_sorts_and_normalises_labels():
    s = sample("m", {"zone": "b", "Alpha": 1, "run": "r1", "empty": ""}, 3, T0)
    assert s == Sample("m", (("Alpha", "1"), ("run", "r1"), ("zone", "b")), 3.0, T0)
    assert isinstance(s.value, float)
    assert s.series == ("m", s.labels)
    assert sample("m", None, 1, 2).labels == ()
    with pytest.raises(ValueError):
        sample("m", {"__name__": "x"}, 1, 2)
    with pytest.raises(AttributeError):
        s.value = 4.0  # frozen


def test_group_by_series_orders_and_dedupes():
    a1 = sample("a", {}, 1, 30)
    a2 = sample("a", {}, 2, 10)
    b1 = sample("b", {"x": "1"}, 3, 20)
    a3 = sample("a", {}, 4, 30)  # same timestamp as a1: last one wins
    groups = group_by_series([a1, b1, a2, a3])
    assert list(groups) == [("a", ()), ("b", (("x", "1"),))]
    assert groups[("a", ())] == [a2, a3]


# ---------------------------------------------------------------------------
# remote-write encoding


def test_encode_exact_bytes_of_minimal_request():
    got = encode_write_request([sample("m", {}, 1.0, 300)])
    label = b"\x0a\x08__name__" + b"\x12\x01m"
    smp = b"\x09" + struct.pack("<d", 1.0) + b"\x10\xac\x02"  # 300 = ac 02
    ts = b"\x0a" + bytes([len(label)]) + label + b"\x12" + bytes([len(smp)]) + smp
    assert got == b"\x0a" + bytes([len(ts)]) + ts


def test_encode_decode_fields():
    samples = [
        sample("benchmark_progress_tps", {"run": "r1", "host": "db1"}, 1234.5, T0 + 1000),
        sample("benchmark_progress_tps", {"run": "r1", "host": "db1"}, 1200.25, T0),
        sample("pgbench_xacts_total", {"run": "r1"}, 99.0, T0),
        sample("benchmark_progress_tps", {"run": "r1", "host": "db1"}, -0.5, T0 + 2000),
    ]
    series = decode_write_request(encode_write_request(samples))
    assert series == [
        {
            "labels": [("__name__", "benchmark_progress_tps"), ("host", "db1"), ("run", "r1")],
            "samples": [(1200.25, T0), (1234.5, T0 + 1000), (-0.5, T0 + 2000)],
        },
        {
            "labels": [("__name__", "pgbench_xacts_total"), ("run", "r1")],
            "samples": [(99.0, T0)],
        },
    ]


def test_labels_sorted_lexicographically_including_name():
    # Upper-case names sort before "__name__"; Prometheus needs byte order.
    s = Sample("m", (("zz", "1"), ("Zone", "eu"), ("a", "x"), ("__meta", "q")), 1.0, 5)
    (series,) = decode_write_request(encode_write_request([s]))
    names = [n for n, _ in series["labels"]]
    assert names == ["Zone", "__meta", "__name__", "a", "zz"]
    assert names == sorted(names)


def test_special_values_and_timestamps():
    samples = [
        sample("m", {"v": "é\"\\\n"}, float("nan"), -1500),  # before 1970
        sample("m", {"v": "é\"\\\n"}, float("inf"), 0),
        sample("m", {"v": "é\"\\\n"}, 0.0, 1),
        sample("m", {"v": "é\"\\\n"}, -math.inf, 2**62),
        sample("m", {"v": "é\"\\\n"}, 0.1 + 0.2, T0),
    ]
    (series,) = decode_write_request(encode_write_request(samples))
    assert series["labels"] == [("__name__", "m"), ("v", "é\"\\\n")]
    values = [v for v, _ in series["samples"]]
    assert [t for _, t in series["samples"]] == [-1500, 0, 1, T0, 2**62]
    assert math.isnan(values[0])
    assert values[1:] == [math.inf, 0.0, 0.1 + 0.2, -math.inf]


def test_empty_label_values_are_left_out_and_names_validated():
    (series,) = decode_write_request(encode_write_request([Sample("m", (("a", ""), ("b", "1")), 1.0, 1)]))
    assert series["labels"] == [("__name__", "m"), ("b", "1")]
    for bad in (
        Sample("1m", (), 1.0, 1),
        Sample("m", (("la-bel", "x"),), 1.0, 1),
        Sample("m", (("__name__", "x"),), 1.0, 1),
        Sample("m", (("a", "x"), ("a", "y")), 1.0, 1),
    ):
        with pytest.raises(ValueError):
            encode_write_request([bad])
    assert encode_write_request([]) == b""


def test_snappy_block_format_round_trip():
    payload = encode_write_request(sample("m", {"i": str(i % 7)}, i, T0 + i) for i in range(1000))
    assert bytes(cramjam.snappy.decompress_raw(compress(payload))) == payload


def test_encoding_100k_samples_is_fast():
    names = ["benchmark_progress_tps", "pgbench_progress_latency_ms", "pgbench_xacts_total"]
    samples = [
        sample(names[i % 3], {"run": "r1", "client": str(i % 5)}, i * 0.5, T0 + (i // 15) * 1000)
        for i in range(100_000)
    ]
    best = math.inf
    for _ in range(3):
        t = time.perf_counter()
        payload = encode_write_request(samples)
        best = min(best, time.perf_counter() - t)
    assert best < 1.0, f"encoding 100k samples took {best:.3f}s"
    decoded = decode_write_request(payload)
    assert sum(len(s["samples"]) for s in decoded) == 100_000


# ---------------------------------------------------------------------------
# RemoteWriter / BufferedRemoteWriter against a stub endpoint


class StubEndpoint:
    """A local HTTP server recording remote-write requests; answers with the
    queued (status, body) responses, then with what ``refuse`` says of the
    request's decoded series (a (status, body), or None), then 204."""

    def __init__(self):
        self.requests: list[dict] = []
        self.responses: list[tuple[int, str]] = []
        self.refuse = None
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                stub.requests.append({"path": self.path, "headers": dict(self.headers), "body": body})
                verdict = None
                if not stub.responses and stub.refuse is not None:
                    verdict = stub.refuse(decode_write_request(bytes(cramjam.snappy.decompress_raw(body))))
                status, text, *extra = stub.responses.pop(0) if stub.responses else verdict or (204, "")
                data = text.encode()
                self.send_response(status)
                for name, value in (extra[0] if extra else {}).items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/api/v1/write"

    def decoded(self, i: int) -> list[dict]:
        return decode_write_request(bytes(cramjam.snappy.decompress_raw(self.requests[i]["body"])))

    def close(self):
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)


@pytest.fixture
def stub():
    endpoint = StubEndpoint()
    try:
        yield endpoint
    finally:
        endpoint.close()


def closed_port_url() -> str:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/api/v1/write"


def test_writer_sends_protocol_headers_and_batches_in_time_order(stub):
    samples = [sample("m", {"s": str(i % 2)}, i, T0 + (9 - i) * 1000) for i in range(10)]
    RemoteWriter(stub.url, max_batch=4).send(samples)
    assert len(stub.requests) == 3
    headers = stub.requests[0]["headers"]
    assert headers["Content-Encoding"] == "snappy"
    assert headers["Content-Type"] == "application/x-protobuf"
    assert headers["X-Prometheus-Remote-Write-Version"] == "0.1.0"
    assert stub.requests[0]["path"] == "/api/v1/write"
    stamps = [[t for s in stub.decoded(i) for _, t in s["samples"]] for i in range(3)]
    assert sorted(t for batch in stamps for t in batch) == [T0 + i * 1000 for i in range(10)]
    assert max(stamps[0]) < min(stamps[1]) and max(stamps[1]) < min(stamps[2])


def test_batches_do_not_split_one_timestamp(stub):
    samples = [sample("m", {"s": str(i)}, i, T0 + (i // 3) * 1000) for i in range(9)]
    RemoteWriter(stub.url, max_batch=4).send(samples)
    sizes = [sum(len(s["samples"]) for s in stub.decoded(i)) for i in range(len(stub.requests))]
    assert sizes == [3, 3, 3]


@pytest.mark.parametrize(
    "status, body, retryable",
    [
        (400, "out of order sample", False),
        (404, "404 page not found", False),
        (500, "too old sample", False),
        (500, "out of bounds", False),
        (500, "some storage error", True),
        (503, "unavailable", True),
        (429, "slow down", True),
    ],
)
def test_writer_error_classification(stub, status, body, retryable):
    stub.responses.append((status, body + "\n"))
    with pytest.raises(RemoteWriteError) as info:
        RemoteWriter(stub.url).send([sample("m", {}, 1, T0)])
    assert info.value.status == status
    assert info.value.body == body
    assert info.value.retryable is retryable
    assert str(status) in str(info.value) and body in str(info.value)


def test_writer_connection_error_is_retryable():
    with pytest.raises(RemoteWriteError) as info:
        RemoteWriter(closed_port_url(), timeout_s=2).send([sample("m", {}, 1, T0)])
    assert info.value.status is None
    assert info.value.retryable is True
    assert is_retryable(None, "")


def test_writer_credentials_sent_but_never_shown(stub):
    url = stub.url.replace("http://", "http://alice:s3cret@")
    writer = RemoteWriter(url + "?token=hidden")
    writer.send([sample("m", {}, 1, T0)])
    auth = stub.requests[0]["headers"]["Authorization"]
    assert auth == "Basic " + base64.b64encode(b"alice:s3cret").decode()
    stub.responses.append((500, "boom"))
    with pytest.raises(RemoteWriteError) as info:
        writer.send([sample("m", {}, 1, T0)])
    for secret in ("s3cret", "alice", "hidden"):
        assert secret not in str(info.value)
        assert secret not in repr(writer)


def test_writer_does_not_follow_redirects(stub):
    stub.responses.append((307, "moved", {"Location": stub.url + "/elsewhere"}))
    url = stub.url.replace("http://", "http://alice:s3cret@")
    with pytest.raises(RemoteWriteError) as info:
        RemoteWriter(url).send([sample("m", {}, 1, T0)])
    assert info.value.status == 307 and info.value.retryable is False
    assert len(stub.requests) == 1  # credentials not forwarded anywhere


def test_buffered_writer_keeps_retryable_and_bounds_queue(stub, caplog):
    down = BufferedRemoteWriter(closed_port_url(), timeout_s=2, max_batch=3, max_pending=5)
    down.enqueue(sample("m", {}, i, T0 + i) for i in range(4))
    assert down.flush() == 0
    assert (down.pending, down.failed_requests, down.sent_samples) == (4, 1, 0)
    down.enqueue(sample("m", {}, i, T0 + i) for i in range(4, 8))
    assert down.pending == 5 and down.dropped_samples == 3  # oldest dropped
    assert [s.value for s in down._pending] == [3.0, 4.0, 5.0, 6.0, 7.0]

    # the same queue content delivered once the endpoint answers
    up = BufferedRemoteWriter(stub.url, max_batch=2)
    up.enqueue(list(down._pending))
    stub.responses.append((503, "not now"))
    assert up.flush() == 0
    assert (up.pending, up.failed_requests) == (5, 1)
    assert up.last_error.status == 503
    assert up.flush() == 5
    assert (up.pending, up.sent_samples) == (0, 5)
    delivered = [v for i in range(1, len(stub.requests)) for s in stub.decoded(i) for v, _ in s["samples"]]
    assert delivered == [3.0, 4.0, 5.0, 6.0, 7.0]


def test_buffered_writer_drops_rejected_and_invalid_never_raises(stub):
    w = BufferedRemoteWriter(stub.url, max_batch=2)
    # The first batch, then each of its halves: every sample of it refused for its order.
    stub.responses += [(400, "out of order sample")] * 3
    w.enqueue([sample("m", {}, 1, T0), sample("m", {}, 2, T0 + 1), sample("m", {}, 3, T0 + 2)])
    assert w.flush() == 1  # first batch rejected for good, second delivered
    assert (w.rejected_samples, w.sent_samples, w.pending, w.failed_requests) == (2, 1, 0, 1 + 2)
    w.enqueue([Sample("bad name", (), 1.0, T0), sample("ok", {}, 5, T0)])
    assert w.flush() == 1
    assert w.rejected_samples == 3 and w.pending == 0


def test_buffered_writer_halves_a_batch_until_its_duplicate_sample_is_alone(stub):
    """Prometheus 2.42 refuses a whole request (400 "duplicate sample for timestamp") for one sample
    that gives a series a second value at the millisecond of its last stored sample: the run's progress
    lines sent beside it would be lost. The refused batch is halved until the duplicate is alone; only
    it is dropped. (Within one batch the last value wins before sending: group_by_series.)"""
    last: dict[tuple, tuple] = {}

    def refuse(series):
        for s in series:
            key = tuple(s["labels"])
            for v, t in s["samples"]:
                if key in last and last[key][1] == t and last[key][0] != v:
                    return (400, "duplicate sample for timestamp")
        for s in series:
            last[tuple(s["labels"])] = s["samples"][-1]
        return None

    stub.refuse = refuse
    lines = [sample("benchmark_progress_tps", {"run_id": "r"}, 100 + i, T0 + i * 1000) for i in range(40)]
    host = [sample("node_cpu_seconds_total", {"cpu": "0"}, i, T0 + i * 1000) for i in range(40)]
    twice = sample("node_cpu_seconds_total", {"cpu": "0"}, 99.5, T0 + 19 * 1000)  # read again in that ms
    w = BufferedRemoteWriter(stub.url)
    w.enqueue(lines[:20] + host[:20])
    assert w.flush() == 40
    w.enqueue([twice] + lines[20:] + host[20:])
    assert w.flush() == 40
    assert (w.sent_samples, w.rejected_samples, w.pending) == (80, 1, 0)
    # log2(41) levels of two requests each, at most.
    assert 1 <= w.failed_requests <= 6 and len(stub.requests) <= 2 + 2 * 6

    # Past its budget of requests (8 per bit of its size) a batch stops halving: every sample refused
    # costs at most that many requests, not two per sample.
    stub.requests.clear()
    w.enqueue([sample("m", {"s": str(i)}, 1, T0 + 5_000) for i in range(64)])
    stub.responses += [(400, "out of order sample")] * 1000
    assert w.flush() == 0
    assert w.rejected_samples == 1 + 64
    assert len(stub.requests) <= 1 + 8 * (64).bit_length()
    stub.responses.clear()


def test_buffered_writer_sends_apart_what_a_too_old_sample_would_take_down(stub):
    """Prometheus stores nothing of a request holding one sample too old: a replayed run from 1980 and
    the samples of now sent together would all be lost. The refused batch is cut at the middle of its
    time span and each half sent again; only the old half is rejected."""
    old = [sample("m", {"run": "1980"}, i, 315_532_800_000 + i * 1000) for i in range(3)]
    now = [sample("m", {"run": "now"}, i, T0 + i * 1000) for i in range(2)]
    w = BufferedRemoteWriter(stub.url)
    stub.responses += [(500, "too old sample"), (500, "too old sample")]  # the whole, then the old half
    w.enqueue(old + now)
    assert w.flush() == 2
    assert (w.sent_samples, w.rejected_samples, w.failed_requests, w.pending) == (2, 3, 2, 0)
    runs = [{dict(s["labels"])["run"] for s in stub.decoded(i)} for i in range(3)]
    assert runs == [{"1980", "now"}, {"1980"}, {"now"}]

    # Samples close in time are refused together, in one request: nothing to tell apart.
    stub.responses.append((500, "too old sample"))
    w.enqueue(old)
    assert w.flush() == 0
    assert (w.rejected_samples, w.failed_requests, len(stub.requests)) == (6, 3, 4)
    # A refusal about the request, not its samples' age, is not retried in parts.
    stub.responses.append((400, "snappy: corrupt input"))
    w.enqueue(old + now)
    assert w.flush() == 0
    assert (w.rejected_samples, len(stub.requests)) == (11, 5)


# ---------------------------------------------------------------------------
# OpenMetrics output


def om_text(samples, **kw) -> str:
    buf = io.StringIO()
    write_openmetrics(samples, buf, **kw)
    return buf.getvalue()


def test_openmetrics_escaping_and_layout():
    samples = [
        sample("pgbench_xacts_total", {"run": 'r"1\\x\ny', "b": "é"}, 10, T0 + 1000),
        sample("benchmark_progress_tps", {"run": "a"}, 0.5, T0 + 250),
        sample("pgbench_xacts_total", {"run": 'r"1\\x\ny', "b": "é"}, 0, T0),
        sample("benchmark_progress_tps", {"run": "a"}, float("nan"), T0 + 1250),
        sample("up", {}, float("-inf"), T0),
    ]
    text = om_text(
        samples,
        types={"pgbench_xacts": "counter"},
        help={"pgbench_xacts": 'Transactions "done"\\ so far\nline 2', "benchmark_progress_tps": "tps"},
    )
    assert text == (
        "# HELP benchmark_progress_tps tps\n"
        "# TYPE benchmark_progress_tps gauge\n"
        'benchmark_progress_tps{run="a"} 0.5 1452074400.250\n'
        'benchmark_progress_tps{run="a"} NaN 1452074401.250\n'
        '# HELP pgbench_xacts Transactions \\"done\\"\\\\ so far\\nline 2\n'
        "# TYPE pgbench_xacts counter\n"
        'pgbench_xacts_total{b="é",run="r\\"1\\\\x\\ny"} 0.0 1452074400.000\n'
        'pgbench_xacts_total{b="é",run="r\\"1\\\\x\\ny"} 10.0 1452074401.000\n'
        "# TYPE up gauge\n"
        "up -Inf 1452074400.000\n"
        "# EOF\n"
    )


def test_openmetrics_counter_type_by_sample_name_and_errors():
    text = om_text([sample("a_total", {}, 1, 0)], types={"a_total": "counter"})
    assert "# TYPE a counter\na_total 1.0 0.000\n" in text
    assert "# TYPE b_total gauge\n" in om_text([sample("b_total", {}, 1, 0)])
    with pytest.raises(ValueError, match="_total"):
        om_text([sample("c", {}, 1, 0)], types={"c": "counter"})
    with pytest.raises(ValueError, match="unsupported"):
        om_text([sample("h", {}, 1, 0)], types={"h": "histogram"})
    with pytest.raises(ValueError):  # gauge "d" and counter "d_total" are both family "d"
        om_text([sample("d", {}, 1, 0), sample("d_total", {}, 1, 0)], types={"d_total": "counter"})
    with pytest.raises(ValueError):
        om_text([Sample("e", (("bad-label", "x"),), 1.0, 0)])


def test_openmetrics_helpers():
    assert escape_label_value('a\\b"c\nd') == 'a\\\\b\\"c\\nd'
    assert format_value(3) == "3.0" and format_value(1e20) == "1e+20"
    assert format_value(float("inf")) == "+Inf"
    assert format_timestamp(T0 + 5) == "1452074400.005"
    assert format_timestamp(-1500) == "-1.500"
    # 131570.800 s parses to a double just below 131570800 ms; Prometheus
    # truncates, so a nudged representation is written instead.
    assert int(float("131570.800") * 1000) == 131570799
    nudged = format_timestamp(131570800)
    assert int(float(nudged) * 1000) == 131570800 == round(float(nudged) * 1000)
