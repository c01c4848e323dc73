"""The TorchX component and the workload stack's Volcano Job produce the same pods.

TorchX's own Kubernetes scheduler renders the component's AppDef (no cluster needed); its
pods must match the ones the BERT workload declares, apart from what only TorchX adds
(labels, its job id variables) and what only we add (tolerations, group labels).
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from torchx.schedulers.kubernetes_scheduler import app_to_resource

from offline.runner import PlanResult
from workloads.torchx_trn1 import trn1_dist_ddp

RDZV_ID = re.compile(r"--rdzv_id \S+")


def essentials(pod: dict[str, Any]) -> dict[str, Any]:
    """What decides how a pod trains: command, environment, devices, mounts and node."""
    spec = pod["spec"]
    container = spec["containers"][0]
    claims = {v["name"]: v["persistentVolumeClaim"]["claimName"] for v in spec["volumes"] if "persistentVolumeClaim" in v}
    memory = {v["name"] for v in spec["volumes"] if v.get("emptyDir", {}).get("medium") == "Memory"}
    mounts = {}
    for m in container["volumeMounts"]:
        mounts[m["mountPath"]] = claims.get(m["name"]) or ("memory" if m["name"] in memory else m["name"])
    return {
        "image": container["image"],
        "command": [RDZV_ID.sub("--rdzv_id <run>", c) for c in container["command"]],
        # Values only: each side fills its run-id variables its own way (TORCHX_*, downward API).
        "env": {e["name"]: e["value"] for e in container["env"] if "value" in e and not e["name"].startswith("TORCHX_")},
        "devices": {k: str(v) for k, v in container["resources"]["limits"].items()},
        "mounts": mounts,
        "instance_type": spec["nodeSelector"]["node.kubernetes.io/instance-type"],
        "restart": spec["restartPolicy"],
    }


def torchx_pods(image: str, precompile: bool, instance_type: str, steps: int) -> list[dict[str, Any]]:
    app = trn1_dist_ddp(
        image=image, nnodes=2, nproc_per_node=32, instance_type=instance_type, precompile=precompile,
        steps_this_run=steps, etcd_endpoint="etcd-server.default:2379",
    )  # fmt: skip
    resource = app_to_resource(app, queue="test", service_account="training")
    # The kubernetes client's models, as the API server would receive them.
    from kubernetes.client import ApiClient

    job = ApiClient().sanitize_for_serialization(resource)
    assert job["spec"]["schedulerName"] == "volcano" and job["spec"]["queue"] == "test"
    return [task["template"] for task in job["spec"]["tasks"]]


@pytest.mark.parametrize(("name", "precompile", "steps"), [("bert-precompile", True, 10), ("bert-train", False, -1)])
def test_torchx_component_renders_the_pods_the_stack_declares(
    workloads_dev: PlanResult, name: str, precompile: bool, steps: int
) -> None:
    job = next(r.inputs for r in workloads_dev.registrations if r.inputs.get("metadata", {}).get("name") == name)
    ours = [task["template"] for task in job["spec"]["tasks"]]
    image = ours[0]["spec"]["containers"][0]["image"]
    theirs = torchx_pods(image, precompile, "trn1.32xlarge", steps)
    assert [essentials(p) for p in theirs] == [essentials(p) for p in ours]


def test_the_component_refuses_instance_types_without_efa() -> None:
    with pytest.raises(ValueError, match="instance_type 'inf2.xlarge': allowed: trn1.32xlarge, trn1n.32xlarge, trn2.48xlarge"):
        trn1_dist_ddp(image="x", instance_type="inf2.xlarge")


def test_trn1n_gets_sixteen_efa_interfaces() -> None:
    (pod, _) = torchx_pods("repo/bert:tag", False, "trn1n.32xlarge", -1)
    assert essentials(pod)["devices"] == {"aws.amazon.com/neuron": "16", "vpc.amazonaws.com/efa": "16"}
