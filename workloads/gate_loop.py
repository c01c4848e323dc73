"""A step gate's poll loop: waits for one Volcano Job, RayJob or MPIJob to succeed and exits
non-zero, with the reason, as soon as it has failed or been stopped. Standard library only: this
file's text is what the gate pod runs (``python -c``, see ``step_gate.py``), and the tests run the
same text against a fake API server.

`pulumi up` awaits the gate, a batch/v1 Job, instead of the step: pulumi-kubernetes' Job awaiter
fails at once on the Job's Failed condition (v4.32.0 provider/pkg/await/job.go, checker/job/check.go
``BackoffLimitExceeded``), and reports the failed pod's termination message (checker/pod/check.go
containerTerminatedError: ``[<reason>] <message>``), which this loop writes; a
`pulumi.com/waitFor` condition on the step itself can only wait for success
(provider/pkg/await/internal/awaiter.go ignores what the condition's check returns before the
timeout).

What counts as failed, from each controller at its pinned version:
- Volcano Job (volcano-sh/volcano v1.15.1 staging/src/volcano.sh/apis/pkg/apis/batch/v1alpha1/job.go
  JobPhase): Completed succeeds; Failed, Terminated and Aborted end it, and Terminating and Aborting
  lead only to those. Aborted is also the gang watchdog's Capacity Block stop; ``vcctl job resume``
  runs it again, and the next `pulumi up` gates it anew.
- RayJob (ray-project/kuberay v1.7.0 ray-operator/apis/ray/v1/rayjob_types.go,
  controllers/ray/rayjob_controller.go): ``jobStatus`` SUCCEEDED succeeds. ``jobDeploymentStatus``
  Failed (its ``reason`` and ``message`` say why: AppFailed, DeadlineExceeded, SubmissionFailed...;
  one with retries left is written as Retrying instead, checkBackoffLimitAndUpdateStatusIfNeeded)
  or ValidationFailed ends it, and so does Complete with any other job status (a stopped Ray job),
  or a suspend (``spec.suspend``, the gang watchdog's Capacity Block stop).
- MPIJob (kubeflow/mpi-operator v0.8.0 pkg/apis/kubeflow/v2beta1/types.go, pkg/controller/
  mpi_job_controller.go): a Succeeded condition succeeds; a Failed condition ends it, and so does
  ``spec.runPolicy.suspend``: the gang watchdog suspends a gang that did not run within its pending
  bound, and a suspended launcher Job's deadline clock stops, so nothing else would end the wait.

A gate that failed is replaced on the next `pulumi up` (its replaceOnChanges ``*`` covers the init
error pulumi records: pulumi/pulumi v3.259.0 pkg/resource/deploy/step_generator.go
applyReplaceOnChanges), so each `up` looks at the step as it is then: still failed, it fails again in
seconds; resumed, it waits for it.
"""

from __future__ import annotations

import json
import os
import ssl
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any

SUCCEEDED, FAILED, WAITING = "succeeded", "failed", "waiting"
# Exit codes: the Job's single pod failing is what fails `pulumi up`.
EXIT_FAILED, EXIT_DEADLINE, EXIT_GONE = 1, 2, 3

VOLCANO_FAILED = ("Failed", "Terminated", "Terminating", "Aborted", "Aborting")
RAY_FAILED = ("Failed", "ValidationFailed", "Suspended", "Suspending")


def _detail(reason: str | None, message: str | None) -> str:
    text = ": ".join(part for part in (reason, message) if part)
    return f" ({text})" if text else ""


def volcano_verdict(job: dict[str, Any]) -> tuple[str, str]:
    state = (job.get("status") or {}).get("state") or {}
    phase = state.get("phase") or "Pending"
    seen = f"phase {phase}{_detail(state.get('reason'), state.get('message'))}"
    if phase == "Completed":
        return SUCCEEDED, seen
    return (FAILED if phase in VOLCANO_FAILED else WAITING), seen


def rayjob_verdict(job: dict[str, Any]) -> tuple[str, str]:
    status = job.get("status") or {}
    deployment, app = status.get("jobDeploymentStatus") or "New", status.get("jobStatus") or "none yet"
    seen = f"jobDeploymentStatus {deployment}, jobStatus {app}{_detail(status.get('reason'), status.get('message'))}"
    if app == "SUCCEEDED":
        return SUCCEEDED, seen
    if (job.get("spec") or {}).get("suspend"):
        return FAILED, f"suspended (spec.suspend: true), {seen}"
    return (FAILED if deployment in RAY_FAILED or deployment == "Complete" else WAITING), seen


def mpijob_verdict(job: dict[str, Any]) -> tuple[str, str]:
    conditions = {
        c.get("type"): c for c in (job.get("status") or {}).get("conditions") or [] if c.get("status") == "True"
    }
    latest = max(conditions.values(), key=lambda c: c.get("lastTransitionTime") or "", default=None)
    seen = "no condition yet" if latest is None else f"condition {latest.get('type')}"
    if latest is not None:
        seen += _detail(latest.get("reason"), latest.get("message"))
    if "Succeeded" in conditions:
        return SUCCEEDED, f"condition Succeeded{_detail(conditions['Succeeded'].get('reason'), None)}"
    if "Failed" in conditions:
        failed = conditions["Failed"]
        return FAILED, f"condition Failed{_detail(failed.get('reason'), failed.get('message'))}"
    if ((job.get("spec") or {}).get("runPolicy") or {}).get("suspend"):
        return FAILED, (
            f"suspended (spec.runPolicy.suspend: true), {seen}: the gang watchdog suspends a gang that did not "
            "run within its pending bound, or a job on a Capacity Block at its stop-by time; its Warning events "
            "say which. Unsuspended (suspend: false), it runs again and the next `pulumi up` waits for it"
        )
    return WAITING, seen


VERDICTS: dict[str, Callable[[dict[str, Any]], tuple[str, str]]] = {
    "Job": volcano_verdict,
    "RayJob": rayjob_verdict,
    "MPIJob": mpijob_verdict,
}
# The kubectl resource name each kind is described by in the advice.
KUBECTL = {"Job": "vcjob", "RayJob": "rayjob", "MPIJob": "mpijob"}

Get = Callable[[], dict[str, Any] | None]  # the object, or None once it no longer exists


def wait(
    get: Get,
    kind: str,
    name: str,
    deadline_seconds: float,
    poll_seconds: float,
    say: Callable[[str], None] = print,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> tuple[int, str]:
    """Poll until the object succeeds, fails, disappears or ``deadline_seconds`` pass; returns the
    exit code and the verdict. An API error is retried until the deadline (the gate's RoleBinding can
    lag its pod by a moment)."""
    what = f"{kind} {name}"
    advice = f"`kubectl describe {KUBECTL[kind]}/{name}` shows its events"
    start, last = clock(), ""
    verdict = VERDICTS[kind]
    while True:
        try:
            obj = get()
        except Exception as error:  # retried: the next poll may reach the API
            seen, outcome = f"the API did not answer: {error}", WAITING
        else:
            if obj is None:
                return EXIT_GONE, f"{what} no longer exists: deleted while `pulumi up` waited for it"
            outcome, seen = verdict(obj)
        if outcome == SUCCEEDED:
            return 0, f"{what} succeeded: {seen}"
        if outcome == FAILED:
            return EXIT_FAILED, f"{what} did not succeed: {seen}; {advice}"
        if seen != last:
            say(f"{what}: {seen}")
            last = seen
        if clock() - start >= deadline_seconds:
            return EXIT_DEADLINE, (
                f"{what} did not finish within {int(deadline_seconds)} s, the most it can run; last seen: {seen}; "
                f"{advice}"
            )
        sleep(poll_seconds)


def in_cluster_get(path: str) -> Get:  # the tests run it against a local HTTPS server
    account = os.environ["SERVICE_ACCOUNT_DIR"]
    context = ssl.create_default_context(cafile=f"{account}/ca.crt")
    server = f"https://{os.environ['KUBERNETES_SERVICE_HOST']}:{os.environ['KUBERNETES_SERVICE_PORT']}"

    def get() -> dict[str, Any] | None:
        with open(f"{account}/token") as f:
            token = f.read().strip()
        request = urllib.request.Request(server + path, headers={"Authorization": f"Bearer {token}"})
        try:
            with urllib.request.urlopen(request, context=context, timeout=30) as response:
                return json.loads(response.read())
        except urllib.error.HTTPError as error:
            if error.code == 404:
                return None
            raise

    return get


def main() -> int:
    env = os.environ
    kind, name = env["GATE_KIND"], env["GATE_NAME"]
    code, verdict = wait(
        in_cluster_get(env["GATE_PATH"]),
        kind,
        f"{env['GATE_NAMESPACE']}/{name}",
        float(env["GATE_DEADLINE_SECONDS"]),
        float(env["GATE_POLL_SECONDS"]),
    )
    print(verdict, file=sys.stderr if code else sys.stdout, flush=True)
    # The kubelet makes this file's text the container's termination message (terminationMessagePath).
    try:
        with open(env["GATE_TERMINATION_LOG"], "w") as f:
            f.write(verdict[:4000])
    except OSError:  # terminationMessagePolicy FallbackToLogsOnError then takes the log's tail
        pass
    return code


if __name__ == "__main__":
    sys.exit(main())
