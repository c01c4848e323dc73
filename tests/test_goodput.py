"""The goodput model (workloads/goodput.py) against figures worked out by hand from its formulas:
goodput = T / (T + F) * (1 - N * rate * (R + I / 2) - floor(T / I) * S / T), and the plan's line."""

from __future__ import annotations

import json

import pytest

from offline.report import cost, render, report
from workloads import goodput
from workloads.settings import parse_workloads_config

CLUSTER = {"trainium-workloads:clusterStack": "organization/trainium-eks/dev"}
# Prod's file system: 4,800 GiB at 250 MB/s/TiB = 4.6875 TiB x 250 = 1,171.875 MB/s.
PROD_MBPS = 1171.875


def config(**workloads):
    values = dict(CLUSTER)
    for key, value in workloads.items():
        values[f"trainium-workloads:{key}"] = value if isinstance(value, str) else json.dumps(value)
    return parse_workloads_config(values)


def test_the_downtime_of_a_failure_weighs_each_class_by_its_share():
    # (0.40 x (1 + 5) + 0.25 x (1 + 19) + 0.15 x (10 + 19) + 0.12 x (30 + 3 + 5) + 0.08 x (35 + 19)) / 60
    # = (2.4 + 5 + 4.35 + 4.56 + 4.32) / 60 = 20.63 min.
    assert goodput.downtime_hours(30) * 60 == pytest.approx(20.63)
    # A 10-minute hang limit takes 20 minutes off the silent-hang class: 20.63 - 0.12 x 20 = 18.23.
    assert goodput.downtime_hours(10) * 60 == pytest.approx(18.23)
    assert sum(c.share for c in goodput.FAILURE_CLASSES) == pytest.approx(1)


def test_a_week_of_synchronous_7b_saves_at_1200_mb_s():
    # A week's run, 4 nodes, a save of 82 s every 34 min, 20 min down per failure, 40 min fixed, 1.6e-4/node-h:
    # failures 4 x 1.6e-4 x (1/3 + 17/60) = 3.9467e-4; saves floor(167.3333 / 0.56667) = 295,
    # 295 x 82 s = 6.7194 h of 167.3333 h = 0.040156; 167.3333 / 168 = 0.996032;
    # 0.996032 x (1 - 0.00039467 - 0.040156) = 0.955643.
    run = goodput.RunModel("week", 4, 1.6e-4, 20 / 60, 34 / 60, 82 / 3600, 168 - 40 / 60, 40 / 60, 3)
    found = goodput.expected(run)
    assert found.failure_loss == pytest.approx(3.9467e-4, rel=1e-4)
    assert found.checkpoint_loss == pytest.approx(0.040156, rel=1e-4)
    assert found.ratio == pytest.approx(0.955643, abs=2e-6)
    # The same on a 150 MB/s file system: a save takes 11 min, so 295 x 11/60 h = 54.083 h of 167.333 = 0.32321.
    slow = goodput.expected(goodput.RunModel("week", 4, 1.6e-4, 20 / 60, 34 / 60, 11 / 60, 168 - 40 / 60, 40 / 60, 3))
    assert slow.ratio == pytest.approx(0.996032 * (1 - 3.9467e-4 - 0.32321), abs=1e-5)


def test_a_run_shorter_than_its_interval_pays_no_save_and_redoes_half_of_itself():
    # T = 0.5 h, I = 2 h: no save; a failure redoes 0.25 h: 2 x 1e-3 x (0.5 + 0.25) = 0.0015;
    # T / (T + F) = 0.5 / 1.0; goodput 0.5 x 0.9985 = 0.49925.
    found = goodput.expected(goodput.RunModel("short", 2, 1e-3, 0.5, 2, 0.1, 0.5, 0.5, 1))
    assert found.checkpoint_loss == 0 and found.ratio == pytest.approx(0.49925)


def test_a_restart_budget_is_spent_by_a_weeks_failures_at_64_nodes():
    # 64 nodes x 5.9e-4 x 168 h = 6.3437 failures expected; P(more than 3) = 1 - e^-m (1 + m + m^2/2 + m^3/6)
    # = 1 - 0.0017564 x (1 + 6.3437 + 20.1211 + 42.5476) = 0.87693.
    run = goodput.RunModel("big", 64, 5.9e-4, 20 / 60, 1.1, 82 / 3600, 168 - 40 / 60, 40 / 60, 3)
    found = goodput.expected(run)
    assert found.expected_failures == pytest.approx(6.34368)
    assert found.budget_exhausted == pytest.approx(0.87693, abs=1e-5)
    # Four nodes the same week: 0.1061 expected, P(more than 3) about 5e-6.
    assert goodput.expected(goodput.RunModel("small", 4, 1.58e-4, 0.34, 1, 0.02, 167.3, 0.7, 3)).budget_exhausted < 1e-5


def test_prod_nxd_llama_from_its_settings():
    # 4 nodes at 93.3 / 16 = 5.83125 sequences/s each: a 1,024-sequence step takes 1024 / 23.325 = 43.9014 s;
    # I = 100 steps = 1.219483 h. A save: 6.74e9 x 14 B = 94,360 MB at 1,171.875 MB/s = 80.521 s = 0.0223668 h.
    # T: 20,000 steps (243.9 h) cut at the 72 h deadline, less the 14 min start it includes: 71.76667 h.
    # F = (14 start + 15 compile + 3 handoff + 10 tail) / 60 = 0.7 h. R = 20.63 min = 0.343833 h.
    # failures 4 x 419 / 2,654,208 x (0.343833 + 0.609742) = 6.0214e-4; saves floor(71.76667 / 1.219483) = 58,
    # 58 x 0.0223668 / 71.76667 = 0.0180763; 71.76667 / 72.46667 x (1 - 6.0214e-4 - 0.0180763) = 0.971842.
    settings = config(nxdLlama={"nodeGroup": "trn1-32xl-ng1", "nodes": 4})
    (found,) = goodput.workload_goodput(settings, PROD_MBPS)
    assert found.run.interval_hours == pytest.approx(1.219483, rel=1e-6)
    assert found.run.save_hours == pytest.approx(0.0223668, rel=1e-5)
    assert found.run.train_hours == pytest.approx(71.76667, rel=1e-6) and found.run.fixed_hours == pytest.approx(0.7)
    assert found.ratio == pytest.approx(0.971842, abs=1e-6)
    # Checkpointing every 20 steps instead: I = 0.2438966 h, floor(294.25) = 294 saves x 0.0223668 / 71.76667
    # = 0.091628 of training.
    frequent = config(nxdLlama={"nodeGroup": "trn1-32xl-ng1", "nodes": 4, "checkpointEverySteps": 20})
    (found,) = goodput.workload_goodput(frequent, PROD_MBPS)
    assert found.checkpoint_loss == pytest.approx(0.091628, rel=1e-4)


def test_a_short_bert_run_is_mostly_start_up():
    # 200 steps of 16 x 32 x 32 sequences at 3,224.5 per node-second: 5.0814 s each, T = 0.28230 h.
    # F = (14 + 15 + 3 + 10) / 60 = 0.7 h with the precompile; T / (T + F) = 0.282283 / 0.982283 = 0.287375.
    # No save within the 1.5 h shard; failures 2 x 1.5786e-4 x (0.343833 + 0.14115) = 1.5313e-4.
    settings = config(bertPretraining={"nodeGroup": "trn1-32xl-ng1", "trainSteps": 200})
    (found,) = goodput.workload_goodput(settings, 146.484375)
    assert found.run.train_hours == pytest.approx(0.282283, rel=1e-5)
    assert found.ratio == pytest.approx(0.287375 * (1 - 1.5313e-4), abs=1e-5)
    # Without the precompile step the fixed part is 24 min: 0.282283 / 0.682283 = 0.413733.
    quick = config(bertPretraining={"nodeGroup": "trn1-32xl-ng1", "trainSteps": 200, "precompile": False})
    (found,) = goodput.workload_goodput(quick, 146.484375)
    assert found.ratio == pytest.approx(0.413733 * (1 - 1.5313e-4), abs=1e-5)


def test_the_failure_rate_is_a_setting_refused_outside_its_range():
    settings = config(failureRatePerNodeHour="0.001", nxdLlama={"nodeGroup": "trn1-32xl-ng1"})
    (found,) = goodput.workload_goodput(settings, PROD_MBPS)
    assert found.run.failure_rate == 0.001
    from infra.config.errors import ConfigError

    with pytest.raises(ConfigError, match="failureRatePerNodeHour"):
        config(failureRatePerNodeHour="-1")


def test_every_input_names_its_kind_and_source():
    for name, kind_of, source in ((n, f.kind, f.source) for n, f in goodput.FIGURES.items()):
        assert kind_of in ("M", "D", "E") and len(source) > 20, name


def test_the_plan_prints_each_workloads_goodput_beside_its_cost_in_80_columns(dev, workloads_dev):
    from tests.fixture_project import FIXTURE_ROOT

    estimate = report.workloads_cost(FIXTURE_ROOT / "workloads", "dev", dev)
    # Dev's file system: 1,200 GiB at 125 MB/s/TiB.
    assert cost.training_file_system_mbps(dev.as_json()["resources"]) == pytest.approx(146.484375)
    text = render.cost_section(estimate, "us-west-2", "workloads")
    lines = text.splitlines()
    for name, expected in estimate["goodput"].items():
        line = next(line for line in lines if line.strip().startswith(f"{name} goodput "))
        assert f"{name} goodput {expected['goodput']:.1%}" in line and len(line) <= render.WIDTH
    assert set(estimate["goodput"]) == {"bertPretraining", "rayLlama2"}


def test_no_file_system_no_goodput_figure():
    settings = config(nxdLlama={"nodeGroup": "trn1-32xl-ng1"})
    found = cost.expected_goodput(settings, None)
    assert found == {"nxdLlama": {"goodput": None, "why": "no FSx throughput in the plan"}}
    assert (
        report.goodput_line("nxdLlama", found["nxdLlama"]) == "nxdLlama goodput unknown (no FSx throughput in the plan)"
    )


def test_the_docs_show_every_input_as_the_model_uses_it():
    from tests.fixture_project import REPO_ROOT

    text = (REPO_ROOT / "docs" / "monitoring.md").read_text()
    for name, value, kind_of, source in goodput.figure_table():
        assert f"| `{name}` | {value} | {kind_of} | {source} |" in text, name


def test_the_plan_takes_the_start_from_the_first_step_model(dev):
    from tests.fixture_project import FIXTURE_ROOT

    estimate = report.workloads_cost(FIXTURE_ROOT / "workloads", "dev", dev)
    for name, expected in estimate["goodput"].items():
        warm = sum(p["minutes"] for p in estimate["firstStep"][name]["warm"])
        # Dev's BERT and Ray both compile first: + 15 min compile + 3 min hand-off + 10 min scale-down tail.
        assert expected["inputs"]["fixedHours"] == pytest.approx((warm + 15 + 3 + 10) / 60, abs=1e-6), name
