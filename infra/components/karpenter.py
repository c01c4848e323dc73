"""Karpenter as the Trainium node provisioner (nodeProvisioner: karpenter).

Installed the way the pinned release documents it (aws/karpenter-provider-aws v1.14.0,
website/content/en/v1.14/getting-started/getting-started-with-karpenter, release commit 692ccdd06):
the interruption queue and its EventBridge rules, a node role with an EC2_LINUX access entry, the
controller role (here through EKS Pod Identity instead of IRSA), the CRD chart, then the
controller chart on the core nodes, then one EC2NodeClass and NodePool per accelerator group.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from infra.components.accelerators import AcceleratorGroupSpec, efa_security_group
from infra.components.context import ClusterContext
from infra.components.iam import node_role_with_policies, pod_identity_role
from infra.components.kube import CORE_NODE_SELECTOR, helm_release
from infra.facts.versions import CHARTS
from infra.specs import nodepools as plan
from infra.specs.system_capacity import HA_CONTROLLER_REPLICAS


@dataclass
class KarpenterArgs:
    vpc_id: pulumi.Input[str]
    cluster_security_group_id: pulumi.Input[str]
    groups: list[AcceleratorGroupSpec]
    lifetimes: plan.Lifetimes
    hop_limit: int
    node_policies: tuple[str, ...]
    association_after: list[pulumi.Resource]
    """What the controller's Pod Identity association waits for besides the control plane."""
    controller_replicas: int = HA_CONTROLLER_REPLICAS
    """The controller's (infra/specs/system_capacity.py controller_replicas)."""


class Karpenter(pulumi.ComponentResource):
    node_pools: dict[str, k8s.apiextensions.CustomResource]
    controller: pulumi.Resource
    """The controller's release: it waits for the interruption queue, the roles and the CRDs, so what
    depends on it lands only once the whole switch to Karpenter did."""

    def __init__(
        self, name: str, ctx: ClusterContext, args: KarpenterArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("trainium:infra:Karpenter", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        discovery = {plan.DISCOVERY_TAG: ctx.cluster_name}

        queue = aws.sqs.Queue(
            f"{name}-interruptions",
            name=plan.queue_name(ctx.cluster_name),
            message_retention_seconds=plan.QUEUE_RETENTION_SECONDS,
            sqs_managed_sse_enabled=True,
            tags=ctx.tags,
            opts=child,
        )
        aws.sqs.QueuePolicy(
            f"{name}-interruptions", queue_url=queue.url, policy=queue.arn.apply(plan.queue_policy), opts=child
        )
        for rule_name, pattern in plan.INTERRUPTION_RULES.items():
            rule = aws.cloudwatch.EventRule(
                f"{name}-{rule_name}",
                description=f"Karpenter interruption queue of {ctx.cluster_name}: {pattern['detail-type'][0]}",
                event_pattern=pulumi.Output.json_dumps(pattern),
                tags=ctx.tags,
                opts=child,
            )
            aws.cloudwatch.EventTarget(f"{name}-{rule_name}", rule=rule.name, arn=queue.arn, opts=child)

        # A role of its own: EKS already made an access entry for the managed groups' role, and a
        # second entry for the same principal is refused.
        node_role, node_ready = node_role_with_policies(
            f"{name}-node",
            f"Karpenter's Trainium nodes of {ctx.cluster_name}",
            ctx,
            args.node_policies,
            child,
        )
        node_ready.append(
            aws.eks.AccessEntry(
                f"{name}-node",
                cluster_name=ctx.cluster_name_output,
                principal_arn=node_role.arn,
                type="EC2_LINUX",
                tags=ctx.tags,
                opts=child,
            )
        )

        _, controller_ready = pod_identity_role(
            f"{name}-controller",
            description=f"Karpenter controller of {ctx.cluster_name}",
            parent=self,
            cluster=ctx,
            service_account=(plan.NAMESPACE, plan.SERVICE_ACCOUNT),
            inline_policy=pulumi.Output.all(node_role.arn, queue.arn).apply(
                lambda a: plan.controller_policy(
                    ctx.partition, ctx.region, ctx.account_id, ctx.cluster_name, a[0], a[1]
                )
            ),
            associate_in=ctx.cluster_name_output,
            depends_on=args.association_after,
        )

        # Discovery: the EC2NodeClasses select subnets (tagged in Network) and these groups.
        # What a NodeClass's nodes use without a property link to it (found by tag, or by the role's
        # name): the NodeClasses depend on all of it, so Pulumi deletes them first and these only once
        # Karpenter has drained and terminated every node (its EC2NodeClass finalizer waits for every
        # NodeClaim: karpenter-provider-aws v1.14.0 pkg/controllers/nodeclass/controller.go finalize,
        # then deletes the instance profile it made from the role). Otherwise the EFA security group
        # delete fails on the nodes' interfaces and the role goes from under running nodes.
        node_uses: list[pulumi.Resource] = [
            aws.ec2.Tag(
                f"{name}-cluster-sg-discovery",
                resource_id=args.cluster_security_group_id,
                key=plan.DISCOVERY_TAG,
                value=ctx.cluster_name,
                opts=child,
            ),
            *node_ready,
        ]
        if any(g.interfaces for g in args.groups):
            node_uses.append(
                efa_security_group(name, args.vpc_id, {**ctx.tags, **discovery}, self, rules_out=node_uses)
            )

        provider = ctx.kubernetes
        on_cluster = pulumi.ResourceOptions(parent=self, provider=provider)
        crds = helm_release("karpenter-crd", CHARTS["karpenter-crd"], plan.NAMESPACE, {}, on_cluster)
        repair = all(g.config.auto_repair for g in args.groups) if args.groups else False
        controller = helm_release(
            "karpenter",
            CHARTS["karpenter"],
            plan.NAMESPACE,
            plan.chart_values(
                ctx.cluster_name,
                ctx.region,
                plan.queue_name(ctx.cluster_name),
                repair,
                CORE_NODE_SELECTOR,
                args.controller_replicas,
            ),
            pulumi.ResourceOptions(
                parent=self, provider=provider, depends_on=[crds, *controller_ready, *node_ready, queue]
            ),
            skip_crds=True,
        )
        self.controller = controller

        self.node_pools = {}
        for group in args.groups:
            placement = None
            if group.config.placement_group_enabled:
                pg = aws.ec2.PlacementGroup(f"{group.name}-pg", strategy="cluster", tags=ctx.tags, opts=child)
                placement = pg.name
            # Both need the CRDs, and the controller running to act on them (and, on delete, to drain
            # and terminate the nodes before their finalizers let them go).
            after = [crds, controller]
            node_class = _custom(
                f"{group.name}-nodeclass",
                plan.node_class(
                    group,
                    cluster_name=ctx.cluster_name,
                    node_role=node_role.name,
                    placement_group=placement,
                    hop_limit=args.hop_limit,
                    tags=ctx.tags,
                ),
                pulumi.ResourceOptions(parent=self, provider=provider, depends_on=[*after, *node_uses]),
            )
            pool = plan.node_pool(group, args.lifetimes)
            grace = pool["spec"]["template"]["spec"]["terminationGracePeriod"]
            self.node_pools[group.name] = _custom(
                f"{group.name}-nodepool",
                pool,
                pulumi.ResourceOptions(
                    parent=self,
                    provider=provider,
                    depends_on=[*after, node_class],
                    custom_timeouts=pulumi.CustomTimeouts(delete=plan.delete_timeout(grace)),
                ),
            )
        self.register_outputs({})


def _custom(name: str, manifest: dict[str, Any], opts: pulumi.ResourceOptions) -> k8s.apiextensions.CustomResource:
    return k8s.apiextensions.CustomResource(
        name,
        api_version=manifest["apiVersion"],
        kind=manifest["kind"],
        metadata=manifest["metadata"],
        spec=manifest["spec"],
        opts=opts,
    )
