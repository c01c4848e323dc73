"""When pinned versions stop being supported, and where that is written.

A pin past its end keeps working until something breaks and nobody fixes it; EKS goes further
and upgrades a control plane past standard support itself (``upgradePolicy: STANDARD``), after
which the stack declares a version the cluster no longer runs. The plan warns ``WARN_DAYS``
ahead and refuses a pin past its end unless the stack file acknowledges it by name, with a reason
(``endOfSupportAcknowledged``, infra/config/rules.py ``end_of_support``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date

WARN_DAYS = 90

_EKS_CALENDAR = (
    "EKS user guide, Kubernetes version lifecycle, release calendar (awsdocs/amazon-eks-user-guide "
    "latest/ug/versioning/kubernetes-versions.adoc at 0138560)"
)
_RULE = "standard support lasts 14 months from the EKS release, extended support 12 more (same page)"


@dataclass(frozen=True)
class KubernetesSupport:
    standard_ends: date
    extended_ends: date
    source: str


# Per Kubernetes minor EKS offers (infra/facts/versions.py EKS_KUBERNETES_VERSIONS).
EKS_KUBERNETES_SUPPORT: dict[str, KubernetesSupport] = {
    "1.32": KubernetesSupport(
        date(2026, 3, 23), date(2027, 3, 23), f"{_EKS_CALENDAR}: extended; standard by the rule: {_RULE}"
    ),
    "1.33": KubernetesSupport(date(2026, 7, 29), date(2027, 7, 29), _EKS_CALENDAR),
    "1.34": KubernetesSupport(date(2026, 12, 2), date(2027, 12, 2), _EKS_CALENDAR),
    "1.35": KubernetesSupport(
        date(2027, 3, 27),
        date(2028, 3, 27),
        "endoflife.date/amazon-eks and aws-samples/sample-apex-skills cluster-lifecycle.md (2026-04-24), "
        f"as {_RULE} gives from its EKS release (2026-01-28)",
    ),
    "1.36": KubernetesSupport(
        date(2027, 8, 2),
        date(2028, 8, 2),
        f"not yet on the EKS calendar page read: its EKS release (2026-06-02, a third-party report) and {_RULE}",
    ),
}


def kubernetes_pin(minor: str) -> str:
    """How ``endOfSupportAcknowledged`` names a Kubernetes minor."""
    return f"kubernetes-{minor}"
