"""Shared fixtures: the real program evaluated under the offline mocks."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from tests.fixture_project import FIXTURE_ROOT

if TYPE_CHECKING:
    from offline.plan.runner import PlanResult

# The xdist controller loads this file too, and runs no test: what the tests need (pulumi, the
# SDKs, offline.plan.runner) is imported in the fixtures below, so it starts the workers without
# waiting for imports only they use.
REPO_ROOT = Path(__file__).resolve().parent.parent


# --- the team's own files stay the team's -------------------------------------------------------
# A team edits Pulumi.*.yaml and policy/config.*.json (README, step 2). Only the tests of those
# files read them (TEAM_FILE_TESTS); every other test plans tests/stacks' copies, so a valid edit
# never turns it red. An audit hook (PEP 578: the interpreter raises "open" for every file opened)
# names any other test that reads one.
TEAM_FILES = {
    *(
        REPO_ROOT / project / f"Pulumi.{stack}.yaml"
        for project in (".", "workloads", "bootstrap")
        for stack in ("dev", "prod")
    ),
    *(REPO_ROOT / "policy" / f"config.{stack}.json" for stack in ("dev", "prod")),
}
TEAM_FILE_TESTS = ("tests/test_team_files.py",)
_team_reads: list[str] = []


def _note_team_file_reads(event: str, args: tuple[Any, ...]) -> None:
    if event == "open" and isinstance(args[0], (str, Path)) and Path(args[0]).resolve() in TEAM_FILES:
        _team_reads.append(str(Path(args[0]).relative_to(REPO_ROOT)) if Path(args[0]).is_absolute() else str(args[0]))


@pytest.fixture(autouse=True)
def _reads_no_team_file(request: pytest.FixtureRequest) -> Any:
    _team_reads.clear()
    yield
    if not request.node.nodeid.startswith(TEAM_FILE_TESTS) and _team_reads:
        pytest.fail(
            f"{request.node.nodeid} read this checkout's {', '.join(sorted(set(_team_reads)))}, which a team edits: "
            "plan the copies in tests/stacks instead (tests/fixture_project.py FIXTURE_ROOT)"
        )


def pytest_configure(config: pytest.Config) -> None:
    import sys

    sys.addaudithook(_note_team_file_reads)


@pytest.fixture(scope="session")
def dev() -> PlanResult:
    return remembered_program(FIXTURE_ROOT, "dev")


@pytest.fixture(scope="session")
def prod() -> PlanResult:
    return remembered_program(FIXTURE_ROOT, "prod")


# dev on FSx for Lustre (storage.kind fsx, prod's kind; the shipped dev file runs EFS): what the tests of the
# FSx file system, its claims, root Jobs and driver plan, at dev's size.
FSX_STORAGE = {"kind": "fsx"}


def fsx_config(config: dict[str, str]) -> dict[str, str]:
    """A dev stack file's config with its file system on FSx (every other storage key kept)."""
    storage = json.loads(config.get("trainium-eks:storage", "{}"))
    return {**config, "trainium-eks:storage": json.dumps({**storage, **FSX_STORAGE})}


@pytest.fixture(scope="session")
def dev_fsx() -> PlanResult:
    from offline.plan.runner import stack_config

    return _remembered_run(FIXTURE_ROOT, "dev", fsx_config(stack_config(FIXTURE_ROOT, "dev")))


@pytest.fixture
def plan_with() -> Callable[..., PlanResult]:
    """Run the dev stack with some project keys replaced: plan_with(acceleratorNodeGroups=[...])."""

    def run(**overrides: Any) -> PlanResult:
        from offline.plan.runner import stack_config

        config = stack_config(FIXTURE_ROOT, "dev")
        for key, value in overrides.items():
            config[f"trainium-eks:{key}"] = json.dumps(value) if isinstance(value, (dict, list)) else str(value)
        return _remembered_run(FIXTURE_ROOT, "dev", config)

    return run


WORKLOADS_DIR = FIXTURE_ROOT / "workloads"
HF_TOKEN_KEY = "trainium-workloads:hfToken"
STAND_IN_TOKEN = "hf_test_token"


@pytest.fixture(scope="session")
def workloads_dev(dev: PlanResult) -> PlanResult:
    from offline.plan.command import plan_workloads

    return plan_workloads(WORKLOADS_DIR, "dev", dev)


@pytest.fixture(scope="session")
def workloads_prod(prod: PlanResult) -> PlanResult:
    from offline.plan.command import plan_workloads

    return plan_workloads(WORKLOADS_DIR, "prod", prod)


# The dev workload stack with every workload on: NxD Training and the RedPajama staging it reads (off in the
# shipped dev file, whose trn1-32xl-ng1 holds 4 nodes) switched on, and that group's maxSize raised
# to 8 so BERT (2), NxD Training (4) and the check (2) fit it together (workloads/schedule.py).
ALL_ON = {
    "nxdLlama": {"nodeGroup": "trn1-32xl-ng1", "nodes": 4, "trainIters": 100, "trainDeadlineMinutes": 240},
    "dataStaging": {"wikicorpus": True, "redpajama": True, "cmdShell": True},
}
ALL_ON_MAX_SIZE = {"trn1-32xl-ng1": 8}


def all_on_cluster(outputs: dict[str, Any]) -> None:
    for group in outputs["acceleratorNodeGroups"]:
        group["maxSize"] = ALL_ON_MAX_SIZE.get(group["name"], group["maxSize"])


@pytest.fixture(scope="session")
def workloads_all(dev: PlanResult) -> PlanResult:
    return run_workloads(dev, all_on_cluster, **ALL_ON)


def run_workloads(
    dev: PlanResult, cluster: Callable[[dict[str, Any]], None] | None = None, **overrides: Any
) -> PlanResult:
    import copy

    from offline.plan.mocks import StackOutputs
    from offline.plan.runner import stack_config

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
    return _remembered_run(WORKLOADS_DIR, "dev", config, stack_references=references, secrets=secrets)


# Tests of one worker that plan the same configuration share one run: many tests plan the same few
# configurations. Only successful runs are kept: a refusal is raised anew
# each time. Callers only read a PlanResult.
_RUNS: dict[str, PlanResult] = {}


def remembered_program(
    project_dir: Any,
    stack: str,
    config: dict[str, str] | None = None,
    stack_references: Any = None,
    secrets: dict[str, str] | None = None,
) -> PlanResult:
    """offline.plan.runner.run_program (config: the stack file's when None), each distinct input once a
    worker: for code under test that runs the programs itself (tools/workloads_preflight.py)."""
    from offline.plan.runner import stack_config

    config = stack_config(project_dir, stack) if config is None else config
    return _remembered_run(project_dir, stack, config, stack_references=stack_references, secrets=secrets)


def _remembered_run(project_dir: Any, stack: str, config: dict[str, str], **options: Any) -> PlanResult:
    references = {
        name: [ref.outputs, sorted(ref.secret_names)] for name, ref in (options.get("stack_references") or {}).items()
    }
    from offline.plan.runner import project_name, run_program

    # By project, not directory: every copy of a project runs the same program (tests/fixture_project.py,
    # tests/project_copy.py), so the same configuration plans alike wherever its files are.
    key = json.dumps(
        [project_name(Path(project_dir)), stack, config, references, options.get("secrets")],
        sort_keys=True,
        default=str,
    )
    if key not in _RUNS:
        _RUNS[key] = run_program(project_dir, stack, config, **options)
    return _RUNS[key]


@pytest.fixture
def workloads_with(dev: PlanResult) -> Callable[..., PlanResult]:
    """The dev workload stack with keys replaced (None removes one) and the cluster's outputs
    edited by ``cluster=lambda outputs: ...``; the HF token is set unless ``hfToken=None``."""

    def run(cluster: Callable[[dict[str, Any]], None] | None = None, **overrides: Any) -> PlanResult:
        return run_workloads(dev, cluster, **overrides)

    return run
