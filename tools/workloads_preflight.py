"""Before a pipeline `pulumi up` of the workload stack: are its images in ECR, and can its waits fit?

    python -m tools.workloads_preflight --stack dev --budget-minutes 330

The workload stack awaits Jobs, RayJobs and MPIJobs whose pods pull the training images from
the cluster stack's ECR repositories. On a new account those repositories are empty (only
`make images` fills them, from a machine with Docker), and the pods would sit in
ImagePullBackOff until each await times out, hours later, while the deploy session runs out.
This check fails in seconds instead, naming the missing image and the command that pushes it.

Repository URLs come from the cluster stack's `ecrRepositories` output (`pulumi stack output`),
tags from the workload stack's configuration; `aws ecr describe-images` answers for each.

The waits: `pulumi up` waits for every step it creates or replaces with an await annotation
(pulumi.com/timeoutSeconds, workloads/pods.py). Their sum is an upper bound on how long an up
that (re)creates all of them can wait; a step that already finished and did not change is not
waited for again. When the sum exceeds what the job may run, the check warns (it cannot know
from configuration alone which steps this up will create) and the README says what to do.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from offline.runner import stack_config
from workloads.cluster_check import VERDICT_MARGIN_MINUTES
from workloads.settings import WorkloadsConfig, parse_workloads_config

REPO_ROOT = Path(__file__).resolve().parent.parent


def required_images(config: WorkloadsConfig) -> set[tuple[str, str]]:
    """(image, tag) pairs the enabled workloads run, as workloads/__main__.py wires them."""
    needed: set[tuple[str, str]] = set()
    if s := config.on("data_staging"):
        if s.wikicorpus or s.cmd_shell:
            needed.add(("cmd-shell", s.image_tag))
        if s.redpajama:
            needed.add(("nemo-megatron", s.image_tag))
    for workload, image in (("bert_pretraining", "bert-pretrain"), ("ray_llama2", "ray-llama2"),
                            ("nemo_llama2", "nemo-megatron"), ("cluster_check", "nemo-megatron"),
                            ("cluster_check", "cmd-shell"), ("tensorboard", "cmd-shell")):
        if s := config.on(workload):
            needed.add((image, s.image_tag))
    return needed


def awaited_minutes(config: WorkloadsConfig) -> dict[str, int]:
    """Each step `pulumi up` waits for when it creates it -> its await timeout, in minutes."""
    waits: dict[str, int] = {}
    if s := config.on("data_staging"):
        waits.update({f"data staging {name}": s.timeout_minutes for name, on in
                      (("stage-wikicorpus", s.wikicorpus), ("stage-redpajama", s.redpajama)) if on})
    if (s := config.on("bert_pretraining")) and s.precompile:
        waits["bert-precompile"] = s.precompile_timeout_minutes
    if s := config.on("ray_llama2"):
        waits.update({f"ray {step}": s.step_timeout_minutes for step in s.steps[:-1]})
    if (s := config.on("nemo_llama2")) and s.compile:
        waits["llama2-compile"] = s.compile_timeout_minutes
    if s := config.on("cluster_check"):
        verdict = s.timeout_minutes + VERDICT_MARGIN_MINUTES  # its deadline covers the launcher's
        waits.update({"cluster-check-nodes": s.timeout_minutes + 5, "cluster-check-verdict": verdict + 5})
    return waits


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
    raise RuntimeError(f"aws ecr describe-images {repository}:{tag}: {result.stderr.strip()}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stack", default="dev")
    parser.add_argument("--budget-minutes", type=int, required=True, help="what `pulumi up` may run in this job")
    args = parser.parse_args(argv)
    config = parse_workloads_config(stack_config(REPO_ROOT / "workloads", args.stack))
    output = subprocess.run(
        ["pulumi", "stack", "output", "ecrRepositories", "--json", "--stack", args.stack],
        check=True, capture_output=True, text=True, cwd=REPO_ROOT,
    )  # fmt: skip
    missing = missing_images(required_images(config), json.loads(output.stdout), ecr_has)
    if missing:
        print(f"The workload stack {args.stack} runs images that are not in ECR:", *missing, sep="\n  ", file=sys.stderr)
        print(f"Push them first: `make images STACK={args.stack}` (needs Docker), then re-run this job.", file=sys.stderr)
        return 1
    print(f"All {len(required_images(config))} images of the workload stack {args.stack} are in ECR.")
    waits = awaited_minutes(config)
    if sum(waits.values()) > args.budget_minutes:
        steps = ", ".join(f"{k} {v} min" for k, v in waits.items())
        print(f"::warning::An up that creates every awaited step could wait {sum(waits.values())} min ({steps}); "
              f"this job allows {args.budget_minutes}. Steps that already finished are not waited for again. "
              "For a first bring-up, see README 'Running it from a pipeline'.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
