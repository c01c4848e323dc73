"""Trainium correctness rules: node groups resolved through their launch templates and subnets.

Instance facts (network cards, EFA) come from infra/facts/instances.py (DESIGN §2); EKS Capacity Block
node groups name their type in the launch template and none on the group (DESIGN §5).
"""

from __future__ import annotations

import copy

from infra.facts.regions import NEURON_REGIONS
from offline.plan.policy_run import parse_config, run_policies
from policy.guardrails import POLICIES
from tests.policy_helpers import first_preview, reg, violations

NG = "aws:eks/nodeGroup:NodeGroup"
LT = "aws:ec2/launchTemplate:LaunchTemplate"
SUBNET = "aws:ec2/subnet:Subnet"
SG = "aws:ec2/securityGroup:SecurityGroup"
IN = "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"
FSX = "aws:fsx/lustreFileSystem:LustreFileSystem"
TAINT = {"key": "aws.amazon.com/neuron", "value": "true", "effect": "NO_SCHEDULE"}
ADDED = {"offeredZoneIds": {"trn1.32xlarge": ["usw2-az1"]}}


def efa_nics(cards: int) -> list[dict]:
    return [
        {"networkCardIndex": i, "deviceIndex": 0 if i == 0 else 1, "interfaceType": "efa" if i == 0 else "efa-only"}
        for i in range(cards)
    ]


def stack(group=None, template=None, zone="usw2-az4", subnets=1):
    """One trn1.32xlarge group with its launch template and subnet(s); overrides by dict update."""
    lt_inputs = {
        "networkInterfaces": efa_nics(8),
        "placement": {"groupName": "pg"},
        "metadataOptions": {"httpTokens": "required"},
        **(template or {}),
    }
    subnet_refs = [(SUBNET, f"s{i}") for i in range(subnets)]
    ng_inputs = {
        "instanceTypes": ["trn1.32xlarge"],
        "amiType": "AL2023_x86_64_NEURON",
        "taints": [TAINT],
        "capacityType": "ON_DEMAND",
        "subnetIds": [f"subnet-{i}" for i in range(subnets)],
        "scalingConfig": {"minSize": 0, "maxSize": 4, "desiredSize": 0},
        **(group or {}),
    }
    return [
        *[reg(SUBNET, f"s{i}", {"availabilityZoneId": zone}) for i in range(subnets)],
        reg(LT, "lt", lt_inputs),
        reg(NG, "trn", ng_inputs, {"launchTemplate": [(LT, "lt")], "subnetIds": subnet_refs}),
    ]


def test_the_reference_group_passes_every_rule():
    for rule in (
        "neuron-ami-type",
        "neuron-taint",
        "efa-interfaces-match-cards",
        "placement-group-unless-reserved",
        "capacity-block-launch-template",
    ):
        assert not violations(rule, *stack()), rule
    assert not violations("accelerator-single-zone", *stack())


def test_neuron_ami_type():
    [message] = violations("neuron-ami-type", *stack({"amiType": "AL2023_x86_64_NVIDIA"}))
    assert "AL2023_x86_64_NEURON" in message and "'trn'" in message
    # A core group is not an accelerator group.
    assert not violations(
        "neuron-ami-type", reg(NG, "core", {"instanceTypes": ["m6i.4xlarge"], "amiType": "AL2023_x86_64_STANDARD"})
    )


def test_neuron_taint():
    assert violations("neuron-taint", *stack({"taints": []}))
    assert violations("neuron-taint", *stack({"taints": [{**TAINT, "effect": "PREFER_NO_SCHEDULE"}]}))


def test_one_subnet_in_an_offering_zone():
    [message] = violations("accelerator-single-zone", *stack(subnets=2))
    assert "spans 2 subnets" in message
    # The zones come from infra/facts/regions.py, the table the offline plan answers from: no policy
    # config needed, and the message names both places a newly offered zone can be added.
    [message] = violations("accelerator-single-zone", *stack(zone="usw2-az1"))
    assert "usw2-az1" in message and "['usw2-az4']" in message
    assert "infra/facts/regions.py" in message and "offeredZoneIds in policy/config.test.json" in message
    for region in ("us-east-1", "us-east-2"):
        [zone] = NEURON_REGIONS[region].offerings["trn1.32xlarge"]
        assert not violations("accelerator-single-zone", *stack(zone=zone))
    # A zone the policy config adds is accepted besides the table's.
    assert not violations("accelerator-single-zone", *stack(zone="usw2-az1"), config=ADDED)
    # Where only the region is known (the table's zones are examples), a deploy's look-up decides.
    assert not NEURON_REGIONS["eu-west-1"].zones_sourced
    assert not violations("accelerator-single-zone", *stack({"instanceTypes": ["inf2.48xlarge"]}, zone="euw1-az3"))
    # A zone of a known region that offers no such type says so.
    [message] = violations("accelerator-single-zone", *stack({"instanceTypes": ["trn2.48xlarge"]}, zone="usw2-az4"))
    assert "not offered in this zone's region" in message


def test_efa_interfaces_equal_network_cards():
    assert violations("efa-interfaces-match-cards", *stack(template={"networkInterfaces": efa_nics(4)}))
    # trn1n.32xlarge has 16 network cards: 8 interfaces leave half the bandwidth unused.
    assert violations("efa-interfaces-match-cards", *stack({"instanceTypes": ["trn1n.32xlarge"]}))
    assert not violations(
        "efa-interfaces-match-cards", *stack({"instanceTypes": ["trn1n.32xlarge"]}, {"networkInterfaces": efa_nics(16)})
    )
    # EFA off is allowed.
    assert not violations("efa-interfaces-match-cards", *stack(template={"networkInterfaces": []}))


def test_placement_group_unless_a_reservation_is_targeted():
    no_pg = stack()
    del no_pg[1].inputs["placement"]
    assert violations("placement-group-unless-reserved", *no_pg)
    reserved = copy.deepcopy(no_pg)
    reserved[1].inputs["capacityReservationSpecification"] = {
        "capacityReservationTarget": {"capacityReservationId": "cr-1"}
    }
    assert not violations("placement-group-unless-reserved", *reserved)
    # terraform-aws-eks#3730: a placement group breaks launches into reservations.
    both = stack(template={"instanceMarketOptions": {"marketType": "capacity-block"}})
    assert violations("placement-group-unless-reserved", *both)


def test_capacity_block_type_in_the_launch_template():
    good = stack(
        {"capacityType": "CAPACITY_BLOCK", "instanceTypes": []},
        {"instanceType": "trn1.32xlarge", "instanceMarketOptions": {"marketType": "capacity-block"}},
    )
    assert not violations("capacity-block-launch-template", *good)
    bad = stack({"capacityType": "CAPACITY_BLOCK"})
    assert len(violations("capacity-block-launch-template", *bad)) == 2
    # The type resolved through the launch template makes it an accelerator group for the other rules.
    assert violations(
        "neuron-ami-type",
        *stack(
            {"capacityType": "CAPACITY_BLOCK", "instanceTypes": [], "amiType": "AL2023_x86_64_STANDARD"},
            {"instanceType": "trn1.32xlarge"},
        ),
    )


def test_a_capacity_block_group_is_checked_at_its_first_preview():
    # Stack rules read outputs (pulumi/pulumi step_generator.go AnalyzeResources). A group that sets
    # no instanceTypes (infra/components/accelerators.py, Capacity Block) has them computed by the provider
    # (pulumi_aws NodeGroup.instance_types is a non-optional output), so unknown at its first
    # preview: every accelerator rule must still resolve the type through the launch template.
    group = stack(
        {"capacityType": "CAPACITY_BLOCK", "amiType": "AL2023_x86_64_STANDARD", "taints": []},
        {"instanceType": "trn1.32xlarge", "instanceMarketOptions": {"marketType": "capacity-block"}},
    )
    del group[-1].inputs["instanceTypes"]
    config = parse_config({}, "t")
    known = run_policies(group, config, "us-west-2")
    preview = run_policies(
        [first_preview(r, outputs=True) for r in group],
        config,
        "us-west-2",
        [p for p in POLICIES if p.name in {v.policy for v in known.violations} | {"capacity-block-launch-template"}],
    )
    assert not preview.notes
    assert (
        {v.policy for v in preview.violations}
        == {v.policy for v in known.violations}
        >= {"neuron-ami-type", "neuron-taint"}
    )


def _fsx_stack(fs_zone="usw2-az4", ports=((988, 988), (1018, 1023))):
    sg = (SG, "fsx")
    return [
        *stack(),
        reg(SUBNET, "private", {"availabilityZoneId": fs_zone}),
        reg(SG, "fsx", {}),
        *[
            reg(
                IN,
                f"in-{a}",
                {"ipProtocol": "tcp", "fromPort": a, "toPort": b},
                {"securityGroupId": [sg], "referencedSecurityGroupId": [sg]},
            )
            for a, b in ports
        ],
        reg(
            FSX,
            "fs",
            {"deploymentType": "PERSISTENT_2"},
            {"subnetIds": [(SUBNET, "private")], "securityGroupIds": [sg]},
        ),
    ]


def test_fsx_in_the_accelerator_zone_with_both_lustre_port_ranges():
    assert not violations("fsx-zone-and-lustre-ports", *_fsx_stack())
    [message] = violations("fsx-zone-and-lustre-ports", *_fsx_stack(fs_zone="usw2-az1"))
    assert "usw2-az1" in message
    # The data-on-eks blueprint opened 1021-1023 only, the Neuron sample 988 only (DESIGN §4).
    [message] = violations("fsx-zone-and-lustre-ports", *_fsx_stack(ports=((988, 988), (1021, 1023))))
    assert "1018, 1019, 1020" in message
    assert violations("fsx-zone-and-lustre-ports", *_fsx_stack(ports=((1018, 1023),)))


def test_fsx_ports_found_in_rule_resources_while_inline_rules_are_unknown():
    # aws_security_group's inline ingress is computed (pulumi_aws SecurityGroup.ingress is a
    # non-optional output): unknown at the first preview, where the separate rules are declared.
    config = parse_config({}, "t")
    rule = [p for p in POLICIES if p.name == "fsx-zone-and-lustre-ports"]
    fsx = [first_preview(r, outputs=True) for r in _fsx_stack(ports=((988, 988),))]
    report = run_policies(fsx, config, "us-west-2", rule)
    assert not report.notes
    [message] = [v.message for v in report.violations]
    assert "port(s) 1018, 1019, 1020, 1021, 1022, 1023:" in message  # 988 found in its rule resource
    assert not run_policies(
        [first_preview(r, outputs=True) for r in _fsx_stack()], config, "us-west-2", rule
    ).violations
