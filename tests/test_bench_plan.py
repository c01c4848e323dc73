"""tools/bench_plan.py's arithmetic and arguments, with a stand-in timer: no timing is asserted
here (a loaded CI machine would make that flaky); `python -m tools.bench_plan` measures."""

from __future__ import annotations

import sys
from typing import Sequence

import pytest

from tools import bench_plan


def fake_timer(floor: float, plan: float, calls: list[list[str]] | None = None):
    def timer(command: Sequence[str]) -> float:
        if calls is not None:
            calls.append(list(command))
        return plan if "offline.plan" in command else floor

    return timer


def test_defaults_are_five_runs_a_4x_target_and_the_dev_stack():
    args = bench_plan.parse_args([])
    assert (args.runs, args.max_ratio, args.stack, args.python) == (5, 4.0, "dev", sys.executable)


@pytest.mark.parametrize("argv", [["--runs", "0"], ["--runs", "-2"], ["--max-ratio", "0"], ["--max-ratio", "nan"]])
def test_nonsense_arguments_are_refused(argv, capsys):
    with pytest.raises(SystemExit) as exc:
        bench_plan.parse_args(argv)
    assert exc.value.code == 2


def test_the_floor_is_the_sdk_import_line_in_a_fresh_interpreter():
    command = bench_plan.floor_command("/venv/bin/python")
    assert command == ["/venv/bin/python", "-c", "import pulumi, pulumi_aws, pulumi_eks, pulumi_kubernetes, pydantic"]


def test_the_plan_is_make_plans_command_writing_elsewhere(tmp_path):
    assert bench_plan.plan_command("py", "prod", tmp_path) == [
        "py", "-m", "offline.plan", "--stack", "prod", "--out", str(tmp_path)]


def test_runs_alternate_floor_and_plan():
    calls: list[list[str]] = []
    floor_times, plan_times = bench_plan.measure(["floor"], ["offline.plan"], 3, fake_timer(1.0, 2.0, calls))
    assert calls == [["floor"], ["offline.plan"]] * 3
    assert (floor_times, plan_times) == ([1.0] * 3, [2.0] * 3)


def test_medians_and_ratio():
    result = bench_plan.summarize([0.30, 0.20, 0.25, 9.0, 0.24], [1.0, 1.2, 0.9, 1.1, 5.0], max_ratio=4)
    assert (result.floor_median, result.plan_median) == (0.25, 1.1)
    assert result.ratio == pytest.approx(4.4)
    assert not result.within_target
    assert "ratio: 4.40x, OVER the 4x target" in result.render()
    assert bench_plan.summarize([0.25], [1.0], max_ratio=4).within_target  # exactly 4x passes


@pytest.mark.parametrize(("plan_seconds", "max_ratio", "code"), [(0.9, "4", 0), (1.1, "4", 1), (1.1, "4.5", 0)])
def test_exit_code_says_whether_the_ratio_is_within_the_target(plan_seconds, max_ratio, code, capsys):
    argv = ["--runs", "2", "--max-ratio", max_ratio]
    assert bench_plan.main(argv, timer=fake_timer(0.25, plan_seconds)) == code
    printed = capsys.readouterr().out
    assert "import floor: 0.250 s (median)" in printed
    assert f"offline plan: {plan_seconds:.3f} s (median)" in printed


def test_a_failing_plan_is_an_error_not_a_fast_plan(capsys):
    def timer(command: Sequence[str]) -> float:
        if "offline.plan" in command:
            raise bench_plan.PlanFailed("offline.plan exited 2")
        return 0.25

    assert bench_plan.main(["--runs", "1"], timer=timer) == bench_plan.EXIT_PLAN_FAILED
    assert "offline.plan exited 2" in capsys.readouterr().err


def test_a_real_failing_command_raises():
    with pytest.raises(bench_plan.PlanFailed, match="exited 2"):
        bench_plan.time_run([sys.executable, "-c", "import sys; sys.exit(2)"])


def test_a_plan_refused_by_policy_still_counts():
    # Exit code 3: mandatory policy violations, with every plan written (offline/plan.py).
    assert bench_plan.time_run([sys.executable, "-c", "import sys; sys.exit(3)"]) > 0
