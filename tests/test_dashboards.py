"""The fleet, job and cost dashboards (infra/specs/dashboards.py): every panel's query parsed by promtool (each
as a recording rule of a generated rule file), every series it reads one the goodput rules record or an
exporter emits, and the dashboards as the prod plan declares them."""

from __future__ import annotations

import json
import re

import pytest
import yaml

from infra.specs import dashboards, goodput_rules, monitoring
from tests import promtool
from tests.test_efa_exporter import SERVED as EFA_EXPORTER
from tests.test_goodput_rules import EFA_NODE_EXPORTER, KUBE_STATE_METRICS
from tests.test_progress_exporter import REPO

# neuron-monitor's exporter: the series aws-neuron/aws-neuron-sdk 81ce03a
# src/examples/neuron-monitor/neuron-monitor-grafana.json reads (with the labels neuroncore, instance_id,
# memory_location, usage_type, percentile, status_type it groups and filters by).
NEURON_MONITOR = {
    "instance_info",
    "system_vcpu_count",
    "system_vcpu_usage_ratio",
    "system_memory_used_bytes",
    "system_memory_total_bytes",
    "neuroncore_utilization_ratio",
    "execution_status_total",
    "execution_latency_seconds",
    "neuron_runtime_vcpu_usage_ratio",
    "neuron_runtime_memory_used_bytes",
}
# node-exporter v1.12.1's cpu and meminfo collectors (prometheus/node_exporter collector/cpu_common.go
# "seconds_total" under subsystem "cpu", labels cpu and mode; collector/meminfo_linux.go "MemTotal_bytes",
# "MemAvailable_bytes" under subsystem "memory").
NODE_EXPORTER = {"node_cpu_seconds_total", "node_memory_MemTotal_bytes", "node_memory_MemAvailable_bytes"}


def test_every_panel_query_parses(tmp_path):
    rules = [
        {"record": f"dashboard:query_{i}:check", "expr": expr} for i, (_, expr) in enumerate(dashboards.panel_queries())
    ]
    (tmp_path / "queries.yml").write_text(yaml.safe_dump({"groups": [{"name": "dashboards", "rules": rules}]}))
    result = promtool.run("check", "rules", tmp_path / "queries.yml")
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(rules)} rules found" in result.stdout


def test_every_series_a_panel_reads_exists():
    recorded = {
        r["record"] for g in goodput_rules.rule_groups("us-east-1")["groups"] for r in g["rules"] if "record" in r
    }
    exporter = (REPO / "workloads" / "progress_exporter.py").read_text()
    served = set(re.findall(r'^    "(training_\w+)": \("(?:gauge|counter)"', exporter, re.MULTILINE))
    known = recorded | served | KUBE_STATE_METRICS | EFA_NODE_EXPORTER | EFA_EXPORTER | NEURON_MONITOR | NODE_EXPORTER
    for uid, expr in dashboards.panel_queries():
        names = set(re.findall(r"\b((?:job|fleet|node|node_job):[a-z_0-9]+:[a-z_0-9]+)\b", expr))
        # Every other name a query reads: an identifier followed by a selector, a range or a closing parenthesis,
        # less PromQL's own words and the labels the query names.
        words = set(re.findall(r"(?<![\w:\"])([a-zA-Z_][a-zA-Z0-9_]*)\s*(?=[{\[)]|$)", expr))
        names |= words - {"node", "namespace", "workload", "run", "value", "by", "on", "time"}
        assert names and names <= known, (uid, names - known)
    # The node agents' series the fleet view reads, each from its own exporter.
    fleet = " ".join(expr for uid, expr in dashboards.panel_queries() if uid == "trainium-fleet")
    for series in ("neuroncore_utilization_ratio", "neuron_runtime_memory_used_bytes", "node_amazonefa_rx_drops"):
        assert series in fleet


@pytest.mark.parametrize("datasource_type", ["prometheus", "grafana-amazonprometheus-datasource"])
def test_each_dashboard_picks_its_prometheus_and_says_what_it_shows(datasource_type):
    for uid in dashboards.DASHBOARDS:
        board = json.loads(dashboards.dashboard_json(uid, datasource_type))
        assert board["uid"] == uid and board["title"] == dashboards.DASHBOARDS[uid][0]
        (variable,) = board["templating"]["list"]
        assert variable == {**variable, "name": "datasource", "type": "datasource", "query": datasource_type}
        titles = [p["title"] for p in board["panels"]]
        assert len(titles) == len(set(titles)) == len(dashboards.DASHBOARDS[uid][1])
        # Panels name the variable, with the variable's type: Grafana resolves a ``$``-uid through the variable and
        # reads a reference's type only for the default data source (grafana/grafana public/app/features/plugins/
        # datasource_srv.ts getInstanceSettings, the search index's stored copy), so the type keeps the JSON true.
        for panel in board["panels"]:
            assert panel["datasource"] == {"type": datasource_type, "uid": "${datasource}"}
            (target,) = panel["targets"]
            assert target["expr"] and target["refId"] == "A"
    # The views the issue asks for: goodput and losses per job, idle nodes, cost per step and per token.
    exprs = {expr for _, expr in dashboards.panel_queries()}
    assert {"job:goodput:ratio1d", "node:trainium_idle:present", "job:cost_per_token_usd:ratio7d"} <= exprs


def test_prod_declares_them_for_grafanas_sidecar(prod):
    maps = {
        r.inputs["metadata"]["name"]: r.inputs
        for r in prod.registrations
        if r.type == "kubernetes:core/v1:ConfigMap" and r.inputs["metadata"]["name"].endswith("-dashboard")
    }
    assert set(maps) == {f"{uid}-dashboard" for uid in dashboards.DASHBOARDS}
    # prod's Grafana reads the managed workspace: each dashboard lists data sources of the type it provisions.
    grafana = prod.named(monitoring.GRAFANA, "kubernetes:helm.sh/v3:Release").inputs["values"]
    (source,) = grafana["datasources"]["datasources.yaml"]["datasources"]
    for uid in dashboards.DASHBOARDS:
        found = maps[f"{uid}-dashboard"]
        assert found["metadata"]["labels"] == dashboards.SIDECAR_LABEL
        assert found["data"] == {f"{uid}.json": dashboards.dashboard_json(uid, source["type"])}
        (variable,) = json.loads(found["data"][f"{uid}.json"])["templating"]["list"]
        assert variable["query"] == source["type"] == monitoring.AMAZON_PROMETHEUS_PLUGIN


def test_tokens_per_second_and_seconds_per_step_for_every_workload(tmp_path):
    # A run stepping every 10 s (NxD Training's, whose step line prints no throughput) with a second series of
    # the same run from a duplicate scrape, and a run that stopped: promtool evaluates the panels' own queries.
    queries = {spec.title: spec.expr for spec in dashboards.DASHBOARDS["trainium-jobs"][1]}
    (tmp_path / "empty.yml").write_text(yaml.safe_dump({"groups": []}))
    steady = {"namespace": "research", "workload": "nxd-llama", "run": "run-a"}
    stopped = {"namespace": "research", "workload": "bert-pretraining", "run": "run-b"}

    def series(name: str, labels: dict[str, str], values: str) -> dict[str, str]:
        body = ",".join(f'{k}="{v}"' for k, v in labels.items())
        return {"series": f"{name}{{{body}}}", "values": values}

    tests = {
        "rule_files": ["empty.yml"],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": [
                    series("training_step_high_water", steady, "0+6x30"),
                    series("training_step_high_water", {**steady, "instance": "b"}, "0+6x30"),
                    series("training_samples_per_step", steady, "1024x30"),
                    series("training_samples_per_step", {**steady, "instance": "b"}, "1024x30"),
                    series("training_tokens_per_sample", steady, "4096x30"),
                    series("training_tokens_per_sample", {**steady, "instance": "b"}, "4096x30"),
                    series("training_step_high_water", stopped, "500x30"),
                    series("training_samples_per_step", stopped, "32768x30"),
                    series("training_tokens_per_sample", stopped, "128x30"),
                ],
                "promql_expr_test": [
                    {
                        "expr": queries["Tokens per second"],
                        "eval_time": "20m",
                        "exp_samples": [
                            {"labels": "{namespace='research',workload='nxd-llama'}", "value": 0.1 * 1024 * 4096},
                            {"labels": "{namespace='research',workload='bert-pretraining'}", "value": 0},
                        ],
                    },
                    {
                        "expr": queries["Seconds per step"],
                        "eval_time": "20m",
                        "exp_samples": [{"labels": "{namespace='research',workload='nxd-llama'}", "value": 10}],
                    },
                ],
            }
        ],
    }
    (tmp_path / "jobs.yml").write_text(yaml.safe_dump(tests))
    result = promtool.run("test", "rules", tmp_path / "jobs.yml")
    assert result.returncode == 0, result.stdout + result.stderr
