"""Shared fixtures: the real program evaluated under the offline mocks."""

from __future__ import annotations

import json
from typing import Any, Callable

import pytest

from offline.runner import REPO_ROOT, PlanResult, run_program, stack_config


@pytest.fixture(scope="session")
def dev() -> PlanResult:
    return run_program(REPO_ROOT, "dev")


@pytest.fixture(scope="session")
def prod() -> PlanResult:
    return run_program(REPO_ROOT, "prod")


@pytest.fixture
def plan_with() -> Callable[..., PlanResult]:
    """Run the dev stack with some project keys replaced: plan_with(acceleratorNodeGroups=[...])."""

    def run(**overrides: Any) -> PlanResult:
        config = stack_config(REPO_ROOT, "dev")
        for key, value in overrides.items():
            config[f"trainium-eks:{key}"] = json.dumps(value) if isinstance(value, (dict, list)) else str(value)
        return run_program(REPO_ROOT, "dev", config)

    return run
