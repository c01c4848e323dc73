"""This checkout's own stack files and what is generated from them: the tests a team's edits to
Pulumi.*.yaml (README, step 2) can turn red, each saying what to run. Every other test plans the
fixture's copies (tests/fixture_project.py).
"""

from __future__ import annotations

import json

import pytest

from offline.docs import generate
from offline.plan.runner import REPO_ROOT, stack_config


def _stacks() -> list[str]:
    return sorted(p.name.removeprefix("Pulumi.").removesuffix(".yaml") for p in REPO_ROOT.glob("Pulumi.*.yaml"))


@pytest.mark.parametrize("stack", _stacks())
def test_this_checkouts_stack_files_plan(stack, team_plans):
    # team_plans plans dev and prod; another stack of the team's is planned here.
    if stack not in team_plans:
        from offline.plan.command import plan_workloads
        from tests.conftest import remembered_program

        cluster = remembered_program(REPO_ROOT, stack)
        if (REPO_ROOT / "workloads" / f"Pulumi.{stack}.yaml").exists():
            plan_workloads(REPO_ROOT / "workloads", stack, cluster)


def test_this_checkouts_generated_documentation_is_fresh(team_plans):
    files = generate.generated(team_plans)
    assert set(files) >= {
        "docs/architecture.md",
        "docs/configuration.md",
        "docs/cost.md",
        "README.md",
        "docs/schema/trainium-eks.schema.json",
        "docs/schema/trainium-workloads.schema.json",
    }
    stale = generate.stale(files)
    assert stale == [], (
        f"{', '.join(stale)}: generated from this checkout's stack files and code, and no longer what they "
        "give: run `make docs` and commit the result"
    )
    assert generate.cost_box(team_plans) in (REPO_ROOT / "README.md").read_text()


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
