"""Issue 20 on the real stack: real sysbench and pgbench outputs, some progress lines made bad the way the
fuzzer makes them (nan, inf, huge and negative numbers, truncated, joined, invalid UTF-8), fed line by line
at the tool's pace through ``benchwatch attach`` into the live exporter and Prometheus.

Every well-formed line around the bad ones is stored at its own time, the bad ones are counted, the
stall series and the PgbenchStalled alert stay quiet (three bad lines in a row leave four intervals
between good ones: without the bad lines as a sign of life it fires), and the exporter never sets the
run aside.

Issue 32: fuzzed outputs with extreme numbers (1e309, 999999999999999999999, nan, -0, times of the year
2286, beyond int64) piped whole through ``attach``: every number is bounded before it becomes a time, an
id or a count, Prometheus holds what the saved output replays to, and promtool accepts the exporter's
/metrics."""

from __future__ import annotations

import glob
import json
import os
import re
import subprocess
import threading
import time
from collections import Counter

import pytest

from benchwatch.loadgens.pgbench.output import PgbenchOutputParser
from benchwatch.loadgens.pgbench.output import Progress as PgbenchProgress
from benchwatch.loadgens.sysbench.output import Progress as SysbenchProgress
from benchwatch.loadgens.sysbench.output import SysbenchOutputParser
from benchwatch.record import replay
from benchwatch.util import bounds, net, processes
from tests.helpers import fuzz
from tests.helpers.prometheus import query
from tests.helpers.promtool import promtool_problems
from tests.helpers.throwaway import BENCHWATCH

pytestmark = pytest.mark.integration

RUN_ID = re.compile(rb"benchwatch: run (\S+):")
INTERVAL_S = 1.0


def fixture(name: str) -> list[bytes]:
    with open(os.path.join(fuzz.FIXTURES, name), "rb") as f:
        return f.read().split(b"\n")


def number_made(line: bytes, word_index: int, odd: bytes) -> bytes:
    """fuzz.mutate's choice 3 on purpose: the word_index-th word with a digit becomes one of fuzz.ODD_NUMBERS."""
    assert odd in fuzz.ODD_NUMBERS
    words = line.split(b" ")
    digits = [i for i, w in enumerate(words) if any(c in b"0123456789" for c in w)]
    words[digits[word_index]] = odd
    return b" ".join(words)


# Progress line number (1-based) -> how it is made bad. Three in a row leave four intervals between good
# lines: PgbenchStalled's three are passed unless the bad lines are a sign of life.
SYSBENCH_BAD = {
    2: lambda line, nxt: number_made(line, 3, b"99999999999999999999999"),          # qps absurd
    3: lambda line, nxt: re.sub(rb"tps: \S+ qps: \S+ \(r/w/o: \S+\) lat \(ms,95%\): \S+",
                                b"tps: nan qps: nan (r/w/o: nan/nan/nan) lat (ms,95%): -nan", line),  # the line
    5: lambda line, nxt: line[:len(line) // 2],                                    # truncated
    6: lambda line, nxt: number_made(line, 2, b"\xff\xfe"),                         # not UTF-8
    7: lambda line, nxt: line + b", " + nxt,                                        # two lines joined
    9: lambda line, nxt: number_made(line, 2, b"inf"),                              # tps: inf
}
PGBENCH_BAD = {
    2: lambda line, nxt: number_made(line, 1, b"\xff\xfe"),                         # not UTF-8
    3: lambda line, nxt: number_made(line, 1, b"NaN"),                              # NaN tps
    5: lambda line, nxt: line[:len(line) - 9],                                      # truncated
    6: lambda line, nxt: line + b", " + nxt,                                        # two lines joined
    7: lambda line, nxt: number_made(line, 1, b"1e309"),                            # inf, spelt as pgbench never does
}


def mutated(lines: list[bytes], is_progress, bad: dict) -> tuple[list[bytes], list[bytes]]:
    """The output with the chosen progress lines made bad, and its good progress lines."""
    progress = [i for i, line in enumerate(lines) if is_progress(line)]
    out = list(lines)
    for n, make in bad.items():
        i = progress[n - 1]
        nxt = lines[progress[n]] if n < len(progress) else lines[i]
        out[i] = make(lines[i], nxt)
        assert out[i] != lines[i]
    good = [lines[i] for k, i in enumerate(progress, 1) if k not in bad]
    return out, good


def attach(live, tool: str, lines: list[bytes], is_progress, result: dict) -> None:
    """benchwatch attach, fed as the tool prints: header at once, one progress line per interval, then the summary."""
    p = subprocess.Popen([BENCHWATCH, "attach", "--tool", tool, "--interval", "1", "--quiet"], env=live.env(),
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert p.stdin is not None
    for line in lines:
        p.stdin.write(line + b"\n")
        p.stdin.flush()
        if is_progress(line):
            time.sleep(INTERVAL_S)
    _out, err = p.communicate(timeout=60)
    result[tool] = (p.returncode, err)


def samples(live, metric: str, run_id: str) -> list[tuple[float, float]]:
    result = query(live.prometheus, f'{metric}{{run_id="{run_id}"}}[1h]')
    return [(float(t), float(v)) for t, v in result[0]["values"]] if result else []


def printed(lines: list[bytes], parser, kind) -> list[tuple[float, float]]:
    return [(e.time_s, e.tps) for line in lines for e in parser.feed(line) if isinstance(e, kind)]


def test_bad_lines_cost_only_themselves_live(live_stack):
    sysbench, sysbench_good = mutated(fixture("sysbench/lock.txt"), lambda l: re.match(rb"\[ *\d+s \] thds", l) is not None,
                                      SYSBENCH_BAD)
    pgbench, pgbench_good = mutated(fixture("pgbench/pg10_report_stall.stderr"), lambda l: l.startswith(b"progress: "),
                                    PGBENCH_BAD)
    result: dict = {}
    feeders = [threading.Thread(target=attach, args=(live_stack, "sysbench", sysbench, lambda l: l.startswith(b"["), result)),
               threading.Thread(target=attach, args=(live_stack, "pgbench", pgbench, lambda l: l.startswith(b"progress"), result))]
    for t in feeders:
        t.start()
    for t in feeders:
        t.join(timeout=90)
    for tool, parser, kind, good, bad in (
            ("sysbench", SysbenchOutputParser(), SysbenchProgress, sysbench_good, SYSBENCH_BAD),
            ("pgbench", PgbenchOutputParser(), PgbenchProgress, pgbench_good, PGBENCH_BAD)):
        code, err = result[tool]
        assert code == 0, err.decode(errors="replace")
        run_id = RUN_ID.search(err).group(1).decode()
        assert processes.wait_until(
            lambda: bool(query(live_stack.prometheus, f'benchmark_running{{run_id="{run_id}"}} == 0')), 30, 0.2), tool
        with open(os.path.join(live_stack.state_dir, "runs", run_id, "meta.json")) as f:
            start = json.load(f)["clock_start_epoch"]
        expected = printed(good, parser, kind)
        assert len(expected) == len(good), tool  # every good line is one a parser reads
        tps = samples(live_stack, "benchmark_progress_tps", run_id)
        # Every good line at its own time, with its value; nothing for the bad ones, no stall zero.
        assert [(round(t - start, 3), v) for t, v in tps] == [(round(e, 3), v) for e, v in expected], tool
        assert samples(live_stack, "benchmark_unparsed_lines_total", run_id)[-1][1] == len(bad), tool
        assert [v for _, v in samples(live_stack, "benchmark_progress_stalled", run_id) if v != 0] == [], tool
        alerts = query(live_stack.prometheus, f'ALERTS{{alertname=~"PgbenchStalled|PgbenchTPSDrop",run_id="{run_id}"}}[1h]')
        assert alerts == [], (tool, alerts)
        counted = query(live_stack.prometheus,
                        f'{{run_id="{run_id}",__name__=~"benchmark_(progress_tps|progress_qps|.*_total)"}}[1h]')
        nonfinite = [(r["metric"]["__name__"], v) for r in counted for _, v in r["values"]
                     if v.lower() in ("nan", "+inf", "-inf", "inf")]
        assert nonfinite == [], (tool, nonfinite)
    logs = [p for p in glob.glob(os.path.join(live_stack.state_dir, "logs", "*.log")) if "benchwatch_exporter" in p]
    assert logs
    for path in logs:
        with open(path, errors="replace") as f:
            text = f.read()
        assert "is not followed" not in text and "Traceback" not in text, text[-3000:]


FUZZ_LINES = 20_000  # bench/bench_fuzz.py takes a million through the same paths


@pytest.mark.parametrize("tool,pattern", [("pgbench", "pgbench/*"), ("sysbench", "sysbench/*.txt")])
def test_fuzzed_extremes_through_attach_live(live_stack, tool, pattern):
    data = fuzz.fuzzed_output(FUZZ_LINES, 11, pattern)
    assert b"999999999999999999999" in data and b"1e309" in data and b"9999999999.999" in data
    r = live_stack.benchwatch("attach", "--tool", tool, "--quiet", input=data, timeout=300)
    assert r.returncode == 0 and b"Traceback" not in r.stderr, r.stderr.decode(errors="replace")[-3000:]
    run_id = RUN_ID.search(r.stderr).group(1).decode()
    path = os.path.join(live_stack.state_dir, "runs", run_id)
    assert processes.wait_until(lambda: os.path.exists(os.path.join(path, ".ingested")), 240, 0.5), run_id
    with open(os.path.join(path, "meta.json")) as f:
        meta = json.load(f)
    # What the saved output replays to (a snapshot rebuild) is what Prometheus got live: every good line's
    # figure, each bad line counted; every timestamp one Prometheus and a run id can hold.
    model, expected = replay.replay_run_dir_model(path, meta)
    assert expected and all(bounds.ms_in_range(s.timestamp_ms) for s in expected)
    wanted = Counter(s.value for s in expected if s.name == "benchmark_progress_tps" and s.value != 0)
    assert sum(wanted.values()) > 50 and model.unparsed_lines > 1000
    first, last = min(s.timestamp_ms for s in expected), max(s.timestamp_ms for s in expected)
    at = last / 1000 + 1
    span = f"{int((last - first) / 1000) + 120}s"
    result = query(live_stack.prometheus, f'benchmark_progress_tps{{run_id="{run_id}"}}[{span}]', at)
    stored = Counter(float(v) for _, v in result[0]["values"] if float(v) != 0) if result else Counter()
    assert stored == wanted, (wanted - stored, stored - wanted)
    unparsed = query(live_stack.prometheus, f'max_over_time(benchmark_unparsed_lines_total{{run_id="{run_id}"}}[{span}])', at)
    assert float(unparsed[0]["value"][1]) == model.unparsed_lines
    status, body = net.http_get(live_stack.stack.cfg.url("benchwatch_exporter") + "/metrics")
    assert status == 200
    # promtool parses every line (exit 3 is lint only); the lints left are of names the metric contract
    # fixed (pgbench_summary_*, the latency quantile gauges, sysbench's histogram events), not of any number.
    problems = promtool_problems(body)
    assert not problems, problems
    for log in glob.glob(os.path.join(live_stack.state_dir, "logs", "*benchwatch_exporter*.log")):
        with open(log, errors="replace") as f:
            text = f.read()
        assert "Traceback" not in text and "is not followed" not in text, text[-3000:]
