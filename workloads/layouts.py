"""Each enabled workload's layout, from the settings and the cluster's outputs: pure data.

The program declares its objects from these (``__main__.py``), and the whole-stack scheduling
check renders the same objects from them before anything is declared (``schedule.py``), so both
read one description of every job.
"""

from __future__ import annotations

from typing import Any

from infra.contract import ClusterContract
from workloads import bert, cluster_check, data_staging, nxd_llama, ray_llama2
from workloads.bert import BertPretrainingArgs
from workloads.cluster_check import CheckLayout
from workloads.data_staging import StagingLayout
from workloads.image_prepull import PrepullLayout
from workloads.nxd_llama import NxdLayout
from workloads.ray_llama2 import RayLayout
from workloads.settings import WorkloadsConfig


def image(cluster: ClusterContract, repository: str, settings: Any) -> str:
    return f"{cluster.repositories[repository]}:{settings.image_tag}"


def namespace_id(config: WorkloadsConfig, cluster: ClusterContract) -> int:
    """The id the namespace's pods that mount its claim run as (the cluster's namespaceIds; the cluster
    stack gives every training namespace one, and checks.py refuses a namespace it did not prepare)."""
    return cluster.namespace_ids[config.namespace]


def _common(config: WorkloadsConfig, cluster: ClusterContract) -> dict[str, Any]:
    return dict(
        namespace=config.namespace,
        claim=cluster.claims.get(config.namespace, ""),
        support_placement=cluster.support_placement,
    )


def _on_trainium(config: WorkloadsConfig, cluster: ClusterContract, repository: str, settings: Any) -> dict[str, Any]:
    """The TrainiumLayout fields (workloads/pods.py) and the settings of a workload on ``settings.node_group``."""
    return dict(
        **_common(config, cluster),
        image=image(cluster, repository, settings),
        group=cluster.node_groups[settings.node_group],
        service_account=cluster.service_account,
        settings=settings,
    )


def _gang_queue(cluster: ClusterContract, settings: Any) -> str | None:
    """The Volcano queue of a workload's MPIJobs when the cluster gang-schedules them (Volcano on)."""
    return settings.queue if cluster.feature("volcano") else None


def staging(config: WorkloadsConfig, cluster: ClusterContract) -> StagingLayout | None:
    if (s := config.on("data_staging")) is None:
        return None
    return StagingLayout(
        **_common(config, cluster), namespace_id=namespace_id(config, cluster),
        core_node_selector=cluster.core_node_selector, service_account=cluster.service_account,
        shell_image=image(cluster, "cmd-shell", s), nxd_image=image(cluster, "nxd-llama", s), settings=s,
    )  # fmt: skip


def bert_args(
    config: WorkloadsConfig, cluster: ClusterContract, after: tuple[Any, ...] = ()
) -> BertPretrainingArgs | None:
    if (s := config.on("bert_pretraining")) is None:
        return None
    return BertPretrainingArgs(
        settings=s, namespace=config.namespace, repository=cluster.repositories["bert-pretrain"],
        group=cluster.node_groups[s.node_group], claim=cluster.claims.get(config.namespace, ""),
        namespace_id=namespace_id(config, cluster), service_account=cluster.service_account,
        core_node_selector=cluster.core_node_selector, after=after,
    )  # fmt: skip


def ray(config: WorkloadsConfig, cluster: ClusterContract) -> RayLayout | None:
    if (s := config.on("ray_llama2")) is None:
        return None
    return RayLayout(
        **_on_trainium(config, cluster, "ray-llama2", s),
        core_node_selector=cluster.core_node_selector,
        namespace_id=namespace_id(config, cluster),
    )


def nxd(config: WorkloadsConfig, cluster: ClusterContract) -> NxdLayout | None:
    if (s := config.on("nxd_llama")) is None:
        return None
    return NxdLayout(
        **_on_trainium(config, cluster, "nxd-llama", s),
        core_node_selector=cluster.core_node_selector,
        namespace_id=cluster.namespace_ids[config.namespace],
        gang_queue=_gang_queue(cluster, s),
    )


def check(config: WorkloadsConfig, cluster: ClusterContract) -> CheckLayout | None:
    if (s := config.on("cluster_check")) is None:
        return None
    return CheckLayout(
        **_on_trainium(config, cluster, "nxd-llama", s),
        namespace_id=cluster.namespace_ids[config.namespace],
        gang_queue=_gang_queue(cluster, s),
        verdict_image=image(cluster, "cmd-shell", s),
        file_system=cluster.storage.kind,
    )


def prepull(config: WorkloadsConfig, cluster: ClusterContract) -> PrepullLayout:
    """The images each Trainium group runs for this stack's jobs (the cluster check runs nxd-llama's), for
    the pre-pull during a new node's burn-in (workloads/image_prepull.py)."""
    on_groups: dict[str, set[str]] = {}
    if (args := bert_args(config, cluster)) is not None:
        on_groups.setdefault(args.group.name, set()).add(f"{args.repository}:{args.settings.image_tag}")
    for layout in (ray(config, cluster), nxd(config, cluster), check(config, cluster)):
        if layout is not None:
            on_groups.setdefault(layout.group.name, set()).add(layout.image)
    return PrepullLayout(
        namespace=config.namespace,
        groups={name: (cluster.node_groups[name], tuple(sorted(images))) for name, images in on_groups.items()},
    )


def job_chains(config: WorkloadsConfig, cluster: ClusterContract) -> dict[str, list[list[dict[str, Any]]]]:
    """Per workload (its stack-file key), the chains of jobs it submits: each chain in the order
    `pulumi up` creates it, chains side by side. Only what runs on the job-support or Trainium
    groups: the shell and TensorBoard stay on the system nodes."""
    chains: dict[str, list[list[dict[str, Any]]]] = {}
    if (staging_layout := staging(config, cluster)) is not None:
        s = staging_layout.settings
        # Independent Jobs: each its own chain.
        chains["dataStaging"] = ([[data_staging.wikicorpus_job(staging_layout)]] if s.wikicorpus else []) + (
            [[data_staging.redpajama_job(staging_layout)]] if s.redpajama else []
        )
    if (args := bert_args(config, cluster)) is not None:
        chains["bertPretraining"] = [bert.job_sequence(args)]
    if (ray_layout := ray(config, cluster)) is not None:
        chains["rayLlama2"] = [ray_llama2.job_sequence(ray_layout)]
    if (nxd_layout := nxd(config, cluster)) is not None:
        chains["nxdLlama"] = [nxd_llama.job_sequence(nxd_layout)]
    if (check_layout := check(config, cluster)) is not None:
        chains["clusterCheck"] = [cluster_check.check_sequence(check_layout)]
    return chains
