"""Container and Neuron metrics: the CloudWatch Observability add-on, a dashboard and alarms; and, with
monitoring.prometheus, the Prometheus path of the goodput ledger and its alerts (ManagedPrometheus, or
InClusterPrometheus), with monitoring.grafana a Grafana showing its dashboards (Grafana).

The add-on runs the CloudWatch agent and, on Trainium/Inferentia nodes, neuron-monitor, so
NeuronCore utilisation lands in CloudWatch Container Insights without exec'ing into a node.
The same dashboard shows the training namespaces' container restarts and failed pods: a hung
run ended by its liveness probe (workloads/resumable.py) is a container restart (MPIJob and
Ray workers restart in place) or a failed pod (Volcano pods are ``restartPolicy: Never``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s
import pulumi_random as random

from infra.components.context import ClusterContext
from infra.components.iam import managed_policy, pod_identity_role
from infra.components.kube import CORE_NODE_SELECTOR, helm_release
from infra.config.models import MonitoringConfig
from infra.facts.addons import CLOUDWATCH_OBSERVABILITY
from infra.facts.versions import CHARTS, NEURON_MONITOR_IMAGE, PYTHON_SLIM_IMAGE
from infra.specs import dashboards, goodput_rules, monitoring, node_metrics

AGENT_NAMESPACE = "amazon-cloudwatch"
AGENT_SERVICE_ACCOUNT = "cloudwatch-agent"
NEURON_METRICS = (
    ("NeuronCore utilisation (%)", "node_neuroncore_utilization"),
    ("NeuronCore memory used (bytes)", "node_neuroncore_memory_usage_total"),
    ("Neuron device ECC events", "node_neurondevice_hw_ecc_events_total"),
)


def metric_search(metric: str, cluster_name: str) -> str:
    """A CloudWatch SEARCH over the cluster-wide series of a Container Insights metric.

    A schema matches only series with exactly its dimensions. The agent publishes each
    Neuron metric with the dimension sets [ClusterName], [ClusterName, UltraServer],
    [ClusterName, InstanceId, NodeName], ... (aws/amazon-cloudwatch-agent,
    translator/translate/otel/exporter/awsemf/kubernetes.go, v1.300071.0): the bare
    {ContainerInsights} schema matches none of them; {ContainerInsights,ClusterName} matches
    the per-cluster aggregate.
    """
    return f"SEARCH('{{ContainerInsights,ClusterName}} MetricName=\"{metric}\" ClusterName=\"{cluster_name}\"', 'Average', 60)"


# (widget title, metric, statistic). Restarts are the pod's cumulative count, so the worst pod
# (MAX) is the number of times it was restarted; pod_status_failed is 1 per failed pod a minute.
TRAINING_HEALTH_METRICS = (
    (
        "Training container restarts (hung runs ended by the liveness probe, crashes)",
        "pod_number_of_container_restarts",
        "MAX",
    ),
    ("Failed training pods", "pod_status_failed", "SUM"),
)
# One alarm per training namespace and metric (an alarm holds one Metrics Insights query, MAX over
# the namespace: any pod). Both count every pod of the namespace: the dimension sets have no
# label or owner to tell training pods from TensorBoard or the gang watchdog (see
# namespace_query), and Metrics Insights cannot match pod-name patterns with `=` alone.
TRAINING_ALARMS = (
    (
        "training-restarts",
        "pod_number_of_container_restarts",
        "A container in training namespace {ns} restarted (any pod there: training, TensorBoard, the gang "
        "watchdog): an NxD Training or Ray run hung and ended by its liveness probe, or a crash (kubectl describe pod shows which).",
    ),
    (
        "training-pods-failed",
        "pod_status_failed",
        "A pod in training namespace {ns} failed (any pod there): a BERT (Volcano, restartPolicy Never) run hung and "
        "ended by its liveness probe, a crash, or a job that ran out of retries (kubectl get pods, kubectl describe vcjob).",
    ),
)


def namespace_query(metric: str, statistic: str, cluster_name: str, namespace: str, per_pod: bool = True) -> str:
    """A CloudWatch Metrics Insights query over one Kubernetes namespace's pod series.

    With enhanced observability (the add-on's default agent config) the agent publishes
    pod_number_of_container_restarts and pod_status_failed with the dimension sets
    [PodName, Namespace, ClusterName], [ClusterName], [FullPodName, PodName, Namespace,
    ClusterName] and [Service, Namespace, ClusterName] -- none is [ClusterName, Namespace]
    (aws/amazon-cloudwatch-agent translator/translate/otel/exporter/awsemf/kubernetes.go
    getPodMetricDeclarations, v1.300058.0 to v1.300071.0). SCHEMA matches exactly one set, so
    each pod is counted once. Not a SEARCH: there ``Namespace="x"`` names the CloudWatch
    namespace, not the dimension (CloudWatch user guide, search-expression-syntax), and an
    alarm cannot use one. The label key is double-quoted, which Metrics Insights allows for any
    label key and requires for a reserved word (user guide,
    cloudwatch-metrics-insights-querylanguage). Only ``=`` and ``AND``, the operators every
    Metrics Insights release supports: one query per training namespace.
    """
    query = (
        f'SELECT {statistic}({metric}) FROM SCHEMA(ContainerInsights, ClusterName, "Namespace", PodName) '
        f"WHERE ClusterName = '{cluster_name}' AND \"Namespace\" = '{namespace}'"
    )
    return f"{query} GROUP BY PodName" if per_pod else query


def dashboard_body(cluster_name: str, region: str, training_namespaces: Sequence[str] = ()) -> str:
    """NeuronCore widgets, then one restarts and one failed-pods widget over the training namespaces."""

    def widget(i: int, title: str, expressions: list[dict[str, Any]]) -> dict[str, Any]:
        return {
            "type": "metric",
            "x": 0,
            "y": 6 * i,
            "width": 24,
            "height": 6,
            "properties": {
                "title": title,
                "region": region,
                "view": "timeSeries",
                "period": 60,
                "metrics": [[e] for e in expressions],
            },
        }

    panels = [
        (title, [{"expression": metric_search(metric, cluster_name), "id": f"m{i}"}])
        for i, (title, metric) in enumerate(NEURON_METRICS)
    ]
    if training_namespaces:
        panels += [
            (
                title,
                [
                    {"expression": namespace_query(metric, statistic, cluster_name, ns), "id": f"h{i}n{j}", "label": ns}
                    for j, ns in enumerate(training_namespaces)
                ],
            )
            for i, (title, metric, statistic) in enumerate(TRAINING_HEALTH_METRICS)
        ]
    return json.dumps({"widgets": [widget(i, title, expressions) for i, (title, expressions) in enumerate(panels)]})


def training_alarm_name(cluster_name: str, namespace: str, kind: str) -> str:
    return f"{cluster_name}-{namespace}-{kind}"


@dataclass
class ObservabilityArgs:
    addon_build: str
    addon_after: list[pulumi.Resource]
    """What the add-on waits for besides its role (nodes for its agents to run on)."""
    training_namespaces: list[str] = field(default_factory=list)


class Observability(pulumi.ComponentResource):
    dashboard_name: pulumi.Output[str]

    def __init__(
        self, name: str, ctx: ClusterContext, args: ObservabilityArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("trainium:infra:Observability", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        role, permissions = pod_identity_role(
            f"{name}-cloudwatch-agent",
            description="CloudWatch agent and neuron-monitor: publish metrics and logs",
            parent=self,
            cluster=ctx,
            service_account=(AGENT_NAMESPACE, AGENT_SERVICE_ACCOUNT),
            managed_policy_arns=(managed_policy(ctx.partition, "CloudWatchAgentServerPolicy"),),
        )
        aws.eks.Addon(
            f"{name}-{CLOUDWATCH_OBSERVABILITY}",
            cluster_name=ctx.cluster_name_output,
            addon_name=CLOUDWATCH_OBSERVABILITY,
            addon_version=args.addon_build,
            resolve_conflicts_on_create="OVERWRITE",
            resolve_conflicts_on_update="OVERWRITE",
            pod_identity_associations=[
                aws.eks.AddonPodIdentityAssociationArgs(role_arn=role.arn, service_account=AGENT_SERVICE_ACCOUNT)
            ],
            tags=ctx.tags,
            opts=pulumi.ResourceOptions(parent=self, depends_on=[*permissions, *args.addon_after]),
        )
        dashboard = aws.cloudwatch.Dashboard(
            f"{name}-neuron",
            dashboard_name=f"{ctx.cluster_name}-neuron",
            dashboard_body=dashboard_body(ctx.cluster_name, ctx.region, args.training_namespaces),
            opts=child,
        )
        for namespace in args.training_namespaces:
            for kind, metric, description in TRAINING_ALARMS:
                # No actions: the alarm state is what the dashboard and `aws cloudwatch
                # describe-alarms` show; a team subscribes its own topic. It stays in ALARM while a
                # restarted or failed pod exists and clears when the pod is replaced.
                aws.cloudwatch.MetricAlarm(
                    f"{name}-{namespace}-{kind}",
                    name=training_alarm_name(ctx.cluster_name, namespace, kind),
                    alarm_description=description.format(ns=namespace),
                    metric_queries=[
                        aws.cloudwatch.MetricAlarmMetricQueryArgs(
                            id="pods",
                            expression=namespace_query(metric, "MAX", ctx.cluster_name, namespace, per_pod=False),
                            period=60,
                            return_data=True,
                        )
                    ],
                    comparison_operator="GreaterThanThreshold",
                    threshold=0,
                    evaluation_periods=1,
                    treat_missing_data="notBreaching",
                    tags=ctx.tags,
                    opts=child,
                )
        self.dashboard_name = dashboard.dashboard_name
        self.register_outputs({"dashboardName": self.dashboard_name})


def alert_topic(
    name: str,
    ctx: ClusterContext,
    settings: MonitoringConfig,
    parent: pulumi.Resource,
    topic_policy: Callable[[str], pulumi.Input[str]] | None = None,
) -> pulumi.Output[str]:
    """The topic the alerts go to: ``alertTopicArn``, or the stack's own with the listed addresses subscribed.
    ``topic_policy`` (topic ARN -> policy JSON) lets a service publish (AMP's Alertmanager); an in-cluster
    Alertmanager needs none: its role's own policy allows the publish in this account."""
    if settings.alert_topic_arn is not None:
        return pulumi.Output.from_input(settings.alert_topic_arn)
    child = pulumi.ResourceOptions(parent=parent)
    topic = aws.sns.Topic(f"{name}-alerts", name=f"{ctx.cluster_name}-training-alerts", tags=ctx.tags, opts=child)
    if topic_policy is not None:
        aws.sns.TopicPolicy(f"{name}-alerts-policy", arn=topic.arn, policy=topic.arn.apply(topic_policy), opts=child)
    # An email subscription stays pending until its address confirms it (SNS developer guide); the
    # topic's deletion removes it whatever its state (pulumi-aws 7.51.1 sns.TopicSubscription).
    # Named by the address, not its place in the list: removing one address must not replace
    # (and so unsubscribe) the others.
    for address in settings.alert_emails:
        aws.sns.TopicSubscription(
            f"{name}-alerts-email-{monitoring.address_key(address)}",
            topic=topic.arn,
            protocol="email",
            endpoint=address,
            opts=child,
        )
    return topic.arn


def dashboard_config_maps(name: str, opts: pulumi.ResourceOptions, *, workspace: bool) -> None:
    """The fleet, job and cost dashboards, for a Grafana whose dashboard sidecar watches their namespace, each
    listing the data sources of the type that reads this Prometheus (``workspace``: the managed one)."""
    datasource_type = monitoring.grafana_datasource_type(workspace)
    for uid in dashboards.DASHBOARDS:
        k8s.core.v1.ConfigMap(
            f"{name}-dashboard-{uid}",
            metadata={
                "name": f"{uid}-dashboard",
                "namespace": monitoring.KUBE_STATE_METRICS_NAMESPACE,
                "labels": dashboards.SIDECAR_LABEL,
            },
            data={f"{uid}.json": dashboards.dashboard_json(uid, datasource_type)},
            opts=opts,
        )


def kube_state_metrics(opts: pulumi.ResourceOptions) -> k8s.helm.v3.Release:
    """kube-state-metrics on the system nodes, serving what the goodput rules read."""
    return helm_release(
        monitoring.KUBE_STATE_METRICS,
        CHARTS[monitoring.KUBE_STATE_METRICS],
        monitoring.KUBE_STATE_METRICS_NAMESPACE,
        monitoring.kube_state_metrics_values(CORE_NODE_SELECTOR),
        opts,
    )


_NODE_AGENT_KINDS = {"ConfigMap": k8s.core.v1.ConfigMap, "DaemonSet": k8s.apps.v1.DaemonSet}
EFA_EXPORTER_SCRIPT = Path(__file__).resolve().parents[1] / "node_agents" / node_metrics.EFA_EXPORTER_FILE


class NodeMetrics(pulumi.ComponentResource):
    """monitoring.prometheus not off: the node agents any Prometheus of the stack scrapes (infra/specs/node_metrics.py
    says what each is and where it was read): neuron-monitor on the Trainium nodes the device plugin serves, the
    EFA exporter on the EFA nodes, node-exporter on every node, all in kube-system. The two public.ecr.aws images
    come through the cluster's pull-through cache (infra/specs/image_cache.py); node-exporter's is quay.io's."""

    def __init__(
        self,
        name: str,
        ctx: ClusterContext,
        through_cache: Callable[[str], str],
        after: Sequence[pulumi.Resource] = (),
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        """``through_cache``: a public.ecr.aws image as nodes pull it (Registries.through_cache); ``after``: the
        cache's rule and repositories, and the system nodes."""
        super().__init__("trainium:infra:NodeMetrics", name, None, opts)
        manifests = [
            *node_metrics.efa_exporter(through_cache(PYTHON_SLIM_IMAGE), EFA_EXPORTER_SCRIPT.read_text()),
            node_metrics.neuron_monitor(through_cache(NEURON_MONITOR_IMAGE)),
        ]
        declared: list[pulumi.Resource] = list(after)
        for manifest in manifests:
            kind, body = manifest["kind"], {k: v for k, v in manifest.items() if k not in ("apiVersion", "kind")}
            # Each after the ones before: the EFA exporter's DaemonSet mounts its ConfigMap.
            declared.append(
                _NODE_AGENT_KINDS[kind](
                    f"{name}-{kind.lower()}-{manifest['metadata']['name']}",
                    **body,
                    opts=pulumi.ResourceOptions(parent=self, provider=ctx.kubernetes, depends_on=list(declared)),
                )
            )
        helm_release(
            node_metrics.NODE_EXPORTER,
            CHARTS[node_metrics.NODE_EXPORTER],
            node_metrics.NAMESPACE,
            node_metrics.node_exporter_values(),
            pulumi.ResourceOptions(parent=self, provider=ctx.kubernetes, depends_on=list(after)),
        )
        self.register_outputs({})


@dataclass
class PrometheusArgs:
    settings: MonitoringConfig
    subnet_ids: list[pulumi.Output[str]]
    """Where the collector puts its network interfaces: subnets of the cluster's VPC in two zones or more."""
    security_group_ids: list[pulumi.Input[str]]
    """The cluster security group: the collector reaches the API endpoint and the pods through it."""
    after: list[pulumi.Resource] = field(default_factory=list)
    """What kube-state-metrics waits for (the system nodes it runs on)."""


class ManagedPrometheus(pulumi.ComponentResource):
    """monitoring.prometheus: managed. An Amazon Managed Service for Prometheus workspace holding the goodput
    ledger and its alerts (infra/specs/goodput_rules.py), an AWS managed collector (no agent to run or
    upgrade in the cluster) scraping kube-state-metrics and the progress exporters (infra/specs/monitoring.py
    says what each piece is and where it was read), the workspace's Alertmanager sending to SNS, and the
    fleet, job and cost dashboards (infra/specs/dashboards.py) as ConfigMaps for a Grafana's sidecar."""

    workspace_arn: pulumi.Output[str]
    query_url: pulumi.Output[str]
    """The workspace's Prometheus-compatible endpoint (``.../workspaces/<id>/``), which Grafana queries."""
    alert_topic_arn: pulumi.Output[str]

    def __init__(
        self, name: str, ctx: ClusterContext, args: PrometheusArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("trainium:infra:ManagedPrometheus", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        workspace = aws.amp.Workspace(
            f"{name}-workspace",
            alias=f"{ctx.cluster_name}-training",
            tags={**ctx.tags, monitoring.AGENTLESS_TAG: ""},
            opts=child,
        )
        aws.amp.RuleGroupNamespace(
            f"{name}-goodput-rules",
            name="goodput",
            workspace_id=workspace.id,
            data=goodput_rules.rule_file(ctx.region, args.settings.idle_node_alert_minutes),
            tags=ctx.tags,
            opts=child,
        )
        topic_arn = alert_topic(
            name,
            ctx,
            args.settings,
            self,
            lambda arn: workspace.arn.apply(lambda w: json.dumps(monitoring.topic_policy(arn, w, ctx.account_id))),
        )
        aws.amp.AlertManagerDefinition(
            f"{name}-alertmanager",
            workspace_id=workspace.id,
            definition=topic_arn.apply(lambda arn: monitoring.alertmanager_definition(arn, ctx.region)),
            opts=child,
        )
        kube = pulumi.ResourceOptions(parent=self, provider=ctx.kubernetes)
        kube_state_metrics(pulumi.ResourceOptions(parent=self, provider=ctx.kubernetes, depends_on=args.after))
        role, binding = monitoring.collector_rbac()
        cluster_role = k8s.rbac.v1.ClusterRole(
            f"{name}-collector-role", metadata=role["metadata"], rules=role["rules"], opts=kube
        )
        k8s.rbac.v1.ClusterRoleBinding(
            f"{name}-collector-binding",
            metadata=binding["metadata"],
            subjects=binding["subjects"],
            role_ref=binding["roleRef"],
            opts=pulumi.ResourceOptions(parent=self, provider=ctx.kubernetes, depends_on=[cluster_role]),
        )
        scraper = aws.amp.Scraper(
            f"{name}-collector",
            alias=f"{ctx.cluster_name}-training",
            source=aws.amp.ScraperSourceArgs(
                eks=aws.amp.ScraperSourceEksArgs(
                    cluster_arn=ctx.cluster_arn,
                    subnet_ids=args.subnet_ids,
                    security_group_ids=args.security_group_ids,
                )
            ),
            destination=aws.amp.ScraperDestinationArgs(
                amp=aws.amp.ScraperDestinationAmpArgs(workspace_arn=workspace.arn)
            ),
            scrape_configuration=monitoring.scrape_configuration(),
            tags=ctx.tags,
            opts=child,
        )
        aws.eks.AccessEntry(
            f"{name}-collector-access",
            cluster_name=ctx.cluster_name_output,
            principal_arn=scraper.role_arn.apply(monitoring.eks_principal),
            user_name=monitoring.COLLECTOR_USER,
            type="STANDARD",
            tags=ctx.tags,
            opts=child,
        )
        dashboard_config_maps(name, kube, workspace=True)
        self.workspace_arn = workspace.arn
        self.query_url = workspace.prometheus_endpoint
        self.alert_topic_arn = topic_arn
        self.register_outputs({"workspaceArn": workspace.arn, "alertTopicArn": topic_arn})


@dataclass
class InClusterPrometheusArgs:
    settings: MonitoringConfig
    after: list[pulumi.Resource] = field(default_factory=list)
    """What the releases wait for: the system nodes they run on and the EBS CSI driver that makes their volumes."""


class InClusterPrometheus(pulumi.ComponentResource):
    """monitoring.prometheus: in-cluster. The prometheus chart's server and Alertmanager on the system nodes, with
    the managed collector's scrape jobs, the goodput rules and alerts, and the same route to SNS (its Alertmanager
    signs with its pod's EKS Pod Identity role); kube-state-metrics and the dashboards' ConfigMaps as ``managed``
    has them (infra/specs/monitoring.py)."""

    query_url: str
    alert_topic_arn: pulumi.Output[str]

    def __init__(
        self, name: str, ctx: ClusterContext, args: InClusterPrometheusArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("trainium:infra:InClusterPrometheus", name, None, opts)
        settings = args.settings
        kube = pulumi.ResourceOptions(parent=self, provider=ctx.kubernetes)
        topic_arn = alert_topic(name, ctx, settings, self)
        _, publish = pod_identity_role(
            f"{name}-alertmanager",
            description="The in-cluster Alertmanager: publish the training alerts to their SNS topic",
            parent=self,
            cluster=ctx,
            service_account=(monitoring.IN_CLUSTER_NAMESPACE, monitoring.ALERTMANAGER_SERVICE_ACCOUNT),
            inline_policy=topic_arn.apply(lambda arn: json.dumps(monitoring.sns_publish_policy(arn))),
            associate_in=ctx.cluster_name_output,
        )
        state = kube_state_metrics(pulumi.ResourceOptions(parent=self, provider=ctx.kubernetes, depends_on=args.after))
        storage_class = monitoring.ebs_storage_class()
        volumes = k8s.storage.v1.StorageClass(
            f"{name}-{monitoring.EBS_STORAGE_CLASS}",
            metadata=storage_class["metadata"],
            provisioner=storage_class["provisioner"],
            parameters=storage_class["parameters"],
            volume_binding_mode=storage_class["volumeBindingMode"],
            reclaim_policy=storage_class["reclaimPolicy"],
            allow_volume_expansion=storage_class["allowVolumeExpansion"],
            opts=kube,
        )
        helm_release(
            monitoring.IN_CLUSTER_PROMETHEUS,
            CHARTS[monitoring.IN_CLUSTER_PROMETHEUS],
            monitoring.IN_CLUSTER_NAMESPACE,
            topic_arn.apply(
                lambda arn: monitoring.in_cluster_prometheus_values(
                    arn,
                    ctx.region,
                    CORE_NODE_SELECTOR,
                    settings.retention_days,
                    settings.volume_gib,
                    settings.idle_node_alert_minutes,
                )
            ),
            pulumi.ResourceOptions(
                parent=self, provider=ctx.kubernetes, depends_on=[*args.after, *publish, state, volumes]
            ),
        )
        dashboard_config_maps(name, kube, workspace=False)
        self.query_url = monitoring.in_cluster_prometheus_url()
        self.alert_topic_arn = topic_arn
        self.register_outputs({"alertTopicArn": topic_arn})


@dataclass
class GrafanaArgs:
    query_url: pulumi.Input[str]
    """The Prometheus the dashboards read."""
    sigv4_region: str | None
    """Set for the managed workspace: Grafana reads it through the Amazon Managed Service for Prometheus plugin,
    which signs its queries with the pod's role (AmazonPrometheusQueryAccess)."""
    after: list[pulumi.Resource] = field(default_factory=list)


class Grafana(pulumi.ComponentResource):
    """monitoring.grafana: in-cluster. The grafana chart on the system nodes with the dashboards' sidecar on and one
    provisioned Prometheus data source (the plugin's type for the managed workspace, which Grafana installs from
    grafana.com at start); its Service is ClusterIP only (``kubectl port-forward``), its admin password generated
    into a Secret (infra/specs/monitoring.py)."""

    def __init__(
        self, name: str, ctx: ClusterContext, args: GrafanaArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("trainium:infra:Grafana", name, None, opts)
        kube = pulumi.ResourceOptions(parent=self, provider=ctx.kubernetes)
        ready: list[pulumi.Resource] = []
        if args.sigv4_region is not None:
            _, ready = pod_identity_role(
                f"{name}-query",
                description="Grafana: query the Amazon Managed Service for Prometheus workspace",
                parent=self,
                cluster=ctx,
                service_account=(monitoring.GRAFANA_NAMESPACE, monitoring.GRAFANA),
                managed_policy_arns=(managed_policy(ctx.partition, "AmazonPrometheusQueryAccess"),),
                associate_in=ctx.cluster_name_output,
            )
        password = random.RandomPassword(
            f"{name}-admin-password", length=32, special=False, opts=pulumi.ResourceOptions(parent=self)
        )
        secret = k8s.core.v1.Secret(
            f"{name}-admin",
            metadata={"name": monitoring.GRAFANA_ADMIN_SECRET, "namespace": monitoring.GRAFANA_NAMESPACE},
            string_data={"admin-user": monitoring.GRAFANA_ADMIN_USER, "admin-password": password.result},
            opts=kube,
        )
        helm_release(
            monitoring.GRAFANA,
            CHARTS[monitoring.GRAFANA],
            monitoring.GRAFANA_NAMESPACE,
            pulumi.Output.from_input(args.query_url).apply(
                lambda url: monitoring.grafana_values(
                    monitoring.grafana_datasource(url, args.sigv4_region),
                    CORE_NODE_SELECTOR,
                    monitoring.KUBE_STATE_METRICS_NAMESPACE,
                )
            ),
            pulumi.ResourceOptions(parent=self, provider=ctx.kubernetes, depends_on=[*args.after, *ready, secret]),
        )
        self.register_outputs({})
