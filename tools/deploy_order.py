"""Before a pipeline `pulumi up`: has a newer commit already been deployed to this stack?

    python -m tools.deploy_order --stack dev workloads ./

The deploy workflow's runs queue first in, first out (`concurrency.queue: max`), in the order
each started waiting, and GitHub says that order is not guaranteed (docs, "Control the
concurrency of workflows and jobs"). A run that starts after a newer merge's run must not put a
stack back to older code. So before its `up`, a job reads the commit of the last update of its
stack and of every stack the program reads (a workload stack reads its cluster's): the CLI
records the checkout's HEAD in each update's metadata as ``git.head`` (pulumi/pulumi v3.259.0
pkg/cmd/pulumi/metadata/metadata.go addGitCommitMetadata; `pulumi stack history --json` prints it
under ``environment``, pkg/cmd/pulumi/stack/stack_history.go updateInfoJSON). When one of them
is a strict descendant of this checkout's HEAD (`git merge-base --is-ancestor`; the checkout
fetches all history, actions/checkout `fetch-depth: 0`), this run is superseded: the newer run
deployed this commit's changes too. It then writes ``deploy=false`` to ``$GITHUB_OUTPUT`` and the
job's update steps are skipped; otherwise ``deploy=true``.

A stack never updated, or last updated from a commit this checkout does not know (a laptop's),
is deployed: only a known newer commit supersedes.

The first directory is the stack's own project; the others are those its program reads.
``PULUMI_BACKEND_URL`` selects the backend, as for `pulumi login`.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Optional

REPO_ROOT = Path(__file__).resolve().parent.parent


def last_update_commit(stack: str, work_dir: Path) -> Optional[str]:
    """``git.head`` of the stack's newest update; None for a stack never updated."""
    result = subprocess.run(["pulumi", "stack", "history", "--json", "--page-size", "1", "--stack", stack],
                            capture_output=True, text=True, cwd=work_dir)
    if result.returncode != 0:
        raise RuntimeError(f"`pulumi stack history --stack {stack}` in {work_dir} failed:\n{result.stderr.strip()}")
    updates = json.loads(result.stdout or "[]") or []
    if not updates:
        return None
    return (updates[0].get("environment") or {}).get("git.head")


def git(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *args], capture_output=True, text=True, cwd=REPO_ROOT)


def supersedes(deployed: str, head: str) -> Optional[bool]:
    """True when ``deployed`` is a strict descendant of ``head``; None when git does not know it."""
    if deployed == head:
        return False
    result = git("merge-base", "--is-ancestor", head, deployed)
    if result.returncode == 0:
        return True
    if result.returncode == 1:
        return False
    return None  # not a commit of this repository's fetched history


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stack", required=True, help="the stack name, in every directory given")
    parser.add_argument("dirs", nargs="+", help="the stack's project directory, then those its program reads")
    args = parser.parse_args(argv)
    head = git("rev-parse", "HEAD").stdout.strip()
    deploy = True
    try:
        for work_dir in args.dirs:
            deployed = last_update_commit(args.stack, REPO_ROOT / work_dir)
            if deployed is None:
                continue
            newer = supersedes(deployed, head)
            if newer:
                print(f"::notice::{work_dir} {args.stack} was last updated from {deployed}, which already "
                      f"contains this commit ({head}): this run is superseded and updates nothing.")
                deploy = False
            elif newer is None:
                print(f"::warning::{work_dir} {args.stack} was last updated from {deployed}, which this "
                      "checkout does not know (a laptop's commit?): deploying this commit over it.")
    except RuntimeError as exc:
        print(exc, file=sys.stderr)
        return 1
    line = f"deploy={'true' if deploy else 'false'}\n"
    output = os.environ.get("GITHUB_OUTPUT")
    if output:
        with open(output, "a", encoding="utf-8") as handle:
            handle.write(line)
    print(line.strip())
    return 0


if __name__ == "__main__":
    sys.exit(main())
