"""Before a pipeline `pulumi up` of the workload stack: are its images in ECR, and can its waits fit?

    python -m tools.workloads_preflight --stack dev --budget-minutes 330

The workload stack awaits Jobs, RayJobs and MPIJobs whose pods pull the training images from
the cluster stack's ECR repositories. On a new account those repositories are empty (only
`make images` fills them, from a machine with Docker), and the pods would sit in
ImagePullBackOff until each await times out, hours later, while the deploy session runs out.
This check fails in seconds instead, naming the missing image and the command that pushes it.

What the stack runs and awaits is read from the stack's own program, rendered offline
(offline/plan/command.py, the same code `make plan` runs), not from a table kept here: every ECR image
a planned object names, and every object with an await timeout (pulumi.com/timeoutSeconds,
workloads/pods.py) with the objects it depends on. Repository URLs come from the output
`ecrRepositories` of the cluster stack the workload stack's `clusterStack` names
(`pulumi stack output`); `aws ecr describe-images` answers for each image.

The waits: `pulumi up` waits for each awaited step it creates or replaces, and a step waits for
the steps it depends on; independent steps wait side by side. Which steps this up creates or
replaces is decided against the workload stack's state (`pulumi stack export`) by the rule the
plan diff uses (offline/diff/replacement.py ``replaces``: replaceOnChanges, names, ForceNew inputs),
with the planned inputs rendered from the cluster stack's real outputs, plus the engine's own
rule for chains: a job whose spec carries the UID of a job that is created or replaced is
replaced too (workloads/kube.py ``follow``). So the longest dependency chain of such steps is what
this up can wait at most. When that exceeds what the job may run, the check fails: GitHub would
kill the job mid-update, leaving the stack locked with pending operations.
"""

from __future__ import annotations

import argparse
import copy
import json
import subprocess
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from infra.config.errors import ConfigError
from offline.diff.compare import changed_paths
from offline.diff.replacement import dependent_replacements, replaces
from offline.plan.command import offline_secrets
from offline.plan.mocks import Registration, StackOutputs
from offline.plan.runner import PlanResult, own_reference, run_program, stack_config
from workloads.kube import FOLLOWS, pod_templates
from workloads.settings import parse_workloads_config
from workloads.step_gate import GATE_FOR

REPO_ROOT = Path(__file__).resolve().parent.parent
WORKLOADS_DIR = REPO_ROOT / "workloads"
TIMEOUT = "pulumi.com/timeoutSeconds"
# How `pulumi stack output --json` shows a secret output without --show-secrets.
MASKED = "[secret]"
SKIP = "pulumi.com/skipAwait"
LAPTOP = (
    "Bring this stack up from a laptop or a runner with a longer session (`cd workloads && pulumi up "
    "--stack {stack}`, docs/pipeline.md), or switch its workloads on one pull request "
    "at a time; later runs of this job wait only for the steps they create or replace."
)


@dataclass(frozen=True)
class Step:
    """An object `pulumi up` waits for when it creates it."""

    urn: str
    name: str
    minutes: int


def workload_config(stack: str, project_dir: Path = REPO_ROOT) -> tuple[dict[str, str], dict[str, str]]:
    """The stack file's config, and offline stand-ins for its secrets (the pipeline's stack file
    holds `hfToken` encrypted; what the stack runs does not depend on the token's value)."""
    workloads_dir = project_dir / WORKLOADS_DIR.name
    config = stack_config(workloads_dir, stack)
    return config, offline_secrets(workloads_dir, stack, config)


def plan(
    stack: str,
    deployed: dict[str, Any] | None = None,
    admissions: dict[str, Any] | None = None,
    project_dir: Path = REPO_ROOT,
) -> tuple[PlanResult, PlanResult]:
    """The cluster stack the workload stack names, and the workload stack, rendered offline; with
    ``deployed`` (the cluster stack's real outputs, secrets masked), rendered from those, so its
    inputs are the ones `pulumi up` will send (a masked secret keeps the offline value); with
    ``admissions`` (the workload stack's own ``stepAdmissions``), its Capacity Block check counts the
    jobs its last update left running as `pulumi up` will (workloads/capacity_windows.py).
    ``project_dir``: the repository's layout holding the stack files (this repository's)."""
    config, secrets = workload_config(stack, project_dir)
    workloads_dir = project_dir / WORKLOADS_DIR.name
    reference = parse_workloads_config({**config, **secrets}).cluster_stack
    cluster = run_program(project_dir, reference.split("/")[-1])
    outputs = cluster.as_stack_outputs()
    if deployed is not None:
        real = {k: v for k, v in deployed.items() if v != MASKED}
        outputs = StackOutputs({**outputs.outputs, **real}, outputs.secret_names)
    references = {reference: outputs}
    if admissions is not None:
        references[own_reference(workloads_dir, stack)] = StackOutputs({"stepAdmissions": admissions}, frozenset())
    workloads = run_program(workloads_dir, stack, config, references, secrets)
    return cluster, workloads


def _strings(value: Any) -> Iterable[str]:
    if isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)
    elif isinstance(value, str):
        yield value


def required_images(workloads: PlanResult, repositories: dict[str, str]) -> set[tuple[str, str]]:
    """(image, tag) pairs the planned objects run; ``repositories`` maps image -> ECR URL."""
    by_url = {url: image for image, url in repositories.items()}
    needed = set()
    for value in (s for r in workloads.registrations for s in _strings(r.inputs)):
        url, _, tag = value.rpartition(":")
        if url in by_url and tag:
            needed.add((by_url[url], tag))
    return needed


def awaited_steps(workloads: PlanResult) -> list[Step]:
    """Every awaited object; a step gate (workloads/step_gate.py) by the name of the step it waits for."""
    steps = []
    for r in workloads.registrations:
        metadata = r.inputs.get("metadata") or {}
        annotations = metadata.get("annotations") or {}
        if TIMEOUT in annotations and annotations.get(SKIP) != "true":
            name = (metadata.get("labels") or {}).get(GATE_FOR) or metadata.get("name", r.name)
            steps.append(Step(r.urn, name, int(annotations[TIMEOUT]) // 60))
    return steps


def longest_wait(
    registrations: list[Registration], steps: list[Step], done: frozenset[str] = frozenset()
) -> tuple[int, list[str]]:
    """Minutes and step names of the longest dependency chain of awaited steps not in ``done``.

    A resource is created after everything in its dependencies (pulumi engine, step generation),
    so a chain waits the sum of its awaited steps; unrelated chains wait side by side.
    """
    deps = {r.urn: r.dependencies for r in registrations}
    weight = {s.urn: (s.minutes, s.name) for s in steps if s.urn not in done}
    memo: dict[str, tuple[int, list[str]]] = {}

    def chain(urn: str) -> tuple[int, list[str]]:
        if urn not in memo:
            before = max((chain(d) for d in deps.get(urn, ()) if d in deps), default=(0, []))
            minutes, name = weight.get(urn, (0, ""))
            memo[urn] = (before[0] + minutes, before[1] + [name]) if minutes else before
        return memo[urn]

    return max((chain(u) for u in deps), default=(0, []))


def missing_images(needed: set[tuple[str, str]], repositories: dict[str, str], exists) -> list[str]:
    """``image:tag`` references not in ECR; ``exists(repository_name, tag)`` asks ECR."""
    missing = []
    for image, tag in sorted(needed):
        url = repositories.get(image)
        if url is None or not exists(url.split("/", 1)[1], tag):
            missing.append(f"{url or image}:{tag}")
    return missing


def ecr_has(repository: str, tag: str) -> bool:
    result = subprocess.run(
        ["aws", "ecr", "describe-images", "--repository-name", repository, "--image-ids", f"imageTag={tag}",
         "--output", "json"],
        capture_output=True, text=True,
    )  # fmt: skip
    if result.returncode == 0:
        return True
    if "ImageNotFoundException" in result.stderr or "RepositoryNotFoundException" in result.stderr:
        return False
    raise PulumiError(f"aws ecr describe-images {repository}:{tag}", result.stderr)


class PulumiError(Exception):
    """A CLI the preflight ran failed; its own message is what the reader needs."""

    def __init__(self, command: str, stderr: str) -> None:
        super().__init__(f"`{command}` failed:\n{stderr.strip()}")


def pulumi(args: list[str], cwd: Path) -> str | None:
    """stdout of a `pulumi` command; None when the stack does not exist yet."""
    result = subprocess.run(["pulumi", *args], capture_output=True, text=True, cwd=cwd)
    if result.returncode == 0:
        return result.stdout
    # backenderr.StackNotFoundError (pkg/backend/backenderr/backenderr.go): "no stack named '<s>' found".
    if "no stack named" in result.stderr:
        return None
    raise PulumiError(f"pulumi {' '.join(args)}", result.stderr)


def state_resources(export: str | None) -> dict[str, dict[str, Any]]:
    """The resources of a `pulumi stack export` document (apitype.UntypedDeployment) by URN;
    none for a new stack."""
    if export is None:
        return {}
    resources = (json.loads(export).get("deployment") or {}).get("resources") or []
    return {r["urn"]: r for r in resources}


def _without_follows(inputs: dict[str, Any]) -> dict[str, Any]:
    """The inputs without the chain's UID annotation, which the offline plan cannot know: its
    effect is counted by the chain rule in ``waiting_steps`` instead."""
    stripped = copy.deepcopy(inputs)
    for template in pod_templates(stripped.get("spec") or {}):
        annotations = (template.get("metadata") or {}).get("annotations") or {}
        annotations.pop(FOLLOWS, None)
        if not annotations and "annotations" in (template.get("metadata") or {}):
            del template["metadata"]["annotations"]
    return stripped


def waiting_steps(registrations: list[Registration], state: dict[str, dict[str, Any]]) -> dict[str, str]:
    """URN -> why, for every resource this up creates or replaces (and so awaits, if awaited).

    - not in the state: created;
    - in the state with `initErrors` (its create failed its await): pulumi gives it an empty update
      that waits for it again (pkg/resource/deploy/step_generator.go; pulumi-kubernetes
      provider/pkg/await/await.go Update awaits as on create);
    - an input change that replaces it, decided by offline/diff/replacement.py ``replaces`` (the rule
      the plan diff prints), with its own replaceOnChanges;
    - a job whose spec follows a job created or replaced here: pulumi diffs it with that property
      unknown and its replaceOnChanges ["spec"] replaces it (pulumi/pulumi v3.259.0
      pkg/resource/deploy/step_generator.go calculateDependentReplacements).
    """
    why: dict[str, str] = {}
    for r in registrations:
        old = state.get(r.urn)
        if old is None:
            why[r.urn] = "created"
            continue
        if old.get("initErrors"):
            why[r.urn] = "awaited again (its create failed)"
            continue
        rules = r.lifecycle.get("replaceOnChanges") or []
        for path, before, after in changed_paths(_without_follows(old.get("inputs") or {}), _without_follows(r.inputs)):
            reason = replaces(r.type, path, before, after, rules, r.inputs)
            if reason:
                why[r.urn] = f"replaced ({path}: {reason})"
                break
    # The chain: the plan diff's rule (offline/diff/replacement.py dependent_replacements). A step awaited
    # again keeps its UID, so only created and replaced ones take their followers with them.
    existing = {
        r.urn: {
            "type": r.type,
            "replaceOnChanges": r.lifecycle.get("replaceOnChanges") or [],
            "propertyDependencies": r.property_dependencies,
            "inputs": r.inputs,
        }
        for r in registrations
        if r.urn in state
    }
    sources = {u: w for u, w in why.items() if not w.startswith("awaited again")}
    for urn, reason in dependent_replacements(existing, sources).items():
        why[urn] = f"replaced (follows: {reason})"
    return why


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stack", default="dev", help="the workload stack")
    parser.add_argument("--budget-minutes", type=int, required=True, help="what `pulumi up` may run in this job")
    args = parser.parse_args(argv)
    try:
        config, secrets = workload_config(args.stack)
        cluster_stack = parse_workloads_config({**config, **secrets}).cluster_stack  # what its StackReference reads
        output = pulumi(["stack", "output", "--json", "--stack", cluster_stack], REPO_ROOT)
        if output is None:
            print(
                f"The cluster stack {cluster_stack} (clusterStack of {args.stack}) does not exist: deploy it first.",
                file=sys.stderr,
            )
            return 1
        deployed = json.loads(output)
        repositories = deployed["ecrRepositories"]
        own = pulumi(["stack", "output", "--json", "--stack", args.stack], WORKLOADS_DIR)
        admissions = json.loads(own).get("stepAdmissions") if own is not None else None
        cluster_plan, workloads = plan(args.stack, deployed, admissions)
        needed = required_images(workloads, repositories)
        missing = missing_images(needed, repositories, ecr_has)
        if missing:
            print(
                f"The workload stack {args.stack} runs images that are not in ECR:",
                *missing,
                sep="\n  ",
                file=sys.stderr,
            )
            print(
                f"Push them first: `make images STACK={args.stack}` (needs Docker), then re-run this job.",
                file=sys.stderr,
            )
            return 1
        print(f"All {len(needed)} images of the workload stack {args.stack} are in ECR.")
        state = state_resources(pulumi(["stack", "export", "--stack", args.stack], WORKLOADS_DIR))
    except (ConfigError, FileNotFoundError) as exc:
        print(exc, file=sys.stderr)
        return 2
    except PulumiError as exc:
        print(exc, file=sys.stderr)
        return 1
    steps = awaited_steps(workloads)
    waiting = waiting_steps(workloads.registrations, state)
    done = frozenset(r.urn for r in workloads.registrations if r.urn not in waiting)
    minutes, chain = longest_wait(workloads.registrations, steps, done)
    for step in steps:
        if step.urn in waiting and state:
            print(f"  {step.name}: {waiting[step.urn]}, awaited up to {step.minutes} min")
    if minutes > args.budget_minutes:
        print(
            f"::error::This up creates awaited steps that can wait {minutes} min in a row ({' -> '.join(chain)}); "
            f"this job allows {args.budget_minutes}. " + LAPTOP.format(stack=args.stack)
        )  # stdout: GitHub's annotation
        return 1
    print(f"Awaited steps this up creates: at most {minutes} min in a row; the job allows {args.budget_minutes}.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
