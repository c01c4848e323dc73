"""Whether the cluster stack can run what the workload stack asks for.

Every rule compares a workload setting with what the cluster stack exported, and every
problem names the key, its value and what the cluster offers, so a researcher can fix the
stack file without reading code. All problems are reported at once, before any Kubernetes
object is declared.
"""

from __future__ import annotations

from typing import Any, Optional

from workloads.contract import ClusterContract, NodeGroup
from workloads.load_balancer_rules import load_balancer_problems
from workloads.settings import RAY_STEPS, WorkloadsConfig, key_name

# The images each workload runs, by the cluster stack's repository names.
IMAGES = {
    "bert_pretraining": "bert-pretrain",
    "ray_llama2": "ray-llama2",
    "nemo_llama2": "nemo-megatron",
    "tensorboard": "cmd-shell",
    "data_staging": "cmd-shell",
}
# Software each workload needs in the cluster, by the cluster stack's `features` names.
REQUIRED_FEATURES = {
    "bert_pretraining": ("neuronDevicePlugin", "efaDevicePlugin", "fsxCsi", "volcano", "torchxEtcd"),
    "ray_llama2": ("neuronDevicePlugin", "efaDevicePlugin", "fsxCsi", "volcano", "kuberay"),
    "nemo_llama2": ("neuronDevicePlugin", "efaDevicePlugin", "fsxCsi", "mpiOperator"),
    "tensorboard": ("fsxCsi",),
    "data_staging": ("fsxCsi",),
}
# ray_train_llama2.py starts 32 Ray Train workers per node, one per NeuronCore of a trn1.
RAY_WORKERS_PER_NODE = 32
CAMEL = {
    "bert_pretraining": "bertPretraining",
    "ray_llama2": "rayLlama2",
    "nemo_llama2": "nemoLlama2",
    "tensorboard": "tensorboard",
    "data_staging": "dataStaging",
}


def workload_problems(config: WorkloadsConfig, cluster: ClusterContract) -> list[str]:
    problems = _namespace_problems(config, cluster)
    for name in IMAGES:
        settings = config.on(name)
        if settings is None:
            continue
        problems += _feature_problems(name, cluster)
        problems += _image_problems(name, cluster)
        if hasattr(settings, "node_group"):
            problems += _group_problems(name, settings, cluster)
    problems += _queue_problems(config, cluster)
    problems += _ray_problems(config, cluster)
    problems += _token_problems(config)
    problems += _tensorboard_problems(config)
    return problems


def _key(workload: str, *rest: Any) -> str:
    return key_name((CAMEL[workload], *rest))


def _namespace_problems(config: WorkloadsConfig, cluster: ClusterContract) -> list[str]:
    if not any(config.on(name) for name in IMAGES):
        return []
    key = key_name(("namespace",))
    if config.namespace not in cluster.namespaces:
        return [
            f"{key} = {config.namespace!r}: the cluster stack prepared no such training namespace; "
            f"it has: {', '.join(cluster.namespaces)} (add it to the cluster's trainingNamespaces)"
        ]
    if not cluster.storage_enabled or config.namespace not in cluster.claims:
        return [f"{key} = {config.namespace!r}: the cluster stack has no FSx claim there; turn on its storage"]
    return []


def _feature_problems(workload: str, cluster: ClusterContract) -> list[str]:
    missing = [f for f in REQUIRED_FEATURES[workload] if not cluster.feature(f)]
    if not missing:
        return []
    return [
        f"{_key(workload)}: needs {', '.join(missing)} in the cluster, which the cluster stack has off "
        f"(set features.{missing[0]}: true there, or switch this workload off)"
    ]


def _image_problems(workload: str, cluster: ClusterContract) -> list[str]:
    image = IMAGES[workload]
    if image in cluster.repositories:
        return []
    return [f"{_key(workload)}: the cluster stack exports no image repository {image!r}"]


def _group_problems(workload: str, settings: Any, cluster: ClusterContract) -> list[str]:
    group: Optional[NodeGroup] = cluster.node_groups.get(settings.node_group)
    key = _key(workload, "nodeGroup")
    if group is None:
        return [
            f"{key} = {settings.node_group!r}: the cluster stack has no such accelerator node group; "
            f"it has: {', '.join(cluster.node_groups) or 'none'}"
        ]
    problems = []
    if group.efa_interfaces == 0:
        problems.append(
            f"{key} = {settings.node_group!r}: {group.instance_type} nodes have no EFA interfaces, "
            "and this multi-node job needs them; pick a trn1.32xlarge, trn1n.32xlarge or trn2.48xlarge group"
        )
    count_key = "workers" if workload == "ray_llama2" else "nodes"
    count = getattr(settings, count_key)
    if count > group.max_size:
        problems.append(
            f"{_key(workload, count_key)} = {count}: more than node group {group.name!r} can hold "
            f"(maxSize {group.max_size}); lower it or raise the group's maxSize in the cluster stack"
        )
    return problems


def _queue_problems(config: WorkloadsConfig, cluster: ClusterContract) -> list[str]:
    problems = []
    for workload in ("bert_pretraining", "ray_llama2"):
        settings = config.on(workload)
        if settings and cluster.feature("volcano") and settings.queue not in cluster.volcano_queues:
            problems.append(
                f"{_key(workload, 'queue')} = {settings.queue!r}: no such Volcano queue in the cluster stack; "
                f"it has: {', '.join(cluster.volcano_queues) or 'none'}"
            )
    return problems


def _ray_problems(config: WorkloadsConfig, cluster: ClusterContract) -> list[str]:
    ray = config.on("ray_llama2")
    if ray is None:
        return []
    problems = []
    group = cluster.node_groups.get(ray.node_group)
    if group is not None and group.neuron_cores != RAY_WORKERS_PER_NODE:
        problems.append(
            f"{_key('ray_llama2', 'nodeGroup')} = {ray.node_group!r}: ray_train_llama2.py runs "
            f"{RAY_WORKERS_PER_NODE} workers per node, one per NeuronCore, but {group.instance_type} nodes "
            f"have {group.neuron_cores}; use a trn1.32xlarge or trn1n.32xlarge group"
        )
    order = [RAY_STEPS.index(step) for step in ray.steps]
    if not ray.steps or order != sorted(set(order)):
        problems.append(
            f"{_key('ray_llama2', 'steps')} = {ray.steps!r}: list each step once, in the order "
            f"{', '.join(RAY_STEPS)} (leave out the ones already done)"
        )
    return problems


def _token_problems(config: WorkloadsConfig) -> list[str]:
    needs = []
    if config.on("nemo_llama2"):
        needs.append("nemoLlama2")
    staging = config.on("data_staging")
    if staging and staging.redpajama:
        needs.append("dataStaging.redpajama")
    if not needs or config.hf_token:
        return []
    return [
        f"{key_name(('hfToken',))}: required by {' and '.join(needs)} (the Llama-2 tokenizer is gated on "
        "Hugging Face); set it with `pulumi config set --secret hfToken <token>`"
    ]


def _tensorboard_problems(config: WorkloadsConfig) -> list[str]:
    tensorboard = config.on("tensorboard")
    if tensorboard is None or tensorboard.load_balancer is None:
        return []
    return load_balancer_problems(tensorboard.load_balancer, lambda *rest: key_name(("tensorboard", "loadBalancer", *rest)))
