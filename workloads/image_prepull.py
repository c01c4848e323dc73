"""Pulls this stack's training images onto a new Trainium node while its burn-in runs.

A health-gated node takes no training pod until its burn-in passes (infra/specs/burn_in_objects.py), and
only then would the kubelet start pulling the job's image. One DaemonSet per Trainium group a workload of
this stack runs on puts a pod on each of that group's nodes still waiting for its burn-in: the pod's init
containers are the stack's images for that group, each running ``true``, so the kubelet pulls every one
of them beside the burn-in's own pull; its container then sleeps in the last of them, pulled already.

Why this shape:
- The burn-in pod does not wait for it: the kubelet pulls the two pods' images side by side (the pinned
  AMI's kubelet config sets serializeImagePulls false: awslabs/amazon-eks-ami v20260625
  nodeadm/internal/kubelet/config.go). They share the node's network and disk, though, so the training
  images' own layers slow the burn-in's pull a little, inside its budget. The training images are built
  FROM the burn-in's Neuron DLC (docker/*/Dockerfile, tests/test_image_delivery.py), so what is left to
  fetch for them is their own layers.
- It holds no node capacity: a few millicores and MiB, no Neuron device, no EFA interface; and only
  during the burn-in. The DaemonSet selects the nodes carrying ``BURN_IN_PENDING_LABEL``, which the burn-in
  removes with its result, so the DaemonSet controller then deletes the pod. The images stay in the node's
  image store for the job; an image still being fetched when the burn-in ends is fetched by the job's pod.
- Neither autoscaler counts it on the node it imagines for a scale-up: that node lacks the pending label,
  which only the kubelet sets at registration (infra/specs/node_template.py BURN_IN_PENDING_LABEL, the same
  reasoning as for the burn-in's DaemonSet), so it costs a scale-up nothing.
- It tolerates the burn-in's startup taint (the training pods never do) and the group's own taints.
- A group without burn-in gets none: its nodes take the job's pod, and its pull, as soon as they are
  ready, so there is no window to fill.

The image list lives here, in the workload stack, because only the stack knows which images and tags its
jobs run (``imageTag``); the cluster stack exports the repositories and each group's labels and taints.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pulumi

from infra.contract import NodeGroup
from infra.specs.node_template import BURN_IN_PENDING_LABELS, burn_in_window_daemon_set
from workloads import pods
from workloads.kube import declare

NAME = "image-prepull"
LABELS = {"app.kubernetes.io/name": NAME, **pods.workload_labels(NAME)}
# What each init container runs: the pull is the point, the command only has to exist in every image (the
# Neuron DLC's Ubuntu and the cmd-shell's Debian both have coreutils).
PULL_COMMAND = ["true"]
HOLD_COMMAND = ["sleep", "infinity"]
RESOURCES = {"requests": {"cpu": "10m", "memory": "16Mi"}, "limits": {"cpu": "100m", "memory": "32Mi"}}


@dataclass(frozen=True)
class PrepullLayout:
    namespace: str
    groups: Mapping[str, tuple[NodeGroup, tuple[str, ...]]]
    """Node group name -> the group and the images this stack's jobs run there."""


def daemon_set(namespace: str, group: NodeGroup, images: Sequence[str]) -> dict[str, Any]:
    labels = {**LABELS, "node-group": group.name}
    security = pods.container_security_context(read_only_root=True)
    ordered = sorted(set(images))
    init = [
        {
            "name": f"pull-{i}",
            "image": image,
            "imagePullPolicy": "IfNotPresent",
            "command": PULL_COMMAND,
            "resources": RESOURCES,
            "securityContext": security,
        }
        for i, image in enumerate(ordered)
    ]
    hold = {
        "name": "hold",
        "image": ordered[-1],
        "imagePullPolicy": "IfNotPresent",
        "command": HOLD_COMMAND,
        "resources": RESOURCES,
        "securityContext": security,
    }
    return burn_in_window_daemon_set(
        f"{NAME}-{group.name}",
        namespace,
        labels,
        {
            **pods.pod_defaults(run_as_user=pods.UNPRIVILEGED_UID),
            "nodeSelector": {**group.node_selector, **BURN_IN_PENDING_LABELS},
            "tolerations": [*group.tolerations, *(t.toleration() for t in group.startup_taints)],
            # sleep as PID 1 ignores SIGTERM: nothing to finish, so no grace to wait out.
            "terminationGracePeriodSeconds": 1,
            "initContainers": init,
            "containers": [hold],
        },
    )


def manifests(layout: PrepullLayout) -> list[dict[str, Any]]:
    sets = [
        daemon_set(layout.namespace, group, images)
        for _, (group, images) in sorted(layout.groups.items())
        if group.burn_in and images
    ]
    if not sets:
        return []
    return [pods.network_policy(NAME, layout.namespace, LABELS, []), *sets]


class ImagePrepull(pulumi.ComponentResource):
    def __init__(self, name: str, layout: PrepullLayout, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("trainium:workloads:ImagePrepull", name, None, opts)
        declared: list[pulumi.Resource] = []
        for manifest in manifests(layout):
            declared.append(declare(manifest, self, declared[:1]))
        self.register_outputs({})
