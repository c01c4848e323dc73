"""Python dependencies are pinned exactly, so a preview and the approved deploy of the same commit
run the same provider and SDK code (the deploy workflow builds .venv afresh in every job)."""

from __future__ import annotations

import re

import pytest

from offline.plan.runner import REPO_ROOT

EXACT = re.compile(r"^[A-Za-z0-9._-]+==[A-Za-z0-9.+!-]+$")


def _requirements(name: str) -> list[str]:
    lines = (REPO_ROOT / name).read_text().splitlines()
    return [line for line in lines if line.strip() and not line.startswith("#")]


@pytest.mark.parametrize("name", ["requirements.txt", "requirements-checkov.txt"])
def test_every_requirement_is_one_exact_version(name):
    lines = _requirements(name)
    assert lines and [line for line in lines if not EXACT.match(line)] == []
    names = [line.split("==")[0].lower().replace("_", "-") for line in lines]
    assert len(names) == len(set(names)), "a package pinned twice"


def test_the_pulumi_sdk_matches_the_cli_the_workflows_install():
    sdk = next(line for line in _requirements("requirements.txt") if line.lower().startswith("pulumi=="))
    assert sdk.split("==")[1] == (REPO_ROOT / ".pulumi-version").read_text().strip()


def test_the_package_build_backend_is_pinned():
    assert re.search(r'requires = \["setuptools==[0-9.]+"\]', (REPO_ROOT / "pyproject.toml").read_text())
