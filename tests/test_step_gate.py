"""Step gates (workloads/step_gate.py, workloads/gate_loop.py): `pulumi up` waits for a precompile,
data or compile step through a batch/v1 Job that fails, with the step's reason, as soon as the step
fails or is stopped.

The gate's command runs here as the pod runs it (its text under `python -c`, with the container's
environment), against a fake Kubernetes API server over HTTPS on localhost that serves each state
the controllers write at their pinned versions:
- Volcano v1.15.1 JobPhase (staging/src/volcano.sh/apis/pkg/apis/batch/v1alpha1/job.go);
- KubeRay v1.7.0 RayJobStatus (ray-operator/apis/ray/v1/rayjob_types.go: jobStatus,
  jobDeploymentStatus, reason, message);
- mpi-operator v0.8.0 conditions and runPolicy.suspend (pkg/apis/kubeflow/v2beta1/types.go).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from infra.facts import versions
from offline.plan.runner import PlanResult
from tests.fake_api import TOKEN, FakeApi
from workloads import deadlines, gate_loop, step_gate

NS = "default"


@pytest.fixture
def api() -> Iterator[FakeApi]:
    fake = FakeApi()
    yield fake
    fake.close()


@pytest.fixture
def account(api: FakeApi, tmp_path: Path) -> Path:
    """The service account directory as the kubelet mounts it: a token and the API server's CA."""
    where = tmp_path / "serviceaccount"
    api.write_account(where, NS)
    return where


def volcano_precompile() -> dict[str, Any]:
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": "bert-precompile", "namespace": NS},
    }


def rayjob_data() -> dict[str, Any]:
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayJob",
        "metadata": {"name": "llama2-generate-pretraining-test-data", "namespace": NS},
    }


def mpijob_compile() -> dict[str, Any]:
    return {
        "apiVersion": "kubeflow.org/v2beta1",
        "kind": "MPIJob",
        "metadata": {"name": "llama2-compile", "namespace": NS},
    }


def run_gate(
    api: FakeApi, account: Path, tmp_path: Path, step: dict[str, Any], states: list[Any], deadline: float = 20
) -> tuple[int, str, float, subprocess.CompletedProcess[str]]:
    """The gate Job's container command, run as the kubelet runs it (command, no shell) with its
    environment, the API server's address the kubelet adds, and local paths for the mounted files;
    returns the exit code, the termination message and how long it took."""
    job = step_gate.gate_job(step, "w", 60, {"role": "core"})
    container = job["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e["value"] for e in container["env"]}
    assert env["GATE_PATH"] == step_gate.api_path(step)
    api.answers[("GET", env["GATE_PATH"])] = list(states)
    termination = tmp_path / "termination-log"
    env.update(
        KUBERNETES_SERVICE_HOST="127.0.0.1",
        KUBERNETES_SERVICE_PORT=str(api.port),
        SERVICE_ACCOUNT_DIR=str(account),
        GATE_TERMINATION_LOG=str(termination),
        GATE_POLL_SECONDS="0.1",
        GATE_DEADLINE_SECONDS=str(deadline),
        PATH=os.environ["PATH"],
    )
    command = container["command"]
    assert command[:2] == ["python", "-c"]
    start = time.monotonic()
    run = subprocess.run([sys.executable, *command[1:]], env=env, capture_output=True, text=True, timeout=60)
    took = time.monotonic() - start
    message = termination.read_text() if termination.exists() else ""
    assert all(r["auth"] == f"Bearer {TOKEN}" for r in api.requests)
    return run.returncode, message, took, run


def volcano(phase: str, reason: str = "", message: str = "") -> dict[str, Any]:
    return {**volcano_precompile(), "status": {"state": {"phase": phase, "reason": reason, "message": message}}}


def rayjob(
    deployment: str, job: str = "", reason: str = "", message: str = "", suspend: bool = False
) -> dict[str, Any]:
    status = {"jobDeploymentStatus": deployment, "jobStatus": job, "reason": reason, "message": message}
    return {**rayjob_data(), "spec": {"suspend": suspend}, "status": status}


def mpijob(*conditions: tuple[str, str, str], suspend: bool = False) -> dict[str, Any]:
    found = [
        {"type": t, "status": "True", "reason": r, "message": m, "lastTransitionTime": f"2026-11-27T10:0{i}:00Z"}
        for i, (t, r, m) in enumerate(conditions)
    ]
    return {**mpijob_compile(), "spec": {"runPolicy": {"suspend": suspend}}, "status": {"conditions": found}}


FAILURES = [
    pytest.param(
        volcano_precompile(),
        [volcano("Pending"), volcano("Running"), volcano("Failed", "PodFailed", "task worker-0 failed")],
        "Job default/bert-precompile did not succeed: phase Failed (PodFailed: task worker-0 failed)",
        id="volcano-failed",
    ),
    pytest.param(
        volcano_precompile(),
        [volcano("Running"), volcano("Aborted", "CapacityBlockEnding")],
        "Job default/bert-precompile did not succeed: phase Aborted (CapacityBlockEnding)",
        id="volcano-aborted-by-the-watchdog",
    ),
    pytest.param(
        volcano_precompile(),
        [volcano("Terminated", "PendingTimeout", "the gang did not run within 2700 s")],
        "phase Terminated (PendingTimeout: the gang did not run within 2700 s)",
        id="volcano-terminated",
    ),
    pytest.param(
        rayjob_data(),
        [rayjob("Initializing"), rayjob("Running", "RUNNING"), rayjob("Failed", "FAILED", "AppFailed", "exit 1")],
        "RayJob default/llama2-generate-pretraining-test-data did not succeed: jobDeploymentStatus Failed, "
        "jobStatus FAILED (AppFailed: exit 1)",
        id="rayjob-app-failed",
    ),
    pytest.param(
        rayjob_data(),
        [rayjob("Failed", "", "DeadlineExceeded", "The RayJob has passed the activeDeadlineSeconds")],
        "jobDeploymentStatus Failed, jobStatus none yet (DeadlineExceeded: The RayJob has passed",
        id="rayjob-deadline",
    ),
    pytest.param(
        rayjob_data(),
        [rayjob("Complete", "STOPPED")],
        "jobDeploymentStatus Complete, jobStatus STOPPED",
        id="rayjob-stopped",
    ),
    pytest.param(
        rayjob_data(),
        [rayjob("Running", "RUNNING", suspend=True)],
        "suspended (spec.suspend: true)",
        id="rayjob-suspended-by-the-watchdog",
    ),
    pytest.param(
        mpijob_compile(),
        [mpijob(("Created", "MPIJobCreated", "")), mpijob(("Created", "", ""), ("Failed", "DeadlineExceeded", "Job was active longer than specified deadline"))],
        "MPIJob default/llama2-compile did not succeed: condition Failed (DeadlineExceeded: Job was active longer",
        id="mpijob-failed",
    ),
    pytest.param(
        mpijob_compile(),
        [mpijob(("Created", "MPIJobCreated", "")), mpijob(("Created", "MPIJobCreated", ""), suspend=True)],
        "suspended (spec.runPolicy.suspend: true), condition Created (MPIJobCreated): the gang watchdog suspends",
        id="mpijob-suspended-by-the-watchdog",
    ),
]  # fmt: skip


@pytest.mark.parametrize(("step", "states", "expected"), FAILURES)
def test_a_failed_or_stopped_step_fails_the_gate_in_seconds_with_its_reason(
    api: FakeApi, account: Path, tmp_path: Path, step: dict[str, Any], states: list[Any], expected: str
) -> None:
    code, message, took, run = run_gate(api, account, tmp_path, step, states)
    assert code == gate_loop.EXIT_FAILED, run.stderr
    assert expected in message and f"kubectl describe {gate_loop.KUBECTL[step['kind']]}/" in message
    # The verdict is also the log's last line: FallbackToLogsOnError's source if the file cannot be written.
    assert run.stderr.strip().splitlines()[-1] == message
    # Polled until the failure and no further; well within a minute, not the await bound.
    assert len(api.requests) == len(states) and took < 10


SUCCESSES = [
    pytest.param(volcano_precompile(), [volcano("Pending"), volcano("Running"), volcano("Completing"), volcano("Completed")], id="volcano"),
    pytest.param(rayjob_data(), [rayjob(""), rayjob("Running", "PENDING"), rayjob("Running", "SUCCEEDED")], id="rayjob"),
    pytest.param(mpijob_compile(), [mpijob(("Created", "", "")), mpijob(("Created", "", ""), ("Running", "", "")), mpijob(("Created", "", ""), ("Succeeded", "MPIJobSucceeded", ""))], id="mpijob"),
]  # fmt: skip


@pytest.mark.parametrize(("step", "states"), SUCCESSES)
def test_a_step_that_succeeds_passes_the_gate(
    api: FakeApi, account: Path, tmp_path: Path, step: dict[str, Any], states: list[Any]
) -> None:
    code, message, _, run = run_gate(api, account, tmp_path, step, states)
    assert code == 0, run.stderr
    assert message.startswith(f"{step['kind']} default/{step['metadata']['name']} succeeded")
    # Each state it waited through is logged once, then the verdict.
    assert run.stdout.splitlines() == [
        f"{step['kind']} default/{step['metadata']['name']}: {gate_loop.VERDICTS[step['kind']](s)[1]}"
        for s in states[:-1]
    ] + [message]


def test_a_step_still_running_at_the_deadline_fails_the_gate_with_what_it_last_saw(
    api: FakeApi, account: Path, tmp_path: Path
) -> None:
    # A Retrying RayJob is not finished (KubeRay v1.7.0 checkBackoffLimitAndUpdateStatusIfNeeded).
    states = [rayjob("Running", "RUNNING"), rayjob("Retrying", "FAILED")]
    code, message, took, _ = run_gate(api, account, tmp_path, rayjob_data(), states, deadline=1)
    assert code == gate_loop.EXIT_DEADLINE and 1 <= took < 10
    assert (
        "did not finish within 1 s" in message
        and "last seen: jobDeploymentStatus Retrying, jobStatus FAILED" in message
    )


def test_an_mpijob_the_watchdog_suspended_at_its_pending_bound_fails_the_gate_at_once(
    api: FakeApi, account: Path, tmp_path: Path
) -> None:
    # The watchdog's own sweep (workloads/watchdog_loop.py) over a compile that never ran, its patch
    # applied as the API server's merge patch would, then the gate a later `pulumi up` creates.
    from workloads import watchdog_loop

    created = "2026-11-27T10:00:00Z"
    pending = mpijob(("Created", "MPIJobCreated", ""))
    pending["metadata"] |= {
        "uid": "u1",
        "creationTimestamp": created,
        "annotations": {watchdog_loop.ANNOTATION: "2700"},
    }
    patches: list[dict[str, Any]] = []

    def watchdog_api(method: str, path: str, body: dict[str, Any] | None) -> dict[str, Any]:
        if method == "PATCH":
            patches.append(body or {})
        return {"items": [pending]} if method == "GET" and path.endswith("/mpijobs") else {}

    start = watchdog_loop._time(created)
    assert start is not None
    now = start + 2701
    assert watchdog_loop.sweep(watchdog_api, NS, now) == ["MPIJob/llama2-compile: PendingTimeout"]
    suspended = json.loads(json.dumps(pending))
    suspended["spec"]["runPolicy"] |= patches[0]["spec"]["runPolicy"]
    code, message, took, _ = run_gate(api, account, tmp_path, mpijob_compile(), [suspended])
    assert code == gate_loop.EXIT_FAILED and took < 10
    assert "MPIJob default/llama2-compile did not succeed: suspended (spec.runPolicy.suspend: true)" in message


def test_a_deleted_step_fails_the_gate_and_api_errors_are_retried(api: FakeApi, account: Path, tmp_path: Path) -> None:
    code, message, _, _ = run_gate(api, account, tmp_path, volcano_precompile(), [500, 403, volcano("Running"), 404])
    assert code == gate_loop.EXIT_GONE and len(api.requests) == 4
    assert message == "Job default/bert-precompile no longer exists: deleted while `pulumi up` waited for it"


def test_the_loop_is_the_standard_library_alone() -> None:
    source = step_gate.loop_source()
    assert "from workloads" not in source and "import pulumi" not in source
    check = "import sys; compile(sys.stdin.read(), 'gate', 'exec')"
    assert subprocess.run([sys.executable, "-I", "-c", check], input=source, text=True).returncode == 0


# --- the rendered objects ----------------------------------------------------------------------------


def objects(plan: PlanResult) -> dict[tuple[str, str], Any]:
    return {
        (r.type.rsplit(":", 1)[-1], r.inputs["metadata"]["name"]): r
        for r in plan.registrations
        if isinstance(r.inputs.get("metadata"), dict) and "name" in r.inputs["metadata"]
    }


GATED = {
    # step kind and name -> its workload's gate account, and `up`'s wait for it (workloads/deadlines.py)
    ("Job", "bert-precompile"): "bert-pretraining-gate",
    ("RayJob", "llama2-generate-pretraining-test-data"): "ray-llama2-gate",
    ("RayJob", "llama2-precompilation-job"): "ray-llama2-gate",
    ("MPIJob", "llama2-compile"): "nxd-llama-gate",
}


def test_every_step_a_later_one_needs_is_awaited_through_its_gate(workloads_all: PlanResult) -> None:
    found = objects(workloads_all)
    gates = {name: r for (kind, name), r in found.items() if kind == "Job" and step_gate.is_gate(r.inputs)}
    assert set(gates) == {f"{name}-gate" for _, name in GATED}
    for (kind, name), account_name in GATED.items():
        step, gate = found[(kind, name)], gates[f"{name}-gate"]
        annotations = step.inputs["metadata"]["annotations"]
        assert annotations["pulumi.com/skipAwait"] == "true" and "pulumi.com/waitFor" not in annotations
        # After its step, replaced with it (its UID in the pod template), and replaced after a failure.
        assert step.urn in gate.dependencies and gate.property_dependencies["spec"] == [step.urn]
        assert gate.lifecycle["replaceOnChanges"] == ["*"] and gate.lifecycle["deleteBeforeReplace"] is True
        # What follows the step waits for the gate but follows the step: a new gate replaces no job.
        followers = [r for r in workloads_all.registrations if gate.urn in r.dependencies]
        assert followers and all(r.property_dependencies["spec"] == [step.urn] for r in followers), name
        spec = gate.inputs["spec"]
        pod = spec["template"]["spec"]
        (container,) = pod["containers"]
        env = {e["name"]: e["value"] for e in container["env"]}
        wait = int(gate.inputs["metadata"]["annotations"]["pulumi.com/timeoutSeconds"])
        assert spec["backoffLimit"] == 0 and spec["activeDeadlineSeconds"] == wait - 60
        assert int(env["GATE_DEADLINE_SECONDS"]) == wait - 120
        assert env["GATE_KIND"] == kind and env["GATE_NAME"] == name and env["GATE_NAMESPACE"] == NS
        assert container["image"] == versions.PYTHON_SLIM_IMAGE and container["command"][:2] == ["python", "-c"]
        assert container["terminationMessagePolicy"] == "FallbackToLogsOnError"
        assert container["securityContext"]["readOnlyRootFilesystem"] is True
        assert pod["serviceAccountName"] == account_name and pod["automountServiceAccountToken"] is True
        assert pod["securityContext"]["runAsNonRoot"] is True and pod["restartPolicy"] == "Never"
        # On the system nodes, beside the gang watchdog: it launches no node of its own.
        watchdog = found[("Deployment", "gang-watchdog")].inputs["spec"]["template"]["spec"]
        assert pod["nodeSelector"] == watchdog["nodeSelector"]
    # `up` waits for each gate what it waited for the step before: the step's bound and the margin.
    assert int(gates["llama2-compile-gate"].inputs["metadata"]["annotations"]["pulumi.com/timeoutSeconds"]) == (
        found[("MPIJob", "llama2-compile")].inputs["spec"]["runPolicy"]["activeDeadlineSeconds"]
        + deadlines.AWAIT_MARGIN_MINUTES * 60
    )


def test_each_gate_account_may_only_get_its_workloads_gated_steps(workloads_all: PlanResult) -> None:
    found = objects(workloads_all)
    for account_name in set(GATED.values()):
        steps = sorted(name for (_, name), a in GATED.items() if a == account_name)
        (rule,) = found[("Role", account_name)].inputs["rules"]
        assert rule["verbs"] == ["get"] and rule["resourceNames"] == steps
        assert len(rule["apiGroups"]) == 1 and len(rule["resources"]) == 1
        binding = found[("RoleBinding", account_name)].inputs
        assert binding["roleRef"]["name"] == account_name and binding["subjects"][0]["name"] == account_name
    assert {tuple(found[("Role", a)].inputs["rules"][0]["resources"]) for a in set(GATED.values())} == {
        ("jobs",),
        ("rayjobs",),
        ("mpijobs",),
    }


def test_a_last_step_and_a_compile_without_training_have_no_gate(workloads_with) -> None:
    result = workloads_with(
        bertPretraining={"nodeGroup": "trn1-32xl-ng1", "nodes": 2, "precompile": False},
        rayLlama2={"nodeGroup": "trn1n-32xl-ng", "workers": 2, "steps": ["train"], "trainSteps": 20},
    )
    assert not [r for r in result.registrations if step_gate.is_gate(r.inputs)]
    assert not [r for r in result.registrations if r.inputs.get("metadata", {}).get("name", "").endswith("-gate")]
