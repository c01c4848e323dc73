"""Which Neuron driver, device plugin and runtime/compiler/framework versions work together.

Sources (aws-neuron/aws-neuron-sdk, fetched at the tags named):
- package versions of every SDK release: v2.32.0 src/helperscripts/n2-manifest.json
  (``aws-neuronx-dkms`` = driver, ``aws-neuronx-runtime-lib``, ``neuronx-cc``, ``torch-neuronx``);
- release dates: v2.31.0 about-neuron/whats-new.rst (2.30.0 on 2026-05-21, 2.31.0 on 2026-07-07),
  v2.32.0 release-notes/components/runtime.rst (2.24.0 on 2025-06-24, 2.32.0 on 2026-08-17);
- the incompatibilities in ``RULES``, each with the file that states it.

The driver is the one on the node: the EKS AL2023 Neuron AMI installs the newest
``aws-neuronx-dkms`` of the Neuron repository when it is built (awslabs/amazon-eks-ami
templates/al2023/runtime/gpu/neuron-package-install.sh downgrades only for Inf1), so an AMI
release ``<k8s>.<patch>-<YYYYMMDD>`` carries the newest driver released on or before that date,
and an unpinned group (the latest AMI when its nodes launch) carries the newest of all.
The runtime, compiler and framework are the training image's: its DLC tag names the SDK.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from infra.facts.instances import TRAINIUM2, Accelerator, accelerator_of
from infra.facts.versions import (
    CHARTS,
    KUBERNETES_VERSION,
    NEURON_DLC_PYTORCH_2_9,
)


@dataclass(frozen=True)
class SdkRelease:
    version: str
    driver: str
    runtime: str
    compiler: str
    torch_neuronx: tuple[str, ...]


# The SDK releases the images and AMIs here come from (n2-manifest.json at v2.32.0, Trn1/Trn2 packages).
SDK_RELEASES: dict[str, SdkRelease] = {
    r.version: r
    for r in (
        SdkRelease("2.18.2", "2.16.7.0", "2.20.22.0", "2.13.72.0", ("1.13.1.1.14.0", "2.1.2.2.1.0")),
        SdkRelease("2.20.2", "2.18.20.0", "2.22.19.0", "2.15.143.0", ("1.13.1.1.16.0", "2.1.2.2.3.2")),
        SdkRelease("2.21.0", "2.19.64.0", "2.23.110.0", "2.16.345.0", ("1.13.1.1.17.0", "2.1.2.2.4.0", "2.5.1.2.4.0")),
        SdkRelease("2.24.0", "2.22.2.0", "2.26.42.0", "2.19.8089.0", ()),
        SdkRelease("2.30.0", "2.28.0.0", "2.32.31.0", "2.25.3371.0", ("2.9.0.2.14.27725",)),
        SdkRelease("2.31.0", "2.29.0.0", "2.33.10.0", "2.26.6360.0", ("2.9.0.2.15.32035",)),
        SdkRelease("2.32.0", "2.30.2.0", "2.34.10.0", "2.27.5334.0", ()),
    )
}

# When a driver first shipped (the SDK release that brought it): the AMI built on or after the date
# carries it or a newer one. Only the drivers a rule turns on are listed.
DRIVER_RELEASES: tuple[tuple[str, str, str], ...] = (  # (driver, SDK, release date)
    ("2.22", "2.24.0", "2025-06-24"),
    ("2.28", "2.30.0", "2026-05-21"),
    ("2.29", "2.31.0", "2026-07-07"),
    ("2.30", "2.32.0", "2026-08-17"),
)

# EKS AL2023 Neuron AMI releases whose driver the training images run on, one per Kubernetes minor,
# with the aws-neuronx-dkms their package list names: awslabs/amazon-eks-ami tag v20260707
# CHANGELOG.md, "AMI Release v20260625" (line 5), each minor's <details> block giving the release
# version (AMI amazon-eks-node-al2023-x86_64-neuron-<minor>-v20260625) and, in the
# AL2023_x86_64_NEURON column, aws-neuronx-dkms 2.28.0.0-dkms (line numbers below). The next
# release, v20260714 (tag v20260724 CHANGELOG.md), carries 2.29.0.0, the driver RULES[0] refuses
# with these images. Driver 2.28.0.0 is SDK 2.30.0's (SDK_RELEASES), and its release notes list no
# incompatibility (aws-neuron-sdk v2.32.0 release-notes/components/runtime.rst, Neuron Driver 2.28.0.0).
COMPATIBLE_AMI_RELEASES: dict[str, tuple[str, str]] = {  # minor: (release version, aws-neuronx-dkms)
    "1.32": ("1.32.13-20260625", "2.28.0.0"),  # lines 388, 420
    "1.33": ("1.33.13-20260625", "2.28.0.0"),  # lines 307, 339
    "1.34": ("1.34.9-20260625", "2.28.0.0"),  # lines 226, 258
    "1.35": ("1.35.6-20260625", "2.28.0.0"),  # lines 145, 177 (the shipped stacks' pin)
    "1.36": ("1.36.2-20260625", "2.28.0.0"),  # lines 68, 100
}
KNOWN_AMI_DRIVERS = {release: driver for release, driver in COMPATIBLE_AMI_RELEASES.values()}


def compatible_ami_release(kubernetes_version: str = KUBERNETES_VERSION) -> str | None:
    """The release above for a Kubernetes minor, if one is recorded."""
    return COMPATIBLE_AMI_RELEASES.get(kubernetes_version, (None, None))[0]


def compatible_release_hint(kubernetes_version: str) -> str:
    """The fix's example: the release listed above for the stack's Kubernetes minor."""
    release = compatible_ami_release(kubernetes_version)
    if release is None:
        return ""
    return f" (for Kubernetes {kubernetes_version}: {release}, Neuron driver {KNOWN_AMI_DRIVERS[release]})"


# The Neuron Helm chart's device plugin and scheduler extension (GitHub release
# aws-neuron/neuron-helm-charts 1.9.0: device plugin 2.31.0.0).
NEURON_CHART_COMPONENTS = {"1.9.0": "2.31.0.0"}
DEVICE_PLUGIN = NEURON_CHART_COMPONENTS[CHARTS["neuron"].version]


@dataclass(frozen=True)
class TrainingImage:
    name: str  # docker/<name>/Dockerfile
    base: str  # the DLC it builds on (infra/facts/versions.py)
    framework: str
    where: str = ""  # how messages name it; docker/<name> when empty

    @property
    def shown(self) -> str:
        return self.where or f"docker/{self.name}"

    @property
    def sdk(self) -> SdkRelease:
        return SDK_RELEASES[sdk_of(self.base)]


def sdk_of(image: str) -> str:
    """The Neuron SDK a DLC tag names: ...-sdk2.21.0-ubuntu22.04 -> 2.21.0."""
    found = re.search(r"-sdk(\d+\.\d+\.\d+)-", image)
    if not found:
        raise ValueError(f"{image}: no -sdk<version>- in the tag")
    return found.group(1)


TRAINING_IMAGES: tuple[TrainingImage, ...] = (
    TrainingImage("bert-pretrain", NEURON_DLC_PYTORCH_2_9, "torch-neuronx 2.9.0"),
    TrainingImage("nxd-llama", NEURON_DLC_PYTORCH_2_9, "torch-neuronx 2.9.0"),
    TrainingImage("ray-llama2", NEURON_DLC_PYTORCH_2_9, "torch-neuronx 2.9.0"),
)


# The burn-in (infra/specs/burn_in_objects.py) runs nccom-test from this DLC on every new node of a group with
# burnIn: its runtime must work with the node's driver like the training images', or every node fails
# its burn-in and none takes a job.
BURN_IN_IMAGE = TrainingImage(
    "neuron-burn-in", NEURON_DLC_PYTORCH_2_9, "aws-neuronx-tools nccom-test", where="the burn-in image"
)


def images_for(burn_in: bool) -> tuple[TrainingImage, ...]:
    """What runs on a Trainium group's nodes: the training images, and the burn-in's when it is on."""
    return TRAINING_IMAGES + ((BURN_IN_IMAGE,) if burn_in else ())


def version_key(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in version.split("."))


def at_least(version: str, floor: str) -> bool:
    n = len(version_key(floor))
    return version_key(version)[:n] >= version_key(floor)


@dataclass(frozen=True)
class DriverRange:
    """What is known of a node's driver: at least ``low`` and, when known, below ``below``."""

    low: str | None
    below: str | None
    source: str
    exact: str | None = None  # the release's package list names it (COMPATIBLE_AMI_RELEASES)

    def span(self) -> str:
        """The driver versions alone: "2.28.0.0", "2.29 or newer, below 2.30"."""
        if self.exact:
            return self.exact
        if self.low and self.below:
            return f"{self.low} or newer, below {self.below}"
        if self.low:
            return f"{self.low} or newer"
        return f"below {self.below}"

    def describe(self) -> str:
        return f"Neuron driver {self.span()} ({self.source})"


def ami_driver(ami_release_version: str | None) -> DriverRange:
    """The driver an AMI release carries; the latest AMI's when unpinned."""
    if ami_release_version is None:
        return DriverRange(DRIVER_RELEASES[-1][0], None, "latest AL2023 Neuron AMI")
    # The build date ends both a node group's release (1.34.9-20260625) and a Karpenter alias's
    # version (al2023@v20260625, infra/specs/nodepools.py ami_alias).
    built = ami_release_version[-8:]
    built = f"{built[:4]}-{built[4:6]}-{built[6:8]}"
    low = below = None
    for driver, _, date in DRIVER_RELEASES:
        if date <= built:
            low = driver
        elif below is None:
            below = driver
    exact = KNOWN_AMI_DRIVERS.get(ami_release_version)
    if exact:
        return DriverRange(exact, below, f"AMI release {ami_release_version}, built {built}", exact)
    return DriverRange(low, below, f"AMI release {ami_release_version}, built {built}")


@dataclass(frozen=True)
class Rule:
    """A combination the release notes say fails."""

    what: str
    source: str
    fix: str
    driver_at_least: str | None = None
    driver_below: str | None = None
    runtime_below: str | None = None
    runtime_at_least: str | None = None
    sdk_below: str | None = None
    accelerator: Accelerator | None = None  # only on this accelerator's types

    @property
    def pinning_fixes(self) -> bool:
        """A driver rule: an AMI release with another driver is a fix."""
        return bool(self.driver_at_least or self.driver_below)

    def fails(self, driver: DriverRange, image: TrainingImage, instance_type: str) -> bool:
        """Only a failure the table is sure of: the whole driver range on the failing side."""
        if self.accelerator is not None and accelerator_of(instance_type) != self.accelerator:
            return False
        sdk = image.sdk
        if self.runtime_below and at_least(sdk.runtime, self.runtime_below):
            return False
        if self.runtime_at_least and not at_least(sdk.runtime, self.runtime_at_least):
            return False
        if self.sdk_below and at_least(sdk.version, self.sdk_below):
            return False
        if self.driver_at_least and not (driver.low and at_least(driver.low, self.driver_at_least)):
            return False
        if self.driver_below and not (driver.below and version_key(driver.below) <= version_key(self.driver_below)):
            return False
        return True


RULES: tuple[Rule, ...] = (
    Rule(
        what="Neuron driver 2.29 or newer with a Neuron runtime below 2.33: nrt_init() fails",
        source="aws-neuron-sdk v2.31.0 release-notes/components/runtime.rst, Neuron Driver 2.29, Known Issues",
        fix="pin acceleratorNodeGroups[].amiReleaseVersion to a release built before 2026-07-07 (driver 2.28 or "
        "older), or move the image to Neuron SDK 2.31 or newer (runtime 2.33+)",
        driver_at_least="2.29",
        runtime_below="2.33",
    ),
    Rule(
        what="Neuron runtime 2.26 or newer on Trainium2 with a Neuron driver below 2.22",
        source="aws-neuron-sdk v2.32.0 release-notes/components/runtime.rst, runtime 2.26.42.0, Breaking Changes",
        fix="pin an AMI release built on or after 2025-06-24 (driver 2.22+)",
        driver_below="2.22",
        runtime_at_least="2.26",
        accelerator=TRAINIUM2,
    ),
    Rule(
        what="the Neuron node problem detector (Neuron chart, npd) needs the runtime at SDK 2.18 or later",
        source="aws-neuron-sdk v2.31.0 deploy/ecs/npd.rst",
        fix="move the image to a DLC of Neuron SDK 2.18 or later",
        sdk_below="2.18",
    ),
)


def incompatibilities(
    ami_release_version: str | None, instance_type: str, images: tuple[TrainingImage, ...] = TRAINING_IMAGES
) -> list[tuple[TrainingImage, DriverRange, Rule]]:
    driver = ami_driver(ami_release_version)
    return [(image, driver, rule) for image in images for rule in RULES if rule.fails(driver, image, instance_type)]
