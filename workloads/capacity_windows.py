"""Capacity Block windows: a run on a Capacity Block group must end before EKS takes the nodes.

For a managed node group on a Capacity Block, EKS sets a scheduled scale-down to zero 40 minutes
before the reservation ends, which drains the nodes (evicting their pods), and EC2 starts
terminating the instances 30 minutes before the end (EKS user guide ml/capacity-blocks-mng.adoc,
awsdocs/amazon-eks-user-guide at 4d52b4d0). Ahead of both, the gang watchdog stops every job still
on the group at its stop-by time (``stop_by``: STOP_MARGIN before the scale-down), keeping it
resumable (watchdog_loop.py). A step's bound (workloads/deadlines.py: every attempt, scheduling and
start-up included) that reaches past the stop-by time would be cut by that stop instead of its own
deadline; so the workload stack refuses it, naming the time it needs and the time the block
leaves. Steps that do fit end by their own deadline, keeping every checkpoint they completed
(docs/resilience.md, "A Capacity Block ends"); the watchdog's stop is the fallback, the drain's
eviction the last resort.
Pure: the steps, the groups' windows and the clock come in.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from infra.contract import CapacityWindow
from workloads.deadlines import TrainiumStep

EKS_SCALE_DOWN_BEFORE_END = timedelta(minutes=40)
# How long before the scale-down the gang watchdog ends a job still running on the block: one
# watchdog pass (watchdog_loop.POLL_SECONDS), the controller deleting the pods, and their
# termination grace, so the drain finds nothing of ours and no pod is cut by EC2's reclaim.
STOP_MARGIN = timedelta(minutes=10)


def parse_time(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def stop_by(window: CapacityWindow | None) -> str | None:
    """When the gang watchdog ends a job on a group with this Capacity Block window (None: the group
    is not on a block): the block's end, less EKS's scale-down lead and ``STOP_MARGIN``."""
    if not window:
        return None
    when = parse_time(window["end"]) - EKS_SCALE_DOWN_BEFORE_END - STOP_MARGIN
    return when.isoformat().replace("+00:00", "Z")


def _hours(seconds: float) -> str:
    minutes = int(seconds // 60)
    return f"{minutes // 60} h {minutes % 60:02d} min"


def window_problems(
    steps: Sequence[TrainiumStep],
    windows: Mapping[str, CapacityWindow | None],
    now: datetime,
    key: Any,
    burn_in_seconds: Mapping[str, int] | None = None,
) -> list[str]:
    """One problem per workload whose steps on a Capacity Block group, run one after another from
    ``now`` (or the block's start, if later), cannot end before the scale-down. ``key(workload)``
    names the workload's stack key. ``burn_in_seconds``: per health-gated group, the most a new node
    spends in its burn-in, counted once for every attempt of every step (each may start on new nodes)."""
    needed: dict[tuple[str, str], list[TrainiumStep]] = {}
    for step in steps:
        if windows.get(step.node_group):
            needed.setdefault((step.workload, step.node_group), []).append(step)
    problems = []
    for (workload, group), on_group in needed.items():
        window = windows[group]
        assert window is not None
        start, stop = parse_time(window["start"]), parse_time(stop_by(window) or "")
        begins = max(now, start)
        left = (stop - begins).total_seconds()
        launches = sum(s.attempts for s in on_group)
        burn_in = launches * (burn_in_seconds or {}).get(group, 0)
        seconds = sum(s.hold_seconds for s in on_group) + burn_in
        if seconds <= left:
            continue
        parts = " + ".join(f"{s.name} {_hours(s.hold_seconds)}" for s in on_group)
        if burn_in:
            parts += f" + {launches} burn-ins of {burn_in // launches // 60} min"
        problems.append(
            f"{key(workload)}: needs up to {_hours(seconds)} on node group {group} ({parts}), but its Capacity Block "
            f"ends {window['end']}, EKS scales the group to zero 40 minutes before, and the gang watchdog stops its "
            f"jobs {int(STOP_MARGIN.total_seconds() // 60)} minutes before that, at {stop_by(window)}: "
            f"{_hours(max(left, 0))} from "
            f"{'now' if begins == now else 'the block start'}; lower the steps' deadlines (training resumes from "
            "its last checkpoint in the next block) or use a later or longer block"
        )
    return problems
