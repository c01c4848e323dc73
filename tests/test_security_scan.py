"""checkov over everything the stacks render (cluster and workloads, dev and prod) and the
training images: no failed check that ``security/checkov-justifications.yaml`` does not
justify, and no justification left that matches nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from offline.plan.runner import PlanResult
from tests import checkov_scan
from tests.checkov_scan import Finding, Justification

# A workflow of the tests' own with a script injection, scanned with the repository's.
INSECURE_WORKFLOW = "insecure-ci.yml"


def insecure_workflows(root: Path) -> Path:
    workflows = root / ".github" / "workflows"
    workflows.mkdir(parents=True)
    (workflows / INSECURE_WORKFLOW).write_text(
        "name: ci\non: [pull_request_target]\njobs:\n  test:\n    runs-on: ubuntu-latest\n"
        '    steps:\n      - run: echo "${{ github.event.pull_request.title }}"\n'
    )
    return workflows


@pytest.fixture(scope="session")
def scan(
    dev: PlanResult, prod: PlanResult, workloads_all: PlanResult, workloads_prod: PlanResult, tmp_path_factory
) -> list[Finding]:
    """One checkov run for every test here (starting checkov is most of a scan's time): what the
    stacks render, the Dockerfiles, the repository's workflows and INSECURE_WORKFLOW."""
    out = checkov_scan.render([dev, workloads_all, prod, workloads_prod], tmp_path_factory.mktemp("manifests"))
    extra = insecure_workflows(tmp_path_factory.mktemp("insecure"))
    return checkov_scan.run_checkov(out, workflows=(checkov_scan.WORKFLOWS_DIR, extra))


def of_insecure_workflow(finding: Finding) -> bool:
    return finding.object.startswith(f"Workflow/{INSECURE_WORKFLOW}/")


@pytest.fixture(scope="session")
def findings(scan: list[Finding]) -> list[Finding]:
    """The findings in the repository's own files."""
    return [f for f in scan if not of_insecure_workflow(f)]


def test_every_failed_check_is_justified(findings: list[Finding]) -> None:
    missing = checkov_scan.unjustified(findings, checkov_scan.load_justifications())
    assert not missing, "fix these, or justify them in security/checkov-justifications.yaml:\n" + "\n".join(
        map(str, missing)
    )


def test_no_justification_is_stale(findings: list[Finding]) -> None:
    left = checkov_scan.stale(findings, checkov_scan.load_justifications())
    assert not left, "these justifications match no finding any more; remove them:\n" + "\n".join(left)


def test_the_scan_sees_the_pods_inside_custom_resources(findings: list[Finding], workloads_all: PlanResult) -> None:
    # checkov 3.3.30 has no notion of Volcano Jobs, RayJobs or MPIJobs: they are scanned as the
    # pods they make, so their pods' settings are judged like any other pod's.
    objects = {f.object for f in findings}
    assert {
        "Pod/default/bert-train-worker-0",
        "Pod/default/llama2-pretraining-job-workergroup",
        "Pod/default/llama2-train-worker",
    } <= objects
    # The batch/v1 Job bert-precompile-gate (workloads/step_gate.py) is scanned as what it is.
    assert not any(
        o.startswith(("Job/default/bert-", "RayJob/", "MPIJob/")) and not o.endswith("-gate") for o in objects
    )


def test_an_unjustified_and_a_stale_entry_are_both_reported() -> None:
    findings = [
        Finding("CKV_K8S_23", "Pod/default/bert-train-worker-0"),
        Finding("CKV_K8S_20", "Deployment/default/tensorboard"),
    ]
    justifications = [Justification("CKV_K8S_23", ("Pod/*/bert-*", "Pod/*/gone"), "root for Neuron")]
    assert checkov_scan.unjustified(findings, justifications) == [findings[1]]
    assert checkov_scan.stale(findings, justifications) == ["CKV_K8S_23 Pod/*/gone"]


def test_every_justification_has_a_reason(tmp_path: Path) -> None:
    bad = tmp_path / "j.yaml"
    bad.write_text("- check: CKV_K8S_23\n  objects: [Pod/*/x]\n  reason: ''\n")
    with pytest.raises(ValueError, match="reason"):
        checkov_scan.load_justifications(bad)


@pytest.mark.parametrize("pattern", ["Pod/*/*", "*/default/*", "Dockerfile/*", "Job/default/**", "*"])
def test_a_blanket_justification_is_refused(tmp_path: Path, pattern: str) -> None:
    # A pattern that names no object absorbs every later finding of its check unseen.
    bad = tmp_path / "j.yaml"
    bad.write_text(f"- check: CKV_K8S_15\n  objects: ['{pattern}']\n  reason: pinned\n")
    with pytest.raises(ValueError, match="name no object"):
        checkov_scan.load_justifications(bad)


def test_every_justification_names_its_objects() -> None:
    entries = checkov_scan.load_justifications()
    assert entries and not [p for j in entries for p in j.objects if checkov_scan.blanket_pattern(p)]
    assert not checkov_scan.blanket_pattern("Pod/*/bert-*-worker-*")


def test_the_scan_sees_controller_made_pods(findings: list[Finding]) -> None:
    # KubeRay's submitter pods are made from our submitterPodTemplate: scanned like any pod.
    assert any(f.object == "Pod/default/llama2-pretraining-job-submitter" for f in findings)


def test_checkov_resource_names_become_kind_namespace_name() -> None:
    assert (
        checkov_scan.object_key("kubernetes", "Deployment.research.tensorboard", "/x.yaml")
        == "Deployment/research/tensorboard"
    )
    assert (
        checkov_scan.object_key("dockerfile", "/nxd-llama/Dockerfile.", "/nxd-llama/Dockerfile")
        == "Dockerfile/nxd-llama"
    )


def test_workflows_are_scanned_once_they_exist(scan: list[Finding]) -> None:
    # Script injection from an untrusted pull request title (CKV_GHA_2), named by file and step.
    assert Finding("CKV_GHA_2", f"Workflow/{INSECURE_WORKFLOW}/jobs(test).steps[1]") in scan
