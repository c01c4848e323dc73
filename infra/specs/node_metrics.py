"""The node agents a Prometheus scrapes beside kube-state-metrics and the progress exporters, as data: neuron-monitor
on the Trainium nodes, the EFA exporter on the EFA nodes, node-exporter on every node. Pure: images in, manifests
and chart values out (infra/components/observability.py NodeMetrics declares them while monitoring.prometheus is
not off; infra/specs/monitoring.py scrape_configuration scrapes them; docs/monitoring.md says why each).

Sources, each read where cited:
- neuron-monitor: aws-neuron/aws-neuron-sdk 81ce03a (2026-08-21) src/k8/k8s-neuron-monitor-daemonset.yml (the
  image, its entrypoint and arguments, port 8000, privileged, the resources and GOMEMLIMIT, kept as they are) and
  deploy/infrastructure/monitoring.rst ("Neuron Monitor does not currently support environments using the
  Neuron DRA (Dynamic Resource Allocation) Driver": never on a ``deviceAllocation: dra`` node). The series it
  serves and their labels: src/examples/neuron-monitor/neuron-monitor-grafana.json (tests/test_dashboards.py).
- The EFA exporter: infra/node_agents/efa_exporter.py (its docstring cites the names it serves).
- node-exporter: prometheus-community/helm-charts prometheus-node-exporter-4.56.1 (the chart at cf408a2)
  values.yaml (hostNetwork and hostPID true, the host's /, /proc and /sys mounted, tolerations
  ``{effect: NoSchedule, operator: Exists}``: every node here, whose taints are all NoSchedule; resources {};
  ``extraArgs`` added to the container's args, templates/daemonset.yaml) and templates/_helpers.tpl (pods
  labelled ``app.kubernetes.io/name: prometheus-node-exporter``, container port ``service.portName``
  ``metrics``). prometheus/node_exporter v1.12.1 node_exporter.go ``--collector.disable-defaults``.

Per-pod NeuronCore use: the exporter labels each runtime's series with its ``runtime_tag``, the process's
``NEURON_PROCESS_TAG`` or else its PID (tools/neuron-sys-tools/neuron-monitor-user-guide.rst, "Neuron
applications tagging"), and names pods only through the beta ``--enable-k8s-info`` companion, which needs the
kubelet's pod-resources socket. Neither is needed here: every training pod holds its Trainium nodes whole, so a
node's use is its job's, which the dashboards join by node (node_job:trainium:allocated). Setting the tag would
change every training pod's spec, replacing the running jobs, for nothing the join does not give.
"""

from __future__ import annotations

import hashlib
from typing import Any

from infra.specs.dra_objects import NODE_AGENT_TOLERATIONS, NOT_ON_DRA_NODES
from infra.specs.goodput_rules import TRAINIUM_INSTANCE_TYPES
from infra.specs.node_template import EFA_PRESENT_LABEL
from infra.specs.pod_security import UNPRIVILEGED_UID, container_security_context, pod_security_context

NAMESPACE = "kube-system"
NAME_LABEL = "app.kubernetes.io/name"
PORT_NAME = "metrics"

NEURON_MONITOR = "neuron-monitor"
NEURON_MONITOR_PORT = 8000
# The upstream manifest's: requests count against what a training pod may request on the node
# (infra/specs/system_capacity.py accelerator_daemonsets).
NEURON_MONITOR_REQUESTS = {"cpu": "256m", "memory": "128Mi"}
NEURON_MONITOR_LIMITS = {"cpu": "500m", "memory": "256Mi"}

EFA_EXPORTER = "efa-exporter"
EFA_EXPORTER_FILE = "efa_exporter.py"
# The exporter's ConfigMap is named after its content (EFA_EXPORTER-<digest>), so a changed script is a new
# ConfigMap and a new pod template, which rolls the pods onto it. With the fixed name, pulumi-kubernetes replaces a
# ConfigMap whose data changes (no enableConfigMapMutable here: provider/pkg/provider/diff.go forceNewProperties)
# deleting it first, since the new one must take the same name (provider.go Diff, deleteBeforeReplace), while the
# DaemonSet, its inputs unchanged, never rolls: each pod kept the old code, and one started in between found no
# ConfigMap to mount. Under a new name the replacement is created first, the DaemonSet then rolls onto it (its
# update waits for the rollout: provider/pkg/await/daemonset.go), and the old ConfigMap goes last, with the
# deployment's other replaced resources (pulumi/pulumi pkg/resource/deploy/step_generator.go GenerateDeletes).
# Read at pulumi/pulumi-kubernetes v4.32.0 and pulumi/pulumi v3.259.0, the newest tags readable here (the pins are
# 4.34.2 and 3.272.0).
SCRIPT_DIGEST_CHARS = 10
EFA_EXPORTER_PORT = 9470
EFA_SCRIPT_DIR = "/opt/efa-exporter"
EFA_HEALTH_PATH = "/healthz"  # infra/node_agents/efa_exporter.py HEALTH_PATH
HOST_SYSFS = "/host/sys"
# A few files read every 30 s: a hundredth of a core, and a Python interpreter's memory.
EFA_EXPORTER_REQUESTS = {"cpu": "10m", "memory": "32Mi"}
EFA_EXPORTER_LIMITS = {"cpu": "100m", "memory": "64Mi"}

NODE_EXPORTER = "prometheus-node-exporter"
# The series the dashboards read: node_cpu_seconds_total (collector/cpu_common.go) and node_memory_MemTotal_bytes,
# node_memory_MemAvailable_bytes (collector/meminfo_linux.go), at v1.12.1.
NODE_EXPORTER_COLLECTORS = ("cpu", "meminfo")
# What else the dashboards and rules never read, left out (AMP bills every sample): the cpu collector's guest time,
# 2 series a vCPU (collector/cpu_linux.go --collector.cpu.guest, on by default), and the exporter's own go_*,
# process_* and promhttp_* series (node_exporter.go --web.disable-exporter-metrics). The 8 modes of
# node_cpu_seconds_total a vCPU stay, though the CPU panel reads only idle: dropping the others takes the
# collector's metric_relabel_configs, which the managed collector's guide could not be read to allow
# (docs/monitoring.md, Costs).
NODE_EXPORTER_TRIMMED = ("--no-collector.cpu.guest", "--web.disable-exporter-metrics")


def _probe(path: str) -> dict[str, Any]:
    """An HTTP GET of ``path`` on the agent's server: a server that stops answering is restarted (liveness) and out
    of nothing until it answers (readiness)."""
    return {
        "httpGet": {"path": path, "port": PORT_NAME},
        "periodSeconds": 30,
        "timeoutSeconds": 10,
        "failureThreshold": 3,
    }


def _daemon_set(name: str, pod: dict[str, Any]) -> dict[str, Any]:
    labels = {NAME_LABEL: name}
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": labels},
        "spec": {
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": {"automountServiceAccountToken": False, **pod}},
        },
    }


def trainium_affinity() -> dict[str, Any]:
    """Trainium nodes (by instance type, as the goodput rules count them) whose devices the device plugin serves."""
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {
                                "key": "node.kubernetes.io/instance-type",
                                "operator": "In",
                                "values": list(TRAINIUM_INSTANCE_TYPES),
                            },
                            NOT_ON_DRA_NODES,
                        ]
                    }
                ]
            }
        }
    }


def neuron_monitor(image: str) -> dict[str, Any]:
    """neuron-monitor piped into its Prometheus exporter (the image's entrypoint), as the upstream manifest runs it;
    privileged, as there, to reach the Neuron devices and the runtimes' state. Through the burn-in too."""
    return _daemon_set(
        NEURON_MONITOR,
        {
            "affinity": trainium_affinity(),
            "tolerations": NODE_AGENT_TOLERATIONS,
            "containers": [
                {
                    "name": NEURON_MONITOR,
                    "image": image,
                    "command": ["/opt/bin/entrypoint.sh"],
                    "args": [
                        "--port",
                        str(NEURON_MONITOR_PORT),
                        "--neuron-monitor-config",
                        "/opt/aws/neuron/bin/neuron-monitor.conf",
                    ],
                    "ports": [{"name": PORT_NAME, "containerPort": NEURON_MONITOR_PORT}],
                    "env": [{"name": "GOMEMLIMIT", "value": "160MiB"}],
                    "resources": {"requests": NEURON_MONITOR_REQUESTS, "limits": NEURON_MONITOR_LIMITS},
                    "securityContext": {"privileged": True},
                    # Not in the upstream manifest: its exporter (prometheus_client's HTTP server) answers
                    # /metrics as soon as it runs, from the gauges its loop last set from neuron-monitor's report
                    # (neuron-monitor-prometheus.py update_loop, as stored in the search index): a probe reads no
                    # device.
                    "livenessProbe": _probe("/metrics"),
                    "readinessProbe": _probe("/metrics"),
                }
            ],
        },
    )


def efa_exporter_command() -> list[str]:
    return ["python3", f"{EFA_SCRIPT_DIR}/{EFA_EXPORTER_FILE}", str(EFA_EXPORTER_PORT), HOST_SYSFS]


def files_digest(files: dict[str, str]) -> str:
    """A short digest of a ConfigMap's files, names and content."""
    text = "".join(f"{name}\0{body}\0" for name, body in sorted(files.items()))
    return hashlib.sha256(text.encode()).hexdigest()[:SCRIPT_DIGEST_CHARS]


def efa_exporter(image: str, script: str) -> list[dict[str, Any]]:
    """The exporter's file in a ConfigMap named after its content (SCRIPT_DIGEST_CHARS says why), and a DaemonSet on
    the nodes whose EFA devices the EFA device plugin serves (the label it selects on), reading the host's /sys,
    mounted read-only where node-exporter's chart mounts it, as a non-root user: the RDMA core makes every counter file readable to all (torvalds/linux
    drivers/infiniband/core/sysfs.c as stored at 0147ebcf: alloc_hsa, mode S_IRUGO)."""
    data = {EFA_EXPORTER_FILE: script}
    config_map = f"{EFA_EXPORTER}-{files_digest(data)}"
    files = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": config_map,
            "namespace": NAMESPACE,
            "labels": {NAME_LABEL: EFA_EXPORTER},
        },
        "data": data,
    }
    pod = {
        "nodeSelector": {EFA_PRESENT_LABEL: "true"},
        "tolerations": NODE_AGENT_TOLERATIONS,
        "securityContext": pod_security_context(UNPRIVILEGED_UID),
        "containers": [
            {
                "name": EFA_EXPORTER,
                "image": image,
                "command": efa_exporter_command(),
                "ports": [{"name": PORT_NAME, "containerPort": EFA_EXPORTER_PORT}],
                "resources": {"requests": EFA_EXPORTER_REQUESTS, "limits": EFA_EXPORTER_LIMITS},
                "securityContext": container_security_context(read_only_root=True),
                # Not /metrics: each of its reads makes the driver query every device (efa_exporter.py HEALTH_PATH).
                "livenessProbe": _probe(EFA_HEALTH_PATH),
                "readinessProbe": _probe(EFA_HEALTH_PATH),
                "volumeMounts": [
                    {"name": "script", "mountPath": EFA_SCRIPT_DIR, "readOnly": True},
                    {"name": "sys", "mountPath": HOST_SYSFS, "readOnly": True},
                ],
            }
        ],
        "volumes": [
            {"name": "script", "configMap": {"name": config_map}},
            {"name": "sys", "hostPath": {"path": "/sys", "type": "Directory"}},
        ],
    }
    return [files, _daemon_set(EFA_EXPORTER, pod)]


def node_exporter_values() -> dict[str, Any]:
    """The chart's defaults (every node, host network and PID, the host's file systems read-only), serving only the
    collectors the dashboards read."""
    return {
        "extraArgs": [
            "--collector.disable-defaults",
            *(f"--collector.{c}" for c in NODE_EXPORTER_COLLECTORS),
            *NODE_EXPORTER_TRIMMED,
        ]
    }
