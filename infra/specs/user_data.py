"""nodeadm user data for AL2023 accelerator nodes.

With a managed node group on an EKS AMI type, EKS writes the cluster bootstrap part itself
and merges ours, so we only add what differs: containerd giving each container's devices to the
pod's own user and group; instance-store NVMe assembled as RAID0 and used for kubelet and
containerd, which keeps 10+ GB Neuron images and compile caches off the root volume; and, on EFA
nodes, a locked-memory limit for containers that EFA can register training buffers under; on
health-gated nodes, the label that starts their burn-in (infra/specs/node_template.py
BURN_IN_PENDING_LABEL); and, where images land on instance store, parallel image pull and unpack.
"""

from __future__ import annotations

import base64

BOUNDARY = "==TRAINIUM-EKS=="

_NODECONFIG = """\
---
apiVersion: node.eks.aws/v1alpha1
kind: NodeConfig
spec:
"""
_RAID0 = """\
  instance:
    localStorage:
      strategy: RAID0
"""
# Containers get the rlimits of containerd's base runtime spec, which on AL2023 sets RLIMIT_NOFILE
# only (65536 soft, 1048576 hard: awslabs/amazon-eks-ami nodeadm/internal/containerd/base-runtime-spec.json),
# so RLIMIT_MEMLOCK is containerd's own (systemd's 8 MiB default), far below what EFA pins. nodeadm
# merges NodeConfig containerd.baseRuntimeSpec over that file with mergo, override on, through
# map[string]interface{} (nodeadm/internal/containerd/base_runtime_spec.go, internal/util/merge.go):
# a list replaces the default's, so RLIMIT_NOFILE is repeated, and numbers pass through float64, so
# the limit is 2**53 bytes (exact in a float64; RLIM_INFINITY, 2**64-1, is not).
LOCKED_MEMORY_BYTES = 2**53

# Training pods run as their namespace's non-root id, and the Neuron and EFA devices the device plugins
# hand a container (/dev/neuron*, /dev/infiniband/uverbs*) are root's on the host: with this, containerd
# creates them in the container owned by the pod's runAsUser/runAsGroup instead (containerd v2.2.4
# internal/cri/opts/spec_linux_opts.go WithDevices, non-zero ids only; the field is RuntimeConfig's
# `device_ownership_from_security_context`, internal/cri/config/config.go, default false, which the AL2023
# AMI's templates leave: awslabs/amazon-eks-ami v20260625 nodeadm/internal/containerd/config2.template.toml).
# RuntimeConfig is the config of the plugin `io.containerd.cri.v1.runtime` (plugins/cri/runtime/plugin.go:
# type io.containerd.cri.v1, id runtime). The v3 name matters: nodeadm keeps its v3 template only when the
# NodeConfig's containerd.config names a v3 CRI plugin (nodeadm/internal/containerd/config.go
# Version3configInNodeConfig), and merges it over that template key by key (combineContainerdConfigs,
# internal/util/merge.go), so nothing else of the template changes.
CRI_RUNTIME_PLUGIN = "io.containerd.cri.v1.runtime"
DEVICE_OWNERSHIP_KEY = "device_ownership_from_security_context"
_CONTAINERD_CONFIG = f"""\
    config: |
      [plugins.'{CRI_RUNTIME_PLUGIN}']
      {DEVICE_OWNERSHIP_KEY} = true
"""
_LOCKED_MEMORY = f"""\
    baseRuntimeSpec:
      process:
        rlimits:
          - type: RLIMIT_NOFILE
            soft: 65536
            hard: 1048576
          - type: RLIMIT_MEMLOCK
            soft: {LOCKED_MEMORY_BYTES}
            hard: {LOCKED_MEMORY_BYTES}
"""


# Parallel pull and unpack of images, through the SOCI snapshotter the AL2023 AMIs ship (awslabs/amazon-eks-ami
# v20260625, the pinned release: templates/al2023/provisioners/install-worker.sh installs soci-snapshotter on every
# AL2023 variant, the Neuron one included). nodeadm turns it on with the FastImagePull feature gate, off by default
# (nodeadm/internal/api/featuregates.go), on instances of at least 4 vCPUs and 7 GiB (containerd/config.go
# UseSOCISnapshotter): CRI's snapshotter becomes "soci" (containerd/config2.template.toml) and
# /etc/soci-snapshotter-grpc/config.toml gets its parallel_pull_unpack mode (containerd/snapshotter/
# soci-snapshotter.config.toml: up to 20 concurrent 16 MB range downloads and 12 unpacks per image, gzip through
# unpigz). That is the parallel pull only: it is no lazy loading, which needs a SOCI index pushed beside each image.
# nodeadm merges featureGates of every NodeConfig it reads key by key (nodeadm/internal/api/merge.go, mergo with
# override), so EKS's own part keeps its gates. Only where the images are on instance store: nodeadm's RAID0
# bind-mounts /var/lib/soci-snapshotter-grpc onto the array with containerd's (templates/al2023/runtime/bin/
# setup-local-disks, unless --no-bind-soci), while on the gp3 root volume (125 MiB/s unless raised) nodeadm's
# own guide warns that pulls may get slower below 600 MiB/s (nodeadm/doc/examples.md, "Enabling fast image pull").
FAST_IMAGE_PULL_GATE = "FastImagePull"
_FAST_IMAGE_PULL = f"""\
  featureGates:
    {FAST_IMAGE_PULL_GATE}: true
"""


# Labels the kubelet registers the node with. nodeadm appends kubelet.flags of every NodeConfig it
# merges (EKS's or Karpenter's own and ours), and the kubelet merges repeated --node-labels
# (awslabs/amazon-eks-ami nodeadm/internal/api/merge.go mergeKubeletFlags; kubernetes component-base
# cli/flag/map_string_string.go Set), so ours add to the group's labels instead of replacing them.
def _kubelet_labels(labels: dict[str, str]) -> str:
    joined = ",".join(f"{k}={v}" for k, v in sorted(labels.items()))
    return f"""\
  kubelet:
    flags:
      - --node-labels={joined}
"""


def nodeadm_user_data(
    nvme_disks: int,
    efa: bool = False,
    node_labels: dict[str, str] | None = None,
    fast_image_pull: bool | None = None,
) -> str:
    """MIME multi-part user data (plain text) for an accelerator node. ``node_labels``: labels only a
    real node carries (set at registration), never a template's. ``fast_image_pull``: whether images
    land on an instance-store array; unset, whether this NodeConfig builds one (``nvme_disks``)."""
    fast = nvme_disks >= 1 if fast_image_pull is None else fast_image_pull
    node_config = (
        _NODECONFIG
        + (_FAST_IMAGE_PULL if fast else "")
        + (_RAID0 if nvme_disks >= 1 else "")
        + "  containerd:\n"
        + _CONTAINERD_CONFIG
        + (_LOCKED_MEMORY if efa else "")
        + (_kubelet_labels(node_labels) if node_labels else "")
    )
    return (
        "MIME-Version: 1.0\n"
        f'Content-Type: multipart/mixed; boundary="{BOUNDARY}"\n\n'
        f"--{BOUNDARY}\n"
        "Content-Type: application/node.eks.aws\n\n"
        f"{node_config}\n"
        f"--{BOUNDARY}--\n"
    )


def encode(user_data: str) -> str:
    return base64.b64encode(user_data.encode()).decode()
