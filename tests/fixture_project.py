"""The project the tests plan: this repository's programs with the stack files and policy
configurations kept in tests/stacks/, copies of the shipped ones.

A team makes the repository its own by editing Pulumi.*.yaml and policy/config.*.json (README,
step 2). The tests plan these copies instead, so they test the program and keep passing whatever
valid values a team chooses; the team's own files are checked by tests/test_team_files.py, which
says what to run when one of them fails. Change a file here when the program's own expectations
change, not when a team's do.
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
from pathlib import Path

# Not offline.plan.runner's: tests/conftest.py imports this module in the xdist controller too, which
# must start the workers without loading the SDKs.
REPO_ROOT = Path(__file__).resolve().parent.parent
STACKS = REPO_ROOT / "tests" / "stacks"
# The Pulumi projects, by directory under the repository's root.
PROJECTS = (".", "workloads", "bootstrap")


def build(destination: Path) -> Path:
    """``destination`` laid out like the repository for the offline plan: each project's
    Pulumi.yaml and program from the repository, its stack files from tests/stacks, and the
    policy configurations beside them; into a copy of the repository, it replaces that copy's."""
    for project in PROJECTS:
        (destination / project).mkdir(parents=True, exist_ok=True)
        for name in ("Pulumi.yaml", "__main__.py"):
            shutil.copyfile(REPO_ROOT / project / name, destination / project / name)
        for stack_file in (STACKS / project).glob("Pulumi.*.yaml"):
            shutil.copyfile(stack_file, destination / project / stack_file.name)
    shutil.copytree(STACKS / "policy", destination / "policy", dirs_exist_ok=True)
    return destination


def _fixture_root() -> Path:
    root = Path(tempfile.mkdtemp(prefix="trainium-fixture-"))
    atexit.register(shutil.rmtree, root, True)
    return build(root / "project")


# One per test process (each xdist worker builds its own): the programs plan it like the repository.
FIXTURE_ROOT = _fixture_root()


def fixture_policy_config(stack: str) -> Path:
    """The policy configuration the tests plan ``stack`` with (the fixture's copy of
    policy/config.<stack>.json)."""
    return FIXTURE_ROOT / "policy" / f"config.{stack}.json"
