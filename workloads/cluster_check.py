"""The cluster acceptance test: is a Trainium node group fit for distributed training?

Three stages, each started once the one before it is ready, all in the nxd-llama image
(the Neuron PyTorch DLC, SDK 2.30.0: aws-neuronx-tools puts `neuron-ls` and `nccom-test` in
/opt/aws/neuron/bin, the EFA installer puts `fi_info` in /opt/amazon/efa/bin, and the DLC builds
Open MPI 4.1.5 into /usr/local, on every PATH, and installs sshd; aws-neuron/deep-learning-containers
2.30.0 pytorch/training/2.9.0/Dockerfile.neuronx):

1. ``cluster-check-nodes``, a batch/v1 Job with one pod per node, each taking every Neuron
   device and EFA interface of its node: the Neuron devices and NeuronCores `neuron-ls` sees,
   the EFA devices `fi_info -p efa` sees, the claim mounted read-write as the file system it is (Lustre, or EFS's NFS) with a
   write/read throughput figure. pulumi-kubernetes awaits the Job and fails `pulumi up` as soon
   as it fails (backoffLimit 0: a check that fails once has found something).
2. ``cluster-check-allreduce`` (two nodes or more), an MPIJob: `nccom-test` all-reduce over every
   NeuronCore of every node. The docs of the SDK in the image (aws-neuron/aws-neuron-sdk v2.30.0
   tools/neuron-sys-tools/nccom-test.rst: `-r`, `-N`, `-b/-e/-f`, `-d`, `--hosts`,
   `--non-interactive`) run it on one of the hosts, with NEURON_RT_ROOT_COMM_ID set to that
   host's address and a free port; it starts its ranks on the listed hosts through MPI over SSH
   (the same page, "MPI Execution"). So the
   launcher waits for the workers of the MPI operator's hostfile (`<job>-worker-<i>.<job>.<ns>.svc`, /etc/mpi/hostfile;
   kubeflow/mpi-operator v0.8.0 pkg/controller/mpi_job_controller.go newConfigMap) and runs
   nccom-test on worker 0 over SSH: the operator mounts the same key pair and authorized_keys in
   the launcher and every worker (setupSSHOnPod), and worker 0 has the Neuron devices the tool
   expects where it runs. The launcher writes the table and a PASS/FAIL status under the run's
   directory on FSx.
3. ``cluster-check-verdict``, a batch/v1 Job on a job-support node (the small cmd-shell image:
   it only runs bash and coreutils): waits for that status, prints the one-screen summary (every node's line, the all-reduce table, the verdict) and
   fails when the all-reduce failed or its bus bandwidth is under the floor, so `pulumi up`
   fails. The MPIJob itself is not awaited: `pulumi.com/waitFor` knows only success.

Every run writes under ``/shared/cluster-check/<run>``, a token of everything the stages run
(their rendered manifests), so a re-run after any change never reads an old run's files, and
the verdict, whose script names the directory, is replaced whenever an earlier stage is.
Inside it, each attempt of the per-node Job has its own directory, ``attempts/<Job UID>``, and
``current`` names the latest: an attempt that replaces the Job with unchanged manifests
(`pulumi up --replace`) then never counts a failed attempt's node files, and the launcher and
the verdict created after it read and write only its directory.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from infra.contract import NodeGroup
from infra.facts.instances import NEURON_INSTANCE_TYPES, AllReduceFloor
from workloads import gang_watchdog, pods, quantities
from workloads.kube import JobChain, LayoutArgs, pod_templates
from workloads.settings import ClusterCheckSettings

WORKLOAD = "cluster-check"
SHARED_MOUNT = "/shared"
RESULTS_ROOT = f"{SHARED_MOUNT}/cluster-check"
NEURON_BIN = "/opt/aws/neuron/bin"
FI_INFO = "/opt/amazon/efa/bin/fi_info"
# Where the Neuron device plugin's devices appear in the container: it hands each allocated device
# to the runtime as --device=/dev/neuron<i> (aws-neuron-sdk v2.20.2
# containers/tutorials/k8s-neuron-scheduler-flow.rst, step 11).
DEVICE_FILES = "/dev/neuron"
HOSTFILE = pods.MPI_HOSTFILE
# The Job controller's label on every pod of a Job: the Job's UID (kubernetes/api v0.34.0, the
# Kubernetes 1.34 API, batch/v1/types.go ControllerUidLabel; the unprefixed `controller-uid` is
# kept only for legacy). Read through the downward API, it names the per-node Job's attempt.
JOB_UID_LABEL = "batch.kubernetes.io/controller-uid"
ROOT_COMM_PORT = 45654
# Seconds between polls of the scripts' waits (a test shortens them).
POLL_SECONDS = 10
# The verdict's deadline beyond the launcher's: both Jobs are created when the MPIJob is, and the
# launcher writes its status when its own deadline stops it, so a slow healthy run never fails at
# the verdict first (a few seconds would do; the margin covers a late job-support node).
VERDICT_MARGIN_MINUTES = 15
# All-reduce sizes 1 MiB .. 1 GiB, x4 per step, fp32 (the sizes and type of the Neuron docs'
# multi-instance example); the floor applies to the largest, where bandwidth has levelled off.
NCCOM_SIZES = ("1MB", "1GB", "4")
NCCOM_DATATYPE = "fp32"

# Default bus-bandwidth floors (nccom-test's GB/s at 1 GiB) by instance type, with the reasoning and
# source beside each in infra/facts/instances.py; a type without one needs busBandwidthFloorGBps.
DEFAULT_FLOORS: dict[str, AllReduceFloor] = {
    name: facts.allreduce_floor for name, facts in NEURON_INSTANCE_TYPES.items() if facts.allreduce_floor is not None
}


# neuron-ls prints a table with one row per Neuron device: | device | cores | memory | ...; a
# process continuation row has an empty first cell (aws-neuron-sdk v2.30.0
# tools/neuron-sys-tools/neuron-ls.rst, whose table has a core-IDs column after the cores,
# which the device and core columns read here do not move). "devices cores". Plain neuron-ls: --topology
# only appends a drawing.
NEURON_LS_AWK = "awk -F'|' '$2 ~ /^ *[0-9]+ *$/ {d++; c+=$3} END {print d+0, c+0}'"
# fi_info lists each provider endpoint with a `domain:` line, one domain per EFA device.
EFA_DOMAINS_AWK = "awk '/domain:/ {print $2}' | sort -u | wc -l"
# nccom-test's table rows: size(B) count(elems) type time(us) algbw busbw; the last row is the
# largest size, and its last column the bus bandwidth.
BUSBW_AWK = "awk '$1 ~ /^[0-9]+$/ && NF >= 6 {bw=$NF} END {print bw}'"


def floor_for(group: NodeGroup, settings: ClusterCheckSettings) -> float | None:
    if settings.bus_bandwidth_floor is not None:
        return settings.bus_bandwidth_floor
    default = DEFAULT_FLOORS.get(group.instance_type)
    return default.gbps if default else None


@dataclass(frozen=True)
class CheckLayout(pods.TrainiumLayout):
    settings: ClusterCheckSettings
    # The namespace's id (the cluster's namespaceIds): every stage runs as it, as the jobs do.
    namespace_id: int
    # The Volcano queue when the cluster gang-schedules MPIJobs (Volcano on), else None.
    gang_queue: str | None = None
    # The verdict's image (it needs only bash and coreutils); unset: ``image``.
    verdict_image: str | None = None
    # Set only while rendering the stages to compute ``run`` itself.
    pinned_run: str | None = None
    # The cluster's storage.kind: which file system the claim mounts.
    file_system: str = "fsx"

    @property
    def floor(self) -> float | None:
        """The all-reduce's floor; None for a one-node check, which runs no all-reduce (checks.py
        requires a floor only from two nodes)."""
        return floor_for(self.group, self.settings) if self.settings.nodes > 1 else None

    @property
    def ranks(self) -> int:
        return self.settings.nodes * self.group.neuron_cores

    @property
    def run(self) -> str:
        """A token of everything the stages run: their manifests rendered with a placeholder
        directory. Any change that replaces a stage (settings, image, queue, deadlines, the
        group's facts) makes a new directory, and with it a new verdict."""
        if self.pinned_run is not None:
            return self.pinned_run
        rendered = check_sequence(dataclasses.replace(self, pinned_run="RUN"))
        digest = hashlib.sha256(json.dumps(rendered, sort_keys=True).encode()).hexdigest()[:10]
        return f"{self.settings.run_id}-{digest}"

    @property
    def run_dir(self) -> str:
        return f"{RESULTS_ROOT}/{self.run}"

    @property
    def current_file(self) -> str:
        """Names the latest attempt of the per-node Job, the one the later stages belong to."""
        return f"{self.run_dir}/current"

    @property
    def attempts_dir(self) -> str:
        return f"{self.run_dir}/attempts"


def current_attempt(layout: CheckLayout) -> str:
    """Shell: set ``attempt`` to the latest per-node attempt's directory, or stop. The later
    stages are created only once the per-node Job has completed, so its attempt has written it."""
    return (
        f'id=$(cat {layout.current_file} 2>/dev/null) && [ -n "$id" ] '
        f'|| {{ echo "no per-node check has run in {layout.run_dir}"; exit 1; }}\n'
        f"attempt={layout.attempts_dir}/$id\n"
    )


MEMINFO = "/proc/meminfo"

# --- the training posture, proved on the node ----------------------------------------------------
# The per-node pod runs under the training pods' posture (pods.training_pod/training_container):
# these lines check what that posture could break and no test here can run.
PROC_STATUS = "/proc/self/status"
# `Seccomp: 2` is filter mode, the RuntimeDefault profile applied (proc(5), /proc/pid/status).
SECCOMP_FILTER = "2"
MEMLOCK_COMMAND = "ulimit -l"
FI_PINGPONG = "/opt/amazon/efa/bin/fi_pingpong"
# fi_pingpong's client connects to a server started just before it on the same node.
PINGPONG_SERVER_SECONDS = 2
IMDS_TOKEN_URL = "http://169.254.169.254/latest/api/token"
# An IMDSv2 token request (EC2 user guide, "Use IMDSv2"): a pod that gets one could read the node's
# role credentials next. Exit 0 means the metadata service answered.
IMDS_PROBE = (
    "import urllib.request as u; u.urlopen(u.Request('" + IMDS_TOKEN_URL + "', method='PUT', "
    "headers={'X-aws-ec2-metadata-token-ttl-seconds': '60'}), timeout=3)"
)
# EKS Pod Identity: the webhook gives every container of a pod whose service account has an
# association AWS_CONTAINER_CREDENTIALS_FULL_URI (the node's agent, http://169.254.170.23/v1/credentials)
# and AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE, a projected token of its own (EKS user guide,
# pod-id-how-it-works.html; AWS SDKs reference guide, feature-container-credentials.html;
# aws/amazon-eks-pod-identity-webhook v0.6.9 pkg/handler testdata/containercredentials: it adds the
# volume whatever automountServiceAccountToken says, which the training posture sets false). The agent
# takes the token as the Authorization header and answers JSON with AccessKeyId, SecretAccessKey,
# Token, Expiration, or the EKS Auth error as text (aws/eks-pod-identity-agent d4dc0f3, release
# 0.1.37, pkg/handlers/eks_credential_handler.go HandleRequest, pkg/credentials/model.go,
# pkg/errors/errors.go; the add-on build for Kubernetes 1.34 is v1.3.9-eksbuild.3, offline/plan/fixtures.py,
# and the public repository numbers its releases 0.1.x, so this is its newest source, not a matched
# version). An answer with a key proves the role's trust conditions (infra/components/iam.py) let the
# agent assume it.
POD_IDENTITY_URI_ENV = "AWS_CONTAINER_CREDENTIALS_FULL_URI"
POD_IDENTITY_TOKEN_ENV = "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE"
# Python, not curl (the image's python3 is sure; the agent's error text is the useful part); no
# double quote, dollar or backslash: it is passed inside a double-quoted shell string.
POD_IDENTITY_PROBE = f"""import json, os, sys, urllib.error, urllib.request as u
token = open(os.environ['{POD_IDENTITY_TOKEN_ENV}']).read().strip()
request = u.Request(os.environ['{POD_IDENTITY_URI_ENV}'], headers={{'Authorization': token}})
try:
    answer = json.load(u.urlopen(request, timeout=10))
except urllib.error.HTTPError as e:
    sys.exit('HTTP ' + str(e.code) + ': ' + ' '.join(e.read().decode(errors='replace').split())[:300])
sys.exit(None if answer.get('AccessKeyId') else 'the answer carries no AccessKeyId')
"""
# Where the fixes for a failed posture line are written up.
POSTURE_DOCS = "docs/operations.md#when-a-posture-check-fails"


def posture_checks(identity: str) -> str:
    """Shell: the lines that prove the training posture on a real node, in a pod running as the
    service account ``identity`` (namespace/name), which has a Pod Identity association.

    - seccomp: the pod's RuntimeDefault profile is in force (filter mode).
    - locked memory: without IPC_LOCK (Pod Security baseline refuses it) libfabric registers EFA
      buffers against the container's RLIMIT_MEMLOCK, which is containerd's own on AL2023
      (amazon-eks-ami nodeadm/internal/containerd/base-runtime-spec.json sets only RLIMIT_NOFILE);
      registrations fail with -12 ENOMEM at 64 MiB (awslabs/awsome-distributed-ai#647), so anything
      short of unlimited fails here, with the fix.
    - a Neuron runtime call under that profile: nccom-test on two NeuronCores of this node (the
      runtime's NUMA placement calls, mbind and set_mempolicy, need CAP_SYS_NICE under
      containerd's default profile: containerd contrib/seccomp/seccomp_default.go).
    - an EFA transfer under that profile: fi_pingpong over the EFA provider on this node, when the
      image has it; the all-reduce stage carries EFA traffic between nodes either way.
    - the instance metadata service: an IMDSv2 token request must go unanswered (hop limit 1 and
      the namespace's deny-instance-metadata NetworkPolicy).
    - Pod Identity: the other side of that wall, the agent at 169.254.170.23 answers the pod's token
      with credentials of the namespace's role, under the role's trust conditions.
    """
    return f"""seccomp=$(awk '/^Seccomp:/ {{print $2}}' {PROC_STATUS})
if [ "$seccomp" = {SECCOMP_FILTER} ]; then echo "ok    seccomp: RuntimeDefault in force (filter mode)"; else echo "FAIL  seccomp: mode '$seccomp', not the RuntimeDefault filter the pod asks for"; failed=1; fi
memlock=$({MEMLOCK_COMMAND})
if [ "$memlock" = unlimited ]; then echo "ok    locked memory (ulimit -l): unlimited"; else echo "FAIL  locked memory (ulimit -l): $memlock KiB; EFA registers its buffers against it (no IPC_LOCK): raise containerd's LimitMEMLOCK to infinity in the node user data ({POSTURE_DOCS})"; failed=1; fi
if out=$({NEURON_BIN}/nccom-test -r 2 -b 1KB -e 1MB -f 4 -d {NCCOM_DATATYPE} --non-interactive allr 2>&1); then echo "ok    Neuron runtime under RuntimeDefault seccomp (nccom-test, 2 NeuronCores)"; else echo "FAIL  Neuron runtime under RuntimeDefault seccomp (nccom-test, 2 NeuronCores): ${{out##*$'\n'}} ({POSTURE_DOCS})"; failed=1; fi
if [ -x {FI_PINGPONG} ]; then
  {FI_PINGPONG} -p efa -e rdm >/dev/null 2>&1 & server=$!
  sleep {PINGPONG_SERVER_SECONDS}
  if out=$(timeout 60 {FI_PINGPONG} -p efa -e rdm localhost 2>&1); then echo "ok    EFA transfer under RuntimeDefault seccomp (fi_pingpong)"; else echo "FAIL  EFA transfer under RuntimeDefault seccomp (fi_pingpong): ${{out##*$'\n'}} ({POSTURE_DOCS})"; failed=1; fi
  kill $server 2>/dev/null
else
  echo "info  EFA transfer: no fi_pingpong in the image; the all-reduce stage carries EFA traffic between nodes"
fi
if timeout 10 python3 -c "{IMDS_PROBE}" >/dev/null 2>&1; then echo "FAIL  instance metadata: this pod got an IMDSv2 token, so it could take the node's role: check the launch template's hop limit (1) and the deny-instance-metadata NetworkPolicy ({POSTURE_DOCS})"; failed=1; else echo "ok    instance metadata unreachable from the pod"; fi
if [ -z "${{{POD_IDENTITY_URI_ENV}:-}}" ] || [ -z "${{{POD_IDENTITY_TOKEN_ENV}:-}}" ]; then echo "FAIL  Pod Identity credentials: no {POD_IDENTITY_URI_ENV} in the pod: check the association of {identity} (aws eks list-pod-identity-associations) and the eks-pod-identity-agent add-on ({POSTURE_DOCS})"; failed=1
elif out=$(timeout 30 python3 -c "{POD_IDENTITY_PROBE}" 2>&1); then echo "ok    Pod Identity credentials for {identity} (the agent answered with a key)"
else echo "FAIL  Pod Identity credentials for {identity}: ${{out##*$'\n'}}: check the role's trust conditions (aws:SourceAccount, aws:RequestTag/eks-cluster-arn, kubernetes-namespace, kubernetes-service-account) and kubectl -n kube-system logs ds/eks-pod-identity-agent ({POSTURE_DOCS})"; failed=1; fi
"""


def memory_check(group: NodeGroup) -> str:
    """Shell: the node's MemTotal (what the kubelet reports as memory capacity) beside what the
    cluster stack promises pods (its exported allocatable, infra/specs/system_capacity.py, an
    estimate below EC2's listed memory); a node with less than that fails, because the schedule
    check admitted pods against the promise. Nothing when the stack exports no figure."""
    memory = group.allocatable["memory"] if group.allocatable else None
    amount = quantities.parse(memory) if memory else None
    if amount is None:
        return ""
    promised = int(amount / 2**20)
    return f"""total=$(( $(awk '/^MemTotal:/ {{print $2}}' {MEMINFO}) / 1024 ))
echo "info  memory: MemTotal ${{total}}Mi (the kubelet's capacity; its status.allocatable is that less kube-reserved and eviction); the cluster stack promises pods {promised}Mi"
if [ "$total" -lt {promised} ]; then echo "FAIL  memory: MemTotal ${{total}}Mi is below the {promised}Mi the cluster stack promises pods: lower infra/specs/system_capacity.py's figure"; failed=1; fi
"""


# storage.kind -> how the checks name the file system, and the type `stat -f -c %T` shows for its mount
# (coreutils src/stat.c human_fstype: Lustre's magic "lustre", NFS_SUPER_MAGIC, EFS's NFSv4.1, "nfs").
SHARED_FILE_SYSTEMS = {"fsx": ("FSx", "lustre"), "efs": ("EFS", "nfs")}


def node_script(layout: CheckLayout) -> str:
    """Every check runs and prints its line; the pod fails if any of them failed. A passing pod
    then holds its node (every device) until all ``nodes`` pods have reported, so they report
    from distinct nodes: without the wait, one node could run two pods one after the other while
    a second node never comes up. The Job's deadline ends a wait for a node that never comes.
    Each attempt of the Job writes into its own directory (its UID), so the wait counts only this
    attempt's nodes."""
    g, mib, n = layout.group, layout.settings.fsx_test_mib, layout.settings.nodes
    fs, fs_type = SHARED_FILE_SYSTEMS[layout.file_system]
    return f"""\
set -uo pipefail
node="${{NODE_NAME:-$(hostname)}}"
[ -n "${{JOB_UID:-}}" ] || {{ echo "FAIL  no Job UID (label {JOB_UID_LABEL})"; exit 1; }}
dir={layout.attempts_dir}/$JOB_UID/nodes
failed=0
check() {{ # name, expected, seen
  if [ "$2" = "$3" ]; then echo "ok    $1: $3"; else echo "FAIL  $1: expected $2, seen $3"; failed=1; fi
}}
devices_cores=$({NEURON_BIN}/neuron-ls | {NEURON_LS_AWK})
check "Neuron devices (neuron-ls)" {g.neuron_devices} "${{devices_cores% *}}"
check "NeuronCores (neuron-ls)" {g.neuron_cores} "${{devices_cores#* }}"
# A second count that does not read neuron-ls's table: the device files the device plugin gave us.
check "Neuron device files ({DEVICE_FILES}*)" {g.neuron_devices} "$(ls -d {DEVICE_FILES}[0-9]* 2>/dev/null | wc -l)"
efa=$({FI_INFO} -p efa -t FI_EP_RDM 2>/dev/null | {EFA_DOMAINS_AWK})
check "EFA devices (fi_info -p efa)" {g.efa_interfaces} "$efa"
check "{fs} at {SHARED_MOUNT} (file system type)" {fs_type} "$(stat -f -c %T {SHARED_MOUNT})"
# Reported, not judged: the EKS EFA guide's pods request hugepages-2Mi, which the node must have
# reserved; without them libfabric uses regular pages (README, "Cluster acceptance test").
echo "info  hugepages-2Mi reserved on the node: $(awk '/^HugePages_Total:/ {{print $2}}' {MEMINFO})"
{memory_check(g)}{posture_checks(f"{layout.namespace}/{layout.service_account}")}mkdir -p "$dir" || {{ echo "FAIL  {fs}: cannot create $dir"; exit 1; }}
echo "$JOB_UID" > {layout.current_file}
file="$dir/$node.bin"
# A rate only from a dd that succeeded and printed its "copied" line; a failed dd's last line
# (its error: ENOSPC, EIO, ...) goes to the log instead.
rate() {{
  local out; out=$(dd "$@" bs=1M 2>&1) || {{ echo "dd $*: ${{out##*$'\n'}}" >&2; return 1; }}
  echo "$out" | tail -1 | awk -F', ' '/copied/ {{print $NF}}'
}}
write=$(rate if=/dev/zero of="$file" count={mib} oflag=direct) || write=""
read=$(rate if="$file" of=/dev/null iflag=direct) || read=""
rm -f "$file"
if [ -n "$write" ] && [ -n "$read" ]; then echo "ok    {fs} read-write {mib} MiB: write $write, read $read"; else echo "FAIL  {fs} read-write: write '$write', read '$read'"; failed=1; fi
verdict=$([ $failed = 0 ] && echo PASS || echo FAIL)
echo "NODE $node {g.instance_type} $verdict neuron=${{devices_cores% *}}/{g.neuron_devices} cores=${{devices_cores#* }}/{g.neuron_cores} efa=$efa/{g.efa_interfaces} fsx write $write read $read" | tee "$dir/$node.txt"
[ $failed = 0 ] || exit 1
until [ "$(ls "$dir"/*.txt | wc -l)" -ge {n} ]; do sleep {POLL_SECONDS}; done
"""


def _check_job(
    layout: CheckLayout,
    name: str,
    container: dict[str, Any],
    placement: Mapping[str, Any],
    deadline_minutes: int,
    defaults: Mapping[str, Any],
    parallel_pods: int = 1,
    group: NodeGroup | None = None,
) -> dict[str, Any]:
    """A stage that is a batch/v1 Job: one try (a check that fails once has found something), a
    deadline so a hang releases its nodes, and `pulumi up` waiting a little longer than that
    deadline, so the Job's own DeadlineExceeded is what `up` reports (pulumi-kubernetes' Job
    awaiter fails `up` as soon as the Job fails)."""
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": layout.namespace,
            "annotations": pods.await_timeout(deadline_minutes + 5),
        },
        "spec": {
            "completions": parallel_pods,
            "parallelism": parallel_pods,
            "backoffLimit": 0,
            "activeDeadlineSeconds": deadline_minutes * 60,
            "template": {
                "metadata": pods.pod_metadata(pods.workload_labels(WORKLOAD), group),
                "spec": {
                    **defaults,
                    "serviceAccountName": layout.service_account,
                    **placement,
                    "restartPolicy": "Never",
                    "containers": [container],
                    "volumes": [pods.claim_volume(layout.claim)],
                },
            },
        },
    }


def nodes_job(layout: CheckLayout) -> dict[str, Any]:
    container = {
        "name": "check",
        "image": layout.image,
        "command": pods.mpi_command(["bash", "-c", node_script(layout)]),
        "env": [
            {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
            {"name": "JOB_UID", "valueFrom": {"fieldRef": {"fieldPath": f"metadata.labels['{JOB_UID_LABEL}']"}}},
        ],
        # Every device and interface of the node: one pod per node, and it sees what a job would.
        # The training containers' posture (pods.training_container), as the namespace's id with the
        # MPI pods' passwd entry and home (pods.mpi_command): what passes here passes there.
        **pods.training_container(layout.group, pods.CHECK_REQUESTS),
        "volumeMounts": [pods.claim_mount(SHARED_MOUNT)],
    }
    # The namespace's id, as the jobs run: the namespace's directory on FSx is its own, and the Neuron and
    # EFA device nodes in the container are the pod's user's (containerd's device_ownership_from_security_context,
    # set by the cluster stack's node user data), which neuron-ls, nccom-test and fi_info prove here.
    defaults = {**pods.pod_defaults(run_as_user=layout.namespace_id), **pods.accelerator_placement(layout.group)}
    job = _check_job(
        layout, "cluster-check-nodes", container, {}, layout.settings.timeout_minutes,
        defaults, parallel_pods=layout.settings.nodes, group=layout.group,
    )  # fmt: skip
    if layout.gang_queue is not None:
        through_volcano(job, layout.gang_queue, layout.settings.nodes)
    return job


# Annotations Volcano v1.15.1's PodGroup controller reads (staging/src/volcano.sh/apis/pkg/apis/
# scheduling/v1beta1/labels.go; GroupName scheduling.volcano.sh, register.go l.33).
GROUP_MIN_MEMBER = "scheduling.volcano.sh/group-min-member"
QUEUE_NAME = "scheduling.volcano.sh/queue-name"


def through_volcano(job: dict[str, Any], queue: str, nodes: int) -> None:
    """Schedule a batch/v1 Job's pods with Volcano, as one gang in ``queue``, not with the default
    scheduler beside Volcano on the same Trainium group (two schedulers binding to one free node at
    once: the kubelet refuses one pod for want of Neuron devices, and this Job has no retry).

    volcano v1.15.1 pkg/controllers/podgroup (pg-controller, on by default: cmd/controller-manager/
    app/options/options.go l.47 "*,-sharding-controller"; it handles pods whose schedulerName is
    "volcano", l.39/124): for a pod without a PodGroup it creates ``podgroup-<owner uid>``
    (helpers.go GeneratePodgroupName l.193-207), one for all the Job's pods, with minMember from the
    owner's ``group-min-member`` annotation (pg_controller_handler.go getMinMemberFromUpperRes l.270-289,
    owner annotations inherited by default: options.go l.130) and the queue from the pod's
    ``queue-name`` annotation (buildPodGroupFromPod l.400-402)."""
    job["metadata"]["annotations"] = {**job["metadata"]["annotations"], GROUP_MIN_MEMBER: str(nodes)}
    template = job["spec"]["template"]
    template["metadata"]["annotations"] = {**(template["metadata"].get("annotations") or {}), QUEUE_NAME: queue}
    template["spec"]["schedulerName"] = "volcano"


def launcher_script(layout: CheckLayout) -> str:
    """Waits for every worker (its name resolves and its sshd answers), then runs nccom-test over
    them; the status file is written whatever happens, a stop at the deadline included. It writes
    into the current attempt's directory (a launcher that finds none leaves no status: the verdict
    fails at its deadline)."""
    low, high, factor = NCCOM_SIZES
    s, dir_, floor = layout.settings, '"$attempt"', layout.floor
    assert floor is not None, "an all-reduce runs from two nodes, where checks.py requires a floor"
    return f"""\
set -uo pipefail
{current_attempt(layout)}mkdir -p {dir_}
status=FAIL
trap 'echo $status > "$attempt/allreduce.status"' EXIT
# At the deadline the kubelet sends SIGTERM: say what was still under way, then exit (EXIT trap).
trap 'echo "stopped (deadline) while: $stage" | tee -a {dir_}/allreduce.txt; exit 1' TERM
stage="waiting for {s.nodes} workers (name and sshd)"
echo "$stage" | tee {dir_}/allreduce.txt
{pods.wait_for_mpi_workers(POLL_SECONDS)}first=${{hosts# }}; first=${{first%% *}}
stage="nccom-test"
echo "nccom-test all-reduce, {s.nodes} nodes x {layout.group.neuron_cores} ranks, on $first, hosts:$hosts" | tee -a {dir_}/allreduce.txt
# On worker 0, whose sshd session carries the image's PATH and EFA settings (SESSION_ENV).
# In the background: bash runs a trap only between commands, but at once during `wait`, so a
# hung all-reduce still records its FAIL when the deadline's SIGTERM comes.
(ssh "$first" "NEURON_RT_ROOT_COMM_ID=$first:{ROOT_COMM_PORT} {NEURON_BIN}/nccom-test -r {layout.ranks} -N {s.nodes} \\
  -b {low} -e {high} -f {factor} -d {NCCOM_DATATYPE} --non-interactive allr --hosts$hosts" 2>&1 | tee -a {dir_}/allreduce.txt) &
wait $! || exit 1
# The last row of the table is the largest size; its last column is busbw(GB/s).
busbw=$({BUSBW_AWK} {dir_}/allreduce.txt)
echo "bus bandwidth at {high}: ${{busbw:-none}} GB/s, floor {floor} GB/s" | tee -a {dir_}/allreduce.txt
awk -v bw="${{busbw:-0}}" -v floor={floor} 'BEGIN {{exit !(bw + 0 >= floor)}}' && status=PASS
[ $status = PASS ]
"""


# What the workers' sshd sessions keep of the container's environment (pods.MPI_SESSION_ENV, names
# matched by bash's =~): an SSH session gets a standard PATH, not the image's, and nccom-test's MPI
# run needs the Neuron tools, Open MPI and the EFA settings in every session it starts, on worker 0
# (the launcher's ssh) and on the others (its own mpirun's).
SESSION_ENV = "^(PATH|LD_LIBRARY_PATH|FI_[A-Z_]*|NEURON_[A-Z_]*|CCOM_[A-Z_]*)$"


def allreduce_job(layout: CheckLayout) -> dict[str, Any]:
    s = layout.settings
    # The deadline goes on the launcher Job (kubeflow/mpi-operator v0.8.0 mpi_job_controller.go
    # newLauncherJob). AtStartup creates that Job with the workers (syncHandler), so its deadline
    # runs while they are scheduled and started: workers that never all become Ready (a node that
    # never comes) fail the launcher at the deadline, the MPIJob finishes, and cleanPodPolicy
    # Running deletes its running and pending workers (cleanUpWorkerPods / deleteWorkerPods),
    # releasing their nodes - as it does for a hung all-reduce. With WaitForWorkersReady no
    # launcher, and no deadline, would exist until every worker is Ready.
    policy: dict[str, Any] = {
        "cleanPodPolicy": "Running",
        "backoffLimit": 0,
        "activeDeadlineSeconds": s.timeout_minutes * 60,
    }
    if layout.gang_queue is not None:
        # The launcher exists from the start and joins the gang (decoratePodTemplateSpec): the
        # gang is the workers plus the launcher, the operator's own default (calculateMinAvailable).
        policy["schedulingPolicy"] = {"queue": layout.gang_queue, "minAvailable": s.nodes + 1}
    worker = {
        "name": "worker",
        "image": layout.image,
        "command": pods.mpi_worker_command(),
        "env": pods.env_list({**pods.EFA_ENV, "CCOM_SOCKET_IFNAME": "eth0", pods.MPI_SESSION_ENV: SESSION_ENV}),
        # The NxD Training MPI workers' posture: sshd as the namespace's id, no capability.
        **pods.training_container(layout.group, pods.CHECK_REQUESTS),
        "volumeMounts": [pods.shm_mount()],
    }
    # The nxd-llama image: the launcher needs ssh, which the small cmd-shell image lacks.
    launcher = {
        "name": "launcher",
        "image": layout.image,
        "command": pods.mpi_command(["bash", "-c", launcher_script(layout)]),
        "resources": {"requests": {"cpu": "1", "memory": "2Gi"}, "limits": {"cpu": "2", "memory": "4Gi"}},
        "securityContext": pods.accelerator_security_context(),
        "volumeMounts": [pods.claim_mount(SHARED_MOUNT)],
    }
    return {
        "apiVersion": "kubeflow.org/v2beta1",
        "kind": "MPIJob",
        "metadata": {
            "name": "cluster-check-allreduce",
            "namespace": layout.namespace,
            "annotations": {
                **pods.skip_await(),
                **gang_watchdog.pending_bound(s.pending_timeout_minutes),
                **gang_watchdog.stop_by(layout.group),
            },
        },
        "spec": {
            "slotsPerWorker": 1,
            "sshAuthMountPath": pods.MPI_SSH_AUTH_MOUNT_PATH,
            "launcherCreationPolicy": "AtStartup",
            "runPolicy": policy,
            "mpiReplicaSpecs": {
                "Launcher": {
                    "replicas": 1,
                    # One try: its status file says what happened, and a retry would only wait again.
                    "restartPolicy": "Never",
                    "template": pods.mpi_launcher_template(
                        WORKLOAD,
                        layout.service_account,
                        layout.support_placement,
                        launcher,
                        (pods.claim_volume(layout.claim),),
                        namespace_id=layout.namespace_id,
                    ),
                },
                "Worker": {
                    "replicas": s.nodes,
                    "template": pods.mpi_worker_template(
                        WORKLOAD,
                        layout.group,
                        layout.service_account,
                        worker,
                        (pods.shm_volume(),),
                        namespace_id=layout.namespace_id,
                    ),
                },
            },
        },
    }


def verdict_script(layout: CheckLayout) -> str:
    dir_, n = '"$attempt"', layout.settings.nodes
    collective = n > 1
    wait = (
        f"""\
until [ -f {dir_}/allreduce.status ]; do sleep {POLL_SECONDS}; done
echo; cat {dir_}/allreduce.txt
"""
        if collective
        else ""
    )
    allreduce = f"allreduce=$(cat {dir_}/allreduce.status)" if collective else "allreduce=SKIPPED"
    floor = f" (floor {layout.floor} GB/s at 1 GiB)" if collective else " (one node)"
    return f"""\
set -uo pipefail
{current_attempt(layout)}{wait}echo; echo "== cluster check {layout.run} (attempt $id): {n} x {layout.group.instance_type} ({layout.group.name})"
cat {dir_}/nodes/*.txt
seen=$(ls {dir_}/nodes/*.txt 2>/dev/null | wc -l)
failed=$(cat {dir_}/nodes/*.txt 2>/dev/null | grep -c ' FAIL ')
[ "$seen" = {n} ] || {{ echo "$seen of {n} nodes reported"; failed=1; }}
{allreduce}
echo "all-reduce: $allreduce{floor}"
if [ "$failed" = 0 ] && [ "$allreduce" != FAIL ]; then echo "RESULT PASS"; else echo "RESULT FAIL"; exit 1; fi
"""


def verdict_deadline_minutes(layout: CheckLayout) -> int:
    """Created with the MPIJob, as the launcher Job is: the launcher's deadline plus a margin."""
    return layout.settings.timeout_minutes + VERDICT_MARGIN_MINUTES


def verdict_job(layout: CheckLayout) -> dict[str, Any]:
    container = {
        "name": "verdict",
        "image": layout.verdict_image or layout.image,
        "command": ["bash", "-c", verdict_script(layout)],
        "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"cpu": "500m", "memory": "256Mi"}},
        # It only reads the results on FSx.
        "securityContext": pods.container_security_context(read_only_root=True),
        "volumeMounts": [{**pods.claim_mount(SHARED_MOUNT), "readOnly": True}],
    }
    # The namespace's id: it reads what the other stages wrote in the namespace's directory, which is
    # that id's alone. A launcher that never starts leaves no status: the deadline turns that into a failure.
    return _check_job(
        layout, "cluster-check-verdict", container, pods.support_placement(layout.support_placement),
        verdict_deadline_minutes(layout), pods.pod_defaults(run_as_user=layout.namespace_id),
    )  # fmt: skip


# cluster-autoscaler v1.34.2 (what chart 9.53.0 runs, infra/facts/versions.py) cluster-autoscaler/FAQ.md
# l.111-115, "What types of pods can prevent CA from removing a node?": pods annotated
# safe-to-evict "false". The check's pods request little CPU and memory (pods.CHECK_REQUESTS), so
# their nodes look underused to the autoscaler's scale-down, which would evict them mid-check (the
# per-node stage and the all-reduce wait for each other: a moved pod fails the attempt).
NOT_EVICTABLE = {"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"}


def _not_evictable(manifest: dict[str, Any]) -> dict[str, Any]:
    for template in pod_templates(manifest["spec"]):
        metadata = template.setdefault("metadata", {})
        metadata["annotations"] = {**(metadata.get("annotations") or {}), **NOT_EVICTABLE}
    return manifest


def check_sequence(layout: CheckLayout) -> list[dict[str, Any]]:
    stages = [nodes_job(layout)]
    if layout.settings.nodes > 1:
        stages.append(allreduce_job(layout))
    return [_not_evictable(m) for m in stages + [verdict_job(layout)]]


def summary(layout: CheckLayout) -> dict[str, Any]:
    """What the stack outputs say about the check: what it expects and where its result is."""
    g, s = layout.group, layout.settings
    return {
        "run": layout.run,
        "nodeGroup": g.name,
        "instanceType": g.instance_type,
        "nodes": s.nodes,
        "expectedPerNode": {
            "neuronDevices": g.neuron_devices,
            "neuronCores": g.neuron_cores,
            "efaInterfaces": g.efa_interfaces,
        },
        "allReduce": {
            "ranks": layout.ranks,
            "floorGBps": layout.floor,
            "floorSource": "busBandwidthFloorGBps" if s.bus_bandwidth_floor else DEFAULT_FLOORS[g.instance_type].source,
        }
        if s.nodes > 1
        else None,
        "summary": f"kubectl logs -n {layout.namespace} job/cluster-check-verdict",
        "results": layout.run_dir,
    }


class ClusterCheck(JobChain):
    def __init__(self, name: str, args: LayoutArgs[CheckLayout], opts: pulumi.ResourceOptions | None = None) -> None:
        # The launcher's ssh to worker 0, worker 0's MPI run and the collectives' bootstrap between
        # the workers: peers only (infra/specs/pod_security.py peers_policy).
        super().__init__(
            "trainium:workloads:ClusterCheck",
            name,
            pods.peers_policy(WORKLOAD, args.layout.namespace),
            check_sequence(args.layout),
            args.after,
            opts,
        )
        # check_sequence ends with verdict_job, a batch/v1 Job (a k8s.batch.v1.Job, workloads/kube.py declare).
        self.verdict: k8s.batch.v1.Job = self.jobs[-1]
