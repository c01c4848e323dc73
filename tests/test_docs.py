"""Generated documentation: fresh, complete, and true to the plan and the models.

docs/ and README's generated blocks come from `make docs` (offline/docs/generate.py); these tests
regenerate them from the fixture's plans and check what they say; that the files in this checkout are
fresh for its own stack files is tests/test_team_files.py's.
"""

from __future__ import annotations

import copy
from pathlib import Path

import jsonschema
import pytest
import yaml

from bootstrap.settings import BootstrapConfig
from infra.config.models import StackConfig
from infra.contract import BOOTSTRAP_OUTPUTS, WORKLOAD_OUTPUTS, ClusterOutputs
from infra.facts.neuron import compatible_ami_release
from offline.docs import generate, reference
from offline.plan.runner import REPO_ROOT, run_program
from offline.report import diagram
from tests.fixture_project import FIXTURE_ROOT
from workloads.settings import WorkloadsConfig


def test_every_config_key_has_a_description():
    assert reference.missing_descriptions(StackConfig) == []
    assert reference.missing_descriptions(WorkloadsConfig) == []
    assert reference.missing_descriptions(BootstrapConfig) == []


def test_every_exported_output_has_one_description(dev, workloads_dev):
    # The cluster's outputs are the contract's fields (tests/test_contract.py), each described.
    assert [key for key, _, description in reference.output_rows(ClusterOutputs) if not description.strip()] == []
    assert {key for key, _, _ in reference.output_rows(ClusterOutputs)} >= set(dev.outputs)
    assert set(workloads_dev.outputs) == set(WORKLOAD_OUTPUTS)
    assert set(run_program(FIXTURE_ROOT / "bootstrap", "dev").outputs) == set(BOOTSTRAP_OUTPUTS)


def test_reference_rows_come_from_the_models():
    rows = {row[0]: row for row in reference.key_rows(StackConfig)}
    assert rows["network.azCount"][1:4] == ("integer", "`2`", "≥ 2; ≤ 4")
    assert rows["aws:region"][2] == "required"
    assert rows["acceleratorNodeGroups[].maxSize"][2] == "required"
    assert rows["acceleratorNodeGroups"][2] == "2: `trn1-32xl-ng1`, `trn1n-32xl-ng`"
    assert rows["storage.deploymentType"][3] == "one of `PERSISTENT_2`, `PERSISTENT_1`, `SCRATCH_2`"
    assert rows["storage.dataRepositories[].autoImport"][2] == '`["NEW", "CHANGED", "DELETED"]`'


def _stack_file(path: Path) -> dict:
    return yaml.safe_load(path.read_text())


@pytest.mark.parametrize(
    "schema, stack_file",
    [
        ("trainium-eks", "Pulumi.dev.yaml"),
        ("trainium-eks", "Pulumi.prod.yaml"),
        ("trainium-workloads", "workloads/Pulumi.dev.yaml"),
        ("trainium-workloads", "workloads/Pulumi.prod.yaml"),
        ("trainium-bootstrap", "bootstrap/Pulumi.dev.yaml"),
        ("trainium-bootstrap", "bootstrap/Pulumi.prod.yaml"),
    ],
)
def test_schema_accepts_the_stack_files(schema, stack_file):
    import json

    validator = jsonschema.Draft7Validator(json.loads((REPO_ROOT / f"docs/schema/{schema}.schema.json").read_text()))
    validator.validate(_stack_file(FIXTURE_ROOT / stack_file))


def test_schema_refuses_what_the_program_refuses():
    schema = generate.schemas()["docs/schema/trainium-eks.schema.json"]
    import json

    validator = jsonschema.Draft7Validator(json.loads(schema))
    good = _stack_file(FIXTURE_ROOT / "Pulumi.dev.yaml")
    for bad_key, bad_value in [
        ("trainium-eks:clusterNmae", "typo"),  # unknown key of this project
        ("trainium-eks:network", {"azCount": 9}),  # out of bounds
        ("trainium-eks:upgradePolicy", "SOMETIMES"),  # not an allowed value
        ("trainium-eks:acceleratorNodeGroups", [{"name": "g", "instanceType": "trn1.32xlarge"}]),  # maxSize missing
    ]:
        document = copy.deepcopy(good)
        document["config"][bad_key] = bad_value
        assert list(validator.iter_errors(document)), bad_key
    # Other namespaces (providers) pass; a missing region does not.
    document = copy.deepcopy(good)
    document["config"]["aws:defaultTags"] = {"tags": {"a": "b"}}
    validator.validate(document)
    del document["config"]["aws:region"]
    assert list(validator.iter_errors(document))


def test_workload_schema_takes_an_encrypted_secret():
    import json

    validator = jsonschema.Draft7Validator(json.loads(generate.schemas()["docs/schema/trainium-workloads.schema.json"]))
    document = _stack_file(FIXTURE_ROOT / "workloads/Pulumi.dev.yaml")
    document["config"]["trainium-workloads:hfToken"] = {"secure": "v1:abc"}
    validator.validate(document)


def test_cluster_picture_follows_the_plan(dev, dev_fsx):
    assert "1200 GiB PERSISTENT_2" in diagram.cluster_diagram(dev_fsx.as_json())
    text = diagram.cluster_diagram(dev.as_json())
    zone = dev.outputs["acceleratorZone"]["id"]
    assert f"zone {zone} (accelerator zone)" in text
    for group in dev.outputs["acceleratorNodeGroups"]:
        # The outputs are computed from config; the picture from the declared resources.
        assert (
            f"node group {group['name']}<br/>{group['instanceType']}<br/>{group['minSize']}/0/{group['maxSize']}"
            in text
        )
        assert f"{group['efaInterfaces']} EFA interfaces" in text
    assert text.count("cluster placement group") == len(dev.outputs["acceleratorNodeGroups"])
    # Dev's file system: EFS, Regional, a mount target in each of its two zones.
    assert "Amazon EFS<br/>elastic throughput<br/>2 mount targets" in text and "volcano-system<br/>volcano" in text


def test_capacity_block_group_drawn_without_placement_group(plan_with):
    reservation = {"id": "cr-0c0ffee0c0ffee001", "type": "capacity-block"}
    group = {
        "name": "trn1-32xl-ng1",
        "instanceType": "trn1.32xlarge",
        "maxSize": 4,
        "capacityReservation": reservation,
        "amiReleaseVersion": compatible_ami_release(),
    }
    text = diagram.cluster_diagram(plan_with(acceleratorNodeGroups=[group]).as_json())
    assert "node group trn1-32xl-ng1<br/>trn1.32xlarge<br/>0/0/4" in text and "Capacity Block" in text
    assert "cluster placement group" not in text


def test_workload_picture_attaches_jobs_to_queue_claim_and_node_group(dev, workloads_dev):
    text = diagram.workloads_diagram(workloads_dev.as_json(), dev.outputs)
    assert "w_Job_bert_train --> g_trn1_32xl_ng1" in text and "w_Job_bert_train --> q_test" in text
    assert "w_Job_bert_train --> c_fsx_claim" in text
    assert "w_RayJob_llama2_pretraining_job --> g_trn1n_32xl_ng" in text
    assert "w_RayJob_llama2_pretraining_job --> g_job_support" in text  # the head, on the job-support group
    assert "w_RayJob_llama2_pretraining_job --> q_llama2_training_queue" in text
    assert "w_MPIJob_cluster_check_allreduce --> g_trn1_32xl_ng1" in text
    assert (
        "w_Job_stage_wikicorpus --> g_job_support" in text
        and "g_trn1" not in text.split("w_Job_stage_wikicorpus -->")[1].split("\n")[0]
    )
    assert "w_Deployment_tensorboard --> g_core" in text


def test_readme_blocks_need_their_markers():
    with pytest.raises(ValueError, match="cost summary"):
        generate.fill_blocks("no markers here", {"cost summary": "x"})


def test_s3_links_are_drawn_from_the_associations(plan_with):
    imported = {"fileSystemPath": "/default/datasets", "s3Path": "s3://my-training-data/datasets"}
    both_ways = {
        "fileSystemPath": "/default/results",
        "s3Path": "s3://my-training-results/runs",
        "autoExport": ["NEW", "CHANGED"],
    }
    text = diagram.cluster_diagram(plan_with(storage={"dataRepositories": [imported, both_ways]}).as_json())
    assert '"s3://my-training-data/datasets"' in text and '"s3://my-training-results/runs"' in text
    # The arrow follows the association's event policies: autoExport defaults to [] (import only).
    link = next(line.strip() for line in text.splitlines() if "|/default/datasets|" in line)
    assert link.startswith("s3_") and link.endswith("fs_fsx_training") and "-->" in link and "<-->" not in link
    assert "fs_fsx_training <-->|/default/results| s3_" in text


def test_pictures_are_balanced_mermaid(dev, prod):
    # A cheap guard against a broken picture: every subgraph is closed and every label quoted.
    for plan in (dev, prod):
        text = diagram.cluster_diagram(plan.as_json())
        lines = [line.strip() for line in text.splitlines()]
        assert lines[0].startswith("flowchart")
        assert sum(line.startswith("subgraph ") for line in lines) == sum(line == "end" for line in lines)
        assert all(text.count(c) % 2 == 0 for c in '"')


def test_schema_takes_what_pulumi_config_set_writes():
    # `pulumi config set logRetentionDays 30` (no --type) writes "30", `ecrForceDelete false`
    # writes "false" (pulumi v3 pkg/cmd/pulumi/config/config.go: config.TypeUnknown, written by
    # sdk/go/common/resource/config/value.go MarshalYAML as a string); the program reads both.
    import json

    from infra.config.load import raw_from_pulumi_config
    from infra.validate import parse_stack_config

    schema = json.loads(generate.schemas()["docs/schema/trainium-eks.schema.json"])
    assert schema["$schema"] == "http://json-schema.org/draft-07/schema#"
    validator = jsonschema.Draft7Validator(schema)
    document = _stack_file(FIXTURE_ROOT / "Pulumi.dev.yaml")
    document["config"]["trainium-eks:logRetentionDays"] = "30"
    document["config"]["trainium-eks:ecrForceDelete"] = "false"
    validator.validate(document)
    flat = {k: v if isinstance(v, str) else json.dumps(v) for k, v in document["config"].items()}
    config = parse_stack_config(raw_from_pulumi_config(flat))
    assert config.log_retention_days == 30 and config.ecr_force_delete is False
    # Text that is not the type's text form is still refused.
    document["config"]["trainium-eks:logRetentionDays"] = "thirty"
    assert list(validator.iter_errors(document))
    # `--secret` works on any key: any key may hold {secure: ...}.
    document["config"]["trainium-eks:logRetentionDays"] = {"secure": "v1:abc"}
    document["config"]["trainium-eks:clusterName"] = {"secure": "v1:def"}
    validator.validate(document)


def test_the_documented_versions_are_the_pins():
    # One source: the version table (docs/architecture.md) is generated from infra/facts/versions.py and
    # .pulumi-version; so is the README's Pulumi CLI prerequisite.
    from infra.facts import versions

    table = generate.pinned_versions()
    assert all(f"| {pin.version} |" in table for pin in versions.CHARTS.values())
    assert f"`{versions.MPI_OPERATOR_VERSION}`" in table
    assert f"| {(REPO_ROOT / '.pulumi-version').read_text().strip()} |" in table
    assert generate.pinned_versions() in (REPO_ROOT / "docs" / "architecture.md").read_text()
    assert generate.tool_versions() in (REPO_ROOT / "README.md").read_text()
    assert f"Pulumi CLI {(REPO_ROOT / '.pulumi-version').read_text().strip()}" in generate.tool_versions()


def test_the_readme_cost_box_is_generated_from_the_plan(dev, workloads_dev, prod, workloads_prod):
    # (That README.md carries the box of this checkout's own stacks: tests/test_team_files.py.)
    box = generate.cost_box({"dev": (dev, workloads_dev), "prod": (prod, workloads_prod)}, FIXTURE_ROOT)
    from offline.report import report

    idle = report.cluster_cost(dev)["hourly"]["idle"]
    assert f"| dev cluster idle (nothing running; us-west-2) | {report.money(idle)} per hour" in box
    assert "bertPretraining" in box and "full scale" in box


def test_the_offline_tables_coverage_is_generated_from_them():
    # docs/offline-plan.md says what the tables cover in a generated block, which
    # test_generated_files_are_fresh keeps current, and in no hand-written list of versions beside it.
    from offline.plan import fixtures

    text = generate.offline_tables()
    assert all(version in text for version in fixtures.ADDON_DEFAULT_BUILDS)
    assert all(region in text for region in fixtures.ZONES)
    page = (REPO_ROOT / "docs" / "offline-plan.md").read_text()
    assert generate.fill_blocks(page, {"offline tables": text}) == page  # the page carries exactly that block
    assert "Kubernetes 1.33 and 1.34" not in page


def test_the_trainium2_page_carries_the_catalog_rows():
    # One column per Trainium2 type of the catalog, its figures the row's, an unknown price as unknown.
    from infra.facts.instances import NEURON_INSTANCE_TYPES, TRAINIUM2

    text = generate.trainium2_catalog()
    header, _, *rows = text.splitlines()
    trainium2 = [name for name, facts in NEURON_INSTANCE_TYPES.items() if facts.accelerator == TRAINIUM2]
    assert header == "|  | " + " | ".join(f"`{name}`" for name in trainium2) + " |"
    split = [[cell.strip() for cell in row.strip("|").split(" | ")] for row in rows]
    cells = {label: values for label, *values in split}
    assert cells["logical NeuronCores at LNC 1 / 2"] == ["128 / 64", "128 / 64", "8 / 4"]
    assert cells["instances per UltraServer"][1] == "4"
    assert all(cell.startswith("unknown") for cell in cells["on-demand list price"])
    assert "sa-east-1 (zones unknown)" in cells["regions (zone ids) offering it"][2]
    page = (REPO_ROOT / "docs" / "trainium2.md").read_text()
    assert generate.fill_blocks(page, {"trainium2 catalog": text}) == page
