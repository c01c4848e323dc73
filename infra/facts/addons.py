"""EKS managed add-ons: which ones, and which build of each the cluster runs.

EKS refuses an add-on build that is not offered for the cluster's Kubernetes version, so
builds are not pinned in this repository: each resolves at deploy time to the build AWS
marks as the default for the configured version (``DescribeAddonVersions``'
``defaultVersion``; the one EKS itself installs when asked for none). A stack may pin an
exact build per add-on (``addonVersions``), for example to hold one back. The builds in use
are a stack output (``addonBuilds``) so a change shows in every preview.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

VPC_CNI = "vpc-cni"
KUBE_PROXY = "kube-proxy"
COREDNS = "coredns"
POD_IDENTITY_AGENT = "eks-pod-identity-agent"
EBS_CSI = "aws-ebs-csi-driver"
CLOUDWATCH_OBSERVABILITY = "amazon-cloudwatch-observability"
NODE_MONITORING_AGENT = "eks-node-monitoring-agent"

ADDON_NAMES = (
    VPC_CNI,
    KUBE_PROXY,
    COREDNS,
    POD_IDENTITY_AGENT,
    EBS_CSI,
    CLOUDWATCH_OBSERVABILITY,
    NODE_MONITORING_AGENT,
)
BUILD_PATTERN = r"^v([0-9]+)\.([0-9]+)\.([0-9]+)-eksbuild\.[0-9]+$"
# `efa-only` network interfaces need VPC CNI >= 1.18.4 (older builds do not attach them).
MIN_BUILDS: dict[str, tuple[int, int, int]] = {VPC_CNI: (1, 18, 4)}


def wanted(observability: bool, node_monitoring_agent: bool, ebs_csi: bool) -> list[str]:
    """The add-ons a cluster runs: all of them but the two a stack can switch off and the EBS CSI driver,
    which runs only for what makes EBS volumes (infra/config/models.py MonitoringConfig.ebs_volumes)."""
    off = {
        CLOUDWATCH_OBSERVABILITY: not observability,
        NODE_MONITORING_AGENT: not node_monitoring_agent,
        EBS_CSI: not ebs_csi,
    }
    return [a for a in ADDON_NAMES if not off.get(a, False)]


def build_version(build: str) -> tuple[int, int, int] | None:
    match = re.fullmatch(BUILD_PATTERN, build)
    return (int(match[1]), int(match[2]), int(match[3])) if match else None


def addon_pin_problem(addon: str, build: str) -> str | None:
    version = build_version(build)
    if version is None:
        return "an EKS add-on build looks like v1.20.4-eksbuild.1 (see aws eks describe-addon-versions)"
    minimum = MIN_BUILDS.get(addon)
    if minimum and version < minimum:
        return f"{addon} must be at least v{'.'.join(map(str, minimum))} for efa-only network interfaces"
    return None


def resolve_builds(wanted: list[str], pins: Mapping[str, str], default_build: Callable[[str], str]) -> dict[str, str]:
    """Each wanted add-on's build: the stack's pin, else AWS's default for the version."""
    return {addon: pins.get(addon) or default_build(addon) for addon in wanted}
