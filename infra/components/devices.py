"""Accelerator device plugins: Neuron (devices, cores, health and recovery) and EFA."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from infra.components.context import ClusterContext
from infra.components.kube import BURN_IN_TOLERATION, NEURON_TOLERATION, helm_release
from infra.facts.versions import CHARTS, EFA_DEVICE_PLUGIN_REPOSITORY, EKS_ADDON_REGISTRIES
from infra.specs import image_cache
from infra.specs.dra_objects import (
    DraGroup,
    device_plugin_affinity,
    dranet_values,
    neuron_dra_values,
    whole_node_claim_template,
)
from infra.specs.node_template import EFA_PRESENT_LABEL
from infra.specs.pod_security import controller_namespace_labels

EFA_NODE_SELECTOR = {EFA_PRESENT_LABEL: "true"}
# The Neuron chart puts its node problem detector here (npd.namespaceOverride) and has no
# Namespace template for it (aws-neuron/neuron-helm-charts, charts/neuron-helm-chart 1.9.0,
# templates/npd/*.yaml and values.yaml), so the namespace is ours to create.
NPD_NAMESPACE = "neuron-healthcheck-system"
NPD_SERVICE_ACCOUNT = "node-problem-detector"
# Where the recovery agent reports what it did (Neuron docs, problem-detector-irsa).
NPD_METRICS_NAMESPACE = "NeuronHealthCheck"


def neuron_values(scheduler_extension: bool, recovery_role_arn: str | None = None) -> dict[str, Any]:
    # Tolerations spelled out (the chart's defaults include the Neuron taint today) so a
    # chart upgrade that changes them cannot silently strand the plugins off Trainium nodes.
    npd: dict[str, Any] = {
        "enabled": True,
        "namespaceOverride": NPD_NAMESPACE,
        "tolerations": [NEURON_TOLERATION, BURN_IN_TOLERATION, {"operator": "Exists", "effect": "NoExecute"}],
        # Off: the recovery sidecar only watches ("monitor only"). On: it marks an instance with
        # uncorrectable Neuron errors unhealthy in its Auto Scaling group, which replaces it.
        "nodeRecovery": {"enabled": recovery_role_arn is not None},
    }
    if recovery_role_arn is not None:
        # The chart's own way of giving the agent credentials (IRSA on its service account).
        npd["serviceAccount"] = {
            "create": True,
            "name": NPD_SERVICE_ACCOUNT,
            "annotations": {"eks.amazonaws.com/role-arn": recovery_role_arn},
        }
    return {
        "devicePlugin": {
            "enabled": True,
            "tolerations": [{"key": "CriticalAddonsOnly", "operator": "Exists"}, NEURON_TOLERATION, BURN_IN_TOLERATION],
            # Never on a node whose devices the DRA driver allocates (infra/specs/dra_objects.py).
            "affinity": device_plugin_affinity(),
        },
        # Reports Neuron hardware errors as node conditions so broken nodes are seen and replaced.
        "npd": npd,
        # The chart refuses the scheduler extension without the device plugin, which is always on here.
        "scheduler": {"enabled": scheduler_extension},
    }


def cached(values: dict[str, Any], ctx: ClusterContext) -> dict[str, Any]:
    """A Neuron chart release's values with its node images pulled through the cluster's pull-through cache
    (infra/specs/image_cache.py NEURON_CHART_IMAGES): only for the components the release turns on, whose
    values it already carries."""

    # By component: the problem detector's recovery sidecar runs whether or not it may act
    # (npd.nodeRecovery.enabled only sets its ENABLE_RECOVERY), so its image is pulled with the detector's.
    images = {
        path: image
        for path, image in image_cache.NEURON_CHART_IMAGES.items()
        if (values.get(path[0]) or {}).get("enabled")
    }
    repositories = image_cache.chart_repositories(images, ctx.partition, ctx.region, ctx.account_id, ctx.cluster_name)
    return image_cache.with_repositories(values, repositories)


def efa_image_repository(region: str) -> str:
    """The plugin's image in the cluster's own region: the chart defaults to the us-west-2 copy
    (eks-charts stable/aws-efa-k8s-device-plugin v0.5.30, values.yaml image.repository; the
    DaemonSet's image is `{{ .Values.image.repository }}:{{ .Values.image.tag | default
    .Chart.AppVersion }}`), a cross-region pull through the NAT gateway for a critical DaemonSet.
    Config validation refuses a region missing from the table before anything is declared."""
    return f"{EKS_ADDON_REGISTRIES[region]}/{EFA_DEVICE_PLUGIN_REPOSITORY}"


def efa_values(region: str) -> dict[str, Any]:
    # The chart's default tolerations are empty: without one it never lands on Trainium nodes.
    return {
        "image": {"repository": efa_image_repository(region)},
        "nodeSelector": EFA_NODE_SELECTOR,
        "tolerations": [NEURON_TOLERATION, BURN_IN_TOLERATION],
    }


def node_recovery_policy(partition: str, region: str, account_id: str, cluster_name: str) -> str:
    """What the Neuron recovery agent calls (Neuron docs, deploy/infrastructure/
    problem-detector-irsa.rst), limited to this cluster's Auto Scaling groups."""
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Sid": "MarkOwnInstancesUnhealthy",
                    "Effect": "Allow",
                    "Action": ["autoscaling:SetInstanceHealth"],
                    "Resource": f"arn:{partition}:autoscaling:{region}:{account_id}:autoScalingGroup:*:autoScalingGroupName/*",
                    # The tag EKS puts on its node groups' Auto Scaling groups, which the
                    # cluster-autoscaler policy scopes by too.
                    "Condition": {
                        "StringEquals": {f"aws:ResourceTag/k8s.io/cluster-autoscaler/{cluster_name}": "owned"}
                    },
                },
                {
                    "Sid": "Describe",
                    "Effect": "Allow",
                    "Action": ["autoscaling:DescribeAutoScalingInstances", "ec2:DescribeInstances"],
                    "Resource": "*",
                },
                {
                    "Sid": "ReportMetrics",
                    "Effect": "Allow",
                    "Action": ["cloudwatch:PutMetricData"],
                    "Resource": "*",
                    "Condition": {"StringEquals": {"cloudwatch:namespace": NPD_METRICS_NAMESPACE}},
                },
            ],
        }
    )


def irsa_trust_policy(oidc_provider_arn: str, oidc_provider_url: str, namespace: str, service_account: str) -> str:
    issuer = oidc_provider_url.removeprefix("https://")
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Effect": "Allow",
                    "Principal": {"Federated": oidc_provider_arn},
                    "Action": "sts:AssumeRoleWithWebIdentity",
                    "Condition": {
                        "StringEquals": {
                            f"{issuer}:sub": f"system:serviceaccount:{namespace}:{service_account}",
                            f"{issuer}:aud": "sts.amazonaws.com",
                        }
                    },
                }
            ],
        }
    )


@dataclass
class NodeRecoveryArgs:
    """The cluster's IRSA identity provider, which the recovery agent's role trusts."""

    oidc_provider_arn: pulumi.Input[str]
    oidc_provider_url: pulumi.Input[str]


@dataclass
class DevicePluginsArgs:
    neuron: bool
    efa: bool
    neuron_scheduler_extension: bool
    # None: the node problem detector only watches.
    node_recovery: NodeRecoveryArgs | None = None
    dra_groups: list[DraGroup] = field(default_factory=list)
    """The `deviceAllocation: dra` groups: with any, the Neuron chart's DRA release (and aws-dranet when one
    has EFA), and each group's whole-node claim template in every namespace of ``claim_namespaces``."""
    claim_namespaces: dict[str, list[pulumi.Resource]] = field(default_factory=dict)
    """Namespace -> what an object in it waits for (the namespace itself, where this program creates it)."""
    image_cache: list[pulumi.Resource] = field(default_factory=list)
    """The pull-through cache rule and its repositories, which the chart's images are pulled through."""


class DevicePlugins(pulumi.ComponentResource):
    def __init__(
        self, name: str, ctx: ClusterContext, args: DevicePluginsArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("trainium:infra:DevicePlugins", name, None, opts)
        on_cluster = pulumi.ResourceOptions(parent=self, provider=ctx.kubernetes)
        if args.neuron:
            namespace = k8s.core.v1.Namespace(
                NPD_NAMESPACE,
                metadata={
                    "name": NPD_NAMESPACE,
                    "labels": {"purpose": "neuron-health", **controller_namespace_labels(NPD_NAMESPACE)},
                },
                opts=on_cluster,
            )
            role_arn = self._recovery_role(name, ctx, args.node_recovery) if args.node_recovery else None
            values = (
                role_arn.apply(lambda arn: cached(neuron_values(args.neuron_scheduler_extension, arn), ctx))
                if role_arn is not None
                else cached(neuron_values(args.neuron_scheduler_extension), ctx)
            )
            helm_release(
                "neuron",
                CHARTS["neuron"],
                "kube-system",
                values,
                pulumi.ResourceOptions(parent=self, provider=ctx.kubernetes, depends_on=[namespace, *args.image_cache]),
            )
        if args.dra_groups:
            self._dra(ctx, args)
        if args.efa:
            # The EFA plugin's image is pulled from the cluster's own region's EKS registry.
            helm_release(
                "aws-efa-k8s-device-plugin",
                CHARTS["efa-device-plugin"],
                "kube-system",
                efa_values(ctx.region),
                on_cluster,
            )
        self.register_outputs({})

    def _dra(self, ctx: ClusterContext, args: DevicePluginsArgs) -> None:
        """The drivers and claim templates of the `deviceAllocation: dra` groups."""
        on_cluster = pulumi.ResourceOptions(parent=self, provider=ctx.kubernetes)
        # A second release of the same chart: the DRA driver alone, on the DRA nodes alone. The chart's
        # objects are all switched by their component's `enabled` (templates/*/), so the two releases
        # own no object in common.
        drivers = [
            helm_release(
                "neuron-dra",
                CHARTS["neuron"],
                "kube-system",
                cached(neuron_dra_values(), ctx),
                pulumi.ResourceOptions(parent=self, provider=ctx.kubernetes, depends_on=args.image_cache),
            )
        ]
        if any(g.efa for g in args.dra_groups):
            drivers.append(helm_release("aws-dranet", CHARTS["aws-dranet"], "kube-system", dranet_values(), on_cluster))
        for namespace, after in args.claim_namespaces.items():
            for group in args.dra_groups:
                manifest = whole_node_claim_template(group, namespace)
                k8s.resource.v1.ResourceClaimTemplate(
                    f"{namespace}-{group.claim_template}",
                    metadata=manifest["metadata"],
                    spec=manifest["spec"],
                    opts=pulumi.ResourceOptions(parent=self, provider=ctx.kubernetes, depends_on=[*after, *drivers]),
                )

    def _recovery_role(self, name: str, ctx: ClusterContext, args: NodeRecoveryArgs) -> pulumi.Output[str]:
        child = pulumi.ResourceOptions(parent=self)
        role = aws.iam.Role(
            f"{name}-neuron-node-recovery",
            description=f"Neuron node recovery agent of {ctx.cluster_name}: replace nodes with Neuron errors",
            assume_role_policy=pulumi.Output.all(args.oidc_provider_arn, args.oidc_provider_url).apply(
                lambda o: irsa_trust_policy(o[0], o[1], NPD_NAMESPACE, NPD_SERVICE_ACCOUNT)
            ),
            permissions_boundary=ctx.permissions_boundary_arn,
            tags=ctx.tags,
            opts=child,
        )
        policy = aws.iam.RolePolicy(
            f"{name}-neuron-node-recovery-policy",
            role=role.id,
            policy=node_recovery_policy(ctx.partition, ctx.region, ctx.account_id, ctx.cluster_name),
            opts=child,
        )
        # The ARN reaches the chart only once the role can do its job.
        return pulumi.Output.all(role.arn, policy.id).apply(lambda v: v[0])
