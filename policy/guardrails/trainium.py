"""Trainium correctness: node groups and the file system the way Neuron training needs them.

Node group rules are stack-level: a Capacity Block group names its instance type in its launch
template, not on the group, so the type is resolved through the stack's resources (the launch
template the group's ``launchTemplate`` property came from).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from pulumi_policy import PolicyResource, ReportViolation, StackValidationArgs

from infra.facts.instances import NEURON_INSTANCE_TYPES, node_group_instance_types, trains
from infra.facts.neuron import compatible_release_hint, images_for, incompatibilities
from infra.facts.regions import checked_zone_offerings
from infra.facts.versions import NEURON_AMI_TYPE
from infra.specs.node_template import BURN_IN_TAINT
from policy.guardrails.declare import stack_rule
from policy.guardrails.props import as_list, dependencies_of, get, has, is_list, known, of_type
from policy.guardrails.security import INGRESS_RULE, LAUNCH_TEMPLATE, LEGACY_RULE, SECURITY_GROUP

NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"
SUBNET = "aws:ec2/subnet:Subnet"
LUSTRE = "aws:fsx/lustreFileSystem:LustreFileSystem"
NEURON_TAINT_KEY = "aws.amazon.com/neuron"
EFA_TYPES = ("efa", "efa-only")
# Lustre clients and servers talk on TCP 988 and 1018-1023 (FSx for Lustre user guide,
# "File system access control with Amazon VPC"), in both directions.
LUSTRE_PORTS = (988, *range(1018, 1024))


@dataclass(frozen=True)
class AcceleratorGroup:
    group: PolicyResource
    launch_template: PolicyResource | None
    instance_type: str

    @property
    def efa_interfaces(self) -> list:
        nics = as_list(get(self.launch_template.props, "networkInterfaces")) if self.launch_template else []
        return [n for n in nics if get(n, "interfaceType") in EFA_TYPES]


def _group_instance_types(group: PolicyResource) -> list:
    """The group's own instanceTypes. A computed output: unknown at the first preview of a group
    that sets none (a Capacity Block group), which then names its type in its launch template."""
    return known(lambda: as_list(get(group.props, "instanceTypes")), unknown=[])


def instance_type_of(group: PolicyResource, launch_template: PolicyResource | None) -> str | None:
    # instanceTypes read through `known`: an unknown value raises UnknownValueError on any read, `.get`
    # included (pulumi-policy 1.21.0 proxy.py _DictProxy.__getitem__; Mapping.get catches only KeyError).
    # The launch template's instanceType is an input, known at preview.
    own = {"instanceTypes": _group_instance_types(group)}
    types = node_group_instance_types(own, launch_template.props if launch_template else None)
    return types[0] if types else None


NODEPOOL = "kubernetes:karpenter.sh/v1:NodePool"
NODECLASS = "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass"


@dataclass(frozen=True)
class KarpenterGroup:
    """A Karpenter NodePool of a Neuron type and the EC2NodeClass it references (nodeProvisioner: karpenter)."""

    pool: PolicyResource
    node_class: PolicyResource | None
    instance_type: str

    def requirement(self, key: str) -> list:
        for r in as_list(get(self.pool.props, "spec", "template", "spec", "requirements", default=[])):
            if get(r, "key") == key and get(r, "operator") == "In":
                return as_list(get(r, "values"))
        return []

    def class_spec(self, *path: str, default=None):  # noqa: ANN001, ANN201
        return get(self.node_class.props, "spec", *path, default=default) if self.node_class else default

    @property
    def efa_interfaces(self) -> list:
        return [
            n
            for n in as_list(self.class_spec("networkInterfaces", default=[]))
            if get(n, "interfaceType") == "efa-only"
        ]


def karpenter_groups(resources: list[PolicyResource]) -> Iterator[KarpenterGroup]:
    classes = {get(c.props, "metadata", "name"): c for c in of_type(resources, NODECLASS)}
    for pool in of_type(resources, NODEPOOL):
        group = KarpenterGroup(
            pool, classes.get(get(pool.props, "spec", "template", "spec", "nodeClassRef", "name")), ""
        )
        types = [t for t in group.requirement("node.kubernetes.io/instance-type") if t in NEURON_INSTANCE_TYPES]
        if types:
            yield KarpenterGroup(pool, group.node_class, types[0])


def accelerator_groups(resources: list[PolicyResource]) -> Iterator[AcceleratorGroup]:
    """Node groups running a Neuron instance type (Trainium or Inferentia)."""
    for group in of_type(resources, NODE_GROUP):
        templates = dependencies_of(group, "launchTemplate", LAUNCH_TEMPLATE)
        lt = templates[0] if templates else None
        instance_type = instance_type_of(group, lt)
        if instance_type in NEURON_INSTANCE_TYPES:
            yield AcceleratorGroup(group, lt, instance_type)


@stack_rule("neuron-ami-type", f"Trainium/Inferentia node groups use the EKS Neuron AMI type ({NEURON_AMI_TYPE}).")
def neuron_ami_type(args: StackValidationArgs, report: ReportViolation) -> None:
    for g in accelerator_groups(args.resources):
        ami = get(g.group.props, "amiType")
        if ami != NEURON_AMI_TYPE:
            report(
                f"Node group '{g.group.name}' runs {g.instance_type} on AMI type {ami or 'unset'}: use {NEURON_AMI_TYPE}, "
                "which carries the Neuron driver and runtime.",
                g.group.urn,
            )
    for k in karpenter_groups(args.resources):
        # An al2023 alias resolves the Neuron variant for Neuron types (karpenter-provider-aws
        # v1.14.0 pkg/providers/amifamily/al2023.go); ids or names could pick any image.
        terms = as_list(k.class_spec("amiSelectorTerms", default=[]))
        if not terms or not all(str(get(t, "alias", default="")).startswith("al2023@") for t in terms):
            report(
                f"NodePool '{k.pool.name}' runs {k.instance_type} on an EC2NodeClass whose amiSelectorTerms are not an "
                "`al2023@<version>` alias: use the alias, which selects the EKS AL2023 Neuron AMI.",
                k.pool.urn,
            )


@stack_rule("neuron-taint", f"Trainium/Inferentia node groups carry the {NEURON_TAINT_KEY}=true:NoSchedule taint.")
def neuron_taint(args: StackValidationArgs, report: ReportViolation) -> None:
    for g in accelerator_groups(args.resources):
        taints = as_list(get(g.group.props, "taints"))
        if not any(get(t, "key") == NEURON_TAINT_KEY and get(t, "effect") == "NO_SCHEDULE" for t in taints):
            report(
                f"Node group '{g.group.name}' has no {NEURON_TAINT_KEY}:NoSchedule taint: pods that do not ask for "
                "Neuron devices would fill its nodes and keep them from scaling down.",
                g.group.urn,
            )
    for k in karpenter_groups(args.resources):
        taints = as_list(get(k.pool.props, "spec", "template", "spec", "taints", default=[]))
        if not any(get(t, "key") == NEURON_TAINT_KEY and get(t, "effect") == "NoSchedule" for t in taints):
            report(
                f"NodePool '{k.pool.name}' has no {NEURON_TAINT_KEY}:NoSchedule taint: pods that do not ask for "
                "Neuron devices would fill its nodes and keep them from being removed.",
                k.pool.urn,
            )


def _config_file(urn: str) -> str:
    """The policy config file of the stack a URN (urn:pulumi:<stack>::<project>::...) belongs to."""
    stack = urn.split(":")[2] if urn.count(":") >= 2 else "<stack>"
    return f"policy/config.{stack}.json"


def zone_offering_problem(zone: str, instance_type: str, extra: dict, urn: str) -> str | None:
    """Why ``zone`` cannot run ``instance_type``, or None: checked against infra/facts/regions.py where it
    knows the zone's offerings from a source (the same table the offline plan answers from), plus the
    zones the policy config adds. A zone the table does not know is not checked (a deploy looks it up)."""
    known = checked_zone_offerings().get(zone)
    added = set(extra.get(instance_type, []))
    if known is None or zone in added:
        return None
    offered = set(known.get(instance_type, frozenset())) | added
    if zone in offered:
        return None
    where = f"offered in {sorted(offered)}" if offered else "not offered in this zone's region"
    return (
        f"zone {zone} does not offer {instance_type} ({where}; infra/facts/regions.py): pin the accelerator zone "
        f"to one of those; if AWS now offers it there, add the zone to its region's offerings in "
        f"infra/facts/regions.py, or list it under accelerator-single-zone.offeredZoneIds in {_config_file(urn)}"
    )


@stack_rule(
    "accelerator-single-zone",
    "Trainium/Inferentia node groups use one subnet, in a zone that offers the instance type.",
    config_schema={
        "offeredZoneIds": {
            "type": "object",
            "additionalProperties": {"type": "array", "items": {"type": "string"}},
            "default": {},
            "description": "instance type -> zone ids that offer it besides those infra/facts/regions.py knows",
        }
    },
)
def accelerator_single_zone(args: StackValidationArgs, report: ReportViolation) -> None:
    extra: dict = args.get_config().get("offeredZoneIds", {})
    for g in accelerator_groups(args.resources):
        if not has(g.group.props, "subnetIds"):
            continue
        subnets = get(g.group.props, "subnetIds")
        count = len(subnets) if is_list(subnets) else 1  # len() reads no (perhaps unknown) subnet id
        if count != 1:
            report(
                f"Node group '{g.group.name}' spans {count} subnets: an accelerator group uses one subnet, in a zone that "
                f"offers {g.instance_type}, so its nodes, its placement group and the file system share a zone.",
                g.group.urn,
            )
            continue
        zones = {get(s.props, "availabilityZoneId") for s in dependencies_of(g.group, "subnetIds", SUBNET)} - {None}
        for zone in sorted(zones):
            problem = zone_offering_problem(zone, g.instance_type, extra, g.group.urn)
            if problem:
                report(f"Node group '{g.group.name}' is in {problem}.", g.group.urn)
    for k in karpenter_groups(args.resources):
        pool_zones = k.requirement("topology.k8s.aws/zone-id")
        if len(pool_zones) != 1:
            report(
                f"NodePool '{k.pool.name}' is not pinned to one zone id (topology.k8s.aws/zone-id In [one zone]): its "
                "nodes, placement group and the file system must share a zone.",
                k.pool.urn,
            )
        elif problem := zone_offering_problem(pool_zones[0], k.instance_type, extra, k.pool.urn):
            report(f"NodePool '{k.pool.name}' is in {problem}.", k.pool.urn)


@stack_rule(
    "efa-interfaces-match-cards",
    "With EFA on, an accelerator launch template has one EFA interface per network card of the instance type.",
)
def efa_interfaces_match_cards(args: StackValidationArgs, report: ReportViolation) -> None:
    for g in accelerator_groups(args.resources):
        nics = g.efa_interfaces
        if not nics:
            continue  # EFA off: allowed, the group just trains without it
        facts = NEURON_INSTANCE_TYPES[g.instance_type]
        cards = sorted(int(get(n, "networkCardIndex", default=0)) for n in nics)
        if not facts.efa_supported:
            report(
                f"Launch template of node group '{g.group.name}' has EFA interfaces, but {g.instance_type} has no EFA.",
                g.group.urn,
            )
        elif cards != list(range(facts.network_cards)):
            report(
                f"Node group '{g.group.name}' ({g.instance_type}) has EFA interfaces on network cards {cards}; the type has "
                f"{facts.network_cards} cards and needs one EFA interface on each (0..{facts.network_cards - 1}) for full bandwidth.",
                g.group.urn,
            )
    for k in karpenter_groups(args.resources):
        cards = sorted(int(get(n, "networkCardIndex", default=0)) for n in k.efa_interfaces)
        facts = NEURON_INSTANCE_TYPES[k.instance_type]
        if cards and cards != list(range(facts.network_cards)):
            report(
                f"NodePool '{k.pool.name}' ({k.instance_type}) has efa-only interfaces on network cards {cards}; the type "
                f"needs one on each of its {facts.network_cards} cards.",
                k.pool.urn,
            )


def _targets_reservation(lt: PolicyResource) -> bool:
    return (
        has(get(lt.props, "capacityReservationSpecification", default={}), "capacityReservationTarget")
        or get(lt.props, "instanceMarketOptions", "marketType") == "capacity-block"
    )


@stack_rule(
    "placement-group-unless-reserved",
    "EFA node groups launch into a cluster placement group, unless they target a capacity reservation (then none).",
)
def placement_group_unless_reserved(args: StackValidationArgs, report: ReportViolation) -> None:
    for g in accelerator_groups(args.resources):
        if not g.efa_interfaces or g.launch_template is None:
            continue  # single-node groups gain nothing from a cluster placement group
        placed = has(get(g.launch_template.props, "placement", default={}), "groupName")
        reserved = _targets_reservation(g.launch_template)
        if reserved and placed:
            report(
                f"Node group '{g.group.name}' targets a capacity reservation and a placement group: launches into "
                "reservations and Capacity Blocks fail with a placement group (terraform-aws-eks#3730); drop it.",
                g.group.urn,
            )
        elif not reserved and not placed:
            report(
                f"Node group '{g.group.name}' ({g.instance_type}, EFA) has no cluster placement group: add one "
                "(placementGroup: true) so collective traffic stays low-latency.",
                g.group.urn,
            )
    for k in karpenter_groups(args.resources):
        if not k.efa_interfaces:
            continue
        placed = k.class_spec("placementGroupSelector") is not None
        reserved = bool(k.class_spec("capacityReservationSelectorTerms"))
        if reserved and placed:
            report(
                f"NodePool '{k.pool.name}' selects capacity reservations and a placement group: launches into "
                "reservations fail with a placement group (terraform-aws-eks#3730); drop it.",
                k.pool.urn,
            )
        elif not reserved and not placed:
            report(
                f"NodePool '{k.pool.name}' ({k.instance_type}, EFA) has no placementGroupSelector: add one "
                "(placementGroup: true) so collective traffic stays low-latency.",
                k.pool.urn,
            )


@stack_rule(
    "karpenter-training-not-consolidated",
    "Trainium NodePools consolidate only empty nodes and hold drift to empty nodes, so running training is "
    "never disrupted voluntarily.",
)
def karpenter_training_not_consolidated(args: StackValidationArgs, report: ReportViolation) -> None:
    """karpenter-provider-aws v1.14 website concepts/disruption.md: WhenEmptyOrUnderutilized (the
    default) moves pods off underused nodes; with terminationGracePeriod set, drift disrupts nodes
    whose pods carry karpenter.sh/do-not-disrupt."""
    for k in karpenter_groups(args.resources):
        disruption = get(k.pool.props, "spec", "disruption", default={})
        if get(disruption, "consolidationPolicy", default="WhenEmptyOrUnderutilized") != "WhenEmpty":
            report(
                f"NodePool '{k.pool.name}' consolidates nodes that still run pods: set consolidationPolicy WhenEmpty, "
                "or a multi-day training run is evicted to save a node.",
                k.pool.urn,
            )
        grace = get(k.pool.props, "spec", "template", "spec", "terminationGracePeriod", default=None)
        drift_held = any(
            get(b, "nodes") == "0" and "Drifted" in as_list(get(b, "reasons", default=[]))
            for b in as_list(get(disruption, "budgets", default=[]))
        )
        if grace is not None and not drift_held:
            report(
                f"NodePool '{k.pool.name}' sets terminationGracePeriod without a zero Drifted budget: drift would "
                "drain nodes under running training despite karpenter.sh/do-not-disrupt.",
                k.pool.urn,
            )


@stack_rule(
    "capacity-block-launch-template",
    "Capacity Block node groups name the instance type in the launch template, not on the group.",
)
def capacity_block_launch_template(args: StackValidationArgs, report: ReportViolation) -> None:
    for group in of_type(args.resources, NODE_GROUP):
        if get(group.props, "capacityType") != "CAPACITY_BLOCK":
            continue
        templates = dependencies_of(group, "launchTemplate", LAUNCH_TEMPLATE)
        if _group_instance_types(group):
            report(
                f"Capacity Block node group '{group.name}' sets instanceTypes: EKS wants the instance type in the launch "
                "template and none on the group.",
                group.urn,
            )
        if not templates or not has(templates[0].props, "instanceType"):
            report(
                f"Capacity Block node group '{group.name}' has no instance type in its launch template: set instanceType there.",
                group.urn,
            )


@stack_rule(
    "neuron-compatibility",
    "Trainium node groups and NodePools run a Neuron driver the training images' Neuron runtime works with: "
    "the pinned AMI release's, or unpinned the latest AMI's (infra/facts/neuron.py, from the Neuron release "
    "notes).",
)
def neuron_compatibility(args: StackValidationArgs, report: ReportViolation) -> None:
    def check(what: str, instance_type: str, release: str | None, minor: object, urn: str, taints: object) -> None:
        # A group or pool with the burn-in's startup taint runs the burn-in image on each new node.
        burn_in = any(get(t, "key") == BURN_IN_TAINT.key for t in as_list(taints))
        for image, driver, rule in incompatibilities(release, instance_type, images_for(burn_in)):
            hint = compatible_release_hint(minor) if rule.pinning_fixes and isinstance(minor, str) else ""
            report(
                f"{what} ({instance_type}) on {driver.describe()} cannot run {image.shown} "
                f"(Neuron SDK {image.sdk.version}, runtime {image.sdk.runtime}): {rule.what} ({rule.source}); "
                f"fix: {rule.fix}{hint}.",
                urn,
            )

    # Inferentia groups run no training image.
    for g in accelerator_groups(args.resources):
        if trains(g.instance_type):
            check(
                f"Node group '{g.group.name}'",
                g.instance_type,
                known(get, g.group.props, "releaseVersion") or None,
                known(get, g.group.props, "version"),
                g.group.urn,
                get(g.group.props, "taints"),
            )
    for k in karpenter_groups(args.resources):
        if not trains(k.instance_type):
            continue
        for term in as_list(k.class_spec("amiSelectorTerms", default=[])):
            alias = str(get(term, "alias", default=""))
            # al2023@latest is the latest AMI, al2023@v<date> that date's build; neuron-ami-type reports other terms.
            if alias.startswith("al2023@"):
                check(
                    f"NodePool '{k.pool.name}'",
                    k.instance_type,
                    None if alias == "al2023@latest" else alias,
                    None,
                    k.pool.urn,
                    get(k.pool.props, "spec", "template", "spec", "startupTaints"),
                )


def _covers(rule: PolicyResource, port: int) -> bool:
    protocol = str(get(rule.props, "ipProtocol", default=get(rule.props, "protocol", default="")))
    if protocol in ("-1", "all"):
        return True
    return protocol in ("tcp", "6") and int(get(rule.props, "fromPort", default=-1)) <= port <= int(
        get(rule.props, "toPort", default=-1)
    )


@stack_rule(
    "fsx-zone-and-lustre-ports",
    "FSx for Lustre sits in the accelerator zone and its security group admits TCP 988 and 1018-1023.",
)
def fsx_zone_and_ports(args: StackValidationArgs, report: ReportViolation) -> None:
    accelerator_zones = {
        get(s.props, "availabilityZoneId")
        for g in accelerator_groups(args.resources)
        for s in dependencies_of(g.group, "subnetIds", SUBNET)
    } - {None}
    for fs in of_type(args.resources, LUSTRE):
        zones = {get(s.props, "availabilityZoneId") for s in dependencies_of(fs, "subnetIds", SUBNET)} - {None}
        if accelerator_zones and zones and not zones & accelerator_zones:
            report(
                f"FSx for Lustre file system '{fs.name}' is in {sorted(zones)}, the Trainium nodes in {sorted(accelerator_zones)}: "
                "put it in the accelerator zone (cross-zone Lustre traffic is slow and billed).",
                fs.urn,
            )
        for sg in dependencies_of(fs, "securityGroupIds", SECURITY_GROUP):
            inbound = [
                r
                for r in of_type(args.resources, INGRESS_RULE, LEGACY_RULE)
                if sg in dependencies_of(r, "securityGroupId") and get(r.props, "type", default="ingress") == "ingress"
            ]
            inline = as_list(known(get, sg.props, "ingress"))  # computed: unknown on a new group
            missing = [
                p
                for p in LUSTRE_PORTS
                if not any(_covers(r, p) for r in inbound)
                and not any(
                    str(get(r, "protocol")) in ("-1", "tcp")
                    and int(get(r, "fromPort", default=0)) <= p <= int(get(r, "toPort", default=0))
                    for r in inline
                )
            ]
            if missing:
                shown = "988" if missing == [988] else ", ".join(str(p) for p in missing)
                report(
                    f"Security group '{sg.name}' of file system '{fs.name}' does not admit Lustre TCP port(s) {shown}: "
                    "open 988 and 1018-1023 to the file system and its clients.",
                    fs.urn,
                )


POLICIES = [
    neuron_ami_type,
    neuron_taint,
    accelerator_single_zone,
    efa_interfaces_match_cards,
    placement_group_unless_reserved,
    capacity_block_launch_template,
    fsx_zone_and_ports,
    karpenter_training_not_consolidated,
    neuron_compatibility,
]
