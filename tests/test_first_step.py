"""The first-step model (workloads/first_step.py over infra/facts/startup.py): the phases it adds for
a group, checked against sums worked out here from the table's figures, and the plan's line."""

from __future__ import annotations

import pytest

from infra.facts import startup
from workloads.first_step import first_step, minutes

BURNT_IN = {"minSize": 0, "labels": {"provisioner": "cluster-autoscaler"}, "startupTaints": [{"key": "k"}]}


def test_the_burn_in_pull_is_the_dlc_at_the_measured_rate():
    # 6 GB at 9.5 GB per 334 s: 6000 / 28.44 MB/s = 211 s = 3.5 min.
    assert startup.burn_in_pull().minutes == 3.5
    assert "334 s" in startup.burn_in_pull().source and "13,000 MB" in startup.burn_in_pull().source


def test_a_warm_start_from_zero_nodes_adds_every_phase():
    model = first_step("bertPretraining", BURNT_IN, 2)
    # submit 0.7 + scale-up 0.3 + launch 1.5 + boot 1.5 + DaemonSets 1.5 + pull 3.5 + checks 1.0
    # + mount 0.1 + rendezvous 0.3 + runtime 2.5; the image's own layers come during the burn-in.
    assert model.warm_minutes == pytest.approx(12.9)
    assert minutes(model.warm_minutes) == 13
    assert startup.TRAINING_IMAGE_LAYERS not in model.warm
    # cold: + compile 15 + a second submit 0.7, rendezvous 0.3 and runtime start 2.5 on the same nodes.
    assert model.cold_minutes == pytest.approx(31.4) and minutes(model.cold_minutes) == 32


@pytest.mark.parametrize("workload, compile_minutes", [("rayLlama2", 6.0), ("nxdLlama", 10.0)])
def test_each_workload_compiles_for_its_own_measured_time(workload, compile_minutes):
    model = first_step(workload, BURNT_IN, 2)
    assert model.cold_minutes - model.warm_minutes == pytest.approx(compile_minutes + 0.7 + 0.3 + 2.5)


def test_what_the_group_skips():
    karpenter = first_step("bertPretraining", {**BURNT_IN, "labels": {"provisioner": "karpenter"}}, 2)
    assert karpenter.warm_minutes == pytest.approx(12.8)
    # Without a burn-in: no DLC pull or checks, but the training image's layers after the node is up.
    unchecked = first_step("bertPretraining", {**BURNT_IN, "startupTaints": []}, 2)
    assert unchecked.warm_minutes == pytest.approx(12.9 - 3.5 - 1.0 + 0.4)
    # Nodes kept at minSize: only the submission, the mount, the rendezvous and the runtime start.
    kept = first_step("bertPretraining", {**BURNT_IN, "minSize": 2}, 2)
    assert kept.warm_minutes == pytest.approx(0.7 + 0.1 + 0.3 + 2.5)
    assert first_step("bertPretraining", {**BURNT_IN, "minSize": 1}, 2).warm_minutes == pytest.approx(12.9)


def test_minutes_round_up():
    assert [minutes(v) for v in (13.0, 13.01, 13.3, 0.0)] == [13, 14, 14, 0]


def test_the_plan_prints_each_training_workload_in_80_columns(capsys, tmp_path):
    from offline.plan import command
    from tests.fixture_project import FIXTURE_ROOT

    argv = ["--stack", "dev", "--project-dir", str(FIXTURE_ROOT), "--out", str(tmp_path)]
    assert command.main(argv) == 0
    text = capsys.readouterr().out
    assert "      bertPretraining first step: warm 13 min, cold 32 min" in text.splitlines()
    assert "      rayLlama2 first step: warm 13 min, cold 23 min" in text.splitlines()
    assert "clusterCheck first step" not in text  # the acceptance test trains nothing
    assert max(len(line) for line in text.splitlines() if "first step" in line) <= 80


def test_wide_lists_every_phase_with_its_kind_and_source():
    from offline.report import report

    assert report.first_step_breakdown({"firstStep": {}}) == []
    model = first_step("nxdLlama", BURNT_IN, 4)
    estimate = {
        "firstStep": {
            "nxdLlama": {
                "warmMinutes": minutes(model.warm_minutes),
                "coldMinutes": minutes(model.cold_minutes),
                "warm": [vars(p) for p in model.warm],
                "coldExtra": [vars(p) for p in model.cold_extra],
            }
        }
    }
    lines = report.first_step_breakdown(estimate)
    assert lines[0].startswith("First step of nxdLlama from zero nodes: warm about 13 min, cold about 27 min")
    assert len(lines) == 1 + 1 + len(model.warm) + 1 + len(model.cold_extra)
    assert any("10.0 min  llama2-compile" in line and "[measured: the NeMo/MPI seed" in line for line in lines)
