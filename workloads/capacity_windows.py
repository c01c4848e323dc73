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

Only the jobs this update creates or replaces are checked: a job admitted by an earlier `pulumi up`
and left as it is runs on, and refusing every later `up` (a TensorBoard change, CI's deploy on each
push) once part of the block has passed would only block the stack. Pulumi says nothing at program
time about what it will replace, so the stack records, per job, a digest of what replaces it (its
spec and labels: workloads/kube.py replacing_options) and of every job before it in its chain (a
replaced job replaces the jobs that follow it: kube.follow), and when it was admitted, in its output
``stepAdmissions``; the next run reads that output back through a StackReference to its
own stack (the outputs of its last update: pulumi/pulumi v3.259.0 pkg/backend/backend.go
GetStackOutputs reads the stack's snapshot, whose root resource keeps its old outputs until the
program registers new ones, pkg/resource/deploy/step.go SameStep.Apply). A job whose digest is
unchanged keeps its admission; one still possibly running (its admission plus its bound is later
than now) delays the start of the new jobs after it in its workload. The advice names only the
deadlines of jobs this update starts anyway, never one that would replace a job left running.
Pure: the steps, the groups' windows, the clock and the previous admissions come in.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
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


def _stamp(when: datetime) -> str:
    return when.isoformat().replace("+00:00", "Z")


def chain_digests(chains: Iterable[Sequence[Mapping[str, Any]]]) -> dict[str, str]:
    """Job name -> a digest of what replaces it and every job before it in its chain: it changes
    exactly when `pulumi up` creates or replaces the job. Step gates are left out: replacing one
    replaces no job (workloads/step_gate.py)."""
    digests: dict[str, str] = {}
    for chain in chains:
        before = ""
        for job in chain:
            if "trainium.workloads/gate-for" in (job["metadata"].get("labels") or {}):
                continue
            body = {"before": before, "spec": job.get("spec"), "labels": job["metadata"].get("labels") or {}}
            before = hashlib.sha256(json.dumps(body, sort_keys=True, default=str).encode()).hexdigest()[:16]
            digests[job["metadata"]["name"]] = before
    return digests


def admissions(
    digests: Mapping[str, str], previous: Mapping[str, Any] | None, now: datetime
) -> tuple[dict[str, dict[str, str]], dict[str, datetime]]:
    """What this run records (job name -> digest and admission time) and, of those, the jobs an
    earlier `up` admitted and this one leaves as they are, with their admission times."""
    records: dict[str, dict[str, str]] = {}
    kept: dict[str, datetime] = {}
    for name, digest in digests.items():
        before = (previous or {}).get(name)
        try:
            admitted = parse_time(before["admitted"]) if before and before.get("digest") == digest else None
        except (KeyError, TypeError, ValueError):  # not a record this program wrote: count the job as new
            admitted = None
        if admitted is not None:
            kept[name] = admitted
        records[name] = {"digest": digest, "admitted": _stamp(admitted or now)}
    return records, kept


def _advice(new: Sequence[TrainiumStep], kept: Mapping[str, datetime], key: str, deficit: float) -> list[str]:
    """Each deadline of the new jobs that alone could make them fit, and its largest value that
    does; none that also sets a job left running (changing it would replace that job)."""
    advice = []
    for deadline_key in dict.fromkeys(s.deadline_key for s in new if s.deadline_key):
        shaping = [s for s in new if s.deadline_key == deadline_key]
        if any(other in kept for s in shaping for other in s.shared_with):
            continue
        per_unit = sum(s.attempts * s.deadline_unit_seconds for s in shaping)
        value = shaping[0].deadline_value
        largest = value - -(-int(deficit) // per_unit)
        if largest >= 1:
            advice.append(f"{key}.{deadline_key} from {value} to at most {largest}")
    return advice


def window_problems(
    steps: Sequence[TrainiumStep],
    windows: Mapping[str, CapacityWindow | None],
    now: datetime,
    key: Any,
    burn_in_seconds: Mapping[str, int] | None = None,
    kept: Mapping[str, datetime] | None = None,
) -> list[str]:
    """One problem per workload whose steps this update starts on a Capacity Block group, run one
    after another from ``now`` (or the block's start, or the bound of a step before them that an
    earlier `up` started, if later), cannot end before the watchdog's stop. ``key(workload)`` names
    the workload's stack key. ``burn_in_seconds``: per health-gated group, the most a new node
    spends in its burn-in, counted once for every attempt of every step (each may start on new
    nodes). ``kept``: the jobs this update leaves as they are, with their admission times (none:
    every step is new)."""
    kept = kept or {}
    needed: dict[tuple[str, str], list[TrainiumStep]] = {}
    for step in steps:
        if windows.get(step.node_group):
            needed.setdefault((step.workload, step.node_group), []).append(step)
    problems = []
    for (workload, group), on_group in needed.items():
        window = windows[group]
        assert window is not None
        start, stop = parse_time(window["start"]), parse_time(stop_by(window) or "")
        per_launch = (burn_in_seconds or {}).get(group, 0)
        begins, anchor = max(now, start), "now" if now >= start else "the block start"
        new: list[TrainiumStep] = []
        kept_ends: datetime | None = None
        for step in on_group:
            if step.name in kept and not new:
                # Left running by this update: its chain runs its steps one after another from their
                # admission, and the steps after them may have to wait for the last one's bound.
                starts = kept[step.name] if kept_ends is None else max(kept_ends, kept[step.name])
                kept_ends = starts + timedelta(seconds=step.hold_seconds + step.attempts * per_launch)
                if kept_ends > begins:
                    begins, anchor = kept_ends, f"the end of {step.name}'s bound, started by an earlier update"
            else:
                new.append(step)
        if not new:
            continue
        left = (stop - begins).total_seconds()
        launches = sum(s.attempts for s in new)
        burn_in = launches * per_launch
        seconds = sum(s.hold_seconds for s in new) + burn_in
        if seconds <= left:
            continue
        parts = " + ".join(f"{s.name} {_hours(s.hold_seconds)}" for s in new)
        if burn_in:
            parts += f" + {launches} burn-ins of {burn_in // launches // 60} min"
        lower = _advice(new, kept, key(workload), seconds - max(left, 0))
        remedy = (
            f"lower {' or '.join(lower)} (it replaces only the jobs this update starts anyway; training resumes "
            "from its last checkpoint in the next block), or use a later or longer block"
            if lower
            else "use a later or longer block"
        )
        problems.append(
            f"{key(workload)}: the jobs this update starts on node group {group} need up to {_hours(seconds)} "
            f"({parts}), but its Capacity Block ends {window['end']}, EKS scales the group to zero 40 minutes before, "
            f"and the gang watchdog stops its jobs {int(STOP_MARGIN.total_seconds() // 60)} minutes before that, "
            f"at {stop_by(window)}: {_hours(max(left, 0))} from {anchor}, at most; {remedy}"
        )
    return problems
