"""The core node group's fit, for `make plan`'s closing summary: how much of the minSize nodes the system pods
ask for (infra/specs/system_capacity.py), beside the cost line those nodes make."""

from __future__ import annotations

import json
from pathlib import Path

from infra.config.models import StackConfig
from infra.specs.system_capacity import SystemLoad, controller_replicas


def core_fit_texts(config: StackConfig, tensorboard_proxy: bool = True) -> list[str]:
    """One text per core instance type: its minSize nodes, the controllers' replicas, and the fit.
    ``tensorboard_proxy``: system_fit's."""
    core = config.core_node_group
    texts = []
    for instance_type in core.instance_types:
        fit = SystemLoad.of(config, tensorboard_proxy).fit(instance_type, core.min_size)
        head = f"core nodes {instance_type} × {core.min_size}, controllers at {controller_replicas(core.min_size)}"
        texts.append(
            f"{head}: not sized (infra/facts/instances.py gives it no NodeSize)"
            if fit is None
            else f"{head}: system pods ask {fit.summary()}"
        )
    return texts


def deployed(project_dir: Path, stack: str) -> list[str]:
    """core_fit_texts for the cluster stack file of ``stack``."""
    from infra.config.load import raw_from_pulumi_config
    from infra.validate import parse_stack_config
    from offline.plan.runner import stack_config

    config = parse_stack_config(raw_from_pulumi_config(stack_config(project_dir, stack)))
    return core_fit_texts(config, tensorboard_proxy(project_dir / "workloads", stack, len(config.training_namespaces)))


def tensorboard_proxy(workloads_dir: Path, stack: str, namespaces: int) -> bool:
    """Whether the fit counts TensorBoard's password proxy (50m/64Mi), which runs only with a load balancer, a
    workload stack's setting. The cluster stack's own check cannot see it and counts it; the plan knows the one
    workload stack of this repository, so with one training namespace it counts the proxy only if that stack's
    TensorBoard has a load balancer."""
    from offline.plan.runner import stack_config

    if namespaces != 1 or not (workloads_dir / f"Pulumi.{stack}.yaml").exists():
        return True
    tensorboard = stack_config(workloads_dir, stack).get("trainium-workloads:tensorboard")
    return tensorboard is None or json.loads(tensorboard).get("loadBalancer") is not None
