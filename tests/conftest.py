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


WORKLOADS_DIR = REPO_ROOT / "workloads"
HF_TOKEN_KEY = "trainium-workloads:hfToken"
STAND_IN_TOKEN = "hf_test_token"


@pytest.fixture(scope="session")
def workloads_dev(dev: PlanResult) -> PlanResult:
    from offline.plan import plan_workloads

    return plan_workloads(WORKLOADS_DIR, "dev", dev)


@pytest.fixture(scope="session")
def workloads_prod(prod: PlanResult) -> PlanResult:
    from offline.plan import plan_workloads

    return plan_workloads(WORKLOADS_DIR, "prod", prod)


# The dev workload stack with every workload on: NeMo and the RedPajama staging it reads (off in the
# shipped dev file, whose trn1-32xl-ng1 holds 4 nodes) switched on, and that group's maxSize raised
# to 8 so BERT (2), NeMo (4) and the check (2) fit it together (workloads/schedule.py).
ALL_ON = {"nemoLlama2": {"nodeGroup": "trn1-32xl-ng1", "nodes": 4, "trainIters": 100, "trainDeadlineMinutes": 240},
          "dataStaging": {"wikicorpus": True, "redpajama": True, "cmdShell": True}}
ALL_ON_MAX_SIZE = {"trn1-32xl-ng1": 8}


def all_on_cluster(outputs: dict[str, Any]) -> None:
    for group in outputs["acceleratorNodeGroups"]:
        group["maxSize"] = ALL_ON_MAX_SIZE.get(group["name"], group["maxSize"])


@pytest.fixture(scope="session")
def workloads_all(dev: PlanResult) -> PlanResult:
    return run_workloads(dev, all_on_cluster, **ALL_ON)


def run_workloads(dev: PlanResult, cluster: Callable[[dict[str, Any]], None] | None = None, **overrides: Any) -> PlanResult:
    import copy

    from offline.mocks import StackOutputs

    outputs = copy.deepcopy(dev.outputs)
    if cluster is not None:
        cluster(outputs)
    config = stack_config(WORKLOADS_DIR, "dev")
    secrets = {HF_TOKEN_KEY: STAND_IN_TOKEN}
    for key, value in overrides.items():
        full = f"trainium-workloads:{key}"
        if key == "hfToken":
            secrets = {} if value is None else {HF_TOKEN_KEY: value}
        elif value is None:
            config.pop(full, None)
        else:
            config[full] = json.dumps(value) if isinstance(value, (dict, list)) else str(value)
    reference = config["trainium-workloads:clusterStack"]
    references = {reference: StackOutputs(outputs, frozenset(dev.secret_outputs))}
    return run_program(WORKLOADS_DIR, "dev", config, stack_references=references, secrets=secrets)


@pytest.fixture
def workloads_with(dev: PlanResult) -> Callable[..., PlanResult]:
    """The dev workload stack with keys replaced (None removes one) and the cluster's outputs
    edited by ``cluster=lambda outputs: ...``; the HF token is set unless ``hfToken=None``."""

    def run(cluster: Callable[[dict[str, Any]], None] | None = None, **overrides: Any) -> PlanResult:
        return run_workloads(dev, cluster, **overrides)

    return run
