"""The host collector: /proc read into node_exporter 1.5's series, checked against node_exporter's own reading of
the same files (tests/fixtures/proc/README.md)."""

from __future__ import annotations

import math
import os
import re
import shutil
import threading

from benchwatch.exporter import host, load_collectors
from benchwatch.model.samples import Sample

FIXTURE = os.path.join(os.path.dirname(__file__), "..", "fixtures", "proc")
LINE = re.compile(r'^(\w+)(?:\{(.*)\})? (\S+)$')
# node_disk_info's labels that node_exporter takes from udev's database, which the collector does not read.
UDEV_LABELS = ("model", "path", "revision", "serial", "wwn")


def node_exporter_series() -> dict[tuple[str, frozenset], float]:
    out = {}
    with open(os.path.join(FIXTURE, "node_exporter-1.5.prom"), encoding="utf-8") as f:
        for line in f:
            name, labels, value = LINE.match(line.strip()).groups()
            pairs = dict(re.findall(r'(\w+)="([^"]*)"', labels or ""))
            for udev in UDEV_LABELS if name == "node_disk_info" else ():
                pairs.pop(udev, None)
            out[(name, frozenset(pairs.items()))] = float(value)
    return out


def collector_series(samples: list[Sample]) -> dict[tuple[str, frozenset], float]:
    return {(s.name, frozenset((k, v) for k, v in s.labels if k not in ("job", "target", "host"))): s.value
            for s in samples}


def test_the_same_files_give_node_exporters_series_and_values():
    reader = host.HostReader(FIXTURE)
    try:
        got = collector_series(reader.samples({"job": "node", "target": "local", "host": "h"}, 1000))
    finally:
        reader.close()
    want = node_exporter_series()
    assert set(got) == set(want), (sorted(set(want) - set(got))[:5], sorted(set(got) - set(want))[:5])
    for key, value in want.items():
        assert math.isclose(got[key], value, rel_tol=1e-9), (key, got[key], value)


def test_labels_and_timestamps_are_the_collectors():
    reader = host.HostReader(FIXTURE)
    try:
        samples = reader.samples({"job": "node", "target": "db1", "host": "h"}, 1234)
    finally:
        reader.close()
    assert {s.timestamp_ms for s in samples} == {1234}
    assert all(dict(s.labels)["target"] == "db1" and dict(s.labels)["job"] == "node" for s in samples)


def test_partitions_ram_and_loop_devices_are_left_out_as_node_exporter_leaves_them_out():
    assert host.DEVICE_EXCLUDE.match("loop0") and host.DEVICE_EXCLUDE.match("sda1") and host.DEVICE_EXCLUDE.match("nvme0n1p2")
    assert not host.DEVICE_EXCLUDE.match("sda") and not host.DEVICE_EXCLUDE.match("nvme0n1") \
        and not host.DEVICE_EXCLUDE.match("zram0") and not host.DEVICE_EXCLUDE.match("dm-0")


def test_a_host_without_pressure_files_has_no_pressure_series(tmp_path):
    for name in ("stat", "diskstats"):
        shutil.copy(os.path.join(FIXTURE, name), tmp_path / name)
    reader = host.HostReader(str(tmp_path))
    try:
        names = {s.name for s in reader.samples({}, 1)}
    finally:
        reader.close()
    assert "node_cpu_seconds_total" in names and "node_disk_reads_completed_total" in names
    assert not any(n.startswith("node_pressure_") for n in names)


def test_older_kernels_shorter_diskstats_lines_give_the_fields_they_have():
    # Linux before 4.18: 11 fields after the name (no discards, no flushes).
    got = host.disk_samples("   8       0 sda 10 1 80 5 20 2 160 7 0 9 12\n", {}, 1)
    names = {s.name for s in got}
    assert "node_disk_io_time_weighted_seconds_total" in names and "node_disk_discards_completed_total" not in names
    assert {s.name: s.value for s in got}["node_disk_read_bytes_total"] == 80 * 512


def test_the_collector_reads_on_the_second_in_its_thread_and_hands_the_samples_to_the_poll():
    sent: list[list[Sample]] = []
    collector = host.HostCollector(sent.append, labels={"target": "local", "host": "h"}, root=FIXTURE)
    done = threading.Event()
    original = collector.read_once

    def read_once() -> int:
        n = original()
        done.set()
        return n

    collector.read_once = read_once  # type: ignore[method-assign]
    try:
        assert collector.poll() == 0  # starts the thread; nothing read yet
        assert done.wait(3.0)
        assert collector.poll() > 0 and sent and all(dict(s.labels)["job"] == "node" for s in sent[0])
    finally:
        collector.stop()
        collector.thread.join(3.0)
        collector.reader.close()
    assert not collector.thread.is_alive()


def test_it_is_off_by_default_and_has_its_flag():
    spec = load_collectors()["host"]
    assert spec.default is False


def test_a_wait_that_ends_early_never_gives_two_readings_in_one_second():
    collector = host.HostCollector(lambda samples: None, root=FIXTURE)
    try:
        assert collector.next_reading(100.2, None) == 101.0
        # The wait for 101.0 ended at 100.9999 (monotonic against wall clock): the next is 102, not 101 again.
        assert collector.next_reading(100.9999, 101.0) == 102.0
        assert collector.next_reading(101.0003, 101.0) == 102.0
        assert collector.next_reading(101.6, 101.0) == 102.0
        # A reading that took long, or a stopped process: the next whole second, one skipped at most.
        assert collector.next_reading(103.2, 102.0) == 104.0
    finally:
        collector.reader.close()


def test_a_file_longer_than_one_read_is_read_whole(monkeypatch):
    monkeypatch.setattr(host, "READ_CHUNK", 64)  # /proc/stat's interrupt line can pass 64 KiB on a big host
    reader = host.HostReader(FIXTURE)
    try:
        for name in ("stat", "diskstats"):
            with open(os.path.join(FIXTURE, name), encoding="ascii") as f:
                assert reader.text(name) == f.read()
    finally:
        reader.close()
