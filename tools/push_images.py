"""Build the training images and push them to the cluster stack's ECR repositories.

    python -m tools.push_images --stack dev [--dry-run]

Repository URLs come from the cluster stack's `ecrRepositories` output (`pulumi stack
output`), versions from infra/facts/versions.py (passed as build args), the tag is
TRAINING_IMAGE_TAG. Needs the Pulumi CLI, Docker and the AWS CLI with credentials (exit 4, naming
what is missing and where to get it, when one is not installed); --dry-run prints the commands
instead and needs only the Pulumi CLI.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

from infra.facts import versions
from tools import requires

DOCKER_DIR = Path(__file__).resolve().parent.parent / "docker"
BUILD_ARGS = {
    "bert-pretrain": {
        "NEURON_DLC": versions.NEURON_DLC_PYTORCH_2_9,
        "BERT_SAMPLES_COMMIT": versions.BERT_SAMPLES_COMMIT,
    },
    "cmd-shell": {"PYTHON_IMAGE": versions.PYTHON_SLIM_IMAGE},
    "ray-llama2": {
        "NEURON_DLC": versions.NEURON_DLC_PYTORCH_2_9,
        "RAY_VERSION": versions.RAY_VERSION,
        "RAY_LLAMA2_NXD_COMMIT": versions.RAY_LLAMA2_NXD_COMMIT,
        "LLAMA2_REPO_REVISION": versions.LLAMA2_TOKENIZER_REVISION,
        "LLAMA2_SPM_SHA256": versions.LLAMA2_TOKENIZER_SHA256,
    },
    "nxd-llama": {
        "NEURON_DLC": versions.NEURON_DLC_PYTORCH_2_9,
        "NXDT_EXAMPLES_COMMIT": versions.NXDT_EXAMPLES_COMMIT,
        "MEGATRON_LM_COMMIT": versions.MEGATRON_LM_COMMIT,
    },
}


RESOLVED = "/opt/pip-constraints.txt"  # what each Dockerfile's last pip step records


def record_constraints(image: str, target: str) -> str:
    """Shell: write what the built image resolved (`pip list --format=freeze`) into the image's
    constraints.txt, keeping its header, so the next build of any tag resolves the same; git
    then shows what changed, to commit."""
    path = DOCKER_DIR / image / CONSTRAINTS
    return (
        f"{{ grep '^#' {path}; docker run --rm --entrypoint cat {target} {RESOLVED}; }} > {path}.new "
        f"&& mv {path}.new {path}"
    )


CONSTRAINTS = "constraints.txt"


def constraint_problems(text: str) -> list[str]:
    """Lines of a constraints file that are neither comments nor exact `name==version` pins."""
    pin = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*==[A-Za-z0-9.+!_-]+$")
    return [
        line for line in text.splitlines() if line.strip() and not line.startswith("#") and not pin.match(line.strip())
    ]


def unpinned_images() -> list[str]:
    """Images whose constraints.txt pins nothing (comments only): a build would resolve whatever
    the index serves that day, so two builds of one tag could differ."""
    return [
        image
        for image in BUILD_ARGS
        if not any(
            line.strip() and not line.startswith("#")
            for line in (DOCKER_DIR / image / CONSTRAINTS).read_text().splitlines()
        )
    ]


def commands(repositories: dict[str, str], tag: str, record: bool = False) -> list[list[str]]:
    registry = next(iter(repositories.values())).split("/")[0]
    region = registry.split(".")[3]
    login = f"aws ecr get-login-password --region {region} | docker login --username AWS --password-stdin {registry}"
    result = [["sh", "-c", login]]
    for image, build_args in BUILD_ARGS.items():
        target = f"{repositories[image]}:{tag}"
        args = [a for k, v in build_args.items() for a in ("--build-arg", f"{k}={v}")]
        result.append(["docker", "build", "--platform", "linux/amd64", *args, "-t", target, str(DOCKER_DIR / image)])
        result.append(["docker", "push", target])
        if record:
            result.append(["sh", "-c", record_constraints(image, target)])
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stack", default="dev")
    parser.add_argument("--tag", default=versions.TRAINING_IMAGE_TAG)
    parser.add_argument("--dry-run", action="store_true")
    parser.add_argument(
        "--record-constraints",
        action="store_true",
        help="write what each built image resolved back into its docker/<image>/constraints.txt",
    )
    args = parser.parse_args(argv)
    # --dry-run only reads the stack's outputs; a real run logs in to ECR, builds and pushes.
    code = requires.report(
        "make images" + (" --dry-run" if args.dry_run else ""),
        ["pulumi"] if args.dry_run else ["pulumi", "docker", "aws"],
    )
    if code:
        return code
    if not args.record_constraints and (unpinned := unpinned_images()):
        print(
            "make images: refusing: these images' constraints.txt pin nothing (comments only), so the build would "
            "install whatever pip resolves today and a rebuild of the same tag could differ:\n  "
            + "\n  ".join(f"docker/{i}/{CONSTRAINTS}" for i in unpinned)
            + "\nBuild once with `make images ARGS=--record-constraints` (it writes what each image resolved back "
            "into the file), review and commit the files, then build again without it.",
            file=sys.stderr,
        )
        return 2
    output = subprocess.run(
        ["pulumi", "stack", "output", "ecrRepositories", "--json", "--stack", args.stack],
        capture_output=True, text=True, cwd=DOCKER_DIR.parent,
    )  # fmt: skip
    if output.returncode != 0:
        print(
            f"`pulumi stack output ecrRepositories --stack {args.stack}` failed (is the cluster stack deployed, and "
            f"are you logged in to its backend?):\n{output.stderr.strip()}",
            file=sys.stderr,
        )
        return 1
    for command in commands(json.loads(output.stdout), args.tag, record=args.record_constraints):
        print("+", " ".join(command), flush=True)
        if not args.dry_run:
            subprocess.run(command, check=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
