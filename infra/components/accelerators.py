"""Trainium/Inferentia node groups: one code path for every configured group.

Per group: a launch template of our own (EFA interfaces per network card, IMDSv2, encrypted
gp3 root, RAID0 instance store, placement group or capacity reservation), an EKS managed node
group on the Neuron AMI in the one zone that offers the type, and the Auto Scaling group tags
cluster-autoscaler needs to scale it up from zero.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_aws as aws

from infra import contract
from infra.components import launch_template as lt
from infra.components.autoscaling import tag_node_template
from infra.components.context import ClusterContext
from infra.config.models import AcceleratorNodeGroupConfig
from infra.facts.instances import InstanceFacts
from infra.facts.versions import NEURON_AMI_TYPE
from infra.specs.dra_objects import DraGroup
from infra.specs.efa import EfaInterface, efa_interfaces
from infra.specs.node_health import node_repair_settings
from infra.specs.node_template import (
    BURN_IN_PENDING_LABELS,
    BURN_IN_TAINT,
    NEURON_TAINT,
    Taint,
    autoscaler_tags,
    node_labels,
)
from infra.specs.placement import Zone
from infra.specs.user_data import encode, nodeadm_user_data


@dataclass(frozen=True)
class AcceleratorGroupSpec:
    """Everything about one group that can be decided without the cloud."""

    config: AcceleratorNodeGroupConfig
    facts: InstanceFacts
    zone: Zone
    interfaces: list[EfaInterface]
    labels: dict[str, str]
    taints: list[Taint]
    """The taints training pods tolerate (the workload stacks read them from the output)."""
    user_data: str | None
    autoscaler_tags: dict[str, str]
    # CPU and memory a pod can request on one node after the kubelet and the DaemonSets there
    # (infra/specs/system_capacity.py node_allocatable); None for a type the tables lack.
    allocatable: dict[str, str] | None = None
    # Taints a node starts with and loses once it is found healthy (the burn-in's): on the node
    # group, never tolerated by training pods, and not in the autoscaler's node template.
    startup_taints: list[Taint] = field(default_factory=list)
    # Labels the kubelet sets at registration (the user data), which no template shows.
    registration_labels: dict[str, str] = field(default_factory=dict)
    # The Capacity Block the group launches into, from the EC2 look-up: {"start", "end"} (RFC 3339).
    capacity_block: dict[str, str] | None = None

    @property
    def name(self) -> str:
        return self.config.name

    @property
    def efa_interface_count(self) -> int:
        return len(self.interfaces)

    def output(self) -> dict[str, Any]:
        """The group as the workload stacks read it (``acceleratorNodeGroups``, infra/contract.py)."""
        return contract.exported(
            contract.NodeGroup,
            name=self.name,
            instance_type=self.config.instance_type,
            az_id=self.zone.id,
            az_name=self.zone.name,
            neuron_devices=self.facts.neuron_devices,
            neuron_cores=self.facts.neuron_cores,
            efa_interfaces=self.efa_interface_count,
            labels=self.labels,
            taints=[_taint(t) for t in self.taints],
            min_size=self.config.min_size,
            max_size=self.config.max_size,
            # The plan's cost estimate of the workloads does not price a Capacity Block at on-demand rates.
            capacity_type="CAPACITY_BLOCK" if self.config.capacity_block else "ON_DEMAND",
            allocatable=self.allocatable,
            startup_taints=[_taint(t) for t in self.startup_taints],
            capacity_block=self.capacity_block,
            resource_claim_template=self.dra_group.claim_template if self.dra_group else None,
        )

    @property
    def dra_group(self) -> DraGroup | None:
        """The group as its DRA objects see it; None when the device plugins serve it."""
        if not self.config.dra:
            return None
        return DraGroup(self.name, self.config.instance_type, efa=bool(self.interfaces))


def _taint(taint: Taint) -> dict[str, Any]:
    return contract.exported(contract.Taint, key=taint.key, value=taint.value, effect=taint.effect)


def group_spec(
    config: AcceleratorNodeGroupConfig,
    facts: InstanceFacts,
    zone: Zone,
    allocatable: dict[str, str] | None = None,
    provisioner: str = "cluster-autoscaler",
    capacity_block: dict[str, str] | None = None,
) -> AcceleratorGroupSpec:
    """One group as both provisioners build it: a managed node group (cluster-autoscaler) or a
    NodePool and EC2NodeClass (karpenter, infra/specs/nodepools.py) read the same labels and taints."""
    interfaces = efa_interfaces(facts.network_cards, config.efa_interface_type) if config.efa_enabled else []
    ultraserver = config.name if facts.ultraserver_nodes else None
    labels = node_labels(
        config.instance_type, config.efa_enabled, config.labels, provisioner, dra=config.dra, ultraserver=ultraserver
    )
    taints = [NEURON_TAINT]
    # Never in ``labels``: those reach the node group, its node-template tags and the NodePool template.
    registration_labels = dict(BURN_IN_PENDING_LABELS) if config.burn_in else {}
    return AcceleratorGroupSpec(
        config=config,
        facts=facts,
        zone=zone,
        interfaces=interfaces,
        labels=labels,
        taints=taints,
        user_data=nodeadm_user_data(facts.nvme_disks, efa=bool(interfaces), node_labels=registration_labels),
        autoscaler_tags=autoscaler_tags(labels, taints, facts, len(interfaces), dra=config.dra, held=config.burn_in),
        allocatable=allocatable,
        startup_taints=[BURN_IN_TAINT] if config.burn_in else [],
        registration_labels=registration_labels,
        capacity_block=capacity_block,
    )


@dataclass
class AcceleratorNodeGroupsArgs:
    kubernetes_version: pulumi.Input[str]
    """The control plane's version (EksCluster.kubernetes_version, which waits for the control plane)."""
    vpc_id: pulumi.Input[str]
    cluster_security_group_id: pulumi.Input[str]
    node_role_arn: pulumi.Input[str]
    node_subnet_by_zone_id: Mapping[str, pulumi.Input[str]]
    groups: list[AcceleratorGroupSpec]
    node_groups_after: list[pulumi.Resource]
    """What each node group waits for: what its nodes need to join (EksCluster.node_policies)."""


def node_repair(enabled: bool) -> aws.eks.NodeGroupNodeRepairConfigArgs:
    """EKS node auto-repair, tuned for Neuron faults (infra/specs/node_health.py says how and why)."""
    if not enabled:
        return aws.eks.NodeGroupNodeRepairConfigArgs(enabled=False)
    settings = node_repair_settings()
    return aws.eks.NodeGroupNodeRepairConfigArgs(
        enabled=True,
        max_unhealthy_node_threshold_percentage=settings.max_unhealthy_percentage,
        max_parallel_nodes_repaired_percentage=settings.max_parallel_percentage,
        node_repair_config_overrides=[
            aws.eks.NodeGroupNodeRepairConfigNodeRepairConfigOverrideArgs(
                node_monitoring_condition=o.condition,
                node_unhealthy_reason=o.reason,
                min_repair_wait_time_mins=o.wait_minutes,
                repair_action=o.action,
            )
            for o in settings.overrides
        ],
    )


def efa_security_group(
    name: str,
    vpc_id: pulumi.Input[str],
    tags: dict[str, str],
    parent: pulumi.Resource,
    rules_out: list[pulumi.Resource] | None = None,
) -> aws.ec2.SecurityGroup:
    """EFA traffic must flow between every EFA interface; nothing else is opened. ``rules_out``
    receives the group's rules, for what must be deleted before them (nodes still training)."""
    child = pulumi.ResourceOptions(parent=parent)
    sg = aws.ec2.SecurityGroup(
        f"{name}-efa",
        vpc_id=vpc_id,
        description="EFA: all traffic between members of this group only",
        tags={**tags, "Name": f"{name}-efa"},
        opts=child,
    )
    rules: list[pulumi.Resource] = [
        rule(
            f"{name}-efa-{way}-self",
            security_group_id=sg.id,
            referenced_security_group_id=sg.id,
            ip_protocol="-1",
            description=f"EFA {preposition} members",
            opts=child,
        )
        for rule, way, preposition in (
            (aws.vpc.SecurityGroupIngressRule, "in", "from"),
            (aws.vpc.SecurityGroupEgressRule, "out", "to"),
        )
    ]
    if rules_out is not None:
        rules_out.extend(rules)
    return sg


class AcceleratorNodeGroups(pulumi.ComponentResource):
    efa_security_group_id: pulumi.Output[str] | None
    node_groups: dict[str, aws.eks.NodeGroup]

    def __init__(
        self,
        name: str,
        ctx: ClusterContext,
        args: AcceleratorNodeGroupsArgs,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("trainium:infra:AcceleratorNodeGroups", name, None, opts)
        self._ctx, self._args = ctx, args
        efa = any(g.interfaces for g in args.groups)
        efa_sg = efa_security_group(name, args.vpc_id, ctx.tags, self) if efa else None
        self.efa_security_group_id = efa_sg.id if efa_sg else None
        self.node_groups = {g.name: self._node_group(g, efa_sg) for g in args.groups}
        self.register_outputs({})

    def _launch_template(
        self, group: AcceleratorGroupSpec, efa_sg: aws.ec2.SecurityGroup | None
    ) -> aws.ec2.LaunchTemplate:
        args, cfg = self._args, group.config
        child = pulumi.ResourceOptions(parent=self)
        placement = None
        if cfg.placement_group_enabled:
            pg = aws.ec2.PlacementGroup(f"{group.name}-pg", strategy="cluster", tags=self._ctx.tags, opts=child)
            placement = aws.ec2.LaunchTemplatePlacementArgs(group_name=pg.name)
        reservation = market = None
        if cfg.capacity_reservation is not None:
            reservation = aws.ec2.LaunchTemplateCapacityReservationSpecificationArgs(
                capacity_reservation_target=aws.ec2.LaunchTemplateCapacityReservationSpecificationCapacityReservationTargetArgs(
                    capacity_reservation_id=cfg.capacity_reservation.id
                )
            )
            if cfg.capacity_reservation.type == "capacity-block":
                market = aws.ec2.LaunchTemplateInstanceMarketOptionsArgs(market_type="capacity-block")
        interfaces = [
            aws.ec2.LaunchTemplateNetworkInterfaceArgs(
                network_card_index=i.network_card_index,
                device_index=i.device_index,
                interface_type=i.interface_type,
                security_groups=[efa_sg.id, args.cluster_security_group_id] if efa_sg else [],
                delete_on_termination="true",
            )
            for i in group.interfaces
        ]
        return aws.ec2.LaunchTemplate(
            f"{group.name}-lt",
            description=f"{cfg.instance_type} nodes of {group.name}",
            # EKS: a Capacity Block node group names its instance type in the launch template
            # and none on the node group (EKS user guide, "Create a managed node group with
            # Capacity Blocks for ML"; terraform-aws-eks does the same).
            instance_type=cfg.instance_type if cfg.capacity_block else None,
            metadata_options=lt.metadata_options(),
            block_device_mappings=[lt.root_volume(cfg.root_volume_gib)],
            network_interfaces=interfaces or None,
            placement=placement,
            capacity_reservation_specification=reservation,
            instance_market_options=market,
            user_data=encode(group.user_data) if group.user_data else None,
            tag_specifications=lt.tag_specifications({**self._ctx.tags, "Name": group.name}),
            update_default_version=True,
            tags=self._ctx.tags,
            opts=child,
        )

    def _node_group(self, group: AcceleratorGroupSpec, efa_sg: aws.ec2.SecurityGroup | None) -> aws.eks.NodeGroup:
        args, cfg = self._args, group.config
        template = self._launch_template(group, efa_sg)
        node_group = aws.eks.NodeGroup(
            group.name,
            cluster_name=self._ctx.cluster_name_output,
            node_group_name=group.name,
            node_role_arn=args.node_role_arn,
            subnet_ids=[args.node_subnet_by_zone_id[group.zone.id]],
            ami_type=NEURON_AMI_TYPE,
            # The control plane's version: set, so a Kubernetes upgrade rolls the group after the
            # control plane (pulumi-aws 7.51.1 eks/node_group.py: drift detection only when set).
            # A pinned AMI release must be built for it (config_rules.ami_release_problem).
            version=args.kubernetes_version,
            release_version=cfg.ami_release_version,
            instance_types=None if cfg.capacity_block else [cfg.instance_type],
            capacity_type="CAPACITY_BLOCK" if cfg.capacity_block else "ON_DEMAND",
            scaling_config=aws.eks.NodeGroupScalingConfigArgs(
                min_size=cfg.min_size, desired_size=cfg.desired_size, max_size=cfg.max_size
            ),
            launch_template=aws.eks.NodeGroupLaunchTemplateArgs(
                id=template.id, version=template.latest_version.apply(str)
            ),
            labels=group.labels,
            taints=[
                aws.eks.NodeGroupTaintArgs(key=t.key, value=t.value, effect=t.eks_effect)
                for t in [*group.taints, *group.startup_taints]
            ],
            # MINIMAL: no new instance before an old one goes (EKS API NodegroupUpdateConfig
            # updateStrategy; DEFAULT launches first): a group on a Capacity Block or a full
            # reservation has no spare Trainium instance to surge into.
            update_config=aws.eks.NodeGroupUpdateConfigArgs(max_unavailable=1, update_strategy="MINIMAL"),
            node_repair_config=node_repair(cfg.auto_repair),
            tags=self._ctx.tags,
            opts=pulumi.ResourceOptions(
                parent=self,
                depends_on=args.node_groups_after,
                ignore_changes=["scalingConfig.desiredSize"],
            ),
        )
        tag_node_template(group.name, node_group, group.autoscaler_tags, self)
        return node_group
