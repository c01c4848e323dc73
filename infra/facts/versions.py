"""Every pinned version the cluster stack deploys, in one place.

EKS managed add-on builds are resolved per Kubernetes version at deploy time (infra/facts/addons.py).
"""

from __future__ import annotations

from dataclasses import dataclass

# What a stack runs unless its file sets kubernetesVersion (the shipped stack files set it). 1.35:
# standard support on EKS until 2027-03-27 (endoflife.date/amazon-eks; 1.34's ends 2026-12-02,
# EKS user guide release calendar). 1.36 has everything recorded here (the Neuron AMI release
# 1.36.2-20260625 with driver 2.28, cluster-autoscaler 1.36.1), but its AMI's kernel (6.18) is outside
# the tested list of the only Neuron driver our images run on (2.28): a stack moves to it after a
# smoke test of the Neuron runtime on that AMI.
KUBERNETES_VERSION = "1.35"
# The Kubernetes minor versions EKS offers, standard or extended support (EKS user guide,
# "Understand the Kubernetes version lifecycle on EKS", release calendar: 1.32 until
# 2027-03-23, 1.33 until 2027-07-29, 1.34 until 2027-12-02 (end of extended support); 1.35 and
# 1.36 from "Review release notes for Kubernetes versions on standard support"; 1.31's extended
# support ended 2026-11-26). A version missing here is refused by config validation: add a new one
# once EKS lists it (aws eks describe-cluster-versions), drop one once its extended support has ended.
EKS_KUBERNETES_VERSIONS = ("1.32", "1.33", "1.34", "1.35", "1.36")

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


@dataclass(frozen=True)
class AutoscalerRelease:
    """The cluster-autoscaler release for one Kubernetes minor, and the chart that installs it."""

    chart: str
    image_tag: str


# cluster-autoscaler's releases follow Kubernetes minors ("use the cluster-autoscaler release that
# matches your Kubernetes minor version", kubernetes/autoscaler cluster-autoscaler README, Releases),
# so a stack takes the release for its kubernetesVersion: raising the minor in the stack file is all
# it takes. kubernetes/autoscaler tags: chart 9.53.0 (appVersion 1.34.2); chart 9.59.0, the newest,
# has appVersion 1.35.0 and the image tag is set to each minor's newest patch,
# cluster-autoscaler-1.35.2 (2026-07-22) and -1.36.1 (no chart defaults to 1.36 yet). From 1.35 the
# release locks dynamic resource allocation on (--enable-dynamic-resource-allocation, fatal when
# false), which needs the resource.k8s.io RBAC only chart 9.59.0 grants: chart and image move
# together. The chart's values are the same keys in both charts (image.tag, extraArgs, rbac,
# nodeSelector, autoDiscovery) and the flags we pass exist in every release here; the behaviour this
# project relies on is the same in 1.34.2, 1.35.2 and 1.36.1 (utils/taints/taints.go startup-,
# status- and ignore-taint prefixes, clusterstate.go MaxNodeStartupTime 15 min, config/const.go
# DefaultScaleDownUnneededTime 10 min), and so are the AWS calls the IAM policy allows.
CLUSTER_AUTOSCALER: dict[str, AutoscalerRelease] = {
    "1.34": AutoscalerRelease("9.53.0", "v1.34.2"),
    "1.35": AutoscalerRelease("9.59.0", "v1.35.2"),
    "1.36": AutoscalerRelease("9.59.0", "v1.36.1"),
}


def autoscaler_release(kubernetes_version: str) -> tuple[str, AutoscalerRelease]:
    """The minor whose cluster-autoscaler release a cluster of ``kubernetes_version`` runs, and that
    release: its own, else the newest recorded below it, else the oldest recorded (``CLUSTER_AUTOSCALER``)."""

    def minor(v: str) -> tuple[int, ...]:
        return tuple(int(p) for p in v.split("."))

    if kubernetes_version in CLUSTER_AUTOSCALER:
        return kubernetes_version, CLUSTER_AUTOSCALER[kubernetes_version]
    below = [v for v in CLUSTER_AUTOSCALER if minor(v) < minor(kubernetes_version)] or [
        min(CLUSTER_AUTOSCALER, key=minor)
    ]
    chosen = max(below, key=minor)
    return chosen, CLUSTER_AUTOSCALER[chosen]


CHARTS: dict[str, ChartPin] = {
    # >= 1.1.1: earlier versions mis-schedule pods asking for more than one Neuron device. Held at 1.9.0:
    # 1.10.0 (device plugin 2.32.0.0, DRA driver 1.2.0) has no readable source here (the
    # aws-neuron/neuron-helm-charts snapshot stops at chart 1.0.0, its GitHub release body is empty, and
    # only a third-party `helm show values` copy exists), so its values keys, templates and RBAC cannot
    # be checked against what infra/components/devices.py sets. 1.9.0 already carries the Neuron DRA driver
    # 1.1.0 (values.yaml at b77a6f90: draDriver.image.tag), which the `deviceAllocation: dra` groups run.
    "neuron": ChartPin("oci://public.ecr.aws/neuron/neuron-helm-chart", "1.9.0"),
    # Chart v0.5.30 ships device plugin image v0.5.20; the chart version carries a literal "v".
    "efa-device-plugin": ChartPin("aws-efa-k8s-device-plugin", "v0.5.30", "https://aws.github.io/eks-charts"),
    # The EFA DRA driver, for `deviceAllocation: dra` groups with EFA. Chart 1.0.0 (image
    # v1.2.0-eksbuild.2), the only one in aws/eks-charts (stable/aws-dranet, added c043cef 2026-04-30; read
    # at 5239609, 2026-08-03); pinned 2026-11-28.
    "aws-dranet": ChartPin("aws-dranet", "1.0.0", "https://aws.github.io/eks-charts"),
    "fsx-csi-driver": ChartPin("aws-fsx-csi-driver", "1.17.0", "https://kubernetes-sigs.github.io/aws-fsx-csi-driver"),
    # storage.kind: efs. Chart 4.4.1 (driver v3.4.1), the newest in kubernetes-sigs/aws-efs-csi-driver (tag
    # helm-chart-aws-efs-csi-driver-4.4.1), pinned 2026-11-28. A chart rather than the EKS add-on: its node
    # images are named in its values, so they come through the pull-through cache like the FSx driver's
    # (infra/specs/image_cache.py), and it renders offline; the add-on's build would resolve at deploy time.
    "efs-csi-driver": ChartPin("aws-efs-csi-driver", "4.4.1", "https://kubernetes-sigs.github.io/aws-efs-csi-driver"),
    "volcano": ChartPin("volcano", "1.15.1", "https://volcano-sh.github.io/helm-charts"),
    "kuberay-operator": ChartPin("kuberay-operator", "1.7.0", "https://ray-project.github.io/kuberay-helm/"),
    # The chart for KUBERNETES_VERSION; a stack on another minor takes its own (CLUSTER_AUTOSCALER below).
    "cluster-autoscaler": ChartPin(
        "cluster-autoscaler", CLUSTER_AUTOSCALER[KUBERNETES_VERSION].chart, "https://kubernetes.github.io/autoscaler"
    ),
    "metrics-server": ChartPin("metrics-server", "3.13.1", "https://kubernetes-sigs.github.io/metrics-server/"),
    # monitoring.prometheus: managed. kube-state-metrics 2.20.0, the newest chart in the
    # prometheus-community/helm-charts snapshot read (cf408a2, 2026-08-22; infra/specs/monitoring.py).
    "kube-state-metrics": ChartPin("kube-state-metrics", "8.4.0", "https://prometheus-community.github.io/helm-charts"),
    # monitoring.prometheus: in-cluster. Prometheus v3.14.0 with the alertmanager subchart 1.42.0 (Alertmanager
    # v0.34.0), the chart's version in the same snapshot (cf408a2, charts/prometheus/Chart.yaml and Chart.lock).
    "prometheus": ChartPin("prometheus", "29.27.0", "https://prometheus-community.github.io/helm-charts"),
    # monitoring.grafana: in-cluster. Grafana 13.2.0, chart 12.11.1 (tag grafana-12.11.1, 864f779, 2026-08-19),
    # the newest in grafana-community/helm-charts, where the chart is maintained since grafana/helm-charts marked
    # its own deprecated (grafana-10.5.15 Chart.yaml, "deprecated: true"). The HTTP repository is the one that
    # repository's README names (chart-releaser publishes it on GitHub Pages; .github/workflows/release.yaml).
    # Same chart name and selector labels (templates/_helpers.tpl grafana.selectorLabels) as 10.5.15, so the
    # release is upgraded in place; the chart's 11.0.0 and 12.0.0 upgrade notes (README.md, "Upgrading": Kubernetes
    # 1.25 at least, an image renderer token it generates) ask nothing of these values.
    "grafana": ChartPin("grafana", "12.11.1", "https://grafana-community.github.io/helm-charts"),
    # monitoring.prometheus not off: node-exporter 1.12.1 on every node, the chart of the same snapshot (cf408a2,
    # whose charts/prometheus-node-exporter is the 4.56.1 release's; infra/specs/node_metrics.py).
    "prometheus-node-exporter": ChartPin(
        "prometheus-node-exporter", "4.56.1", "https://prometheus-community.github.io/helm-charts"
    ),
    # nodeProvisioner: karpenter. Karpenter 1.14.1 (aws/karpenter-provider-aws v1.14.1, 2026-08-20): fixes to
    # the reserved-capacity and placement-group offering resolvers (b472442, bde0065). Against v1.14.0
    # (release commit 692ccdd06, what the tests' citations read) its charts/ and pkg/apis (the CRDs) are
    # unchanged and it makes no new AWS API call; its core, kubernetes-sigs/karpenter 6e7eab7a0 (v1.14.1),
    # changes capacity buffers, disruption logging and the provisioner, not scheduling/, utils/pod or
    # apis/v1. The CRDs come from their own chart at the same version, which Helm upgrades (a chart's
    # crds/ directory is installed once and never upgraded); see docs/provisioners.md.
    "karpenter-crd": ChartPin("oci://public.ecr.aws/karpenter/karpenter-crd", "1.14.1"),
    "karpenter": ChartPin("oci://public.ecr.aws/karpenter/karpenter", "1.14.1"),
}

# prod's Grafana data source (monitoring.prometheus: managed): the Amazon Managed Service for Prometheus plugin
# (grafana/grafana-amazonprometheus-datasource v3.2.0, 2026-07-30, its newest release; src/plugin.json
# grafanaDependency ">=12.2.5-0", which Grafana 13.2.0 meets). Grafana downloads it from grafana.com at every
# pod start (infra/specs/monitoring.py grafana_values).
AMAZON_PROMETHEUS_PLUGIN_VERSION = "3.2.0"

# Where EKS publishes its add-on images in each region (EKS user guide, "View Amazon container
# image registries for Amazon EKS add-ons", awsdocs/amazon-eks-user-guide
# latest/ug/workloads/add-ons-images.adoc at 1cc6ebb4). EKS replicates the images to every region it
# supports, but the registry account is not the same everywhere (opt-in regions, China, GovCloud);
# the hosts are copied as that page lists them. Charts that default to the us-west-2 copy (the EFA
# device plugin) are pointed at the cluster's own region, so nodes pull in-region.
EKS_ADDON_REGISTRIES: dict[str, str] = {
    "af-south-1": "877085696533.dkr.ecr.af-south-1.amazonaws.com",
    "ap-east-1": "800184023465.dkr.ecr.ap-east-1.amazonaws.com",
    # Listed with an ap-east-1 host on that page.
    "ap-east-2": "533267051163.dkr.ecr.ap-east-1.amazonaws.com",
    "ap-northeast-1": "602401143452.dkr.ecr.ap-northeast-1.amazonaws.com",
    "ap-northeast-2": "602401143452.dkr.ecr.ap-northeast-2.amazonaws.com",
    "ap-northeast-3": "602401143452.dkr.ecr.ap-northeast-3.amazonaws.com",
    "ap-south-1": "602401143452.dkr.ecr.ap-south-1.amazonaws.com",
    "ap-south-2": "900889452093.dkr.ecr.ap-south-2.amazonaws.com",
    "ap-southeast-1": "602401143452.dkr.ecr.ap-southeast-1.amazonaws.com",
    "ap-southeast-2": "602401143452.dkr.ecr.ap-southeast-2.amazonaws.com",
    "ap-southeast-3": "296578399912.dkr.ecr.ap-southeast-3.amazonaws.com",
    "ap-southeast-4": "491585149902.dkr.ecr.ap-southeast-4.amazonaws.com",
    "ap-southeast-5": "151610086707.dkr.ecr.ap-southeast-5.amazonaws.com",
    "ap-southeast-6": "333609536671.dkr.ecr.ap-southeast-6.amazonaws.com",
    "ap-southeast-7": "121268973566.dkr.ecr.ap-southeast-7.amazonaws.com",
    "ca-central-1": "602401143452.dkr.ecr.ca-central-1.amazonaws.com",
    "ca-west-1": "761377655185.dkr.ecr.ca-west-1.amazonaws.com",
    "cn-north-1": "918309763551.dkr.ecr.cn-north-1.amazonaws.com.cn",
    "cn-northwest-1": "961992271922.dkr.ecr.cn-northwest-1.amazonaws.com.cn",
    "eu-central-1": "602401143452.dkr.ecr.eu-central-1.amazonaws.com",
    "eu-central-2": "900612956339.dkr.ecr.eu-central-2.amazonaws.com",
    "eu-north-1": "602401143452.dkr.ecr.eu-north-1.amazonaws.com",
    "eu-south-1": "590381155156.dkr.ecr.eu-south-1.amazonaws.com",
    "eu-south-2": "455263428931.dkr.ecr.eu-south-2.amazonaws.com",
    "eu-west-1": "602401143452.dkr.ecr.eu-west-1.amazonaws.com",
    "eu-west-2": "602401143452.dkr.ecr.eu-west-2.amazonaws.com",
    "eu-west-3": "602401143452.dkr.ecr.eu-west-3.amazonaws.com",
    "eusc-de-east-1": "877088126301.dkr.ecr.eusc-de-east-1.amazonaws.eu",
    "il-central-1": "066635153087.dkr.ecr.il-central-1.amazonaws.com",
    "me-central-1": "759879836304.dkr.ecr.me-central-1.amazonaws.com",
    "me-south-1": "558608220178.dkr.ecr.me-south-1.amazonaws.com",
    "mx-central-1": "730335286997.dkr.ecr.mx-central-1.amazonaws.com",
    "sa-east-1": "602401143452.dkr.ecr.sa-east-1.amazonaws.com",
    "us-east-1": "602401143452.dkr.ecr.us-east-1.amazonaws.com",
    "us-east-2": "602401143452.dkr.ecr.us-east-2.amazonaws.com",
    "us-gov-east-1": "151742754352.dkr.ecr.us-gov-east-1.amazonaws.com",
    "us-gov-west-1": "013241004608.dkr.ecr.us-gov-west-1.amazonaws.com",
    "us-west-1": "602401143452.dkr.ecr.us-west-1.amazonaws.com",
    "us-west-2": "602401143452.dkr.ecr.us-west-2.amazonaws.com",
}
# The EFA device plugin's repository in those registries (chart v0.5.30 values.yaml image.repository,
# 602401143452.dkr.ecr.us-west-2.amazonaws.com/eks/aws-efa-k8s-device-plugin, minus its host).
EFA_DEVICE_PLUGIN_REPOSITORY = "eks/aws-efa-k8s-device-plugin"

# kubeflow/mpi-operator publishes no chart: its release manifest (v2beta1 API) is applied, its
# Deployment's image pinned. v0.8.2 is v0.8.1's fixes (RELEASE.md on release-0.8, b10758d "Prepare
# v0.8.2"): launcher Jobs with podReplacementPolicy Failed, so a terminating launcher pod is not
# replaced by a second one (mpi_job_controller.go newLauncherJob); no Running condition re-emitted
# after the job finished (updateMPIJobStatus). Against v0.8.0 its deploy/v2beta1/mpi-operator.yaml
# differs only in the image, `mpioperator/mpi-operator:0.8`: the CRD and the RBAC are unchanged.
MPI_OPERATOR_VERSION = "v0.8.2"
MPI_OPERATOR_MANIFEST = (
    f"https://raw.githubusercontent.com/kubeflow/mpi-operator/{MPI_OPERATOR_VERSION}/deploy/v2beta1/mpi-operator.yaml"
)
# The namespaces a release manifest applied from its URL creates, which no offline reader can see in
# it: the policy pack's namespace-exists counts them as declared. The MPI operator's is the manifest's
# first object (at caa3c47 "Prepare v0.8.2"), where the operator runs and takes its leader lease.
MANIFEST_NAMESPACES = {MPI_OPERATOR_MANIFEST: ("mpi-operator",)}
# `:0.8` moves with every 0.8.x release (.github/workflows/mpi-operator-docker-image-publish.yml pushes
# type=semver {{version}} and {{major}}.{{minor}} for each v* tag): the release's own tag instead.
MPI_OPERATOR_IMAGE = f"mpioperator/mpi-operator:{MPI_OPERATOR_VERSION.removeprefix('v')}"


# --- training images and code ------------------------------------------------------------------
# docker/ builds these images (`make images`); the workload stacks run them. Each Dockerfile's
# ARG defaults repeat these values so a plain `docker build` gives the same image; a test keeps
# the two in step.
# The tag `make images` pushes and the workload stacks run unless a workload sets `imageTag`.
# ECR tags are immutable here: bump it whenever an image changes.
TRAINING_IMAGE_TAG = "2026.11.3"
# The tag the data staging Jobs run (cmd-shell for WikiCorpus, nxd-llama for RedPajama). Its own,
# so bumping TRAINING_IMAGE_TAG does not replace the staging Jobs: a replaced stage-wikicorpus (240 min
# await) followed by the replaced bert-precompile would outlast the CI deploy job's budget
# (tools/workloads_preflight.py, .github/workflows/deploy.yml). Bump it only when what staging runs
# changed, and to a tag `make images` has pushed (ECR keeps the last 30 tags of each image); a bump
# re-runs the staging Jobs, which skip what is already on FSx.
STAGING_IMAGE_TAG = "2026.11.3"
# The last PyTorch/XLA training line for Trainium1: PyTorch 2.9 (torch-neuronx 2.9.0.2.14.27725),
# Python 3.12, Ubuntu 24.04. Neuron 2.31 was the last SDK to ship torch-neuronx 2.9 (Neuron docs
# v2.32.0 setup/pytorch/update-manual: "torch-neuronx (PyTorch/XLA) is not included in Neuron
# 2.32.0 ... use the latest Neuron release that ships it, Neuron 2.31"), but the newest official
# training container for it is SDK 2.30.0's: aws-neuron/deep-learning-containers README at tags
# 2.31.0, 2.31.1 and 2.32.0 lists PyTorch 2.9.0 training images up to sdk2.30.0 and only JAX for
# 2.31, and pytorch/training/2.9.0/Dockerfile.neuronx is the same at 2.30.0 and 2.31.1 (runtime
# 2.32.31.0, collectives 2.32.28.0, neuronx-cc 2.25.3371.0, neuronx_distributed 0.19.28093,
# neuronx_distributed_training 1.7.0, Open MPI 4.1.5, Python 3.12.11).
NEURON_DLC_PYTORCH_2_9 = "public.ecr.aws/neuron/pytorch-training-neuronx:2.9.0-neuronx-py312-sdk2.30.0-ubuntu24.04"
# Training code, fetched at these commits.
# aws-neuron/aws-neuron-samples master when SDK 2.30.0 shipped (2026-05-21): the repository tags no
# release after v2.27.0, and torch-neuronx/training/dp_bert_hf_pretrain is the same from "Neuron
# Release 2.23.0" (dd0e71f, torch_xla.runtime in place of the xm calls torch-xla 2.9 dropped) to
# this commit (2026-05-07, the newest on master before that date).
BERT_SAMPLES_COMMIT = "2015d650cd89e4c671ae5bd1b5f1d4499d94d4dd"
# The Ray Llama-2 image's model, data and training loop: aws-neuron/neuronx-distributed "Release 2.29
# (#41)", the newest release whose source could be read (the snapshot read ends there, 2026-04-09;
# its examples/training/llama is as the 2.28.0 release left it, 73ab227), written for the PyTorch 2.9
# line the image runs; the image's own neuronx_distributed is SDK 2.30's 0.19.28093. The Ray Train examples this replaces are gone or older: awslabs/ai-on-eks
# dropped raytrain-llama2-pretrain-trn1 (torch 1.13, Ray 2.22), and aws-neuron/aws-neuron-eks-samples
# llama3.1_8B_finetune_ray_ptl_neuron (9c66bad) fine-tunes on torch 2.8 (SDK 2.26.1) with Ray 2.52.1.
RAY_LLAMA2_NXD_COMMIT = "fbac349b61a3adbb123c2983835af692840ff62f"
# aws-neuron/neuronx-distributed-training "Neuron SDK Release 2.26.0 changes" (library 1.6.0): the
# newest release the repository publishes (its main, Sep 2025; no later commit or tag); the SDK 2.30.0
# DLC installs the 1.7.0 library, whose examples/ (train.sh, train_setup.sh, training.py, conf/) are in
# no wheel. docker/nxd-llama takes examples/ from here.
NXDT_EXAMPLES_COMMIT = "9169aa03f39efd4eb02da63891a7ed98defb1714"
# NVIDIA/Megatron-LM core_r0.10.0: the checkout the DLC installs megatron-core from
# (aws-neuron/deep-learning-containers 2.30.0 common/nxdt_install_setup.sh); docker/nxd-llama runs its
# tools/preprocess_data.py to write the Megatron indexed dataset NxD Training reads.
MEGATRON_LM_COMMIT = "7ee599a25ca15f042c1087176b73ebddb0566d02"
# Ray for the Llama-2 RayJobs, inside the range KubeRay 1.7 supports: Ray's KubeRay upgrade guide
# (ray-project/ray doc/source/cluster/kubernetes/user-guides/upgrade-guide.md) says not to use Ray
# 2.11.0-2.37.0 (the head's dashboard agent hangs once a job is created, and the raylet probes, which
# read it, fail) and that KubeRay 1.3 and later support Ray 2.38.0 and later. 2.55 is the newest
# minor KubeRay v1.7.0's own CI runs (ray-operator/test/support/defaults.go RayVersion,
# .buildkite/setup-env.sh ray[default]==2.55.0); 2.55.1 is its patch release, with cp312 wheels.
# From 2.53.0 on KubeRay probes Ray nodes with HTTP GET /api/healthz (common/pod.go
# supportsUnifiedHealthCheck), which the worker probe follows (workloads/resumable.py).
RAY_VERSION = "2.55.1"
# The Llama-2 tokenizer in the Ray image: NousResearch/Llama-2-7b-hf (an ungated copy) at one
# revision; the SHA-256 is the LFS object id of Meta's tokenizer.model (499,723 bytes), which
# the build checks.
LLAMA2_TOKENIZER_REVISION = "dacdfcde31297e34b19ee0e7532f29586d2c17bc"
LLAMA2_TOKENIZER_SHA256 = "9e556afd44213b6bd1be2b850ebbbd98f5481437a8021afaf58ee7fb1818d347"
# The command shell, data staging and TensorBoard image, and the small Python pods (gang watchdog,
# step gates, burn-in sweeper). Debian 13 (trixie): Debian 12's regular security support has ended
# (infra/facts/support.py). Python 3.11 as before, so the scripts these pods run are the ones the
# tests run. docker-library/official-images library/python (2026-08-13): "3.11.16-slim-trixie".
PYTHON_SLIM_IMAGE = "public.ecr.aws/docker/library/python:3.11.16-slim-trixie"
# neuron-monitor with its Prometheus exporter, on Trainium nodes when monitoring.prometheus is not off: the image
# and tag of aws-neuron/aws-neuron-sdk src/k8/k8s-neuron-monitor-daemonset.yml at 81ce03a (2026-08-21), the
# manifest deploy/infrastructure/monitoring.rst links (infra/specs/node_metrics.py).
NEURON_MONITOR_IMAGE = "public.ecr.aws/neuron/neuron-monitor:1.3.0"
# The basic-auth proxy in front of TensorBoard when it is exposed through a load balancer: nginx's
# stable line (only the current stable and mainline branches get fixes). nginx/docker-nginx-unprivileged
# stable/alpine-slim/Dockerfile at e26803b (2026-07-15): NGINX_VERSION=1.30.4; its tags are
# <version>-alpine (README: published to public.ecr.aws/nginx/nginx-unprivileged).
NGINX_UNPRIVILEGED_IMAGE = "public.ecr.aws/nginx/nginx-unprivileged:1.30.4-alpine"
