"""alertmanager/alertmanager.yml and the receiver examples of docs/alerting.md, checked by amtool."""

from __future__ import annotations

import json
import os
import re
import subprocess

from tests.helpers.tools import require_tool

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CONFIG = os.path.join(ROOT, "alertmanager", "alertmanager.yml")
DOC = os.path.join(ROOT, "docs", "alerting.md")
# The URL the native stack replaces with its own exporter's (stack/native.py _start_alertmanager).
COMPOSE_WEBHOOK = "http://benchwatch:19188/alerts"



def check_config(path: str) -> subprocess.CompletedProcess:
    return subprocess.run([require_tool("amtool"), "check-config", path], capture_output=True, text=True, timeout=30)


def doc_examples() -> list[str]:
    with open(DOC, encoding="utf-8") as f:
        text = f.read()
    return [b for b in re.findall(r"```yaml\n(.*?)```", text, re.S) if "receivers:" in b]


def route_for(path: str, *labels: str) -> str:
    r = subprocess.run([require_tool("amtool"), "config", "routes", "test", f"--config.file={path}", *labels],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


def test_repository_config_is_valid():
    r = check_config(CONFIG)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "SUCCESS" in r.stdout


def test_timing_is_tuned_for_benchmark_runs():
    with open(CONFIG, encoding="utf-8") as f:
        text = f.read()
    settings = dict(re.findall(r"^  (group_wait|group_interval|repeat_interval|receiver): (\S+)$", text, re.M))
    assert settings == {"receiver": "benchwatch", "group_wait": "1s", "group_interval": "1s", "repeat_interval": "15m"}
    assert re.search(r"^  group_by: \[alertname, run_id\]$", text, re.M)
    assert re.search(r"- url: " + re.escape(COMPOSE_WEBHOOK) + r"\n\s+send_resolved: true\n", text)


def test_webhook_url_is_the_exporter_docker_compose_scrapes():
    with open(os.path.join(ROOT, "docker", "targets", "benchwatch.json"), encoding="utf-8") as f:
        target = json.load(f)[0]["targets"][0]
    assert COMPOSE_WEBHOOK == f"http://{target}/alerts"


def test_every_alert_reaches_the_webhook():
    for alertname in ("PgbenchTPSDrop", "PgbenchStalled", "PgbenchLatencyHigh", "PgbenchClientsAborted",
                      "PostgresCheckpointsTooFrequent", "DiskSaturated", "BenchwatchTargetDown"):
        assert route_for(CONFIG, f"alertname={alertname}", "run_id=r1", "severity=warning") == "benchwatch"


def test_doc_examples_are_valid_configs(tmp_path):
    examples = doc_examples()
    assert len(examples) == 2  # e-mail and Slack
    for i, text in enumerate(examples):
        path = tmp_path / f"example{i}.yml"
        path.write_text(text)
        r = check_config(str(path))
        assert r.returncode == 0, text + r.stdout + r.stderr
        assert COMPOSE_WEBHOOK in text  # the native stack rewrites it in these too
    email, slack = (tmp_path / "example0.yml", tmp_path / "example1.yml")
    assert route_for(str(email), "alertname=PgbenchStalled", "run_id=r1", "severity=critical") == "benchwatch,email"
    assert route_for(str(email), "alertname=PgbenchTPSDrop", "run_id=r1", "severity=warning") == "benchwatch"
    assert route_for(str(slack), "alertname=PgbenchTPSDrop", "run_id=r1", "severity=warning") == "benchwatch,slack"
