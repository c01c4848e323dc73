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
``PULUMI_BACKEND_URL`` selects the backend, as for `pulumi login`. A superseded run also says so
in the job's summary (``$GITHUB_STEP_SUMMARY``), where reviewers look: the deploy workflow's
preview of prod runs this check too, and the prod jobs behind it (and their approvals) are then
skipped.

    python -m tools.deploy_order --deployed --stack prod workloads

``--deployed`` (the drift check) writes instead ``commit=<sha>``, the commit the stack was last
deployed from (empty for a stack never deployed; this checkout's HEAD, with a warning, for a
commit it does not know), and ``pending=true`` when this checkout is ahead of it: a merge waiting
for its deploy (prod's approval, say), which the check must not report as drift.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent


def last_update_commit(stack: str, work_dir: Path) -> str | None:
    """``git.head`` of the stack's newest update; None for a stack never updated."""
    result = subprocess.run(
        ["pulumi", "stack", "history", "--json", "--page-size", "1", "--stack", stack],
        capture_output=True,
        text=True,
        cwd=work_dir,
    )
    if result.returncode != 0:
        raise RuntimeError(f"`pulumi stack history --stack {stack}` in {work_dir} failed:\n{result.stderr.strip()}")
    updates = json.loads(result.stdout or "[]") or []
    if not updates:
        return None
    return (updates[0].get("environment") or {}).get("git.head")


def git(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *args], capture_output=True, text=True, cwd=REPO_ROOT)


def supersedes(deployed: str, head: str) -> bool | None:
    """True when ``deployed`` is a strict descendant of ``head``; None when git does not know it."""
    if deployed == head:
        return False
    result = git("merge-base", "--is-ancestor", head, deployed)
    if result.returncode == 0:
        return True
    if result.returncode == 1:
        return False
    return None  # not a commit of this repository's fetched history


def write(lines: list[str], variable: str) -> None:
    path = os.environ.get(variable)
    if path:
        with open(path, "a", encoding="utf-8") as handle:
            handle.write("".join(f"{line}\n" for line in lines))


def deployed(stack: str, work_dir: str, head: str) -> int:
    """The drift check's commit: the one ``stack`` was last deployed from."""
    try:
        commit = last_update_commit(stack, REPO_ROOT / work_dir)
    except RuntimeError as exc:
        print(exc, file=sys.stderr)
        return 1
    pending = False
    if commit is None:
        print(f"::notice::{work_dir} {stack} was never deployed: there is nothing to drift from.")
        commit = ""
    elif commit == head:
        pass
    elif supersedes(head, commit):  # this checkout (main) is a strict descendant of what is deployed
        pending = True
        print(
            f"::notice::{work_dir} {stack} was last deployed from {commit}; main ({head}) is ahead of it, "
            "a deploy is pending: checking the deployed commit, so the pending change is not drift."
        )
    else:
        print(
            f"::warning::{work_dir} {stack} was last deployed from {commit}, which is not in main's history "
            f"(a laptop's commit?): checking main ({head}) instead."
        )
        commit = head
    lines = [f"commit={commit}", f"pending={'true' if pending else 'false'}"]
    write(lines, "GITHUB_OUTPUT")
    print("\n".join(lines))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stack", required=True, help="the stack name, in every directory given")
    parser.add_argument(
        "--deployed",
        action="store_true",
        help="print the commit the stack was last deployed from (the drift check), decide nothing",
    )
    parser.add_argument("dirs", nargs="+", help="the stack's project directory, then those its program reads")
    args = parser.parse_args(argv)
    head = git("rev-parse", "HEAD").stdout.strip()
    if args.deployed:
        return deployed(args.stack, args.dirs[0], head)
    deploy = True
    superseded: list[str] = []
    try:
        for work_dir in args.dirs:
            deployed_from = last_update_commit(args.stack, REPO_ROOT / work_dir)
            if deployed_from is None:
                continue
            newer = supersedes(deployed_from, head)
            if newer:
                print(
                    f"::notice::{work_dir} {args.stack} was last updated from {deployed_from}, which already "
                    f"contains this commit ({head}): this run is superseded and updates nothing."
                )
                superseded.append(
                    f"`{work_dir}` `{args.stack}` was last deployed from `{deployed_from}`, which already "
                    f"contains this commit (`{head}`)."
                )
                deploy = False
            elif newer is None:
                print(
                    f"::warning::{work_dir} {args.stack} was last updated from {deployed_from}, which this "
                    "checkout does not know (a laptop's commit?): deploying this commit over it."
                )
    except RuntimeError as exc:
        print(exc, file=sys.stderr)
        return 1
    line = f"deploy={'true' if deploy else 'false'}"
    write([line], "GITHUB_OUTPUT")
    if superseded:
        write(
            [
                "### Superseded: nothing to deploy or approve",
                "",
                *(f"- {why}" for why in superseded),
                "",
                "A newer merge's run deployed this commit's changes already; this run's updates (and, in the "
                "prod preview, the prod jobs and their approvals) are skipped.",
            ],
            "GITHUB_STEP_SUMMARY",
        )
    print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
