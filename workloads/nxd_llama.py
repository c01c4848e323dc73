"""Llama-2-7B pretraining with NxD Training (neuronx-distributed-training), launched by the MPI operator.

Two MPIJobs (kubeflow.org/v2beta1): a compile run (neuron_parallel_compile, a few
iterations) and, once it has succeeded, the training run. mpirun starts one rank per
Trainium node; each rank runs the pinned examples/train.sh, whose torchrun starts one process per
NeuronCore.

Llama-2-7B (examples/conf/megatron_llama_7B_config.yaml), not the repository's Llama-3 8B configs:
the 7B config trains on a Megatron indexed dataset with a Hugging Face tokenizer, what the RedPajama
staging Job already prepares for a Llama-2 model, with tensor parallelism 8 over trn1's 32 NeuronCores
per node; hf_llama3_8B_config.yaml reads a pre-tokenized Hugging Face dataset at sequence length 8192
with tensor parallelism 32 and a Llama-3 tokenizer, which would need a staging of its own.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pulumi

from infra.facts import versions
from workloads import deadlines, gang_watchdog, pods, resilience, resumable, step_gate
from workloads.compile_cache import UPSTREAM_URL
from workloads.kube import JobChain, LayoutArgs, declare
from workloads.settings import NxdLlamaSettings

SHARED_MOUNT = "/shared"
# Where the image puts NxD Training's examples (docker/nxd-llama).
EXAMPLES_DIR = "/opt/neuronx-distributed-training/examples"
# examples/conf/<CONF_FILE>.yaml, which train.sh reads (CONF_FILE) and takes the processes per node from.
CONF_FILE = "megatron_llama_7B_config"
# The DLC's own Open MPI build (4.1.5, prefix /usr/local), by absolute path and --prefix: see launcher_command.
OPEN_MPI_PREFIX = "/usr/local"
HF_TOKEN_SECRET = "hf-token"
HF_TOKEN_KEY = "HF_TOKEN"
# mpirun on a job-support node; the workers ask for Neuron devices and EFA interfaces only.
LAUNCHER_REQUESTS = {"cpu": "1", "memory": "2Gi"}
LAUNCHER_LIMITS = {"cpu": "2", "memory": "4Gi"}
WORKLOAD = "nxd-llama"
# examples/train_setup.sh (neuronx-distributed-training 9169aa0), MPI branch: EXPLICIT_LOGDIR=
# /shared/nemo_experiments/$POD_UID, node <rank>'s output to <that>/<rank>/log (train.sh, tee -a),
# checkpoints to <that>/checkpoints and TensorBoard's events in <that> (exp_manager's explicit_log_dir).
EXPERIMENTS_DIR = f"{SHARED_MOUNT}/nemo_experiments"
TRAIN_JOB = "llama2-train"
# The run directory's lock lives in a directory of its own inside it: on every resume, rank 0's
# exp_manager moves the files at the top of the log directory into run_<n>/ (neuronx-distributed-training
# 9169aa0 utils/exp_manager.py check_resume), which would take the held lock file away from the next
# attempt (flock(2) locks the file, not its name) and let a second job lock a new one.
LOCK_SUBDIR = "lock"


def model_settings(layout: NxdLayout) -> dict[str, object]:
    """What a checkpoint depends on: the code and its config, the Neuron SDK the image is built on, the
    world size, the data and tokenizer, and the iterations (max_steps, so the learning-rate schedule)."""
    s = layout.settings
    return {
        "script": versions.NXDT_EXAMPLES_COMMIT,
        "config": CONF_FILE,
        "neuron_sdk_image": versions.NEURON_DLC_PYTORCH_2_9,
        "nodes": s.nodes,
        "neuron_cores": layout.group.neuron_cores,
        "tokenizer_path": s.tokenizer_path,
        "dataset_path": s.dataset_path,
        "train_iters": s.train_iters,
    }


def run_dir(layout: NxdLayout) -> str:
    return f"{EXPERIMENTS_DIR}/{resumable.run_name(model_settings(layout))}"


def node0_log(layout: NxdLayout) -> str:
    """The heartbeat: rank 0's progress bar (its batch counter) and its checkpoint messages."""
    return f"{run_dir(layout)}/0/log"


def train_probe(layout: NxdLayout) -> dict[str, Any]:
    # The workers' sshd containers outlive attempts: the probe watches the attempt rank_command announced.
    return resumable.liveness_probe("nxdt", node0_log(layout), layout.settings, per_attempt=True)


# How long an earlier attempt's leftover training processes get to exit on SIGTERM before SIGKILL:
# Lightning stops at the next step boundary; a save under way is the one thing worth waiting for.
REAP_GRACE_SECONDS = 60


def overrides(layout: NxdLayout, compile_only: bool) -> list[str]:
    """The Hydra overrides train.sh's torchrun gets beyond its own: where the data, the tokenizer and
    the shared compile cache are (the config's are /home/ubuntu paths), and the iterations to train.
    The compile cache is the config's compiler_cache_url, which training_orchestrator.py exports as
    NEURON_COMPILE_CACHE_URL unless already set (set_env_variable without overwrite)."""
    s = layout.settings
    found = [
        f"data.data_prefix=[1.0,{resilience.hydra_escape(s.dataset_path)}]",
        f"data.tokenizer.type={resilience.hydra_escape(s.tokenizer_path)}",
        f"compiler_cache_url={UPSTREAM_URL}",
    ]
    # A compile run's max_steps is training_orchestrator.py's (COMPILE=1: 10, no checkpoint, no TensorBoard).
    if not compile_only and s.train_iters is not None:
        found.append(f"trainer.max_steps={s.train_iters}")
    # examples/training.py hands exp_manager.async_checkpointing to NLPCheckpointIO(async_save=...), which
    # passes it to NxD's save_checkpoint (neuronx-distributed-training 9169aa0, lightning_modules/
    # nlp_overrides.py): each rank copies its tensors to host memory while training waits, then one thread
    # writes them (neuronx-distributed fbac349 trainer/checkpoint.py _xser_save_data, CheckpointIOState.end).
    # The next save waits for that write and only then writes the earlier save's ``done`` (begin ->
    # wait_save), which is what resilience.nxdt_pick trusts; the goodput model counts the copy and the
    # later ``done`` (workloads/goodput.py). Those sources are the newest mirrored (NxD 2.29, NxD Training
    # 1.6.0); the image runs NxD 0.19 and NxD Training 1.7.0, not read. The override keys come from the
    # 9169aa0 examples the image bakes in (docker/nxd-llama/Dockerfile), so they hold either way.
    if not compile_only and s.async_checkpoints:
        found.append("exp_manager.async_checkpointing=true")
    return found


def rank_command(layout: NxdLayout, compile_only: bool) -> list[str]:
    """What mpirun starts on each worker. Training: the attempt's announcement (the probe's clock
    starts there), the end of an earlier attempt's leftovers, rank 0's lock and prune, then train.sh
    rewritten (train_resumable.sh) to checkpoint every checkpointEverySteps and to continue from the
    newest checkpoint that reads back whole (resilience.nxdt_pick: rank 0 reads, the other ranks wait
    for its verdicts). Compile: train.sh rewritten with the same data and cache overrides."""
    s = layout.settings
    checkpoints = f"{run_dir(layout)}/checkpoints"
    if compile_only:
        write = resumable.call_file("nxdt-script", "nxdt", "0", "0", "", *overrides(layout, True))
        return ["bash", "-c", f"{write} && exec ./{resilience.NXDT_RESUMABLE}"]
    write = resumable.call_file(
        "nxdt-script",
        "nxdt",
        str(s.checkpoint_every_steps),
        str(s.checkpoints_to_keep),
        checkpoints,
        *overrides(layout, False),
    )
    # Rank 0 (one per job: mpirun starts one rank per worker; Open MPI gives each its
    # OMPI_COMM_WORLD_RANK, which train_setup.sh reads too) holds the run directory's lock, reads the
    # newest saves back and moves failed ones out of checkpoints/, where exp_manager's own resume would
    # otherwise pick them (resilience.nxdt_prune).
    lock_dir = f"{run_dir(layout)}/{LOCK_SUBDIR}"
    writer = resumable.RunLock(lock_dir, f"{layout.namespace}/{TRAIN_JOB}")
    take = resumable.take_lock(writer, "nxdt", resumable.call_file)
    prune = resumable.call_file("prune", "nxdt", checkpoints, str(s.checkpoints_to_keep))
    lock = f'{{ [ "$OMPI_COMM_WORLD_RANK" != 0 ] || {{ mkdir -p {checkpoints} {lock_dir} && {take} && {prune}; }}; }}'
    # The worker containers outlive an attempt: first end what an earlier attempt left running in this
    # one (resilience.reap), then mark everything this attempt starts.
    attempt = f'export {resilience.RUN_ATTEMPT_ENV}="{run_dir(layout)} $BASHPID"'
    reap = resumable.call_file("reap", "nxdt", run_dir(layout)) + f" $BASHPID {REAP_GRACE_SECONDS}"
    steps = [resumable.announce_attempt(), attempt, reap, lock, write, f"exec ./{resilience.NXDT_RESUMABLE}"]
    return ["bash", "-c", " && ".join(steps)]


@dataclass(frozen=True)
class NxdLayout(pods.TrainiumLayout):
    settings: NxdLlamaSettings
    # The system nodes' selector: where the compile's gate runs.
    core_node_selector: Mapping[str, str]
    # The namespace's id (the cluster's namespaceIds): launcher and workers run as it.
    namespace_id: int
    # The Volcano queue when the cluster gang-schedules MPIJobs (Volcano on), else None.
    gang_queue: str | None = None


def launcher_command(layout: NxdLayout, compile_only: bool) -> list[str]:
    s = layout.settings
    # COMPILE: train.sh wraps torchrun in neuron_parallel_compile when "1"; training_orchestrator.py
    # then runs 10 steps without checkpoints, and reads TRAIN_ITERS only when "0" (we pass max_steps).
    forwarded = ["LD_LIBRARY_PATH", "PATH", "POD_UID", f"CONF_FILE={CONF_FILE}", f"COMPILE={int(compile_only)}"]
    # mpirun starts orted on each worker over ssh, whose PATH is not the image's: --prefix makes
    # the remote command set PATH and LD_LIBRARY_PATH to this Open MPI first (the DLC builds it with
    # --enable-orterun-prefix-by-default, which implies the same; said here, not relied on).
    mpirun = [f"{OPEN_MPI_PREFIX}/bin/mpirun", "--prefix", OPEN_MPI_PREFIX]
    command = [*mpirun, "-np", str(s.nodes), "-bind-to", "none", "-map-by", "slot"]
    for name in forwarded:
        command += ["-x", name]
    return command + ["-wdir", EXAMPLES_DIR, *rank_command(layout, compile_only)]


def launcher_run_env(layout: NxdLayout, compile_only: bool) -> list[dict[str, Any]]:
    """POD_UID names the log directory (train_setup.sh): the launcher pod's uid for the compile run;
    the run directory for training, the same for every restart, so each resumes the one before."""
    if compile_only:
        return [{"name": "POD_UID", "valueFrom": {"fieldRef": {"fieldPath": "metadata.uid"}}}]
    return pods.env_list({"POD_UID": run_dir(layout).rsplit("/", 1)[1]})


def run_policy(layout: NxdLayout, compile_only: bool) -> dict[str, Any]:
    # Each launcher retry re-runs mpirun across every Trainium node; a few are enough to ride out
    # a transient fault without burning hours of a failing configuration. The launcher is
    # restartPolicy Never (mpi_job), so backoffLimit counts reruns exactly. The deadline is on the
    # launcher Job (kubeflow/mpi-operator v0.8.0 mpi_job_controller.go newLauncherJob), created
    # with the workers (AtStartup, below), so it counts from the MPIJob's creation: a gang that is
    # never scheduled ends at it too. The MPIJob then finishes and cleanPodPolicy Running deletes
    # its running and pending workers, releasing their nodes. Volcano PodGroups get no
    # scheduleTimeoutSeconds from the operator (podgroup.go VolcanoCtrl.newPodGroup), so this
    # deadline is the MPIJob's pending timeout as well.
    minutes = deadlines.nxd_deadline_minutes(layout.settings, compile_only)
    policy: dict[str, Any] = {
        "cleanPodPolicy": "Running",
        "backoffLimit": layout.settings.max_restarts,
        "activeDeadlineSeconds": minutes * 60,
    }
    if layout.gang_queue is not None:
        # kubeflow/mpi-operator v0.8.0 pkg/controller/podgroup.go: the PodGroup's minMember is
        # schedulingPolicy.minAvailable, and the launcher joins the PodGroup
        # (decoratePodTemplateSpec). Created at start-up, the launcher is part of the gang:
        # workers + 1, the operator's own default (calculateMinAvailable). Volcano's gang plugin
        # binds none of them until all fit (pkg/scheduler/plugins/gang/gang.go, v1.15.1).
        policy["schedulingPolicy"] = {"queue": layout.gang_queue, "minAvailable": layout.settings.nodes + 1}
    return policy


def mpi_job(layout: NxdLayout, compile_only: bool, annotations: dict[str, str]) -> dict[str, Any]:
    s = layout.settings
    # Created with the workers, the launcher waits until each answers over SSH, then runs mpirun: as
    # the namespace's id, with the passwd entry and home its ssh needs (pods.mpi_command).
    wait_then_run = pods.wait_for_mpi_workers() + 'exec "$@"\n'
    launcher = {
        "name": "launcher",
        "image": layout.image,
        "command": pods.mpi_command(["bash", "-c", wait_then_run, "launcher", *launcher_command(layout, compile_only)]),
        "env": launcher_run_env(layout, compile_only),
        "resources": {"requests": dict(LAUNCHER_REQUESTS), "limits": dict(LAUNCHER_LIMITS)},
        "securityContext": pods.accelerator_security_context(),
    }
    worker = {
        "name": "worker",
        "image": layout.image,
        # The launcher reaches the workers over SSH (sshd as the namespace's id on port 2222, below); the
        # operator provides the keys in ~/.ssh (sshAuthMountPath). No capability: sshd runs as the pod's user.
        # No HF_TOKEN: the run loads the tokenizer from tokenizerPath on FSx (data.tokenizer.type), which
        # the RedPajama staging job downloaded; only that download needs the token.
        **pods.training_container(layout.group),
        "volumeMounts": [pods.claim_mount(SHARED_MOUNT), pods.shm_mount()],
        # Both runs' ranks write train_resumable.sh with resilience.py, from the file the worker writes.
        "env": pods.env_list(resumable.env()),
        "command": resumable.with_script_file(pods.mpi_worker_command()),
    }
    if not compile_only:
        worker["livenessProbe"] = train_probe(layout)
    # The MPI operator v0.8.0 adds its own labels to the templates' (mpi_job_controller.go,
    # newWorker/newLauncherPodTemplate), keeping ours: the NetworkPolicy selects on them.
    name = "llama2-compile" if compile_only else TRAIN_JOB
    return {
        "apiVersion": "kubeflow.org/v2beta1",
        "kind": "MPIJob",
        "metadata": {
            "name": name,
            "namespace": layout.namespace,
            "annotations": {
                **annotations,
                **gang_watchdog.pending_bound(s.pending_timeout_minutes),
                **gang_watchdog.stop_by(layout.group),
            },
        },
        "spec": {
            "slotsPerWorker": 1,
            # The job's keys where the namespace's id finds them, its ~/.ssh (pods.MPI_SSH_AUTH_MOUNT_PATH).
            "sshAuthMountPath": pods.MPI_SSH_AUTH_MOUNT_PATH,
            # The launcher Job, and with it the deadline, exists from the start (see run_policy);
            # its command waits for the workers' sshd (as the seed's wait loop did).
            "launcherCreationPolicy": "AtStartup",
            "runPolicy": run_policy(layout, compile_only),
            "mpiReplicaSpecs": {
                "Launcher": {
                    "replicas": 1,
                    # Never: each rerun is a new launcher pod, and the Job fails once failed pods >
                    # backoffLimit, so maxRestarts counts reruns (kubernetes pkg/controller/job/
                    # job_controller.go syncJob exceedsBackoffLimit). OnFailure would count container
                    # restarts with >= (pastBackoffLimitOnFailure): one rerun fewer, none at 1.
                    # mpi-operator v0.8.0 puts this on the launcher Job's template (setRestartPolicy).
                    # Under Volcano the new pod joins the running gang: the running workers count
                    # toward minAvailable (volcano v1.15.1 api/job_info.go ReadyTaskNum).
                    "restartPolicy": "Never",
                    "template": pods.mpi_launcher_template(
                        WORKLOAD,
                        layout.service_account,
                        layout.support_placement,
                        launcher,
                        namespace_id=layout.namespace_id,
                    ),
                },
                "Worker": {
                    "replicas": s.nodes,
                    # A worker whose container the probe or a crash ended comes back on its node, and the
                    # launcher's next mpirun uses it; the operator never replaces a worker pod that still
                    # exists (v0.8.0 mpi_job_controller.go getOrCreateWorker), so Never would end the run.
                    "restartPolicy": "OnFailure",
                    "template": pods.mpi_worker_template(
                        WORKLOAD,
                        layout.group,
                        layout.service_account,
                        worker,
                        (pods.claim_volume(layout.claim), pods.shm_volume()),
                        namespace_id=layout.namespace_id,
                    ),
                },
            },
        },
    }


def job_sequence(layout: NxdLayout) -> list[dict[str, Any]]:
    """The compile MPIJob, which `pulumi up` waits for through its gate (``step_gate``) when the
    training follows it, then the training MPIJob."""
    s = layout.settings
    jobs: list[dict[str, Any]] = []
    if s.compile:
        compile_job = mpi_job(layout, True, pods.skip_await())
        jobs += (
            step_gate.gated(compile_job, WORKLOAD, deadlines.nxd_await_minutes(s), layout.core_node_selector)
            if s.train
            else [compile_job]
        )
    if s.train:
        jobs.append(mpi_job(layout, False, pods.skip_await()))
    return jobs


def hf_token_secret(namespace: str, token: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": HF_TOKEN_SECRET, "namespace": namespace},
        "type": "Opaque",
        "stringData": {HF_TOKEN_KEY: token},
    }


@dataclass(frozen=True)
class HuggingFaceTokenArgs:
    namespace: str
    token: pulumi.Output[str]


class HuggingFaceToken(pulumi.ComponentResource):
    """The Hugging Face token from Pulumi secret config, as the Secret pods read it from."""

    def __init__(self, name: str, args: HuggingFaceTokenArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("trainium:workloads:HuggingFaceToken", name, None, opts)
        self.secret = declare(hf_token_secret(args.namespace, args.token), self)
        self.register_outputs({})


# The component's earlier type and name, from when it ran neuronx-nemo-megatron. Its MPIJobs and gate
# Job keep their Kubernetes names; without the alias their URNs change, the engine creates the new
# objects before it deletes the old ones, and pulumi-kubernetes 4.34.2 refuses to create an object
# that already exists (provider.py upsertExistingObjects, off): the first `up` after the rename would
# fail. Aliased, the engine's parent aliases carry to the children and they are replaced in place.
FORMERLY = pulumi.Alias(type_="trainium:workloads:NemoLlama2", name="nemo-llama2")


class NxdLlama(JobChain):
    def __init__(self, name: str, args: LayoutArgs[NxdLayout], opts: pulumi.ResourceOptions | None = None) -> None:
        opts = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(aliases=[FORMERLY]))
        # Launcher and workers talk both ways: ssh to the workers, Open MPI's daemons back to mpirun.
        sequence = job_sequence(args.layout)
        super().__init__(
            "trainium:workloads:NxdLlama",
            name,
            pods.peers_policy(WORKLOAD, args.layout.namespace),
            sequence,
            args.after,
            opts,
            config=step_gate.access(WORKLOAD, args.layout.namespace, sequence),
        )
