"""BERT-large phase-1 pretraining: a precompile Volcano Job, then the training Volcano Job.

Each Job is what TorchX's Kubernetes scheduler submits for the seed's ``trn1_dist_ddp``
component (see ``torchx_trn1.py``): one task per node, gang scheduled in a Volcano queue,
each pod owning all Neuron devices and EFA interfaces of its node, torchrun meeting its
peers at the c10d rendezvous store rank 0's torchrun hosts (bert_launch.torchrun).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pulumi

from infra.contract import NodeGroup
from workloads import bert_launch, deadlines, gang_watchdog, pods, resumable, step_gate
from workloads.kube import JobChain
from workloads.settings import BertPretrainingSettings

WORKLOAD = "bert-pretraining"
# The run's command runs under coreutils `timeout`, which exits 124 when the deadline passed.
DEADLINE_EXIT_CODE = 124


def task_policies() -> list[dict[str, Any]]:
    """Volcano restarts the whole gang when one pod fails or is evicted (TorchX's APPLICATION
    policy), except when the run's deadline stopped it.

    volcano v1.15.1 pkg/controllers/job/job_controller_util.go applyPolicies walks a task's
    policies in order and takes the first whose event or exit code matches (a failed pod's request
    carries its first container's exit code, job_controller_handler.go updatePod), so the
    exit-code policy comes before PodFailed.

    No PodPending policy: in v1.15.1 a restarted job controller re-lists every pod as
    PodPendingEvent whatever its phase (job_controller_handler.go addPod l.142-200), which arms
    the policy's delayed TerminateJob on the pods of a healthy running job, and nothing cancels
    it (job_controller.go CleanPodDelayActionsIfNeed l.415-452 needs a later non-Pending event of
    that pod). The pending bound is the gang watchdog's instead (gang_watchdog.py), from the
    annotation ``volcano_job`` puts on the Job.
    """
    return [
        {"exitCode": DEADLINE_EXIT_CODE, "action": "TerminateJob"},
        {"event": "PodEvicted", "action": "RestartJob"},
        {"event": "PodFailed", "action": "RestartJob"},
    ]


# The deadline wrapper, shared with the TorchX component (bert_launch).
with_deadline = bert_launch.with_deadline


@dataclass(frozen=True)
class BertJob:
    name: str
    namespace: str
    image: str
    group: NodeGroup
    queue: str
    claim: str
    # The namespace's id, which its pods run as (pods.namespace_pod).
    namespace_id: int
    service_account: str
    run: bert_launch.BertRun
    deadline_minutes: int
    pending_timeout_minutes: int
    max_retry: int = 3
    # The training run's hang detection (resumable.liveness_probe); the precompile has none.
    liveness_probe: dict[str, Any] | None = None


def volcano_job(job: BertJob, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    """The batch.volcano.sh/v1alpha1 Job: ``nnodes`` tasks of one pod each."""
    tasks = [_task(job, replica) for replica in range(job.run.nnodes)]
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {
            "name": job.name,
            "namespace": job.namespace,
            "annotations": {
                **(annotations or {}),
                **gang_watchdog.pending_bound(
                    job.pending_timeout_minutes, deadlines.bert_restart_pending_minutes(job.pending_timeout_minutes)
                ),
                **gang_watchdog.stop_by(job.group),
            },
        },
        "spec": {
            "schedulerName": "volcano",
            "queue": job.queue,
            # Gang scheduling: no pod starts until every node's pod can.
            "minAvailable": job.run.nnodes,
            "maxRetry": job.max_retry,
            # svc: a headless service and hosts files so the pods can resolve each other.
            "plugins": {"svc": ["--publish-not-ready-addresses"], "env": []},
            "tasks": tasks,
        },
    }


# The rendezvous id names the attempt in torchrun's logs and TORCHELASTIC_RUN_ID: the c10d store
# starts empty in every attempt (bert_launch.torchrun), so reusing an id would be harmless too.
# Volcano v1.15.1 (pkg/controllers/job/job_controller_util.go, createJobPod) annotates each pod
# with its PodGroup `<job>-<job uid>` (new for every submitted Job object) and the Job's
# version, which killJob bumps whenever the whole job is restarted (RestartJob).
RDZV_ENV = {
    "VOLCANO_PODGROUP": "scheduling.k8s.io/group-name",
    "VOLCANO_JOB_VERSION": "volcano.sh/job-version",
}
RDZV_ID = "$(VOLCANO_PODGROUP)-v$(VOLCANO_JOB_VERSION)"


def rdzv_env() -> list[dict[str, Any]]:
    # Kubernetes expands $(NAME) in the command from these, before the shell sees it.
    return [
        {"name": name, "valueFrom": {"fieldRef": {"fieldPath": f"metadata.annotations['{key}']"}}}
        for name, key in RDZV_ENV.items()
    ]


def _task(job: BertJob, replica: int) -> dict[str, Any]:
    container = {
        "name": "trainer",
        "image": job.image,
        "command": with_deadline(
            bert_launch.command(
                job.run, RDZV_ID, bert_launch.rank0_host_env(replica), f"{job.namespace}/{job.name}", str(replica)
            ),
            job.deadline_minutes,
        ),
        "env": rdzv_env()
        + pods.env_list({**bert_launch.environment(job.run, str(replica)), **bert_launch.rank0_env(replica)}),
        # What TorchX's dist.ddp declares (port_map c10d): where rank 0 hosts the rendezvous store.
        "ports": [{"name": "c10d", "containerPort": bert_launch.RDZV_PORT}],
        **pods.training_container(job.group),
        "volumeMounts": [pods.shm_mount(), pods.claim_mount(bert_launch.DATA_MOUNT)],
    }
    if job.liveness_probe is not None:
        container["livenessProbe"] = job.liveness_probe
    labels = {"app.kubernetes.io/name": job.name, **pods.workload_labels(WORKLOAD)}
    return {
        "name": f"{bert_launch.ROLE}-{replica}",
        "replicas": 1,
        "minAvailable": 1,
        "maxRetry": job.max_retry,
        "policies": task_policies(),
        "template": {
            "metadata": pods.pod_metadata(labels, job.group),
            "spec": {
                **pods.training_pod(job.group, run_as_user=job.namespace_id),
                "restartPolicy": "Never",
                "serviceAccountName": job.service_account,
                "containers": [container],
                "volumes": [pods.shm_volume(), pods.claim_volume(job.claim)],
            },
        },
    }


@dataclass(frozen=True)
class BertPretrainingArgs:
    settings: BertPretrainingSettings
    namespace: str
    repository: str
    group: NodeGroup
    claim: str
    namespace_id: int
    service_account: str
    # The system nodes' selector: where the precompile's gate runs.
    core_node_selector: Mapping[str, str]
    after: tuple[pulumi.Resource, ...] = ()


def run_fields(args: BertPretrainingArgs) -> dict[str, Any]:
    """The launch settings both jobs share."""
    s = args.settings
    return dict(
        nnodes=s.nodes,
        nproc_per_node=args.group.neuron_cores,
        batch_size=s.batch_size or bert_launch.batch_defaults(s.bf16)[0],
        grad_accum_steps=s.grad_accum_steps or bert_launch.batch_defaults(s.bf16)[1],
        data_dir=s.data_dir,
        output_dir=s.output_dir,
        bf16=s.bf16,
        cacheset=s.cacheset,
        checkpoint_every_shards=s.checkpoint_every_shards,
        checkpoints_to_keep=s.checkpoints_to_keep,
    )


def train_run_dir(args: BertPretrainingArgs) -> str:
    return bert_launch.run_dir(bert_launch.BertRun(**run_fields(args), steps_this_run=args.settings.train_steps))


def job_sequence(args: BertPretrainingArgs) -> list[dict[str, Any]]:
    """The precompile Job and its gate (``step_gate``) when on, then the training Job."""
    s = args.settings
    # The fields both jobs share, as keyword arguments of BertJob.
    base: dict[str, Any] = dict(
        namespace=args.namespace,
        image=f"{args.repository}:{s.image_tag}",
        group=args.group,
        queue=s.queue,
        claim=args.claim,
        namespace_id=args.namespace_id,
        service_account=args.service_account,
        max_retry=s.max_retry,
        pending_timeout_minutes=s.pending_timeout_minutes,
    )
    run = run_fields(args)
    manifests = []
    if s.precompile:
        compile_job = BertJob(
            name="bert-precompile",
            run=bert_launch.BertRun(**run, precompile=True, steps_this_run=s.precompile_steps),
            deadline_minutes=s.precompile_deadline_minutes,
            **{**base, "max_retry": deadlines.bert_attempts(s, precompile=True)},
        )
        # `pulumi up` waits for the precompile through its gate, which fails as soon as it fails.
        precompile = volcano_job(compile_job)
        manifests += step_gate.gated(precompile, WORKLOAD, deadlines.bert_await_minutes(s), args.core_node_selector)
    train_run = bert_launch.BertRun(**run, steps_this_run=s.train_steps)
    probe = resumable.liveness_probe("bert", bert_launch.heartbeat(train_run), s)
    train_job = BertJob(
        name="bert-train", run=train_run, deadline_minutes=s.train_deadline_minutes, liveness_probe=probe, **base
    )
    manifests.append(volcano_job(train_job, pods.skip_await()))
    return manifests


class BertPretraining(JobChain):
    def __init__(self, name: str, args: BertPretrainingArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        sequence = job_sequence(args)
        super().__init__(
            "trainium:workloads:BertPretraining",
            name,
            pods.peers_policy(WORKLOAD, args.namespace),
            sequence,
            args.after,
            opts,
            config=step_gate.access(WORKLOAD, args.namespace, sequence),
        )
