"""The goodput ledger as Prometheus recording rules: of the Trainium node-hours the cluster pays for, which
trained and where the rest went, per job and for the fleet, and what 1,000 steps and a token cost. The
one source of the rule file; the cluster stack loads it into Amazon Managed Service for Prometheus or an
in-cluster Prometheus (infra/components/observability.py), and tests/test_goodput_rules.py runs it with
`promtool test rules` over a synthetic week. Pure: settings in, rule groups (dicts) and YAML out.

A Trainium node is one with Neuron devices in its capacity, or of a Trainium instance type (a
``deviceAllocation: dra`` group's nodes carry no ``aws.amazon.com/neuron``: their devices are claimed through DRA).
Every minute each Trainium node is in exactly one state, and a job's nodes in exactly one of its states:
- **burn-in**: the node still carries the burn-in's startup taint, or the taint of a failed burn-in until the
  provisioner removes it (infra/specs/node_template.py): paid for, and never available to a job;
- **a job's**, when a pod of a training workload (its ``app.kubernetes.io/part-of``) is bound to it, Pending
  or Running; then by the job's own progress, read from the job's current run only (the run whose newest
  attempt took the writer's lock last; the progress exporter, workloads/progress_exporter.py, serves live runs):
  - **starting**: no step since the newest of its pods started or since the current run's newest attempt
    took the lock (image pull, compile, rendezvous, checkpoint load, a precompile step, which writes no
    heartbeat);
  - **checkpointing**: a save newer than the newest complete checkpoint is being written;
  - **hung**: no step for HANG_SUSPECT_SECONDS while no save runs, until the liveness probe ends it;
  - **redoing**: stepping below the run's high-water mark after a restart;
  - **productive**: stepping past it;
- otherwise **pending** while a training pod that selects the node's instance type waits to be scheduled (a
  gang waiting for its other nodes),
  **capacity-block idle** on a Capacity Block node (the block's tail after the job stopped), and **idle**
  (the autoscaler's scale-down delay, a node nobody asked for).
Ledgers sum the node counts of every evaluation over a window, each EVALUATION_INTERVAL_SECONDS / 3600
node-hours a node.

Ranges stop a second short of their length ("[59m59s]", "[167h59m59s:1h]"): an engine that selects a range
closed at both ends (promtool 2.42's does: tests/test_goodput_rules.py) would count the sample on the
boundary of two hours in both, and a second short counts it once whether the start is open or closed.

Restarts are the changes of the current run's ``training_attempt_start_timestamp_seconds``: one per attempt of its
training step, which alone takes the run directory's lock (not a compile or precompile step, a launcher, a Ray
head or submitter, nor a gang's pods starting minutes apart: one of them takes it per attempt).

kube-state-metrics runs as a Deployment: while it rolls, two replicas export the same object's series (their
``instance`` differs), and so does the progress exporter's; every join takes ``max by`` of both sides first.

Inputs (tests/test_goodput_rules.py names each; docs/monitoring.md cites their exporters' sources):
kube-state-metrics' ``kube_node_status_capacity``, ``kube_node_spec_taint``, ``kube_node_labels``,
``kube_pod_labels``, ``kube_pod_status_phase``, ``kube_pod_start_time``, ``kube_pod_info`` and
``kube_pod_nodeselectors`` (opt-in: METRIC_OPT_IN); the progress exporter's ``training_*`` series.
"""

from __future__ import annotations

from typing import Any

import yaml

from infra.facts.instances import INSTANCE_TYPES, instance_hourly
from infra.specs import burn_in_objects
from infra.specs.node_template import BURN_IN_FAILED_TAINT_KEY, BURN_IN_TAINT, EFA_RESOURCE, NEURON_RESOURCES

# The ledger's rules run every 5 minutes: a week's ledger to 5 minutes is exact enough, and Amazon Managed
# Service for Prometheus bills rule evaluation by the samples each query processes (a fifth of them at a
# minute). Each evaluation's node counts stand for this many seconds.
EVALUATION_INTERVAL_SECONDS = 300
# A step line at least every few minutes is what every workload prints (a 7B step is under a minute on 4
# trn1 nodes); longer without one and without a save is a hang until the probe's hangTimeoutMinutes ends it.
HANG_SUSPECT_SECONDS = 300
# The workloads whose pods train (workloads/*.py WORKLOAD); the acceptance check holds nodes too.
TRAINING_WORKLOADS = ("bert-pretraining", "ray-llama2", "nxd-llama", "cluster-check")

# kube-state-metrics v2.20.0 (kubernetes/kube-state-metrics internal/store): a resource name becomes the
# ``resource`` label of kube_node_status_capacity through SanitizeLabelName, every character outside
# [a-zA-Z0-9_] as "_" (utils.go); a Kubernetes label becomes ``label_`` + that, in snake case
# (utils.go labelName, lintLabelName), on kube_pod_labels and kube_node_labels only for the labels its
# --metric-labels-allowlist names (METRIC_LABELS_ALLOWLIST). kube_node_spec_taint has key, value and effect
# (node.go); kube_pod_status_phase one series per phase, 1 for the pod's (pod.go); kube_pod_start_time is the
# pod's status.startTime (pod.go); kube_pod_info's ``node`` is its spec.nodeName, "" until it is bound (pod.go);
# kube_pod_nodeselectors (an opt-in family: NewOptInFamilyGenerator, served only when named in
# --metric-opt-in-list, pkg/optin) has a ``nodeselector_`` label per key of spec.nodeSelector, named as above
# (utils.go kubeMapToPrometheusLabels). Every training pod selects its group's instance type
# (infra/contract.py NodeGroup.node_selector).
NEURON_RESOURCE = NEURON_RESOURCES[0].replace(".", "_").replace("/", "_")
EFA_DEVICE_RESOURCE = EFA_RESOURCE.replace(".", "_").replace("/", "_")
PART_OF = "label_app_kubernetes_io_part_of"
INSTANCE_TYPE = "label_node_kubernetes_io_instance_type"
CAPACITY_TYPE = "label_eks_amazonaws_com_capacity_type"
SELECTED_INSTANCE_TYPE = "nodeselector_node_kubernetes_io_instance_type"
METRIC_OPT_IN = ("kube_pod_nodeselectors",)
TRAINIUM_INSTANCE_TYPES = tuple(sorted(name for name, t in INSTANCE_TYPES.items() if t.neuron is not None))
METRIC_LABELS_ALLOWLIST = (
    "pods=[app.kubernetes.io/part-of]",
    "nodes=[node.kubernetes.io/instance-type,eks.amazonaws.com/capacityType]",
)
CAPACITY_BLOCK = "CAPACITY_BLOCK"

JOB = "namespace, workload"
RUN = "namespace, workload, run"
LOSS_CAUSES = ("starting", "checkpointing", "hung", "redoing")
FLEET_CAUSES = ("burn_in", "pending", "capacity_block_idle", "idle")


def _just_short(hours: int) -> str:
    """A range of ``hours`` less one second (see the module's docstring)."""
    return f"{hours - 1}h59m59s" if hours > 1 else "59m59s"


WINDOW_HOURS = {"1d": 24, "7d": 168}
HEADLINE_WINDOW = "7d"


def _rule(record: str, expr: str, **labels: str) -> dict[str, Any]:
    return {"record": record, "expr": " ".join(expr.split()), **({"labels": labels} if labels else {})}


def _workload_pods(phase: str) -> str:
    """Pods of the training workloads in ``phase`` (1 each), labelled with their workload (namespace, pod,
    workload)."""
    workloads = "|".join(TRAINING_WORKLOADS)
    return (
        f'max by (namespace, pod, workload) (label_replace(kube_pod_labels{{{PART_OF}=~"{workloads}"}}, "workload", '
        f'"$1", "{PART_OF}", "(.+)")) '
        f'* on (namespace, pod) group_left () (max by (namespace, pod) (kube_pod_status_phase{{phase=~"{phase}"}}) == 1)'
    )


def _current(series: str) -> str:
    """``series`` of each job's current run only (the exporter's series, one per run)."""
    return f"({series} and on ({RUN}) job_run:current_attempt_start:seconds)"


def price_expression(region: str) -> str:
    """Each Trainium node's on-demand price per hour, from infra/facts/instances.py for ``region``; a node
    of a type the table does not price, or on a Capacity Block (paid up front), gets no price (never 0)."""
    parts = [
        f'(max by (node) (kube_node_labels{{{INSTANCE_TYPE}="{name}"}}) * 0 + {price.usd})'
        for name in sorted(INSTANCE_TYPES)
        if (price := instance_hourly(region, name)) is not None and INSTANCE_TYPES[name].neuron is not None
    ]
    return (
        f"(node:trainium:present * on (node) group_left () ({' or '.join(parts)})) "
        f'unless on (node) kube_node_labels{{{CAPACITY_TYPE}="{CAPACITY_BLOCK}"}}'
    )


# A node burning in, and one that failed its burn-in (the sweeper's taint, whose value is the reason, stays
# until the provisioner removes the empty node): both burn-in loss, neither idle. A regular expression in a
# PromQL string: each dot escaped, and the backslash escaped for the string.
BURN_IN_KEYS = f"{BURN_IN_TAINT.key}|{BURN_IN_FAILED_TAINT_KEY}".replace(".", r"\\.")


def node_rules(region: str) -> list[dict[str, Any]]:
    present = "node:trainium:present"
    return [
        _rule(
            present,
            f'clamp_max(count by (node) (kube_node_status_capacity{{resource="{NEURON_RESOURCE}"}} > 0 '
            f'or kube_node_labels{{{INSTANCE_TYPE}=~"{"|".join(TRAINIUM_INSTANCE_TYPES)}"}}), 1)',
        ),
        _rule("node:trainium_hourly_usd:price", price_expression(region)),
        _rule(
            "node:trainium_burn_in:present",
            f'{present} and on (node) kube_node_spec_taint{{key=~"{BURN_IN_KEYS}"}}',
        ),
        # A job's pods bound to a Trainium node (Pending while its image pulls, then Running) hold it, whether
        # they ask for its devices as extended resources or claim them through DRA; a launcher or a Ray head
        # is bound to a CPU node.
        _rule(
            "node_job:trainium:allocated",
            f"clamp_max(count by (node, {JOB}) ("
            f"{_workload_pods('Pending|Running')} "
            f"* on (namespace, pod) group_left (node) "
            f'max by (namespace, pod, node) (kube_pod_info{{node!=""}})'
            f"), 1) * on (node) group_left () {present}",
        ),
        _rule(
            "node:trainium_unallocated:present",
            f"{present} unless on (node) (node_job:trainium:allocated or node:trainium_burn_in:present)",
        ),
        # A gang waits for nodes of the instance type its pods select: only such nodes are pending for it; one
        # of another type that nobody asked for is idle.
        _rule(
            "node:trainium_pending:present",
            "node:trainium_unallocated:present and on (node) ("
            f'label_replace(max by (node, {INSTANCE_TYPE}) (kube_node_labels), "instance_type", "$1", "{INSTANCE_TYPE}", '
            '"(.+)") and on (instance_type) ('
            f'label_replace(max by (namespace, pod, {SELECTED_INSTANCE_TYPE}) (kube_pod_nodeselectors), "instance_type", '
            f'"$1", "{SELECTED_INSTANCE_TYPE}", "(.+)") '
            f"and on (namespace, pod) ({_workload_pods('Pending')}) "
            'and on (namespace, pod) kube_pod_info{node=""}))',
        ),
        _rule(
            "node:trainium_capacity_block_idle:present",
            "(node:trainium_unallocated:present unless on (node) node:trainium_pending:present) "
            f'and on (node) kube_node_labels{{{CAPACITY_TYPE}="{CAPACITY_BLOCK}"}}',
        ),
        _rule(
            "node:trainium_idle:present",
            "node:trainium_unallocated:present unless on (node) "
            "(node:trainium_pending:present or node:trainium_capacity_block_idle:present)",
        ),
    ]


def job_rules() -> list[dict[str, Any]]:
    nodes = "job:trainium_nodes:count"
    stepping = "job:trainium_nodes_stepping:count"
    saving = "(job:checkpoint_saving:max == 1)"
    return [
        _rule(nodes, f"sum by ({JOB}) (node_job:trainium:allocated)"),
        # The current run of each job: the one whose newest attempt took the writer's lock last (an earlier
        # run that ended mid-save, or finished at a higher step, is read no more).
        _rule("job_run:attempt_start:seconds", f"max by ({RUN}) (training_attempt_start_timestamp_seconds)"),
        _rule(
            "job_run:current_attempt_start:seconds",
            f"job_run:attempt_start:seconds == on ({JOB}) group_left () max by ({JOB}) (job_run:attempt_start:seconds)",
        ),
        _rule(
            "job:trainium_hourly_usd:sum",
            f"sum by ({JOB}) (node_job:trainium:allocated * on (node) group_left () node:trainium_hourly_usd:price)",
        ),
        _rule(
            "job:pod_start:seconds",
            f"max by ({JOB}) (max by (namespace, pod) (kube_pod_start_time) * on (namespace, pod) group_left (workload) "
            f"{_workload_pods('Pending|Running')})",
        ),
        _rule("job:attempt_start:seconds", f"max by ({JOB}) (job_run:current_attempt_start:seconds)"),
        *(
            _rule(
                f"job:restarts:count{window}",
                f"max by ({JOB}) (max by ({RUN}) (changes(training_attempt_start_timestamp_seconds"
                f"[{_just_short(WINDOW_HOURS[window])}])) and on ({RUN}) job_run:current_attempt_start:seconds)",
            )
            for window in WINDOW_HOURS
        ),
        _rule("job:heartbeat:timestamp", f"max by ({JOB}) {_current('training_heartbeat_timestamp_seconds')}"),
        _rule("job:checkpoint_saving:max", f"max by ({JOB}) {_current('training_checkpoint_saving')}"),
        _rule("job:redoing:max", f"max by ({JOB}) {_current('training_redoing')}"),
        _rule(
            stepping,
            f"{nodes} and on ({JOB}) (job:heartbeat:timestamp > on ({JOB}) job:pod_start:seconds) "
            f"and on ({JOB}) (job:heartbeat:timestamp > on ({JOB}) job:attempt_start:seconds)",
        ),
        _rule("job:goodput_nodes:starting", f"{nodes} unless on ({JOB}) {stepping}"),
        _rule("job:goodput_nodes:checkpointing", f"{stepping} and on ({JOB}) {saving}"),
        _rule(
            "job:goodput_nodes:hung",
            f"({stepping} unless on ({JOB}) {saving}) "
            f"and on ({JOB}) (time() - job:heartbeat:timestamp > {HANG_SUSPECT_SECONDS})",
        ),
        _rule(
            "job:goodput_nodes:redoing",
            f"({stepping} unless on ({JOB}) (job:goodput_nodes:checkpointing or job:goodput_nodes:hung)) "
            f"and on ({JOB}) (job:redoing:max == 1)",
        ),
        _rule(
            "job:goodput_nodes:productive",
            f"{stepping} unless on ({JOB}) "
            "(job:goodput_nodes:checkpointing or job:goodput_nodes:hung or job:goodput_nodes:redoing)",
        ),
    ]


def fleet_rules() -> list[dict[str, Any]]:
    """At each evaluation, the fleet's Trainium nodes and those in each state no job holds (0 when none)."""
    return [
        _rule("fleet:trainium_nodes:count", "sum(node:trainium:present) or vector(0)"),
        *(
            _rule(f"fleet:goodput_nodes:{cause}", f"sum(node:trainium_{cause}:present) or vector(0)")
            for cause in FLEET_CAUSES
        ),
    ]


def hourly_rules() -> list[dict[str, Any]]:
    """At each evaluation, the hour just past: node-hours by state, dollars, steps and tokens. Read at whole hours
    by the windows' subqueries they tile a window exactly, at 60 samples a read instead of a week's."""
    hours = f"{EVALUATION_INTERVAL_SECONDS} / 3600"

    def hour(series: str) -> str:
        return f"sum_over_time({series}[{_just_short(1)}]) * {hours}"

    # Steps past the high-water mark in the hour: its rise since an hour ago (since the run's first sample
    # in the hour for a new run); never negative (an exporter restart forgets the mark).
    high = f"max by ({RUN}) (training_step_high_water)"
    rise = (
        f"clamp_min(({high} - max by ({RUN}) (training_step_high_water offset 1h)) "
        f"or ({high} - max by ({RUN}) (min_over_time(training_step_high_water[59m59s]))), 0)"
    )
    return [
        _rule("job:paid_node_hours:sum1h", hour("job:trainium_nodes:count")),
        _rule("job:productive_node_hours:sum1h", hour("job:goodput_nodes:productive")),
        *(
            _rule("job:goodput_lost_node_hours:sum1h", hour(f"job:goodput_nodes:{cause}"), cause=cause)
            for cause in LOSS_CAUSES
        ),
        _rule("job:paid_usd:sum1h", hour("job:trainium_hourly_usd:sum")),
        _rule("job:steps_trained:sum1h", f"sum by ({JOB}) ({rise})"),
        _rule(
            "job:tokens_trained:sum1h",
            f"sum by ({JOB}) ({rise} * on ({RUN}) max by ({RUN}) (training_samples_per_step) "
            f"* on ({RUN}) max by ({RUN}) (training_tokens_per_sample))",
        ),
        _rule("fleet:paid_node_hours:sum1h", hour("fleet:trainium_nodes:count")),
        *(
            _rule("fleet:goodput_lost_node_hours:sum1h", hour(f"fleet:goodput_nodes:{cause}"), cause=cause)
            for cause in FLEET_CAUSES
        ),
    ]


def ledger_rules(window: str) -> list[dict[str, Any]]:
    """The ledger over the whole hours of ``window`` up to the last whole hour: node-hours by state, the
    goodput ratios, and the cost of 1,000 steps and of a token."""

    def total(hourly: str) -> str:
        return f"sum_over_time({hourly}[{_just_short(WINDOW_HOURS[window])}:1h])"

    paid, productive = f"job:paid_node_hours:sum{window}", f"job:productive_node_hours:sum{window}"
    fleet_paid = f"fleet:paid_node_hours:sum{window}"
    steps, tokens, usd = (
        f"job:steps_trained:sum{window}",
        f"job:tokens_trained:sum{window}",
        f"job:paid_usd:sum{window}",
    )
    return [
        _rule(paid, total("job:paid_node_hours:sum1h")),
        _rule(productive, total("job:productive_node_hours:sum1h")),
        _rule(f"job:goodput_lost_node_hours:sum{window}", total("job:goodput_lost_node_hours:sum1h")),
        _rule(f"job:goodput:ratio{window}", f"{productive} / on ({JOB}) ({paid} > 0)"),
        # The week's ratio under the name without its window too: the ledger's headline figure.
        *([_rule("job:goodput:ratio", f"job:goodput:ratio{window}")] if window == HEADLINE_WINDOW else []),
        _rule(usd, total("job:paid_usd:sum1h")),
        _rule(steps, total("job:steps_trained:sum1h")),
        _rule(tokens, total("job:tokens_trained:sum1h")),
        _rule(f"job:cost_per_1k_steps_usd:ratio{window}", f"{usd} / on ({JOB}) ({steps} > 0) * 1000"),
        _rule(f"job:cost_per_token_usd:ratio{window}", f"{usd} / on ({JOB}) ({tokens} > 0)"),
        _rule(fleet_paid, total("fleet:paid_node_hours:sum1h")),
        _rule(f"fleet:goodput_lost_node_hours:sum{window}", total("fleet:goodput_lost_node_hours:sum1h")),
        _rule(f"fleet:goodput:ratio{window}", f"sum({productive}) / ({fleet_paid} > 0)"),
    ]


# Where each alert's runbook is: docs/operations.md's sections, by their headings' anchors.
RUNBOOK = "docs/operations.md#{anchor}"
# The alerts' own default: longer than a Trainium group's 3-minute scale-down-unneeded-time
# (infra/specs/node_template.py) and the instance's termination, so a node the autoscaler is about to
# remove does not page; what pages is a node it will not remove (a pod it cannot evict, a group at minSize, a
# gang hold left on it: infra/specs/gang_hold.py).
IDLE_NODE_ALERT_MINUTES = 30
# The EFA counters' rate is read over this long: a multi-node step exchanges gradients every few seconds.
EFA_RATE_WINDOW = "10m"
# Bytes an EFA device's port sent, from its sysfs hw_counters/tx_bytes: the amazonefa collector of the EFA
# node exporter (aws-samples/awsome-distributed-training 054d5d4
# 4.validation_and_observability/3.efa-node-exporter/amazon_efa_linux.go: node_amazonefa_<counter>{device,
# port}). Stock node-exporter's infiniband collector (prometheus/node_exporter v1.12.1
# collector/infiniband_linux.go) reads the InfiniBand port counters and mlx5's, not EFA's tx_bytes. The
# scrape puts the node's name in ``node``.
EFA_TRANSMITTED = "node_amazonefa_tx_bytes"


# The node agents' scrape jobs (infra/specs/monitoring.py scrape_configuration), each series of which carries the
# node in ``node``, and for each a series it serves on every node while it works, which the dashboards or the
# alerts read: neuron-monitor's exporter sets instance_info from every report (neuron-monitor-prometheus.py
# process_instance_info; neuron-monitor-grafana.json reads it), node-exporter's meminfo collector serves MemTotal
# (collector/meminfo_linux.go, v1.12.1), the EFA exporter each port's sent bytes. A series, not the scrape's own
# ``up``: that one says nothing of an exporter that answers without its counters, and the managed collector's
# guide could not be read here to say that it records ``up`` at all.
NEURON_MONITOR_JOB = "neuron-monitor"
EFA_EXPORTER_JOB = "efa-exporter"
NODE_EXPORTER_JOB = "node-exporter"
NODE_AGENT_SERIES = {
    NEURON_MONITOR_JOB: "instance_info",
    EFA_EXPORTER_JOB: EFA_TRANSMITTED,
    NODE_EXPORTER_JOB: "node_memory_MemTotal_bytes",
}
# A node agent missing this long pages: longer than a node's start (the agents pull their images, the first pull of
# a tag through the cache from upstream) and a DaemonSet's rolling update, one node at a time.
NODE_AGENT_DOWN_FOR = "15m"
# Every other alert finds what it judges through kube-state-metrics: with its series gone (kube-state-metrics down,
# or the collector scraping nothing) they all go quiet. The cluster always has its system nodes, so no
# kube_node_info at all for this long is the feed stopping, not an empty cluster; longer than a rolling update.
METRICS_FEED_DOWN_FOR = "15m"
# The core nodes' CronJobs that look after Trainium nodes, in the burn-in's namespace: the gang hold
# (every minute), which holds the nodes a gang waits for and lets idle ones go, and the burn-in's sweeper (every
# 2 minutes). No success for this long is several runs missed; kube-state-metrics serves each CronJob's last
# success and creation time (kubernetes/kube-state-metrics v2.20.0 internal/store/cronjob.go; its chart
# kube-state-metrics-8.4.0 collects cronjobs by default, values.yaml collectors).
NODE_HOUSEKEEPING_NAMESPACE = burn_in_objects.NAMESPACE
NODE_HOUSEKEEPING_STALE_SECONDS = 600
# Nodes on their way in or out, whose agents are not expected to answer: still in the burn-in, failed it (the
# provisioner removes the empty node), marked for removal by either provisioner (cluster-autoscaler-1.34.2,
# -1.35.2 and -1.36.1, infra/facts/versions.py's pins, utils/taints/taints.go ToBeDeletedTaint, the same line in
# each; kubernetes-sigs/karpenter v1.14.1 pkg/apis/v1/taints.go
# DisruptedTaintKey), cordoned for a drain, or not ready / unreachable (a node whose kubelet stopped: its instance
# terminating; the node itself is then the problem, not its agents) (kubernetes/api v0.35.0
# core/v1/well_known_taints.go). kube-state-metrics serves each taint as kube_node_spec_taint{key} (node.go).
NODE_AGENT_EXEMPT_TAINTS = (
    BURN_IN_TAINT.key,
    BURN_IN_FAILED_TAINT_KEY,
    "ToBeDeletedByClusterAutoscaler",
    "karpenter.sh/disrupted",
    "node.kubernetes.io/unschedulable",
    "node.kubernetes.io/not-ready",
    "node.kubernetes.io/unreachable",
)


def node_agents_missing() -> str:
    """Each (node, job) where a node agent should run and does not serve its NODE_AGENT_SERIES: neuron-monitor where
    the Neuron device plugin serves devices (its DaemonSet's nodes: infra/specs/node_metrics.py), the EFA exporter
    where the EFA device plugin does (both select EFA_PRESENT_LABEL), node-exporter on every node. Missing: no pod,
    a pod that crash-loops or cannot pull its image, one the collector cannot reach, and an EFA exporter whose reads
    of the device's statistics fail (it then leaves every counter out: efa_exporter.py)."""

    def expected(job: str, nodes: str) -> str:
        return f'label_replace(max by (node) ({nodes}), "job", "{job}", "", "")'

    def serving(resource: str) -> str:
        return f'kube_node_status_capacity{{resource="{resource}"}} > 0'

    exempt = "|".join(NODE_AGENT_EXEMPT_TAINTS)
    served = " or ".join(f'max by (node, job) ({series}{{job="{job}"}})' for job, series in NODE_AGENT_SERIES.items())
    return (
        f"({expected(NEURON_MONITOR_JOB, serving(NEURON_RESOURCE))} or "
        f"{expected(EFA_EXPORTER_JOB, serving(EFA_DEVICE_RESOURCE))} or {expected(NODE_EXPORTER_JOB, 'kube_node_info')}"
        f') unless on (node, job) ({served}) unless on (node) kube_node_spec_taint{{key=~"{exempt}"}}'
    )


def _alert(name: str, expr: str, for_: str, summary: str, anchor: str) -> dict[str, Any]:
    return {
        "alert": name,
        "expr": " ".join(expr.split()),
        "for": for_,
        "labels": {"severity": "page", "source": "trainium-goodput"},
        "annotations": {"summary": summary, "runbook": RUNBOOK.format(anchor=anchor)},
    }


def alert_rules(idle_node_minutes: int = IDLE_NODE_ALERT_MINUTES) -> list[dict[str, Any]]:
    """Alerts that name what to do (docs/operations.md, one section each), on the states above."""
    return [
        _alert(
            "TrainingHung",
            "job:goodput_nodes:hung > 0",
            "5m",
            "{{ $labels.workload }} in {{ $labels.namespace }} has made no step for over "
            f"{HANG_SUSPECT_SECONDS // 60} minutes without a checkpoint save; its liveness probe ends it at "
            "hangTimeoutMinutes",
            "training-hung",
        ),
        _alert(
            "TrainingRestartBudgetNearlySpent",
            # The budget is the controller's retries (the exporter's training_restart_budget, from the
            # workload's settings).
            f"(job:restarts:count7d >= on ({JOB}) (max by ({JOB}) {_current('training_restart_budget')} - 1)) "
            f"and on ({JOB}) (max by ({JOB}) {_current('training_restart_budget')} > 0)",
            "0m",
            "{{ $labels.workload }} in {{ $labels.namespace }} has restarted {{ $value }} time(s) in 7 days: at "
            "most one restart of its budget is left",
            "restart-budget-nearly-spent",
        ),
        _alert(
            "TrainiumNodeIdle",
            "node:trainium_idle:present > 0",
            f"{idle_node_minutes}m",
            f"Trainium node {{{{ $labels.node }}}} has run no training pod for {idle_node_minutes} minutes and is "
            "still paid for",
            "trainium-node-idle",
        ),
        # A failed burn-in is burn-in loss in the ledger, not idle; a failed node the provisioner removes goes
        # within its scale-down time, so one still here after the idle setting is kept by something (a group at
        # minSize, a pod it cannot evict) and paid for nothing.
        _alert(
            "BurnInFailedNodeKept",
            f'max by (node, value) (kube_node_spec_taint{{key="{BURN_IN_FAILED_TAINT_KEY}"}}) > 0',
            f"{idle_node_minutes}m",
            f"Trainium node {{{{ $labels.node }}}} failed its burn-in ({{{{ $labels.value }}}}) and is still in the "
            f"cluster {idle_node_minutes} minutes later, paid for and taking no pod",
            "burn-in-failed-node-kept",
        ),
        _alert(
            "EfaTrafficAbsent",
            f"(sum by (node) (rate({EFA_TRANSMITTED}[{EFA_RATE_WINDOW}])) == 0) and on (node) "
            f"(node_job:trainium:allocated * on ({JOB}) group_left () (job:trainium_nodes_stepping:count >= 2))",
            "10m",
            "Trainium node {{ $labels.node }} steps in a multi-node job but has sent nothing over EFA for "
            f"{EFA_RATE_WINDOW}",
            "efa-traffic-absent",
        ),
        # A synchronous save is complete once written: the lag reaches one interval just before each save, and
        # past two a save was missed. An asynchronous one is marked complete only when the next begins
        # (workloads/goodput.py redone_intervals), so its lag reaches two before each save: three for it. An
        # exporter that does not serve the flag counts as synchronous.
        _alert(
            "NodeAgentDown",
            node_agents_missing(),
            NODE_AGENT_DOWN_FOR,
            "{{ $labels.job }} on node {{ $labels.node }} has served nothing the alerts read for "
            f"{NODE_AGENT_DOWN_FOR.removesuffix('m')} minutes: the alerts and dashboards that read it are blind "
            "there",
            "node-agent-down",
        ),
        _alert(
            "MetricsFeedDown",
            "absent(kube_node_info)",
            METRICS_FEED_DOWN_FOR,
            "No node's kube_node_info has reached Prometheus for "
            f"{METRICS_FEED_DOWN_FOR.removesuffix('m')} minutes: kube-state-metrics or the scrape has stopped, and "
            "every other training alert is blind until it is back",
            "metrics-feed-down",
        ),
        _alert(
            "NodeHousekeepingStopped",
            f'(time() - max by (namespace, cronjob) (kube_cronjob_status_last_successful_time{{namespace="{NODE_HOUSEKEEPING_NAMESPACE}"}}) '
            f"> {NODE_HOUSEKEEPING_STALE_SECONDS}) or "
            f'(time() - max by (namespace, cronjob) (kube_cronjob_created{{namespace="{NODE_HOUSEKEEPING_NAMESPACE}"}}) '
            f"> {NODE_HOUSEKEEPING_STALE_SECONDS} unless on (namespace, cronjob) kube_cronjob_status_last_successful_time)",
            "0m",
            "CronJob {{ $labels.cronjob }} has not succeeded for "
            f"{NODE_HOUSEKEEPING_STALE_SECONDS // 60} minutes: Trainium nodes a gang waits for may go, idle ones may "
            "stay held, and a node whose burn-in never started stays",
            "node-housekeeping-stopped",
        ),
        _alert(
            "CheckpointOverdue",
            f"(max by ({JOB}) {_current('training_step')} - max by ({JOB}) {_current('training_checkpoint_step')}) "
            f"> on ({JOB}) ((2 + (max by ({JOB}) {_current('training_checkpoint_asynchronous')} or on ({JOB}) "
            f"(0 * max by ({JOB}) {_current('training_checkpoint_interval_steps')}))) "
            f"* max by ({JOB}) {_current('training_checkpoint_interval_steps')}) "
            f"and on ({JOB}) job:trainium_nodes_stepping:count",
            "0m",
            "{{ $labels.workload }} in {{ $labels.namespace }} is more than two checkpoint intervals (three with "
            "asynchronous saves) past its newest complete checkpoint",
            "checkpoint-overdue",
        ),
    ]


def rule_groups(region: str, idle_node_minutes: int = IDLE_NODE_ALERT_MINUTES) -> dict[str, Any]:
    """One group: Prometheus evaluates a group's rules in order, each seeing the ones before it at the same
    time, so an evaluation's states, the ledger that sums them and the alerts on them agree (groups run
    independently)."""
    rules = [*node_rules(region), *job_rules(), *fleet_rules(), *hourly_rules()]
    rules += [r for w in WINDOW_HOURS for r in ledger_rules(w)]
    rules += alert_rules(idle_node_minutes)
    return {"groups": [{"name": "goodput-ledger", "interval": f"{EVALUATION_INTERVAL_SECONDS}s", "rules": rules}]}


def rule_file(region: str, idle_node_minutes: int = IDLE_NODE_ALERT_MINUTES) -> str:
    return yaml.safe_dump(rule_groups(region, idle_node_minutes), sort_keys=False, width=1000)
