"""The cluster acceptance test (`clusterCheck`), rendered and run.

The rendered objects are checked against the cluster stack's outputs (counts, selectors,
tolerations), the tools' documented flags and output formats (aws-neuron/aws-neuron-sdk v2.20.2,
the docs of the SDK in our nxd-llama image: tools/neuron-sys-tools/nccom-test.rst and
neuron-ls.rst), and the MPI operator's hostfile (kubeflow/mpi-operator v0.8.0). The scripts run
here under bash with stand-ins for the tools that print their documented formats.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from offline.plan.runner import PlanResult
from tests.checkov_scan import (
    kubernetes_objects,
    pod_templates,
)  # kubernetes_objects: offline/report/plan_output.py's
from tests.node_groups import trainium_group
from tests.test_workloads import manifest
from workloads import cluster_check, pods

JOB_SUPPORT = {"role": "job-support"}
SUPPORT = {"nodeSelector": JOB_SUPPORT, "tolerations": []}


def spec(result: PlanResult, kind: str, name: str) -> dict[str, Any]:
    return manifest(result, kind, name)["spec"]


def script(container: dict[str, Any]) -> str:
    """The bash script a container runs, under the MPI pods' passwd entry (pods.MPI_USER) or not."""
    command = container["command"]
    command = command[1:] if command[0] == pods.MPI_USER else command
    assert command[:2] == ["bash", "-c"]
    return command[2]


# --- what is declared ----------------------------------------------------------------------------


def test_one_pod_per_node_owning_every_device_with_counts_from_the_cluster(workloads_dev: PlanResult) -> None:
    job = spec(workloads_dev, "Job", "cluster-check-nodes")
    assert job["completions"] == job["parallelism"] == 2 and job["backoffLimit"] == 0
    assert job["activeDeadlineSeconds"] == 3600  # a hung check releases its nodes
    pod = job["template"]["spec"]
    assert pod["nodeSelector"]["node.kubernetes.io/instance-type"] == "trn1.32xlarge"
    assert {"key": "aws.amazon.com/neuron", "operator": "Equal", "value": "true", "effect": "NoSchedule"} in pod[
        "tolerations"
    ]
    (container,) = pod["containers"]
    assert container["resources"]["limits"] == {"aws.amazon.com/neuron": "16", "vpc.amazonaws.com/efa": "8"}
    text = script(container)
    assert 'check "Neuron devices (neuron-ls)" 16 ' in text and 'check "NeuronCores (neuron-ls)" 32 ' in text
    assert 'check "EFA devices (fi_info -p efa)" 8 ' in text
    # Awaited by pulumi-kubernetes' Job awaiter (fails `up` on Failed), not by waitFor.
    annotations = manifest(workloads_dev, "Job", "cluster-check-nodes")["metadata"]["annotations"]
    assert "pulumi.com/waitFor" not in annotations and annotations["pulumi.com/timeoutSeconds"] == str(3600 + 300)


def test_expected_counts_follow_the_cluster_outputs(workloads_with) -> None:
    def fewer(outputs: dict[str, Any]) -> None:
        group = next(g for g in outputs["acceleratorNodeGroups"] if g["name"] == "trn1-32xl-ng1")
        group.update(neuronDevices=12, neuronCores=24, efaInterfaces=4)

    result = workloads_with(cluster=fewer, nxdLlama=None, rayLlama2=None)
    text = script(spec(result, "Job", "cluster-check-nodes")["template"]["spec"]["containers"][0])
    assert 'check "Neuron devices (neuron-ls)" 12 ' in text and 'check "EFA devices (fi_info -p efa)" 4 ' in text
    launcher = spec(result, "MPIJob", "cluster-check-allreduce")["mpiReplicaSpecs"]["Launcher"]
    assert "nccom-test -r 48 -N 2 " in script(launcher["template"]["spec"]["containers"][0])


def test_allreduce_runs_nccom_test_from_the_launcher_over_every_core(workloads_dev: PlanResult) -> None:
    job = spec(workloads_dev, "MPIJob", "cluster-check-allreduce")
    # kubeflow/mpi-operator v0.8.0 pkg/controller/mpi_job_controller.go: runPolicy.activeDeadlineSeconds
    # becomes the launcher Job's (newLauncherJob); with AtStartup that Job exists from the start
    # (syncHandler), so workers that never all become Ready still meet a deadline, and a finished
    # MPIJob's running and pending workers are deleted (cleanPodPolicy Running, deleteWorkerPods).
    # With WaitForWorkersReady no launcher - and no deadline - exists until every worker is Ready.
    assert job["runPolicy"]["activeDeadlineSeconds"] == 3600 and job["runPolicy"]["cleanPodPolicy"] == "Running"
    assert job["launcherCreationPolicy"] == "AtStartup"
    # The launcher joins the gang from the start (podgroup.go calculateMinAvailable's default: workers + 1).
    assert job["runPolicy"]["schedulingPolicy"] == {"queue": "test", "minAvailable": 3}
    assert job["mpiReplicaSpecs"]["Launcher"]["restartPolicy"] == "Never"
    workers, launcher = job["mpiReplicaSpecs"]["Worker"], job["mpiReplicaSpecs"]["Launcher"]
    assert workers["replicas"] == 2
    assert workers["template"]["spec"]["containers"][0]["resources"]["limits"] == {
        "aws.amazon.com/neuron": "16",
        "vpc.amazonaws.com/efa": "8",
    }
    assert launcher["template"]["spec"]["nodeSelector"] == JOB_SUPPORT
    text = script(launcher["template"]["spec"]["containers"][0])
    # nccom-test.rst: -r total ranks, -N nodes, -b/-e/-f sizes, -d type, --hosts, and
    # NEURON_RT_ROOT_COMM_ID = the first host's IP address and a free port.
    # Run on worker 0 (the first host), as the SDK's docs run it, with its address as the root. Not
    # root: no OMPI_ALLOW_RUN_AS_ROOT consent for nccom-test's mpirun.
    assert 'ssh "$first" "NEURON_RT_ROOT_COMM_ID=$first:45654 /opt/aws/neuron/bin/nccom-test -r 64 -N 2' in text
    assert "-b 1MB -e 1GB -f 4 -d fp32 --non-interactive allr --hosts$hosts" in text
    assert "awk '{print $1}' /etc/mpi/hostfile" in text and "floor=20.0" in text
    # Processes mpirun starts over SSH see the image's PATH and EFA settings: the worker's sshd (as the
    # namespace's id, mpi-sshd) sets what MPI_SESSION_ENV names in every session (SetEnv).
    worker = workers["template"]["spec"]["containers"][0]
    assert worker["command"] == [pods.MPI_USER, pods.MPI_SSHD]
    env = {e["name"]: e.get("value") for e in worker["env"]}
    assert not any(name.startswith("OMPI_ALLOW_RUN_AS_ROOT") for name in env)
    assert {"FI_PROVIDER", "FI_EFA_USE_DEVICE_RDMA"} <= set(env)
    # The keep pattern, matched as mpi-sshd matches it (bash's =~ on each name).
    names = ["PATH", "LD_LIBRARY_PATH", "FI_PROVIDER", "NEURON_RT_ROOT_COMM_ID", "CCOM_SOCKET_IFNAME", "HOME",
             "OMPI_MCA_plm_rsh_args", "XFI_PROVIDER", "PATHS"]  # fmt: skip
    matched = subprocess.run(
        ["bash", "-c", 'for n in "${@:2}"; do if [[ $n =~ $1 ]]; then echo "$n"; fi; done', "match", env[pods.MPI_SESSION_ENV], *names],
        capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    assert matched == ["PATH", "LD_LIBRARY_PATH", "FI_PROVIDER", "NEURON_RT_ROOT_COMM_ID", "CCOM_SOCKET_IFNAME"]
    # The operator mounts the job's keys in the namespace id's ~/.ssh; every pod runs as that id.
    assert job["sshAuthMountPath"] == pods.MPI_SSH_AUTH_MOUNT_PATH == "/home/mpiuser/.ssh"
    for replica in (workers, launcher):
        context = replica["template"]["spec"]["securityContext"]
        assert context["runAsUser"] == context["runAsGroup"] == 20001 and context["runAsNonRoot"] is True


def test_verdict_fails_up_and_runs_on_the_job_support_group(workloads_dev: PlanResult) -> None:
    verdict = manifest(workloads_dev, "Job", "cluster-check-verdict")
    job = verdict["spec"]
    # Created with the MPIJob, as the launcher Job is (AtStartup): its deadline covers the
    # launcher's (3600 s) with a margin, so a slow healthy run is never failed here first.
    assert job["backoffLimit"] == 0 and job["activeDeadlineSeconds"] == 3600 + 900
    # The small image (bash and coreutils are all it runs), not the multi-GB nxd-llama one.
    assert "/cmd-shell:" in job["template"]["spec"]["containers"][0]["image"]
    assert int(verdict["metadata"]["annotations"]["pulumi.com/timeoutSeconds"]) > job["activeDeadlineSeconds"]
    assert job["template"]["spec"]["nodeSelector"] == JOB_SUPPORT
    outputs = workloads_dev.outputs["workloads"]["clusterCheck"]
    assert outputs["expectedPerNode"] == {"neuronDevices": 16, "neuronCores": 32, "efaInterfaces": 8}
    assert outputs["allReduce"]["floorGBps"] == 20.0 and outputs["summary"].endswith("job/cluster-check-verdict")


def test_stages_run_in_order(workloads_dev: PlanResult) -> None:
    by_name = {
        r.inputs["metadata"]["name"]: r
        for r in workloads_dev.registrations
        if r.inputs.get("metadata", {}).get("name", "").startswith("cluster-check")
    }
    assert by_name["cluster-check-nodes"].urn in by_name["cluster-check-allreduce"].dependencies
    assert by_name["cluster-check-allreduce"].urn in by_name["cluster-check-verdict"].dependencies


def test_a_new_run_id_is_a_new_run(workloads_dev: PlanResult, workloads_with) -> None:
    first = cluster_check_dir(workloads_dev)
    again = cluster_check_dir(workloads_with(clusterCheck={"nodeGroup": "trn1-32xl-ng1", "nodes": 2, "runId": "2"}))
    assert first != again and again.startswith("/shared/cluster-check/2-")


# Each of these changes what a stage runs, so `pulumi up` replaces that stage (replace_on_changes
# on spec, workloads/kube.py): the re-run must write to a new directory, or the verdict would read
# the previous run's allreduce.status at once and count the previous run's nodes/ files too.
@pytest.mark.parametrize(
    "change",
    [{"timeoutMinutes": 45}, {"queue": "other"}, {"imageTag": "v2"}, {"fsxTestMib": 512}, {"nodes": 3},
     {"busBandwidthFloorGBps": 30}],
)  # fmt: skip
def test_every_change_to_what_runs_is_a_new_run(workloads_dev: PlanResult, workloads_with, change) -> None:
    def add_queue(outputs: dict[str, Any]) -> None:
        test = next(q for q in outputs["volcanoQueues"] if q["name"] == "test")
        outputs["volcanoQueues"].append({**test, "name": "other"})

    before = cluster_check_dir(workloads_dev)
    # Three check nodes and BERT's two would not fit trn1-32xl-ng1 (maxSize 4) together (workloads/schedule.py).
    others = {"bertPretraining": None} if change.get("nodes", 2) > 2 else {}
    result = workloads_with(
        cluster=add_queue, clusterCheck={"nodeGroup": "trn1-32xl-ng1", "nodes": 2, **change}, **others
    )
    after = cluster_check_dir(result)
    assert after != before
    # The verdict names the directory, so it is replaced (and waits for the new status) too.
    verdict = script(spec(result, "Job", "cluster-check-verdict")["template"]["spec"]["containers"][0])
    assert f"id=$(cat {after}/current" in verdict and f"attempt={after}/attempts/$id" in verdict


def test_a_change_in_the_group_is_a_new_run(workloads_dev: PlanResult, workloads_with) -> None:
    def fewer(outputs: dict[str, Any]) -> None:
        next(g for g in outputs["acceleratorNodeGroups"] if g["name"] == "trn1-32xl-ng1").update(efaInterfaces=4)

    assert cluster_check_dir(workloads_with(cluster=fewer)) != cluster_check_dir(workloads_dev)


def test_an_unchanged_check_keeps_its_run(workloads_dev: PlanResult, workloads_with) -> None:
    # Nothing is replaced by an unchanged `up`, so the token must be stable between renders.
    assert cluster_check_dir(workloads_with()) == cluster_check_dir(workloads_dev)


def test_a_from_zero_start_needs_at_least_30_minutes(workloads_with) -> None:
    message = refusal(workloads_with, clusterCheck={"nodeGroup": "trn1-32xl-ng1", "timeoutMinutes": 20})
    assert "clusterCheck.timeoutMinutes" in message and "30" in message


def cluster_check_dir(result: PlanResult) -> str:
    return result.outputs["workloads"]["clusterCheck"]["results"]


# --- what is refused ------------------------------------------------------------------------------


def refusal(workloads_with, **overrides: Any) -> str:
    with pytest.raises(Exception) as err:
        workloads_with(**overrides)
    return str(err.value)


def no_efa(outputs: dict[str, Any]) -> None:
    outputs["acceleratorNodeGroups"].append(
        {
            "name": "trn1-2xl",
            "instanceType": "trn1.2xlarge",
            "azId": "usw2-az4",
            "azName": "us-west-2d",
            "neuronDevices": 1,
            "neuronCores": 2,
            "efaInterfaces": 0,
            "labels": {"instance-type": "trn1-2xl"},
            "taints": [],
            "minSize": 0,
            "maxSize": 2,
            "capacityType": "ON_DEMAND",
        }
    )


def test_a_group_without_efa_is_refused_for_the_multi_node_part(workloads_with) -> None:
    message = refusal(workloads_with, cluster=no_efa, clusterCheck={"nodeGroup": "trn1-2xl", "nodes": 2})
    assert (
        "trainium-workloads:clusterCheck.nodeGroup = 'trn1-2xl': trn1.2xlarge nodes have no EFA interfaces" in message
    )


def trn2(outputs: dict[str, Any]) -> None:
    outputs["acceleratorNodeGroups"].append(
        {
            "name": "trn2",
            "instanceType": "trn2.48xlarge",
            "azId": "usw2-az4",
            "azName": "us-west-2d",
            "neuronDevices": 16,
            "neuronCores": 128,
            "efaInterfaces": 16,
            "labels": {"instance-type": "trn2-48xl"},
            "taints": [],
            "minSize": 0,
            "maxSize": 2,
            "capacityType": "ON_DEMAND",
        }
    )


def inf2(outputs: dict[str, Any]) -> None:
    outputs["acceleratorNodeGroups"].append(
        {
            "name": "inf2",
            "instanceType": "inf2.xlarge",
            "azId": "usw2-az4",
            "azName": "us-west-2d",
            "neuronDevices": 1,
            "neuronCores": 2,
            "efaInterfaces": 0,
            "labels": {"instance-type": "inf2-xl"},
            "taints": [],
            "minSize": 0,
            "maxSize": 2,
            "capacityType": "ON_DEMAND",
        }
    )


# No floor set: a one-node check runs no all-reduce, so checks.py asks for none (it requires one
# only from two nodes) and the program must not need one either.
@pytest.mark.parametrize("group, edit", [("trn1-2xl", no_efa), ("inf2", inf2), ("trn2", trn2)])
def test_one_node_is_checked_alone_without_a_floor(workloads_with, group, edit) -> None:
    result = workloads_with(cluster=edit, clusterCheck={"nodeGroup": group, "nodes": 1})
    assert not [r for r in result.registrations if r.type.endswith(":MPIJob") and "cluster-check" in r.name]
    text = script(spec(result, "Job", "cluster-check-nodes")["template"]["spec"]["containers"][0])
    efa = 16 if group == "trn2" else 0
    assert f'check "EFA devices (fi_info -p efa)" {efa} ' in text
    assert result.outputs["workloads"]["clusterCheck"]["allReduce"] is None
    verdict = script(spec(result, "Job", "cluster-check-verdict")["template"]["spec"]["containers"][0])
    assert "allreduce=SKIPPED" in verdict and "floor" not in verdict


def test_trainium2_has_a_default_floor_and_a_set_one_wins(workloads_with) -> None:
    result = workloads_with(cluster=trn2, clusterCheck={"nodeGroup": "trn2", "nodes": 2})
    all_reduce = result.outputs["workloads"]["clusterCheck"]["allReduce"]
    assert all_reduce["floorGBps"] == 20.0 and "3,200 Gbps of EFA" in all_reduce["floorSource"]
    result = workloads_with(cluster=trn2, clusterCheck={"nodeGroup": "trn2", "nodes": 2, "busBandwidthFloorGBps": 50})
    assert result.outputs["workloads"]["clusterCheck"]["allReduce"]["floorGBps"] == 50


def test_a_type_without_a_default_floor_needs_one(workloads_with, monkeypatch) -> None:
    # Every EFA type in the catalog has a default; a row added without one must not plan without a floor.
    # runId 2: a config no other test plans, since plans are cached by their config.
    monkeypatch.delitem(cluster_check.DEFAULT_FLOORS, "trn2.48xlarge")
    message = refusal(workloads_with, cluster=trn2, clusterCheck={"nodeGroup": "trn2", "nodes": 2, "runId": "2"})
    assert "trainium-workloads:clusterCheck.busBandwidthFloorGBps: required for trn2.48xlarge nodes" in message


@pytest.mark.parametrize("value, expected", [(0, "greater than 0"), (True, "a number, not true/false"), ("", "")])
def test_bad_floors_are_refused_by_key(workloads_with, value: Any, expected: str) -> None:
    message = refusal(workloads_with, clusterCheck={"nodeGroup": "trn1-32xl-ng1", "busBandwidthFloorGBps": value})
    assert "clusterCheck.busBandwidthFloorGBps" in message and expected in message


def test_the_verdict_image_must_exist_too(workloads_with) -> None:
    # The verdict runs cmd-shell: a cluster stack without that repository is refused by key.
    def no_cmd_shell(outputs: dict[str, Any]) -> None:
        del outputs["ecrRepositories"]["cmd-shell"]

    message = refusal(workloads_with, cluster=no_cmd_shell, tensorboard=None, dataStaging=None)
    assert "trainium-workloads:clusterCheck: the cluster stack exports no image repository 'cmd-shell'" in message


def test_prod_has_it_off(workloads_prod: PlanResult) -> None:
    assert "clusterCheck" not in workloads_prod.outputs["workloads"]
    assert not [r for r in workloads_prod.registrations if "cluster-check" in r.name]


# --- the scripts, run ----------------------------------------------------------------------------


def neuron_ls_table(devices: int, cores: int) -> str:
    """A table in neuron-ls's documented layout (neuron-ls.rst): | device | cores | memory | ... |"""
    rule = "+--------+--------+--------+---------------+---------+"
    rows = [
        rule,
        "| NEURON | NEURON | NEURON |   CONNECTED   |   PCI   |",
        "| DEVICE | CORES  | MEMORY |    DEVICES    |   BDF   |",
        rule,
    ]
    rows += [f"| {d:<6} | {cores:<6} | 32 GB  | {d}, {d}          | 00:{d:02x}.0 |" for d in range(devices)]
    return "\n".join([*rows, rule, "Neuron Device Topology"])


def stub(bin_dir: Path, name: str, output: str, stream: str = "stdout", status: int = 0) -> None:
    target = ">&2" if stream == "stderr" else ""
    (bin_dir / name).write_text(f"#!/bin/bash\ncat {target} <<'OUT'\n{output}\nOUT\nexit {status}\n")
    (bin_dir / name).chmod(0o755)


POD_IDENTITY_TOKEN = "eyJ.pod-identity-token"
# What the EKS Pod Identity agent answers (aws/eks-pod-identity-agent d4dc0f3 pkg/handlers/
# eks_credential_handler.go: JSON credentials, or http.Error with pkg/errors/errors.go's
# "[request id] (code): message, fault: ..." and EKS Auth's status).
AGENT_ANSWERS = {
    "/v1/credentials": (
        200,
        json.dumps(
            {
                "AccessKeyId": "ASIAEXAMPLE",
                "SecretAccessKey": "s",
                "Token": "t",
                "AccountId": "111122223333",
                "Expiration": "2026-11-24T23:00:00Z",
            }
        ),
    ),
    "/denied": (
        400,
        "[0f1e] (AccessDeniedException): Unauthorized Exception! EKS does not have permissions to assume "
        "the associated role., fault: client\n",
    ),
    "/empty": (200, "{}"),
}


class _FakeAgent(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        status, body = (
            AGENT_ANSWERS[self.path] if self.headers.get("Authorization") == POD_IDENTITY_TOKEN else (400, "bad token")
        )
        self.send_response(status)
        self.end_headers()
        self.wfile.write(body.encode())

    def log_message(self, *args: Any) -> None:
        pass


@functools.cache
def fake_agent() -> str:
    """A stand-in for the node's Pod Identity agent (169.254.170.23), shared by the module's tests."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _FakeAgent)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{server.server_port}"


DD_OK = "1073741824 bytes (1.1 GB, 1.0 GiB) copied, 1.5 s, 716 MB/s"


def attempt_dir(shared: Path, uid: str) -> Path:
    """An attempt's directory in the sandbox: the per-node Job with this UID wrote it."""
    return Path(_layout().attempts_dir.replace(cluster_check.SHARED_MOUNT, str(shared))) / uid


# --- running the scripts -------------------------------------------------------------------------
# In a cluster each script polls every POLL_SECONDS; here every 5 ms, and each round is counted
# in a file outside the shared tree, so a test sees a script wait (still running after rounds of
# its poll) instead of sitting out a timeout.
POLL_ROUNDS = "poll-rounds"


def fast_polls(text: str, sandbox: Path) -> str:
    return text.replace(f"sleep {cluster_check.POLL_SECONDS}", f"{{ echo >> '{sandbox / POLL_ROUNDS}'; sleep 0.005; }}")


def poll_rounds(sandbox: Path) -> int:
    rounds = sandbox / POLL_ROUNDS
    return len(rounds.read_text().splitlines()) if rounds.exists() else 0


def keeps_waiting(command: list[str], env: dict[str, str] | None, sandbox: Path, rounds: int = 10) -> bool:
    """Whether the script is still running once it has polled ``rounds`` more times (then it is
    stopped, as a timeout would have)."""
    start, deadline = poll_rounds(sandbox), time.monotonic() + 30
    with subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) as process:
        try:
            while poll_rounds(sandbox) < start + rounds:
                if process.poll() is not None:
                    return False
                assert time.monotonic() < deadline, "the script neither finished nor polled within 30 s"
                time.sleep(0.005)
            return process.poll() is None
        finally:
            process.kill()


def node_script_command(
    tmp_path: Path,
    devices: int,
    efa_domains: int,
    dd: tuple[str, int] = (DD_OK, 0),
    peers: int = 1,
    uid: str = "job-a",
    device_files: int | None = None,
    seccomp: str = "2",
    memlock: str = "unlimited",
    runtime: tuple[str, int] = ("ok", 0),
    imds_answers: bool = False,
    pingpong: tuple[str, int] | None = None,
    pod_identity: str | None = "/v1/credentials",
) -> tuple[list[str], dict[str, str]]:
    """The per-node script on node ip-100-64-1-1 of a 2-node check, in the per-node Job with UID
    ``uid``; ``peers`` other nodes of that attempt have reported. A second call with the same
    ``tmp_path`` is a second attempt on the same FSx. The posture the node shows: ``seccomp`` mode,
    ``ulimit -l``, nccom-test's output and status, whether the metadata service answers,
    fi_pingpong's (None: not in the image), and the path the Pod Identity agent answers the pod's
    credentials request on (an AGENT_ANSWERS key; None: the pod has no association)."""
    layout = _layout()
    bin_dir, shared = tmp_path / "bin", tmp_path / "shared"
    bin_dir.mkdir(exist_ok=True)
    shared.mkdir(exist_ok=True)
    stub(bin_dir, "neuron-ls", neuron_ls_table(devices, 2))
    stub(bin_dir, "nccom-test", runtime[0], status=runtime[1])
    # The metadata probe is stubbed; the Pod Identity probe runs for real against the fake agent.
    (bin_dir / "python3").write_text(
        f'#!/bin/bash\ncase "$*" in *169.254.169.254*) exit {0 if imds_answers else 1};; esac\n'
        f'exec {sys.executable} -I -S "$@"\n'
    )  # -I -S: the stdlib only, a quick start
    (bin_dir / "python3").chmod(0o755)
    if pingpong is not None:
        stub(bin_dir, "fi_pingpong", pingpong[0], status=pingpong[1])
    (tmp_path / "status").write_text(f"Name:\tbash\nSeccomp:\t{seccomp}\n")
    dev = tmp_path / "dev"
    dev.mkdir(exist_ok=True)
    for d in range(devices if device_files is None else device_files):
        (dev / f"neuron{d}").touch()
    fi_info = "\n".join(
        f"provider: efa\n    fabric: efa\n    domain: rdmap{i}s0-rdm\n    version: 120.0\n    type: FI_EP_RDM"
        for i in range(efa_domains)
    )
    stub(bin_dir, "fi_info", fi_info)
    stub(bin_dir, "stat", "lustre")
    stub(bin_dir, "dd", dd[0], "stderr", dd[1])
    nodes = attempt_dir(shared, uid) / "nodes"
    nodes.mkdir(parents=True, exist_ok=True)
    for i in range(peers):
        (nodes / f"ip-100-64-2-{i}.txt").write_text("NODE ip-100-64-2-{i} trn1.32xlarge PASS\n")
    text = fast_polls(
        cluster_check.node_script(layout)
        .replace(cluster_check.NEURON_BIN, str(bin_dir))
        .replace(cluster_check.FI_INFO, str(bin_dir / "fi_info"))
        .replace(cluster_check.FI_PINGPONG, str(bin_dir / "fi_pingpong"))
        .replace(f"sleep {cluster_check.PINGPONG_SERVER_SECONDS}", "sleep 0.01")
        .replace(cluster_check.PROC_STATUS, str(tmp_path / "status"))
        .replace(f"memlock=$({cluster_check.MEMLOCK_COMMAND})", f"memlock=$(echo {memlock})")
        .replace(cluster_check.DEVICE_FILES, str(tmp_path / "dev" / "neuron"))
        .replace(cluster_check.SHARED_MOUNT, str(shared)),
        tmp_path,
    )
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "NODE_NAME": "ip-100-64-1-1", "JOB_UID": uid}
    for key in (cluster_check.POD_IDENTITY_URI_ENV, cluster_check.POD_IDENTITY_TOKEN_ENV):
        env.pop(key, None)
    if pod_identity is not None:
        (tmp_path / "eks-pod-identity-token").write_text(POD_IDENTITY_TOKEN + "\n")
        env[cluster_check.POD_IDENTITY_URI_ENV] = fake_agent() + pod_identity
        env[cluster_check.POD_IDENTITY_TOKEN_ENV] = str(tmp_path / "eks-pod-identity-token")
    return ["bash", "-c", text], env


def run_node_script(tmp_path: Path, devices: int, efa_domains: int, **options: Any) -> subprocess.CompletedProcess[str]:
    command, env = node_script_command(tmp_path, devices, efa_domains, **options)
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=30)


def node_script_waits(tmp_path: Path, devices: int, efa_domains: int, **options: Any) -> bool:
    command, env = node_script_command(tmp_path, devices, efa_domains, **options)
    return keeps_waiting(command, env, tmp_path)


def _trn1_group():
    return trainium_group()


def _settings():
    from workloads.settings import ClusterCheckSettings

    return ClusterCheckSettings(node_group="trn1-32xl-ng1", nodes=2)


def _layout() -> cluster_check.CheckLayout:
    return cluster_check.CheckLayout(
        namespace="default", image="i", claim="fsx-claim", service_account="training", support_placement=SUPPORT,
        group=_trn1_group(), settings=_settings(), namespace_id=20001,
    )  # fmt: skip


def test_a_healthy_node_passes(tmp_path: Path) -> None:
    run = run_node_script(tmp_path, devices=16, efa_domains=8)
    assert run.returncode == 0, run.stdout + run.stderr
    last = run.stdout.strip().splitlines()[-1]
    assert last.startswith("NODE ip-100-64-1-1 trn1.32xlarge PASS neuron=16/16 cores=32/32 efa=8/8 fsx write 716 MB/s")


def test_a_healthy_node_proves_the_training_posture(tmp_path: Path) -> None:
    run = run_node_script(tmp_path, devices=16, efa_domains=8, pingpong=("bytes 64", 0))
    assert run.returncode == 0, run.stdout + run.stderr
    for line in (
        "ok    seccomp: RuntimeDefault in force (filter mode)",
        "ok    locked memory (ulimit -l): unlimited",
        "ok    Neuron runtime under RuntimeDefault seccomp (nccom-test, 2 NeuronCores)",
        "ok    EFA transfer under RuntimeDefault seccomp (fi_pingpong)",
        "ok    instance metadata unreachable from the pod",
        "ok    Pod Identity credentials for default/training (the agent answered with a key)",
    ):
        assert line in run.stdout, line


@pytest.mark.parametrize(
    "posture, failure",
    [
        ({"seccomp": "0"}, "FAIL  seccomp: mode '0'"),
        (
            {"memlock": "65536"},
            "FAIL  locked memory (ulimit -l): 65536 KiB; EFA registers its buffers against it (no IPC_LOCK): raise containerd's LimitMEMLOCK",
        ),
        (
            {"runtime": ("nrt_init: mbind failed: Operation not permitted", 1)},
            "FAIL  Neuron runtime under RuntimeDefault seccomp (nccom-test, 2 NeuronCores): nrt_init: mbind failed: Operation not permitted",
        ),
        (
            {"pingpong": ("fi_mr_reg(): Cannot allocate memory", 1)},
            "FAIL  EFA transfer under RuntimeDefault seccomp (fi_pingpong): fi_mr_reg(): Cannot allocate memory",
        ),
        ({"imds_answers": True}, "FAIL  instance metadata: this pod got an IMDSv2 token"),
        # The trust conditions refuse the agent; the agent's EKS Auth error is shown.
        (
            {"pod_identity": "/denied"},
            "FAIL  Pod Identity credentials for default/training: HTTP 400: [0f1e] (AccessDeniedException): "
            "Unauthorized Exception! EKS does not have permissions to assume the associated role., fault: client: "
            "check the role's trust conditions (aws:SourceAccount, aws:RequestTag/eks-cluster-arn",
        ),
        (
            {"pod_identity": "/empty"},
            "FAIL  Pod Identity credentials for default/training: the answer carries no AccessKeyId",
        ),
        (
            {"pod_identity": None},
            "FAIL  Pod Identity credentials: no AWS_CONTAINER_CREDENTIALS_FULL_URI in the pod: check the association "
            "of default/training",
        ),
    ],
)
def test_a_posture_the_jobs_would_trip_on_fails_the_node_with_the_fix(tmp_path: Path, posture, failure) -> None:
    run = run_node_script(tmp_path, devices=16, efa_domains=8, **posture)
    assert run.returncode == 1, run.stdout
    assert failure in run.stdout
    assert cluster_check.POSTURE_DOCS in run.stdout or "seccomp" in failure
    assert " FAIL neuron=16/16" in run.stdout


def test_the_check_runs_under_the_training_pods_exact_posture(workloads_all: PlanResult) -> None:
    """The per-node pod is a BERT worker's posture, the all-reduce workers a NxD Training
    MPI worker's, both from workloads/pods.py training_pod/training_container: pod security context,
    token, container context (capabilities, escalation), device limits; every stage runs as the
    namespace's id."""

    def pod(kind: str, name: str, role: str) -> tuple[dict[str, Any], dict[str, Any]]:
        obj = next(o for o in kubernetes_objects(workloads_all) if o["kind"] == kind and o["metadata"]["name"] == name)
        template = dict(pod_templates(obj))[role]
        return template["spec"], template["spec"]["containers"][0]

    def posture(spec: dict[str, Any], container: dict[str, Any]) -> tuple[Any, ...]:
        return (
            spec["securityContext"],
            spec["automountServiceAccountToken"],
            spec["nodeSelector"],
            spec["tolerations"],
            container["securityContext"],
            container["resources"]["limits"],
        )

    assert posture(*pod("Job", "cluster-check-nodes", "pod")) == posture(*pod("Job", "bert-train", "worker-0"))
    assert posture(*pod("MPIJob", "cluster-check-allreduce", "worker")) == posture(
        *pod("MPIJob", "llama2-train", "worker")
    )
    spec, container = pod("Job", "cluster-check-nodes", "pod")
    assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    for kind, name, role in (("Job", "cluster-check-nodes", "pod"), ("Job", "cluster-check-verdict", "pod"),
                             ("MPIJob", "cluster-check-allreduce", "worker"), ("MPIJob", "cluster-check-allreduce", "launcher"),
                             ("MPIJob", "llama2-train", "worker"), ("MPIJob", "llama2-train", "launcher")):  # fmt: skip
        context = pod(kind, name, role)[0]["securityContext"]
        assert (context["runAsUser"], context["runAsGroup"], context["runAsNonRoot"]) == (20001, 20001, True), name
    assert "IPC_LOCK" not in str(container["securityContext"])


def test_neuron_ls_and_the_device_files_must_agree(tmp_path: Path) -> None:
    # neuron-ls (aws-neuron-sdk v2.20.2 neuron-ls.rst) has no machine-readable output, so
    # its table is parsed; the device files the device plugin hands the container are a second
    # count that does not depend on that table's layout.
    run = run_node_script(tmp_path, devices=16, efa_domains=8, device_files=15)
    assert run.returncode == 1
    assert "ok    Neuron devices (neuron-ls): 16" in run.stdout
    assert "FAIL  Neuron device files (/dev/neuron*): expected 16, seen 15" in run.stdout.replace(
        str(tmp_path / "dev"), "/dev"
    )
    assert "info  hugepages-2Mi reserved on the node: " in run.stdout  # reported, not judged


def test_a_node_missing_a_device_or_an_interface_fails(tmp_path: Path) -> None:
    run = run_node_script(tmp_path, devices=15, efa_domains=7)
    assert run.returncode == 1
    assert "FAIL  Neuron devices (neuron-ls): expected 16, seen 15" in run.stdout
    assert "FAIL  EFA devices (fi_info -p efa): expected 8, seen 7" in run.stdout
    assert " FAIL neuron=15/16 cores=30/32 efa=7/8" in run.stdout


@pytest.mark.parametrize(
    "failing",
    [
        "dd: error writing '/shared/x.bin': No space left on device",
        "dd: failed to open '/shared/x.bin': Input/output error",
    ],
)
def test_a_failed_fsx_write_or_read_fails(tmp_path: Path, failing: str) -> None:
    # dd prints its error as its last line and exits non-zero (GNU coreutils): that is no rate.
    run = run_node_script(tmp_path, devices=16, efa_domains=8, dd=(failing, 1))
    assert run.returncode == 1, run.stdout
    assert "FAIL  FSx read-write: write '', read ''" in run.stdout
    assert failing in run.stderr  # dd's own error, in the pod's log
    assert " FAIL neuron=16/16" in run.stdout


def test_a_passing_node_holds_its_node_until_every_node_reported(tmp_path: Path) -> None:
    # Each pod owns every Neuron device of its node, so while one waits here no other check pod
    # can run on that node: the 2 reports come from 2 distinct nodes at the same time, not from
    # one node twice while the second never comes up (the Job's deadline ends such a wait).
    assert node_script_waits(tmp_path, devices=16, efa_domains=8, peers=0)


def test_bus_bandwidth_is_read_from_the_largest_size(tmp_path: Path) -> None:
    # nccom-test.rst's table layout: size(B) count(elems) type time(us) algbw(GB/s) busbw(GB/s).
    table = "\n".join([
        "nccom-test all-reduce, 2 nodes x 32 ranks, hosts: 100.64.1.1 100.64.1.2",
        "       size(B)    count(elems)    type    time(us)    algbw(GB/s)    busbw(GB/s)",
        "       1048576          262144    fp32        1330           0.73           1.44",
        "    1073741824       268435456    fp32       41000          24.39          48.01",
        "Avg bus bandwidth:      24.7250GB/s",
    ])  # fmt: skip
    out = tmp_path / "allreduce.txt"
    out.write_text(table + "\n")
    busbw = subprocess.run(
        ["bash", "-c", f"{cluster_check.BUSBW_AWK} {out}"], capture_output=True, text=True
    ).stdout.strip()
    assert busbw == "48.01"


def launcher_run(
    tmp_path: Path, workers: int, getent: str, ssh: str, wrapper: tuple[str, ...] = (), timeout: float = 30
) -> tuple[subprocess.CompletedProcess[str], Path]:
    """The launcher script with stand-in getent and ssh (bash bodies), ``workers`` in the hostfile."""
    layout = _layout()
    bin_dir, shared = tmp_path / "bin", tmp_path / "shared"
    bin_dir.mkdir()
    shared.mkdir()
    # The per-node stage's attempt job-b is the current one; job-a, an earlier attempt, failed.
    write_attempts(shared, {"job-a": (["FAIL"], "FAIL"), "job-b": (["PASS", "PASS"], None)}, current="job-b")
    hostfile = tmp_path / "hostfile"
    # kubeflow/mpi-operator v0.8.0 newConfigMap: "<job>-worker-<i>.<job>.<ns>.svc slots=<n>".
    hostfile.write_text(
        "".join(
            f"cluster-check-allreduce-worker-{i}.cluster-check-allreduce.default.svc slots=1\n" for i in range(workers)
        )
    )
    for tool, body in (("getent", getent), ("ssh", ssh)):
        (bin_dir / tool).write_text(f"#!/bin/bash\n{body}")
        (bin_dir / tool).chmod(0o755)
    text = fast_polls(
        cluster_check.launcher_script(layout)
        .replace(cluster_check.HOSTFILE, str(hostfile))
        .replace(cluster_check.SHARED_MOUNT, str(shared)),
        tmp_path,
    )
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    run = subprocess.run([*wrapper, "bash", "-c", text], capture_output=True, text=True, env=env, timeout=timeout)
    assert (attempt_dir(shared, "job-a") / "allreduce.status").read_text() == "FAIL\n"  # an old attempt's, left alone
    return run, attempt_dir(shared, "job-b")


def run_launcher(
    tmp_path: Path, busbw: str, nccom_status: int = 0
) -> tuple[subprocess.CompletedProcess[str], Path, str]:
    # Worker 1's DNS record lags: its first two lookups find nothing (aws/aws-k8s-tester #868,
    # "Could not resolve hostname ...worker-3"); worker 0's sshd refuses the first connection.
    lookups, calls = tmp_path / "lookups", tmp_path / "ssh-calls"
    getent = (
        f'echo "$2" >> {lookups}\n'
        'case "$2" in *worker-0*) echo "100.64.1.10 $2";;\n'
        f'  *worker-1*) [ "$(grep -c worker-1 {lookups})" -gt 2 ] && echo "100.64.1.11 $2";; esac\n'
    )  # fmt: skip
    table = "\n".join([
        "       size(B)    count(elems)    type    time(us)    algbw(GB/s)    busbw(GB/s)",
        f"    1073741824       268435456    fp32       41000          24.39          {busbw}",
    ])  # fmt: skip
    ssh = (
        f'echo "$@" >> {calls}\n'
        f'case "$*" in *" true") [ "$(grep -c "100.64.1.10 true" {calls})" -gt 1 ] || exit 255; exit 0;; esac\n'
        f"cat <<'OUT'\n{table}\nOUT\nexit {nccom_status}\n"
    )  # fmt: skip
    run, results = launcher_run(tmp_path, 2, getent, ssh)
    return run, results, calls.read_text()


def test_the_launcher_runs_nccom_test_on_worker_zero_and_passes_above_the_floor(tmp_path: Path) -> None:
    run, results, calls = run_launcher(tmp_path, "47.09")
    assert run.returncode == 0, run.stdout + run.stderr
    # It waited for every worker - a lagging DNS record, an sshd not yet up - before the run.
    *waits, nccom = calls.strip().split("\n", 3)
    # On the workers' sshd port (the MPI operator's non-root one).
    assert waits == ["-p 2222 -o BatchMode=yes -o ConnectTimeout=10 100.64.1.10 true"] * 2 + [
        "-p 2222 -o BatchMode=yes -o ConnectTimeout=10 100.64.1.11 true"
    ]
    assert nccom.startswith(
        "100.64.1.10 NEURON_RT_ROOT_COMM_ID=100.64.1.10:45654 /opt/aws/neuron/bin/nccom-test -r 64 -N 2"
    )
    assert nccom.rstrip().endswith("allr --hosts 100.64.1.10 100.64.1.11")
    assert (results / "allreduce.status").read_text().strip() == "PASS"
    assert "bus bandwidth at 1GB: 47.09 GB/s, floor 20.0 GB/s" in (results / "allreduce.txt").read_text()


def test_the_launcher_fails_under_the_floor(tmp_path: Path) -> None:
    run, results, _ = run_launcher(tmp_path, "3.20")
    assert run.returncode == 1
    assert (results / "allreduce.status").read_text().strip() == "FAIL"


@pytest.mark.parametrize("hung", ["waiting for 2 workers", "nccom-test"])
def test_the_launcher_stopped_at_its_deadline_records_a_failure(tmp_path: Path, hung: str) -> None:
    # At activeDeadlineSeconds the Job controller deletes the pod: the kubelet sends SIGTERM to
    # the container's PID 1 only, then SIGKILL after the grace period. Bash runs a trap between
    # commands, or at once while in `wait`: the status must be written and say what was still
    # under way, whether the launcher was waiting for a worker or the all-reduce hung, so the
    # verdict reports FAIL at once instead of at its own deadline. Here the script is PID 1 of
    # its own PID namespace, as in a container, and a stand-in tool sends the SIGTERM.
    wrapper = ("unshare", "--user", "--map-root-user", "--pid", "--fork")
    if subprocess.run([*wrapper, "true"], capture_output=True).returncode:
        pytest.skip("no unprivileged PID namespaces here")
    lookups = tmp_path / "lookups"
    if hung == "nccom-test":  # every worker answers; the all-reduce never returns
        getent, ssh = 'echo "100.64.1.10 $2"\n', 'case "$*" in *" true") exit 0;; esac\nkill -TERM 1\nexec sleep 30\n'
    else:  # a worker's name never resolves
        getent, ssh = (
            f'echo "$2" >> {lookups}\n[ "$(wc -l < {lookups})" -lt 3 ] || kill -TERM 1\nexit 2\n',
            "exit 255\n",
        )
    run, results = launcher_run(tmp_path, 1, getent, ssh, wrapper, timeout=10)
    assert run.returncode == 1
    assert (results / "allreduce.status").read_text().strip() == "FAIL"
    assert f"stopped (deadline) while: {hung}" in (results / "allreduce.txt").read_text()


def test_a_failed_all_reduce_is_a_failure(tmp_path: Path) -> None:
    run, results, _ = run_launcher(tmp_path, "47.09", nccom_status=1)
    assert run.returncode == 1
    assert (results / "allreduce.status").read_text().strip() == "FAIL"


def write_attempts(shared: Path, attempts: dict[str, tuple[list[str], str | None]], current: str | None) -> None:
    """Per attempt UID: its nodes' verdicts and its all-reduce status (None: none yet); ``current``
    is what the latest per-node attempt recorded."""
    for uid, (nodes, status) in attempts.items():
        results = attempt_dir(shared, uid)
        (results / "nodes").mkdir(parents=True)
        for i, verdict in enumerate(nodes):
            (results / "nodes" / f"{uid}-node-{i}.txt").write_text(
                f"NODE {uid}-node-{i} trn1.32xlarge {verdict} neuron=16/16\n"
            )
        if status is not None:
            (results / "allreduce.txt").write_text(f"table of {uid}\n")
            (results / "allreduce.status").write_text(status + "\n")
    if current is not None:
        Path(_layout().current_file.replace(cluster_check.SHARED_MOUNT, str(shared))).write_text(current + "\n")


def verdict_command(shared: Path) -> list[str]:
    """The verdict script over ``shared``; its poll rounds are counted next to it."""
    return [
        "bash",
        "-c",
        fast_polls(
            cluster_check.verdict_script(_layout()).replace(cluster_check.SHARED_MOUNT, str(shared)), shared.parent
        ),
    ]


def verdict_run(shared: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(verdict_command(shared), capture_output=True, text=True, timeout=30)


def run_verdict(tmp_path: Path, nodes: list[str], status: str) -> subprocess.CompletedProcess[str]:
    write_attempts(tmp_path / "shared", {"job-a": (nodes, status)}, current="job-a")
    return verdict_run(tmp_path / "shared")


@pytest.mark.parametrize(
    "nodes, status, passed",
    [
        (["PASS", "PASS"], "PASS", True),
        (["PASS", "FAIL"], "PASS", False),
        (["PASS", "PASS"], "FAIL", False),
        (["PASS"], "PASS", False),
    ],
)
def test_the_verdict_passes_only_when_every_node_and_the_all_reduce_did(tmp_path: Path, nodes, status, passed) -> None:
    run = run_verdict(tmp_path, nodes, status)
    assert (run.returncode == 0) is passed
    assert run.stdout.strip().splitlines()[-1] == ("RESULT PASS" if passed else "RESULT FAIL")


def test_the_all_reduce_needs_the_mpi_operator_but_one_node_does_not(workloads_with) -> None:
    def no_mpi(outputs: dict[str, Any]) -> None:
        outputs["features"]["mpiOperator"] = False

    message = refusal(workloads_with, cluster=no_mpi, nxdLlama=None)
    assert "trainium-workloads:clusterCheck: needs mpiOperator in the cluster" in message
    result = workloads_with(cluster=no_mpi, nxdLlama=None, clusterCheck={"nodeGroup": "trn1-32xl-ng1", "nodes": 1})
    assert result.outputs["workloads"]["clusterCheck"]["nodes"] == 1


# --- a retry with unchanged manifests (`pulumi up --replace`) -------------------------------------
# The run directory is a token of the rendered manifests, so replacing a stage without a change
# reuses it. The Job controller labels each pod with its Job's UID (kubernetes/api v0.34.0
# batch/v1/types.go ControllerUidLabel), which a new Job object - the replacement - does not share.


def test_the_node_check_reads_its_job_uid_from_the_controller_label(workloads_dev: PlanResult) -> None:
    container = spec(workloads_dev, "Job", "cluster-check-nodes")["template"]["spec"]["containers"][0]
    env = {e["name"]: e["valueFrom"]["fieldRef"]["fieldPath"] for e in container["env"]}
    assert env["JOB_UID"] == "metadata.labels['batch.kubernetes.io/controller-uid']"


def test_a_retried_node_check_ignores_the_failed_attempt(tmp_path: Path) -> None:
    # Attempt job-a: this node failed its FSx check, and another node passed. Attempt job-b (the
    # replaced Job) on a healthy node: the two old files must not count for its barrier (which
    # would let it leave at once, before a second node reported) nor for the verdict (an old FAIL).
    first = run_node_script(
        tmp_path, devices=16, efa_domains=8, dd=("dd: error writing: No space left on device", 1), uid="job-a"
    )
    assert first.returncode == 1 and len(list((attempt_dir(tmp_path / "shared", "job-a") / "nodes").glob("*.txt"))) == 2
    # Alone in its attempt: it waits for a second node.
    assert node_script_waits(tmp_path, devices=16, efa_domains=8, peers=0, uid="job-b")
    second = run_node_script(tmp_path, devices=16, efa_domains=8, peers=1, uid="job-b")
    assert second.returncode == 0, second.stdout + second.stderr
    shared = tmp_path / "shared"
    assert Path(_layout().current_file.replace(cluster_check.SHARED_MOUNT, str(shared))).read_text() == "job-b\n"
    (attempt_dir(shared, "job-b") / "allreduce.status").write_text("PASS\n")
    (attempt_dir(shared, "job-b") / "allreduce.txt").write_text("table\n")
    verdict = verdict_run(shared)
    assert verdict.returncode == 0, verdict.stdout
    assert "RESULT PASS" in verdict.stdout and " FAIL " not in verdict.stdout and "of 2 nodes" not in verdict.stdout


def test_the_verdict_waits_for_the_current_attempts_all_reduce(tmp_path: Path) -> None:
    # An older attempt's FAIL status is there; the current attempt's launcher has not written yet:
    # the verdict must wait for it, not report the old one.
    write_attempts(
        tmp_path / "shared", {"job-a": (["PASS", "FAIL"], "FAIL"), "job-b": (["PASS", "PASS"], None)}, current="job-b"
    )
    assert keeps_waiting(verdict_command(tmp_path / "shared"), None, tmp_path)


def test_a_job_without_its_uid_fails_at_once(tmp_path: Path) -> None:
    run = run_node_script(tmp_path, devices=16, efa_domains=8, uid="")
    assert run.returncode == 1 and "no Job UID" in run.stdout


def test_the_checks_pods_tell_the_autoscaler_not_to_evict_them(workloads_dev) -> None:
    # cluster-autoscaler v1.34.2 (chart 9.53.0's, infra/facts/versions.py) cluster-autoscaler/FAQ.md
    # l.111-115: a pod annotated "cluster-autoscaler.kubernetes.io/safe-to-evict": "false" keeps its node
    # from scale-down. The check's pods request 4 CPU / 16Gi of a 128-CPU node, so without it their nodes
    # look underused and a running check could be evicted.
    from workloads.kube import pod_templates

    key = "cluster-autoscaler.kubernetes.io/safe-to-evict"
    by_name = {
        r.inputs["metadata"]["name"]: r.inputs
        for r in workloads_dev.registrations
        if isinstance(r.inputs.get("metadata"), dict) and "spec" in r.inputs
    }
    checks = {n: o for n, o in by_name.items() if n.startswith("cluster-check-")}
    assert set(checks) == {"cluster-check-nodes", "cluster-check-allreduce", "cluster-check-verdict"}
    for name, obj in checks.items():
        templates = pod_templates(obj["spec"])
        assert templates and all(t["metadata"]["annotations"][key] == "false" for t in templates), name
    # The other side: the staging Jobs can simply run again, and stay evictable.
    assert key not in (pod_templates(by_name["stage-wikicorpus"]["spec"])[0]["metadata"].get("annotations") or {})


def test_the_node_check_records_memtotal_and_fails_below_the_promised_allocatable(tmp_path: Path) -> None:
    # The kubelet's memory capacity is the node's MemTotal, below EC2's listed memory; the
    # cluster stack's allocatable (infra/specs/system_capacity.py) is an estimate the schedule check trusts.
    group = trainium_group(allocatable={"cpu": "127080m", "memory": "481407Mi"})
    script = cluster_check.memory_check(group)

    def run(memtotal_kb: int) -> subprocess.CompletedProcess[str]:
        meminfo = tmp_path / "meminfo"
        meminfo.write_text(f"MemTotal:       {memtotal_kb} kB\nHugePages_Total:       0\n")
        text = "failed=0\n" + script.replace(cluster_check.MEMINFO, str(meminfo)) + 'exit "$failed"\n'
        return subprocess.run(["bash", "-c", text], capture_output=True, text=True, timeout=10)

    ok = run(500_000 * 1024)  # a trn1.32xlarge with 500000 MiB
    assert (
        ok.returncode == 0 and "info  memory: MemTotal 500000Mi" in ok.stdout and "promises pods 481407Mi" in ok.stdout
    )
    short = run(470_000 * 1024)
    assert short.returncode == 1 and "FAIL  memory: MemTotal 470000Mi is below the 481407Mi" in short.stdout
    assert cluster_check.memory_check(_trn1_group()) == ""  # no figure exported: nothing to compare
    assert cluster_check.MEMINFO in cluster_check.node_script(_layout())


def test_the_per_node_stage_is_scheduled_by_volcano_as_one_gang_when_volcano_is_on(workloads_dev) -> None:
    # With the default scheduler beside Volcano on one Trainium group, two schedulers could bind
    # to one free node at once and the kubelet would refuse one pod (backoffLimit 0 fails the check).
    # volcano v1.15.1 pkg/controllers/podgroup: a pod with schedulerName volcano and no group gets
    # podgroup-<owner uid> (staging/src/volcano.sh/apis/pkg/apis/helpers/helpers.go l.193-207), minMember
    # from the owner's scheduling.volcano.sh/group-min-member (pg_controller_handler.go l.270-289), queue
    # from the pod's scheduling.volcano.sh/queue-name (l.400-402).
    job = next(
        r.inputs
        for r in workloads_dev.registrations
        if isinstance(r.inputs.get("metadata"), dict) and r.inputs["metadata"].get("name") == "cluster-check-nodes"
    )
    template = job["spec"]["template"]
    assert template["spec"]["schedulerName"] == "volcano"
    assert template["metadata"]["annotations"]["scheduling.volcano.sh/queue-name"] == "test"
    assert (
        job["metadata"]["annotations"]["scheduling.volcano.sh/group-min-member"]
        == "2"
        == str(job["spec"]["parallelism"])
    )
    # The other side: without Volcano (no gang queue) the default scheduler, and no Volcano annotations.
    plain = cluster_check.nodes_job(_layout())
    assert "schedulerName" not in plain["spec"]["template"]["spec"]
    assert cluster_check.GROUP_MIN_MEMBER not in plain["metadata"]["annotations"]


def test_the_per_node_pod_runs_as_a_service_account_with_a_pod_identity_association(
    dev: PlanResult, workloads_all: PlanResult
) -> None:
    """The Pod Identity line needs an association for the pod's service account: the check's Job runs
    as the cluster's training service account, which has one in every training namespace."""
    job = next(
        o
        for o in kubernetes_objects(workloads_all)
        if o["kind"] == "Job" and o["metadata"]["name"] == "cluster-check-nodes"
    )
    account = (job["metadata"]["namespace"], job["spec"]["template"]["spec"]["serviceAccountName"])
    associated = {
        (r.inputs["namespace"], r.inputs["serviceAccount"])
        for r in dev.of_type("aws:eks/podIdentityAssociation:PodIdentityAssociation")
    }
    assert account in associated, (account, associated)
    assert (
        f"Pod Identity credentials for {account[0]}/{account[1]}"
        in job["spec"]["template"]["spec"]["containers"][0]["command"][-1]
    )
