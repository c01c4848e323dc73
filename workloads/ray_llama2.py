"""Llama-2-7B pretraining with Ray Train on KubeRay, gang scheduled by Volcano.

The seed's three RayJobs, submitted one after another: dataset generation,
neuron_parallel_compile, training. Each brings up its own RayCluster (head on the core
nodes, one worker per Trainium node; the data step runs on the head alone), gang scheduled
by Volcano, and deletes it when it finishes, which releases the Trainium nodes.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pulumi
import yaml

from infra.components.schedulers import KUBERAY_NAMESPACE
from infra.facts import versions
from workloads import deadlines, gang_watchdog, pods, resumable, step_gate
from workloads.kube import JobChain, LayoutArgs
from workloads.settings import RAY_JOB_NAMES, RayLlama2Settings

# KubeRay's Volcano plugin reads the queue from this label (volcano_scheduler.go, v1.7.0).
QUEUE_LABEL = "volcano.sh/queue-name"
WORKER_GROUP = "workergroup"
CODE_DIR = "/llama2_pretrain"
SHARED_MOUNT = "/shared"
LOG_VOLUME = "ray-logs"
# Each step's script, mounted read-only into the head of the step's cluster (where Ray runs a job's
# entrypoint): the entrypoint is one simple command that runs it (see ``entrypoint``).
STEPS_CONFIG_MAP = "ray-llama2-steps"
STEPS_VOLUME = "llama2-steps"
STEPS_MOUNT = "/llama2-steps"
STEP_FILES = {"generate-data": "data.sh", "precompile": "precompile.sh", "train": "train.sh"}
RESILIENCE_FILE = "resilience.py"
# On the head's pod template: the digest of the files its step runs, so that a changed script changes the
# RayJob's spec and replaces, so reruns, the job. The ConfigMap itself is replaced, deleted first under its fixed
# name (pulumi-kubernetes v4.32.0 provider/pkg/provider/diff.go forceNewProperties); the job's running pods keep
# the files they mounted, and the replaced job's pods mount the new ones.
SCRIPTS_DIGEST = "trainium.workloads/scripts-sha256"
HEAD_PORTS = [
    {"containerPort": 6379, "name": "gcs-server"},
    {"containerPort": 8265, "name": "dashboard"},
    {"containerPort": 10001, "name": "client"},
]
WORKLOAD = "ray-llama2"
DASHBOARD_PORT = 8265
# KubeRay v1.7.0 labels the submitter Job's pods it creates for a K8sJobMode RayJob with
# ray.io/originated-from-crd: RayJob (ray-operator/controllers/ray/rayjob_controller.go); the
# submitter and the operator itself (job status) reach the head's dashboard only.
SUBMITTER_LABEL = {"ray.io/originated-from-crd": "RayJob"}
JOB_NAMES = RAY_JOB_NAMES


@dataclass(frozen=True)
class RayLayout(pods.TrainiumLayout):
    settings: RayLlama2Settings
    # The system nodes' selector: where the step gates run.
    core_node_selector: Mapping[str, str]
    # The namespace's id, which every pod of the jobs runs as (pods.namespace_pod).
    namespace_id: int


def _container(name: str, layout: RayLayout, resources: dict[str, Any], mounts: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "name": name,
        "image": layout.image,
        # Let Ray drain its processes before the pod goes.
        "lifecycle": {"preStop": {"exec": {"command": ["/bin/sh", "-c", "ray stop"]}}},
        "resources": resources,
        # HOME and the user name the namespace's id has no passwd entry for; Ray's processes, and
        # so the jobs' entrypoints and Ray Train workers, inherit them from `ray start`. KubeRay
        # v1.7.0 copies this env, the mounts and the context below to the wait-gcs-ready init
        # container it adds to workers (ray-operator/controllers/ray/common/pod.go l.606-640).
        "env": pods.env_list(pods.IDENTITY_ENV),
        # The init container passes Pod Security with it too.
        "securityContext": pods.accelerator_security_context(),
        # Ray's temporary directory (sessions, logs, sockets): an emptyDir, which the kubelet creates
        # world-writable (kubernetes pkg/volume/emptydir/empty_dir.go defaultPerm 0777), so the
        # namespace's id writes it.
        "volumeMounts": [{"name": LOG_VOLUME, "mountPath": "/tmp/ray"}, *mounts],
    }


def ray_network_policy(namespace: str) -> dict[str, Any]:
    """Ray nodes of any of the jobs' clusters talk freely; the submitter and the operator reach the dashboard."""
    return pods.peers_policy(
        WORKLOAD,
        namespace,
        pods.from_pods(SUBMITTER_LABEL, ports=[DASHBOARD_PORT]),
        pods.from_namespace(KUBERAY_NAMESPACE, ports=[DASHBOARD_PORT]),
    )


def ray_cluster_spec(
    layout: RayLayout,
    workers: int,
    liveness_probe: dict[str, Any] | None = None,
    scripts: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """A RayCluster spec: head on the core nodes and ``workers`` Trainium workers (0: head only),
    each worker watched by ``liveness_probe`` when given; the head mounts the steps' ConfigMap and
    carries the digest of ``scripts``, the files its step runs."""
    s = layout.settings
    head = _container(
        "ray-head",
        layout,
        # The head shares a core node with system pods: capped at what it asks for.
        {
            "requests": {"cpu": s.head_cpu, "memory": s.head_memory},
            "limits": {"cpu": s.head_cpu, "memory": s.head_memory},
        },
        [
            pods.claim_mount(SHARED_MOUNT),
            {"name": STEPS_VOLUME, "mountPath": STEPS_MOUNT, "readOnly": True},
        ],
    )
    head["ports"] = HEAD_PORTS
    volumes = [{"name": LOG_VOLUME, "emptyDir": {}}, pods.claim_volume(layout.claim)]
    head_metadata: dict[str, Any] = {"labels": pods.workload_labels(WORKLOAD)}
    if scripts:
        head_metadata["annotations"] = {SCRIPTS_DIGEST: scripts_digest(scripts)}
    spec: dict[str, Any] = {
        "rayVersion": versions.RAY_VERSION,
        "headGroupSpec": {
            "rayStartParams": {"dashboard-host": "0.0.0.0"},
            "template": {
                # KubeRay keeps template labels next to its own (common/pod.go labelPod).
                "metadata": head_metadata,
                "spec": {
                    **pods.namespace_pod(layout.namespace_id),
                    "serviceAccountName": layout.service_account,
                    **pods.support_placement(layout.support_placement),
                    "containers": [head],
                    "volumes": [*volumes, {"name": STEPS_VOLUME, "configMap": {"name": STEPS_CONFIG_MAP}}],
                },
            },
        },
    }
    if workers:
        worker_resources = pods.accelerator_resources(layout.group)
        worker_resources["requests"].update(cpu=s.worker_cpu, memory=s.worker_memory)
        worker_resources["limits"].update(memory=s.worker_memory)
        worker = _container("ray-worker", layout, worker_resources, [pods.claim_mount(SHARED_MOUNT), pods.shm_mount()])
        if liveness_probe is not None:
            worker["livenessProbe"] = liveness_probe
            # The kubelet runs the probe in the container, with the container's environment, not the
            # job's runtimeEnv (which reaches Ray's processes).
            worker["env"] += pods.env_list(resumable.env())
        spec["workerGroupSpecs"] = [
            {
                "groupName": WORKER_GROUP,
                "replicas": workers,
                "minReplicas": workers,
                "maxReplicas": workers,
                "rayStartParams": {},
                "template": {
                    "metadata": pods.pod_metadata(pods.workload_labels(WORKLOAD), layout.group),
                    "spec": {
                        **pods.training_pod(layout.group, run_as_user=layout.namespace_id),
                        "serviceAccountName": layout.service_account,
                        "containers": [worker],
                        "volumes": [*volumes, pods.shm_volume()],
                    },
                },
            }
        ]
    return spec


def step_workers(step: str, layout: RayLayout) -> int:
    # get_dataset.py downloads and tokenizes on the CPU; Ray runs a job's entrypoint on the
    # head node, so the data step needs no Trainium node at all.
    return 0 if step == "generate-data" else layout.settings.workers


# get_dataset.py --llama-version 2 (aws-neuron/neuronx-distributed examples/training/llama at
# RAY_LLAMA2_NXD_COMMIT) downloads and tokenises WikiCorpus into ~/examples_datasets/
# wikicorpus_llama2_tokenized_4k every time it runs (save_to_disk); the data step runs it with HOME
# on the shared volume, where ray_train_llama2.py reads it (its DATA_DIR). The marker is written only
# once it has finished, so a replaced data step skips the work already done.
DATASET_HOME = SHARED_MOUNT
DATASET_DIR = f"{DATASET_HOME}/examples_datasets/wikicorpus_llama2_tokenized_4k"
DATASET_MARKER = f"{DATASET_DIR}/.staged"


# ray_train_llama2.py's --output_dir default; each run gets run-<hash> below it.
OUTPUT_ROOT = "/shared/llama2_output"


def model_settings(layout: RayLayout) -> dict[str, object]:
    """What a checkpoint depends on: the training code, the Neuron SDK the image is built on (its
    neuronx-distributed writes the checkpoint) and the world size (workers x NeuronCores; the
    launcher fixes the model, data, parallelism and batch). Not the steps of a run or its deadline."""
    return {
        "script": versions.RAY_LLAMA2_NXD_COMMIT,
        "neuron_sdk_image": versions.NEURON_DLC_PYTORCH_2_9,
        "workers": layout.settings.workers,
        "neuron_cores": layout.group.neuron_cores,
    }


def run_dir(layout: RayLayout) -> str:
    return f"{OUTPUT_ROOT}/{resumable.run_name(model_settings(layout))}"


def checkpoint_dir(layout: RayLayout) -> str:
    return f"{run_dir(layout)}/checkpoints"


def heartbeat(layout: RayLayout) -> str:
    return f"{run_dir(layout)}/{resumable.HEARTBEAT}"


def train_probe(layout: RayLayout) -> dict[str, Any]:
    # Replacing KubeRay's own worker probe, it keeps that probe's raylet health check.
    return resumable.liveness_probe("ray", heartbeat(layout), layout.settings, health_url=resumable.RAY_NODE_HEALTH_URL)


def step_script(step: str, layout: RayLayout) -> str:
    """The bash script the step's RayJob runs on the head, in the job's working_dir (CODE_DIR, where
    get_dataset.py and ray_train_llama2.py are). Only this bash expands what it holds: the shells on
    the way (KubeRay's submitter, Ray's job supervisor) see the one simple command ``entrypoint``."""
    header = f"# The {step} step of the {WORKLOAD} RayJobs (workloads/ray_llama2.py step_script).\n"
    if step == "generate-data":
        # get_dataset.py writes the dataset every time it runs; the marker, only once it has finished.
        # Its Hugging Face cache stays in the container (HF_HOME from the container's own HOME).
        return header + (
            "set -euo pipefail\n"
            f"if test -f {DATASET_MARKER}; then echo 'dataset already staged ({DATASET_MARKER})'; exit 0; fi\n"
            'HF_HOME="${HF_HOME:-$HOME/.cache/huggingface}" '
            f"HOME={DATASET_HOME} python3 get_dataset.py --llama-version 2\n"
            f"touch {DATASET_MARKER}\n"
        )
    # One Ray Train worker per NeuronCore of each Trainium node.
    script = (
        f"ray_train_llama2.py --num_nodes {layout.settings.workers} --neuron_cores_per_node {layout.group.neuron_cores}"
    )
    if step == "precompile":
        return header + f"set -euo pipefail\nexec python3 {script} --neuron_parallel_compile\n"
    command = f"python3 {script}"
    # ray_train_llama2.py stops after --steps_this_run steps (tp_zero1_llama_hf_pretrain.py breaks
    # out of its loop) and trainer.fit() returns: the RayJob Succeeds.
    s = layout.settings
    command += f" --steps_this_run {s.train_steps}" if s.train_steps is not None else ""
    # The script checkpoints with NxD every --checkpoint_freq steps and keeps --num_kept_checkpoint
    # (tp_zero1_llama_hf_pretrain.py l.337-352); every retry continues from the newest complete one.
    command += (
        f" --output_dir {run_dir(layout)} --checkpoint_dir {checkpoint_dir(layout)}"
        f" --checkpoint_freq {s.checkpoint_every_steps} --num_kept_checkpoint {s.checkpoints_to_keep}"
    )
    # Ray runs the entrypoint once per job, on the head: it holds the run directory's lock.
    writer = resumable.RunLock(run_dir(layout), f"{layout.namespace}/{JOB_NAMES[step]}")
    line = resumable.training_line(
        command,
        "ray",
        checkpoint_dir(layout),
        heartbeat(layout),
        s.checkpoints_to_keep,
        writer,
        script=f"{STEPS_MOUNT}/{RESILIENCE_FILE}",
    )
    return header + line + "\n"


def step_files(step: str, layout: RayLayout) -> dict[str, str]:
    """The ConfigMap's files the step runs: its script, and resilience.py for the train step."""
    files = {STEP_FILES[step]: step_script(step, layout)}
    if step == "train":
        files[RESILIENCE_FILE] = resumable.source()
    return files


def scripts_digest(files: Mapping[str, str]) -> str:
    return hashlib.sha256("".join(f"{k}\0{v}\0" for k, v in sorted(files.items())).encode()).hexdigest()


def steps_config_map(layout: RayLayout) -> dict[str, Any]:
    """The configured steps' scripts, one ConfigMap for the namespace's Llama-2 RayJobs."""
    data: dict[str, str] = {}
    for step in layout.settings.steps:
        data.update(step_files(step, layout))
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": STEPS_CONFIG_MAP,
            "namespace": layout.namespace,
            "labels": pods.workload_labels(WORKLOAD),
        },
        "data": data,
    }


def entrypoint(step: str) -> str:
    """One simple command: no shell operator, quote, ``$`` or backtick. KubeRay v1.7.0 puts it raw
    into the submitter's ``bash -ce`` line (common/job.go BuildJobSubmitCommand), ``ray job submit``
    re-joins its words (Ray 2.55.1 dashboard/modules/job/cli.py, list2cmdline) and the job
    supervisor runs it with /bin/sh (job_supervisor.py): each shell passes it on unchanged."""
    return f"bash {STEPS_MOUNT}/{STEP_FILES[step]}"


def submitter_template(layout: RayLayout) -> dict[str, Any]:
    """KubeRay's own submitter (ray-project/kuberay v1.7.0 ray-operator/controllers/ray/common/
    job.go GetDefaultSubmitterContainer: head image, 500m/200Mi requests, 1/1Gi limits), placed
    beside the head on the job-support group instead of wherever it fits; a given template is
    used as is and only its command and env are filled in (rayjob_controller.go
    configureSubmitterContainer), so the image and the Job's restart policy are spelled out."""
    container = {
        "name": "ray-job-submitter",
        "image": layout.image,
        "resources": {"requests": {"cpu": "500m", "memory": "200Mi"}, "limits": {"cpu": "1", "memory": "1Gi"}},
        # HOME and the user name, as in the head; KubeRay v1.7.0 appends its own variables to these
        # (rayjob_controller.go configureSubmitterContainer).
        "env": pods.env_list(pods.IDENTITY_ENV),
        # `ray job submit` is an HTTP client of the head's dashboard: no capability, no escalation.
        "securityContext": pods.container_security_context(),
    }
    # No claim here (KubeRay v1.7.0 adds a volume to the template only for its token authentication,
    # which these clusters do not use), but the same id as the head it talks to: not root.
    spec = {
        **pods.namespace_pod(layout.namespace_id),
        **pods.support_placement(layout.support_placement),
        "restartPolicy": "Never",
        "containers": [container],
    }
    # KubeRay adds its own labels to the template's (rayjob_controller.go getSubmitterTemplate), so
    # the workload's label stays and the ray-llama2 NetworkPolicy selects the submitter too.
    return {"metadata": {"labels": pods.workload_labels(WORKLOAD)}, "spec": spec}


def runtime_env_vars(step: str) -> dict[str, str]:
    # Ray runs the entrypoint with the job's runtime environment. KubeRay v1.7.0 writes it inside
    # double quotes on the submitter's bash line (common/job.go BuildJobSubmitCommand), so no value may
    # hold `$`, a backtick or a double quote: the train step reads resilience.py from its ConfigMap.
    # "0" is the seed's value and means unbuffered too (Python: any non-empty value); spelling it
    # "1" would change, so replace and re-run, every step's RayJob, the precompile included.
    return {"PYTHONUNBUFFERED": "0"}


@functools.cache
def runtime_env_yaml(step: str) -> str:
    """The step's runtime environment as the RayJob carries it: the working directory that holds
    the pinned scripts (the submitter uploads it; the entrypoint runs in it) and the variables."""
    return yaml.safe_dump({"working_dir": CODE_DIR, "env_vars": runtime_env_vars(step)})


def ray_job(step: str, layout: RayLayout, annotations: dict[str, str]) -> dict[str, Any]:
    """One step as a RayJob that brings up its own RayCluster and deletes it when it ends.

    KubeRay v1.7.0 with Volcano refuses a RayJob on an existing cluster (`clusterSelector`),
    and never shuts such a cluster down; a RayJob with `rayClusterSpec` gets one PodGroup
    (`ray-<job>-pg`, in the queue its `volcano.sh/queue-name` label names) covering head and
    workers, and `shutdownAfterJobFinishes` deletes the cluster `ttlSecondsAfterFinished`
    after the job succeeds or fails, so its Trainium nodes go idle and are scaled in.
    """
    s = layout.settings
    spec: dict[str, Any] = {
        "submissionMode": "K8sJobMode",
        "entrypoint": entrypoint(step),
        "runtimeEnvYAML": runtime_env_yaml(step),
        "rayClusterSpec": ray_cluster_spec(
            layout,
            step_workers(step, layout),
            train_probe(layout) if step == "train" else None,
            step_files(step, layout),
        ),
        "submitterPodTemplate": submitter_template(layout),
        "shutdownAfterJobFinishes": True,
        "ttlSecondsAfterFinished": s.ttl_seconds_after_finished,
        # Every step ends by its deadline, counted from the RayJob's start (cluster start-up
        # included); a cluster not running its job within pendingTimeoutMinutes (a gang that cannot
        # be scheduled, nodes that never come) fails it sooner. Either way KubeRay marks the RayJob
        # Failed and shutdownAfterJobFinishes deletes its cluster (workloads/deadlines.py).
        "activeDeadlineSeconds": deadlines.ray_step_deadline_seconds(s, step),
        "preRunningDeadlineSeconds": s.pending_timeout_minutes * 60,
    }
    if step == "train":
        # Each retry brings up a new RayCluster and resets the RayJob's start, so both deadlines count
        # per attempt; one that ended by activeDeadlineSeconds is not retried (kuberay v1.7.0
        # rayjob_controller.go initRayJobStatusIfNeed l.916, checkBackoffLimitAndUpdateStatusIfNeeded).
        spec["backoffLimit"] = s.max_retries
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayJob",
        "metadata": {
            "name": JOB_NAMES[step],
            "namespace": layout.namespace,
            # Copied by KubeRay to the PodGroup (queue) and to the cluster it creates.
            "labels": {QUEUE_LABEL: s.queue},
            # On a Capacity Block group, the gang watchdog suspends it before the block's nodes go.
            "annotations": {**annotations, **gang_watchdog.stop_by(layout.group)},
        },
        "spec": spec,
    }


def job_sequence(layout: RayLayout) -> list[dict[str, Any]]:
    """The configured steps in order; `pulumi up` waits for each but the last through its gate
    (``step_gate``), which fails as soon as the step fails."""
    s = layout.settings
    sequence: list[dict[str, Any]] = []
    for i, step in enumerate(s.steps):
        job = ray_job(step, layout, pods.skip_await())
        if i == len(s.steps) - 1:
            sequence.append(job)
        else:
            sequence += step_gate.gated(job, WORKLOAD, deadlines.ray_await_minutes(s, step), layout.core_node_selector)
    return sequence


class RayLlama2(JobChain):
    def __init__(self, name: str, args: LayoutArgs[RayLayout], opts: pulumi.ResourceOptions | None = None) -> None:
        # Each job is replaced (and so run again, on a fresh cluster) when its spec changes, or its
        # labels: KubeRay v1.7.0 reads the queue label only when it creates the PodGroup
        # (volcano_scheduler.go createPodGroup), so an in-place label change would leave a pending
        # gang in the old queue.
        sequence = job_sequence(args.layout)
        super().__init__(
            "trainium:workloads:RayLlama2",
            name,
            ray_network_policy(args.layout.namespace),
            sequence,
            args.after,
            opts,
            replace_on=("spec", "metadata.labels"),
            # Before the jobs: KubeRay starts a head whose volume names it; the gates' account.
            config=[steps_config_map(args.layout), *step_gate.access(WORKLOAD, args.layout.namespace, sequence)],
        )
