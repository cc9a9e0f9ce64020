"""Latency histograms from pgbench's per-transaction log (``pgbench -l``).

pgbench writes one log file per thread: ``<prefix>.<pid>`` for thread 0 and
``<prefix>.<pid>.<n>`` for thread n (prefix ``pgbench_log`` unless
``--log-prefix``; same naming in 9.4 to 17).  Each line is one transaction::

    client_id transaction_no time script_no time_epoch time_us [schedule_lag] [retries]

``time`` is the latency in microseconds (``%.0f``); ``schedule_lag`` is present
with ``-R``, ``retries`` with ``--max-tries`` other than 1 (pgbench 15+).  In
place of ``time``, a transaction skipped under ``-R``/``-L`` prints ``skipped``
and a failed one prints ``failed`` (or ``serialization``/``deadlock``, and
``other`` where ``--continue-on-error`` exists, with ``--failures-detailed``).  ``--sampling-rate`` only logs
fewer lines.  The number of fields is fixed for a run, so every line of a
file has the same shape.

``--aggregate-interval`` writes a different format (one line per interval:
count, sum, sum of squares, min and max latency...).  It carries no
per-transaction distribution, so those lines cannot fill histogram buckets, and
adding them to ``_count``/``_sum`` alone would break ``_count`` == ``+Inf``
bucket: they are counted in :attr:`TxlogAggregator.aggregate_lines` and as
unparsed, and their interval start still advances time.

:class:`TxlogAggregator` turns the lines into a cumulative Prometheus histogram
``benchmark_latency_seconds`` at one-second steps of transaction time (the
``time_epoch`` of each line), timestamped at the end of each second, so
``histogram_quantile(0.99, sum by (le) (rate(benchmark_latency_seconds_bucket[..])))``
gives the p99 per second.  See docs/latency-percentiles.md.

Speed (the main constraint: a busy run logs tens of thousands of lines per
second, and one core must keep up): lines are parsed 64 KiB at a time with a
handful of whole-piece C operations, and no Python code runs per line.
``translate`` checks the character set; newlines become tokens of their own
(``replace`` + ``split``), so one ``count`` on a stride of the token list
proves that every line has the same number of fields; the epoch column, a
stride of the same list, is cut into seconds (the lines of one file are in time
order: ``bisect``, then ``count`` proves each second's run uniform); the
latency column of each second goes through ``map(int)``, ``sum``, a table from
microseconds to bucket index, and a ``Counter``.  A piece that fails a check
is parsed line by line, exactly but several times slower.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections import Counter
from collections.abc import Iterable
from itertools import accumulate

from prometheus_client.utils import floatToGoString

from benchwatch.model.histogram import DEFAULT_BUCKETS
from benchwatch.model.samples import Sample, sample

__all__ = ["DEFAULT_BUCKETS", "SILENT_SOURCE_SECONDS", "TXLOG_METRICS", "TxlogAggregator"]


# name -> (type, help), to merge into the run model's catalogue.
TXLOG_METRICS: dict[str, tuple[str, str]] = {
    "benchmark_latency_seconds": ("histogram", "Transaction latency from pgbench's per-transaction log (-l), per second of transaction time (completion time)."),
    "pgbench_txlog_failed_transactions_total": ("counter", "Failed transactions in pgbench's per-transaction log (pgbench 15+ 'failed', 'serialization', 'deadlock')."),
    "pgbench_txlog_skipped_transactions_total": ("counter", "Skipped transactions in pgbench's per-transaction log (-R with -L)."),
    "pgbench_txlog_unparsed_lines_total": ("counter", "Per-transaction log lines benchwatch could not parse (malformed, or --aggregate-interval lines)."),
    "pgbench_txlog_late_lines_total": ("counter", "Per-transaction log lines that arrived after their second was written, and were counted in the next second."),
}

SILENT_SOURCE_SECONDS = 5
"""A source whose newest second is more than this behind the newest second of
all sources stops holding back the watermark."""

_FILL_LIMIT = 300  # empty seconds written in one gap at most (a stall, or a clock jump)
_TABLE_US = 1 << 18  # latencies under 262 ms find their bucket in a table (2 MiB, shared)
_PIECE = 64 << 10  # bytes parsed at once: the tokens of a piece stay in the CPU caches

_FAILURE_WORDS = (b"failed", b"serialization", b"deadlock", b"other")
_SKIPPED = b"skipped"
_WORDS = _FAILURE_WORDS + (_SKIPPED,)  # skipped last
_WORD_LETTERS = bytes(sorted(set(b"".join(_WORDS))))
_DIGITS_SP_NL = b"0123456789 \n"
_EPOCH_LEN = 10  # Unix seconds have 10 digits from 2001 to 2286


class _Second:
    """One second of transaction time, not written yet: transactions per
    bucket index, latency sum (microseconds), failed and skipped."""

    __slots__ = ("buckets", "failed", "skipped", "sum_us")

    def __init__(self) -> None:
        self.buckets: Counter[int] = Counter()
        self.sum_us = 0
        self.failed = 0
        self.skipped = 0


_tables: dict[tuple[int, ...], list[int]] = {}


def _bucket_table(bounds_us: list[int]) -> list[int]:
    """Bucket index of every latency under _TABLE_US microseconds (shared per ladder)."""
    key = tuple(bounds_us)
    table = _tables.get(key)
    if table is None:
        table = []
        lo = 0
        for i, le in enumerate(bounds_us + [_TABLE_US - 1]):
            hi = min(le, _TABLE_US - 1) + 1  # le is inclusive
            if hi > lo:
                table += [i] * (hi - lo)
                lo = hi
        table = _tables[key] = table[:_TABLE_US]
    return table


class TxlogAggregator:
    """Per-second latency histograms from the per-transaction logs of one run.

    Feed each log file's new complete lines with :meth:`feed` (``source`` names
    the file); call :meth:`samples` to get the samples of the seconds that are
    complete in every source, and ``samples(final=True)`` once pgbench exited.

    Counters kept for the caller: :attr:`lines` (lines fed),
    :attr:`unparsed_lines`, :attr:`failed`, :attr:`skipped`,
    :attr:`late_lines`, :attr:`aggregate_lines`, and :attr:`slow_lines` (lines
    parsed one by one because their chunk failed a fast-path check).
    """

    def __init__(self, run_id: str, buckets: Iterable[float] = DEFAULT_BUCKETS):
        bounds = sorted({float(b) for b in buckets if b != float("inf")})
        if not bounds or bounds[0] <= 0:
            raise ValueError("buckets must be positive upper bounds in seconds")
        self._bounds_us = [round(b * 1e6) for b in bounds]
        if len(set(self._bounds_us)) != len(self._bounds_us):
            raise ValueError("bucket bounds must differ by at least one microsecond")
        self.run_id = run_id
        nb = self._nb = len(self._bounds_us) + 1  # + the +Inf bucket
        self._FAILED, self._SKIPPED = nb, nb + 1
        self._nslots = nb + 2

        # Run series carry the tool that made them (the latency log is pgbench's).
        base = sample("x", {"run_id": run_id, "tool": "pgbench"}, 0, 0).labels
        self._labels = base
        self._bucket_labels = [
            tuple(sorted(base + (("le", floatToGoString(us / 1e6)),))) for us in self._bounds_us
        ] + [tuple(sorted(base + (("le", "+Inf"),)))]

        self.lines = 0
        self.unparsed_lines = 0
        self.failed = 0
        self.skipped = 0
        self.late_lines = 0
        self.aggregate_lines = 0
        self.slow_lines = 0

        self._pending: dict[int, _Second] = {}
        self._newest: dict[str, int] = {}  # source -> newest second seen in it
        self._expected: set[str] = set()
        self._first: int | None = None  # first second seen in any source
        self._emitted: int | None = None  # last second written
        self._dirty = False  # unparsed_lines changed since the last write

        # Written seconds, per slot: the buckets (+Inf last, not cumulative),
        # then failed and skipped transactions.
        self._totals = [0] * self._nslots
        self._sum_us = 0
        self._table = _bucket_table(self._bounds_us)

    # ------------------------------------------------------------------ input

    def expect(self, source: str) -> None:
        """Declare a log file that exists but has not flushed anything yet.

        Until its first line arrives it holds back the watermark as a source
        silent since the first second seen, i.e. for at most
        ``SILENT_SOURCE_SECONDS`` of the other sources' time.
        """
        if source not in self._newest:
            self._expected.add(source)

    def feed(self, source: str, data: bytes) -> None:
        """Add a chunk of complete, newline-terminated lines from log ``source``.

        A missing final newline is tolerated (the rest is taken as a line).
        Malformed lines are counted in :attr:`unparsed_lines`, never raised.
        """
        if not data:
            return
        if data[-1] != 10:
            data += b"\n"
        self._expected.discard(source)
        size = len(data)
        start = 0
        while start < size:
            end = data.rfind(b"\n", start, start + _PIECE) + 1 if size - start > _PIECE else size
            if end <= start:  # a line longer than a piece
                end = data.index(b"\n", start) + 1
            piece = data[start:end] if start or end < size else data
            if not self._fast(source, piece):
                self._slow(source, piece)
            start = end

    def _fast(self, source: str, data: bytes) -> bool:
        """Whole-piece parse; False (nothing done) if any check fails."""
        n = data.count(b"\n")
        k = data.count(b" ", 0, data.index(b"\n")) + 1  # fields in the first line
        if not 6 <= k <= 8:
            return False
        rest = data.translate(None, _DIGITS_SP_NL)
        if rest and rest.translate(None, _WORD_LETTERS):
            return False  # only digits, and letters of failed/skipped/...
        stride = k + 1
        toks = data.replace(b"\n", b" \n ").split(b" ")
        # Every newline is a token; all n of them at every stride-th place
        # means every line has exactly k fields.
        if len(toks) != n * stride + 1 or toks[k::stride].count(b"\n") != n:
            return False
        ep = toks[4::stride]
        groups = []
        i = 0
        while i < n:
            key = ep[i]
            if len(key) != _EPOCH_LEN or not key.isdigit():
                return False
            if ep[-1] == key:
                j = n
                same = ep.count(key) if i == 0 else ep[i:].count(key)
            else:
                j = bisect_right(ep, key, i)  # a file is in time order
                same = ep[i:j].count(key)
            if same != j - i:
                return False  # not in order after all
            groups.append((int(key), i, j))
            i = j
        cols = [toks[2 + i * stride : 2 + j * stride : stride] for _, i, j in groups]
        words = None
        if rest:
            # Letters must all belong to whole failed/skipped/... latency fields.
            words = [[col.count(w) for w in _WORDS] for col in cols]
            if sum(c * len(w) for per in words for c, w in zip(per, _WORDS)) != len(rest):
                return False
        for g, (sec, i, j) in enumerate(groups):
            col = cols[g]
            try:
                lat = list(map(int, col))  # fields are digits only here: int() is exact
            except ValueError:  # failed/skipped words, or empty fields (double spaces)
                lat = list(map(int, filter(bytes.isdigit, col)))
                bad = len(col) - len(lat)
                if words:
                    per = words[g]
                    skipped = per[-1]
                    failed = sum(per) - skipped
                    bad -= failed + skipped
                else:
                    failed = skipped = 0
                if bad:
                    self.unparsed_lines += bad
                    self._dirty = True
            else:
                failed = skipped = 0
            self._saw(source, sec)
            s = self._second(self._target(sec, j - i))
            self._count(s, lat)
            if failed or skipped:
                s.failed += failed
                s.skipped += skipped
                self.failed += failed
                self.skipped += skipped
        self.lines += n
        return True

    def _slow(self, source: str, data: bytes) -> None:
        """Line-by-line parse, for chunks with malformed or unusual lines."""
        lines = data.split(b"\n")
        lines.pop()  # after the final newline
        self.lines += len(lines)
        self.slow_lines += len(lines)
        by_second: dict[int, list[bytes]] = {}
        for line in lines:
            f = line.split(b" ")
            nf = len(f)
            ep = f[4] if nf >= 6 else b""
            if (
                nf <= 8
                and len(ep) == _EPOCH_LEN
                and len(f[0]) < _EPOCH_LEN
                and ep.isdigit()
                and f[0].isdigit()
                and f[1].isdigit()
                and f[3].isdigit()
                and all(x.isdigit() for x in f[5:])
            ):
                tok = f[2]
                if not tok.isdigit() and tok != _SKIPPED and tok not in _FAILURE_WORDS:
                    self.unparsed_lines += 1
                    self._dirty = True
                    continue
                sec = int(ep)
                toks = by_second.get(sec)
                if toks is None:
                    toks = by_second[sec] = []
                toks.append(tok)
            elif nf >= 6 and len(f[0]) == _EPOCH_LEN and all(x.isdigit() for x in f):
                # --aggregate-interval: interval_start num_transactions sum sum2 min max ...
                self.aggregate_lines += 1
                self.unparsed_lines += 1
                self._dirty = True
                sec = int(f[0])
                by_second.setdefault(sec, [])
            else:
                self.unparsed_lines += 1
                self._dirty = True
        for sec, toks in by_second.items():
            self._saw(source, sec)
            s = self._second(self._target(sec, len(toks)))
            lat = [int(t) for t in toks if t.isdigit()]
            self._count(s, lat)
            skipped = toks.count(_SKIPPED)
            failed = len(toks) - len(lat) - skipped
            s.failed += failed
            s.skipped += skipped
            self.failed += failed
            self.skipped += skipped

    def _saw(self, source: str, sec: int) -> None:
        if self._newest.get(source, -1) < sec:
            self._newest[source] = sec
        if self._first is None or sec < self._first:
            self._first = sec

    def _target(self, sec: int, nlines: int) -> int:
        """The second lines of ``sec`` go to: the next unwritten one if ``sec`` was written."""
        emitted = self._emitted
        if emitted is not None and sec <= emitted:
            self.late_lines += nlines
            return emitted + 1
        return sec

    def _count(self, s: _Second, lat: list[int]) -> None:
        """Add latencies (microseconds) to second ``s``."""
        if not lat:
            return
        s.sum_us += sum(lat)
        table = self._table
        try:
            idx = list(map(table.__getitem__, lat))
        except IndexError:  # a transaction over 262 ms in this piece: bisect for those
            bounds = self._bounds_us
            idx = [table[us] if us < _TABLE_US else bisect_left(bounds, us) for us in lat]
        s.buckets.update(idx)

    def _second(self, sec: int) -> _Second:
        s = self._pending.get(sec)
        if s is None:
            s = self._pending[sec] = _Second()
        return s

    # ----------------------------------------------------------------- output

    def watermark(self) -> int | None:
        """The newest second complete in every source that is not silent."""
        first = self._first  # set together with the first entry of _newest
        if not self._newest or first is None:
            return None
        newest = list(self._newest.values())
        if self._expected:
            # Not flushed yet: silent since the first second seen.
            newest += [first] * len(self._expected)
        hi = max(newest)
        return min(v for v in newest if hi - v <= SILENT_SOURCE_SECONDS) - 1

    def samples(self, final: bool = False) -> list[Sample]:
        """Samples of the seconds complete in every source (all of them if ``final``).

        Call it after feeding every source's new lines (once per poll): the
        watermark compares the sources' newest seconds, so a source not read
        yet while another is far ahead looks silent.

        Each second is written once, at the end of the second, with the
        cumulative values so far; empty seconds between written ones are
        written too (up to 300 in a row), so ``rate`` sees zero, not a gap.
        The first write adds zeros at the start of the first second.
        """
        pending = self._pending
        if final:
            upto = max(pending) if pending else None
            if upto is None and self._dirty and self._emitted is not None:
                upto = self._emitted + 1  # carry the last unparsed lines
        else:
            upto = self.watermark()
        if upto is None:
            return []
        out: list[Sample] = []
        emitted = self._emitted
        if emitted is None:
            if not pending:
                return []
            start = min(pending)
            if start > upto:
                return []
            out += self._snapshot(start * 1000)
            emitted = start - 1
        if upto <= emitted:
            return out
        due = sorted(k for k in pending if k <= upto)
        sec = emitted
        for d in due + [upto + 1]:
            # Empty seconds before the next one with data (or up to ``upto``).
            for e in range(sec + 1, min(d - 1, sec + _FILL_LIMIT) + 1):
                out += self._snapshot((e + 1) * 1000)
            if d > upto:
                break
            self._absorb(pending.pop(d))
            out += self._snapshot((d + 1) * 1000)
            sec = d
        self._emitted = upto
        self._dirty = False
        return out

    def _absorb(self, s: _Second) -> None:
        """Add one second to the written totals."""
        totals = self._totals
        totals[self._FAILED] += s.failed
        totals[self._SKIPPED] += s.skipped
        self._sum_us += s.sum_us
        for i, c in s.buckets.items():
            totals[i] += c

    def _snapshot(self, ts: int) -> list[Sample]:
        labels = self._labels
        totals = self._totals
        out = [
            Sample("benchmark_latency_seconds_bucket", lab, float(v), ts)
            for lab, v in zip(self._bucket_labels, accumulate(totals[: self._nb]))
        ]
        count = out[-1].value  # the +Inf bucket
        out.append(Sample("benchmark_latency_seconds_sum", labels, self._sum_us / 1e6, ts))
        out.append(Sample("benchmark_latency_seconds_count", labels, count, ts))
        out.append(Sample("pgbench_txlog_failed_transactions_total", labels, float(totals[self._FAILED]), ts))
        out.append(Sample("pgbench_txlog_skipped_transactions_total", labels, float(totals[self._SKIPPED]), ts))
        out.append(Sample("pgbench_txlog_unparsed_lines_total", labels, float(self.unparsed_lines), ts))
        out.append(Sample("pgbench_txlog_late_lines_total", labels, float(self.late_lines), ts))
        return out
