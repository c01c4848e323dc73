"""Whether the cluster stack can run what the workload stack asks for.

Every rule compares a workload setting with what the cluster stack exported, and every
problem names the key, its value and what the cluster offers, so a researcher can fix the
stack file without reading code. All problems are reported at once, before any Kubernetes
object is declared.
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from infra.contract import ClusterContract, NodeGroup
from infra.facts.instances import NEURON_INSTANCE_TYPES
from infra.specs.burn_in_objects import BURN_IN_MINUTES
from workloads import (
    bert_launch,
    capacity_windows,
    cluster_check,
    data_staging,
    deadlines,
    layouts,
    nxd_llama,
    pods,
    quantities,
    resumable,
)
from workloads.load_balancer_rules import cluster_region, load_balancer_problems
from workloads.settings import RAY_STEPS, WorkloadsConfig, key_name

# The images each workload runs, by the cluster stack's repository names.
IMAGES = {
    "bert_pretraining": "bert-pretrain",
    "ray_llama2": "ray-llama2",
    "nxd_llama": "nxd-llama",
    "tensorboard": "cmd-shell",
    "data_staging": "cmd-shell",
    # The checks and the all-reduce run nxd-llama; the verdict the small cmd-shell image.
    "cluster_check": ("nxd-llama", "cmd-shell"),
}
# Software each workload needs in the cluster, by the cluster stack's `features` names.
REQUIRED_FEATURES = {
    "bert_pretraining": ("neuronDevicePlugin", "efaDevicePlugin", "fsxCsi", "volcano"),
    "ray_llama2": ("neuronDevicePlugin", "efaDevicePlugin", "fsxCsi", "volcano", "kuberay"),
    "nxd_llama": ("neuronDevicePlugin", "efaDevicePlugin", "fsxCsi", "mpiOperator"),
    "tensorboard": ("fsxCsi",),
    "data_staging": ("fsxCsi",),
    "cluster_check": ("neuronDevicePlugin", "efaDevicePlugin", "fsxCsi", "mpiOperator"),
}
# ray_train_llama2.py starts 32 Ray Train workers per node, one per NeuronCore of a trn1.
RAY_WORKERS_PER_NODE = 32
# neuronx-distributed-training (NXDT_EXAMPLES_COMMIT) examples/conf/megatron_llama_7B_config.yaml:
# trainer.devices 32, which train.sh starts as processes per node (a trn1's NeuronCores);
# global_batch_size 1024, micro_batch_size 1, tensor parallel 8, pipeline parallel 1, so the
# data-parallel size is nodes x 32 / 8 and the global batch must divide by it x the micro batch.
NXD_PROCESSES_PER_NODE = 32
NXD_GLOBAL_BATCH = 1024
NXD_MODEL_PARALLEL = 8 * 1
NXD_MICRO_BATCH = 1
# Where the TensorBoard pod mounts the FSx claim (tensorboard_viewer.py).
TENSORBOARD_MOUNT = "/shared"
# KubeRay v1.7.0's default submitter pod (ray-operator/controllers/ray/common/job.go,
# GetDefaultSubmitterContainer), which its Volcano plugin adds to the RayJob's PodGroup minResources.
RAY_SUBMITTER_REQUESTS = {"cpu": "500m", "memory": "200Mi"}
CAMEL = {
    "bert_pretraining": "bertPretraining",
    "ray_llama2": "rayLlama2",
    "nxd_llama": "nxdLlama",
    "tensorboard": "tensorboard",
    "data_staging": "dataStaging",
    "cluster_check": "clusterCheck",
}


def _types_with_efa() -> list[str]:
    return sorted(name for name, facts in NEURON_INSTANCE_TYPES.items() if facts.max_efa_interfaces)


def _types_with_cores(cores: int) -> list[str]:
    return sorted(name for name, facts in NEURON_INSTANCE_TYPES.items() if facts.neuron_cores == cores)


def step_admissions(
    config: WorkloadsConfig, cluster: ClusterContract, previous: Mapping[str, Any] | None, now: datetime
) -> tuple[dict[str, dict[str, str]], dict[str, datetime]]:
    """What this run records in ``stepAdmissions`` and which jobs it leaves as an earlier
    `up` admitted them (capacity_windows.admissions), from ``previous``, that output of the stack's
    last update. Only the jobs of workloads with a step on a Capacity Block group: nothing else is
    checked against a window."""
    on_blocks = {
        s.workload for s in deadlines.trainium_steps(config) if cluster.node_groups[s.node_group].capacity_block
    }
    chains = [
        chain for name, chains in layouts.job_chains(config, cluster).items() if name in on_blocks for chain in chains
    ]
    return capacity_windows.admissions(capacity_windows.chain_digests(chains), previous, now)


def workload_problems(
    config: WorkloadsConfig,
    cluster: ClusterContract,
    now: datetime | None = None,
    previous: Mapping[str, Any] | None = None,
) -> list[str]:
    """``now``: when the runs start (a Capacity Block's remaining window counts from it); the clock's
    time unless given. ``previous``: ``stepAdmissions`` of the stack's last update; the
    window check counts only the jobs this update starts (``step_admissions``)."""
    problems = _namespace_problems(config, cluster)
    for name in IMAGES:
        settings = config.on(name)
        if settings is None:
            continue
        problems += _feature_problems(name, cluster, settings)
        problems += _image_problems(name, cluster)
        if hasattr(settings, "node_group"):
            problems += _group_problems(name, settings, cluster)
    problems += _queue_problems(config, cluster)
    problems += _ray_problems(config, cluster)
    problems += _nxd_problems(config, cluster)
    problems += _bert_problems(config)
    problems += _path_problems(config)
    problems += _token_problems(config)
    problems += _tensorboard_problems(config, cluster)
    problems += _cluster_check_problems(config, cluster)
    problems += _deadline_problems(config)
    problems += _hang_problems(config)
    problems += _staging_timeout_problems(config)
    problems += _async_keep_problems(config)
    if problems:
        # Which jobs this update starts needs the jobs rendered, which only a sound configuration can be:
        # the windows are checked once the rest is.
        return problems
    now = now or datetime.now(UTC)
    _, kept = step_admissions(config, cluster, previous, now)
    return capacity_windows.window_problems(
        deadlines.trainium_steps(config),
        {n: g.capacity_block for n, g in cluster.node_groups.items()},
        now,
        lambda workload: key_name((workload,)),
        {n: BURN_IN_MINUTES * 60 for n, g in cluster.node_groups.items() if g.burn_in},
        kept,
    )


def config_problems(config: WorkloadsConfig) -> list[str]:
    """The rules of workload_problems that need no cluster: what a run can report beside type errors,
    before the cluster's outputs are read (workloads/settings.py parse_workloads_config)."""
    return (
        _bert_problems(config)
        + _path_problems(config)
        + _token_problems(config)
        + _deadline_problems(config)
        + _hang_problems(config)
        + _staging_timeout_problems(config)
        + _async_keep_problems(config)
    )


def _async_keep_problems(config: WorkloadsConfig) -> list[str]:
    """With asynchronous saves, one kept checkpoint leaves none complete for most of every interval. Lightning
    saves the new checkpoint, then removes the one past save_top_k (lightning 2.5.0, which the DLC pins in NxD
    Training's common/nxdt_requirements.txt: src/lightning/pytorch/callbacks/model_checkpoint.py l.757-760);
    NeMo defers that removal only for its own async_save, which NxD Training leaves off (NeMo v2.1.0
    nemo/utils/callbacks/nemo_model_checkpoint.py _remove_checkpoint, l.587-609); NxD Training's
    remove_checkpoint submits it to NxD (neuronx-distributed-training 9169aa0 lightning_modules/
    nlp_overrides.py l.632-636), whose rank 0 deletes the old save's ``done`` at once (neuronx-distributed
    fbac349 trainer/checkpoint.py submit_remove, l.261), while the new save gets its ``done`` only when the
    next one begins. A failure in between finds no complete save, and the run starts again from step 0."""
    nxd = config.on("nxd_llama")
    if nxd is None or not nxd.async_checkpoints or nxd.checkpoints_to_keep >= 2:
        return []
    return [
        f"{key_name(('nxdLlama', 'checkpointsToKeep'))} = {nxd.checkpoints_to_keep}: with "
        f"{key_name(('nxdLlama', 'asyncCheckpoints'))} true, NxD deletes the kept save's done marker as soon as the "
        "next save begins, and the new save is marked complete only when the one after it begins, so a failure "
        "in between resumes from step 0; allowed: at least 2, or asyncCheckpoints: false"
    ]


# neuronx-distributed-training (NXDT_EXAMPLES_COMMIT) examples/conf/megatron_llama_7B_config.yaml:
# trainer.max_steps 20000, what a training run without trainIters runs.
NXD_DEFAULT_TRAIN_ITERS = 20000


def workload_warnings(config: WorkloadsConfig) -> list[str]:
    """What `pulumi preview` and `up` print beside an accepted configuration: an NxD Training run
    without ``trainIters`` runs the config's 20000 steps, and one its deadline ends is not
    retried (the launcher Job's activeDeadlineSeconds fails the whole MPIJob). Only where the stack file
    sets the deadline: one left unset is derived from those steps. ``config``: the stack file's settings,
    before goodput.resolved sets what it leaves unset."""
    warnings = []
    nxd = config.on("nxd_llama")
    if nxd is not None and nxd.train and nxd.train_iters is None and "train_deadline_minutes" in nxd.model_fields_set:
        seconds = nxd.train_deadline_minutes * 60 / NXD_DEFAULT_TRAIN_ITERS
        warnings.append(
            f"nxdLlama: trainIters is unset, so llama2-train runs the config's {NXD_DEFAULT_TRAIN_ITERS} steps, "
            f"and trainDeadlineMinutes {nxd.train_deadline_minutes} allows {seconds:.1f} s per step, scheduling, "
            "start-up and every restart's reload included. A run its deadline ends is Failed (DeadlineExceeded) and "
            "not retried; `pulumi up --replace` on the MPIJob resumes it from its newest checkpoint. Set trainIters "
            "for a shorter run; an unset trainDeadlineMinutes is derived from the steps (workloads/goodput.py)"
        )
    return warnings


def _hang_problems(config: WorkloadsConfig) -> list[str]:
    """A hang must be caught before the training run's deadline: a run the deadline ends is not
    restarted (BERT's exit code 124 -> TerminateJob; a RayJob that failed DeadlineExceeded is not
    retried, kuberay v1.7.0 checkBackoffLimitAndUpdateStatusIfNeeded; the MPIJob's deadline ends
    the whole job), so a hang limit at or past it would lose the restart it is there for."""
    runs = []
    if bert := config.on("bert_pretraining"):
        runs.append(("bert_pretraining", bert, bert.train_deadline_minutes, "trainDeadlineMinutes"))
    if (ray := config.on("ray_llama2")) and "train" in ray.steps:
        runs.append(("ray_llama2", ray, ray.train_deadline_seconds // 60, "trainDeadlineSeconds"))
    if (nxd := config.on("nxd_llama")) and nxd.train:
        runs.append(("nxd_llama", nxd, nxd.train_deadline_minutes, "trainDeadlineMinutes"))
    problems = []
    for workload, s, deadline, key in runs:
        # The first-step limit likewise: a hang before the first step (rendezvous, graph or checkpoint
        # load after a restart) the deadline ends first is not retried either.
        for limit, minutes, since in (
            ("hangTimeoutMinutes", s.hang_timeout_minutes, "the last step"),
            ("firstStepTimeoutMinutes", s.first_step_timeout_minutes, "an attempt's start"),
        ):
            detected = resumable.detection_minutes(minutes)
            if detected >= deadline:
                problems.append(
                    f"{_key(workload, limit)} = {minutes}: a hang is ended {detected} minutes after {since} (the "
                    f"liveness probe's limit and failed reads), not before the training run's deadline ({key}, "
                    f"{deadline} minutes), which ends it without a restart; lower it or raise the deadline"
                )
    return problems


def _staging_timeout_problems(config: WorkloadsConfig) -> list[str]:
    """`pulumi up` waits timeoutMinutes for each staging Job and fails the update when it passes: the
    RedPajama Job's preprocessing alone takes data_staging.redpajama_minutes() (sized from the seed's
    measurement), so a shorter wait fails every update while the Job is still working."""
    staging = config.on("data_staging")
    if staging is None or not staging.redpajama:
        return []
    needed = data_staging.redpajama_minutes()
    if staging.timeout_minutes >= needed:
        return []
    return [
        f"{_key('data_staging', 'timeoutMinutes')} = {staging.timeout_minutes}: shorter than the RedPajama staging "
        f"Job it waits for (about {needed} minutes: download, tokenizing with "
        f"{data_staging.PREPROCESS_WORKERS} workers, concatenation), so `pulumi up` would fail while the Job still "
        f"works; allowed: at least {needed} (the default is 240)"
    ]


def _deadline_problems(config: WorkloadsConfig) -> list[str]:
    """KubeRay counts both a RayJob's deadlines from its start (kuberay v1.7.0
    rayjob_controller.go): a pending timeout at or past the step's deadline would never act. A
    finished step's cluster lives ttlSecondsAfterFinished on beside the next step's gang, which
    waits for its nodes that long: it must stay well inside the pending timeout."""
    ray = config.on("ray_llama2")
    if ray is None:
        return []
    problems = []
    pending = ray.pending_timeout_minutes * 60
    for step in ray.steps:
        if step == "generate-data":
            continue
        deadline = deadlines.ray_step_deadline_seconds(ray, step)
        key = "trainDeadlineSeconds" if step == "train" else "stepDeadlineMinutes"
        if pending >= deadline:
            problems.append(
                f"{_key('ray_llama2', 'pendingTimeoutMinutes')} = {ray.pending_timeout_minutes}: not shorter than the "
                f"{step} step's deadline ({key}, {deadline} s); lower it or raise the deadline"
            )
    if ray.ttl_seconds_after_finished * 2 > pending:
        problems.append(
            f"{_key('ray_llama2', 'ttlSecondsAfterFinished')} = {ray.ttl_seconds_after_finished}: a finished step's "
            f"cluster keeps its Trainium nodes that long while the next step's gang waits for them; keep it under half "
            f"of pendingTimeoutMinutes ({pending} s)"
        )
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
        return [
            f"{key} = {config.namespace!r}: the cluster stack has no FSx claim there, which every workload stack "
            "mounts; turn on its storage (trainium-eks:features.fsxCsi: true)"
        ]
    return []


def _feature_problems(workload: str, cluster: ClusterContract, settings: Any = None) -> list[str]:
    needed = REQUIRED_FEATURES[workload]
    if workload == "cluster_check" and settings is not None and settings.nodes == 1:
        needed = tuple(f for f in needed if f != "mpiOperator")  # one node: no all-reduce MPIJob
    missing = [f for f in needed if not cluster.feature(f)]
    if not missing:
        return []
    return [
        f"{_key(workload)}: needs {', '.join(missing)} in the cluster, which the cluster stack has off "
        f"(set features.{missing[0]}: true there, or switch this workload off)"
    ]


def _image_problems(workload: str, cluster: ClusterContract) -> list[str]:
    wanted = IMAGES[workload]
    images = (wanted,) if isinstance(wanted, str) else wanted
    return [
        f"{_key(workload)}: the cluster stack exports no image repository {image!r}"
        for image in images
        if image not in cluster.repositories
    ]


def _group_problems(workload: str, settings: Any, cluster: ClusterContract) -> list[str]:
    group: NodeGroup | None = cluster.node_groups.get(settings.node_group)
    key = _key(workload, "nodeGroup")
    if group is None:
        return [
            f"{key} = {settings.node_group!r}: the cluster stack has no such accelerator node group; "
            f"it has: {', '.join(cluster.node_groups) or 'none'}"
        ]
    problems = []
    if group.resource_claim_template:
        # No device plugin serves such a group's nodes (docs/dra.md): pods that request the extended
        # resources would wait Pending for ever.
        problems.append(
            f"{key} = {settings.node_group!r}: the cluster allocates that group's Neuron devices by DRA claims (its "
            f"ResourceClaimTemplate {group.resource_claim_template!r}), and this stack's pods request "
            "aws.amazon.com/neuron, which no node of it offers; allowed: a group with deviceAllocation device-plugin"
        )
    # A pod selects its group by the group's node selector (instance type and labels: infra/contract.py
    # NodeGroup.node_selector); another group whose nodes carry all of those labels (the same, or
    # more) takes its pods too, and the whole-schedule check (schedule.placement) could not tell
    # which group holds which gang.
    twins = sorted(
        g.name
        for g in cluster.node_groups.values()
        if g.name != group.name and group.node_selector.items() <= g.node_selector.items()
    )
    if twins:
        problems.append(
            f"{key} = {settings.node_group!r}: node group(s) {', '.join(map(repr, twins))} have the same instance type "
            f"({group.instance_type}) and every label {group.name!r} has, so this workload's pods could land on either "
            "and its nodes cannot be counted; give each a distinguishing label (one key, a value per group: "
            "`labels` in the cluster stack)"
        )
    # The acceptance test on one node checks that node alone; from two on it runs the all-reduce.
    single_node_check = workload == "cluster_check" and settings.nodes == 1
    if group.efa_interfaces == 0 and not single_node_check:
        problems.append(
            f"{key} = {settings.node_group!r}: {group.instance_type} nodes have no EFA interfaces, "
            f"and this multi-node job needs them; pick a group of a type with EFA: {', '.join(_types_with_efa())}"
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
    for workload in ("bert_pretraining", "ray_llama2", "nxd_llama", "cluster_check"):
        settings = config.on(workload)
        if settings and cluster.feature("volcano") and settings.queue not in cluster.volcano_queues:
            problems.append(
                f"{_key(workload, 'queue')} = {settings.queue!r}: no such Volcano queue in the cluster stack; "
                f"it has: {', '.join(cluster.volcano_queues) or 'none'}"
            )
        elif settings and cluster.feature("volcano"):
            problems += _capacity_problems(workload, settings, cluster)
    return problems


def _gang_requests(workload: str, settings: Any) -> list[dict[str, str]]:
    """The cpu and memory requests of every pod of the largest gang the workload submits."""
    if workload == "ray_llama2":
        head = {"cpu": settings.head_cpu, "memory": settings.head_memory}
        worker = {"cpu": settings.worker_cpu, "memory": settings.worker_memory}
        return [head, RAY_SUBMITTER_REQUESTS] + [worker] * settings.workers
    if workload == "nxd_llama":
        return [nxd_llama.LAUNCHER_REQUESTS] + [pods.TRAINING_REQUESTS] * settings.nodes
    if workload == "cluster_check":
        return [nxd_llama.LAUNCHER_REQUESTS] + [pods.CHECK_REQUESTS] * settings.nodes
    return [pods.TRAINING_REQUESTS] * settings.nodes  # BERT: one training pod per node


def _capacity_problems(workload: str, settings: Any, cluster: ClusterContract) -> list[str]:
    """Volcano's proportion plugin (pkg/scheduler/plugins/proportion, v1.15.1) never allocates
    beyond a queue's capability, so a gang whose minResources exceed it waits forever."""
    capability = cluster.volcano_queues.get(settings.queue, {})
    requests = _gang_requests(workload, settings)
    if any(quantities.parse(v) is None for r in requests for v in r.values()):
        return []  # reported by _quantity_problems
    over = quantities.exceeded(quantities.total(requests), capability)
    if not over:
        return []
    count = "workers" if workload == "ray_llama2" else "nodes"
    return [
        f"{_key(workload, count)} = {getattr(settings, count)}: the job's pods together ask for more than "
        f"Volcano queue {settings.queue!r} allows ({'; '.join(over)}); Volcano would hold it forever. "
        "Lower the size or the per-pod requests, or raise the queue's capability in the cluster stack"
    ]


def _cores_per_node_problems(
    workload: str, node_group: str, cluster: ClusterContract, needed: int, why: str
) -> list[str]:
    """Code that starts one process per NeuronCore, hard-wired for ``needed`` cores per node."""
    group = cluster.node_groups.get(node_group)
    if group is None or group.neuron_cores == needed:
        return []
    return [
        f"{_key(workload, 'nodeGroup')} = {node_group!r}: {why.format(n=needed)}, one per NeuronCore, but "
        f"{group.instance_type} nodes have {group.neuron_cores}; use a group of "
        f"{' or '.join(_types_with_cores(needed)) or f'a type with {needed} NeuronCores'}"
    ]


def _ray_problems(config: WorkloadsConfig, cluster: ClusterContract) -> list[str]:
    ray = config.on("ray_llama2")
    if ray is None:
        return []
    problems = _cores_per_node_problems(
        "ray_llama2", ray.node_group, cluster, RAY_WORKERS_PER_NODE, "ray_train_llama2.py runs {n} workers per node"
    )
    problems += _quantity_problems("ray_llama2", ray, ("head_cpu", "head_memory", "worker_cpu", "worker_memory"))
    order = [RAY_STEPS.index(step) for step in ray.steps]
    if not ray.steps or order != sorted(set(order)):
        problems.append(
            f"{_key('ray_llama2', 'steps')} = {ray.steps!r}: list each step once, in the order "
            f"{', '.join(RAY_STEPS)} (leave out the ones already done)"
        )
    return problems


def _token_problems(config: WorkloadsConfig) -> list[str]:
    # Only the download of the gated tokenizer needs it; NxD Training reads the staged copy on FSx.
    needs = []
    staging = config.on("data_staging")
    if staging and staging.redpajama:
        needs.append("dataStaging.redpajama")
    if not needs or config.hf_token:
        return []
    return [
        f"{key_name(('hfToken',))}: required by {' and '.join(needs)} (the Llama-2 tokenizer is gated on "
        "Hugging Face); set it with `pulumi config set --secret hfToken <token>`"
    ]


def _tensorboard_problems(config: WorkloadsConfig, cluster: ClusterContract) -> list[str]:
    tensorboard = config.on("tensorboard")
    if tensorboard is None or tensorboard.load_balancer is None:
        return []
    return load_balancer_problems(
        tensorboard.load_balancer,
        lambda *rest: key_name(("tensorboard", "loadBalancer", *rest)),
        cluster_region(list(cluster.ecr_repositories.values())),
    )


def _quantity_problems(workload: str, settings: Any, fields: tuple[str, ...]) -> list[str]:
    problems = []
    for field in fields:
        value = getattr(settings, field)
        if quantities.parse(value) is None:
            camel = "".join(w.capitalize() if i else w for i, w in enumerate(field.split("_")))
            problems.append(f"{_key(workload, camel)} = {value!r}: not {quantities.ALLOWED}")
    return problems


def _nxd_problems(config: WorkloadsConfig, cluster: ClusterContract) -> list[str]:
    nxd = config.on("nxd_llama")
    if nxd is None:
        return []
    problems = _cores_per_node_problems(
        "nxd_llama",
        nxd.node_group,
        cluster,
        NXD_PROCESSES_PER_NODE,
        "NxD Training's megatron_llama_7B_config.yaml starts {n} processes per node",
    )
    if not nxd.compile and not nxd.train:
        problems.append(
            f"{_key('nxd_llama', 'compile')} = false and train = false: the workload is on but runs nothing; "
            "set enabled: false instead"
        )
    data_parallel = nxd.nodes * NXD_PROCESSES_PER_NODE // NXD_MODEL_PARALLEL
    if NXD_GLOBAL_BATCH % (data_parallel * NXD_MICRO_BATCH):
        fits = [n for n in range(1, 65) if NXD_GLOBAL_BATCH % (n * NXD_PROCESSES_PER_NODE // NXD_MODEL_PARALLEL) == 0]
        problems.append(
            f"{_key('nxd_llama', 'nodes')} = {nxd.nodes}: the config's global batch of {NXD_GLOBAL_BATCH} "
            f"must divide evenly over {data_parallel} data-parallel ranks (nodes x 32 / tensor-parallel 8); "
            f"use {', '.join(map(str, fits))} nodes"
        )
    return problems


def _bert_problems(config: WorkloadsConfig) -> list[str]:
    bert = config.on("bert_pretraining")
    if bert is None or bert.bf16:
        return []
    fp32_batch, fp32_accum = bert_launch.FP32_BATCH
    if bert.batch_size is not None and bert.batch_size > fp32_batch:
        return [
            f"{_key('bert_pretraining', 'batchSize')} = {bert.batch_size}: with bf16: false the pinned script "
            f"trains in full fp32, where its run script uses batchSize {fp32_batch} with gradAccumSteps "
            f"{fp32_accum} (the bf16 sizes are 16 x 32); use at most {fp32_batch}, or leave both unset"
        ]
    return []


def _under(path: str, mount: str) -> bool:
    return posixpath.isabs(path) and (posixpath.normpath(path) + "/").startswith(mount.rstrip("/") + "/")


def _path_problems(config: WorkloadsConfig) -> list[str]:
    """Paths a job reads or writes must be on the FSx volume where that job's pods mount it;
    anywhere else they land in the container's ephemeral disk, or are not found."""
    wanted: list[tuple[str, str, str, str]] = []
    if bert := config.on("bert_pretraining"):
        wanted += [
            ("bert_pretraining", f, getattr(bert, f), bert_launch.DATA_MOUNT) for f in ("data_dir", "output_dir")
        ]
    if nxd := config.on("nxd_llama"):
        wanted += [
            ("nxd_llama", f, getattr(nxd, f), nxd_llama.SHARED_MOUNT) for f in ("tokenizer_path", "dataset_path")
        ]
    if board := config.on("tensorboard"):
        wanted += [("tensorboard", "log_dirs", d, TENSORBOARD_MOUNT) for d in board.log_dirs]
    problems = []
    for workload, field, path, mount in wanted:
        if not _under(path, mount):
            camel = "".join(w.capitalize() if i else w for i, w in enumerate(field.split("_")))
            problems.append(
                f"{_key(workload, camel)} = {path!r}: not on the FSx volume, which this workload's pods "
                f"mount at {mount}; use an absolute path under {mount}/"
            )
    return problems


def _cluster_check_problems(config: WorkloadsConfig, cluster: ClusterContract) -> list[str]:
    check = config.on("cluster_check")
    group = cluster.node_groups.get(check.node_group) if check else None
    if check is None or group is None or check.nodes < 2:
        return []
    if cluster_check.floor_for(group, check) is None:
        return [
            f"{_key('cluster_check', 'busBandwidthFloorGBps')}: required for {group.instance_type} nodes (group "
            f"{group.name!r}), which have no default all-reduce floor (defaults exist for "
            f"{', '.join(cluster_check.DEFAULT_FLOORS)}); set the lowest bus bandwidth you accept, in GB/s"
        ]
    return []
