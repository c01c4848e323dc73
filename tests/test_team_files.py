"""This checkout's own stack files and what is generated from them: the tests a team's edits to
Pulumi.*.yaml (README, step 2) can turn red, each saying what to run. Every other test plans the
fixture's copies (tests/fixture_project.py).

The checks take the checkout's root, so the same code also runs against a copy of the repository
with README step 2's edits made and `make docs` run: the proof that a team following the README
keeps these checks green.
"""

from __future__ import annotations

import functools
import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import yaml

from offline.docs import generate
from offline.plan.runner import REPO_ROOT, stack_config
from tests import fixture_project
from tests.conftest import TEAM_FILES, remembered_program

if TYPE_CHECKING:
    from offline.plan.runner import PlanResult

    Planned = tuple[PlanResult, PlanResult | None]


# --- the checks, for any checkout --------------------------------------------------------------------------------
def _whose(root: Path) -> str:
    return "this checkout's" if root == REPO_ROOT else f"{root}'s"


def stacks(root: Path) -> list[str]:
    """The stacks the checkout at ``root`` has a cluster stack file for."""
    return sorted(p.name.removeprefix("Pulumi.").removesuffix(".yaml") for p in root.glob("Pulumi.*.yaml"))


# One plan of each checkout's stack a worker: the docs check plans what the stacks check planned.
@functools.cache
def planned(root: Path, stack: str) -> Planned:
    """``stack``'s cluster stack under ``root`` and its workload stack (None without a workload stack file)
    planned, or the test failed saying what shows why."""
    from infra.config.errors import ConfigError
    from offline.plan.command import WORKLOADS_DIR, plan_workloads

    try:
        cluster = remembered_program(root, stack)
        if not (root / WORKLOADS_DIR / f"Pulumi.{stack}.yaml").exists():
            return cluster, None
        return cluster, plan_workloads(root / WORKLOADS_DIR, stack, cluster)
    except ConfigError as refused:
        pytest.fail(f"{_whose(root)} {stack} stack files do not plan (`make plan STACK={stack}` shows it):\n{refused}")


def documented_plans(root: Path) -> generate.Plans:
    """The plans `make docs` documents for the checkout at ``root``."""
    plans = {}
    for stack in generate.STACKS:
        cluster, workloads = planned(root, stack)
        assert workloads is not None, f"{_whose(root)} workloads/Pulumi.{stack}.yaml is missing: `make docs` plans it"
        plans[stack] = (cluster, workloads)
    return plans


def stale_documentation(root: Path) -> list[str]:
    """The generated files under ``root`` that `make docs` would rewrite."""
    files = generate.generated(documented_plans(root), root)
    assert set(files) >= {
        "docs/architecture.md",
        "docs/configuration.md",
        "docs/cost.md",
        "README.md",
        "docs/schema/trainium-eks.schema.json",
        "docs/schema/trainium-workloads.schema.json",
    }
    return generate.stale(files, root)


def check_documentation_is_fresh(root: Path) -> None:
    stale = stale_documentation(root)
    assert stale == [], (
        f"{', '.join(stale)}: generated from {_whose(root)} stack files and code, and no longer what they "
        "give: run `make docs` and commit the result"
    )
    plans = documented_plans(root)
    assert generate.cost_box(plans, root) in (root / "README.md").read_text(), (
        f"{_whose(root)} README.md lacks the cost box of its dev stack: run `make docs` and commit the result"
    )


# --- this checkout ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("stack", stacks(REPO_ROOT))
def test_this_checkouts_stack_files_plan(stack):
    planned(REPO_ROOT, stack)


def test_this_checkouts_generated_documentation_is_fresh():
    check_documentation_is_fresh(REPO_ROOT)


# --- a team's checkout after README step 2 -----------------------------------------------------------------------
# The edits README step 2 asks for, as a team makes them, plus a second Trainium group: each group
# labelled so the team's jobs can tell them apart.
TEAM_CLUSTER = "acme-trn-dev"
TEAM_REGION = "us-east-1"
TEAM_ADMIN = "arn:aws:iam::123456789012:role/acme-ml-platform"
TEAM_CLUSTER_STACK = "acme-ml/trainium-eks/dev"
TEAM_WORKLOADS_OFF = ("bertPretraining", "rayLlama2", "nxdLlama")
TEAM_LABELS = {"trn1-32xl-ng1": {"acme.example/pool": "training"}, "trn1-32xl-ng2": {"acme.example/pool": "research"}}


# The name of each block `make docs` fills (offline/docs/generate.py BEGIN).
GENERATED_BLOCK = re.escape(generate.BEGIN).replace(re.escape("{name}"), "(.+?)")


def _edit_cluster(config: dict[str, Any]) -> None:
    config["aws:region"] = TEAM_REGION
    config["trainium-eks:clusterName"] = TEAM_CLUSTER
    config["trainium-eks:clusterAdmins"] = [TEAM_ADMIN]
    groups = config["trainium-eks:acceleratorNodeGroups"]
    first = next(g for g in groups if g["name"] == "trn1-32xl-ng1")
    groups.append({**first, "name": "trn1-32xl-ng2", "maxSize": 2})
    for group in groups:
        if group["name"] in TEAM_LABELS:
            group["labels"] = TEAM_LABELS[group["name"]]


def _edit_workloads(config: dict[str, Any]) -> None:
    config["trainium-workloads:clusterStack"] = TEAM_CLUSTER_STACK
    # Only the acceptance test on: the README allows either deleting a workload or switching it off.
    for key in ("dataStaging", "tensorboard"):
        del config[f"trainium-workloads:{key}"]
    for key in TEAM_WORKLOADS_OFF:
        config[f"trainium-workloads:{key}"]["enabled"] = False


def _edit(path: Path, edit: Any) -> None:
    document = yaml.safe_load(path.read_text())
    edit(document["config"])
    path.write_text(yaml.safe_dump(document, sort_keys=False))


def team_checkout(destination: Path) -> Path:
    """The repository's tracked files under ``destination``, with the stack files and policy configurations as
    shipped (tests/stacks, not this checkout's: the proof must not depend on a team's own values) and README
    step 2's edits made to the dev stack."""
    tracked = subprocess.run(
        ["git", "-C", str(REPO_ROOT), "ls-files", "-z"], check=True, capture_output=True, text=True
    ).stdout
    for name in filter(None, tracked.split("\0")):
        source = REPO_ROOT / name
        if source.is_file() and source.resolve() not in TEAM_FILES:
            (destination / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, destination / name)
    fixture_project.build(destination)
    _edit(destination / "Pulumi.dev.yaml", _edit_cluster)
    _edit(destination / "workloads" / "Pulumi.dev.yaml", _edit_workloads)
    return destination


def test_readme_step_2_edits_then_make_docs_keep_the_team_file_checks_green(tmp_path):
    root = team_checkout(tmp_path / "checkout")

    for stack in stacks(root):
        planned(root, stack)
    cluster, workloads = planned(root, "dev")
    assert (cluster.outputs["region"], cluster.outputs["clusterName"]) == (TEAM_REGION, TEAM_CLUSTER)
    groups = {g["name"]: g for g in cluster.outputs["acceleratorNodeGroups"]}
    for name, labels in TEAM_LABELS.items():
        assert groups[name]["instanceType"] == "trn1.32xlarge"
        assert groups[name]["labels"].items() >= labels.items(), groups[name]["labels"]
    assert workloads is not None
    on = set(workloads.outputs["workloads"])
    assert "clusterCheck" in on and not on & {*TEAM_WORKLOADS_OFF, "dataStaging", "tensorboard"}, on

    # The generated blocks emptied, whatever this checkout's pages hold: the docs check fails unless
    # the generation runs, and passes only with what it writes from the edited stacks.
    pages = [*generate.PAGE_BLOCKS, "README.md"]
    for page in pages:
        text = (root / page).read_text()
        (root / page).write_text(generate.fill_blocks(text, dict.fromkeys(re.findall(GENERATED_BLOCK, text), "")))
    before = stale_documentation(root)
    assert set(before) >= set(pages)
    written = generate.write(generate.generated(documented_plans(root), root), root)
    assert set(written) == set(before)
    readme = (root / "README.md").read_text()
    assert f"dev cluster idle (nothing running; {TEAM_REGION})" in readme
    assert "node group trn1-32xl-ng2<br/>trn1.32xlarge" in readme

    check_documentation_is_fresh(root)


# --- who approves changes to what guards the pipeline ----------------------------------------------

# What a pull request could weaken prod's protection or the pipeline's roles through.
GUARDED = [
    "policy/config.prod.json",
    "policy/config.dev.json",
    "policy/guardrails/security.py",
    "policy/PulumiPolicy.yaml",
    "offline/plan/command.py",
    "offline/diff/compare.py",
    "infra/config/rules.py",
    "Pulumi.prod.yaml",
    "workloads/Pulumi.prod.yaml",
    "security/checkov-justifications.yaml",
    "bootstrap/permissions.py",
    "bootstrap/Pulumi.prod.yaml",
    ".github/workflows/deploy.yml",
    ".github/workflows/deploy-prod.yml",
    ".github/CODEOWNERS",
    "tools/deploy_order.py",
    ".ci/run",
    "bin/plan",
    "Makefile",
]


def codeowners_rules() -> list[tuple[str, list[str]]]:
    rules = []
    for line in (REPO_ROOT / ".github" / "CODEOWNERS").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            pattern, *owners = line.split()
            # Only anchored paths here: GitHub docs, "About code owners": `/dir/` matches everything
            # under the repository root's dir, recursively; `/file` that file alone.
            assert pattern.startswith("/") and "*" not in pattern, pattern
            rules.append((pattern, owners))
    return rules


def owners_of(path: str, rules: list[tuple[str, list[str]]]) -> list[str]:
    """The last matching pattern wins (GitHub docs, "About code owners", CODEOWNERS syntax)."""
    matched = [
        owners
        for pattern, owners in rules
        if ("/" + path).startswith(pattern)
        if pattern.endswith("/") or "/" + path == pattern
    ]
    return matched[-1] if matched else []


def test_codeowners_covers_what_guards_the_pipeline_with_the_bootstraps_owners() -> None:
    # This checkout's CODEOWNERS against its own bootstrap stack files: a team names its owners in both.
    owners = {
        stack: json.loads(stack_config(REPO_ROOT / "bootstrap", stack)["trainium-bootstrap:codeOwners"])
        for stack in ("dev", "prod")
    }
    assert owners["dev"] == owners["prod"] and owners["dev"], "one set of owners, named in both bootstrap stacks"
    rules = codeowners_rules()
    for path in GUARDED:
        assert (REPO_ROOT / path).is_file(), path
        assert owners_of(path, rules) == owners["dev"], path
    assert owners_of("workloads/__main__.py", rules) == [], "only what guards the pipeline needs their review"
