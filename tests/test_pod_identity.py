"""Who the workload pods run as: every pod that mounts its namespace's FSx claim runs as that
namespace's id (the cluster's namespaceIds), user and group, never root, in the shipped dev and prod
workload stacks (tests/stacks) and with every workload on; and it has a HOME it can write and a user
name, which the id's missing passwd entry would not give it.

The pods of NxD Training and the cluster check are not checked here: their identity comes with
their MPI workers' non-root sshd (workloads/nxd_llama.py, workloads/cluster_check.py)."""

from __future__ import annotations

from typing import Any

import pytest

from offline.plan.runner import PlanResult
from tests.test_security_posture import containers, pods, restricted_violations
from workloads import pods as workload_pods

# Images whose processes run as the namespace's id and write under HOME; the proxy (nginx) needs none.
OUR_IMAGES = ("bert-pretrain", "ray-llama2", "cmd-shell", "nxd-llama")


def claim_pods(plan: PlanResult) -> list[tuple[str, str, dict[str, Any]]]:
    """(Kind/object/role, namespace, pod spec) of every pod that mounts a claim."""
    return [
        (name, namespace, spec)
        for name, namespace, labels, spec in pods(plan)
        if any("persistentVolumeClaim" in v for v in spec.get("volumes", []))
    ]


def workload_id(cluster: PlanResult, workloads: PlanResult) -> tuple[str, int]:
    namespace = workloads.outputs["namespace"]
    return namespace, cluster.outputs["namespaceIds"][namespace]


@pytest.fixture(params=["dev", "prod", "all"])
def stack(request: pytest.FixtureRequest) -> tuple[PlanResult, PlanResult]:
    cluster = request.getfixturevalue("prod" if request.param == "prod" else "dev")
    return cluster, request.getfixturevalue(f"workloads_{request.param}")


# Every kind of pod that mounts the claim, in the stacks that run it.
EXPECTED = {
    "dev": {
        "Job/bert-train/worker-0",
        "Job/bert-train/worker-1",
        "RayJob/llama2-generate-pretraining-test-data/head",
        "RayJob/llama2-pretraining-job/head",
        "RayJob/llama2-pretraining-job/workergroup",
        "Job/stage-wikicorpus/pod",
        "Pod/cmd-shell/pod",
        "Deployment/tensorboard/pod",
    },
    "prod": {"Job/stage-redpajama/pod", "Deployment/tensorboard/pod"},
    "all": {"Job/bert-precompile/worker-0", "Job/stage-redpajama/pod", "RayJob/llama2-precompilation-job/head"},
}


def test_every_pod_that_mounts_the_claim_runs_as_the_namespaces_id(
    request: pytest.FixtureRequest, stack: tuple[PlanResult, PlanResult]
) -> None:
    cluster, workloads = stack
    namespace, expected_id = workload_id(cluster, workloads)
    # The two stacks' namespaces have different ids, so a pod given the wrong one fails here.
    assert (namespace, expected_id) == {"prod": ("research", 20002)}.get(
        request.node.callspec.params["stack"], ("default", 20001)
    )
    found = claim_pods(workloads)
    assert EXPECTED[request.node.callspec.params["stack"]] <= {name for name, _, _ in found}
    for name, pod_namespace, spec in found:
        assert pod_namespace == namespace, name
        context = spec["securityContext"]
        assert context["runAsUser"] == context["runAsGroup"] == expected_id, name
        assert context["runAsNonRoot"] is True, name
        # No container runs as anyone else (the cluster's admission policy refuses that too).
        for c in containers(spec):
            own = c.get("securityContext", {})
            assert not {"runAsUser", "runAsGroup"} & own.keys() and own.get("runAsNonRoot") is not False, (name, c)


def test_kuberays_submitter_runs_as_the_namespaces_id_and_mounts_no_claim(workloads_dev: PlanResult) -> None:
    (submitter,) = [
        spec for name, _, _, spec in pods(workloads_dev) if name == "RayJob/llama2-pretraining-job/submitter"
    ]
    assert "volumes" not in submitter
    assert submitter["securityContext"]["runAsUser"] == submitter["securityContext"]["runAsGroup"] == 20001
    assert submitter["containers"][0]["env"] == workload_pods.env_list(workload_pods.IDENTITY_ENV)


def test_the_namespaces_processes_have_a_home_they_can_write_and_a_user_name(
    stack: tuple[PlanResult, PlanResult],
) -> None:
    # HOME is /tmp: world-writable in every image (the root file system is writable, or /tmp is an
    # emptyDir, which the kubelet creates world-writable). The user name: getpass.getuser().
    for name, _, spec in claim_pods(stack[1]):
        for c in containers(spec):
            if c["image"].rsplit("/", 1)[-1].split(":")[0] not in OUR_IMAGES:
                continue
            argv = [*c.get("command", []), *c.get("args", [])]
            if any(workload_pods.MPI_USER in part for part in argv):
                # mpi-user gives the id a passwd entry, its home and its name (tests/test_mpi_ssh.py runs it).
                continue
            env = {e["name"]: e.get("value") for e in c.get("env", [])}
            writable = not c["securityContext"].get("readOnlyRootFilesystem") or any(
                not m.get("readOnly") for m in c.get("volumeMounts", [])
            )
            if not writable:
                continue  # it can write nowhere, so needs no home (the cluster check's verdict)
            assert env["HOME"] == "/tmp" and env["USER"] == env["LOGNAME"] == "training", (name, c["name"])
            read_only = c["securityContext"].get("readOnlyRootFilesystem")
            mounts = {m["mountPath"]: m for m in c.get("volumeMounts", [])}
            volumes = {v["name"]: v for v in spec["volumes"]}
            if read_only:
                assert "emptyDir" in volumes[mounts["/tmp"]["name"]], (name, c["name"])


def test_the_pods_that_mount_the_claim_pass_pod_security_restricted(stack: tuple[PlanResult, PlanResult]) -> None:
    # kubernetes/pod-security-admission v0.34.9 policy/check_*.go, as tests/test_security_posture.py
    # reads them: non-root, every capability dropped, RuntimeDefault seccomp, no escalation, and
    # only the volume types "restricted" allows. KubeRay's wait-gcs-ready init container copies the
    # worker container's context (ray_llama2._container), so it passes with it.
    for name, _, spec in claim_pods(stack[1]):
        assert restricted_violations(spec) == [], name
