"""BERT-large phase-1 pretraining: a precompile Volcano Job, then the training Volcano Job.

Each Job is what TorchX's Kubernetes scheduler submits for the seed's ``trn1_dist_ddp``
component (see ``torchx_trn1.py``): one task per node, gang scheduled in a Volcano queue,
each pod owning all Neuron devices and EFA interfaces of its node, torchrun meeting its
peers through the cluster's etcd.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

import pulumi

from infra.components.schedulers import ETCD_CLIENT_LABEL
from workloads import bert_launch, pods
from workloads.contract import NodeGroup
from workloads.kube import declare, declare_in_order
from workloads.settings import BertPretrainingSettings

# Volcano restarts the whole gang when one pod fails or is evicted (TorchX's APPLICATION policy).
WORKLOAD = "bert-pretraining"
RESTART_POLICIES = [{"event": "PodEvicted", "action": "RestartJob"}, {"event": "PodFailed", "action": "RestartJob"}]


@dataclass(frozen=True)
class BertJob:
    name: str
    namespace: str
    image: str
    group: NodeGroup
    queue: str
    claim: str
    service_account: str
    run: bert_launch.BertRun
    max_retry: int = 3


def volcano_job(job: BertJob, annotations: Optional[dict[str, str]] = None) -> dict[str, Any]:
    """The batch.volcano.sh/v1alpha1 Job: ``nnodes`` tasks of one pod each."""
    tasks = [_task(job, replica) for replica in range(job.run.nnodes)]
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": job.name, "namespace": job.namespace, "annotations": annotations or {}},
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


# torch elastic's etcd rendezvous (torch/distributed/elastic/rendezvous/etcd_rendezvous.py)
# marks a run id "closed" when its run ends and keeps it for two hours (CONST_RUNID_SUBROOT_TTL):
# agents joining a closed id exit at once. So every run and every retry needs its own id.
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
        "command": bert_launch.command(job.run, RDZV_ID),
        "env": rdzv_env() + pods.env_list(bert_launch.environment(job.run, str(replica))),
        "resources": pods.accelerator_resources(job.group),
        "securityContext": pods.accelerator_security_context(),
        "volumeMounts": [pods.shm_mount(), pods.claim_mount(bert_launch.DATA_MOUNT)],
    }
    # The etcd NetworkPolicy admits rendezvous clients by this label.
    labels = {"app.kubernetes.io/name": job.name, **pods.workload_labels(WORKLOAD), **ETCD_CLIENT_LABEL}
    return {
        "name": f"worker-{replica}",
        "replicas": 1,
        "minAvailable": 1,
        "maxRetry": job.max_retry,
        "policies": RESTART_POLICIES,
        "template": {
            "metadata": {"labels": labels},
            "spec": {
                **pods.pod_defaults(),
                "restartPolicy": "Never",
                "serviceAccountName": job.service_account,
                **pods.accelerator_placement(job.group),
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
    etcd_endpoint: str
    service_account: str
    after: tuple[pulumi.Resource, ...] = ()


class BertPretraining(pulumi.ComponentResource):
    def __init__(self, name: str, args: BertPretrainingArgs, opts: Optional[pulumi.ResourceOptions] = None) -> None:
        super().__init__("trainium:workloads:BertPretraining", name, None, opts)
        s = args.settings
        base = dict(
            namespace=args.namespace,
            image=f"{args.repository}:{s.image_tag}",
            group=args.group,
            queue=s.queue,
            claim=args.claim,
            service_account=args.service_account,
            max_retry=s.max_retry,
        )
        run = dict(
            nnodes=s.nodes,
            nproc_per_node=args.group.neuron_cores,
            etcd_endpoint=args.etcd_endpoint,
            batch_size=s.batch_size or bert_launch.batch_defaults(s.bf16)[0],
            grad_accum_steps=s.grad_accum_steps or bert_launch.batch_defaults(s.bf16)[1],
            data_dir=s.data_dir,
            output_dir=s.output_dir,
            bf16=s.bf16,
            cacheset=s.cacheset,
        )
        manifests = []
        if s.precompile:
            compile_job = BertJob(
                name="bert-precompile",
                run=bert_launch.BertRun(**run, precompile=True, steps_this_run=s.precompile_steps),
                **base,
            )
            done = pods.wait_for("jsonpath={.status.state.phase}=Completed", s.precompile_timeout_minutes)
            manifests.append(volcano_job(compile_job, done))
        train_job = BertJob(name="bert-train", run=bert_launch.BertRun(**run, steps_this_run=s.train_steps), **base)
        manifests.append(volcano_job(train_job, pods.skip_await()))
        # Before the jobs: pods started before their policy exists would accept anything.
        policy = declare(pods.peers_policy(WORKLOAD, args.namespace), self)
        self.jobs = declare_in_order(manifests, self, [*args.after, policy], replace_on_change=True)
        self.register_outputs({})
