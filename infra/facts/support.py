"""When pinned versions stop being supported, and where that is written.

A pin past its end keeps working until something breaks and nobody fixes it; EKS goes further
and upgrades a control plane past standard support itself (``upgradePolicy: STANDARD``), after
which the stack declares a version the cluster no longer runs. The plan warns ``WARN_DAYS``
ahead and refuses a pin past its end unless the stack file acknowledges it by name, with a reason
(``endOfSupportAcknowledged``: infra/config/rules.py ``end_of_support`` for the cluster stack,
workloads/pins.py for the workload stack).

One row per component line (``SUPPORT``, plus a ``kubernetes-<minor>`` row per minor EKS offers),
each with its end date (None: no end announced; the source then names what was read), the source
and the supported step forward. Which rows a stack uses is derived from the pins themselves
(infra/facts/pins.py), never copied.

Date rules:
- A date given to the month only (Python's devguide, Ubuntu's release cycle) counts from that
  month's first day: the warning comes early rather than late.
- A Neuron SDK minor line ends when the next minor is released: fixes come only as new releases,
  never to earlier ones (aws-neuron/aws-neuron-sdk v2.32.0 about-neuron/sdk-policy.rst, "Neuron
  Software Maintenance Updates" and "Neuron DLAMIs and DLCs Updates"); release dates from
  release-notes/prev/rn.rst and about-neuron/whats-new.rst at the same tag.
- An EKS AMI release is superseded by the next one, never end-of-lifed on its own: a pinned release
  is supported as long as the Kubernetes minor it is built for (its ``kubernetes-<minor>`` row).
- cluster-autoscaler releases follow Kubernetes minors (infra/facts/versions.py CLUSTER_AUTOSCALER):
  the release a stack runs is supported as long as its minor (the same ``kubernetes-<minor>`` row).
- Distributions: the end of the free standard security support (Ubuntu's standard support, not
  Ubuntu Pro; Debian's regular security support, not the volunteer LTS).
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


@dataclass(frozen=True)
class Support:
    """One component line: what it is, when its support ends, where that is written, what comes next."""

    what: str
    ends: date | None
    source: str
    forward: str
    after: str = ""
    """What happens past the end, when more than a lack of fixes (", and ...")."""

    @property
    def shown_end(self) -> str:
        return self.ends.isoformat() if self.ends else "none announced"


def kubernetes_support(minor: str, extended: bool) -> Support:
    """The ``kubernetes-<minor>`` row: standard support's end, or extended support's under
    ``upgradePolicy: EXTENDED``."""
    k = EKS_KUBERNETES_SUPPORT[minor]
    kind = "extended" if extended else "standard"
    return Support(
        f"EKS {kind} support for Kubernetes {minor}",
        k.extended_ends if extended else k.standard_ends,
        k.source,
        "raise kubernetesVersion one minor at a time, with the groups' amiReleaseVersion "
        "(docs/architecture.md, Kubernetes upgrades)",
        # Past the end, EKS upgrades the control plane itself, and the stack would declare a version the
        # cluster no longer runs (its next `up` tries a downgrade).
        "" if extended else ", and EKS upgrades the control plane itself, past the version this stack declares",
    )


_NEURON = "aws-neuron/aws-neuron-sdk v2.32.0"
_SDK_RULE = f"{_NEURON} about-neuron/sdk-policy.rst: no fixes to earlier releases"
_TRN1_LAST = (
    "none for PyTorch training on Trainium1: SDK 2.30.0's PyTorch 2.9 container is the last "
    "(NEURON_DLC_PYTORCH_2_9); then the native PyTorch stack on Trainium2/3 (docs/trainium1-support.md)"
)
_TO_2_9 = "rebuild on NEURON_DLC_PYTORCH_2_9 (SDK 2.30.0, PyTorch 2.9, py312, Ubuntu 24.04)"
_PYTHON = "peps.python.org/api/release-cycle.json (devguide.python.org/versions), end_of_life, month only"
_UBUNTU = "ubuntu.com/about/release-cycle, End of Standard Support, month only"
_DEBIAN = (
    "Debian 12 regular security support until 2026-06-10, then the volunteer LTS team until 2028-06-30 "
    "(it-server-room.com Debian EOL schedule; dev.to/endoflifeai 2026-05; debian.club gives 2026-07-11)"
)
_PULUMI_PROVIDERS = (
    "pulumi.com/docs/support/provider-support-policy: the latest major of every provider is maintained "
    "(the previous AWS and Kubernetes majors get security fixes up to 12 months after the next major)"
)
_NO_POLICY = "publishes no support window"


def _neuron_sdk(minor: str, ended: date, next_release: str) -> Support:
    return Support(
        f"Neuron SDK {minor}",
        ended,
        f"{_SDK_RULE}; Neuron {next_release} released {ended.isoformat()} ({_NEURON} release-notes/prev/rn.rst, "
        "about-neuron/whats-new.rst)",
        _TO_2_9,
    )


def _action(name: str, read_at: str) -> Support:
    return Support(
        f"GitHub action {name} {read_at.split('.')[0]}",
        None,
        f"{name} action.yml at {read_at} runs on node24; GitHub has announced no end for the node24 "
        "runtime in the sources read",
        "the newest release of the same major (a SHA pin with its version comment)",
    )


def _ray_in_kuberay_range(minor: str) -> Support:
    """A Ray minor KubeRay 1.3 or newer supports: Ray has no LTS and announces no end per release."""
    return Support(
        f"Ray {minor}",
        None,
        "docs.ray.io cluster/kubernetes/user-guides/upgrade-guide: KubeRay v1.3.X and later support Ray 2.38.0 "
        f"and later; Ray {_NO_POLICY} or LTS",
        "a newer Ray release in KubeRay's range, with the training image",
    )


# Every component line a stack can pin, by the name endOfSupportAcknowledged uses. Both the lines the
# images run now and the ones they move to (NEURON_DLC_PYTORCH_2_9) are here.
SUPPORT: dict[str, Support] = {
    # --- Neuron SDK of each image (the -sdk<version>- of its DLC tag) ---
    "neuron-sdk-2.18": _neuron_sdk("2.18", date(2024, 7, 3), "2.19.0"),
    "neuron-sdk-2.20": _neuron_sdk("2.20", date(2024, 12, 20), "2.21.0"),
    "neuron-sdk-2.21": _neuron_sdk("2.21", date(2025, 4, 3), "2.22.0"),
    "neuron-sdk-2.30": Support(
        "Neuron SDK 2.30 (the last PyTorch/XLA training container)",
        date(2026, 7, 7),
        f"{_SDK_RULE}; Neuron 2.31.0 released 2026-07-07 ({_NEURON} about-neuron/whats-new.rst) and publishes "
        "no PyTorch/XLA training container (about-neuron/announcements/neuron2.x/"
        "announce-no-longer-publish-pytorch-training-dlc.rst)",
        _TRN1_LAST,
    ),
    # --- framework: the PyTorch/XLA (torch-neuronx) line of each image ---
    "pytorch-xla-1.13": Support(
        "PyTorch 1.13 on Neuron (torch-neuronx)",
        date(2025, 4, 3),
        f"{_NEURON} about-neuron/announcements/neuron2.x/announce-no-longer-support-pytorch-113.rst: not supported "
        "from Neuron 2.22 (2025-04-03)",
        _TO_2_9,
    ),
    "pytorch-xla-2.5": Support(
        "PyTorch 2.5 on Neuron (torch-neuronx)",
        date(2025, 7, 31),
        f"{_NEURON} about-neuron/announcements/neuron2.x/announce-intent-eos-pt-version.rst: Neuron 2.24 the last "
        "with it; Neuron 2.25.0 released 2025-07-31 (release-notes/prev/rn.rst)",
        _TO_2_9,
    ),
    "pytorch-xla-2.9": Support(
        "PyTorch/XLA training on Neuron (PyTorch 2.9, the last XLA line)",
        date(2026, 5, 21),
        f"{_NEURON} about-neuron/announcements/neuron2.x/announce-no-support-pytorch-xla-training.rst: not supported "
        "for training from Neuron 2.30.0 (2026-05-21); Neuron docs (latest) archive/frameworks/torch/index: "
        "torch-neuronx in maintenance (critical and security fixes) as of 2.32",
        _TRN1_LAST,
    ),
    # --- Neuron training libraries ---
    "nxd-training-1.7": Support(
        "NxD Training (neuronx_distributed_training)",
        date(2026, 8, 17),
        f"{_NEURON} archive/nxd-training/*.rst: NxD Training and XLA training reached end of support as of "
        "Neuron 2.32 (2.32.0 released 2026-08-17); announce-no-longer-include-nxdt-dlami.rst: maintenance mode",
        _TRN1_LAST,
    ),
    "nxd-core-0.19": Support(
        "NxD Core training APIs (neuronx_distributed)",
        date(2026, 8, 17),
        f"{_NEURON} announce-eos-nxdt-nxd-core-training.rst (none after PyTorch 2.9) and archive/nxd-training/*.rst "
        "(end of support as of Neuron 2.32, released 2026-08-17)",
        _TRN1_LAST,
    ),
    "neuronx-nemo-megatron": Support(
        "neuronx-nemo-megatron (NeMo Megatron on Neuron)",
        date(2025, 5, 20),
        f"{_NEURON} about-neuron/announcements/neuron2.x/announce-eos-nemo.rst: support ends with Neuron 2.23 "
        "(2025-05-20); aws-neuron/neuronx-nemo-megatron's last commit is the 2.21 release (f4743ce, 2024-12-19)",
        "NxD Training 1.7 in NEURON_DLC_PYTORCH_2_9",
    ),
    # --- Python of each image ---
    "python-3.10": Support("Python 3.10", date(2026, 10, 1), f"{_PYTHON}: 2026-10", _TO_2_9),
    "python-3.11": Support(
        "Python 3.11", date(2027, 10, 1), f"{_PYTHON}: 2027-10", "a python 3.12 or newer slim image"
    ),
    "python-3.12": Support("Python 3.12", date(2028, 10, 1), f"{_PYTHON}: 2028-10", "a Python 3.13 or newer base"),
    # --- base OS of each image ---
    "ubuntu-20.04": Support(
        "Ubuntu 20.04",
        date(2025, 4, 1),
        f"{_UBUNTU}: Apr 2025; Neuron publishes no Ubuntu 20.04 DLC from 2.22 ({_NEURON} announce-eos-u20-dlamis.rst)",
        _TO_2_9,
    ),
    "ubuntu-22.04": Support(
        "Ubuntu 22.04",
        date(2027, 4, 1),
        f"{_UBUNTU}: Apr 2027; Neuron publishes no Ubuntu 22.04 DLC from 2.30 ({_NEURON} "
        "announce-eos-ubuntu-22-04-dlami-dlc.rst, which also gives April 2027)",
        _TO_2_9,
    ),
    "ubuntu-24.04": Support("Ubuntu 24.04", date(2029, 4, 1), f"{_UBUNTU}: Apr 2029", "Ubuntu 26.04"),
    "debian-12": Support(
        "Debian 12 (bookworm)", date(2026, 6, 10), _DEBIAN, "the python image's -slim-trixie (Debian 13) variant"
    ),
    "debian-13": Support(
        "Debian 13 (trixie)",
        None,
        "released 2025-08-09; Debian gives a stable release regular security support until a year after the next "
        "one (Debian 14 not released): no end announced (debian.org/security/faq, releases page)",
        "Debian 14 once released",
    ),
    # --- Ray (the ray-llama2 image) ---
    "ray-2.22": Support(
        "Ray 2.22 under KubeRay 1.7",
        date(2025, 2, 18),
        "docs.ray.io cluster/kubernetes/user-guides/upgrade-guide: do not use Ray 2.11.0-2.37.0 (the dashboard "
        "agent hangs, the raylet probes fail); KubeRay v1.3.X and later support Ray 2.38.0 and later; "
        "ray-project/kuberay v1.3.0 tagged 2025-02-18 (8ba2b33)",
        "Ray 2.38 or newer in the ray-llama2 image",
    ),
    # --- cluster software (charts and manifests) ---
    "neuron-helm-chart-1.9": Support(
        "Neuron Helm chart 1.9",
        None,
        f"aws-neuron/neuron-helm-charts {_NO_POLICY} (no policy file in the repository; GitHub releases list "
        "component versions only)",
        "neuron-helm-chart 1.10.0",
    ),
    "efa-device-plugin-0.5": Support(
        "EFA device plugin chart 0.5",
        None,
        f"aws/eks-charts {_NO_POLICY} (stable/aws-efa-k8s-device-plugin/README.md at 5239609: values only)",
        "its newest chart in aws/eks-charts",
    ),
    "aws-dranet-1.0": Support(
        "EFA DRA driver chart (aws-dranet) 1.0",
        None,
        f"aws/eks-charts {_NO_POLICY} (stable/aws-dranet/README.md at 5239609: prerequisites and values only)",
        "its newest chart in aws/eks-charts",
    ),
    "aws-fsx-csi-driver-1.17": Support(
        "FSx for Lustre CSI driver chart 1.17",
        None,
        f"kubernetes-sigs/aws-fsx-csi-driver {_NO_POLICY} (docs/README.md at 5b22712: Kubernetes and CSI "
        "compatibility matrices only)",
        "its newest chart",
    ),
    "aws-efs-csi-driver-4.4": Support(
        "EFS CSI driver chart 4.4",
        None,
        f"kubernetes-sigs/aws-efs-csi-driver {_NO_POLICY} (docs/compatibility.md at v3.4.1: driver and Kubernetes "
        "compatibility matrices only)",
        "its newest chart",
    ),
    "volcano-1.15": Support(
        "Volcano 1.15",
        None,
        "volcano-sh/volcano docs/community/version-release.md: a minor about every three months, no support "
        "window; README Kubernetes compatibility: v1.15 up to Kubernetes 1.35",
        "the newest Volcano minor, checked against Kubernetes compatibility",
    ),
    "kuberay-1.7": Support(
        "KubeRay 1.7",
        None,
        "ray-project/kuberay docs/development/release.md: each minor on its own release branch, no support "
        "window; docs.ray.io KubeRay upgrade guide (compatibility only)",
        "the newest KubeRay minor",
    ),
    "metrics-server-3.13": Support(
        "metrics-server chart 3.13",
        None,
        f"kubernetes-sigs/metrics-server {_NO_POLICY} (README.md at 5ed5d3a, Compatibility Matrix: Kubernetes "
        "versions per minor only)",
        "its newest chart",
    ),
    "kube-state-metrics-8.4": Support(
        "kube-state-metrics chart 8.4 (kube-state-metrics 2.20)",
        None,
        'kubernetes/kube-state-metrics publishes no support window: "the maintainers will only support the latest '
        'release" (README.md at v2.20.0, Compatibility matrix)',
        "its newest chart",
    ),
    "prometheus-chart-29.27": Support(
        "prometheus chart 29.27 (Prometheus 3.14, Alertmanager 0.34)",
        None,
        "prometheus-community/helm-charts publishes no support window for its charts (charts/prometheus at "
        "cf408a2); no Prometheus release-cycle page was read for 3.14",
        "its newest chart",
    ),
    "grafana-chart-12.11": Support(
        "grafana chart 12.11 (Grafana 13.2)",
        # The chart publishes no support window of its own; Grafana's does the work: a minor gets patch releases
        # (fixes and security) for 9 months from its release, the last minor of a major for 15 (Grafana's "when
        # to upgrade" page, read through a mirror and two summaries of it, not grafana.com itself). 13.2.0 is
        # known to the month: the chart moved to its image on 2026-08-18 (f89c852a); August 2026 + 9 months.
        date(2027, 5, 1),
        "Grafana's upgrade strategy page (grafana.com docs upgrade-guide/when-to-upgrade: each minor supported 9 "
        "months from its release, the last minor of a major 15), read through grafana.org.cn's mirror, "
        "versionlog.com/grafana and a CSDN copy, not on grafana.com itself; Grafana 13.2.0 dated by "
        "grafana-community/helm-charts f89c852a (2026-08-18), the chart's move to that image, month only",
        "the grafana chart with the next Grafana minor (grafana-community/helm-charts)",
    ),
    "prometheus-node-exporter-4.56": Support(
        "prometheus-node-exporter chart 4.56 (node-exporter 1.12)",
        None,
        f"prometheus/node_exporter {_NO_POLICY} (README.md at v1.12.1; releases only), nor does the chart",
        "its newest chart",
    ),
    "neuron-monitor-1.3": Support(
        "neuron-monitor image 1.3",
        None,
        f"aws-neuron/aws-neuron-sdk {_NO_POLICY} for the image (81ce03a: src/k8/k8s-neuron-monitor-daemonset.yml "
        "is its only mention, deploy/infrastructure/monitoring.rst links it)",
        "the tag that manifest names next, or Neuron Observer on Trainium2/3",
    ),
    "karpenter-1.14": Support(
        "Karpenter 1.14 (LTS)",
        date(2027, 7, 1),
        'aws/karpenter-provider-aws GitHub releases v1.14.x open with "This is a Long-Term Support (LTS) release. '
        'Supported until Jul 2027" (month only; quoted by two independent pin surveys in the code corpus, the '
        "releases themselves are not in the repository snapshot, which ends 2026-08-21); the LTS cadence and "
        "phases: aws/karpenter-provider-aws#9313 (SUPPORT.md, every 6 months)",
        "the next Karpenter LTS minor (karpenter and karpenter-crd charts together)",
    ),
    "mpi-operator-0.8": Support(
        "MPI operator 0.8",
        None,
        f"kubeflow/mpi-operator RELEASE.md (v0.8.2) {_NO_POLICY}",
        "MPI operator v0.8.2",
    ),
    "nginx-1.29": Support(
        "nginx 1.29 (mainline)",
        date(2026, 5, 13),
        "endoflife.date/api/nginx.json: 1.29 ended when the 1.31 mainline was released (2026-05-13); nginx "
        "maintains only the current mainline and stable branches",
        "nginx-unprivileged 1.30 (stable) or the current mainline",
    ),
    "nginx-1.30": Support(
        "nginx 1.30 (stable)",
        None,
        "endoflife.date/api/nginx.json: a stable branch is maintained until the next stable one (1.32, not yet "
        "released); nginx/docker-nginx-unprivileged stable/ at e26803b builds 1.30.4",
        "the next nginx stable line",
    ),
    # --- the Pulumi engine and packages, TorchX (requirements.txt, .pulumi-version) ---
    "pulumi-3": Support(
        "Pulumi CLI and SDK 3",
        None,
        f"pulumi/pulumi {_NO_POLICY} for the CLI or SDK (no policy file in the repository)",
        "the newest 3.x",
    ),
    "pulumi-aws-7": Support("pulumi-aws 7", None, _PULUMI_PROVIDERS, "the newest 7.x"),
    "pulumi-eks-4": Support("pulumi-eks 4", None, _PULUMI_PROVIDERS, "the newest 4.x"),
    "pulumi-kubernetes-4": Support("pulumi-kubernetes 4", None, _PULUMI_PROVIDERS, "the newest 4.x"),
    "pulumi-random-4": Support("pulumi-random 4", None, _PULUMI_PROVIDERS, "the newest 4.x"),
    "pulumi-policy-1": Support(
        "pulumi-policy 1", None, f"pulumi/pulumi-policy {_NO_POLICY} (README.md at 805bcbc)", "the newest 1.x"
    ),
    "torchx-0.7": Support(
        "TorchX 0.7",
        None,
        f"pytorch/torchx {_NO_POLICY} (README.md at b72ba03; no policy file)",
        "the newest TorchX release",
    ),
    # --- GitHub actions (.github/workflows/*.yml) ---
    "actions/checkout-v7": _action("actions/checkout", "v7.0.1"),
    "actions/setup-python-v7": _action("actions/setup-python", "v7.0.0"),
    "actions/github-script-v8": _action("actions/github-script", "v8.0.0"),
    "aws-actions/configure-aws-credentials-v6": _action("aws-actions/configure-aws-credentials", "v6.2.3"),
    "pulumi/actions-v7": _action("pulumi/actions", "v7.0.0"),
}
# Ray minors in KubeRay's supported range, one per line: the release the ray-llama2 image moves to.
RAY_MINORS_IN_KUBERAY_RANGE: tuple[str, ...] = ("2.55",)
SUPPORT.update({f"ray-{minor}": _ray_in_kuberay_range(minor) for minor in RAY_MINORS_IN_KUBERAY_RANGE})


def row_names() -> list[str]:
    """Every name ``endOfSupportAcknowledged`` accepts."""
    return [kubernetes_pin(minor) for minor in EKS_KUBERNETES_SUPPORT] + list(SUPPORT)


def support(name: str, extended: bool = False) -> Support:
    """The row ``name``; a Kubernetes minor's end follows the stack's upgrade policy."""
    if name.startswith("kubernetes-"):
        return kubernetes_support(name.removeprefix("kubernetes-"), extended)
    return SUPPORT[name]
