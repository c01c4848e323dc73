"""Every pinned version the cluster stack deploys, in one place.

EKS managed add-on builds are resolved per Kubernetes version at deploy time (infra/facts/addons.py).
"""

from __future__ import annotations

from dataclasses import dataclass

KUBERNETES_VERSION = "1.34"

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



# --- training images and code ------------------------------------------------------------------
# docker/ builds these images (`make images`); the workload stacks run them. Each Dockerfile's
# ARG defaults repeat these values so a plain `docker build` gives the same image; a test keeps
# the two in step.
# The tag `make images` pushes and the workload stacks run unless a workload sets `imageTag`.
# ECR tags are immutable here: bump it whenever an image changes.
TRAINING_IMAGE_TAG = "2026.11.1"
# AWS Neuron deep learning containers (public.ecr.aws/neuron). PyTorch 2.5 on SDK 2.21 for the
# BERT script; torch 1.13 for the two Llama-2 stacks, whose code was written against it.
NEURON_DLC_PYTORCH_2_5 = "public.ecr.aws/neuron/pytorch-training-neuronx:2.5.1-neuronx-py310-sdk2.21.0-ubuntu22.04"
NEURON_DLC_PYTORCH_1_13 = "public.ecr.aws/neuron/pytorch-training-neuronx:1.13.1-neuronx-py310-sdk2.20.2-ubuntu20.04"
NEURON_DLC_RAY = "public.ecr.aws/neuron/pytorch-training-neuronx:1.13.1-neuronx-py310-sdk2.18.2-ubuntu20.04"
# Training code, fetched at these commits.
BERT_SAMPLES_COMMIT = "d6e1754d2e65c90938565e3d23a814f2f800cc21"  # aws-neuron/aws-neuron-samples (SDK 2.21)
RAY_LLAMA2_COMMIT = "a32d9f25ab85f75f167ee9dae4438c6e20292a2c"  # awslabs/data-on-eks, raytrain-llama2-pretrain-trn1
# aws-neuron/neuronx-nemo-megatron, "Adding 2.20 release changes (#34)": the release for the SDK
# 2.20.2 DLC it runs on (there is no torch 1.13 DLC for SDK 2.21). The Llama scripts this project
# runs (llama_7b.sh, test_llama.sh, train_setup.sh, k8s/docker/nodelist_helper.py) are the same
# at the 2.21 release (f4743ce), which changed model code built against the 2.21 compiler.
NEMO_MEGATRON_COMMIT = "d22aabf42ceb1be5bd1f647806caf4598db801cc"
RAY_VERSION = "2.22.0"
# The Llama-2 tokenizer in the Ray image: NousResearch/Llama-2-7b-hf (an ungated copy) at one
# revision; the SHA-256 is the LFS object id of Meta's tokenizer.model (499,723 bytes), which
# the build checks.
LLAMA2_TOKENIZER_REVISION = "dacdfcde31297e34b19ee0e7532f29586d2c17bc"
LLAMA2_TOKENIZER_SHA256 = "9e556afd44213b6bd1be2b850ebbbd98f5481437a8021afaf58ee7fb1818d347"
# The command shell, data staging and TensorBoard image.
PYTHON_SLIM_IMAGE = "public.ecr.aws/docker/library/python:3.11.14-slim-bookworm"
# The basic-auth proxy in front of TensorBoard when it is exposed through a load balancer.
NGINX_UNPRIVILEGED_IMAGE = "public.ecr.aws/nginx/nginx-unprivileged:1.29.3-alpine"
