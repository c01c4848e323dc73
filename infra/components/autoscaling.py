"""cluster-autoscaler (scales the accelerator groups from zero and back) and metrics-server."""

from __future__ import annotations

import dataclasses
import json
import re
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_aws as aws

from infra.components.context import ClusterContext
from infra.components.iam import pod_identity_role
from infra.components.kube import CORE_NODE_SELECTOR, helm_release, spread_across_nodes
from infra.facts.versions import CHARTS, autoscaler_release
from infra.specs import system_pods
from infra.specs.system_capacity import HA_CONTROLLER_REPLICAS

SERVICE_ACCOUNT = "cluster-autoscaler"
NODE_TEMPLATE_PREFIX = "k8s.io/cluster-autoscaler/node-template/"


def tag_node_template(
    name_prefix: str, node_group: aws.eks.NodeGroup, tags: dict[str, str], parent: pulumi.Resource
) -> None:
    """Put a group's node-template tags on its Auto Scaling group.

    From zero nodes cluster-autoscaler knows a group's labels, taints and resources only from
    these ASG tags, and EKS does not copy a managed node group's labels there.
    """
    asg_name = node_group.resources.apply(lambda r: r[0].autoscaling_groups[0].name)
    for key, value in tags.items():
        slug = re.sub(r"[^a-z0-9]+", "-", key.removeprefix(NODE_TEMPLATE_PREFIX).lower()).strip("-")
        aws.autoscaling.Tag(
            f"{name_prefix}-{slug}",
            autoscaling_group_name=asg_name,
            tag=aws.autoscaling.TagTagArgs(key=key, value=value, propagate_at_launch=False),
            opts=pulumi.ResourceOptions(parent=parent),
        )


def autoscaler_policy(partition: str, region: str, account_id: str, cluster_name: str) -> str:
    """Scale and terminate only in this cluster's groups (EKS tags their ASGs as owned)."""
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Sid": "ScaleOwnGroups",
                    "Effect": "Allow",
                    "Action": ["autoscaling:SetDesiredCapacity", "autoscaling:TerminateInstanceInAutoScalingGroup"],
                    "Resource": "*",
                    "Condition": {
                        "StringEquals": {f"aws:ResourceTag/k8s.io/cluster-autoscaler/{cluster_name}": "owned"}
                    },
                },
                {
                    "Sid": "DescribeOwnNodeGroups",
                    "Effect": "Allow",
                    "Action": ["eks:DescribeNodegroup"],
                    "Resource": f"arn:{partition}:eks:{region}:{account_id}:nodegroup/{cluster_name}/*",
                },
                {
                    "Sid": "Discover",
                    "Effect": "Allow",
                    "Action": [
                        "autoscaling:DescribeAutoScalingGroups",
                        "autoscaling:DescribeAutoScalingInstances",
                        "autoscaling:DescribeLaunchConfigurations",
                        "autoscaling:DescribeScalingActivities",
                        "autoscaling:DescribeTags",
                        "ec2:DescribeImages",
                        "ec2:DescribeInstanceTypes",
                        "ec2:DescribeLaunchTemplateVersions",
                        "ec2:GetInstanceTypesFromInstanceRequirements",
                    ],
                    "Resource": "*",
                },
            ],
        }
    )


# cluster-autoscaler.instance-name: the release's name, and `<cloudProvider>-<chart name>`.
AUTOSCALER_PODS = {
    "app.kubernetes.io/instance": "cluster-autoscaler",
    "app.kubernetes.io/name": "aws-cluster-autoscaler",
}


def autoscaler_values(
    cluster_name: str, region: str, image_tag: str, replicas: int = HA_CONTROLLER_REPLICAS
) -> dict[str, Any]:
    """``replicas``: infra/specs/system_capacity.py controller_replicas."""
    return {
        "cloudProvider": "aws",
        # The release for the cluster's Kubernetes minor (infra/facts/versions.py CLUSTER_AUTOSCALER).
        "image": {"tag": image_tag},
        "awsRegion": region,
        "autoDiscovery": {
            "clusterName": cluster_name,
            "tags": ["k8s.io/cluster-autoscaler/enabled", f"k8s.io/cluster-autoscaler/{cluster_name}"],
        },
        "rbac": {"serviceAccount": {"create": True, "name": SERVICE_ACCOUNT}},
        "nodeSelector": CORE_NODE_SELECTOR,
        # A standby: cluster-autoscaler elects a leader on a Lease by default (kubernetes/autoscaler
        # cluster-autoscaler-1.35.2 main.go leaderElectionConfiguration, LeaderElect: true). The chart's
        # budget (charts 9.53.0 and 9.59.0 templates/pdb.yaml, values.yaml maxUnavailable: 1) said
        # explicitly, which lets a drain evict the only replica of a one-node core group too; its pods carry
        # the chart's instance-name labels (templates/_helpers.tpl).
        "replicaCount": replicas,
        "podDisruptionBudget": {"maxUnavailable": 1},
        "affinity": spread_across_nodes(AUTOSCALER_PODS),
        "extraArgs": {
            # Trainium groups of one type in one zone: least-waste picks the smallest fit.
            "expander": "least-waste",
            "balance-similar-node-groups": "true",
            "skip-nodes-with-system-pods": "false",
            # A node's utilisation is then what its other pods ask of what the DaemonSets leave
            # (cluster-autoscaler-1.35.2 simulator/utilization/info.go CalculateUtilizationOfResource). Counted in,
            # a t3a.large core node's 490m of DaemonSets put a second core node, added while a pod did not fit,
            # above the 0.5 threshold (config/const.go) for good. For a Trainium group it means a node holding
            # only DaemonSets (the image pre-pull, the agents) is at 0, empty; a node under burn-in is no
            # candidate at all (infra/specs/node_template.py TRAINIUM_SCALE_DOWN_UNNEEDED says why).
            "ignore-daemonsets-utilization": "true",
            # The core and job-support groups' time. Trainium groups carry their own, 3 minutes, through their
            # Auto Scaling groups' tags (infra/specs/node_template.py TRAINIUM_SCALE_DOWN_UNNEEDED).
            "scale-down-unneeded-time": "10m",
            # None: after any scale-up no node would be removed for this long (cluster-autoscaler-1.35.2
            # core/static_autoscaler.go isScaleDownInCooldown), so another job's scale-up, or several in a row, would
            # keep idle Trainium nodes past their 3 minutes. No node needs it: a new Trainium node is unready under
            # its startup taint, then held for its gang (infra/specs/gang_hold.py); a new core node has its pods long
            # before its 10 minutes. Not per group (scale-down-delay-type-local) either: that drops a group's nodes
            # from the candidates after each deletion (processors/scaledowncandidates/
            # scale_down_candidates_delay_processor.go), which restarts every other node's clock.
            "scale-down-delay-after-add": "0s",
        },
    }


@dataclass
class AutoscalingArgs:
    kubernetes_version: str
    cluster_autoscaler: bool
    metrics_server: bool
    association_after: list[pulumi.Resource]
    """What cluster-autoscaler's Pod Identity association waits for (the association names the
    cluster by its text name, which carries no dependency on it)."""
    controller_replicas: int = HA_CONTROLLER_REPLICAS
    """cluster-autoscaler's (infra/specs/system_capacity.py controller_replicas)."""


class Autoscaling(pulumi.ComponentResource):
    def __init__(
        self, name: str, ctx: ClusterContext, args: AutoscalingArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("trainium:infra:Autoscaling", name, None, opts)
        if args.cluster_autoscaler:
            _, identity = pod_identity_role(
                f"{name}-cluster-autoscaler",
                description=f"cluster-autoscaler of {ctx.cluster_name}",
                parent=self,
                cluster=ctx,
                service_account=("kube-system", SERVICE_ACCOUNT),
                inline_policy=autoscaler_policy(ctx.partition, ctx.region, ctx.account_id, ctx.cluster_name),
                associate_in=ctx.cluster_name,
                depends_on=args.association_after,
            )
            _, release = autoscaler_release(args.kubernetes_version)
            helm_release(
                "cluster-autoscaler",
                dataclasses.replace(CHARTS["cluster-autoscaler"], version=release.chart),
                "kube-system",
                autoscaler_values(ctx.cluster_name, ctx.region, release.image_tag, args.controller_replicas),
                pulumi.ResourceOptions(parent=self, provider=ctx.kubernetes, depends_on=identity),
            )
        if args.metrics_server:
            helm_release(
                "metrics-server",
                CHARTS["metrics-server"],
                "kube-system",
                # Its tmpVolume is an emptyDir (chart 3.13.1 values.yaml), which would pin its node; podAnnotations
                # go on its pod template (templates/deployment.yaml).
                {"nodeSelector": CORE_NODE_SELECTOR, "podAnnotations": dict(system_pods.SAFE_TO_EVICT)},
                pulumi.ResourceOptions(parent=self, provider=ctx.kubernetes),
            )
        self.register_outputs({})
