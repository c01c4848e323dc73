"""Every pinned version the cluster stack deploys, in one place.

EKS managed add-on builds are tied to the Kubernetes minor version: when you change
``KUBERNETES_VERSION`` (or a stack's ``kubernetesVersion``), refresh this table from
``aws eks describe-addon-versions --kubernetes-version <v> --addon-name <name>``.
A stack can override a single build with ``addonVersions`` in its config.
"""

from __future__ import annotations

KUBERNETES_VERSION = "1.34"

# EKS managed add-on builds for KUBERNETES_VERSION. vpc-cni must stay >= 1.18.4:
# older builds do not understand `efa-only` network interfaces.
EKS_ADDON_VERSIONS: dict[str, str] = {
    "vpc-cni": "v1.20.5-eksbuild.1",
    "kube-proxy": "v1.34.6-eksbuild.2",
    "coredns": "v1.13.2-eksbuild.7",
    "eks-pod-identity-agent": "v1.3.8-eksbuild.2",
    "aws-ebs-csi-driver": "v1.39.0-eksbuild.1",
}

# Managed node group AMI types. The Neuron variant carries the Neuron driver and
# runtime; never the NVIDIA one for Trainium/Inferentia.
NEURON_AMI_TYPE = "AL2023_x86_64_NEURON"
CORE_AMI_TYPE = "AL2023_x86_64_STANDARD"
