"""How long each phase between submitting a training run and its first step takes, starting from zero
Trainium nodes: the one table the plan's first-step line (workloads/first_step.py) adds up, and that
docs/cost.md shows.

Nothing here was timed on hardware by this project. Each figure says what kind it is: ``measured`` (by
the source, on hardware), ``documented`` (a setting or a bound that fixes it), or ``estimate`` (the
reasoning is in the source). A sum of estimates is an estimate. The figures are typical ones, not
bounds: the bounds are the runs' deadlines (workloads/deadlines.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Kind = Literal["measured", "documented", "estimate"]


@dataclass(frozen=True)
class Phase:
    what: str
    minutes: float
    kind: Kind
    source: str


SUBMIT = Phase(
    "the job is created; its scheduler creates the pods and finds no node for them",
    0.7,
    "estimate",
    "Volcano's scheduling period is 1 s (volcano-sh/volcano v1.15.1 cmd/scheduler/app/options); the rest is "
    "the Pulumi engine's and the operator's turn, not timed",
)
SCALE_UP = {
    "cluster-autoscaler": Phase(
        "cluster-autoscaler sees the pending pods and raises the group's desired size",
        0.3,
        "documented",
        "kubernetes/autoscaler cluster-autoscaler-1.35.2 cluster-autoscaler/FAQ.md, 'What are the Service Level "
        "Objectives': no more than 30 s on a small cluster, about 5 s on average; the scan interval is left at its "
        "default (config/flags/flags.go scan-interval)",
    ),
    "karpenter": Phase(
        "Karpenter batches the pending pods and calls CreateFleet",
        0.2,
        "documented",
        "Karpenter's batch window, 1 s idle and 10 s at most (kubernetes-sigs/karpenter v1.14.1 "
        "pkg/operator/options/options.go BATCH_IDLE_DURATION and BATCH_MAX_DURATION defaults, left as they are), "
        "then one CreateFleet call",
    ),
}
LAUNCH = Phase(
    "EC2 launches the instances with their EFA interfaces",
    1.5,
    "estimate",
    "no published figure; a zone or placement group out of capacity makes it unbounded",
)
BOOT_AND_JOIN = Phase(
    "AL2023 boots, nodeadm joins the node, the instance store becomes a RAID0, the kubelet registers",
    1.5,
    "estimate",
    "not timed; the RAID0 over the NVMe disks (mdadm, mkfs) takes 10-30 s of it",
)
DAEMONSETS = Phase(
    "the node's DaemonSets start: VPC CNI, kube-proxy, the Neuron and EFA device plugins, the file system's CSI node plugin, agents",
    1.5,
    "estimate",
    "not timed: each DaemonSet's image pulled the first time on the node, then its readiness",
)
BURN_IN_CHECKS = Phase(
    "the burn-in's checks and its all-reduce, then the node is released to training",
    1.0,
    "estimate",
    "not timed on hardware (docs/node-health.md); bounded with its image pull by the burn-in's budget "
    "(infra/specs/burn_in_objects.py BUDGET_SECONDS)",
)
# On a health-gated group the workload stack pulls these while the burn-in runs (workloads/image_prepull.py),
# off the path to the first step; only a group without a burn-in waits for them.
TRAINING_IMAGE_LAYERS = Phase(
    "the training image's own layers are pulled (its base, the Neuron DLC, is already on the node)",
    0.4,
    "estimate",
    "not timed: the training images are FROM the burn-in's DLC (docker/*/Dockerfile), so only their own layers are new",
)
MOUNT = Phase(
    "the file system is mounted",
    0.1,
    "estimate",
    "not timed: a new mount of the claim (the burn-in mounted the file system on that node already; on EFS "
    "each access point is its own NFS mount through the driver's TLS proxy)",
)
RENDEZVOUS = Phase(
    "the resume look-up on the file system and the rendezvous of every worker",
    0.3,
    "estimate",
    "not timed: a look-up of the newest checkpoint on the file system, then a rendezvous of every worker",
)
RUNTIME_START = Phase(
    "the framework imports, the Neuron runtime starts and loads the compiled graphs from the cache",
    2.5,
    "measured",
    "the BERT seed: metrics about 1-2 minutes after the pods had been Running 86 s (bert-torchx-eks-trn1 "
    "tutorial, section 4)",
)

# The Neuron DLC's compressed size is published nowhere this table could read. Its build's size check
# allows 13,000 MB uncompressed (aws/deep-learning-containers pytorch/training/buildspec-neuronx.yml
# image_size_baseline, as read for an earlier SDK; not re-read at 2.30), and such images compress to
# about half.
DLC_COMPRESSED_GB = 6.0
DLC_SIZE_SOURCE = (
    "estimate: about half of the 13,000 MB uncompressed the DLC build's size check allows "
    "(aws/deep-learning-containers pytorch/training/buildspec-neuronx.yml)"
)
# An uncached 9.5 GB (compressed) PyTorch image took 334 s to start on an EKS node (measured:
# aws-ia/terraform-aws-eks-blueprints, patterns/machine-learning/ml-container-cache), pull and unpack.
# Trainium nodes pull in parallel (SOCI's parallel pull and unpack, infra/specs/user_data.py) and from
# the cluster's pull-through cache (infra/specs/image_cache.py); what either saves was not measured for
# these images, so the rate stays the measured one: the figure is an upper estimate.
PULL_MB_PER_SECOND = 9500 / 334
PULL_RATE_SOURCE = (
    "measured: 9.5 GB compressed started in 334 s on an uncached EKS node (aws-ia terraform-aws-eks-blueprints "
    "patterns/machine-learning/ml-container-cache)"
)


def burn_in_pull() -> Phase:
    """The burn-in's image, the Neuron DLC, pulled and unpacked on a new node."""
    return Phase(
        "the burn-in pulls and unpacks its image, the Neuron DLC",
        round(DLC_COMPRESSED_GB * 1000 / PULL_MB_PER_SECOND / 60, 1),
        "estimate",
        f"{DLC_COMPRESSED_GB:g} GB ({DLC_SIZE_SOURCE}) at {PULL_MB_PER_SECOND:.1f} MB/s ({PULL_RATE_SOURCE})",
    )


# The first run on a cold compile cache compiles its graphs first. Measured by the seed tutorials on
# trn1.32xlarge (their compile steps are this project's precompile steps).
COMPILE = {
    "bertPretraining": Phase(
        "bert-precompile: neuron_parallel_compile of BERT-large's graphs",
        15.0,
        "measured",
        "the BERT seed: 'The precompilation job will run for ~15 minutes' (bert-torchx-eks-trn1 tutorial)",
    ),
    "rayLlama2": Phase(
        "the precompilation RayJob: Llama-2-7B's graphs",
        6.0,
        "measured",
        "the Ray seed: the precompilation job 'can take up to 6 minutes' (llama2-raytrain-kuberay-trn1 tutorial)",
    ),
    "nxdLlama": Phase(
        "llama2-compile: Llama-2-7B's graphs",
        10.0,
        "measured",
        "the NeMo/MPI seed: precompiling 'takes about 10 minutes' on 4 trn1.32xlarge (llama2-nemo-megatron-mpi-"
        "trn1 tutorial)",
    ),
}
