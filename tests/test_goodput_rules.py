"""The goodput ledger's recording rules (infra/specs/goodput_rules.py), run by Prometheus' own promtool over
a synthetic week (tests/goodput_week.py), against figures counted by hand from the week's events.

The rules run every 5 minutes, so each state is seen at the minutes that are multiples of 5 and counts 5
node-minutes a node there; the ledger at minute 10080 sums the whole hours 1 to 168 (minutes 1-10080)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from infra.specs import dashboards, goodput_rules
from tests import goodput_week, promtool

JOB = '{namespace="research",workload="nxd-llama"}'
END = f"{goodput_week.WEEK}m"


def sample(expr: str, value: float, labels: str | None = None, at: str = END) -> dict:
    """``expr`` at ``at`` is ``value`` to 6 decimals (promtool 2.42 compares floats exactly, and a sum of
    hours differs from its closed form in the last bit): both sides as integers of millionths."""
    name, _, matchers = expr.partition("{")
    shown = labels if labels is not None else JOB
    if matchers and labels is None:
        shown = "{" + matchers[:-1] + "," + JOB[1:]
    return {
        "expr": f"round(({expr}) * 1e6)",
        "eval_time": at,
        "exp_samples": [{"labels": shown, "value": round(value * 1e6)}],
    }


def fleet(expr: str, value: float, at: str = END) -> dict:
    _, _, matchers = expr.partition("{")
    return sample(expr, value, "{" + matchers if matchers else "{}", at)


# The job's nodes, per node, at 5-minute evaluations from 20 (bound) to 8995 (it ends at 9000): 1,796
# evaluations, 8,980 minutes. Starting: 20-35 (4) and 3035-3040 (2) = 30 min. Checkpointing: 148 saves of
# 5 minutes (100 + 60k for k = 0..148 but 3040, inside the outage), each seen once = 740 min. Hung: no
# step since 2999, more than 300 s at 3005-3030 (6) = 30 min. Redoing: 3045-3060 (4) = 20 min.
# Productive: 8980 - 30 - 740 - 30 - 20 = 8,160 min. Two nodes, in hours:
PAID = 2 * 8980 / 60  # 299.3333
PRODUCTIVE = 2 * 8160 / 60  # 272.0
# New steps: 10 a minute in every minute with a step line that is not a redo: [40, 9000) is 8,960 minutes,
# less 45 without a step (3000-3044), 740 saving and 17 redoing = 8,158 minutes, 81,580 steps.
STEPS = 81580
USD = PAID * 21.50  # trn1.32xlarge on demand in us-east-1 (infra/facts/instances.py): 6,435.67
TOKENS = STEPS * 1024 * 4096

WEEK_LEDGER = [
    sample("job:paid_node_hours:sum7d", PAID),
    sample("job:productive_node_hours:sum7d", PRODUCTIVE),
    sample('job:goodput_lost_node_hours:sum7d{cause="starting"}', 1.0),
    sample('job:goodput_lost_node_hours:sum7d{cause="checkpointing"}', 2 * 740 / 60),
    sample('job:goodput_lost_node_hours:sum7d{cause="hung"}', 1.0),
    sample('job:goodput_lost_node_hours:sum7d{cause="redoing"}', 2 * 20 / 60),
    sample("job:goodput:ratio7d", 8160 / 8980),  # 0.908686
    sample("job:goodput:ratio", 8160 / 8980),  # the week's, under the name without its window
    sample("job:paid_usd:sum7d", USD),
    sample("job:steps_trained:sum7d", STEPS),
    sample("job:tokens_trained:sum7d", TOKENS),
    sample("job:cost_per_1k_steps_usd:ratio7d", USD / STEPS * 1000),  # $78.89
    sample("job:cost_per_token_usd:ratio7d", USD / TOKENS),  # $1.88e-8
    # The fleet: n1 and n2 all week (2 x 10,080 min), n3 120 min, n4 60 min = 20,340 min = 339 h.
    fleet("fleet:paid_node_hours:sum7d", 339.0),
    # Burn-in: n1 and n2 at 5 and 10, n3 at 5000 and 5005: 6 x 5 = 30 min.
    fleet('fleet:goodput_lost_node_hours:sum7d{cause="burn_in"}', 0.5),
    # Pending: both nodes at 15, while the pods wait unscheduled: 10 min.
    fleet('fleet:goodput_lost_node_hours:sum7d{cause="pending"}', 10 / 60),
    fleet('fleet:goodput_lost_node_hours:sum7d{cause="capacity_block_idle"}', 1.0),
    # Idle: n1 and n2 from 9000 to 10080 (217 evaluations each) and n3 from 5010 to 5115 (22): 2,280 min.
    fleet('fleet:goodput_lost_node_hours:sum7d{cause="idle"}', 38.0),
    fleet("fleet:goodput:ratio7d", 2 * 8160 / 20340),  # 0.802360
]
# The last day (whole hours 145-168, minutes 8641-10080): the job at 8645-8995 (71 evaluations, 355 min a
# node), 6 saves of 5 minutes (8680 ... 8980); then n1 and n2 idle 1,085 min each.
DAY_LEDGER = [
    sample("job:paid_node_hours:sum1d", 2 * 355 / 60),
    sample("job:goodput:ratio1d", 325 / 355),
    fleet('fleet:goodput_lost_node_hours:sum1d{cause="idle"}', 2 * 1085 / 60),
]
# While it runs, the states are there minute by minute (at 3010 the job is hung, at 3040 restarting).
MOMENTS = [
    sample("job:goodput_nodes:hung", 2, at="3010m"),
    sample("job:goodput_nodes:starting", 2, at="3040m"),
    sample("job:goodput_nodes:checkpointing", 2, at="160m"),
    sample("job:goodput_nodes:productive", 2, at="165m"),
    sample('node:trainium_hourly_usd:price{node="n1"}', 21.5, '{node="n1"}', at="165m"),
]


@pytest.fixture(scope="module")
def rule_dir(tmp_path_factory) -> Path:
    directory = tmp_path_factory.mktemp("goodput-rules")
    (directory / "goodput.yml").write_text(goodput_rules.rule_file("us-east-1"))
    return directory


def test_the_rule_file_is_valid(rule_dir):
    result = promtool.run("check", "rules", rule_dir / "goodput.yml")
    assert result.returncode == 0, result.stdout + result.stderr


def test_rule_names_say_goodput_and_each_is_recorded_once():
    rules = [r for g in goodput_rules.rule_groups("us-east-1")["groups"] for r in g["rules"] if "record" in r]
    records = [(r["record"], tuple(sorted(r.get("labels", {}).items()))) for r in rules]
    assert {"job:goodput:ratio", "job:goodput:ratio7d", "job:paid_node_hours:sum7d", "fleet:goodput:ratio7d"} <= {
        r for r, _ in records
    }
    assert len(records) == len(set(records))
    # A region the price table lacks prices no node: the cost rules then have nothing, never $0.
    assert "* 0 + " not in goodput_rules.price_expression("ap-south-2")


def alert(name: str, at: str, *firing: dict[str, str], value: str = "") -> dict:
    """``name`` at ``at`` fires once per label set in ``firing`` (none: it does not fire), with its own
    labels and its annotations expanded as Prometheus expands them."""
    rule = next(r for r in goodput_rules.alert_rules() if r["alert"] == name)

    def expanded(labels: dict[str, str]) -> dict[str, str]:
        text = rule["annotations"]["summary"].replace("{{ $value }}", value)
        for key, label in labels.items():
            text = text.replace(f"{{{{ $labels.{key} }}}}", label)
        return {**rule["annotations"], "summary": text}

    return {
        "eval_time": at,
        "alertname": name,
        "exp_alerts": [
            {"exp_labels": {**rule["labels"], **labels}, "exp_annotations": expanded(labels)} for labels in firing
        ],
    }


JOB_LABELS = {"namespace": "research", "workload": "nxd-llama"}
# In the week: hung at the evaluations 3005-3030, so past its 5 minutes at 3010; one restart (at 3035) of a
# budget of 2 leaves one; n3 idle from 5010 (firing from 5040), n1 and n2 from 9000 (from 9030).
WEEK_ALERTS = [
    alert("TrainingHung", "3000m"),
    alert("TrainingHung", "3015m", JOB_LABELS),
    alert("TrainingHung", "3040m"),
    alert("TrainingRestartBudgetNearlySpent", "3030m"),
    alert("TrainingRestartBudgetNearlySpent", "3040m", JOB_LABELS, value="1"),
    alert("TrainingRestartBudgetNearlySpent", "9100m"),  # the job is over
    alert("TrainiumNodeIdle", "5035m"),
    alert("TrainiumNodeIdle", "5050m", {"node": "n3"}),
    alert("TrainiumNodeIdle", "9060m", {"node": "n1"}, {"node": "n2"}),
    alert("EfaTrafficAbsent", "5050m"),  # the week's nodes export no EFA counters: nothing to judge
    alert("CheckpointOverdue", "5050m"),
]


def three_hours() -> list[dict[str, str]]:
    """Two nodes stepping in one job for three hours: 10 steps a minute, a checkpoint at step 600 (minute 60)
    and none after; n1 sends 1 GB a minute over EFA throughout, n2 nothing from minute 60."""
    job = 'namespace="research",run="run-1",workload="nxd-llama"'
    series = {
        f"training_attempt_start_timestamp_seconds{{{job}}}": "30x180",
        f"training_heartbeat_timestamp_seconds{{{job}}}": "60+60x180",
        f"training_checkpoint_saving{{{job}}}": "0x180",
        f"training_redoing{{{job}}}": "0x180",
        f"training_step{{{job}}}": "0+10x180",
        f"training_checkpoint_step{{{job}}}": "0x59 600x120",
        f"training_checkpoint_interval_steps{{{job}}}": "300x180",
        f"training_restart_budget{{{job}}}": "3x180",
        'node_amazonefa_tx_bytes{node="n1",device="rdmap16s27",port="1"}': "0+1e9x180",
        'node_amazonefa_tx_bytes{node="n2",device="rdmap16s27",port="1"}': "0+1e9x59 6e10x120",
    }
    for i, node in enumerate(("n1", "n2")):
        pod = f'namespace="research",pod="worker-{i}"'
        series |= {
            f'kube_node_status_capacity{{node="{node}",resource="aws_amazon_com_neuron",unit="integer"}}': "16x180",
            f'kube_pod_labels{{{pod},label_app_kubernetes_io_part_of="nxd-llama"}}': "1x180",
            f'kube_pod_status_phase{{{pod},phase="Running"}}': "1x180",
            f"kube_pod_start_time{{{pod}}}": "0x180",
            f'kube_pod_info{{{pod},node="{node}"}}': "1x180",
        }
    return [{"series": name, "values": values} for name, values in series.items()]


def test_efa_silence_and_an_overdue_checkpoint(rule_dir):
    # n2's counter stops at 59: its 10-minute rate is 0 from 70, past the alert's 10 minutes at 80. The step
    # passes 600 + 2 x 300 after minute 120: at the evaluation of 125.
    tests = {
        "rule_files": ["goodput.yml"],
        "evaluation_interval": f"{goodput_rules.EVALUATION_INTERVAL_SECONDS}s",
        "tests": [
            {
                "interval": "1m",
                "input_series": three_hours(),
                "alert_rule_test": [
                    alert("EfaTrafficAbsent", "75m"),
                    alert("EfaTrafficAbsent", "90m", {"node": "n2"}),
                    alert("CheckpointOverdue", "120m"),
                    alert("CheckpointOverdue", "125m", JOB_LABELS),
                ],
            }
        ],
    }
    (rule_dir / "three-hours.yml").write_text(yaml.safe_dump(tests, sort_keys=False, width=1_000_000))
    result = promtool.run("test", "rules", rule_dir / "three-hours.yml")
    assert result.returncode == 0, result.stdout + result.stderr


def test_an_asynchronous_run_is_overdue_past_three_intervals(rule_dir):
    # The same three hours with asynchronous saves, whose newest save is complete only once the next begins:
    # the lag may reach two intervals before each save, so the alert waits for 600 + 3 x 300 = 1,500, which
    # the step passes after minute 150: at the evaluation of 155. A run served as synchronous keeps two.
    job = 'namespace="research",run="run-1",workload="nxd-llama"'
    for flag, quiet, firing in (("1", "150m", "155m"), ("0", "120m", "125m")):
        series = [*three_hours(), {"series": f"training_checkpoint_asynchronous{{{job}}}", "values": f"{flag}x180"}]
        tests = {
            "rule_files": ["goodput.yml"],
            "evaluation_interval": f"{goodput_rules.EVALUATION_INTERVAL_SECONDS}s",
            "tests": [
                {
                    "interval": "1m",
                    "input_series": series,
                    "alert_rule_test": [
                        alert("CheckpointOverdue", quiet),
                        alert("CheckpointOverdue", firing, JOB_LABELS),
                    ],
                }
            ],
        }
        (rule_dir / f"asynchronous-{flag}.yml").write_text(yaml.safe_dump(tests, sort_keys=False, width=1_000_000))
        result = promtool.run("test", "rules", rule_dir / f"asynchronous-{flag}.yml")
        assert result.returncode == 0, result.stdout + result.stderr


def test_a_week_with_a_hang_a_restart_and_idle_nodes(rule_dir):
    # The ledger's figures and the alerts, in one run of promtool over the week (about 10 s).
    tests = {
        "rule_files": ["goodput.yml"],
        "evaluation_interval": f"{goodput_rules.EVALUATION_INTERVAL_SECONDS}s",
        "tests": [
            {
                "interval": "1m",
                "input_series": goodput_week.input_series(),
                "promql_expr_test": [*WEEK_LEDGER, *DAY_LEDGER, *MOMENTS],
                "alert_rule_test": WEEK_ALERTS,
            }
        ],
    }
    (rule_dir / "week.yml").write_text(yaml.safe_dump(tests, sort_keys=False, width=1_000_000))
    result = promtool.run("test", "rules", rule_dir / "week.yml")
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_alert_has_its_runbook_section():
    from tests.fixture_project import REPO_ROOT

    headings = [
        line[4:] for line in (REPO_ROOT / "docs" / "operations.md").read_text().splitlines() if line[:4] == "### "
    ]
    anchors = {h.lower().replace(" ", "-") for h in headings}
    for rule in goodput_rules.alert_rules():
        page, _, anchor = rule["annotations"]["runbook"].partition("#")
        assert page == "docs/operations.md" and anchor in anchors, rule["alert"]


# The series the rules read, by exporter, as their sources at these versions define them:
# kube-state-metrics v2.20.0 internal/store/node.go, pod.go and cronjob.go (the family names), the EFA node exporter's
# amazonefa collector (aws-samples/awsome-distributed-training 054d5d4
# 4.validation_and_observability/3.efa-node-exporter/amazon_efa_linux.go: "tx_bytes" under subsystem
# "amazonefa", namespace "node"), and the progress exporter's own HELP table.
KUBE_STATE_METRICS = {
    "kube_node_info",
    "kube_node_status_capacity",
    "kube_node_spec_taint",
    "kube_node_labels",
    "kube_pod_labels",
    "kube_pod_status_phase",
    "kube_pod_start_time",
    "kube_pod_info",
    "kube_pod_nodeselectors",
    "kube_cronjob_created",
    "kube_cronjob_status_last_successful_time",
}
EFA_NODE_EXPORTER = {"node_amazonefa_tx_bytes"}


def test_every_series_a_rule_reads_is_one_its_exporter_emits():
    import re

    from tests.fixture_project import REPO_ROOT

    exporter = (REPO_ROOT / "workloads" / "progress_exporter.py").read_text()
    served = set(re.findall(r'^    "(training_\w+)": \("(?:gauge|counter)"', exporter, re.MULTILINE))
    rules = [r for g in goodput_rules.rule_groups("us-east-1")["groups"] for r in g["rules"]]
    read = {m for r in rules for m in re.findall(r"\b((?:kube|training|node)_[a-z_]+)\b", r["expr"])}
    assert read - {"node_job"} <= KUBE_STATE_METRICS | EFA_NODE_EXPORTER | served, read - served
    assert {"training_step", "training_restart_budget", "training_checkpoint_interval_steps"} <= served


def test_node_agent_down_reads_each_agents_own_series_under_its_scrape_job():
    from infra.specs import monitoring
    from tests.test_dashboards import NEURON_MONITOR, NODE_EXPORTER
    from tests.test_efa_exporter import SERVED as EFA_EXPORTER

    emitted = {
        goodput_rules.NEURON_MONITOR_JOB: NEURON_MONITOR,
        goodput_rules.EFA_EXPORTER_JOB: EFA_EXPORTER,
        goodput_rules.NODE_EXPORTER_JOB: NODE_EXPORTER,
    }
    assert all(series in emitted[job] for job, series in goodput_rules.NODE_AGENT_SERIES.items())
    jobs = {j["job_name"] for j in yaml.safe_load(monitoring.scrape_configuration())["scrape_configs"]}
    assert set(goodput_rules.NODE_AGENT_SERIES) <= jobs


# Short scenarios, minute by minute, each on the shapes its exporter emits (as tests/goodput_week.py).
def over(minutes: int, alive: range, value: float | Callable[[int], float]) -> goodput_week.Values:
    return [(value(t) if callable(value) else value) if t in alive else None for t in range(minutes + 1)]


def trainium_node(minutes: int, node: str, instance_type: str = "trn1.32xlarge", dra: bool = False, **extra: str):
    """A Trainium node all along; a DRA group's carries no aws.amazon.com/neuron capacity."""
    labels = "".join(f',{k}="{v}"' for k, v in extra.items())
    alive = range(minutes + 1)
    out = {
        f'kube_node_labels{{node="{node}",label_node_kubernetes_io_instance_type="{instance_type}",'
        f'label_eks_amazonaws_com_capacity_type="ON_DEMAND"{labels}}}': over(minutes, alive, 1)
    }
    if not dra:
        out[f'kube_node_status_capacity{{node="{node}",resource="aws_amazon_com_neuron",unit="integer"{labels}}}'] = (
            over(minutes, alive, 16)
        )
    return out


def workload_pod(
    minutes: int,
    pod: str,
    node: str,
    alive: range,
    workload: str = "nxd-llama",
    namespace: str = "research",
    bound: int | None = None,
    selects: str = "trn1.32xlarge",
    **extra: str,
):
    """A pod of ``workload``, Pending and unbound until ``bound`` (its start), then Running on ``node``."""
    start = alive.start if bound is None else bound
    key = f'namespace="{namespace}",pod="{pod}"' + "".join(f',{k}="{v}"' for k, v in extra.items())
    return {
        f'kube_pod_labels{{{key},label_app_kubernetes_io_part_of="{workload}"}}': over(minutes, alive, 1),
        f'kube_pod_status_phase{{{key},phase="Pending"}}': over(minutes, alive, lambda t: float(t < start)),
        f'kube_pod_status_phase{{{key},phase="Running"}}': over(minutes, alive, lambda t: float(t >= start)),
        f"kube_pod_start_time{{{key}}}": over(minutes, range(start, alive.stop), 60.0 * start),
        f'kube_pod_info{{{key},node=""}}': over(minutes, range(alive.start, start), 1),
        f'kube_pod_info{{{key},node="{node}"}}': over(minutes, range(start, alive.stop), 1),
        f'kube_pod_nodeselectors{{{key},nodeselector_node_kubernetes_io_instance_type="{selects}"}}': over(
            minutes, alive, 1
        ),
    }


def run_series(
    minutes: int, run: str, served: range, workload: str = "nxd-llama", namespace: str = "research", **values
):
    """The progress exporter's series of one run while it is served: each keyword a series' name after
    ``training_``, its value a number or a function of the minute."""
    key = f'namespace="{namespace}",run="{run}",workload="{workload}"'
    return {f"training_{name}{{{key}}}": over(minutes, served, value) for name, value in values.items()}


def run_scenario(rule_dir: Path, name: str, series: dict, exprs: list[dict] = (), alerts: list[dict] = ()) -> str:
    tests = {
        "rule_files": ["goodput.yml"],
        "evaluation_interval": f"{goodput_rules.EVALUATION_INTERVAL_SECONDS}s",
        "tests": [
            {
                "interval": "1m",
                "input_series": [{"series": k, "values": goodput_week.promtool_values(v)} for k, v in series.items()],
                "promql_expr_test": list(exprs),
                "alert_rule_test": list(alerts),
            }
        ],
    }
    (rule_dir / f"{name}.yml").write_text(yaml.safe_dump(tests, sort_keys=False, width=1_000_000))
    result = promtool.run("test", "rules", rule_dir / f"{name}.yml")
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


RAY_LABELS = {"namespace": "ray", "workload": "ray-llama2"}


def test_restarts_are_new_attempts_of_the_current_runs_training_step(rule_dir):
    # NxD Training (budget 3: alerts at 2 restarts): compile pods from 10 and, on nodes that joined later, 17, then
    # the train step's launcher and workers at 40, whose rank 0 takes the lock at 42: no restart. An earlier run
    # still served (r0, three attempts by minute 5) is not the current run. Ray (budget 2: alerts at 1): the
    # precompile step's pods 1-30, the train step's from 35 (lock at 36), one restart taking the lock at 80.
    m = 120
    series = {}
    for node in ("n1", "n2", "n3", "n4"):
        series |= trainium_node(m, node)
    series |= workload_pod(m, "compile-launcher", "c1", range(10, 35))
    for i, (node, start) in enumerate((("n1", 10), ("n2", 10), ("n3", 17), ("n4", 17))):
        series |= workload_pod(m, f"compile-w{i}", node, range(start, 35))
        series |= workload_pod(m, f"train-w{i}", node, range(40, m + 1))
    series |= workload_pod(m, "train-launcher", "c1", range(40, m + 1))
    earlier = {"attempt_start_timestamp_seconds": lambda t: 60.0 * (1 if t < 3 else 3 if t < 5 else 5)}
    series |= run_series(m, "r0", range(1, 50), restart_budget=3, **earlier)
    series |= run_series(m, "r1", range(42, m + 1), restart_budget=3, attempt_start_timestamp_seconds=42 * 60.0)
    ray = {"workload": "ray-llama2", "namespace": "ray"}
    series |= trainium_node(m, "n5")
    series |= workload_pod(m, "precompile-w", "n5", range(1, 30), **ray)
    series |= workload_pod(m, "train-w", "n5", range(35, m + 1), **ray)
    restart = {"attempt_start_timestamp_seconds": lambda t: 60.0 * (36 if t < 80 else 80)}
    series |= run_series(m, "r1", range(36, m + 1), restart_budget=2, **ray, **restart)
    run_scenario(
        rule_dir,
        "restarts",
        series,
        exprs=[
            sample('job:restarts:count7d{namespace="research"}', 0, labels=JOB, at="60m"),
            sample(
                'job:restarts:count7d{namespace="ray"}', 1, labels='{namespace="ray",workload="ray-llama2"}', at="85m"
            ),
        ],
        alerts=[
            alert("TrainingRestartBudgetNearlySpent", "45m"),
            alert("TrainingRestartBudgetNearlySpent", "60m"),
            alert("TrainingRestartBudgetNearlySpent", "85m", RAY_LABELS, value="1"),
            alert("TrainingRestartBudgetNearlySpent", "115m", RAY_LABELS, value="1"),
        ],
    )


def test_only_the_current_run_feeds_the_ledger_and_the_alerts(rule_dir):
    # The three hours' job (run-1, its rank 0 took the lock at minute 0), stepping until 150, then silent. An
    # earlier run of the workload is still served: it finished at step 5000 and ended in a save that never
    # completed (saving 1). Its step must not hide run-1's overdue checkpoint (from 125), its save must not make
    # run-1's steps "checkpointing" nor hide run-1's hang (no step since 150: hung at 160, firing at 165).
    series = {s["series"]: s["values"] for s in three_hours()}
    job = 'namespace="research",run="run-1",workload="nxd-llama"'
    series[f"training_heartbeat_timestamp_seconds{{{job}}}"] = "60+60x149 9000x30"
    series[f"training_step{{{job}}}"] = "0+10x149 1500x30"
    earlier = 'namespace="research",run="run-0",workload="nxd-llama"'
    series |= {
        f"training_attempt_start_timestamp_seconds{{{earlier}}}": "-7200x180",
        f"training_heartbeat_timestamp_seconds{{{earlier}}}": "-3600x180",
        f"training_checkpoint_saving{{{earlier}}}": "1x180",
        f"training_step{{{earlier}}}": "5000x180",
        f"training_checkpoint_step{{{earlier}}}": "4900x180",
        f"training_checkpoint_interval_steps{{{earlier}}}": "100x180",
        f"training_redoing{{{earlier}}}": "0x180",
        f"training_restart_budget{{{earlier}}}": "3x180",
    }
    tests = {
        "rule_files": ["goodput.yml"],
        "evaluation_interval": f"{goodput_rules.EVALUATION_INTERVAL_SECONDS}s",
        "tests": [
            {
                "interval": "1m",
                "input_series": [{"series": k, "values": v} for k, v in series.items()],
                "promql_expr_test": [
                    sample("job:goodput_nodes:productive", 2, at="65m"),
                    sample("job:checkpoint_saving:max", 0, at="65m"),
                ],
                "alert_rule_test": [
                    alert("CheckpointOverdue", "120m"),
                    alert("CheckpointOverdue", "125m", JOB_LABELS),
                    alert("TrainingHung", "155m"),
                    alert("TrainingHung", "165m", JOB_LABELS),
                ],
            }
        ],
    }
    (rule_dir / "two-runs.yml").write_text(yaml.safe_dump(tests, sort_keys=False, width=1_000_000))
    result = promtool.run("test", "rules", rule_dir / "two-runs.yml")
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_node_is_pending_only_for_a_gang_that_selects_its_instance_type(rule_dir):
    # n1 (trn1.32xlarge) runs nothing all along. 0-59 a gang's pod waits for trn2.48xlarge nodes: n1 is idle,
    # and TrainiumNodeIdle fires once it has been for 30 minutes; 60-120 a pod selecting trn1.32xlarge waits:
    # n1 is pending, and the alert is over.
    m = 120
    series = trainium_node(m, "n1")
    series |= workload_pod(m, "waits-for-trn2", "n9", range(0, 60), bound=m + 1, selects="trn2.48xlarge")
    series |= workload_pod(m, "waits-for-trn1", "n1", range(60, m + 1), bound=m + 1)
    n1 = '{node="n1"}'
    run_scenario(
        rule_dir,
        "pending",
        series,
        exprs=[
            sample("node:trainium_idle:present", 1, n1, at="30m"),
            sample("node:trainium_pending:present", 1, n1, at="90m"),
            {"expr": "node:trainium_pending:present", "eval_time": "30m", "exp_samples": []},
            {"expr": "node:trainium_idle:present", "eval_time": "90m", "exp_samples": []},
        ],
        alerts=[alert("TrainiumNodeIdle", "55m", {"node": "n1"}), alert("TrainiumNodeIdle", "90m")],
    )


def test_duplicate_kube_state_metrics_series_and_dra_nodes(rule_dir):
    # kube-state-metrics rolling: every object's series twice (instance a and b), and the exporter's too. n1
    # and n2 hold the job's pods; d1, of a DRA group (no aws.amazon.com/neuron capacity), a pod of another
    # workload that claims its devices.
    m = 30
    series = {}
    for instance in ("a", "b"):
        for i, node in enumerate(("n1", "n2")):
            series |= trainium_node(m, node, instance=instance)
            series |= workload_pod(m, f"worker-{i}", node, range(0, m + 1), instance=instance)
        series |= trainium_node(m, "d1", "trn2.48xlarge", dra=True, instance=instance)
        series |= workload_pod(m, "claims-d1", "d1", range(0, m + 1), workload="bert-pretraining", instance=instance)
        run = run_series(
            m,
            "run-1",
            range(0, m + 1),
            attempt_start_timestamp_seconds=60.0,
            heartbeat_timestamp_seconds=lambda t: 60.0 * t,
            checkpoint_saving=0,
            redoing=0,
        )
        series |= {k.replace('run="run-1"', f'instance="{instance}",run="run-1"'): v for k, v in run.items()}
    run_scenario(
        rule_dir,
        "duplicates",
        series,
        exprs=[
            sample('job:trainium_nodes:count{workload="nxd-llama"}', 2, JOB, at="20m"),
            sample("job:goodput_nodes:productive", 2, at="20m"),
            fleet("fleet:trainium_nodes:count", 3, at="20m"),
            sample(
                'node_job:trainium:allocated{node="d1"}',
                1,
                '{namespace="research",node="d1",workload="bert-pretraining"}',
                at="20m",
            ),
        ],
    )


def test_a_missing_node_agent_pages_after_its_time_unless_the_node_comes_or_goes(rule_dir):
    # Trainium nodes with Neuron and EFA devices: n1's agents all serve; n2's EFA exporter stops at minute 30 (its pod
    # gone or crash-looping); n5's keeps answering from 30 but with no counter (a failed read of the device's
    # statistics). n3 is in its burn-in with no agent yet, n4 marked for removal with its node-exporter gone from 30,
    # d1 a DRA node (neither device plugin: only node-exporter is expected). A series that ends gets a staleness
    # marker at 30, as Prometheus writes one for a target gone or a series no longer served: the agents are missing
    # from the evaluation at 30, firing 15 minutes later.
    m = 60
    up, until_30 = range(m + 1), range(0, 30)
    series = {}
    for node in ("n1", "n2", "n3", "n4", "n5"):
        series |= trainium_node(m, node)
        series[f'kube_node_status_capacity{{node="{node}",resource="vpc_amazonaws_com_efa",unit="integer"}}'] = over(
            m, up, 8
        )
    series |= trainium_node(m, "d1", "trn2.48xlarge", dra=True)
    for node in ("n1", "n2", "n3", "n4", "n5", "d1"):
        series[f'kube_node_info{{node="{node}"}}'] = over(m, up, 1)
    taints = {"n3": goodput_rules.BURN_IN_TAINT.key, "n4": "ToBeDeletedByClusterAutoscaler"}
    for node, key in taints.items():
        series[f'kube_node_spec_taint{{node="{node}",key="{key}",effect="NoSchedule"}}'] = over(m, up, 1)
    serving = {
        "n1": {"neuron-monitor": up, "efa-exporter": up, "node-exporter": up},
        "n2": {"neuron-monitor": up, "efa-exporter": until_30, "node-exporter": up},
        "n4": {"neuron-monitor": up, "efa-exporter": up, "node-exporter": until_30},
        "n5": {"neuron-monitor": up, "efa-exporter": until_30, "node-exporter": up},
        "d1": {"node-exporter": up},
    }
    for node, jobs in serving.items():
        for job, alive in jobs.items():
            name = goodput_rules.NODE_AGENT_SERIES[job]
            extra = ',device="rdmap16s27",port="1"' if job == "efa-exporter" else ""
            series[f'{name}{{job="{job}",node="{node}"{extra}}}'] = over(m, alive, 1)
    series['node_amazonefa_info{job="efa-exporter",node="n5",device="rdmap16s27"}'] = over(m, up, 1)
    run_scenario(
        rule_dir,
        "node-agents",
        series,
        alerts=[
            alert("NodeAgentDown", "25m"),
            alert("NodeAgentDown", "40m"),
            alert(
                "NodeAgentDown",
                "45m",
                {"job": "efa-exporter", "node": "n2"},
                {"job": "efa-exporter", "node": "n5"},
            ),
        ],
    )


def test_a_node_that_failed_its_burn_in_is_burn_in_loss_not_idle(rule_dir):
    # n1 burns in for 20 minutes, fails (the sweeper swaps the startup taint for the failed one, whose value is
    # the reason) and stays (a group at minSize) until minute 90: BurnInFailedNodeKept pages 30 minutes after its
    # failure; n3 fails too but is removed 12 minutes later, within its scale-down time: no page. n2 passes at
    # 20 and runs nothing: idle, paged 30 minutes later. A duplicate kube-state-metrics replica serves n1's
    # failed taint twice from 40.
    m = 90
    series = trainium_node(m, "n1") | trainium_node(m, "n2")
    startup, failed = goodput_rules.BURN_IN_TAINT.key, goodput_rules.BURN_IN_FAILED_TAINT_KEY
    for node in ("n1", "n2"):
        series[f'kube_node_spec_taint{{node="{node}",key="{startup}",value="pending",effect="NoSchedule"}}'] = over(
            m, range(0, 20), 1
        )
    for instance, alive in (("a", range(20, m)), ("b", range(40, m))):
        series[
            f'kube_node_spec_taint{{instance="{instance}",node="n1",key="{failed}",value="neuron-health-check",'
            f'effect="NoSchedule"}}'
        ] = over(m, alive, 1)
    series[f'kube_node_spec_taint{{instance="a",node="n3",key="{failed}",value="efa",effect="NoSchedule"}}'] = over(
        m, range(20, 32), 1
    )
    failures = next(
        s.expr for s in dashboards.DASHBOARDS["trainium-fleet"][1] if s.title == "Burn-in failures by reason"
    )
    run_scenario(
        rule_dir,
        "failed-burn-in",
        series,
        exprs=[
            {
                "expr": "node:trainium_burn_in:present",
                "eval_time": "60m",
                "exp_samples": [{"labels": 'node:trainium_burn_in:present{node="n1"}', "value": 1}],
            },
            {
                "expr": "node:trainium_idle:present",
                "eval_time": "60m",
                "exp_samples": [{"labels": 'node:trainium_idle:present{node="n2"}', "value": 1}],
            },
            fleet("fleet:goodput_nodes:burn_in", 1, at="60m"),
            # The fleet view's panel: one node failed, counted once, by its reason.
            {
                "expr": failures,
                "eval_time": "60m",
                "exp_samples": [{"labels": '{value="neuron-health-check"}', "value": 1}],
            },
        ],
        alerts=[
            alert("TrainiumNodeIdle", "80m", {"node": "n2"}),
            alert("BurnInFailedNodeKept", "45m"),
            alert("BurnInFailedNodeKept", "60m", {"node": "n1", "value": "neuron-health-check"}),
        ],
    )


def test_the_metrics_feed_stopping_pages_though_every_other_alert_goes_quiet(rule_dir):
    # kube-state-metrics serves two nodes until minute 20, then nothing (its pod gone, or the scrape stopped): every
    # series of it goes stale at 20, and with them everything the other alerts judge.
    m = 60
    series = trainium_node(m, "n1") | trainium_node(m, "n2")
    for node in ("n1", "n2"):
        series[f'kube_node_info{{node="{node}"}}'] = over(m, range(0, 20), 1)
    series = {k: (v[:20] + [None] * (m + 1 - 20)) for k, v in series.items()}
    run_scenario(
        rule_dir,
        "metrics-feed",
        series,
        alerts=[
            alert("MetricsFeedDown", "15m"),
            alert("MetricsFeedDown", "30m"),  # missing since 20: pending, not yet 15 minutes
            alert("MetricsFeedDown", "40m", {}),
            alert("TrainiumNodeIdle", "40m"),
            alert("NodeAgentDown", "40m"),
        ],
    )


def test_node_housekeeping_stopping_pages_for_each_cronjob_that_has_not_succeeded_for_ten_minutes(rule_dir):
    # Both CronJobs created at 0. The gang hold succeeds every minute until minute 10, then no more; the sweeper
    # never succeeds (kube-state-metrics serves no last-success series for it); a CronJob elsewhere is not ours.
    m = 30
    ns = goodput_rules.NODE_HOUSEKEEPING_NAMESPACE
    series = {
        f'kube_cronjob_status_last_successful_time{{namespace="{ns}",cronjob="gang-hold"}}': [
            min(t, 10) * 60 for t in range(m + 1)
        ],
        f'kube_cronjob_created{{namespace="{ns}",cronjob="gang-hold"}}': over(m, range(m + 1), 0),
        f'kube_cronjob_created{{namespace="{ns}",cronjob="neuron-burn-in-sweeper"}}': over(m, range(m + 1), 0),
        'kube_cronjob_created{namespace="team-a",cronjob="nightly"}': over(m, range(m + 1), 0),
    }
    sweeper = {"namespace": ns, "cronjob": "neuron-burn-in-sweeper"}
    hold = {"namespace": ns, "cronjob": "gang-hold"}
    run_scenario(
        rule_dir,
        "node-housekeeping",
        series,
        alerts=[
            # 600 s after creation, not more: nothing yet.
            alert("NodeHousekeepingStopped", "10m"),
            # The sweeper 900 s without a success; the gang hold's last success 300 s old.
            alert("NodeHousekeepingStopped", "15m", sweeper),
            # The gang hold's last success (600 s) is 900 s old.
            alert("NodeHousekeepingStopped", "25m", hold, sweeper),
        ],
    )
