"""Container and Neuron metrics: the CloudWatch Observability add-on and a NeuronCore dashboard.

The add-on runs the CloudWatch agent and, on Trainium/Inferentia nodes, neuron-monitor, so
NeuronCore utilisation lands in CloudWatch Container Insights without exec'ing into a node.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import pulumi
import pulumi_aws as aws

from infra.components.iam import PodIdentityScope, managed_policy, pod_identity_role
from infra.facts.addons import CLOUDWATCH_OBSERVABILITY

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


def dashboard_body(cluster_name: str, region: str) -> str:
    def widget(i: int, title: str, metric: str) -> dict:
        search = metric_search(metric, cluster_name)
        return {
            "type": "metric",
            "x": 0,
            "y": 6 * i,
            "width": 24,
            "height": 6,
            "properties": {"title": title, "region": region, "view": "timeSeries",
                           "metrics": [[{"expression": search, "id": f"m{i}"}]]},
        }

    return json.dumps({"widgets": [widget(i, title, metric) for i, (title, metric) in enumerate(NEURON_METRICS)]})


@dataclass
class ObservabilityArgs:
    cluster_name: pulumi.Input[str]
    cluster_name_text: str
    region: str
    partition: str
    account_id: str
    addon_build: str
    depends_on: list[pulumi.Resource] = field(default_factory=list)
    tags: dict[str, str] = field(default_factory=dict)


class Observability(pulumi.ComponentResource):
    dashboard_name: pulumi.Output[str]

    def __init__(self, name: str, args: ObservabilityArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("trainium:infra:Observability", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        role, permissions = pod_identity_role(
            f"{name}-cloudwatch-agent",
            description="CloudWatch agent and neuron-monitor: publish metrics and logs",
            parent=self,
            tags=args.tags,
            scope=PodIdentityScope(args.partition, args.region, args.account_id, args.cluster_name_text),
            service_account=(AGENT_NAMESPACE, AGENT_SERVICE_ACCOUNT),
            managed_policy_arns=(managed_policy(args.partition, "CloudWatchAgentServerPolicy"),),
        )
        aws.eks.Addon(
            f"{name}-{CLOUDWATCH_OBSERVABILITY}",
            cluster_name=args.cluster_name,
            addon_name=CLOUDWATCH_OBSERVABILITY,
            addon_version=args.addon_build,
            resolve_conflicts_on_create="OVERWRITE",
            resolve_conflicts_on_update="OVERWRITE",
            pod_identity_associations=[
                aws.eks.AddonPodIdentityAssociationArgs(role_arn=role.arn, service_account=AGENT_SERVICE_ACCOUNT)
            ],
            tags=args.tags,
            opts=pulumi.ResourceOptions(parent=self, depends_on=[*permissions, *args.depends_on]),
        )
        dashboard = aws.cloudwatch.Dashboard(
            f"{name}-neuron",
            dashboard_name=f"{args.cluster_name_text}-neuron",
            dashboard_body=dashboard_body(args.cluster_name_text, args.region),
            opts=child,
        )
        self.dashboard_name = dashboard.dashboard_name
        self.register_outputs({"dashboardName": self.dashboard_name})
