"""nodeadm user data for AL2023 accelerator nodes.

With a managed node group on an EKS AMI type, EKS writes the cluster bootstrap part itself
and merges ours, so we only add what differs: instance-store NVMe assembled as RAID0 and
used for kubelet and containerd, which keeps 10+ GB Neuron images and compile caches off
the root volume.
"""

from __future__ import annotations

import base64
from typing import Optional

BOUNDARY = "==TRAINIUM-EKS=="

_NODECONFIG_RAID0 = """\
---
apiVersion: node.eks.aws/v1alpha1
kind: NodeConfig
spec:
  instance:
    localStorage:
      strategy: RAID0
"""


def nodeadm_user_data(nvme_disks: int) -> Optional[str]:
    """MIME multi-part user data (plain text), or None when there is nothing to add."""
    if nvme_disks < 1:
        return None
    return (
        "MIME-Version: 1.0\n"
        f'Content-Type: multipart/mixed; boundary="{BOUNDARY}"\n\n'
        f"--{BOUNDARY}\n"
        "Content-Type: application/node.eks.aws\n\n"
        f"{_NODECONFIG_RAID0}\n"
        f"--{BOUNDARY}--\n"
    )


def encode(user_data: str) -> str:
    return base64.b64encode(user_data.encode()).decode()
