"""The fleet, job and cost dashboards, as code with Grafana Labs' own grafana-foundation-sdk (requirements.txt),
from one table of panels whose queries read the goodput rules (infra/specs/goodput_rules.py) and the series
their exporters emit. Pure: the table in, dashboard JSON out; infra/components/observability.py declares each
as a ConfigMap for Grafana's dashboard sidecar, and tests/test_dashboards.py checks every query with promtool
and every series name against the rules and the exporters.

No NeuronCore or HBM panel yet: neuron-monitor's exporter is not scraped (docs/monitoring.md, "Not done yet").
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Literal

from grafana_foundation_sdk.builders import dashboard, prometheus, stat, timeseries
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models.dashboard import DataSourceRef

from infra.specs.goodput_rules import EFA_TRANSMITTED, HANG_SUSPECT_SECONDS

# The label Grafana's dashboard sidecar selects ConfigMaps by, as the grafana chart's values name it by
# default (sidecar.dashboards.label, value "1"); a Grafana set to another label must be set to this one.
SIDECAR_LABEL = {"grafana_dashboard": "1"}
DATASOURCE_VARIABLE = "datasource"
DATASOURCE = DataSourceRef(type_val="prometheus", uid=f"${{{DATASOURCE_VARIABLE}}}")
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
                "Allocated but idle Trainium nodes",
                "node:trainium_idle:present",
                "{{node}}",
                description="Paid for, running no training pod and not burning in.",
            ),
            PanelSpec("Nodes held per job", "job:trainium_nodes:count", JOB_LEGEND),
            PanelSpec(
                "EFA bytes sent per node",
                f"sum by (node) (rate({EFA_TRANSMITTED}[5m]))",
                "{{node}}",
                "Bps",
                description="From the EFA node exporter's tx_bytes (not installed by the stack yet).",
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


def _panel(spec: PanelSpec) -> timeseries.Panel | stat.Panel:
    builder = timeseries.Panel() if spec.kind == "timeseries" else stat.Panel()
    query = prometheus.Dataquery().expr(spec.expr).legend_format(spec.legend).ref_id("A")
    builder = builder.title(spec.title).unit(spec.unit).datasource(DATASOURCE).with_target(query)
    builder = builder.height(8).span(12)
    return builder.description(spec.description) if spec.description else builder


def dashboard_json(uid: str, datasource_type: str) -> str:
    """The dashboard ``uid`` of DASHBOARDS as Grafana's JSON model, every panel on the Prometheus data source
    the ``datasource`` variable picks among those of ``datasource_type``, the type the stack provisions
    (infra/specs/monitoring.py grafana_datasource_type)."""
    title, panels = DASHBOARDS[uid]
    builder = (
        dashboard.Dashboard(title)
        .uid(uid)
        .tags(["trainium", "goodput"])
        .time("now-7d", "now")
        .refresh("5m")
        .with_variable(dashboard.DatasourceVariable(DATASOURCE_VARIABLE).type(datasource_type))
    )
    for spec in panels:
        builder = builder.with_panel(_panel(spec))
    return json.dumps(json.loads(JSONEncoder().encode(builder.build())), indent=2, sort_keys=True) + "\n"


def panel_queries() -> list[tuple[str, str]]:
    """(dashboard uid, query) of every panel."""
    return [(uid, spec.expr) for uid, (_, panels) in DASHBOARDS.items() for spec in panels]
