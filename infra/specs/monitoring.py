"""What the managed Prometheus path declares, as data: the collector's scrape configuration, its Kubernetes
permissions, the Alertmanager definition that routes the goodput alerts to SNS, the SNS topic policy, and
kube-state-metrics' chart values. Pure: settings in, dicts and YAML out
(infra/components/observability.py declares them; docs/monitoring.md says why a managed collector).

Sources, each read where cited:
- Amazon Managed Service for Prometheus user guide, AMP-collector-how-to: a collector reaches the cluster
  through its private API endpoint; it is the Kubernetes user ``aps-collector-user``, bound to a ClusterRole
  (COLLECTOR_RULES is the guide's, less the ``metrics.eks.amazonaws.com`` rule for control-plane metrics this
  project does not scrape); EKS wants the collector's service-linked role ARN without its path
  (``eks_principal``); a scrape interval of 30 s at least; only ``kubernetes_sd_configs`` discovery; a
  bearer token only from the service account's token file.
- The same guide, AMP-alertmanager-receiver: the topic policy lets ``aps.amazonaws.com`` publish, for this
  workspace and account only; the Alertmanager definition is ``alertmanager_config`` with ``sns_configs``
  (``topic_arn``, ``sigv4.region``).
- pulumi-aws 7.51.1 amp/alert_manager_definition.py and amp/scraper.py (the definition's shape; the
  ``AMPAgentlessScraper`` tag a collector puts on its workspace).
- prometheus-community/helm-charts kube-state-metrics-8.4.0 (app 2.20.0): values ``metricLabelsAllowlist``
  (joined into --metric-labels-allowlist, templates/deployment.yaml), ``extraArgs`` (added to the args there),
  ``nodeSelector``; pods labelled
  ``app.kubernetes.io/name: kube-state-metrics`` (templates/_helpers.tpl) serving on container port ``http``.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from typing import Any

import yaml

from infra.specs import goodput_rules, node_metrics

COLLECTOR_USER = "aps-collector-user"
COLLECTOR_ROLE = "aps-collector-role"
COLLECTOR_RULES = [
    {
        "apiGroups": [""],
        "resources": [
            "nodes",
            "nodes/proxy",
            "nodes/metrics",
            "services",
            "endpoints",
            "pods",
            "ingresses",
            "configmaps",
        ],
        "verbs": ["describe", "get", "list", "watch"],
    },
    {
        "apiGroups": ["extensions", "networking.k8s.io"],
        "resources": ["ingresses/status", "ingresses"],
        "verbs": ["describe", "get", "list", "watch"],
    },
    {"nonResourceURLs": ["/metrics"], "verbs": ["get"]},
]
# The collector's least interval (the guide's limit), which every job keeps.
SCRAPE_INTERVAL = "30s"
KUBE_STATE_METRICS = "kube-state-metrics"
KUBE_STATE_METRICS_NAMESPACE = "kube-system"
PROGRESS_EXPORTER = "progress-exporter"  # workloads/progress.py NAME: the pods' app.kubernetes.io/name
# The agentless collector tags its workspace so; declaring the tag keeps `pulumi up` from removing it.
AGENTLESS_TAG = "AMPAgentlessScraper"


def collector_rbac() -> list[dict[str, Any]]:
    return [
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": COLLECTOR_ROLE},
            "rules": COLLECTOR_RULES,
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": f"{COLLECTOR_USER}-role-binding"},
            "subjects": [{"kind": "User", "name": COLLECTOR_USER, "apiGroup": "rbac.authorization.k8s.io"}],
            "roleRef": {"kind": "ClusterRole", "name": COLLECTOR_ROLE, "apiGroup": "rbac.authorization.k8s.io"},
        },
    ]


def eks_principal(collector_role_arn: str) -> str:
    """``arn:...:role/aws-service-role/scraper.aps.amazonaws.com/AWSServiceRoleForAmazonPrometheusScraper_x``
    as EKS takes it: ``arn:...:role/AWSServiceRoleForAmazonPrometheusScraper_x``."""
    return re.sub(r":role/.*/", ":role/", collector_role_arn)


def _pods_named(job: str, name: str, port: str, namespace: str | None = None) -> dict[str, Any]:
    """A job over the pods labelled ``app.kubernetes.io/name: <name>`` on their container port ``port``."""
    keep = [
        {
            "source_labels": ["__meta_kubernetes_pod_label_app_kubernetes_io_name"],
            "regex": name,
            "action": "keep",
        },
        {"source_labels": ["__meta_kubernetes_pod_container_port_name"], "regex": port, "action": "keep"},
    ]
    if namespace:
        keep.append({"source_labels": ["__meta_kubernetes_namespace"], "regex": namespace, "action": "keep"})
    return {
        "job_name": job,
        "scrape_interval": SCRAPE_INTERVAL,
        "kubernetes_sd_configs": [{"role": "pod"}],
        "relabel_configs": keep,
    }


def _node_agent(job: str, name: str) -> dict[str, Any]:
    """A node agent's pods in node_metrics.NAMESPACE; each series gets the name of the node its pod runs on in
    ``node``, the label the goodput rules and the dashboards join on (none of these agents sets it itself)."""
    found = _pods_named(job, name, node_metrics.PORT_NAME, node_metrics.NAMESPACE)
    found["relabel_configs"].append(
        {"source_labels": ["__meta_kubernetes_pod_node_name"], "target_label": "node", "action": "replace"}
    )
    return found


def scrape_configuration() -> str:
    """kube-state-metrics (its series name the objects' own namespace, pod and node), every training
    namespace's progress exporter (each series gets its pod's namespace), and the node agents of
    infra/specs/node_metrics.py (each series gets its node)."""
    state = _pods_named(KUBE_STATE_METRICS, KUBE_STATE_METRICS, "http", KUBE_STATE_METRICS_NAMESPACE)
    progress = _pods_named(PROGRESS_EXPORTER, PROGRESS_EXPORTER, "metrics")
    progress["relabel_configs"].append(
        {"source_labels": ["__meta_kubernetes_namespace"], "target_label": "namespace", "action": "replace"}
    )
    agents = [
        _node_agent(node_metrics.NEURON_MONITOR, node_metrics.NEURON_MONITOR),
        _node_agent(node_metrics.EFA_EXPORTER, node_metrics.EFA_EXPORTER),
        _node_agent("node-exporter", node_metrics.NODE_EXPORTER),
    ]
    config = {"global": {"scrape_interval": SCRAPE_INTERVAL}, "scrape_configs": [state, progress, *agents]}
    return yaml.safe_dump(config, sort_keys=False)


def alertmanager_definition(topic_arn: str, region: str) -> str:
    """Every goodput alert to the one SNS topic, grouped per alert and job or node."""
    config = {
        "route": {
            "receiver": "sns",
            "group_by": ["alertname", "namespace", "workload", "node"],
        },
        "receivers": [
            {
                "name": "sns",
                "sns_configs": [
                    {
                        "topic_arn": topic_arn,
                        "sigv4": {"region": region},
                        "subject": "{{ .CommonLabels.alertname }}",
                        "message": "{{ range .Alerts }}{{ .Annotations.summary }} (runbook: "
                        "{{ .Annotations.runbook }})\n{{ end }}",
                    }
                ],
            }
        ],
    }
    return yaml.safe_dump({"alertmanager_config": yaml.safe_dump(config, sort_keys=False)}, sort_keys=False)


def topic_policy(topic_arn: str, workspace_arn: str, account_id: str) -> dict[str, Any]:
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "AmpAlertmanagerPublishes",
                "Effect": "Allow",
                "Principal": {"Service": "aps.amazonaws.com"},
                "Action": ["sns:Publish", "sns:GetTopicAttributes"],
                "Resource": topic_arn,
                "Condition": {
                    "ArnEquals": {"aws:SourceArn": workspace_arn},
                    "StringEquals": {"AWS:SourceAccount": account_id},
                },
            }
        ],
    }


def kube_state_metrics_values(core_node_selector: Mapping[str, str]) -> dict[str, Any]:
    """On the system nodes; the labels the ledger reads allowed onto kube_pod_labels and kube_node_labels, and
    the opt-in families it reads served."""
    return {
        "nodeSelector": dict(core_node_selector),
        "metricLabelsAllowlist": list(goodput_rules.METRIC_LABELS_ALLOWLIST),
        # The chart has no value for --metric-opt-in-list; extraArgs are added to the container's args
        # (kube-state-metrics-8.4.0 templates/deployment.yaml).
        "extraArgs": [f"--metric-opt-in-list={','.join(goodput_rules.METRIC_OPT_IN)}"],
    }


def address_key(address: str) -> str:
    """A short name for an email address's subscription that stays the same wherever the address is
    listed (and however its case is written)."""
    return hashlib.sha256(address.strip().lower().encode()).hexdigest()[:12]
