"""Pod pieces every training workload shares: the layout fields of a workload on Trainium,
accelerator requests, placement, volumes, the EFA environment, and the annotations that order jobs.

Pure functions returning Kubernetes API dicts, so tests read them without the Pulumi runtime.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from infra.specs.node_template import EFA_RESOURCE, NEURON_RESOURCES
from infra.specs.nodepools import DO_NOT_DISRUPT
from infra.specs.pod_security import (  # noqa: F401  (the one place workloads take their posture from)
    ACCELERATOR_CAPABILITIES,
    UNPRIVILEGED_UID,
    container_security_context,
    from_anywhere,
    from_namespace,
    from_pods,
    network_policy,
    pod_defaults,
)

if TYPE_CHECKING:
    # Only annotations: the TorchX component imports this module on a workstation that has torchx
    # alone, and the contract's model needs pydantic and pulumi.
    from infra.contract import NodeGroup


@dataclass(frozen=True)
class TrainiumLayout:
    """What a workload on a Trainium group is rendered from besides its settings: its namespace and
    image, the node group, the FSx claim, the service account, and where its support pods (MPI
    launchers, Ray heads, verdicts) go."""

    namespace: str
    image: str
    group: NodeGroup
    claim: str
    service_account: str
    support_placement: Mapping[str, Any]


NEURON_DEVICE_RESOURCE = NEURON_RESOURCES[0]
SHM_VOLUME = "dshm"
FSX_VOLUME = "fsx"
# libfabric over EFA for the Neuron collectives (what the seeds' jobs set).
EFA_ENV = {"FI_PROVIDER": "efa", "FI_EFA_USE_DEVICE_RDMA": "1", "FI_EFA_FORK_SAFE": "1"}


PART_OF = "app.kubernetes.io/part-of"


def workload_labels(workload: str) -> dict[str, str]:
    """The label every pod of one workload carries; its NetworkPolicy selects on it."""
    return {PART_OF: workload}


def peers_policy(workload: str, namespace: str, *extra_ingress: dict[str, Any]) -> dict[str, Any]:
    """The workload's pods accept traffic from each other on any port, and what ``extra_ingress``
    lists; nothing else. Training peers talk on ports picked at run time (torchrun's c10d store
    on the master agent, the Neuron collectives' TCP bootstrap, Ray's worker ports, Open MPI's
    out-of-band channel back to mpirun), so the rule is by pod, not by port.
    """
    labels = workload_labels(workload)
    return network_policy(workload, namespace, labels, [from_pods(labels), *extra_ingress])


def accelerator_security_context(add: tuple[str, ...] = ACCELERATOR_CAPABILITIES) -> dict[str, Any]:
    """A training container's context: no escalation, only ``add``; the user is the pod's.

    Writable root: neuronx-cc, torch and Ray write compile work directories, caches and logs under
    /tmp and /var/tmp (both world-writable in the images), and HOME points there (``IDENTITY_ENV``).
    """
    return container_security_context(add=add)


# --- who a pod that mounts the namespace's FSx claim runs as --------------------------------------
# The namespace's one id (the cluster's namespaceIds) as user and group: the id the namespace's
# directory on FSx belongs to (the cluster stack's directory Job), so that root squash, which maps
# root to nobody on the training nodes, leaves the namespace's own pods their files. fsGroup would
# not help: the FSx CSI driver's fsGroupPolicy is ReadWriteOnceWithFSType and the volumes are RWX
# without fsType, so the kubelet never changes their ownership (kubernetes-sigs/aws-fsx-csi-driver
# v1.9.0 charts/aws-fsx-csi-driver values.yaml). The images run as root otherwise; this id has no
# passwd entry in them.
def namespace_pod(namespace_id: int) -> dict[str, Any]:
    """Pod-spec keys of a pod that mounts the namespace's claim: the pod defaults, as the namespace's id."""
    return pod_defaults(run_as_user=namespace_id)


# What the images' root user had from its passwd entry and the namespace's id has not. A writable HOME:
# the AWS, Hugging Face and Ray clients, pip and transformers keep caches and config under it, and runc
# takes it from the image's /etc/passwd, "/" for a user missing there, which only root may write
# (opencontainers/runc v1.3.5, the AMI's, libcontainer/env.go prepareEnv and getUserHome). A user name:
# getpass.getuser() (CPython 3.12 Lib/getpass.py) takes LOGNAME or USER before the passwd database, which
# raises for the id; torch's inductor names its cache directory after it (pytorch
# torch/_inductor/runtime/cache_dir_utils.py default_cache_dir: /tmp/torchinductor_<user>), and
# ray_train_llama2.py its compile work directory (/tmp/<USER>/...). /tmp is world-writable (sticky) in
# every image, and an emptyDir where the root file system is read-only.
IDENTITY_HOME = "/tmp"
IDENTITY_USER = "training"
IDENTITY_ENV = {"HOME": IDENTITY_HOME, "USER": IDENTITY_USER, "LOGNAME": IDENTITY_USER}


# CPU and memory a training pod asks for beside its node's devices (about what the Ray worker asks):
# without them it is BestEffort, the first pod the kubelet evicts under memory pressure, with
# oom_score_adj 1000. Requests only: no limit to be OOM-killed at. The cluster check's pods need little.
TRAINING_REQUESTS = {"cpu": "100", "memory": "400Gi"}
CHECK_REQUESTS = {"cpu": "4", "memory": "16Gi"}


def training_resources(group: NodeGroup, requests: Mapping[str, str] = TRAINING_REQUESTS) -> dict[str, dict[str, str]]:
    """Every Neuron device and EFA interface of the node, and CPU and memory requests."""
    resources = accelerator_resources(group)
    resources["requests"].update(requests)
    return resources


def accelerator_resources(group: NodeGroup, **extra: str) -> dict[str, dict[str, str]]:
    """Every Neuron device and EFA interface of one node: the pod owns the whole node."""
    wanted = {NEURON_DEVICE_RESOURCE: str(group.neuron_devices), **extra}
    if group.efa_interfaces:
        wanted[EFA_RESOURCE] = str(group.efa_interfaces)
    return {"requests": dict(wanted), "limits": dict(wanted)}


def pod_metadata(labels: Mapping[str, str], group: NodeGroup | None = None) -> dict[str, Any]:
    """A pod template's metadata; on a group Karpenter provisions (its `provisioner` label, set by
    the cluster stack's nodeProvisioner), the annotation that keeps Karpenter from voluntarily
    disrupting the node while the pod runs: consolidation skips it, and drift too unless the
    NodePool sets terminationGracePeriod (karpenter-provider-aws v1.14 concepts/disruption.md,
    "Pod-Level Controls"; the cluster's NodePools also hold drift to empty nodes). Only there: on
    cluster-autoscaler groups it would mean nothing, and their pods stay as they were."""
    metadata: dict[str, Any] = {"labels": dict(labels)}
    if group is not None and group.labels.get("provisioner") == "karpenter":
        metadata["annotations"] = {DO_NOT_DISRUPT: "true"}
    return metadata


def accelerator_placement(group: NodeGroup) -> dict[str, Any]:
    return {"nodeSelector": group.node_selector, "tolerations": group.tolerations}


# --- the training posture ------------------------------------------------------------------------
# What every pod that trains on a Trainium node runs under, and the cluster check with it, so the
# check proves on a real node what the jobs will meet: seccomp RuntimeDefault,
# no token, every capability dropped, no IPC_LOCK (locked memory is
# the container's limit), and the node's devices as requests and limits.


def training_pod(group: NodeGroup, run_as_user: int | None = None) -> dict[str, Any]:
    """Pod-spec keys of a pod that owns a Trainium node: the posture (as ``run_as_user`` when given,
    ``namespace_pod``) and the placement."""
    return {**pod_defaults(run_as_user=run_as_user), **accelerator_placement(group)}


def training_container(
    group: NodeGroup, requests: Mapping[str, str] = TRAINING_REQUESTS, add: tuple[str, ...] = ACCELERATOR_CAPABILITIES
) -> dict[str, Any]:
    """Container keys of a training container: its context and the node's devices (``requests``:
    CPU and memory beside them, which set no limit)."""
    return {"resources": training_resources(group, requests), "securityContext": accelerator_security_context(add)}


def support_placement(placement: Mapping[str, Any]) -> dict[str, Any]:
    """A CPU pod of a job (Ray head, MPI launcher, staging, check verdict) on the job-support
    group: the cluster stack exports its selector and the toleration of its taint."""
    return {"nodeSelector": dict(placement["nodeSelector"]), "tolerations": [dict(t) for t in placement["tolerations"]]}


# --- MPI as the namespace's id ------------------------------------------------------------------
# The MPI operator's non-root way (kubeflow/mpi-operator v0.8.2, release-0.8 b10758d:
# build/base/Dockerfile and sshd_config, examples/v2beta1/pi/pi.yaml): launcher and workers run as
# one non-root user, the workers' sshd listens on port 2222 with a config of its own, and the
# MPIJob's sshAuthMountPath puts the job's key pair and authorized_keys in that user's ~/.ssh. The
# controller mounts that Secret with mode 0600 only at /root/.ssh, else the default 0644
# (pkg/controller/mpi_job_controller.go setupSSHOnPod), root's files either way; OpenSSH refuses a
# private key that is too open only when the key is its user's own (authfile.c sshkey_perm_ok,
# openssh-portable V_9_6_P1, as in V_9_2_P1, the Debian release the tests run), so the user reads them as they are.
# The programs are docker/nxd-llama's: mpi-user gives the pod's id a passwd entry (nss_wrapper,
# no root) and the home below, mpi-sshd starts sshd under it. No capability: a non-root sshd binds an
# unprivileged port, does not chroot or change user (sshd.c privsep_chroot is for root only), and
# logs in only its own user, which is all mpirun asks for.
MPI_USER_HOME = "/home/mpiuser"
MPI_SSH_AUTH_MOUNT_PATH = f"{MPI_USER_HOME}/.ssh"
MPI_SSH_PORT = 2222
MPI_USER = "/usr/local/bin/mpi-user"
MPI_SSHD = "/usr/local/bin/mpi-sshd"
# A worker's environment variables whose names match this extended regular expression reach the
# processes its sshd sessions start (mpi-sshd: sshd's SetEnv).
MPI_SESSION_ENV = "MPI_SESSION_ENV"


def mpi_launcher_template(
    workload: str,
    service_account: str,
    placement: Mapping[str, Any],
    launcher: Mapping[str, Any],
    volumes: tuple[Mapping[str, Any], ...] = (),
    *,
    namespace_id: int,
) -> dict[str, Any]:
    """An MPIJob's launcher pod: a CPU pod on the job-support group under the pod defaults, as the
    namespace's id (its command runs under ``MPI_USER``: ``mpi_command``)."""
    spec = {
        **pod_defaults(run_as_user=namespace_id),
        "serviceAccountName": service_account,
        **support_placement(placement),
        "containers": [dict(launcher)],
    }
    return {
        "metadata": {"labels": workload_labels(workload)},
        "spec": {**spec, **({"volumes": list(volumes)} if volumes else {})},
    }


def mpi_command(command: list[str]) -> list[str]:
    """A launcher's (or any MPI pod's) command, run with the passwd entry and home ``MPI_USER`` gives
    the pod's id: OpenSSH and mpirun need them."""
    return [MPI_USER, *command]


def mpi_worker_command() -> list[str]:
    """A worker's sshd, as the pod's id (``MPI_USER``, then ``MPI_SSHD``)."""
    return [MPI_USER, MPI_SSHD]


def mpi_worker_template(
    workload: str,
    group: NodeGroup,
    service_account: str,
    worker: Mapping[str, Any],
    volumes: tuple[Mapping[str, Any], ...],
    *,
    namespace_id: int,
) -> dict[str, Any]:
    """An MPIJob's worker pod: one per Trainium node, owning it (``training_pod``'s placement), as
    the namespace's id (its command ends in ``mpi_worker_command``)."""
    return {
        "metadata": pod_metadata(workload_labels(workload), group),
        "spec": {
            **pod_defaults(run_as_user=namespace_id),
            **accelerator_placement(group),
            "serviceAccountName": service_account,
            "containers": [dict(worker)],
            "volumes": list(volumes),
        },
    }


def system_deployment(
    metadata: Mapping[str, Any],
    labels: Mapping[str, str],
    node_selector: Mapping[str, str],
    run_as_user: int = UNPRIVILEGED_UID,
    **pod_spec: Any,
) -> dict[str, Any]:
    """One replica of a long-running pod on the always-on system nodes, as an unprivileged user
    (``run_as_user``: the namespace's id for a pod that mounts its claim) under the posture's pod
    defaults; ``pod_spec`` adds containers, volumes and the rest."""
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": dict(metadata),
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": dict(labels)},
            "template": {
                "metadata": {"labels": dict(labels)},
                "spec": {
                    **pod_defaults(run_as_user=run_as_user),
                    "nodeSelector": dict(node_selector),
                    **pod_spec,
                },
            },
        },
    }


def env_list(values: Mapping[str, str]) -> list[dict[str, str]]:
    return [{"name": k, "value": v} for k, v in values.items()]


def shm_volume() -> dict[str, Any]:
    # The 64 MiB container default is too small for data loaders and the Neuron runtime.
    return {"name": SHM_VOLUME, "emptyDir": {"medium": "Memory"}}


def shm_mount() -> dict[str, str]:
    return {"name": SHM_VOLUME, "mountPath": "/dev/shm"}


def claim_volume(claim: str) -> dict[str, Any]:
    return {"name": FSX_VOLUME, "persistentVolumeClaim": {"claimName": claim}}


def claim_mount(path: str) -> dict[str, str]:
    return {"name": FSX_VOLUME, "mountPath": path}


# The MPI operator's hostfile in the launcher (kubeflow/mpi-operator v0.8.0
# pkg/controller/mpi_job_controller.go newConfigMap): `<job>-worker-<i>.<job>.<ns>.svc slots=<n>`.
MPI_HOSTFILE = "/etc/mpi/hostfile"


def wait_for_mpi_workers(poll_seconds: int = 10) -> str:
    """Shell: wait until every worker in the MPI hostfile resolves and answers over SSH (its sshd, on
    ``MPI_SSH_PORT``), and set ``hosts`` to their addresses. A launcher created at start-up (`launcherCreationPolicy:
    AtStartup`) runs before its workers are Ready, and a worker's DNS record can lag its Ready pod;
    only the launcher Job's deadline ends the wait."""
    return f"""\
hosts=""
for h in $(awk '{{print $1}}' {MPI_HOSTFILE}); do
  until ip=$(getent hosts "$h" | awk '{{print $1; exit}}') && [ -n "$ip" ] \\
      && ssh -p {MPI_SSH_PORT} -o BatchMode=yes -o ConnectTimeout=10 "$ip" true </dev/null; do sleep {poll_seconds}; done
  hosts="$hosts $ip"
done
"""


def await_timeout(timeout_minutes: int) -> dict[str, str]:
    """How long `pulumi up` waits on an object its provider already knows how to await.

    batch/v1 Jobs get no `pulumi.com/waitFor`: pulumi-kubernetes' own Job awaiter
    (provider/pkg/await/job.go, v4.32.0) waits for Complete and fails at once on a Failed
    condition, while a waitFor annotation takes its place (await_test.go: "waitFor annotation
    takes precedence") and would wait out the whole timeout after a failure. Other kinds `pulumi
    up` must wait for are awaited through a batch/v1 gate Job (workloads/step_gate.py).
    """
    return {"pulumi.com/timeoutSeconds": str(timeout_minutes * 60)}


def skip_await() -> dict[str, str]:
    return {"pulumi.com/skipAwait": "true"}
