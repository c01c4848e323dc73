"""The node agents a Prometheus scrapes (infra/specs/node_metrics.py), as the prod plan declares them: neuron-monitor
as the upstream manifest runs it, on the Trainium nodes the device plugin serves; node-exporter's chart at its pin;
each agent found by the collector with its node's name on every series; their host access admitted; their requests
taken from what a training pod may ask for. Dev, with no Prometheus, has none of it."""

from __future__ import annotations

import pytest
import yaml

from infra.config.models import FeaturesConfig
from infra.facts.versions import CHARTS, NEURON_MONITOR_IMAGE
from infra.specs import host_access, node_metrics, system_capacity
from infra.specs.dra_objects import NOT_ON_DRA_NODES
from infra.specs.node_template import BURN_IN_TAINT, DRA_NODE_LABELS, NEURON_TAINT

# aws-neuron/aws-neuron-sdk 81ce03a src/k8/k8s-neuron-monitor-daemonset.yml: the container as it is there.
UPSTREAM_NEURON_MONITOR = {
    "image": "public.ecr.aws/neuron/neuron-monitor:1.3.0",
    "command": ["/opt/bin/entrypoint.sh"],
    "args": ["--port", "8000", "--neuron-monitor-config", "/opt/aws/neuron/bin/neuron-monitor.conf"],
    "containerPort": 8000,
    "resources": {"limits": {"cpu": "500m", "memory": "256Mi"}, "requests": {"cpu": "256m", "memory": "128Mi"}},
    "env": [{"name": "GOMEMLIMIT", "value": "160MiB"}],
    "securityContext": {"privileged": True},
}
# prometheus-community/helm-charts prometheus-node-exporter-4.56.1 (the chart at cf408a2): templates/_helpers.tpl
# labels pods app.kubernetes.io/name with the chart's name; templates/daemonset.yaml names the container port
# after values.yaml service.portName, "metrics".
NODE_EXPORTER_CHART = ("prometheus-node-exporter", "4.56.1")
NODE_EXPORTER_POD_LABEL = "prometheus-node-exporter"
NODE_EXPORTER_PORT_NAME = "metrics"


def objects(result, kind: str) -> dict[str, dict]:
    return {
        r.inputs["metadata"]["name"]: r.inputs
        for r in result.registrations
        if r.type.startswith("kubernetes:") and r.inputs.get("kind") == kind
    }


def test_dev_runs_no_agent(dev):
    names = {node_metrics.NEURON_MONITOR, node_metrics.EFA_EXPORTER, node_metrics.NODE_EXPORTER}
    assert not [r for r in dev.registrations if r.name in names or r.inputs.get("metadata", {}).get("name") in names]


def test_neuron_monitor_runs_as_upstream_on_trainium_nodes_the_device_plugin_serves(prod):
    assert NEURON_MONITOR_IMAGE == UPSTREAM_NEURON_MONITOR["image"]
    daemon = objects(prod, "DaemonSet")[node_metrics.NEURON_MONITOR]
    assert daemon["metadata"]["namespace"] == node_metrics.NAMESPACE
    pod = daemon["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    # Through the cluster's pull-through cache: same repository path and tag.
    assert container["image"].endswith("/ecr-public/neuron/neuron-monitor:1.3.0")
    for key in ("command", "args", "resources", "env", "securityContext"):
        assert container[key] == UPSTREAM_NEURON_MONITOR[key], key
    assert container["ports"] == [{"name": "metrics", "containerPort": UPSTREAM_NEURON_MONITOR["containerPort"]}]
    (term,) = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    types, not_dra = term["matchExpressions"]
    # Never where the Neuron DRA driver serves the devices (deploy/infrastructure/monitoring.rst).
    assert not_dra == NOT_ON_DRA_NODES and DRA_NODE_LABELS[not_dra["key"]] in not_dra["values"]
    assert types["key"] == "node.kubernetes.io/instance-type" and types["operator"] == "In"
    # Every prod Trainium group's nodes are selected, and tolerated: the Neuron taint and the burn-in's.
    groups = prod.outputs["acceleratorNodeGroups"]
    assert groups and all(g["instanceType"] in types["values"] for g in groups)
    tolerated = {(t["key"], t["effect"]) for t in pod["tolerations"]}
    assert {(NEURON_TAINT.key, NEURON_TAINT.effect), (BURN_IN_TAINT.key, BURN_IN_TAINT.effect)} <= tolerated


def test_node_exporter_is_the_pinned_chart_serving_only_what_the_dashboards_read(prod):
    (release,) = [r.inputs for r in prod.registrations if r.name == node_metrics.NODE_EXPORTER]
    assert (
        (release["chart"], release["version"])
        == NODE_EXPORTER_CHART
        == (
            CHARTS["prometheus-node-exporter"].chart,
            CHARTS["prometheus-node-exporter"].version,
        )
    )
    assert release["namespace"] == node_metrics.NAMESPACE
    # Less the cpu collector's guest time and the exporter's own series: prometheus/node_exporter v1.12.1
    # collector/cpu_linux.go ("collector.cpu.guest", default true; kingpin's --no- form turns it off) and
    # node_exporter.go ("web.disable-exporter-metrics").
    assert release["values"]["extraArgs"] == [
        "--collector.disable-defaults",
        "--collector.cpu",
        "--collector.meminfo",
        "--no-collector.cpu.guest",
        "--web.disable-exporter-metrics",
    ]


def test_the_collector_finds_each_agent_and_names_its_node(prod):
    (scraper,) = [r.inputs for r in prod.registrations if r.type == "aws:amp/scraper:Scraper"]
    jobs = {job["job_name"]: job for job in yaml.safe_load(scraper["scrapeConfiguration"])["scrape_configs"]}
    daemons = objects(prod, "DaemonSet")
    found = {}
    for name in (node_metrics.NEURON_MONITOR, node_metrics.EFA_EXPORTER):
        pod = daemons[name]["spec"]["template"]
        found[name] = (
            pod["metadata"]["labels"]["app.kubernetes.io/name"],
            pod["spec"]["containers"][0]["ports"][0]["name"],
            daemons[name]["metadata"]["namespace"],
        )
    found["node-exporter"] = (NODE_EXPORTER_POD_LABEL, NODE_EXPORTER_PORT_NAME, node_metrics.NAMESPACE)
    for job, (label, port, namespace) in found.items():
        relabel = jobs[job]["relabel_configs"]
        kept = {r["source_labels"][0]: r["regex"] for r in relabel if r.get("action") == "keep"}
        assert kept == {
            "__meta_kubernetes_pod_label_app_kubernetes_io_name": label,
            "__meta_kubernetes_pod_container_port_name": port,
            "__meta_kubernetes_namespace": namespace,
        }, job
        # The goodput rules and the dashboards join on `node` (EfaTrafficAbsent among them).
        assert {
            "source_labels": ["__meta_kubernetes_pod_node_name"],
            "target_label": "node",
            "action": "replace",
        } in relabel, job


def test_their_host_access_is_what_their_namespace_admits(prod):
    allowed = host_access.exemptions(observability=True, neuron_chart=True, neuron_scheduler_extension=False)
    for name in (node_metrics.NEURON_MONITOR, node_metrics.EFA_EXPORTER):
        daemon = objects(prod, "DaemonSet")[name]
        pod = daemon["spec"]["template"]["spec"]
        used = {"hostPath"} if any("hostPath" in v for v in pod.get("volumes", [])) else set()
        used |= {"privileged"} if any(c["securityContext"].get("privileged") for c in pod["containers"]) else set()
        used |= {k for k in ("hostNetwork", "hostPID", "hostIPC") if pod.get(k)}
        assert used and used <= set(allowed[f"{daemon['metadata']['namespace']}/DaemonSet"]), name
    # node-exporter's chart: hostNetwork, hostPID and host paths (values.yaml at 4.56.1).
    assert {"hostNetwork", "hostPID", "hostPath"} <= set(allowed[f"{node_metrics.NAMESPACE}/DaemonSet"])


@pytest.mark.parametrize(
    "dra, efa, less", [(False, True, (266, 160)), (False, False, (256, 128)), (True, True, (0, 0))]
)
def test_a_training_pod_may_ask_for_less_by_what_the_agents_request(dra, efa, less):
    features = FeaturesConfig()
    without = system_capacity.node_allocatable("trn1.32xlarge", features, True, dra=dra, efa=efa)
    with_agents = system_capacity.node_allocatable(
        "trn1.32xlarge", features, True, dra=dra, efa=efa, metrics_agents=True
    )
    assert without and with_agents
    cpu = int(without["cpu"].rstrip("m")) - int(with_agents["cpu"].rstrip("m"))
    memory = int(without["memory"].rstrip("Mi")) - int(with_agents["memory"].rstrip("Mi"))
    assert (cpu, memory) == less


def test_prod_exports_the_smaller_allocatable(prod):
    group = next(g for g in prod.outputs["acceleratorNodeGroups"] if g["instanceType"] == "trn1.32xlarge")
    expected = system_capacity.node_allocatable("trn1.32xlarge", FeaturesConfig(), True, efa=True, metrics_agents=True)
    assert group["allocatable"] == expected


def test_their_pins_answer_to_support_rows_while_a_prometheus_runs():
    from infra.config.rules import cluster_pins
    from infra.facts import support
    from infra.validate import parse_stack_config

    on = parse_stack_config({"region": "us-west-2", "monitoring": {"prometheus": "managed"}})
    off = parse_stack_config({"region": "us-west-2"})
    rows = {p.row for p in cluster_pins(on)} - {p.row for p in cluster_pins(off)}
    assert {"neuron-monitor-1.3", "prometheus-node-exporter-4.56", "kube-state-metrics-8.4"} <= rows
    assert rows <= set(support.row_names())
