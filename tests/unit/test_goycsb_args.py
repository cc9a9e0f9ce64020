"""go-ycsb's argv as go-ycsb v1.0.3 reads it (cobra 1.0.0, pflag): command, database, property files, -p, flags."""

from __future__ import annotations

from benchwatch import loadgens
from benchwatch.loadgens.goycsb.args import ensure_interval, parse_goycsb_args, redact_argv

G = loadgens.by_name("goycsb")


def test_command_database_files_and_properties_in_any_order():
    a = parse_goycsb_args(["run", "postgresql", "-P", "workloads/workloada", "-p", "recordcount=1000", "--threads", "4",
                           "-Pmore,extra", "--prop=readproportion=0.9", "-p", "recordcount=2000"])
    assert a.runs and a.command == "run" and a.db == "postgresql" and a.engine == "postgresql"
    assert a.property_files == ("workloads/workloada", "more", "extra")  # -P is a StringSlice: comma-separated
    assert a.props == {"recordcount": "2000", "readproportion": "0.9"}  # the last -p of a name wins
    assert a.threads == 4 and a.interval_s == 10.0


def test_prefix_matching_and_the_mysql_family():
    assert parse_goycsb_args(["r", "mariadb"]).command == "run"
    assert parse_goycsb_args(["l", "tidb"]).engine == "mysql"
    assert parse_goycsb_args(["lo", "mysql"]).command == "load"


def test_what_go_ycsb_refuses_or_only_prints_help():
    assert parse_goycsb_args(["run"]).error == "requires at least 1 arg(s), only received 0"
    assert parse_goycsb_args(["run", "pg", "--output", "x"]).error == "unknown flag: --output"
    assert "invalid argument" in parse_goycsb_args(["run", "pg", "--threads", "four"]).error
    assert parse_goycsb_args(["run", "pg", "-p", "noequals"]).error.startswith("bad property")
    assert parse_goycsb_args(["frobnicate"]).error == 'unknown command "frobnicate" for "go-ycsb"'
    assert parse_goycsb_args(["run", "pg", "-h"]).help and not parse_goycsb_args(["run", "pg", "-h"]).runs
    assert parse_goycsb_args([]).help


def test_interval_flag_wins_over_the_property_and_threads_over_threadcount():
    a = parse_goycsb_args(["run", "pg", "-p", "measurement.interval=5", "-p", "threadcount=8"])
    assert a.interval_s == 5.0 and a.threads == 8
    b = parse_goycsb_args(["run", "pg", "-p", "measurement.interval=5", "--interval", "2", "-p", "threadcount=8",
                           "--threads", "3"])
    assert b.interval_s == 2.0 and b.threads == 3


def test_ensure_interval_adds_one_second_unless_asked_and_before_a_double_dash():
    assert ensure_interval(["run", "pg", "-P", "w"]) == (["run", "pg", "-P", "w", "--interval", "1"], ["--interval", "1"])
    assert ensure_interval(["run", "pg", "--", "x"])[0] == ["run", "pg", "--interval", "1", "--", "x"]
    assert ensure_interval(["run", "pg", "--interval", "3"])[1] == []
    assert ensure_interval(["run", "pg", "-p", "measurement.interval=3"])[1] == []
    assert ensure_interval(["run"])[1] == []  # go-ycsb will refuse it: left alone


def test_passwords_are_redacted_in_every_spelling():
    argv = ["run", "mysql", "-p", "mysql.password=s1", "-pmysql.password=s2", "--prop=pg.password=s3", "-p=pg.password=s4",
            "--prop", "x.passwd=s5", "-p", "recordcount=10"]
    out = redact_argv(argv)
    assert not any(s in " ".join(out) for s in ("s1", "s2", "s3", "s4", "s5"))
    assert out[-1] == "recordcount=10" and out[3] == "mysql.password=*****"
    assert "s1" not in repr(parse_goycsb_args(argv))


def test_run_info_labels_and_the_workload_key():
    from benchwatch.history import workload

    argv = ["run", "postgresql", "-P", "workloads/workloada", "-P", "/state/secrets/bw-goycsb-connection-local.properties",
            "-p", "operationcount=5000", "-p", "readproportion=0.95", "-p", "pg.host=127.0.0.1", "--threads", "4",
            "--interval", "1", "-p", "debug.pprof=127.0.0.1:0"]
    labels = G.read_argv(argv).info_labels
    assert labels["workload"] == "workloads/workloada"  # benchwatch's connection file is not the workload
    assert labels["properties"] == "readproportion=0.95" and labels["threads"] == "4"
    key = workload.key({"tool": "goycsb", "argv": ["go-ycsb", *argv], "engine": "postgresql"})
    assert "operationcount" not in key and "interval_seconds" not in key and "goycsb_version" not in key
    longer = workload.key({"tool": "goycsb", "argv": ["go-ycsb", *argv[:7], "operationcount=99", *argv[8:]],
                           "engine": "postgresql"})
    assert key == longer  # the run's length is not its work
    assert workload.key({"tool": "goycsb", "argv": ["go-ycsb", *argv, "--threads", "8"], "engine": "postgresql"}) != key


def test_sweep_sets_threads_properties_and_reloads_the_records():
    argv = ["run", "postgresql", "-P", "w"]
    assert G.clients_option(argv) is None and G.clients_option([*argv, "-p", "threadcount=2"]) == "-p threadcount"
    assert G.with_clients(argv, 8, 2)[-2:] == ["--threads", "8"]
    assert G.with_option(argv, "readproportion", "0.5")[-2:] == ["-p", "readproportion=0.5"]
    assert G.with_option(argv, "--target", "100")[-2:] == ["--target", "100"]
    assert G.init_argvs(argv, None) == [["load", "postgresql", "-P", "w", "-p", "dropdata=true"]]
    assert G.engine_of(["run", "mysql"]) == "mysql" and G.engine_of(argv) == "postgresql"
