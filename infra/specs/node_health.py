"""EKS node auto-repair settings for Trainium node groups.

What the pinned provider exposes (pulumi-aws 7.51.1 eks/_inputs.py NodeGroupNodeRepairConfigArgs):
``enabled``, ``max_unhealthy_node_threshold_{count,percentage}``,
``max_parallel_nodes_repaired_{count,percentage}`` and ``node_repair_config_overrides`` (condition,
reason, minimum wait in minutes (at least 1), action ``Replace | Reboot | NoAction``: EKS API
reference, NodeRepairConfigOverrides).

What the node monitoring agent reports (aws/eks-node-monitoring-agent v1.7.0
pkg/reasons/reasons.yaml, docs/node-health-issues.adoc): four Neuron reasons under the
``AcceleratedHardwareReady`` condition, all of severity Fatal; EKS acts on that condition after
10 minutes unless told otherwise. EFA has only ``EFAErrorMetric``, a Warning event that no repair
acts on: a node whose EFA is short of interfaces is caught by the burn-in when it joins
(infra/specs/burn_in_objects.py) instead.
"""

from __future__ import annotations

from dataclasses import dataclass

ACCELERATED_HARDWARE_READY = "AcceleratedHardwareReady"
# Uncorrectable hardware errors: a reboot does not bring back an HBM or SRAM that produced wrong
# results, and the gang on the node has already failed, so the replacement starts at once.
NEURON_FATAL_REASONS = (
    "NeuronDMAError",
    "NeuronHBMUncorrectableError",
    "NeuronNCUncorrectableError",
    "NeuronSRAMUncorrectableError",
)


@dataclass(frozen=True)
class RepairOverride:
    condition: str
    reason: str
    wait_minutes: int
    action: str


@dataclass(frozen=True)
class RepairSettings:
    max_unhealthy_percentage: int
    """Above this share of unhealthy nodes repair stops: half a group failing at once is a systemic cause
    (a driver or AMI mismatch, a zone event), where replacing every node only churns reserved capacity."""
    max_parallel_percentage: int
    """A gang restarts only when all its nodes are back: repair them together, not one at a time."""
    overrides: tuple[RepairOverride, ...]


def node_repair_settings() -> RepairSettings:
    return RepairSettings(
        max_unhealthy_percentage=50,
        max_parallel_percentage=100,
        overrides=tuple(RepairOverride(ACCELERATED_HARDWARE_READY, r, 1, "Replace") for r in NEURON_FATAL_REASONS),
    )
