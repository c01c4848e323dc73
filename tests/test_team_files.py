"""This checkout's own stack files and what is generated from them: the tests a team's edits to
Pulumi.*.yaml (README, step 2) can turn red, each saying what to run. Every other test plans the
fixture's copies (tests/fixture_project.py).
"""

from __future__ import annotations

import pytest

from offline.docs import generate
from offline.plan.runner import REPO_ROOT


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
