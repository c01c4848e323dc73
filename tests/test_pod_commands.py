"""Every container the shipped stacks put in a pod, run here the way its node runs it
(tests/pod_replay.py: the kubelet's argv and environment; the controllers' additions below), with
stubs only for the programs that cannot run here (tests/replay_stubs.py). Each replay asserts which
program finally runs, with which arguments and environment.

What each controller adds, at the version we pin (infra/facts/versions.py):
- Volcano v1.15.1 (volcano-sh/volcano pkg/controllers/job/job_controller_util.go createJobPod
  l.46-180): the pod is ``<job>-<task>-<index>``, annotated ``scheduling.k8s.io/group-name:
  <job>-<job uid>`` and ``volcano.sh/job-version``; the env plugin (plugins/env/env.go l.45-59) adds
  VK_TASK_INDEX and VC_TASK_INDEX, the svc plugin (plugins/svc/svc.go l.96-111) VC_<TASK>_HOSTS.
  Neither touches command or args (only the opt-in ray plugin does, which we do not use).
- batch/v1 Job (kubernetes pkg/controller/job): pods labelled ``batch.kubernetes.io/controller-uid``.
- KubeRay v1.7.0 (ray-project/kuberay ray-operator/controllers/ray/common/pod.go BuildPod l.878-913,
  generateRayStartCommand l.1390-1430, convertParamMap l.1518-1544; utils/util.go l.1005-1013):
  a Ray container whose command and args do not say ``ray start`` gets command
  ``["/bin/bash", "-c", "--"]`` and one arg, ``ulimit -n ${RAY_START_ULIMIT_OPEN_FILES:-65536};
  ray start [--head] <sorted --key=value flags>`` (``--block`` always, the address of the head's
  service for workers, CPUs and memory from the container's resources); env RAY_CLUSTER_NAME,
  RAY_ADDRESS, RAY_PORT, KUBERAY_GEN_RAY_START_CMD (setContainerEnvVars l.1207-1343). The
  submitter's command chain is replayed in tests/test_ray_entrypoints.py.
- The MPI operator v0.8.0 (kubeflow/mpi-operator pkg/controller/mpi_job_controller.go): workers
  keep their command (newWorker l.1502-1505 sets ``/usr/sbin/sshd -De`` only when none is given)
  and get K_MPI_JOB_ROLE=worker; the launcher keeps its command and gets the OMPI_MCA_* env and
  the ConfigMap at /etc/mpi whose hostfile lists ``<job>-worker-<i>.<job>.<ns>.svc slots=<n>``
  (newLauncherPodTemplate l.1556-1645, newConfigMap l.1309-1354).
- Open MPI 4.1 (open-mpi/ompi v4.1.8): each rank starts from the remote sshd session's environment
  (not the worker container's), plus mpirun's OMPI_*/PMIX_* and ``-x`` variables
  (orte/mca/schizo/ompi/schizo_ompi.c parse_env l.666-800) and OMPI_COMM_WORLD_RANK and friends
  (setup_child l.1191+); see replay_stubs.mpirun.
"""

from __future__ import annotations

import functools
import json
import re
import resource
import subprocess
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from offline.plan.runner import PlanResult
from offline.report.plan_output import kubernetes_objects
from tests.fake_api import TOKEN, FakeApi
from tests.pod_replay import REPO_ROOT, Image, PodContainer, Sandbox, dockerfile_image, pod_containers
from tests.replay_stubs import rewrite, to_container
from tests.test_cluster_check import neuron_ls_table
from workloads import resilience

IMAGES = {name: dockerfile_image(name) for name in ("bert-pretrain", "cmd-shell", "nxd-llama", "ray-llama2")}
# Images we do not build: what their publishers' Dockerfiles set.
IMAGES |= {
    # docker-library/python 3.11/slim-trixie/Dockerfile: CMD ["python3"], no WORKDIR.
    "python": Image(cmd=("python3",)),
    # nginx/docker-nginx-unprivileged mainline/alpine/Dockerfile: ENTRYPOINT ["/docker-entrypoint.sh"],
    # CMD ["nginx", "-g", "daemon off;"].
    # USER 101 (Dockerfile-alpine-slim.template: adduser -u 101 -h /var/cache/nginx).
    "nginx-unprivileged": Image(
        ("/docker-entrypoint.sh",),
        ("nginx", "-g", "daemon off;"),
        user=101,
        homes=((0, "/root"), (101, "/var/cache/nginx")),
    ),
    # The Neuron training DLC the burn-in runs on (aws/deep-learning-containers
    # pytorch/training/docker/2.5/py3/sdk2.21.0/Dockerfile.neuronx): the Neuron tools on PATH.
    "pytorch-training-neuronx": Image(path="/opt/aws/neuron/bin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"),
    # neuron-monitor's image: no Dockerfile published; its container's command names the entrypoint
    # (aws-neuron/aws-neuron-sdk 81ce03a src/k8/k8s-neuron-monitor-daemonset.yml), so only the defaults matter.
    "neuron-monitor": Image(),
}


@dataclass
class Stack:
    name: str
    objects: list[dict[str, Any]]
    result: PlanResult
    # The cluster stack's outputs (a workload stack's own ``result`` has its own).
    cluster_outputs: dict[str, Any]


# What a node's mount of the cluster's file system shows to `stat -f -c %T`: coreutils names Lustre's magic
# "lustre", NFS's (EFS) "nfs" (src/stat.c human_fstype).
MOUNT_TYPES = {"fsx": "lustre", "efs": "nfs"}


def mount_type(stack: Stack) -> str:
    return MOUNT_TYPES[stack.cluster_outputs["storage"].get("kind", "fsx")]


@pytest.fixture(params=["dev", "prod"])
def stacks(request: pytest.FixtureRequest) -> list[Stack]:
    stack = request.param
    cluster = request.getfixturevalue(stack)
    workloads = request.getfixturevalue(f"workloads_{stack}")
    return [
        Stack(f"trainium-eks/{stack}", kubernetes_objects(cluster), cluster, cluster.outputs),
        Stack(f"trainium-workloads/{stack}", kubernetes_objects(workloads), workloads, cluster.outputs),
    ]


def image_of(pc: PodContainer) -> Image:
    return IMAGES[pc.image_name]


# --- a Kubernetes API server, for the pods that call it --------------------------------------------
SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"


def mount_account(api: FakeApi, sandbox: Sandbox, pod: Any) -> None:
    api.write_account(Path(sandbox.local(pod, SERVICE_ACCOUNT_DIR)), pod.template["metadata"]["namespace"])


# --- the replays: one per kind of object ------------------------------------------------------------
def local_all(sandbox: Sandbox, pod: Any, words: list[str]) -> list[str]:
    return [sandbox.local(pod, w) for w in words]


def only(pcs: list[PodContainer], role: str | None = None, name: str | None = None) -> PodContainer:
    (pc,) = [p for p in pcs if (role is None or p.role == role) and (name is None or p.container["name"] == name)]
    return pc


def under_a_mount(path: str, pc: PodContainer, read_only: bool | None = None) -> bool:
    return any(
        (path == m["mountPath"] or path.startswith(m["mountPath"] + "/"))
        and (read_only is None or bool(m.get("readOnly")) == read_only)
        for m in pc.container.get("volumeMounts", [])
    )


def replay_shell(sandbox: Sandbox, pcs: list[PodContainer], stack: Stack, tmp: Path) -> None:
    pc = only(pcs)
    running = sandbox.start(pc, image_of(pc), pod_name="cmd-shell")
    time.sleep(0.1)
    assert running.process.poll() is None, "the shell pod's `sleep infinity` exited"
    run = running.replay()
    assert run.argv == ["sleep", "infinity"] and run.calls == []
    for path in ("/data", "/shared"):
        assert under_a_mount(path, pc, read_only=False)


def replay_tensorboard(sandbox: Sandbox, pcs: list[PodContainer], stack: Stack, tmp: Path) -> None:
    board = only(pcs, name="tensorboard")
    run = sandbox.run(board, image_of(board), pod_name="tensorboard-5c8d")
    assert run.rc == 0, run.stderr
    (call,) = run.called("tensorboard")
    argv = call["argv"]
    for spec in argv[argv.index("--logdir_spec") + 1].split(","):
        name, _, path = spec.partition(":")
        assert name and path.startswith(sandbox.local(run.pod, "/shared") + "/"), spec
    proxied = len(pcs) == 2
    assert argv[argv.index("--host") + 1] == ("127.0.0.1" if proxied else "0.0.0.0")
    assert argv[argv.index("--port") + 1] == "6006"
    if proxied:
        proxy = only(pcs, name="auth-proxy")

        def entrypoint(pod: Any) -> None:
            stub = pod.root / "image-files" / "docker-entrypoint.sh"
            sandbox.stub(stub, pod.name)
            pod.view.append(["/docker-entrypoint.sh", str(stub)])

        run = sandbox.run(proxy, image_of(proxy), pod_name="tensorboard-5c8d-proxy", prepare=entrypoint)
        assert run.rc == 0, run.stderr
        (call,) = run.called("docker-entrypoint.sh")
        assert call["argv"] == ["nginx", "-g", "daemon off;"]
        for path in ("/etc/nginx/conf.d/default.conf", "/etc/nginx/auth/htpasswd"):
            assert Path(sandbox.local(run.pod, path)).is_file(), path


def replay_watchdog(sandbox: Sandbox, pcs: list[PodContainer], stack: Stack, tmp: Path) -> None:
    pc = only(pcs)
    api = FakeApi({})
    try:
        running = sandbox.start(pc, image_of(pc), pod_name="gang-watchdog-6b7c", injected=api.env(),
                                prepare=lambda pod: mount_account(api, sandbox, pod))  # fmt: skip
        namespace = pc.obj["metadata"]["namespace"]
        for plural in ("batch.volcano.sh/v1alpha1/namespaces/{}/jobs", "kubeflow.org/v2beta1/namespaces/{}/mpijobs"):
            path = "/apis/" + plural.format(namespace)
            request = api.wait_for(lambda r, path=path: r["method"] == "GET" and r["path"].startswith(path))
            assert request["auth"] == f"Bearer {TOKEN}"
        run = running.replay()
    finally:
        api.close()
    assert run.argv[:2] == ["python", "-c"] and "def sweep(" in run.argv[2]
    assert "sweep failed" not in run.stderr, run.stderr


def replay_progress_exporter(sandbox: Sandbox, pcs: list[PodContainer], stack: Stack, tmp: Path) -> None:
    """The exporter serves a run it finds on the claim: NxD Training's rank-0 log and a finished save."""
    import urllib.request

    from workloads import progress

    pc = only(pcs)
    running = sandbox.start(pc, image_of(pc), pod_name="progress-exporter-7f9c")
    body = ""
    try:
        run = Path(sandbox.local(running.pod, "/shared/nemo_experiments/run-1"))
        (run / "0").mkdir(parents=True)
        (run / "0" / "log").write_text("Epoch 0:  12%|#2        | 57/466 [10:02<1:12:00, 9.2s/it, loss=4.2]\r")
        save = run / "checkpoints" / "megatron_llama--step=50-consumed_samples=51200.0.ckpt"
        save.mkdir(parents=True)
        (save / "done").write_text("")
        for _ in range(200):
            try:
                body = urllib.request.urlopen(f"http://127.0.0.1:{progress.PORT}/metrics", timeout=5).read().decode()
                break
            except OSError:
                time.sleep(0.05)
    finally:
        replay = running.replay()
    assert replay.argv[:2] == ["python", f"{progress.SCRIPT_DIR}/{progress.EXPORTER_FILE}"], replay.argv
    assert 'training_step{run="run-1",workload="nxd-llama"} 57.0' in body, body + replay.stderr
    assert 'training_checkpoint_step{run="run-1",workload="nxd-llama"} 50.0' in body
    assert "Traceback" not in replay.stderr, replay.stderr


def replay_efa_exporter(sandbox: Sandbox, pcs: list[PodContainer], stack: Stack, tmp: Path) -> None:
    """The EFA exporter serves an EFA device's port counters from the host's /sys, mounted where its pod mounts it
    (the counters as the RDMA core prints them: tests/test_efa_exporter.py)."""
    import urllib.request

    from infra.specs import node_metrics

    pc = only(pcs)

    def host_sys(pod: Any) -> None:
        counters = Path(sandbox.local(pod, node_metrics.HOST_SYSFS)) / "class/infiniband/rdmap16s27/ports/1/hw_counters"
        counters.mkdir(parents=True)
        (counters / "tx_bytes").write_text("123456\n")

    running = sandbox.start(pc, image_of(pc), pod_name="efa-exporter-x8k2q", prepare=host_sys)
    body = ""
    try:
        for _ in range(200):
            try:
                url = f"http://127.0.0.1:{node_metrics.EFA_EXPORTER_PORT}/metrics"
                body = urllib.request.urlopen(url, timeout=5).read().decode()
                break
            except OSError:
                time.sleep(0.05)
    finally:
        replay = running.replay()
    assert replay.argv == node_metrics.efa_exporter_command(), replay.argv
    assert 'node_amazonefa_tx_bytes{device="rdmap16s27",port="1"} 123456' in body, body + replay.stderr
    assert "Traceback" not in replay.stderr, replay.stderr


def replay_neuron_monitor(sandbox: Sandbox, pcs: list[PodContainer], stack: Stack, tmp: Path) -> None:
    """neuron-monitor's container runs its image's entrypoint (a stand-in here: it pipes the Neuron tool into its
    exporter) with the upstream manifest's arguments."""
    pc = only(pcs)

    def entrypoint(pod: Any) -> None:
        stub = pod.root / "image-files" / "entrypoint.sh"
        sandbox.stub(stub, pod.name)
        pod.view.append(["/opt/bin/entrypoint.sh", str(stub)])

    run = sandbox.run(pc, image_of(pc), pod_name="neuron-monitor-q2w9r", prepare=entrypoint)
    assert run.rc == 0, run.stderr
    (call,) = run.called("entrypoint.sh")
    upstream = ["--port", "8000", "--neuron-monitor-config", "/opt/aws/neuron/bin/neuron-monitor.conf"]
    assert call["argv"] == [sandbox.local(run.pod, a) for a in upstream]  # the image's paths, as the pod sees them


def api_node(name: str, age_seconds: float, labels: dict[str, str]) -> dict[str, Any]:
    created = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - age_seconds))
    meta = {"name": name, "creationTimestamp": created, "labels": labels, "resourceVersion": "4711"}
    return {"metadata": meta, "spec": {}, "status": {"conditions": [{"type": "Ready", "status": "True"}]}}


def run_node_patcher(sandbox: Sandbox, pc: PodContainer, answers: dict[tuple[str, str], Any], pod_name: str) -> FakeApi:
    """Runs a core-node CronJob's Python program in its image against a fake API server over TLS, with its
    service account mounted, answering ``answers`` and every node PATCH: returns the server with its requests."""
    api = FakeApi({**answers, ("PATCH", "/api/v1/nodes/"): {}})
    try:
        run = sandbox.run(pc, image_of(pc), pod_name=pod_name, injected=api.env(),
                          prepare=lambda pod: mount_account(api, sandbox, pod))  # fmt: skip
    finally:
        api.close()
    assert run.rc == 0, run.stdout + run.stderr
    assert run.argv[:2] == ["python", "-c"]
    return api


def replay_sweeper(sandbox: Sandbox, pcs: list[PodContainer], stack: Stack, tmp: Path) -> None:
    from infra.specs import burn_in_objects as b

    pc = only(pcs)
    node = api_node("ip-100-64-9-9", 3 * 3600, {b.BURN_IN_PENDING_LABEL: "true"})
    answers = {("GET", "/api/v1/nodes?"): {"items": [node]}, ("GET", "/api/v1/nodes/"): node}
    api = run_node_patcher(sandbox, pc, answers, "sweeper-29384")
    (patch,) = [r for r in api.requests if r["method"] == "PATCH"]
    assert patch["path"] == "/api/v1/nodes/ip-100-64-9-9" and patch["auth"] == f"Bearer {TOKEN}"
    assert json.loads(patch["body"])["metadata"]["labels"][b.BURN_IN_RESULT_LABEL] == "failed"


def replay_gang_hold(sandbox: Sandbox, pcs: list[PodContainer], stack: Stack, tmp: Path) -> None:
    from infra.specs import gang_hold as h
    from infra.specs.node_template import BURN_IN_RESULT_LABEL, GANG_HOLD_AUTOSCALER_KEYS, GANG_HOLD_MARKER

    pc = only(pcs)
    waiting = api_node("ip-100-64-9-9", 600, {BURN_IN_RESULT_LABEL: "passed"})
    condition = {
        "type": "PodScheduled",
        "status": "False",
        "reason": "Schedulable",
        "message": "Pod team/w-0 can possibly be assigned to ip-100-64-9-9, once minAvailable is satisfied",
    }
    pod = {"metadata": {"name": "w-0"}, "spec": {}, "status": {"phase": "Pending", "conditions": [condition]}}
    answers = {("GET", "/api/v1/pods?"): {"items": [pod]}, ("GET", "/api/v1/nodes?"): {"items": [waiting]}}
    api = run_node_patcher(sandbox, pc, answers, "gang-hold-29384")
    assert [r["path"] for r in api.requests if r["method"] == "GET"] == [
        "/api/v1/nodes?labelSelector=" + urllib.parse.quote(h.PASSED_NODES, safe=""),
        h.VOLCANO_JOBS,
        "/api/v1/pods?fieldSelector=" + urllib.parse.quote(h.PENDING_GANG_PODS, safe=""),
    ]
    (patch,) = [r for r in api.requests if r["method"] == "PATCH"]
    assert patch["path"] == "/api/v1/nodes/ip-100-64-9-9" and patch["auth"] == f"Bearer {TOKEN}"
    hold = json.loads(patch["body"])["metadata"]["annotations"]
    assert {k: hold[k] for k in GANG_HOLD_AUTOSCALER_KEYS} == dict.fromkeys(GANG_HOLD_AUTOSCALER_KEYS, "true")
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", hold[GANG_HOLD_MARKER])


# --- Volcano: BERT ----------------------------------------------------------------------------------
BERT_LOG = "LOG Fri Nov 27 21:00:00 2026 - (0, 7) step_loss : 9.5000 learning_rate : 1.00e-04 throughput : 100.00\n"


def volcano_pod(obj: dict[str, Any], task: str, uid: str = "8d3f0c1e") -> dict[str, Any]:
    """What Volcano v1.15.1 createJobPod and the job's env plugin give the task's pod."""
    name = obj["metadata"]["name"]
    meta = {
        "name": f"{name}-{task}-0",
        "annotations": {"scheduling.k8s.io/group-name": f"{name}-{uid}", "volcano.sh/job-version": "0",
                        "volcano.sh/job-retry-count": "0", "volcano.sh/task-index": "0", "volcano.sh/task-spec": task},
        "labels": {"volcano.sh/job-name": name, "volcano.sh/task-spec": task, "volcano.sh/task-index": "0"},
    }  # fmt: skip
    return meta


def replay_bert(sandbox: Sandbox, pcs: list[PodContainer], stack: Stack, tmp: Path) -> None:
    precompile = pcs[0].obj["metadata"]["name"] == "bert-precompile"
    run_dir = stack.result.outputs["workloads"]["runDirectories"]["bertPretraining"]
    sandbox.behaviours["dp_bert_large_hf_pretrain_hdf5.py"] = {"stdout": BERT_LOG}
    sandbox.save()
    endpoints: dict[str, tuple[str, str]] = {}  # task -> the rendezvous endpoint its torchrun got
    for pc in sorted(pcs, key=lambda p: p.role):
        task = pc.role.split(" ", 1)[1]
        meta = volcano_pod(pc.obj, task)
        hosts = {
            f"VC_{t['name'].replace('-', '_').upper()}_HOSTS": f"{pc.obj['metadata']['name']}-{t['name']}-0.{pc.obj['metadata']['name']}"
            for t in pc.obj["spec"]["tasks"]
        }
        injected = {"VK_TASK_INDEX": "0", "VC_TASK_INDEX": "0", **hosts}
        before = len(sandbox.calls())

        def image_files(pod: Any) -> None:
            sandbox.script(pod, "/workspace/dp_bert_large_hf_pretrain_hdf5.py")

        run = sandbox.run(
            pc, image_of(pc), pod_name=meta["name"], metadata=meta, appended=injected, prepare=image_files
        )
        assert run.rc == 0, run.stdout + run.stderr
        calls = run.calls[before:]
        (torchrun,) = [c for c in calls if c["program"] == "torchrun"]
        (script,) = [c for c in calls if c["program"] == "dp_bert_large_hf_pretrain_hdf5.py"]
        # The kubelet put the Volcano pod group and the job's version into the rendezvous id.
        args = torchrun["argv"]
        assert args[args.index("--rdzv_id") + 1] == f"{meta['annotations']['scheduling.k8s.io/group-name']}-v0"
        assert args[args.index("--rdzv_backend") + 1] == "c10d"
        host, _, port = args[args.index("--rdzv_endpoint") + 1].rpartition(":")
        endpoints[task] = (host, port)
        assert args[args.index("--nnodes") + 1] == str(len(pcs))
        argv = script["argv"]
        assert argv[argv.index("--output_dir") + 1] == sandbox.local(run.pod, run_dir)
        assert argv[argv.index("--data_dir") + 1].startswith(sandbox.local(run.pod, "/data") + "/")
        env = script["env"]
        assert env["NEURON_CC_FLAGS"].endswith(f"_{task.rsplit('-', 1)[1]}"), env["NEURON_CC_FLAGS"]
        assert env["WORLD_SIZE"] == str(int(args[args.index("--nproc_per_node") + 1]) * len(pcs))
        assert env["FI_PROVIDER"] == "efa"
        if precompile:
            assert [c["program"] for c in calls][:2] == ["neuron_parallel_compile", "torchrun"]
            assert env["NEURON_EXTRACT_GRAPHS_ONLY"] == "1"
            continue
        assert "NEURON_EXTRACT_GRAPHS_ONLY" not in env and "--resume_ckpt_path" not in argv
        heartbeat = Path(sandbox.local(run.pod, run_dir + "/heartbeat"))
        assert heartbeat.is_file(), "the heartbeat filter saw no step"
        assert sandbox.on_a_claim(run.pod, run_dir), "the run directory is not on FSx"
        # Replica 0 takes the run directory's lock for its job (and prunes); replica 1 leaves both.
        holder_file = Path(sandbox.local(run.pod, run_dir + "/.lock-holder"))
        if task.endswith("-0"):
            holder = json.loads(holder_file.read_text())
            assert holder["owner"] == f"{pc.obj['metadata']['namespace']}/{pc.obj['metadata']['name']}"
            holder_file.unlink()
        else:
            assert not holder_file.exists(), "replica 1 took the lock too"
        # The liveness probe, as the kubelet runs it in the same container (no shell of its own).
        probe = pc.container["livenessProbe"]["exec"]["command"]
        local_env = {k: sandbox.local(run.pod, v) for k, v in run.env.items()}
        local_env["PATH"] = f"{run.pod.root / 'bin'}:/usr/bin:/bin"
        checked = subprocess.run(
            [sandbox.local(run.pod, w) for w in probe], env=local_env, capture_output=True, text=True, timeout=30
        )
        assert checked.returncode == 0, checked.stdout + checked.stderr

    # torch 2.9.0 c10d_rendezvous_backend.py _create_tcp_store l.137-187: the torchrun whose endpoint
    # host is this machine hosts the store (utils.py _matches_machine_hostname l.124: localhost always
    # is); the others connect to it. Rank 0's pod is reachable as <hostname>.<subdomain>, which
    # Volcano's svc plugin sets to the pod's name and the job's (svc.go l.86-91), through the job's
    # headless Service: every other replica's endpoint is that name, on the port rank 0 hosts on.
    job = pcs[0].obj["metadata"]["name"]
    rank0_pod = volcano_pod(pcs[0].obj, "worker-0")["name"]
    assert endpoints.pop("worker-0") == ("localhost", "29500")
    assert endpoints and set(endpoints.values()) == {(f"{rank0_pod}.{job}", "29500")}, endpoints


# --- KubeRay ----------------------------------------------------------------------------------------
def ray_start_params(template: dict[str, Any], params: dict[str, str], head: bool, address: str) -> str:
    """kuberay v1.7.0 ray-operator/controllers/ray/common/pod.go setMissingRayStartParams,
    generateRayStartCommand, convertParamMap: defaults filled in, sorted, `` --key=value `` each."""
    params = dict(params)
    resources = template["spec"]["containers"][0].get("resources", {})
    if head:
        params.setdefault("dashboard-host", "0.0.0.0")
    else:
        params.setdefault("address", address)
    params.setdefault("metrics-export-port", "8080")
    params["block"] = "true"
    params.setdefault("dashboard-agent-listen-port", "52365")
    cpu = resources.get("limits", {}).get("cpu") or resources.get("requests", {}).get("cpu")
    if cpu is not None:
        params.setdefault("num-cpus", str(-(-int(cpu.rstrip("m")) // 1000) if cpu.endswith("m") else int(cpu)))
    memory = resources.get("limits", {}).get("memory")
    if memory is not None:
        units = {"Gi": 1024**3, "Mi": 1024**2}
        params.setdefault("memory", str(int(memory[:-2]) * units[memory[-2:]]))
    cores = resources.get("limits", {}).get("aws.amazon.com/neuroncore")
    if cores is not None and "resources" not in params:
        params["resources"] = "'" + json.dumps({"neuron_cores": int(cores)}, separators=(",", ":")) + "'"
    flags = "".join(f" --{k} " if v == "true" else f" --{k}={v} " for k, v in sorted(params.items()) if v != "false")
    return ("ray start --head " if head else "ray start ") + flags


def replay_rayjob(sandbox: Sandbox, pcs: list[PodContainer], stack: Stack, tmp: Path) -> None:
    obj = pcs[0].obj
    cluster = f"{obj['metadata']['name']}-x7k2p"
    namespace = obj["metadata"]["namespace"]
    fqdn = f"{cluster}-head-svc.{namespace}.svc.cluster.local"
    spec = obj["spec"]["rayClusterSpec"]
    groups = {
        "head": spec["headGroupSpec"],
        **{f"worker {g['groupName']}": g for g in spec.get("workerGroupSpecs", [])},
    }
    for pc in pcs:
        if pc.role == "submitter":
            continue  # tests/test_ray_entrypoints.py replays the submitter's command chain
        head = pc.role == "head"
        group = groups[pc.role]
        start = ray_start_params(pc.template, group.get("rayStartParams", {}), head, f"{fqdn}:6379")
        # pod.go BuildPod: no `ray start` of ours, so KubeRay's wrapper and command (utils.GetContainerCommand).
        assert "ray start" not in " ".join(pc.container.get("command", []) + pc.container.get("args", []))
        argv = ["/bin/bash", "-c", "--", f"ulimit -n ${{RAY_START_ULIMIT_OPEN_FILES:-65536}}; {start}"]
        injected = {"RAY_CLUSTER_NAME": cluster, "RAY_CLUSTER_NAMESPACE": namespace, "RAY_PORT": "6379",
                    "RAY_ADDRESS": "127.0.0.1:6379" if head else f"{fqdn}:6379", "KUBERAY_GEN_RAY_START_CMD": start}  # fmt: skip
        before = len(sandbox.calls())
        run = sandbox.run(
            pc, image_of(pc), pod_name=f"{cluster}-{pc.role.split()[0]}-abcde", argv=argv, appended=injected
        )
        assert run.rc == 0, run.stderr
        (ray,) = [c for c in run.calls[before:] if c["program"] == "ray"]
        assert ray["argv"][0] == "start" and "--block" in ray["argv"]
        assert ("--head" in ray["argv"]) == head
        if not head:
            assert f"--address={fqdn}:6379" in ray["argv"]
            # The Neuron devices the worker owns are all visible to the Ray worker.
            assert "NEURON_RT_VISIBLE_CORES" not in ray["env"]
        for mount in ("/shared", "/tmp/ray"):
            assert under_a_mount(mount, pc, read_only=False)


# --- the MPI operator ---------------------------------------------------------------------------------
def mpi_launcher_env(obj: dict[str, Any]) -> dict[str, str]:
    """kubeflow/mpi-operator v0.8.0 pkg/controller/mpi_job_controller.go newLauncherPodTemplate: the
    launcher's env (Open MPI); the ConfigMap <job>-config at /etc/mpi holds the hostfile."""
    slots = obj["spec"].get("slotsPerWorker", 1)
    return {"K_MPI_JOB_ROLE": "launcher", "OMPI_MCA_orte_keep_fqdn_hostnames": "true",
            "OMPI_MCA_orte_default_hostfile": "/etc/mpi/hostfile",
            "OMPI_MCA_plm_rsh_args": "-o ConnectionAttempts=10", "OMPI_MCA_orte_set_default_slots": str(slots),
            "NVIDIA_VISIBLE_DEVICES": "", "NVIDIA_DRIVER_CAPABILITIES": ""}  # fmt: skip


def start_mpijob(sandbox: Sandbox, pcs: list[PodContainer], prepare_worker: Callable[[Any], None] | None = None) -> Any:
    """The workers (their own command, then sshd), registered under the hostfile's names, then the
    launcher's Running with /etc/mpi/hostfile (newConfigMap: ``<job>-worker-<i>.<job>.<ns>.svc slots=N``)."""
    obj = pcs[0].obj
    name, namespace = obj["metadata"]["name"], obj["metadata"]["namespace"]
    worker = only(pcs, role="worker")
    replicas = obj["spec"]["mpiReplicaSpecs"]["Worker"]["replicas"]
    slots = obj["spec"].get("slotsPerWorker", 1)
    hostfile = ""
    for i in range(replicas):
        host, address = f"{name}-worker-{i}.{name}.{namespace}.svc", f"10.1.0.{i + 10}"
        sandbox.cluster["hosts"][host] = address
        hostfile += f"{host} slots={slots}\n"
        run = sandbox.run(worker, image_of(worker), pod_name=f"{name}-worker-{i}", address=address,
                          appended={"K_MPI_JOB_ROLE": "worker"}, prepare=prepare_worker)  # fmt: skip
        assert run.rc == 0, run.stderr
        # The image's sshd, started as the namespace's id under its passwd entry (docker/nxd-llama).
        assert [c["program"] for c in run.calls[-2:]] == ["mpi-user", "mpi-sshd"] and run.calls[-1]["argv"] == []
    launcher = only(pcs, role="launcher")

    def mpi_config(pod: Any) -> None:
        config = pod.root / "volumes" / "mpi-job-config"
        config.mkdir(parents=True, exist_ok=True)
        (config / "hostfile").write_text(hostfile)
        pod.view.append(["/etc/mpi", str(config)])
        sandbox.cluster["launcher_view"] = pod.view
        sandbox.cluster["pods"][pod.name]["view"] = pod.view
        sandbox.save()

    return sandbox.start(launcher, image_of(launcher), pod_name=f"{name}-launcher-q8x2z",
                         appended=mpi_launcher_env(obj), prepare=mpi_config)  # fmt: skip


def replay_nxd(sandbox: Sandbox, pcs: list[PodContainer], stack: Stack, tmp: Path) -> None:
    """Both MPIJobs end to end: the launcher's mpirun (the DLC's, /usr/local/bin) starts one rank per
    worker through ssh and orted with the -x variables; each rank writes train_resumable.sh from the
    image's pinned train.sh and runs it, which sources the pinned train_setup.sh (its MPI branch: the
    hosts from /nodelist_helper.py, node_rank from OMPI_COMM_WORLD_RANK) and starts torchrun, wrapped
    in neuron_parallel_compile for the compile run. The training entry point is a stand-in."""
    from tests.test_nxd_llama import BAR, TRAIN_SETUP_SH, TRAIN_SH
    from workloads import nxd_llama

    obj = pcs[0].obj
    name, namespace = obj["metadata"]["name"], obj["metadata"]["namespace"]
    compile_run = name == "llama2-compile"
    workdir = IMAGES["nxd-llama"].workdir
    assert workdir == nxd_llama.EXAMPLES_DIR
    sandbox.behaviours["training_orchestrator.py"] = {"stdout": f"{BAR.format(step=41)}\r{BAR.format(step=42)}\r\n"}
    sandbox.save()

    def image_files(pod: Any) -> None:
        # The image's files the ranks run: examples/ at NXDT_EXAMPLES_COMMIT (its train.sh and
        # train_setup.sh whole, as tests/test_nxd_llama.py copies them; the config's one line train.sh
        # reads) and /nodelist_helper.py (docker/nxd-llama), each as the pod sees its paths.
        helper = pod.root / "image" / "nodelist_helper.py"
        helper.parent.mkdir(parents=True, exist_ok=True)
        helper.write_text((REPO_ROOT / "docker" / "nxd-llama" / "nodelist_helper.py").read_text())
        helper.chmod(0o755)
        pod.view.append(["/nodelist_helper.py", str(helper)])
        directory = Path(sandbox.local(pod, workdir))
        (directory / "conf").mkdir(parents=True, exist_ok=True)
        (directory / "conf" / f"{nxd_llama.CONF_FILE}.yaml").write_text("trainer:\n  devices: 32\n")
        (directory / "train.sh").write_text(TRAIN_SH)
        (directory / "train_setup.sh").write_text(sandbox.local(pod, TRAIN_SETUP_SH))
        sandbox.script(pod, f"{workdir}/training_orchestrator.py")
        # train_setup.sh raises the open-file limit to 65535; the EKS AMI's containerd gives containers
        # a hard limit of 1048576 (awslabs/amazon-eks-ami v20260724 nodeadm/internal/containerd/
        # base-runtime-spec.json rlimits), which this machine may not grant: a ulimit function through
        # BASH_ENV (bash(1)), which the test adds to the pod's sessions' environment.
        limits = pod.root / "image" / "container-limits.sh"
        limits.write_text('ulimit() { if [ "$*" = "-n 65535" ]; then return 0; fi; builtin ulimit "$@"; }\n')
        sandbox.cluster["pods"][pod.name]["session_extra"] = {"BASH_ENV": str(limits)}
        sandbox.cluster["pods"][pod.name]["view"] = pod.view
        sandbox.save()

    running = start_mpijob(sandbox, pcs, image_files)
    run = running.wait(60)
    assert run.rc == 0, run.stdout + run.stderr
    (mpirun,) = run.called("mpirun")
    argv = mpirun["argv"]
    assert argv[:2] == ["--prefix", nxd_llama.OPEN_MPI_PREFIX]
    # As the namespace's id with the MPI user's passwd entry (docker/nxd-llama mpi-user): no root consent.
    assert mpirun["env"]["USER"] == "mpiuser" and "NSS_WRAPPER_PASSWD" in mpirun["env"]
    assert "--allow-run-as-root" not in argv
    forwarded = [argv[i + 1] for i, word in enumerate(argv) if word == "-x"]
    assert forwarded == ["LD_LIBRARY_PATH", "PATH", "POD_UID", f"CONF_FILE={nxd_llama.CONF_FILE}",
                         f"COMPILE={int(compile_run)}"]  # fmt: skip
    replicas = obj["spec"]["mpiReplicaSpecs"]["Worker"]["replicas"]
    workers = [f"{name}-worker-{i}" for i in range(replicas)]
    master = f"{name}-worker-0.{name}.{namespace}.svc"
    ranks = [c for c in run.calls if c["program"] == "torchrun"]
    assert sorted(c["pod"] for c in ranks) == workers
    for call in ranks:
        rank = call["env"]["OMPI_COMM_WORLD_RANK"]
        # torchrun's arguments as train.sh builds them from train_setup.sh's MPI branch.
        assert call["argv"][:11] == ["--nproc_per_node", "32", "--nnodes", str(replicas), "--node_rank", rank,
                                     "--master_addr", master, "--master_port", "41000", "training_orchestrator.py"]  # fmt: skip
        assert call["pod"] == workers[int(rank)]
        assert call["env"]["COMPILE"] == str(int(compile_run)) and call["env"]["CONF_FILE"] == nxd_llama.CONF_FILE
        assert call["env"]["FI_PROVIDER"] == "efa" and call["env"]["CCOM_SOCKET_IFNAME"] == "eth0"
        assert call["env"]["OMPI_MCA_orte_default_hostfile"] == "/etc/mpi/hostfile"
        assert call["env"].get("K_MPI_JOB_ROLE") != "launcher"
        # The worker's sshd session: the MPI user's entry, and nss_wrapper's files for what it starts.
        assert call["env"]["USER"] == "mpiuser" and "NSS_WRAPPER_PASSWD" in call["env"]
    wrapped = [c for c in run.calls if c["program"] == "neuron_parallel_compile"]
    assert len(wrapped) == (replicas if compile_run else 0)
    assert all(c["argv"][0] == "torchrun" for c in wrapped)
    entries = [c for c in run.calls if c["program"] == "training_orchestrator.py"]
    assert len(entries) == replicas
    for entry in entries:
        view = sandbox.cluster["pods"][entry["pod"]]["view"]
        words = [to_container(w, view) for w in entry["argv"]]
        assert words[:4] == ["--config-path=conf", f"--config-name={nxd_llama.CONF_FILE}", "trainer.devices=32",
                             f"trainer.num_nodes={replicas}"]  # fmt: skip
        # The shipped stacks keep the default paths the staging Job fills.
        assert "data.tokenizer.type=/shared/llama7b_tokenizer" in words
        assert "data.data_prefix=[1.0,/shared/data/redpajama_sample_text_document]" in words
        assert "compiler_cache_url=/shared/neuron_cache" in words
        assert words[-1].startswith("exp_manager.explicit_log_dir=/shared/nemo_experiments/")
        # Prod's interval, unset in its stack file, is the Young/Daly optimum for asynchronous saves of 7B on 4
        # nodes (tests/test_goodput.py test_what_prod_leaves_unset_is_derived_from_the_model).
        assert ("exp_manager.checkpoint_callback_params.every_n_train_steps=160" in words) != compile_run
        assert ("exp_manager.async_checkpointing=true" in words) != compile_run
    if compile_run:
        return
    run_dir = stack.result.outputs["workloads"]["runDirectories"]["nxdLlama"]
    for entry in entries:
        assert to_container(entry["argv"][-1], sandbox.cluster["pods"][entry["pod"]]["view"]) == (
            f"exp_manager.explicit_log_dir={run_dir}"
        )
        # What the next attempt in this container ends if it outlives its agent (resilience.reap).
        marker = entry["env"][resilience.RUN_ATTEMPT_ENV].rsplit(" ", 1)
        assert marker[1].isdigit() and marker[0] == rewrite(run_dir, sandbox.cluster["pods"][entry["pod"]]["view"])
    for worker in workers:
        pod = sandbox.cluster["pods"][worker]
        assert Path(rewrite(f"{workdir}/train_resumable.sh", pod["view"])).is_file()
        # The attempt marker the liveness probe reads: the rank's own shell's pid.
        assert Path(rewrite("/tmp/training-attempt", pod["view"])).read_text().strip().isdigit()
    # Rank 0 holds the run directory's lock, on the shared file system, for the training job; node 0's
    # log, the probe's heartbeat, is there too.
    worker0 = sandbox.cluster["pods"][workers[0]]
    holder = Path(rewrite(f"{run_dir}/{nxd_llama.LOCK_SUBDIR}/.lock-holder", worker0["view"]))
    assert holder.resolve().is_relative_to((sandbox.root / "volumes").resolve()), "the run directory is not on FSx"
    assert json.loads(holder.read_text())["owner"] == f"{namespace}/{name}"
    log = Path(rewrite(f"{run_dir}/0/log", worker0["view"])).read_text()
    assert resilience.last_step(log, "nxdt") == 42


# --- data staging ----------------------------------------------------------------------------------
def replay_wikicorpus(sandbox: Sandbox, pcs: list[PodContainer], stack: Stack, tmp: Path) -> None:
    import tarfile

    pc = only(pcs)
    # The archive as the public bucket holds it: one directory of HDF5 shards.
    tmp.mkdir(parents=True, exist_ok=True)
    shard = tmp / "shard.hdf5"
    shard.write_text("hdf5")
    archive = tmp / "wikicorpus.tar"
    with tarfile.open(archive, "w") as tar:
        tar.add(shard, "bert_pretrain_wikicorpus_tokenized_hdf5_seqlen128/wiki_0.hdf5")
    name = "bert_pretrain_wikicorpus_tokenized_hdf5_seqlen128"
    sandbox.behaviours["aws"] = {"copies": {f"/data/{name}.tar": str(archive)}}
    sandbox.save()
    run = sandbox.run(pc, image_of(pc), pod_name="stage-wikicorpus-k2j4d")
    assert run.rc == 0, run.stdout + run.stderr
    (aws,) = run.called("aws")
    assert aws["argv"] == ["s3", "cp", f"s3://neuron-s3/training_datasets/bert_pretrain_wikicorpus_tokenized_hdf5/{name}.tar",
                           ".", "--no-sign-request", "--region", "us-east-1"]  # fmt: skip
    assert aws["cwd"] == sandbox.local(run.pod, "/data")
    staged = Path(sandbox.local(run.pod, f"/data/{name}"))
    assert (staged / "wiki_0.hdf5").read_text() == "hdf5" and (staged / ".staged").is_file()
    assert not Path(sandbox.local(run.pod, f"/data/{name}.tar")).exists()
    # A retry after success downloads nothing.
    again = sandbox.run(pc, image_of(pc), pod_name="stage-wikicorpus-p9s1x")
    assert again.rc == 0 and "already staged" in again.stdout and len(again.called("aws")) == 1


def replay_redpajama(sandbox: Sandbox, pcs: list[PodContainer], stack: Stack, tmp: Path) -> None:
    download, stage = only(pcs, name="download"), only(pcs, name="stage")
    assert download.init and not stage.init
    sample = "/shared/data/RedPajama-Data-1T-Sample"
    sandbox.behaviours["huggingface-cli"] = {"creates": {f"{sample}/arxiv_sample.jsonl": '{"text": "a"}\n'}}
    sandbox.behaviours["python3"] = {"answers": {
        "import transformers": {"creates": {"/shared/llama7b_tokenizer/tokenizer.json": "{}"}},
        "preprocess_data.py": {"creates": {"/shared/data/redpajama_sample_text_document.bin": "b",
                                                         "/shared/data/redpajama_sample_text_document.idx": "i"}},
    }}  # fmt: skip
    sandbox.save()
    run = sandbox.run(download, image_of(download), pod_name="stage-redpajama-w2v7c")
    assert run.rc == 0, run.stdout + run.stderr
    (cli,) = run.called("huggingface-cli")
    argv = cli["argv"]
    assert argv[:2] == ["download", "togethercomputer/RedPajama-Data-1T-Sample"]
    assert argv[argv.index("--local-dir") + 1] == "data/RedPajama-Data-1T-Sample"
    assert cli["cwd"] == sandbox.local(run.pod, "/shared")
    run = sandbox.run(stage, image_of(stage), pod_name="stage-redpajama-w2v7c")
    assert run.rc == 0, run.stdout + run.stderr
    tokenizer, preprocess = run.called("python3")
    assert tokenizer["argv"][0] == "-c" and "meta-llama/Llama-2-7b-hf" in tokenizer["argv"][1]
    token_file = "/var/run/secrets/huggingface/HF_TOKEN"
    assert token_file in tokenizer["argv"][1] or sandbox.local(run.pod, token_file) in tokenizer["argv"][1]
    assert Path(sandbox.local(run.pod, token_file)).is_file()
    # The image's Megatron-LM checkout (docker/nxd-llama), with the tokenizer the step before saved.
    assert preprocess["argv"][0] == sandbox.local(run.pod, "/opt/Megatron-LM/tools/preprocess_data.py")
    assert "--input=redpajama_sample.jsonl" in preprocess["argv"]
    assert f"--tokenizer-model={sandbox.local(run.pod, '/shared/llama7b_tokenizer')}" in preprocess["argv"]
    for done in ("llama7b_tokenizer/.staged", "data/redpajama_sample_text_document.staged"):
        assert Path(sandbox.local(run.pod, f"/shared/{done}")).is_file(), done


# --- a Trainium node, as the pods on it see it ------------------------------------------------------
NCCOM_TABLE = (
    # nccom-test.rst's table layout: size(B) count(elems) type time(us) algbw(GB/s) busbw(GB/s).
    "       size(B)    count(elems)    type    time(us)    algbw(GB/s)    busbw(GB/s)\n"
    "    1073741824       268435456    fp32       41000          24.39          45.73\n"
)
DD_OK = "1073741824 bytes (1.1 GB, 1.0 GiB) copied, 1.5 s, 716 MB/s\n"
# The containers' locked-memory limit: containerd on the EKS AMIs runs them with LimitMEMLOCK=infinity.
try:
    resource.setrlimit(resource.RLIMIT_MEMLOCK, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
except (ValueError, OSError):
    pass
MEMLOCK_UNLIMITED = resource.getrlimit(resource.RLIMIT_MEMLOCK)[0] == resource.RLIM_INFINITY


CONTAINER_LIMITS = "/root/.container-limits.sh"


def node_limits() -> dict[str, str]:
    """The environment that gives bash the container's locked-memory limit: unlimited, as containerd
    on the EKS AMIs sets it. Where this machine cannot lift its own (no CAP_SYS_RESOURCE), bash reads
    it from a ``ulimit`` function that BASH_ENV defines (bash(1): non-interactive shells source
    $BASH_ENV first; a function takes precedence over the builtin); trainium_node writes the file."""
    return {} if MEMLOCK_UNLIMITED else {"BASH_ENV": CONTAINER_LIMITS}


def trainium_node(sandbox: Sandbox, instance_type: str, mount_type: str = "lustre") -> Callable[[Any], None]:
    """The node a Neuron pod runs on: its devices (neuron-ls, /dev/neuron<i>), its EFA interfaces
    (fi_info), the shared mount's type as `stat -f -c %T` names it (``mount_type``), a healthy runtime (nccom-test), its memory and the
    container's seccomp mode as /proc shows them. Returns the pod's ``prepare``; start the pod with
    ``node_limits`` in its environment."""
    from infra.facts.instances import NEURON_INSTANCE_TYPES

    facts = NEURON_INSTANCE_TYPES[instance_type]
    domains = "".join(
        f"provider: efa\n    fabric: efa\n    domain: rdmap{i}s0-rdm\n    type: FI_EP_RDM\n"
        for i in range(facts.max_efa_interfaces)
    )
    sandbox.behaviours.update({
        "neuron-ls": {"stdout": neuron_ls_table(facts.neuron_devices, facts.neuron_cores // facts.neuron_devices)},
        "fi_info": {"stdout": domains},
        "nccom-test": {"stdout": NCCOM_TABLE},
        "stat": {"answers": {"^-f -c %T ": {"stdout": f"{mount_type}\n"}}},
        "dd": {"stderr": DD_OK},
        "python3": {"answers": {"169.254.169.254": {"exit": 1}, "AWS_CONTAINER_CREDENTIALS_FULL_URI": {"exit": 0}}},
    })  # fmt: skip
    sandbox.save()

    def prepare(pod: Any) -> None:
        for d in range(facts.neuron_devices):
            Path(sandbox.local(pod, "/dev/neuron") + str(d)).touch()
        Path(sandbox.local(pod, "/proc/self/status")).write_text("Name:\tbash\nSeccomp:\t2\n")
        Path(sandbox.local(pod, "/proc/meminfo")).write_text("MemTotal:       528113088 kB\nHugePages_Total:       0\n")
        Path(sandbox.local(pod, CONTAINER_LIMITS)).write_text(
            'ulimit() { if [ "$*" = -l ]; then echo unlimited; else builtin ulimit "$@"; fi; }\n'
        )
        for program in ("stat", "dd", "sleep"):
            sandbox.stub(pod.root / "bin" / program, pod.name)

    return prepare


def replay_burn_in(sandbox: Sandbox, pcs: list[PodContainer], stack: Stack, tmp: Path) -> None:
    from infra.specs import burn_in_objects as b

    pc = only(pcs)
    group = pc.obj["metadata"]["name"].removeprefix("burn-in-")
    (instance_type,) = [g["instanceType"] for g in stack.result.outputs["acceleratorNodeGroups"] if g["name"] == group]
    node = api_node("ip-100-64-1-1.us-west-2.compute.internal", 60, {b.BURN_IN_PENDING_LABEL: "true"})
    api = FakeApi({("GET", "/api/v1/nodes/"): node, ("PATCH", "/api/v1/nodes/"): {}})
    kind = stack.cluster_outputs["storage"].get("kind", "fsx")
    node_files = trainium_node(sandbox, instance_type, mount_type(stack))

    def prepare(pod: Any) -> None:
        node_files(pod)
        mount_account(api, sandbox, pod)

    try:
        running = sandbox.start(pc, image_of(pc), pod_name=f"{pc.obj['metadata']['name']}-x9z8w",
                                injected={**api.env(), **node_limits()}, prepare=prepare)  # fmt: skip
        patch = api.wait_for(lambda r: r["method"] == "PATCH")
        time.sleep(0.1)
        assert running.process.poll() is None, (
            "the burn-in pod must keep its node's Neuron devices: `exec sleep infinity`"
        )
        run = running.replay()
    finally:
        api.close()
    from infra.facts.instances import NEURON_INSTANCE_TYPES

    facts = NEURON_INSTANCE_TYPES[instance_type]
    labels = json.loads(patch["body"])["metadata"]["labels"]
    assert labels[b.BURN_IN_RESULT_LABEL] == "passed", run.stdout
    (nccom,) = run.called("nccom-test")
    assert nccom["argv"][:2] == ["-r", str(facts.neuron_cores)] and nccom["argv"][-1] == "allr"
    assert run.called("neuron-ls") and run.called("fi_info")[0]["argv"] == ["-p", "efa", "-t", "FI_EP_RDM"]
    assert f"{'EFS' if kind == 'efs' else 'FSx'} at " in run.stdout and run.called("stat")


def replay_prepull(sandbox: Sandbox, pcs: list[PodContainer], stack: Stack, tmp: Path) -> None:
    """The pre-pull's init containers run one after another and exit 0 (each only makes the kubelet pull
    its image); its container then stays, without a device, until the burn-in ends and the DaemonSet
    controller deletes the pod. All as the unprivileged user, on read-only roots."""
    name = pcs[0].obj["metadata"]["name"]
    inits = [p for p in pcs if p.init]
    assert len(inits) >= 1
    for i, pc in enumerate(inits):
        run = sandbox.run(pc, image_of(pc), pod_name=f"{name}-p{i}x4q")
        assert run.rc == 0, run.stdout + run.stderr
        assert run.argv == ["true"] and not run.root_owned_writes
    hold = only([p for p in pcs if not p.init])
    assert hold.container["image"] == inits[-1].container["image"]  # pulled already by the last init
    running = sandbox.start(hold, image_of(hold), pod_name=f"{name}-h7x2w")
    time.sleep(0.1)
    assert running.process.poll() is None, "the pre-pull's container stays until its DaemonSet deletes the pod"
    run = running.replay()
    assert run.argv == ["sleep", "infinity"]


# --- the cluster acceptance test: per-node Job, all-reduce MPIJob, verdict Job --------------------------
def replay_cluster_check(sandbox: Sandbox, pcs: list[PodContainer], stack: Stack, tmp: Path) -> None:
    nodes_job = pcs[0].obj
    check = stack.result.outputs["workloads"]["clusterCheck"]
    objects = {(o["kind"], o["metadata"]["name"]): o for o in stack.objects}
    instance_type = check["instanceType"]
    node_files = trainium_node(sandbox, instance_type, mount_type(stack))
    uid = "0f1e2d3c"
    pc = only(pcs)
    count = nodes_job["spec"]["completions"]
    running = []
    for i in range(count):
        meta = {
            "labels": {"batch.kubernetes.io/controller-uid": uid, "batch.kubernetes.io/job-name": "cluster-check-nodes"}
        }
        running.append(sandbox.start(pc, image_of(pc), pod_name=f"cluster-check-nodes-{i}", metadata=meta,
                                     node_name=f"ip-100-64-1-{i}.us-west-2.compute.internal",
                                     injected=node_limits(), appended={"AWS_CONTAINER_CREDENTIALS_FULL_URI": "http://169.254.170.23/v1/credentials",
                                               "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE": "/var/run/secrets/pods.eks.amazonaws.com/serviceaccount/eks-pod-identity-token"},
                                     prepare=node_files))  # fmt: skip
    for r in running:
        done = r.wait(30)
        assert done.rc == 0, done.stdout + done.stderr
        assert " PASS " in done.stdout
    # The all-reduce: its workers and launcher, on the MPI operator's hostfile.
    allreduce = objects[("MPIJob", "cluster-check-allreduce")]
    mpi_pcs = [p for p in pod_containers([allreduce])]

    def worker_node(pod: Any) -> None:
        node_files(pod)

    launcher = start_mpijob(sandbox, mpi_pcs, worker_node)
    done = launcher.wait(30)
    assert done.rc == 0, done.stdout + done.stderr
    (nccom,) = [c for c in done.called("nccom-test") if c["pod"].startswith("cluster-check-allreduce-")]
    # Run on worker 0 over ssh, with the worker's PATH and EFA settings from its sshd (MPI_SESSION_ENV).
    assert nccom["pod"] == "cluster-check-allreduce-worker-0" and nccom["env"]["FI_PROVIDER"] == "efa"
    assert nccom["env"]["USER"] == "mpiuser" and not any(k.startswith("OMPI_ALLOW_RUN_AS_ROOT") for k in nccom["env"])
    argv = nccom["argv"]
    assert argv[:4] == ["-r", str(check["allReduce"]["ranks"]), "-N", str(check["nodes"])] and "allr" in argv
    assert argv[argv.index("--hosts") + 1 :] == [f"10.1.0.{10 + i}" for i in range(check["nodes"])]
    assert (
        "RESULT" not in done.stdout
        and "PASS"
        in Path(sandbox.local(done.pod, check["results"])).joinpath("attempts", uid, "allreduce.status").read_text()
    )
    verdict = objects[("Job", "cluster-check-verdict")]
    (vpc,) = pod_containers([verdict])
    done = sandbox.run(
        vpc,
        image_of(vpc),
        pod_name="cluster-check-verdict-abc12",
        prepare=lambda pod: sandbox.stub(pod.root / "bin" / "sleep", pod.name),
    )
    assert done.rc == 0 and "RESULT PASS" in done.stdout, done.stdout + done.stderr


def covered_by_the_cluster_check(sandbox: Sandbox, pcs: list[PodContainer], stack: Stack, tmp: Path) -> None:
    """Replayed in order by replay_cluster_check (the per-node Job's scenario): only there do the
    per-node results it reads exist."""
    assert any(o["kind"] == "Job" and o["metadata"]["name"] == "cluster-check-nodes" for o in stack.objects)


# --- step gates -------------------------------------------------------------------------------------
# Each step's status when it has succeeded, and when it has failed, as its controller writes it
# (workloads/gate_loop.py cites where).
STEP_STATES = {
    "Job": ({"state": {"phase": "Completed"}},
            {"state": {"phase": "Failed", "reason": "PodFailed", "message": "worker-0 exited 1"}}),
    "RayJob": ({"jobDeploymentStatus": "Complete", "jobStatus": "SUCCEEDED"},
               {"jobDeploymentStatus": "Failed", "jobStatus": "FAILED", "reason": "AppFailed", "message": "worker-0 exited 1"}),
    "MPIJob": ({"conditions": [{"type": "Succeeded", "status": "True"}]},
               {"conditions": [{"type": "Failed", "status": "True", "reason": "MPIJobFailed", "message": "worker-0 exited 1"}]}),
}  # fmt: skip


def replay_gate(sandbox: Sandbox, pcs: list[PodContainer], stack: Stack, tmp: Path) -> None:
    pc = only(pcs)
    env = {e["name"]: e["value"] for e in pc.container["env"] if "value" in e}
    (step,) = [o for o in stack.objects if o["kind"] == env["GATE_KIND"] and o["metadata"]["name"] == env["GATE_NAME"]
               and o["metadata"]["namespace"] == env["GATE_NAMESPACE"]]  # fmt: skip
    for succeeded, status in zip((True, False), STEP_STATES[step["kind"]], strict=True):
        api = FakeApi({("GET", env["GATE_PATH"]): {**step, "status": status}})
        try:
            run = sandbox.run(pc, image_of(pc), pod_name=f"{pc.obj['metadata']['name']}-{int(succeeded)}q7d",
                              injected=api.env(), prepare=functools.partial(mount_account, api, sandbox), timeout=30)  # fmt: skip
        finally:
            api.close()
        assert run.argv[:2] == ["python", "-c"]
        assert api.requests and all(r["path"] == env["GATE_PATH"] for r in api.requests)
        message = Path(sandbox.local(run.pod, pc.container["terminationMessagePath"]))
        if succeeded:
            assert run.rc == 0, run.stdout + run.stderr
        else:  # fails at the first look, and the reason is the pod's termination message
            assert run.rc == 1 and len(api.requests) == 1, run.stdout + run.stderr
            assert "worker-0 exited 1" in message.read_text()


def replay_fsx_directories(sandbox: Sandbox, pcs: list[PodContainer], stack: Stack, tmp: Path) -> None:
    pc = only(pcs)
    # The namespaces whose directory claims the stack declares (fsx-claim-<namespace>).
    namespaces = {
        o["metadata"]["namespace"]
        for o in stack.objects
        if o["kind"] == "PersistentVolumeClaim" and o["metadata"]["name"] == f"fsx-claim-{o['metadata']['namespace']}"
    }
    for attempt in ("q7d2x", "m4k9p"):  # a replaced Job runs it again over what exists
        run = sandbox.run(pc, image_of(pc), pod_name=f"fsx-namespace-directories-{attempt}")
        assert run.rc == 0, run.stdout + run.stderr
        assert run.argv[:2] == ["sh", "-c"]
        for namespace in namespaces:
            assert Path(sandbox.local(run.pod, f"/fsx/{namespace}")).is_dir(), namespace
    assert namespaces >= {"default", "neuron-burn-in"}


SCENARIOS: list[tuple[str, Callable[[dict[str, Any]], bool], Callable[..., None]]] = [
    ("shell", lambda o: o["kind"] == "Pod" and o["metadata"]["name"] == "cmd-shell", replay_shell),
    ("tensorboard", lambda o: o["kind"] == "Deployment" and o["metadata"]["name"] == "tensorboard", replay_tensorboard),
    ("watchdog", lambda o: o["kind"] == "Deployment" and o["metadata"]["name"] == "gang-watchdog", replay_watchdog),
    (
        "progress-exporter",
        lambda o: o["kind"] == "Deployment" and o["metadata"]["name"] == "progress-exporter",
        replay_progress_exporter,
    ),
    (
        "sweeper",
        lambda o: o["kind"] == "CronJob" and o["metadata"]["name"] == "neuron-burn-in-sweeper",
        replay_sweeper,
    ),
    ("gang-hold", lambda o: o["kind"] == "CronJob" and o["metadata"]["name"] == "gang-hold", replay_gang_hold),
    (
        "bert",
        lambda o: o["apiVersion"].startswith("batch.volcano.sh/") and o["metadata"]["name"].startswith("bert-"),
        replay_bert,
    ),
    ("rayjob", lambda o: o["kind"] == "RayJob", replay_rayjob),
    ("wikicorpus", lambda o: o["kind"] == "Job" and o["metadata"]["name"] == "stage-wikicorpus", replay_wikicorpus),
    ("redpajama", lambda o: o["kind"] == "Job" and o["metadata"]["name"] == "stage-redpajama", replay_redpajama),
    ("burn-in", lambda o: o["kind"] == "DaemonSet" and o["metadata"]["name"].startswith("burn-in-"), replay_burn_in),
    (
        "image-prepull",
        lambda o: o["kind"] == "DaemonSet" and o["metadata"]["name"].startswith("image-prepull-"),
        replay_prepull,
    ),
    (
        "cluster-check",
        lambda o: o["kind"] == "Job" and o["metadata"]["name"] == "cluster-check-nodes",
        replay_cluster_check,
    ),
    (
        "cluster-check-later-stages",
        lambda o: o["metadata"]["name"] in ("cluster-check-allreduce", "cluster-check-verdict"),
        covered_by_the_cluster_check,
    ),
    ("gate", lambda o: o["kind"] == "Job" and o["metadata"]["name"].endswith("-gate"), replay_gate),
    ("nxd", lambda o: o["kind"] == "MPIJob" and o["metadata"]["name"].startswith("llama2-"), replay_nxd),
    (
        "fsx-directories",
        lambda o: o["kind"] == "Job" and o["metadata"]["name"] == "fsx-namespace-directories",
        replay_fsx_directories,
    ),
    (
        "efa-exporter",
        lambda o: o["kind"] == "DaemonSet" and o["metadata"]["name"] == "efa-exporter",
        replay_efa_exporter,
    ),
    (
        "neuron-monitor",
        lambda o: o["kind"] == "DaemonSet" and o["metadata"]["name"] == "neuron-monitor",
        replay_neuron_monitor,
    ),
]


# Which shipped stacks run each kind of pod (a replay that finds nothing to run must fail).
SHIPPED_IN = {
    "shell": {"dev"},
    "tensorboard": {"dev", "prod"},
    "watchdog": {"dev", "prod"},
    "progress-exporter": {"prod"},
    "sweeper": {"dev", "prod"},
    "gang-hold": {"dev", "prod"},
    "bert": {"dev"},
    "rayjob": {"dev"},
    "nxd": {"prod"},
    "gate": {"dev", "prod"},
    "wikicorpus": {"dev"},
    "redpajama": {"prod"},
    "burn-in": {"dev", "prod"},
    "image-prepull": {"dev", "prod"},
    "cluster-check": {"dev"},
    "cluster-check-later-stages": {"dev"},
    # Dev's file system is EFS: access points make the directories, no root Job.
    "fsx-directories": {"prod"},
    "efa-exporter": {"prod"},
    "neuron-monitor": {"prod"},
}


def grouped(stack: Stack) -> list[tuple[dict[str, Any], list[PodContainer]]]:
    groups: dict[int, tuple[dict[str, Any], list[PodContainer]]] = {}
    for pc in pod_containers(stack.objects):
        groups.setdefault(id(pc.obj), (pc.obj, []))[1].append(pc)
    return list(groups.values())


def test_every_object_with_a_pod_has_a_replay(stacks: list[Stack]) -> None:
    missing = [
        f"{s.name}: {o['kind']} {o['metadata']['name']}"
        for s in stacks
        for o, _ in grouped(s)
        if not [name for name, matches, _ in SCENARIOS if matches(o)]
    ]
    assert not missing, missing


@pytest.mark.parametrize("scenario", [name for name, _, _ in SCENARIOS])
def test_the_pods_commands_run(scenario: str, stacks: list[Stack], tmp_path: Path) -> None:
    (matches, replay) = [(m, r) for name, m, r in SCENARIOS if name == scenario][0]
    ran = 0
    for stack in stacks:
        for obj, pcs in grouped(stack):
            if matches(obj):
                meta = obj["metadata"]
                root = (
                    tmp_path
                    / f"{stack.name.replace('/', '-')}-{obj['kind']}-{meta.get('namespace', '')}-{meta['name']}"
                )
                sandbox = Sandbox(root, stack.objects)
                replay(sandbox, pcs, stack, root / "test")
                # A container that runs as a non-root user wrote nothing where only root may.
                assert sandbox.root_owned_writes == {}, sandbox.root_owned_writes
                ran += 1
    stack = stacks[0].name.split("/")[1]
    assert bool(ran) == (stack in SHIPPED_IN[scenario]), f"{ran} {scenario} objects in the {stack} stacks"


@pytest.mark.parametrize(
    ("user", "env", "caught"),
    [
        # No passwd entry for the id: HOME is "/", the image's root directory, which only root may write.
        (20001, [], True),
        (20001, [{"name": "HOME", "value": "/tmp"}], False),
        # Root writes its own /root.
        (None, [], False),
    ],
)
def test_a_non_root_container_writing_where_only_root_may_is_caught(
    user: int | None, env: list[dict[str, str]], caught: bool, tmp_path: Path
) -> None:
    context = {} if user is None else {"runAsUser": user, "runAsGroup": user, "runAsNonRoot": True}
    container = {
        "name": "c",
        "image": "x/bert-pretrain:1",
        "command": ["sh", "-c", 'mkdir -p "$HOME/.cache"'],
        "env": env,
    }
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j", "namespace": "default"},
           "spec": {"template": {"spec": {"securityContext": context, "containers": [container]}}}}  # fmt: skip
    sandbox = Sandbox(tmp_path / "sandbox", [job])
    (pc,) = pod_containers([job])
    run = sandbox.run(pc, image_of(pc), pod_name="j-abcde")
    assert run.rc == 0, run.stderr
    assert bool(run.root_owned_writes) == caught == bool(sandbox.root_owned_writes), run.root_owned_writes
