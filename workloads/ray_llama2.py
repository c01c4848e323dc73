"""Llama-2-7B pretraining with Ray Train on KubeRay, gang scheduled by Volcano.

A RayCluster (`kuberay-trn1`: head on the core nodes, one worker per Trainium node) and the
seed's three RayJobs against it, submitted one after another: dataset generation,
neuron_parallel_compile, training.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Optional

import pulumi
import yaml

from infra import versions
from workloads import pods
from workloads.contract import NodeGroup
from workloads.kube import declare, declare_in_order
from workloads.settings import RayLlama2Settings

CLUSTER_NAME = "kuberay-trn1"
WORKER_GROUP = "workergroup"
CODE_DIR = "/llama2_pretrain"
SHARED_MOUNT = "/shared"
LOG_VOLUME = "ray-logs"
HEAD_PORTS = [
    {"containerPort": 6379, "name": "gcs-server"},
    {"containerPort": 8265, "name": "dashboard"},
    {"containerPort": 10001, "name": "client"},
]
JOB_NAMES = {
    "generate-data": "llama2-generate-pretraining-test-data",
    "precompile": "llama2-precompilation-job",
    "train": "llama2-pretraining-job",
}


@dataclass(frozen=True)
class RayLayout:
    namespace: str
    image: str
    group: NodeGroup
    claim: str
    service_account: str
    core_node_selector: Mapping[str, str]
    settings: RayLlama2Settings


def _container(name: str, layout: RayLayout, resources: dict[str, Any], mounts: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "name": name,
        "image": layout.image,
        # Let Ray drain its processes before the pod goes.
        "lifecycle": {"preStop": {"exec": {"command": ["/bin/sh", "-c", "ray stop"]}}},
        "resources": resources,
        "volumeMounts": [{"name": LOG_VOLUME, "mountPath": "/tmp/ray"}, *mounts],
    }


def ray_cluster(layout: RayLayout) -> dict[str, Any]:
    s = layout.settings
    head = _container(
        "ray-head",
        layout,
        {"requests": {"cpu": s.head_cpu, "memory": s.head_memory}, "limits": {"memory": s.head_memory}},
        [pods.claim_mount(SHARED_MOUNT)],
    )
    head["ports"] = HEAD_PORTS
    worker_resources = pods.accelerator_resources(layout.group)
    worker_resources["requests"].update(cpu=s.worker_cpu, memory=s.worker_memory)
    worker_resources["limits"].update(memory=s.worker_memory)
    worker = _container("ray-worker", layout, worker_resources, [pods.claim_mount(SHARED_MOUNT), pods.shm_mount()])
    volumes = [{"name": LOG_VOLUME, "emptyDir": {}}, pods.claim_volume(layout.claim)]
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {
            "name": CLUSTER_NAME,
            "namespace": layout.namespace,
            # KubeRay hands the cluster to Volcano as one PodGroup in this queue.
            "labels": {"ray.io/scheduler-name": "volcano", "volcano.sh/queue-name": s.queue},
        },
        "spec": {
            "rayVersion": versions.RAY_VERSION,
            "headGroupSpec": {
                "rayStartParams": {"dashboard-host": "0.0.0.0"},
                "template": {
                    "spec": {
                        "serviceAccountName": layout.service_account,
                        "nodeSelector": dict(layout.core_node_selector),
                        "containers": [head],
                        "volumes": volumes,
                    }
                },
            },
            "workerGroupSpecs": [
                {
                    "groupName": WORKER_GROUP,
                    "replicas": s.workers,
                    "minReplicas": s.workers,
                    "maxReplicas": s.workers,
                    "rayStartParams": {},
                    "template": {
                        "spec": {
                            "serviceAccountName": layout.service_account,
                            **pods.accelerator_placement(layout.group),
                            "containers": [worker],
                            "volumes": [*volumes, pods.shm_volume()],
                        }
                    },
                }
            ],
        },
    }


def entrypoint(step: str, layout: RayLayout) -> str:
    if step == "generate-data":
        return "python3 get_dataset.py"
    # The script reads the device count from the environment and starts 32 workers per node.
    devices = layout.settings.workers * layout.group.neuron_devices
    command = f"NEURON_NUM_DEVICES={devices} python3 ray_train_llama2.py --num_nodes {layout.settings.workers}"
    return command + (" --neuron_parallel_compile" if step == "precompile" else "")


def ray_job(step: str, layout: RayLayout, annotations: dict[str, str]) -> dict[str, Any]:
    s = layout.settings
    spec: dict[str, Any] = {
        "submissionMode": "K8sJobMode",
        "entrypoint": entrypoint(step, layout),
        "runtimeEnvYAML": yaml.safe_dump({"working_dir": CODE_DIR, "env_vars": {"PYTHONUNBUFFERED": "0"}}),
        "clusterSelector": {"ray.io/cluster": CLUSTER_NAME},
        "ttlSecondsAfterFinished": s.ttl_seconds_after_finished,
    }
    if step == "train":
        spec["shutdownAfterJobFinishes"] = True
        if s.train_deadline_seconds is not None:
            spec["activeDeadlineSeconds"] = s.train_deadline_seconds
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayJob",
        "metadata": {"name": JOB_NAMES[step], "namespace": layout.namespace, "annotations": annotations},
        "spec": spec,
    }


def job_sequence(layout: RayLayout) -> list[dict[str, Any]]:
    """The configured steps in order; all but the last make `pulumi up` wait for success."""
    steps = layout.settings.steps
    succeeded = pods.wait_for("jsonpath={.status.jobStatus}=SUCCEEDED", layout.settings.step_timeout_minutes)
    return [ray_job(step, layout, pods.skip_await() if i == len(steps) - 1 else succeeded) for i, step in enumerate(steps)]


@dataclass(frozen=True)
class RayLlama2Args:
    layout: RayLayout
    after: tuple[pulumi.Resource, ...] = ()


class RayLlama2(pulumi.ComponentResource):
    def __init__(self, name: str, args: RayLlama2Args, opts: Optional[pulumi.ResourceOptions] = None) -> None:
        super().__init__("trainium:workloads:RayLlama2", name, None, opts)
        # Workers become ready only once Volcano has placed the whole gang.
        self.cluster = declare(ray_cluster(args.layout), self, args.after)
        self.jobs = declare_in_order(job_sequence(args.layout), self, [self.cluster])
        self.register_outputs({})
