"""How long `make plan` takes against the import floor, measured side by side.

    .venv/bin/python -m tools.bench_plan [--runs 5] [--max-ratio 4] [--stack dev]

The floor is what no offline plan can beat: a fresh interpreter of this virtualenv importing
the SDKs the programs are written against (``FLOOR_IMPORTS``; pulumi_aws and friends load
their submodules lazily, so this is their top level only). The plan is the command `make plan`
runs, ``python -m offline.plan --stack STACK``, writing into a scratch directory instead of
build/plan so a benchmark never changes what a reviewer last planned.

Both run as fresh subprocesses, alternately, so a machine that gets busier midway slows both;
the medians of ``--runs`` runs each are printed with their ratio. Exit code 1 when the ratio
exceeds ``--max-ratio``, 2 when the plan itself fails (a broken plan is fast, not good).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

REPO_ROOT = Path(__file__).resolve().parent.parent
FLOOR_IMPORTS = "import pulumi, pulumi_aws, pulumi_eks, pulumi_kubernetes, pydantic"
EXIT_TOO_SLOW = 1
EXIT_PLAN_FAILED = 2


class PlanFailed(RuntimeError):
    """The offline plan exited non-zero: its timing says nothing."""


@dataclass(frozen=True)
class Result:
    floor_median: float
    plan_median: float
    max_ratio: float

    @property
    def ratio(self) -> float:
        return self.plan_median / self.floor_median

    @property
    def within_target(self) -> bool:
        return self.ratio <= self.max_ratio

    def render(self) -> str:
        verdict = "within" if self.within_target else "OVER"
        return (
            f"import floor: {self.floor_median:.3f} s (median)\n"
            f"offline plan: {self.plan_median:.3f} s (median)\n"
            f"ratio: {self.ratio:.2f}x, {verdict} the {self.max_ratio:g}x target"
        )


def positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"needs at least 1, got {value}")
    return value


def positive_float(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"needs a number above 0, got {text}")
    return value


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=positive_int, default=5, help="runs of each command (default 5)")
    parser.add_argument("--max-ratio", type=positive_float, default=4.0,
                        help="largest plan/floor ratio of the medians that passes (default 4)")
    parser.add_argument("--stack", default="dev", help="the stack `make plan STACK=...` plans (default dev)")
    parser.add_argument("--python", default=sys.executable,
                        help="the virtualenv's interpreter (default: the one running this)")
    return parser.parse_args(argv)


def floor_command(python: str) -> list[str]:
    return [python, "-c", FLOOR_IMPORTS]


def plan_command(python: str, stack: str, out: Path) -> list[str]:
    return [python, "-m", "offline.plan", "--stack", stack, "--out", str(out)]


def time_run(command: Sequence[str]) -> float:
    """Wall time of one fresh process, output discarded; PlanFailed when it exits non-zero.
    (A mandatory policy violation, exit 3, still wrote everything: it counts as a plan.)"""
    start = time.perf_counter()
    completed = subprocess.run(command, cwd=REPO_ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    elapsed = time.perf_counter() - start
    if completed.returncode not in (0, 3):
        raise PlanFailed(f"{' '.join(command)} exited {completed.returncode}:\n{completed.stderr.decode()}")
    return elapsed


def measure(floor: Sequence[str], plan: Sequence[str], runs: int,
            timer: Callable[[Sequence[str]], float] = time_run) -> tuple[list[float], list[float]]:
    """Alternate the two commands, so load that comes and goes weighs on both alike."""
    floor_times: list[float] = []
    plan_times: list[float] = []
    for _ in range(runs):
        floor_times.append(timer(floor))
        plan_times.append(timer(plan))
    return floor_times, plan_times


def summarize(floor_times: Sequence[float], plan_times: Sequence[float], max_ratio: float) -> Result:
    return Result(statistics.median(floor_times), statistics.median(plan_times), max_ratio)


def main(argv: Sequence[str] | None = None, timer: Callable[[Sequence[str]], float] = time_run) -> int:
    args = parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-plan-") as out:
        try:
            floor_times, plan_times = measure(floor_command(args.python), plan_command(args.python, args.stack, Path(out)),
                                              args.runs, timer)
        except PlanFailed as exc:
            print(f"error: {exc}", file=sys.stderr)
            return EXIT_PLAN_FAILED
    result = summarize(floor_times, plan_times, args.max_ratio)
    print(f"runs: {args.runs} each, alternating; stack {args.stack}")
    print("floor runs: " + " ".join(f"{t:.3f}" for t in floor_times))
    print("plan runs:  " + " ".join(f"{t:.3f}" for t in plan_times))
    print(result.render())
    return 0 if result.within_target else EXIT_TOO_SLOW


if __name__ == "__main__":
    sys.exit(main())
