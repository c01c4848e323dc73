"""Day-two changes keep what exists: a retry after a failed Helm upgrade really retries it, subnet
slots and the accelerator zone stay put when groups are added, and a Trainium group is never
replaced under its running nodes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from infra.config.errors import ConfigError
from infra.config.models import AcceleratorNodeGroupConfig
from infra.lookups import DeployContext
from infra.specs.group_replacement import RunningGroup, group_replacement_problems
from infra.specs.placement import Placement, Zone, choose_placement, deployed_zones_problem, in_deployed_order
from offline.diff import compare
from offline.plan import fixtures
from offline.plan.mocks import ExistingCluster
from offline.plan.runner import REPO_ROOT, PlanResult, run_program, stack_config
from offline.report.plan_output import write_plan
from tests.conftest import fsx_config
from tests.fixture_project import FIXTURE_ROOT
from tests.project_copy import project_copy


@pytest.mark.parametrize("project", ["Pulumi.yaml", "workloads/Pulumi.yaml"])
def test_every_up_refreshes_so_a_failed_helm_upgrade_is_retried(project: str) -> None:
    # pulumi-kubernetes' helm.v3.Release Update checkpoints the new inputs with its partial error
    # (v4.32.0 provider/pkg/provider/helm_release.go, Update); only a Read (refresh) puts the
    # rolled-back release's chart version back into the state, which the next Diff then sees.
    options = yaml.safe_load((REPO_ROOT / project).read_text())["options"]
    assert options == {"refresh": "always"}


def test_helm_releases_roll_back_what_the_refresh_then_reads() -> None:
    # The refresh finds the old chart only because a failed upgrade is rolled back (atomic).
    source = (Path(REPO_ROOT) / "infra/components/kube.py").read_text()
    assert "atomic=True," in source


# --- zones and their address slots -------------------------------------------------------------

US_WEST_2 = [Zone(n, i) for n, i in fixtures.ZONES["us-west-2"]]
US_EAST_2 = [Zone(n, i) for n, i in fixtures.ZONES["us-east-2"]]


def group(name: str, instance_type: str, az_id: str | None = None) -> AcceleratorNodeGroupConfig:
    return AcceleratorNodeGroupConfig(name=name, instance_type=instance_type, max_size=2, az_id=az_id)


# The AMI the shipped stacks pin (their comment says why); an unpinned group is refused.
AMI = {"amiReleaseVersion": "1.35.6-20260625"}
DEV_GROUPS = [group("trn1-32xl-ng1", "trn1.32xlarge"), group("trn1n-32xl-ng", "trn1n.32xlarge")]


def dev_placement(groups: list[AcceleratorNodeGroupConfig], az_count: int = 2) -> Placement:
    return choose_placement(US_WEST_2, fixtures.OFFERINGS["us-west-2"], groups, az_count, "us-west-2")


def test_the_shipped_stacks_keep_their_zones_in_their_address_slots() -> None:
    # The layout dev and prod run today: their subnets' CIDRs must not move.
    dev = dev_placement(DEV_GROUPS)
    assert [z.id for z in dev.zones] == ["usw2-az4", "usw2-az1"]
    prod_groups = [*DEV_GROUPS, group("trn2-48xl-ng", "trn2.48xlarge")]
    prod = choose_placement(US_EAST_2, fixtures.OFFERINGS["us-east-2"], prod_groups, 3, "us-east-2")
    assert [z.id for z in prod.zones] == ["use2-az3", "use2-az1", "use2-az2"]


@pytest.mark.parametrize("position", [0, 1, 2])
def test_a_group_pinned_elsewhere_moves_no_zone_wherever_it_is_listed(position: int) -> None:
    # inf2.xlarge is offered in usw2-az1 (offline/plan/fixtures.py); listed first, the zone order used
    # to follow it and the file system's zone with it.
    groups = list(DEV_GROUPS)
    groups.insert(position, group("inf2-az1", "inf2.xlarge", "usw2-az1"))
    placement = dev_placement(groups)
    assert [z.id for z in placement.zones] == ["usw2-az4", "usw2-az1"]
    assert placement.accelerator_zone.id == "usw2-az4"
    assert placement.group_zones["inf2-az1"].id == "usw2-az1"


def test_zone_slots_do_not_depend_on_the_group_order() -> None:
    groups = [group("a", "trn1.2xlarge", "usw2-az3"), group("b", "inf2.xlarge", "usw2-az1"), *DEV_GROUPS]
    orders = {tuple(z.id for z in dev_placement(g, 3).zones) for g in (groups, groups[::-1], groups[1:] + groups[:1])}
    assert orders == {("usw2-az4", "usw2-az1", "usw2-az3")}


def test_with_every_group_pinned_the_file_system_takes_the_lowest_zone_id() -> None:
    groups = [group("a", "trn1.2xlarge", "usw2-az4"), group("b", "trn1.2xlarge", "usw2-az3")]
    assert dev_placement(groups).accelerator_zone.id == dev_placement(groups[::-1]).accelerator_zone.id == "usw2-az3"


def test_a_running_cluster_refuses_a_zone_it_does_not_have() -> None:
    # dev runs in usw2-az4 and usw2-az1 with azCount 2: a group in usw2-az3 would put az3's subnets on
    # az1's addresses (EC2 refuses the overlap half-way) and replace the core groups.
    deployed = ["usw2-az4", "usw2-az1"]
    assert deployed_zones_problem(deployed, dev_placement(DEV_GROUPS)) is None
    assert deployed_zones_problem(deployed, dev_placement([*DEV_GROUPS, group("b", "inf2.xlarge", "usw2-az1")])) is None
    problem = deployed_zones_problem(deployed, dev_placement([*DEV_GROUPS, group("small", "trn1.2xlarge", "usw2-az3")]))
    assert problem is not None
    assert "the running cluster's zones are usw2-az4, usw2-az1" in problem
    assert "accelerator groups pinned to usw2-az3 (azId) would make them usw2-az4, usw2-az3" in problem
    assert "allowed: groups in usw2-az4, usw2-az1, azCount 2" in problem
    # Raising azCount re-cuts every subnet (infra/specs/cidrs.py slices by the zone count).
    assert deployed_zones_problem(deployed, dev_placement(DEV_GROUPS, 3)) is not None


def test_pulumi_up_refuses_another_zone_set_on_the_running_cluster_before_declaring_anything() -> None:
    config = stack_config(FIXTURE_ROOT, "dev")
    groups = json.loads(config["trainium-eks:acceleratorNodeGroups"])
    groups.append({"name": "trn1-2xl-az3", "instanceType": "trn1.2xlarge", "azId": "usw2-az3", "maxSize": 1, **AMI})
    config["trainium-eks:acceleratorNodeGroups"] = json.dumps(groups)
    running = ExistingCluster({}, zone_ids=("usw2-az4", "usw2-az1"))
    with pytest.raises(ConfigError, match=r"the running cluster's zones are usw2-az4, usw2-az1"):
        run_program(FIXTURE_ROOT, "dev", config, existing_cluster=running)
    # The cluster as it runs is no change of zones.
    run_program(FIXTURE_ROOT, "dev", stack_config(FIXTURE_ROOT, "dev"), existing_cluster=running)


def test_a_cluster_made_when_zones_took_slots_in_list_order_keeps_them() -> None:
    """Zones once took address slots in group-list order, the file system in the first: a cluster made
    that way has the same zones in another order than this program gives a new one. It keeps its own
    (subnets and file system stay); only another zone set is refused."""
    listed = [group("inf2-az1", "inf2.xlarge", "usw2-az1"), *DEV_GROUPS]
    fresh = dev_placement(listed)
    assert [z.id for z in fresh.zones] == ["usw2-az4", "usw2-az1"]
    assert deployed_zones_problem(["usw2-az1", "usw2-az4"], fresh) is None
    kept = in_deployed_order(fresh, ["usw2-az1", "usw2-az4"])
    assert [z.id for z in kept.zones] == ["usw2-az1", "usw2-az4"] and kept.accelerator_zone.id == "usw2-az1"
    assert kept.group_zones == fresh.group_zones


def test_pulumi_up_on_a_cluster_in_the_earlier_zone_order_changes_no_subnet_or_file_system_zone() -> None:
    config = fsx_config(stack_config(FIXTURE_ROOT, "dev"))
    groups = json.loads(config["trainium-eks:acceleratorNodeGroups"])
    groups.insert(0, {"name": "inf2-az1", "instanceType": "inf2.xlarge", "azId": "usw2-az1", "maxSize": 1, **AMI})
    config["trainium-eks:acceleratorNodeGroups"] = json.dumps(groups)
    for running in (("usw2-az1", "usw2-az4"), ("usw2-az4", "usw2-az1")):
        plan = run_program(FIXTURE_ROOT, "dev", config, existing_cluster=ExistingCluster({}, zone_ids=running))
        (fsx,) = plan.of_type("aws:fsx/lustreFileSystem:LustreFileSystem")
        assert fsx.inputs["subnetIds"] == f"subnet-placeholder-network-private-{running[0]}"
        nodes = {r.inputs["availabilityZoneId"]: r.inputs["cidrBlock"] for r in plan.of_type("aws:ec2/subnet:Subnet")
                 if r.name.startswith("network-node-")}  # fmt: skip
        assert nodes[running[0]] == "100.64.0.0/17" and nodes[running[1]] == "100.64.128.0/17"


def test_a_group_added_first_in_another_zone_only_creates(dev: PlanResult, tmp_path: Path) -> None:
    """The plan diff of the shipped dev stack against a copy that lists an inf2 group pinned to
    usw2-az1 first: new resources only, no subnet, core group or file system replaced."""
    base = tmp_path / "base"
    write_plan(dev, base)
    copy = project_copy(
        tmp_path / "project",
        edit=lambda c: c["trainium-eks:acceleratorNodeGroups"].insert(
            0, {"name": "inf2-az1", "instanceType": "inf2.xlarge", "azId": "usw2-az1", "maxSize": 1, **AMI}
        ),
    )
    head = tmp_path / "head"
    write_plan(run_program(copy, "dev"), head)
    (d,) = compare.diff_plan_dirs(base, head)
    kinds = {(c.kind, c.type, c.name) for c in d.changes}
    assert kinds and {k for k, _, _ in kinds} == {"create"}, sorted(kinds)


# --- a running Trainium group is never replaced under its nodes ---------------------------------

RUNNING_TRN1 = RunningGroup(2, ("trn1.32xlarge",), "ON_DEMAND", ("usw2-az4",))


def test_a_change_that_replaces_a_running_group_with_nodes_is_refused() -> None:
    placement = dev_placement(DEV_GROUPS)
    assert group_replacement_problems({"trn1-32xl-ng1": RUNNING_TRN1}, DEV_GROUPS, placement.group_zones) == []
    changed = [group("trn1-32xl-ng1", "trn1.2xlarge", "usw2-az3"), DEV_GROUPS[1]]
    problems = group_replacement_problems(
        {"trn1-32xl-ng1": RUNNING_TRN1}, changed, dev_placement(changed, 3).group_zones
    )
    assert [p.split(": replaces", 1)[0] for p in problems] == [
        "trainium-eks:acceleratorNodeGroups[0].instanceType = 'trn1.2xlarge'",
        "trainium-eks:acceleratorNodeGroups[0].azId = 'usw2-az3'",
    ]
    assert "running node group trn1-32xl-ng1, whose 2 Trainium node(s) EKS terminates" in problems[0]
    assert problems[0].endswith("allowed now: 'trn1.32xlarge'") and problems[1].endswith("allowed now: 'usw2-az4'")


def test_a_group_at_zero_or_not_running_may_be_replaced() -> None:
    changed = [group("trn1-32xl-ng1", "trn1.2xlarge"), DEV_GROUPS[1]]
    zones = dev_placement(changed).group_zones
    idle = RunningGroup(0, ("trn1.32xlarge",), "ON_DEMAND", ("usw2-az4",))
    assert group_replacement_problems({"trn1-32xl-ng1": idle}, changed, zones) == []
    assert group_replacement_problems({}, changed, zones) == []


def test_moving_a_running_group_onto_a_capacity_block_is_refused() -> None:
    block = AcceleratorNodeGroupConfig.model_validate(
        {
            "name": "trn1-32xl-ng1",
            "instanceType": "trn1.32xlarge",
            "maxSize": 2,
            "azId": "usw2-az4",
            "capacityReservation": {"id": "cr-0c0ffee0c0ffee001", "type": "capacity-block"},
        }
    )
    problems = group_replacement_problems({"trn1-32xl-ng1": RUNNING_TRN1}, [block], {block.name: US_WEST_2[3]})
    assert [p.split(": replaces", 1)[0] for p in problems] == [
        "trainium-eks:acceleratorNodeGroups[0].capacityReservation = 'CAPACITY_BLOCK'"
    ]


def test_pulumi_up_refuses_replacing_a_running_group_and_a_preview_warns() -> None:
    """The look-ups behind it (eks:DescribeNodegroup, ec2:DescribeSubnets) run only against a cluster
    that exists; only `pulumi up` refuses, as for the provisioner switch."""
    config = stack_config(FIXTURE_ROOT, "dev")
    groups = json.loads(config["trainium-eks:acceleratorNodeGroups"])
    groups[1]["instanceType"] = "trn1.32xlarge"
    config["trainium-eks:acceleratorNodeGroups"] = json.dumps(groups)
    running = ExistingCluster(
        {},
        node_groups={"trn1-32xl-ng1": "1.35", "trn1n-32xl-ng": "1.35"},
        node_group_sizes={"trn1n-32xl-ng": 1},
        node_group_shapes={
            "trn1-32xl-ng1": ("trn1.32xlarge", "ON_DEMAND", "usw2-az4"),
            "trn1n-32xl-ng": ("trn1n.32xlarge", "ON_DEMAND", "usw2-az4"),
        },
    )
    up = DeployContext(deploying=lambda: True, egress_ipv4=lambda: "52.94.133.131")
    with pytest.raises(ConfigError, match=r"acceleratorNodeGroups\[1\]\.instanceType = 'trn1.32xlarge': replaces"):
        run_program(FIXTURE_ROOT, "dev", config, existing_cluster=running, deploy=up)
    # A preview plans it (and warns): it changes nothing.
    run_program(FIXTURE_ROOT, "dev", config, existing_cluster=running)
    # The shipped stack against the same running cluster: nothing to refuse.
    run_program(FIXTURE_ROOT, "dev", stack_config(FIXTURE_ROOT, "dev"), existing_cluster=running, deploy=up)
