"""The Capacity Block window check counts only the jobs an update starts (workloads/capacity_windows.py):
a run admitted earlier is left alone, every later `up` of the stack still goes through, and the advice
never names a setting whose change would replace a job left running."""

from __future__ import annotations

import copy
import dataclasses
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from offline.plan.mocks import StackOutputs
from offline.plan.runner import PlanResult, own_reference, stack_config
from tests.conftest import HF_TOKEN_KEY, STAND_IN_TOKEN, WORKLOADS_DIR, _remembered_run
from tests.fixture_project import FIXTURE_ROOT
from workloads import capacity_windows, step_gate
from workloads.capacity_windows import admissions, chain_digests, window_problems
from workloads.deadlines import TrainiumStep

OWN = own_reference(WORKLOADS_DIR, "dev")
START = datetime(2026, 12, 1, 11, 30, tzinfo=UTC)
BLOCK = {"start": "2026-12-01T11:30:00Z", "end": "2026-12-02T11:30:00Z"}  # the watchdog stops jobs at 10:40 next day


def step(name: str, hours: float, key: str = "trainDeadlineMinutes", **more: Any) -> TrainiumStep:
    return TrainiumStep(
        "bertPretraining",
        name,
        "cb",
        2,
        int(hours * 3600),
        "",
        deadline_key=key,
        deadline_value=int(hours * 60),
        **more,
    )


def test_a_run_admitted_at_the_block_start_is_still_accepted_mid_block() -> None:
    steps = [step("bert-train", 20)]
    mid_block = START + timedelta(hours=12)
    # New at the start: 20 h fit the 23 h 10 min before the stop.
    assert window_problems(steps, {"cb": BLOCK}, START, str) == []
    # Twelve hours later it no longer would, if it were new...
    assert window_problems(steps, {"cb": BLOCK}, mid_block, str)
    # ...but it is the job the first `up` started: an unchanged `up` leaves it alone and goes through.
    assert window_problems(steps, {"cb": BLOCK}, mid_block, str, kept={"bert-train": START}) == []


def test_a_new_step_that_does_not_fit_is_refused_naming_the_key_its_value_and_the_largest_that_fits() -> None:
    mid_block = START + timedelta(hours=20)  # 3 h 10 min left
    [problem] = window_problems([step("bert-train", 4)], {"cb": BLOCK}, mid_block, lambda w: w)
    assert "bertPretraining: the jobs this update starts on node group cb need up to 4 h 00 min (bert-train" in problem
    assert "3 h 10 min from now, at most" in problem
    assert "lower bertPretraining.trainDeadlineMinutes from 240 to at most 190" in problem


def test_steps_left_running_count_one_after_another_before_a_new_one() -> None:
    """A chain admitted together runs its steps in turn: the data step's 2 h, then the precompile's 3 h,
    then the new training run's 18 h 30 min end 23 h 30 min after the block's start, past its stop."""
    data, precompile, train = step("data", 2, "dataKey"), step("pre", 3, "preKey"), step("train", 18.5)
    kept = {"data": START, "pre": START}
    [problem] = window_problems([data, precompile, train], {"cb": BLOCK}, START + timedelta(hours=1), str, kept=kept)
    assert "from the end of pre's bound, started by an earlier update" in problem
    assert window_problems([data, precompile, train], {"cb": BLOCK}, START, str, kept={}) != []
    shorter = dataclasses.replace(train, hold_seconds=18 * 3600)
    assert window_problems([data, precompile, shorter], {"cb": BLOCK}, START + timedelta(hours=1), str, kept=kept) == []


def test_a_new_step_waits_for_the_bound_of_a_step_left_running_before_it() -> None:
    precompile, train = step("bert-precompile", 3, "precompileDeadlineMinutes"), step("bert-train", 15)
    # The precompile was admitted at the start; a new training run follows it 4 hours in.
    now = START + timedelta(hours=4)
    assert window_problems([precompile, train], {"cb": BLOCK}, now, str, kept={"bert-precompile": START}) == []
    longer = dataclasses.replace(train, hold_seconds=21 * 3600, deadline_value=21 * 60)
    [problem] = window_problems([precompile, longer], {"cb": BLOCK}, now, str, kept={"bert-precompile": START})
    # Counted from now, not from the precompile's bound (3 h after the start, already over); only the
    # new job is named and only its key is advised.
    assert "(bert-train 21 h 00 min)" in problem and "19 h 10 min from now" in problem
    assert "precompileDeadlineMinutes" not in problem and "trainDeadlineMinutes from 1260 to at most 1150" in problem
    # Admitted one hour before now, the precompile may still run for 2 hours: the training starts after it.
    [problem] = window_problems(
        [precompile, train],
        {"cb": BLOCK},
        now + timedelta(hours=4),
        str,
        kept={"bert-precompile": now + timedelta(hours=3)},
    )
    assert "from the end of bert-precompile's bound, started by an earlier update" in problem  # fmt: skip


def test_the_advice_never_names_a_setting_that_also_shapes_a_job_left_running() -> None:
    # Ray's stepDeadlineMinutes sets both the data step and the precompile: with the data step running,
    # lowering it would replace that job too, so only a later or longer block is advised.
    precompile = dataclasses.replace(
        step("llama2-precompilation-job", 30, "stepDeadlineMinutes"),
        shared_with=("llama2-generate-pretraining-test-data",),
    )
    now = START + timedelta(hours=1)
    [problem] = window_problems(
        [precompile], {"cb": BLOCK}, now, str, kept={"llama2-generate-pretraining-test-data": START}
    )
    assert "lower" not in problem and problem.endswith("use a later or longer block")
    [problem] = window_problems([precompile], {"cb": BLOCK}, now, str)
    assert "lower bertPretraining.stepDeadlineMinutes from 1800 to at most" in problem


def job(name: str, command: str, gate_for: str | None = None) -> dict[str, Any]:
    labels = {step_gate.GATE_FOR: gate_for} if gate_for else {}
    return {"metadata": {"name": name, "labels": labels}, "spec": {"command": command}}


def test_a_job_is_new_when_it_or_any_job_before_it_in_its_chain_changed() -> None:
    before = chain_digests([[job("compile", "a"), job("compile-gate", "x", "compile"), job("train", "b")]])
    assert set(before) == {"compile", "train"}  # gates are not jobs: replacing one replaces nothing
    records, kept = admissions(before, None, START)
    assert kept == {} and records["train"] == {"digest": before["train"], "admitted": "2026-12-01T11:30:00Z"}
    later = START + timedelta(hours=5)
    # Unchanged (a changed gate included): both keep their admission.
    same = chain_digests([[job("compile", "a"), job("compile-gate", "y", "compile"), job("train", "b")]])
    assert admissions(same, records, later)[1] == {"compile": START, "train": START}
    # A new training command: the training is new, the compile kept.
    assert admissions(chain_digests([[job("compile", "a"), job("train", "c")]]), records, later)[1] == {
        "compile": START
    }
    # A new compile replaces the training that follows it (workloads/kube.py follow): both new.
    new_compile = chain_digests([[job("compile", "z"), job("train", "b")]])
    records2, kept2 = admissions(new_compile, records, later)
    assert kept2 == {} and records2["train"]["admitted"] == "2026-12-01T16:30:00Z"
    # A record this program did not write counts the job as new.
    assert admissions(before, {"compile": {"digest": before["compile"], "admitted": "soon"}}, later)[1] == {}


# --- through the workload program --------------------------------------------------------------------


def _block_outputs(dev: PlanResult, start: datetime, end: datetime) -> dict[str, Any]:
    outputs = copy.deepcopy(dev.outputs)
    for group in outputs["acceleratorNodeGroups"]:
        group["capacityBlock"] = {"start": capacity_windows._stamp(start), "end": capacity_windows._stamp(end)}
    return outputs


def _run(dev: PlanResult, outputs: dict[str, Any], previous: dict[str, Any] | None, **config: Any) -> PlanResult:
    values = {**stack_config(WORKLOADS_DIR, "dev"), **config}
    references = {values["trainium-workloads:clusterStack"]: StackOutputs(outputs, frozenset(dev.secret_outputs))}
    if previous is not None:
        # As the engine lists them where `workloads` holds a secret (prod's TensorBoard password).
        references[OWN] = StackOutputs({"stepAdmissions": previous, "workloads": {}}, frozenset({"workloads"}))
    return _remembered_run(
        WORKLOADS_DIR, "dev", values, stack_references=references, secrets={HF_TOKEN_KEY: STAND_IN_TOKEN}
    )


def test_the_program_records_its_admissions_and_an_unchanged_up_mid_block_goes_through(dev: PlanResult) -> None:
    from infra.config.errors import ConfigError

    now = datetime.now(UTC)
    # A block that started 14 hours ago and leaves 9 h 10 min: the dev stack's BERT run needs more than that
    # (tests/test_node_health.py: up to 11 h 22 min), so a new run is refused...
    outputs = _block_outputs(dev, now - timedelta(hours=14), now + timedelta(hours=10))
    with pytest.raises(ConfigError, match="bertPretraining: the jobs this update starts on node group trn1-32xl-ng1"):
        _run(dev, outputs, None)
    # ...but the run the stack admitted at the block's start (its last update's stepAdmissions, the digests
    # the program computes) is left alone.
    from infra import contract
    from workloads import checks, goodput
    from workloads.settings import parse_workloads_config

    # The settings the program gives the jobs: what dev's file leaves unset derived (workloads/goodput.py).
    cluster = contract.parse_contract(outputs)
    parsed = parse_workloads_config({**stack_config(WORKLOADS_DIR, "dev"), HF_TOKEN_KEY: STAND_IN_TOKEN})
    settings = goodput.resolved(parsed, goodput.storage_throughput_mbps(cluster.storage))
    recorded, _ = checks.step_admissions(settings, cluster, None, now - timedelta(hours=14))
    # Every job of each workload with a step on a block (every group is on one here), Ray's data step on the
    # head included; staging runs on no Trainium group.
    assert {"bert-precompile", "bert-train", "llama2-generate-pretraining-test-data"} <= set(recorded)
    assert "stage-wikicorpus" not in recorded
    assert not [n for n in recorded if n.endswith("-gate")]
    unchanged = _run(dev, outputs, recorded)
    assert unchanged.outputs["stepAdmissions"] == recorded
    # Read back from an output of its own: the own stack's secret `workloads` leaves the new one readable.
    assert not {"workloads", "stepAdmissions"} & unchanged.secret_outputs
    # A changed training run is new: refused, naming only it; the precompile left running is not touched.
    with pytest.raises(ConfigError) as refused:
        _run(dev, outputs, recorded, **{"trainium-workloads:bertPretraining": _bert(trainDeadlineMinutes=300)})
    text = str(refused.value)
    assert "(bert-train " in text and "bert-precompile" not in text and "precompileDeadlineMinutes" not in text
    # 2 attempts x (45 + 300 + 5) + 35 min and 2 burn-ins of 13 min: 12 h 41 min against 9 h 10 min.
    assert "need up to 12 h 41 min" in text and "trainDeadlineMinutes from 300 to at most 194" in text


def _bert(**changes: Any) -> str:
    import json

    import yaml

    stack = yaml.safe_load((WORKLOADS_DIR / "Pulumi.dev.yaml").read_text())
    return json.dumps({**stack["config"]["trainium-workloads:bertPretraining"], **changes})


def test_the_pipeline_preflight_plans_with_the_stacks_own_admissions(dev: PlanResult, monkeypatch) -> None:
    """tools/workloads_preflight.py renders the workload stack before CI's `pulumi up`: given the
    stack's own stepAdmissions, mid-block it accepts the unchanged run that `pulumi up` accepts."""
    import tools.workloads_preflight as preflight
    from offline.plan import runner

    now = datetime.now(UTC)
    outputs = _block_outputs(dev, now - timedelta(hours=14), now + timedelta(hours=10))
    monkeypatch.setattr(preflight, "run_program", _cluster_then_workloads(runner.run_program, dev, outputs))
    from infra import contract
    from workloads import checks, goodput
    from workloads.settings import parse_workloads_config

    # The settings the program gives the jobs: what dev's file leaves unset derived (workloads/goodput.py).
    cluster = contract.parse_contract(outputs)
    parsed = parse_workloads_config({**stack_config(WORKLOADS_DIR, "dev"), HF_TOKEN_KEY: STAND_IN_TOKEN})
    settings = goodput.resolved(parsed, goodput.storage_throughput_mbps(cluster.storage))
    recorded, _ = checks.step_admissions(settings, cluster, None, now - timedelta(hours=14))
    _, workloads = preflight.plan("dev", None, recorded, FIXTURE_ROOT)
    assert workloads.outputs["stepAdmissions"] == recorded
    from infra.config.errors import ConfigError

    with pytest.raises(ConfigError, match="bertPretraining: the jobs this update starts"):
        preflight.plan("dev", None, None, FIXTURE_ROOT)


def _cluster_then_workloads(run_program: Any, dev: PlanResult, outputs: dict[str, Any]) -> Any:
    """run_program with the cluster stack's outputs on a Capacity Block: the preflight plans the cluster
    stack offline first, and its workloads read what that returns."""

    def run(project_dir: Any, stack: str, *args: Any, **kwargs: Any) -> PlanResult:
        if args or kwargs:
            return run_program(project_dir, stack, *args, **kwargs)
        return dataclasses.replace(dev, outputs=outputs)

    return run
