"""Time from submitting a workload to its first training step, from zero Trainium nodes: the phases of
infra/facts/startup.py, added up for the workload's node group, warm (the compile cache holds its
graphs) and cold (its first run compiles them first). A pure model: the plan prints it
(offline/report/cost.py), docs/cost.md explains it. No figure was timed on hardware."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from infra.facts import startup
from infra.facts.startup import Phase

# A job's pods started again on nodes that are up, its image on them: after a compile step, and after a
# failure that leaves the nodes healthy (workloads/goodput.py).
RESTART_ON_WARM_NODES = (startup.SUBMIT, startup.RENDEZVOUS, startup.RUNTIME_START)
# The group the models assume where none is given: scaled from zero by cluster-autoscaler, burnt in.
DEFAULT_GROUP: Mapping[str, Any] = {
    "minSize": 0,
    "labels": {"provisioner": "cluster-autoscaler"},
    "startupTaints": [{"key": "burn-in"}],
}


@dataclass(frozen=True)
class FirstStep:
    """The phases before the first step with a warm cache, those a cold cache adds, and those of a new
    node alone (what replacing a failed node costs before the job restarts)."""

    warm: tuple[Phase, ...]
    cold_extra: tuple[Phase, ...]
    new_node: tuple[Phase, ...]

    @property
    def warm_minutes(self) -> float:
        return sum(p.minutes for p in self.warm)

    @property
    def cold_minutes(self) -> float:
        return self.warm_minutes + sum(p.minutes for p in self.cold_extra)


def node_phases(group: Mapping[str, Any], nodes: int) -> tuple[Phase, ...]:
    """What new nodes go through before a pod can run on them: none when the group keeps at least
    ``nodes`` nodes (its minSize), else scale-up, launch, boot, DaemonSets and, on a health-gated group
    (``startupTaints`` in its output), the burn-in's pull and checks. The training image's own layers
    are pulled during the burn-in there (workloads/image_prepull.py), and after the node is up on a
    group without one."""
    if int(group.get("minSize", 0)) >= nodes:
        return ()
    provisioner = group.get("labels", {}).get("provisioner", "cluster-autoscaler")
    phases = [startup.SCALE_UP[provisioner], startup.LAUNCH, startup.BOOT_AND_JOIN, startup.DAEMONSETS]
    if group.get("startupTaints"):
        return (*phases, startup.burn_in_pull(), startup.BURN_IN_CHECKS)
    return (*phases, startup.TRAINING_IMAGE_LAYERS)


def first_step(workload: str, group: Mapping[str, Any], nodes: int) -> FirstStep:
    """``workload`` (the stack file's key) on ``nodes`` nodes of ``group`` (the cluster stack's
    acceleratorNodeGroups entry). Cold: its compile step runs first on the same nodes, and the training
    step then starts on nodes that are already up."""
    start = (startup.SUBMIT, *node_phases(group, nodes), startup.MOUNT, startup.RENDEZVOUS, startup.RUNTIME_START)
    return FirstStep(
        start, (startup.COMPILE[workload], *RESTART_ON_WARM_NODES), node_phases({**group, "minSize": 0}, 1)
    )


def minutes_of(phases: tuple[Phase, ...]) -> float:
    return sum(p.minutes for p in phases)


def minutes(value: float) -> int:
    """Whole minutes, rounded up: a start is never shorter than it prints."""
    return int(-(-round(value, 6) // 1))
