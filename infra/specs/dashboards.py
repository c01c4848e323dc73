"""The fleet, job and cost dashboards, as code with Grafana Labs' own grafana-foundation-sdk (requirements.txt),
from one table of panels whose queries read the goodput rules (infra/specs/goodput_rules.py) and the series
their exporters emit. Pure: the table in, dashboard JSON out; infra/components/observability.py declares each
as a ConfigMap for Grafana's dashboard sidecar, and tests/test_dashboards.py checks every query with promtool
and every series name against the rules and the exporters.

The node agents' series (infra/specs/node_metrics.py) carry their node's name in ``node`` (the scrape adds it). A job's
NeuronCore use is its nodes' (node_job:trainium:allocated): each training pod holds its Trainium nodes whole.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Literal

from grafana_foundation_sdk.builders import dashboard, prometheus, stat, timeseries
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models.dashboard import DataSourceRef

from infra.specs.goodput_rules import EFA_TRANSMITTED, HANG_SUSPECT_SECONDS
from infra.specs.node_template import BURN_IN_FAILED_TAINT_KEY

# neuron-monitor's exporter (aws-neuron/aws-neuron-sdk 81ce03a src/examples/neuron-monitor/neuron-monitor-grafana.json:
# `avg by (neuroncore) (neuroncore_utilization_ratio)`, a ratio of 1; `sum by (instance_id, memory_location)
# (neuron_runtime_memory_used_bytes)`, memory_location "host" or "neuron_device").
NEURONCORE_UTILISATION = "neuroncore_utilization_ratio"
NEURON_RUNTIME_MEMORY = "neuron_runtime_memory_used_bytes"
# `count(instance_info)` there: one series per node the exporter runs on (not a `deviceAllocation: dra` one).
NEURON_INSTANCE = "instance_info"
# The EFA exporter's (infra/node_agents/efa_exporter.py): bytes received, and the counters that count failures.
EFA_RECEIVED = "node_amazonefa_rx_bytes"
EFA_ERROR_COUNTERS = (
    "rx_drops",
    "rdma_read_wr_err",
    "rdma_write_wr_err",
    "retrans_timeout_events",
    "unresponsive_remote_events",
    "impaired_remote_conn_events",
)

# The label Grafana's dashboard sidecar selects ConfigMaps by, as the grafana chart's values name it by
# default (sidecar.dashboards.label, value "1"); a Grafana set to another label must be set to this one.
SIDECAR_LABEL = {"grafana_dashboard": "1"}
DATASOURCE_VARIABLE = "datasource"
JOB_LEGEND = "{{namespace}}/{{workload}}"


@dataclass(frozen=True)
class PanelSpec:
    title: str
    expr: str
    legend: str = ""
    unit: str = "short"
    kind: Literal["timeseries", "stat"] = "timeseries"
    description: str = ""


DASHBOARDS: dict[str, tuple[str, tuple[PanelSpec, ...]]] = {
    "trainium-fleet": (
        "Trainium fleet",
        (
            PanelSpec("Trainium nodes", "fleet:trainium_nodes:count", "nodes"),
            PanelSpec(
                "Nodes by state no job holds",
                'label_replace(fleet:goodput_nodes:burn_in, "state", "burn-in", "", "") '
                'or label_replace(fleet:goodput_nodes:pending, "state", "pending", "", "") '
                'or label_replace(fleet:goodput_nodes:capacity_block_idle, "state", "capacity block idle", "", "") '
                'or label_replace(fleet:goodput_nodes:idle, "state", "idle", "", "")',
                "{{state}}",
                description="Burn-in, waiting for a gang's other nodes, a Capacity Block's tail, idle.",
            ),
            PanelSpec(
                "Burn-in failures by reason",
                f'count by (value) (max by (node, value) (kube_node_spec_taint{{key="{BURN_IN_FAILED_TAINT_KEY}"}}))',
                "{{value}}",
                description="Nodes that failed their burn-in and wait for the provisioner to remove them, by the "
                "reason the burn-in gave (the failed taint's value); their time is burn-in loss.",
            ),
            PanelSpec(
                "Allocated but idle Trainium nodes",
                "node:trainium_idle:present",
                "{{node}}",
                description="Paid for, running no training pod and not burning in.",
            ),
            PanelSpec("Nodes held per job", "job:trainium_nodes:count", JOB_LEGEND),
            PanelSpec(
                "NeuronCore utilisation per node",
                f"avg by (node) ({NEURONCORE_UTILISATION})",
                "{{node}}",
                "percentunit",
                description="neuron-monitor's mean over the node's NeuronCores in use; none while no Neuron runtime "
                "runs there.",
            ),
            PanelSpec(
                "NeuronCore utilisation per job",
                f"avg by (namespace, workload) (node_job:trainium:allocated * on (node) group_left () "
                f"avg by (node) ({NEURONCORE_UTILISATION}))",
                JOB_LEGEND,
                "percentunit",
                description="The mean of the job's nodes whose Neuron runtime reports (each of its pods holds its "
                'node whole): a node whose runtime is dead or not started is left out, not counted as 0; "Held '
                'by a job, NeuronCores idle" shows those.',
            ),
            PanelSpec(
                "Held by a job, NeuronCores idle",
                f"(node_job:trainium:allocated and on (node) {NEURON_INSTANCE}) "
                f"unless on (node) (max by (node) ({NEURONCORE_UTILISATION}) > 0)",
                "{{node}} {{namespace}}/{{workload}}",
                description="A job's pod is bound to the node but no NeuronCore there works: starting (image pull, "
                "compile, checkpoint load), hung, or holding a node it does not use. Nodes neuron-monitor "
                "serves only.",
            ),
            PanelSpec(
                "Device memory (HBM) used per node",
                f'sum by (node) ({NEURON_RUNTIME_MEMORY}{{memory_location="neuron_device"}})',
                "{{node}}",
                "bytes",
                description="What the Neuron runtimes on the node hold in device memory.",
            ),
            PanelSpec(
                "EFA bytes sent and received per node",
                f'label_replace(sum by (node) (rate({EFA_TRANSMITTED}[5m])), "direction", "sent", "", "") '
                f'or label_replace(sum by (node) (rate({EFA_RECEIVED}[5m])), "direction", "received", "", "")',
                "{{node}} {{direction}}",
                "Bps",
                description="From the EFA devices' port counters tx_bytes and rx_bytes.",
            ),
            PanelSpec(
                "EFA errors per node",
                " or ".join(
                    f'label_replace(sum by (node) (rate(node_amazonefa_{c}[5m])), "counter", "{c}", "", "")'
                    for c in EFA_ERROR_COUNTERS
                ),
                "{{node}} {{counter}}",
                "ops",
                description="Per second: received packets dropped, RDMA reads and writes failed, retransmission "
                "timeouts, peers that stopped answering or were impaired.",
            ),
            PanelSpec(
                "CPU busy on Trainium nodes",
                '1 - avg by (node) (rate(node_cpu_seconds_total{mode="idle"}[5m])) and on (node) node:trainium:present',
                "{{node}}",
                "percentunit",
                description="Data loading and the host side of collectives run here.",
            ),
            PanelSpec(
                "Memory used on Trainium nodes",
                "1 - sum by (node) (node_memory_MemAvailable_bytes) / sum by (node) (node_memory_MemTotal_bytes) "
                "and on (node) node:trainium:present",
                "{{node}}",
                "percentunit",
            ),
        ),
    ),
    "trainium-jobs": (
        "Trainium jobs",
        (
            PanelSpec("Goodput, last day", "job:goodput:ratio1d", JOB_LEGEND, "percentunit"),
            PanelSpec(
                "Steps per second",
                "sum by (namespace, workload) (deriv(training_step_high_water[10m]))",
                JOB_LEGEND,
            ),
            PanelSpec("Throughput (samples/s)", "sum by (namespace, workload) (training_throughput)", JOB_LEGEND),
            PanelSpec(
                "Tokens per second",
                "sum by (namespace, workload) (max by (namespace, workload, run) (deriv(training_step_high_water[10m]) "
                "* training_samples_per_step * training_tokens_per_sample))",
                JOB_LEGEND,
                description="Steps per second times the tokens one step trains, from the workload's settings: every "
                "workload, whether or not its step line prints a throughput.",
            ),
            PanelSpec(
                "Seconds per step",
                "1 / (sum by (namespace, workload) (max by (namespace, workload, run) "
                "(deriv(training_step_high_water[10m]))) > 0)",
                JOB_LEGEND,
                "s",
                description="None while the job steps no further.",
            ),
            PanelSpec(
                "Restarts, last day",
                "job:restarts:count1d",
                JOB_LEGEND,
                description="New attempts of the current run's training step: a hang ended by the probe, a failure, "
                "a replaced node.",
            ),
            PanelSpec(
                "Hung (nodes)",
                "job:goodput_nodes:hung",
                JOB_LEGEND,
                description=f"No step for {HANG_SUSPECT_SECONDS // 60} minutes without a save.",
            ),
            PanelSpec(
                "Age of the newest complete checkpoint",
                "time() - max by (namespace, workload) (training_checkpoint_timestamp_seconds)",
                JOB_LEGEND,
                "s",
            ),
            PanelSpec(
                "Checkpoint save time",
                "max by (namespace, workload) (training_checkpoint_save_seconds)",
                JOB_LEGEND,
                "s",
                description="The newest complete save's write time, from its files (NxD's and Ray's saves; BERT's "
                "single file records no start).",
            ),
            PanelSpec(
                "Saving a checkpoint (nodes)",
                "job:goodput_nodes:checkpointing",
                JOB_LEGEND,
            ),
            PanelSpec(
                "Node-hours lost, last day, by cause",
                "job:goodput_lost_node_hours:sum1d",
                "{{namespace}}/{{workload}} {{cause}}",
                "h",
            ),
            PanelSpec(
                "Steps redone after restarts", "sum by (namespace, workload) (training_steps_redone_total)", JOB_LEGEND
            ),
        ),
    ),
    "trainium-cost": (
        "Trainium cost",
        (
            PanelSpec("Fleet goodput, last week", "fleet:goodput:ratio7d", "fleet", "percentunit", "stat"),
            PanelSpec("Paid Trainium node-hours, last week", "fleet:paid_node_hours:sum7d", "fleet", "h", "stat"),
            PanelSpec(
                "Fleet node-hours lost, last week, by cause",
                "fleet:goodput_lost_node_hours:sum7d",
                "{{cause}}",
                "h",
            ),
            PanelSpec("On-demand dollars per job, last week", "job:paid_usd:sum7d", JOB_LEGEND, "currencyUSD"),
            PanelSpec("Dollars per 1,000 steps", "job:cost_per_1k_steps_usd:ratio7d", JOB_LEGEND, "currencyUSD"),
            PanelSpec("Dollars per token", "job:cost_per_token_usd:ratio7d", JOB_LEGEND, "currencyUSD"),
        ),
    ),
}


def _panel(spec: PanelSpec, datasource: DataSourceRef) -> timeseries.Panel | stat.Panel:
    builder = timeseries.Panel() if spec.kind == "timeseries" else stat.Panel()
    query = prometheus.Dataquery().expr(spec.expr).legend_format(spec.legend).ref_id("A")
    builder = builder.title(spec.title).unit(spec.unit).datasource(datasource).with_target(query)
    builder = builder.height(8).span(12)
    return builder.description(spec.description) if spec.description else builder


def dashboard_json(uid: str, datasource_type: str) -> str:
    """The dashboard ``uid`` of DASHBOARDS as Grafana's JSON model, every panel on the Prometheus data source
    the ``datasource`` variable picks among those of ``datasource_type``, the type the stack provisions
    (infra/specs/monitoring.py grafana_datasource_type)."""
    title, panels = DASHBOARDS[uid]
    # Each panel names the variable, of the variable's type: the JSON says what the panel reads.
    datasource = DataSourceRef(type_val=datasource_type, uid=f"${{{DATASOURCE_VARIABLE}}}")
    builder = (
        dashboard.Dashboard(title)
        .uid(uid)
        .tags(["trainium", "goodput"])
        .time("now-7d", "now")
        .refresh("5m")
        .with_variable(dashboard.DatasourceVariable(DATASOURCE_VARIABLE).type(datasource_type))
    )
    for spec in panels:
        builder = builder.with_panel(_panel(spec, datasource))
    return json.dumps(json.loads(JSONEncoder().encode(builder.build())), indent=2, sort_keys=True) + "\n"


def panel_queries() -> list[tuple[str, str]]:
    """(dashboard uid, query) of every panel."""
    return [(uid, spec.expr) for uid, (_, panels) in DASHBOARDS.items() for spec in panels]
