"""Every pinned version the cluster stack deploys, in one place.

EKS managed add-on builds are tied to the Kubernetes minor version: when you change
``KUBERNETES_VERSION`` (or a stack's ``kubernetesVersion``), refresh this table from
``aws eks describe-addon-versions --kubernetes-version <v> --addon-name <name>``.
A stack can override a single build with ``addonVersions`` in its config.
"""

from __future__ import annotations

from dataclasses import dataclass

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


# --- cluster software --------------------------------------------------------------------------
# Charts, manifests and images installed on the cluster. A misspelled Helm value is silently
# ignored, so the value keys each chart gets are pinned by tests against these versions.

@dataclass(frozen=True)
class ChartPin:
    chart: str
    version: str
    repository: str | None = None
    """None for OCI charts, whose `chart` is the full oci:// reference."""


CHARTS: dict[str, ChartPin] = {
    # >= 1.1.1: earlier versions mis-schedule pods asking for more than one Neuron device.
    "neuron": ChartPin("oci://public.ecr.aws/neuron/neuron-helm-chart", "1.9.0"),
    # Chart v0.5.30 ships device plugin image v0.5.20; the chart version carries a literal "v".
    "efa-device-plugin": ChartPin("aws-efa-k8s-device-plugin", "v0.5.30", "https://aws.github.io/eks-charts"),
    "fsx-csi-driver": ChartPin(
        "aws-fsx-csi-driver", "1.17.0", "https://kubernetes-sigs.github.io/aws-fsx-csi-driver"
    ),
    "volcano": ChartPin("volcano", "1.15.1", "https://volcano-sh.github.io/helm-charts"),
    "kuberay-operator": ChartPin("kuberay-operator", "1.7.0", "https://ray-project.github.io/kuberay-helm/"),
    # 9.53.0 runs cluster-autoscaler v1.34.2, matching KUBERNETES_VERSION.
    "cluster-autoscaler": ChartPin("cluster-autoscaler", "9.53.0", "https://kubernetes.github.io/autoscaler"),
    "metrics-server": ChartPin("metrics-server", "3.13.1", "https://kubernetes-sigs.github.io/metrics-server/"),
}

# kubeflow/mpi-operator publishes no chart: its release manifest (v2beta1 API) is applied as is.
MPI_OPERATOR_VERSION = "v0.8.0"
MPI_OPERATOR_MANIFEST = (
    f"https://raw.githubusercontent.com/kubeflow/mpi-operator/{MPI_OPERATOR_VERSION}/deploy/v2beta1/mpi-operator.yaml"
)

# torch elastic's etcd rendezvous speaks the etcd v2 API, which 3.6 removed: stay on 3.5.
ETCD_IMAGE = "registry.k8s.io/etcd:3.5.24-0"

# The CloudWatch Observability add-on also runs neuron-monitor on Neuron nodes.
CLOUDWATCH_OBSERVABILITY_ADDON = "amazon-cloudwatch-observability"
CLOUDWATCH_OBSERVABILITY_VERSION = "v4.4.0-eksbuild.1"
