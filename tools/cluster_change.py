"""Does a change alter what the workload stack reads from its cluster stack? For pull requests.

    python -m tools.cluster_change --stack dev build/plan-diff

The workload stack reads its cluster stack's outputs (``infra.contract.WORKLOAD_INPUTS``) through
a StackReference, and a live `pulumi preview` of it reads them as the cluster is deployed now. A
pull request that changes them together with workloads that need the change (a larger node
group and a job across it) is refused by that preview, though on main the workload stack is
updated only after its cluster (deploy.yml, deploy-prod.yml). The offline plan diff (`make plan
BASE=<base>`) plans both revisions, each workload stack against the cluster that revision plans,
and fails on settings that cluster refuses; it leaves each revision's plans under
``<dir>/base`` and ``<dir>/head`` (``<project>/<stack>/resources.json``, offline/diff/compare.py).

This compares the cluster stack's planned outputs the workload stack reads in both and writes
``changed=true`` (and the changed names to the job summary) or ``changed=false`` to
``$GITHUB_OUTPUT``. The pull-request workflow lets the live workload preview fail without
failing the check only when ``changed=true``: the offline plan diff has checked those settings
against the cluster they will run on. Exit 1 when a plan is missing (the diff did not run).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from infra.contract import WORKLOAD_INPUTS

CLUSTER_PROJECT = "trainium-eks"


def planned_outputs(plans: Path, revision: str, stack: str) -> dict[str, Any]:
    path = plans / revision / CLUSTER_PROJECT / stack / "resources.json"
    if not path.exists():
        raise FileNotFoundError(f"{path}: no offline plan of {CLUSTER_PROJECT}/{stack} (run `make plan BASE=<base>`)")
    return json.loads(path.read_text()).get("outputs") or {}


def changed_inputs(plans: Path, stack: str) -> list[str]:
    """The workload stack's inputs whose planned value differs between the base and head plans."""
    base, head = planned_outputs(plans, "base", stack), planned_outputs(plans, "head", stack)
    return [name for name in WORKLOAD_INPUTS if base.get(name) != head.get(name)]


def write(lines: list[str], variable: str) -> None:
    path = os.environ.get(variable)
    if path:
        with open(path, "a", encoding="utf-8") as handle:
            handle.write("".join(f"{line}\n" for line in lines))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stack", required=True, help="the cluster (and workload) stack name")
    parser.add_argument(
        "plans", type=Path, help="the offline plan diff's directory (make plan BASE=...: build/plan-diff)"
    )
    args = parser.parse_args(argv)
    try:
        changed = changed_inputs(args.plans, args.stack)
    except FileNotFoundError as exc:
        print(exc, file=sys.stderr)
        return 1
    line = f"changed={'true' if changed else 'false'}"
    write([line], "GITHUB_OUTPUT")
    if changed:
        names = ", ".join(f"`{name}`" for name in changed)
        write(
            [
                f"### This change alters what the `{args.stack}` workload stack reads from its cluster",
                "",
                f"Changed cluster outputs: {names}. The live preview of the workload stack reads the cluster "
                "as deployed, before this change: if it fails, the check does not. The offline plan diff "
                "checked the workload stack against the cluster this change plans, and on main the workload "
                "stack is updated only after its cluster.",
            ],
            "GITHUB_STEP_SUMMARY",
        )
        print(f"::notice::{CLUSTER_PROJECT}/{args.stack} outputs the workload stack reads change: {names}")
    print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
