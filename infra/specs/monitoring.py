"""What the Prometheus paths declare, as data: the collector's scrape configuration, its Kubernetes
permissions, the Alertmanager definition that routes the goodput alerts to SNS, the SNS topic policy, and
kube-state-metrics' chart values; for monitoring.prometheus: in-cluster the prometheus chart's values (the same
jobs, rules and route) and its volumes' StorageClass; for monitoring.grafana the grafana chart's values and its
data source. Pure: settings in, dicts and YAML out (infra/components/observability.py declares them;
docs/monitoring.md says why a managed collector, and why no Amazon Managed Grafana).

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
- prometheus-community/helm-charts prometheus-29.27.0 (cf408a2; Prometheus v3.14.0, alertmanager subchart 1.42.0 with
  Alertmanager v0.34.0): templates/cm.yaml writes ``server.global`` as prometheus.yml's ``global`` and appends the
  enabled ``scrapeConfigs`` entries before ``serverFiles["prometheus.yml"].scrape_configs`` (so every default job
  is turned off by name, IN_CLUSTER_DEFAULT_JOBS, the chart's values.yaml ``scrapeConfigs`` keys); every other
  ``serverFiles`` key is a file under /etc/config; with ``alertmanager.enabled`` it adds the ``alerting`` section
  that finds the subchart's pod. values.yaml: ``server.persistentVolume.size``/``storageClass``,
  ``server.retention``/``retentionSize``, ``server.nodeSelector``; subcharts ``kube-state-metrics``,
  ``prometheus-node-exporter``, ``prometheus-pushgateway`` (``enabled``). alertmanager-1.42.0 values.yaml:
  ``config`` (its ``receivers`` list replaces the default one, ``route`` merges over the default's), ``persistence``,
  ``serviceAccount.name``, ``nodeSelector``.
- prometheus/alertmanager v0.34.0 notify/sns/sns.go createSNSClient: with no ``access_key``, ``profile`` or
  ``role_arn`` in ``sigv4`` the SNS client is built by aws-sdk-go-v2's ``config.LoadDefaultConfig`` (config
  v1.32.33 in its go.mod), the SDK's default credential chain, whose container provider reads EKS Pod Identity's
  credentials (EKS user guide, service-accounts.adoc pod-id-minimum-sdk: Go v2 from release-2023-11-14). So the
  in-cluster Alertmanager signs SNS requests with its pod's role and publishes to the same topic as ``managed``.
- grafana-community/helm-charts grafana-12.11.1 (Grafana 13.2.0) values.yaml: ``admin.existingSecret``/``userKey``/
  ``passwordKey``, ``sidecar.dashboards`` (``enabled``, ``label``, ``labelValue``, ``searchNamespace``; the
  chart's ClusterRole lets the sidecar read ConfigMaps in every namespace, templates/clusterrole.yaml),
  ``datasources``, ``grafana.ini``, ``serviceAccount.name``, ``service.type`` ClusterIP, ``nodeSelector``,
  ``plugins``: templates/_config.tpl joins that list with commas into the ConfigMap key ``plugins``, which
  templates/_pod.tpl hands Grafana as ``GF_PLUGINS_PREINSTALL_SYNC`` ([plugins] preinstall_sync). Grafana splits
  each entry at ``@`` into id, version and URL (pkg/setting/setting_plugins.go processPreinstallPlugins) and
  installs them from grafana.com before it starts serving (pkg/services/pluginsintegration/plugininstaller,
  ``starting``: a failed install fails the start); both read in the search index's stored copy of
  grafana/grafana (the snapshot, 3.2 GB, is over the fetch limit, so not at the v13.2.0 tag itself).
  ``[plugins] preinstall_auto_update`` (setting_plugins.go readPluginSettings, default true) is what the
  installer reads before it replaces an installed plugin that has no pinned version with grafana.com's newest
  (plugininstaller installPlugins: ``cfg.PreinstallAutoUpdate``), the same stored copy; another stored copy of
  the installer, with a PluginInstall API, reads a ``preinstallAutoUpdate`` feature toggle there instead, so which
  of the two Grafana 13.2.0 reads is not verified here. ``shadowBundledPlugins`` stays off: it exists for plugins
  Grafana 13 ships inside its image (moved out of core, grafana/grafana#129166 adding the core Prometheus one).
  The Amazon Managed Service for Prometheus plugin is not among Grafana's default preinstalled plugins in the
  stored setting_plugins.go (``defaultPreinstallPlugins``); what the v13.2.0 image bundles was not read, so
  whether it ships that plugin too is not verified.
- Grafana 13 has no SigV4 in its core Prometheus data source (grafana/grafana#123089, 2026-04-20): the managed
  workspace is read through the Amazon Managed Service for Prometheus plugin, grafana/grafana-amazonprometheus-
  datasource v3.2.0 (infra/facts/versions.py): src/plugin.json (id AMAZON_PROMETHEUS_PLUGIN); pkg/datasource.go
  adds grafana-aws-sdk's ``awsauth.NewSigV4Middleware`` to every request and signs for ``aps`` unless
  ``sigv4Service`` says otherwise; the SigV4 settings come from the data source's jsonData as
  grafana-plugin-sdk-go v0.294.0 (its go.mod) reads them (backend/http_settings.go: ``sigV4Auth``,
  ``sigV4AuthType``, ``sigV4Region``); docs/sources/configure.md provisions it the same way. grafana-aws-sdk
  v1.5.1 (its go.mod) pkg/awsauth/auth.go GetConfig: auth type ``default`` (allowed by default,
  pkg/awsds/authSettings.go) adds no credentials and calls aws-sdk-go-v2's ``config.LoadDefaultConfig``
  (config v1.32.30 in the plugin's go.mod), the default chain whose container provider reads EKS Pod Identity's
  credentials (EKS user guide, service-accounts.adoc pod-id-minimum-sdk: Go v2 from release-2023-11-14). The
  plugin runs as its own process with Grafana's environment, Pod Identity's variables included, unless the
  ``pluginsSkipHostEnvVars`` feature flag is on (grafana/grafana pkg/plugins/manager/pipeline/bootstrap
  SkipHostEnvVarsDecorateFunc; stored copy as above), which this Grafana leaves off.
- kubernetes-sigs/aws-ebs-csi-driver v1.64.0 docs/parameters.md: StorageClass parameters ``type`` (gp3) and
  ``encrypted``; EKS user guide storage/ebs-csi-migration-faq.adoc: a new cluster's default StorageClass is the
  in-tree ``gp2`` one, hence a gp3 class of our own.
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

from infra.facts.versions import AMAZON_PROMETHEUS_PLUGIN_VERSION
from infra.specs import goodput_rules, node_metrics
from infra.specs.dashboards import SIDECAR_LABEL

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
        _node_agent(goodput_rules.NEURON_MONITOR_JOB, node_metrics.NEURON_MONITOR),
        _node_agent(goodput_rules.EFA_EXPORTER_JOB, node_metrics.EFA_EXPORTER),
        _node_agent(goodput_rules.NODE_EXPORTER_JOB, node_metrics.NODE_EXPORTER),
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


# --- monitoring.prometheus: in-cluster -------------------------------------------------------------------------

IN_CLUSTER_PROMETHEUS = "prometheus"  # the Helm release: its server is the Service prometheus-server, port 80
IN_CLUSTER_NAMESPACE = KUBE_STATE_METRICS_NAMESPACE  # beside kube-state-metrics and the dashboards' ConfigMaps
ALERTMANAGER_SERVICE_ACCOUNT = "prometheus-alertmanager"
# The prometheus chart's own scrape jobs (values.yaml ``scrapeConfigs`` at prometheus-29.27.0), each turned off:
# the server scrapes exactly what the managed collector does.
IN_CLUSTER_DEFAULT_JOBS = (
    "prometheus",
    "kubernetes-api-servers",
    "kubernetes-nodes",
    "kubernetes-nodes-cadvisor",
    "kubernetes-service-endpoints",
    "kubernetes-service-endpoints-slow",
    "prometheus-pushgateway",
    "kubernetes-services",
    "kubernetes-pods",
    "kubernetes-pods-slow",
)
GOODPUT_RULE_FILE = "goodput.yml"
EBS_STORAGE_CLASS = "prometheus-gp3"
ALERTMANAGER_VOLUME_GIB = 2  # the alertmanager subchart's default size: its silences and notification log
# Requests and memory limits of the in-cluster pods on the system nodes. The charts set none (prometheus-29.27.0
# values.yaml server.resources and configmapReload.prometheus.resources, alertmanager-1.42.0 resources, grafana
# 12.11.1 resources and sidecar.resources: all ``{}``), which would leave them BestEffort, first to be evicted, and
# invisible to cluster-autoscaler and to the system nodes' fit check (infra/specs/system_capacity.py counts these).
# Estimates, not measured: the server holds every active series in memory (this project's scrape targets make some
# thousands per Trainium node: infra/specs/node_metrics.py), so 1 GiB requested and 2 GiB allowed, above the chart's
# own commented example (512Mi); Alertmanager and the config reloaders at the charts' commented examples; Grafana at
# its documented minimum memory (grafana.com docs v13.2, "Install Grafana": 512 MB), CPU a share, not the core
# that page recommends for a host.
IN_CLUSTER_RESOURCES: dict[str, dict[str, dict[str, str]]] = {
    "prometheus-server": {"requests": {"cpu": "250m", "memory": "1Gi"}, "limits": {"memory": "2Gi"}},
    "prometheus-config-reloader": {"requests": {"cpu": "10m", "memory": "32Mi"}, "limits": {"memory": "64Mi"}},
    "alertmanager": {"requests": {"cpu": "10m", "memory": "32Mi"}, "limits": {"memory": "128Mi"}},
    "grafana": {"requests": {"cpu": "100m", "memory": "512Mi"}, "limits": {"memory": "1Gi"}},
    "grafana-dashboard-sidecar": {"requests": {"cpu": "10m", "memory": "64Mi"}, "limits": {"memory": "128Mi"}},
}
# The oldest blocks go once the data passes this share of the volume, so the write-ahead log and compaction
# always find room.
RETENTION_SIZE_SHARE = 0.8


def ebs_storage_class() -> dict[str, Any]:
    """An encrypted gp3 class through the EBS CSI driver the cluster installs; bound where the pod lands, so the
    volume is made in the system node's zone."""
    return {
        "metadata": {"name": EBS_STORAGE_CLASS},
        "provisioner": "ebs.csi.aws.com",
        "parameters": {"type": "gp3", "encrypted": "true"},
        "volumeBindingMode": "WaitForFirstConsumer",
        "reclaimPolicy": "Delete",
        "allowVolumeExpansion": True,
    }


def in_cluster_scrape() -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(global, scrape_configs) of ``scrape_configuration()``, the managed collector's, taken whole."""
    config = yaml.safe_load(scrape_configuration())
    unknown = set(config) - {"global", "scrape_configs"}
    if unknown:
        raise ValueError(f"scrape_configuration() has sections the chart's prometheus.yml does not carry: {unknown}")
    return config.get("global", {}), config["scrape_configs"]


def alertmanager_config(topic_arn: str, region: str) -> dict[str, Any]:
    """The managed workspace's Alertmanager configuration: the same route and SNS receiver."""
    definition = yaml.safe_load(alertmanager_definition(topic_arn, region))
    return yaml.safe_load(definition["alertmanager_config"])


def in_cluster_prometheus_values(
    topic_arn: str,
    region: str,
    core_node_selector: Mapping[str, str],
    retention_days: int,
    volume_gib: int,
    idle_node_alert_minutes: int,
) -> dict[str, Any]:
    """The prometheus chart's values: the collector's scrape jobs and the workspace's rules and alerts, on the
    system nodes, its data on a gp3 volume; kube-state-metrics comes from its own release, as with ``managed``."""
    scrape_global, scrape_configs = in_cluster_scrape()
    config = alertmanager_config(topic_arn, region)
    return {
        "server": {
            "nodeSelector": dict(core_node_selector),
            "global": {"scrape_timeout": "10s", "evaluation_interval": "1m", **scrape_global},
            "retention": f"{retention_days}d",
            "retentionSize": f"{int(volume_gib * RETENTION_SIZE_SHARE)}GB",
            "persistentVolume": {"enabled": True, "size": f"{volume_gib}Gi", "storageClass": EBS_STORAGE_CLASS},
            "resources": IN_CLUSTER_RESOURCES["prometheus-server"],
        },
        "configmapReload": {"prometheus": {"resources": IN_CLUSTER_RESOURCES["prometheus-config-reloader"]}},
        "scrapeConfigs": {job: {"enabled": False} for job in IN_CLUSTER_DEFAULT_JOBS},
        "serverFiles": {
            "prometheus.yml": {"rule_files": [f"/etc/config/{GOODPUT_RULE_FILE}"], "scrape_configs": scrape_configs},
            GOODPUT_RULE_FILE: yaml.safe_load(goodput_rules.rule_file(region, idle_node_alert_minutes)),
        },
        "alertmanager": {
            "enabled": True,
            "nodeSelector": dict(core_node_selector),
            "serviceAccount": {"create": True, "name": ALERTMANAGER_SERVICE_ACCOUNT},
            "persistence": {"enabled": True, "size": f"{ALERTMANAGER_VOLUME_GIB}Gi", "storageClass": EBS_STORAGE_CLASS},
            "resources": IN_CLUSTER_RESOURCES["alertmanager"],
            "config": {"enabled": True, **config},
        },
        "kube-state-metrics": {"enabled": False},
        "prometheus-node-exporter": {"enabled": False},
        "prometheus-pushgateway": {"enabled": False},
    }


def sns_publish_policy(topic_arn: str) -> dict[str, Any]:
    """What the in-cluster Alertmanager's role may do: publish to the alert topic, nothing else."""
    return {
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Action": ["sns:Publish"], "Resource": topic_arn}],
    }


def in_cluster_prometheus_url() -> str:
    """The server's Service (the chart names it ``<release>-server``, port 80) as Grafana reaches it."""
    return f"http://{IN_CLUSTER_PROMETHEUS}-server.{IN_CLUSTER_NAMESPACE}.svc.cluster.local"


# --- monitoring.grafana: in-cluster ----------------------------------------------------------------------------

GRAFANA = "grafana"  # the Helm release, its Service (port 80) and its service account
GRAFANA_NAMESPACE = KUBE_STATE_METRICS_NAMESPACE
GRAFANA_ADMIN_SECRET = "grafana-admin"
GRAFANA_ADMIN_USER = "admin"
GRAFANA_DATASOURCE = "Prometheus"
AMAZON_PROMETHEUS_PLUGIN = "grafana-amazonprometheus-datasource"


def grafana_datasource_type(workspace: bool) -> str:
    """The type of the data source Grafana reads the ledger through, which the dashboards' ``datasource``
    variable lists: the core Prometheus one for the in-cluster server, the plugin for the managed workspace."""
    return AMAZON_PROMETHEUS_PLUGIN if workspace else "prometheus"


def grafana_datasource(url: str, region: str | None) -> dict[str, Any]:
    """The one Prometheus data source, the default, so each dashboard's ``datasource`` variable picks it.
    ``region`` set: the managed workspace through the plugin, every request signed with SigV4 through the SDK's
    default credentials (the pod's EKS Pod Identity role)."""
    source: dict[str, Any] = {
        "name": GRAFANA_DATASOURCE,
        "uid": "prometheus",
        "type": grafana_datasource_type(workspace=region is not None),
        "access": "proxy",
        "url": url,
        "isDefault": True,
        "editable": False,
        "jsonData": {"httpMethod": "POST"},
    }
    if region is not None:
        source["jsonData"].update({"sigV4Auth": True, "sigV4AuthType": "default", "sigV4Region": region})
    return source


def grafana_values(
    datasource: Mapping[str, Any], core_node_selector: Mapping[str, str], dashboards_namespace: str
) -> dict[str, Any]:
    """The grafana chart's values: on the system nodes, no Ingress (reached by ``kubectl port-forward``), the
    admin password from GRAFANA_ADMIN_SECRET, the dashboard sidecar watching the dashboards' namespace, and the
    data source's plugin when it is one (``<id>@<version>``, installed from grafana.com at every start)."""
    ((label, value),) = SIDECAR_LABEL.items()
    plugins = (
        [f"{AMAZON_PROMETHEUS_PLUGIN}@{AMAZON_PROMETHEUS_PLUGIN_VERSION}"]
        if datasource["type"] == AMAZON_PROMETHEUS_PLUGIN
        else []
    )
    return {
        "plugins": plugins,
        "nodeSelector": dict(core_node_selector),
        "resources": IN_CLUSTER_RESOURCES["grafana"],
        "serviceAccount": {"create": True, "name": GRAFANA},
        "service": {"type": "ClusterIP"},
        "ingress": {"enabled": False},
        "admin": {"existingSecret": GRAFANA_ADMIN_SECRET, "userKey": "admin-user", "passwordKey": "admin-password"},
        "sidecar": {
            "dashboards": {
                "enabled": True,
                "label": label,
                "labelValue": value,
                "searchNamespace": dashboards_namespace,
            },
            "resources": IN_CLUSTER_RESOURCES["grafana-dashboard-sidecar"],
        },
        "datasources": {"datasources.yaml": {"apiVersion": 1, "datasources": [dict(datasource)]}},
        "grafana.ini": {
            "analytics": {"check_for_updates": False, "reporting_enabled": False},
            # Grafana preinstalls a list of its own plugins with no version (the core data sources moved out of
            # it, the core `prometheus` one dev reads through among them) and, with this key on (its default),
            # replaces each at every start with grafana.com's newest: what runs would then change with no change
            # here. Off, a plugin already there stays as shipped; the pinned plugin above has its version anyway.
            "plugins": {"preinstall_auto_update": False},
        },
    }
