"""Every region where the catalog's Neuron types are offered plans offline, with nothing edited but
`aws:region` (and, where only Inferentia2 is offered, groups of a type the region has); a region
without any is refused as such; the policy pack needs no second edit for a new region or namespace."""

from __future__ import annotations

import json
import os

import pytest

from infra.config.errors import ConfigError
from infra.facts.instances import NEURON_INSTANCE_TYPES, instance_hourly, trains
from infra.facts.regions import NEURON_REGIONS, regions_offering
from infra.facts.versions import EKS_ADDON_REGISTRIES
from offline.plan import fixtures
from offline.plan.runner import run_program
from tests.fixture_project import FIXTURE_ROOT, fixture_policy_config
from tests.project_copy import project_copy

TRAINIUM_REGIONS = regions_offering([t for t in NEURON_INSTANCE_TYPES if trains(t)])
INFERENTIA_ONLY = [r for r in NEURON_REGIONS if r not in TRAINIUM_REGIONS]
# Planning takes one to two seconds a region, so `make test` plans one region of each shape the table
# has besides the shipped stacks' (dev us-west-2, prod us-east-2): us-east-1 with Trainium (the
# new-region-and-namespace test below), an Inferentia2 region with all four sizes and the one with
# inf2.xlarge alone; PLAN_EVERY_REGION=1 plans them all. The table checks cover every region on every run.
PLANNED_BY_DEFAULT = ("eu-north-1", "ap-northeast-2")
PLANNED = list(NEURON_REGIONS) if os.environ.get("PLAN_EVERY_REGION") == "1" else list(PLANNED_BY_DEFAULT)


TRAINIUM2 = ("trn2.48xlarge", "trn2u.48xlarge", "trn2.3xlarge")


def test_the_table_covers_every_region_with_its_sources():
    assert TRAINIUM_REGIONS == ["us-west-2", "us-east-1", "us-east-2", "sa-east-1", "ap-south-2", "ap-southeast-4"]
    for name, region in NEURON_REGIONS.items():
        assert region.offerings and set(region.offerings) <= set(NEURON_INSTANCE_TYPES), name
        assert len(region.zones) >= 3 and all(
            zone_id.endswith(tuple(f"-az{n}" for n in range(1, 10))) for _, zone_id in region.zones
        )
        assert all(z in region.zone_ids for zones in region.offerings.values() for z in zones), name
        assert region.as_of == "2026-11-28", name
        # A region comes from the price list, or (Trainium2 alone) from the third-party offering read,
        # which every one of its types then names as such.
        assert "vantage" in region.source or set(region.offerings) <= set(TRAINIUM2), name
        assert "vantage" in region.source or "third-party" in region.source, name
        # The zone names are the region's; the ids are one region's (the same prefix).
        assert all(zone.startswith(name) for zone, _ in region.zones), name
        assert len({zone_id.split("-az")[0] for zone_id in region.zone_ids}) == 1, name
        # Zones of a region known only as a region say they are examples.
        assert region.zones_sourced == (name in TRAINIUM_REGIONS and name != "sa-east-1"), name
        assert region.zones_sourced or "examples" in region.source, name
        # Every Trainium2 offering names the one account's read it comes from (partly verified).
        for instance_type in set(region.offerings).intersection(TRAINIUM2):
            assert "third-party" in region.offering_sources[instance_type], (name, instance_type)
            assert "partly verified" in region.offering_sources[instance_type], (name, instance_type)
        # Every piece the offline plan needs: zones, offerings, the add-on registry, a price per type.
        assert fixtures.ZONES[name] == list(region.zones) and name in fixtures.OFFERINGS
        assert name in EKS_ADDON_REGISTRIES, name
        for instance_type in region.offerings:
            assert (instance_hourly(name, instance_type) is None) == (instance_type in TRAINIUM2)
    assert "seed stacks" in NEURON_REGIONS["us-east-2"].offering_sources["trn2.48xlarge"]
    assert regions_offering(["trn2.48xlarge"]) == ["us-east-2", "ap-south-2"]
    assert regions_offering(["trn2u.48xlarge"]) == ["ap-south-2"]
    assert regions_offering(["trn2.3xlarge"]) == ["sa-east-1", "ap-south-2", "ap-southeast-4"]
    assert NEURON_REGIONS["ap-southeast-4"].offerings["trn2.3xlarge"] == {"apse4-az3"}
    # Zone ids are one physical zone whichever account: no id is in two regions.
    ids = [z for region in NEURON_REGIONS.values() for z in region.zone_ids]
    assert len(ids) == len(set(ids))


def _groups_for(region: str, groups: list[dict]) -> list[dict]:
    """The dev stack's groups where they are offered; else one group of the region's largest Inferentia2."""
    offered = NEURON_REGIONS[region].offerings
    if all(g["instanceType"] in offered for g in groups):
        return groups
    largest = [t for t in NEURON_INSTANCE_TYPES if t in offered][-1]
    return [{**groups[0], "name": "inf2-ng", "instanceType": largest, "maxSize": 2}]


@pytest.mark.parametrize("region", PLANNED)
def test_dev_plans_in_every_region(region, tmp_path, capsys):
    from offline.plan import command

    def edit(config: dict) -> None:
        config["aws:region"] = region
        key = "trainium-eks:acceleratorNodeGroups"
        config[key] = _groups_for(region, config[key])

    project = project_copy(tmp_path / "eks", edit=edit)
    # The shipped policy config, unedited: nothing mandatory in the new region (exit 0).
    argv = ["--stack", "dev", "--project-dir", str(project), "--policy-config", str(fixture_policy_config("dev"))]
    assert command.main([*argv, "--out", str(tmp_path / "out")]) == 0
    text = capsys.readouterr().out
    plan = json.loads((tmp_path / "out" / "trainium-eks" / "dev" / "resources.json").read_text())
    assert plan["outputs"]["region"] == region
    assert plan["outputs"]["acceleratorZone"]["id"] in NEURON_REGIONS[region].zone_ids
    # Outside the regions the service and general-purpose prices were read for, what has no price says
    # unknown, never $0.000; the accelerator groups are priced (read for this region).
    if region not in ("us-east-1", "us-east-2", "us-west-2"):
        assert "cluster idle unknown (no line has a price)" in text and "$0.000/h" not in text
    if all(instance_hourly(region, t) is None for t in NEURON_REGIONS[region].offerings):
        # Trainium2 alone, which has no on-demand list price: unknown, never $0.
        assert "full scale unknown (no line has" in text
    else:
        assert "full scale at least $" in text or "full scale $" in text


def test_a_region_without_any_neuron_type_is_refused_before_anything_is_planned(tmp_path):
    def edit(config: dict) -> None:
        config["aws:region"] = "ca-central-1"

    with pytest.raises(ConfigError) as refused:
        run_program(project_copy(tmp_path / "eks", edit=edit), "dev")
    [problem] = refused.value.problems
    assert problem.startswith("aws:region = 'ca-central-1': no Neuron instance type")
    assert "us-west-2, us-east-1, us-east-2" in problem and "offline answer" not in problem


def test_a_new_region_and_namespace_need_no_policy_config_edit(tmp_path, capsys):
    # README step 2 moves the region; a team then adds a training namespace for its workloads. Both
    # are stack-file edits only: the shipped policy config plans clean (exit 0, no mandatory finding).
    from offline.plan import command

    def cluster(config: dict) -> None:
        config["aws:region"] = "us-east-1"
        config["trainium-eks:trainingNamespaces"] = ["default", "research"]
        config["trainium-eks:namespaceIds"] = {"default": 20001, "research": 20002}

    def workloads(config: dict) -> None:
        config["trainium-workloads:namespace"] = "research"

    project = project_copy(tmp_path / "eks", edit=cluster)
    project_copy(project / command.WORKLOADS_DIR, FIXTURE_ROOT / command.WORKLOADS_DIR, edit=workloads)
    shipped = fixture_policy_config("dev")
    assert "research" not in shipped.read_text()
    argv = ["--stack", "dev", "--project-dir", str(project), "--policy-config", str(shipped)]
    assert command.main([*argv, "--out", str(tmp_path / "out")]) == 0
    plan = json.loads((tmp_path / "out" / "trainium-workloads" / "dev" / "resources.json").read_text())
    assert {
        r["inputs"]["metadata"]["namespace"]
        for r in plan["resources"]
        if r["type"].startswith("kubernetes:") and "namespace" in r["inputs"].get("metadata", {})
    } == {"research"}
    assert not [v for v in plan["policy"]["violations"] if v["enforcementLevel"] == "mandatory"]
    capsys.readouterr()
