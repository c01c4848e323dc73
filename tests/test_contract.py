"""The contract between the stacks (infra/contract.py): what the cluster program exports is what
the model describes and what the workload program parses, key for key, nested keys included."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from pydantic import ValidationError

from infra import contract
from infra.config.errors import ConfigError
from offline.plan.runner import PlanResult


def round_trip(outputs: dict[str, Any]) -> dict[str, Any]:
    """The outputs read through the model and written back as the stack exports them. A key the
    model lacks is dropped on the way and a field the stack does not export is added, so any
    difference from ``outputs`` is a key on one side only."""
    return contract.ClusterOutputs.model_validate(outputs).model_dump(mode="json", by_alias=True)


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_the_cluster_exports_exactly_the_model(stack: str, request: pytest.FixtureRequest) -> None:
    plan: PlanResult = request.getfixturevalue(stack)
    assert set(plan.outputs) == set(contract.output_names(contract.ClusterOutputs))
    assert round_trip(plan.outputs) == plan.outputs


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_the_workload_program_parses_what_the_cluster_exports(stack: str, request: pytest.FixtureRequest) -> None:
    plan: PlanResult = request.getfixturevalue(stack)
    assert contract.missing_outputs(plan.outputs) == []
    cluster = contract.parse_contract(plan.outputs)
    assert list(cluster.node_groups) == [g["name"] for g in plan.outputs["acceleratorNodeGroups"]]
    assert cluster.support_placement == {
        key: plan.outputs["jobSupportPlacement"][key] for key in ("nodeSelector", "tolerations")
    }
    assert cluster.volcano_queues == {q["name"]: q["capability"] for q in plan.outputs["volcanoQueues"]}
    assert cluster.claims == plan.outputs["storage"]["claims"]
    assert cluster.service_account == plan.outputs["trainingServiceAccount"]["name"]


def test_the_round_trip_finds_a_key_on_one_side_only(dev: PlanResult) -> None:
    # What the check above would see if the cluster exported a key the model lacks, nested or not...
    extra = copy.deepcopy(dev.outputs)
    extra["acceleratorNodeGroups"][0]["spotPrice"] = "1.0"
    extra["newOutput"] = 1
    assert round_trip(extra) != extra
    # ...or if the model gained a field the cluster does not export.
    lacking = copy.deepcopy(dev.outputs)
    del lacking["storage"]["s3Links"], lacking["region"]
    with pytest.raises(ValidationError) as err:
        round_trip(lacking)
    assert {e["loc"] for e in err.value.errors()} == {("storage", "s3Links"), ("region",)}


def test_the_cluster_program_cannot_export_a_field_the_model_does_not_have() -> None:
    zone = {"name": "us-west-2d", "id": "usw2-az4"}
    assert contract.exported(contract.Zone, **zone) == zone
    with pytest.raises(TypeError, match=r"Zone output: missing \['id'\], unknown \['zone_id'\]"):
        contract.exported(contract.Zone, name="us-west-2d", zone_id="usw2-az4")
    # Keys leave as the model's aliases, whatever the Python name.
    assert list(contract.exported(contract.VolcanoQueue, name="q", capability={})) == ["name", "capability"]
    assert "volcanoQueues" in contract.output_names(contract.ClusterOutputs)


def test_the_workloads_read_a_part_of_the_outputs_and_refuse_a_wrong_shape(dev: PlanResult) -> None:
    assert set(contract.WORKLOAD_INPUTS) < set(dev.outputs) and "kubeconfig" not in contract.WORKLOAD_INPUTS
    assert contract.never_deployed({}) and not contract.never_deployed({"clusterName": "trn-dev"})
    assert contract.missing_outputs({**dev.outputs, "volcanoQueues": None}) == ["volcanoQueues"]
    bad = copy.deepcopy(dev.outputs)
    bad["acceleratorNodeGroups"][0]["neuronDevices"] = "sixteen"
    with pytest.raises(ConfigError) as err:
        contract.parse_contract(bad, "organization/trainium-eks/dev")
    assert str(err.value).count("organization/trainium-eks/dev: output acceleratorNodeGroups[0].neuronDevices: ") == 1


def test_the_round_trip_checks_the_keys_inside_allocatable_and_capacity_block(dev: PlanResult) -> None:
    # Both are plain dicts to the workloads; their keys are part of the contract all the same.
    renamed = copy.deepcopy(dev.outputs)
    group = renamed["acceleratorNodeGroups"][0]
    group["allocatable"] = {"cpu": group["allocatable"]["cpu"], "mem": group["allocatable"]["memory"]}
    group["capacityBlock"] = {"start": "2026-12-01T00:00:00Z", "ends": "2026-12-02T00:00:00Z"}
    with pytest.raises(ValidationError) as err:
        round_trip(renamed)
    assert {e["loc"] for e in err.value.errors()} == {
        ("acceleratorNodeGroups", 0, "allocatable", "memory"),
        ("acceleratorNodeGroups", 0, "capacityBlock", "end"),
    }
    extra = copy.deepcopy(dev.outputs)
    extra["jobSupportPlacement"]["allocatable"]["gpu"] = "0"
    assert round_trip(extra) != extra


def test_a_cluster_stack_from_before_namespace_ids_is_missing_an_output(dev: PlanResult) -> None:
    # The workload program refuses such a stack by name, asking for the cluster's `pulumi up` first
    # (workloads/__main__.py wire).
    outputs = copy.deepcopy(dev.outputs)
    del outputs["namespaceIds"]
    assert contract.missing_outputs(outputs) == ["namespaceIds"]
