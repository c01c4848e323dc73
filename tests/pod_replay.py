"""Every container of every pod template a stack renders, run here as its node would run it.

What the replay reproduces, each from the source at the version we pin:

- The kubelet builds the process's argv from the container's ``command`` and ``args`` and the
  image's ENTRYPOINT and CMD (kubernetes v1.34.0 pkg/kubelet/kuberuntime/kuberuntime_container.go
  generateContainerConfig passes command and args to the runtime; containerd's CRI
  WithProcessArgs: a ``command`` replaces ENTRYPOINT and drops CMD, ``args`` alone replace CMD),
  after expanding ``$(NAME)`` references to the container's environment
  (pkg/kubelet/container/helpers.go ExpandContainerCommandAndArgs with
  third_party/forked/golang/expansion/expand.go: ``$$`` is a literal ``$``, an unknown ``$(NAME)``
  stays as written). Environment values are expanded against the variables defined before them
  (pkg/kubelet/kubelet_pods.go makeEnvironmentVariables). No shell runs unless the argv starts one.
- The working directory is the container's ``workingDir``, else the image's WORKDIR.
- The user is the container's ``runAsUser``, else the pod's, else the image's USER (root for the
  Neuron images). HOME, unless the container's env sets it, is that user's in the image's
  /etc/passwd, and "/" for a user missing there (opencontainers/runc v1.3.5 libcontainer/env.go
  prepareEnv, getUserHome). The replay runs every process as this machine's user, so what a
  non-root user may not write is checked by path instead: files such a container leaves in what the
  image gives root alone (its root directory, WORKDIR, /root, /etc, /data and /shared without a
  volume) are reported (``Replay.root_owned_writes``): on the node, writing them would have failed.
- What the controllers add is in ``controllers.py``-style tables in the test module that uses this
  one; this module only runs processes.

The one liberty: the sandbox cannot create ``/shared`` or ``/tmp/resilience.py``, so every path
inside the container (its volume mounts, its own /tmp, /root, /home/mpiuser, the service
account, the absolute paths of stubbed programs) is rewritten to a directory of the sandbox
(replay_stubs.rewrite), in the argv, the environment and the files of mounted ConfigMaps. The
sandbox's own path is letters, digits and ``/._-`` only, so no shell or quoting sees a difference.
Each container has its own private directories; ``/data`` and ``/shared`` without a mount are the
container's own layer, so data that misses its volume is seen to miss it (``on_a_claim``) and never
lands on the machine running the tests.
"""

from __future__ import annotations

import base64
import json
import os
import re
import signal
import subprocess
import sys
import sysconfig
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.replay_stubs import rewrite

REPO_ROOT = Path(__file__).resolve().parent.parent
STUBS_MODULE = Path(__file__).resolve().parent / "replay_stubs.py"
SAFE_PATH = re.compile(r"[A-Za-z0-9_/.-]+")
HOST_PATH = f"{sysconfig.get_config_var('BINDIR')}:{os.environ['PATH']}"


# --- the kubelet ---------------------------------------------------------------------------------
def expand(text: str, env: dict[str, str]) -> str:
    """kubernetes v1.34.0 third_party/forked/golang/expansion/expand.go Expand with the kubelet's
    MappingFuncFor (unknown names give back ``$(NAME)``)."""
    out, i = [], 0
    while i < len(text):
        c = text[i]
        if c != "$" or i + 1 == len(text):
            out.append(c)
            i += 1
            continue
        nxt = text[i + 1]
        if nxt == "$":  # escaped operator
            out.append("$")
            i += 2
        elif nxt == "(":
            close = text.find(")", i + 2)
            if close == -1:  # incomplete reference: kept
                out.append("$(")
                i += 2
            else:
                name = text[i + 2 : close]
                out.append(env.get(name, f"$({name})"))
                i = close + 1
        else:  # an operator that begins no expression: kept with the next character
            out.append(c + nxt)
            i += 2
    return "".join(out)


@dataclass(frozen=True)
class Image:
    """What the kubelet takes from an image: ENTRYPOINT, CMD, WORKDIR, and its PATH; and what the
    runtime does: its USER and the home directories its /etc/passwd lists (uid: home)."""

    entrypoint: tuple[str, ...] = ()
    cmd: tuple[str, ...] = ()
    workdir: str = "/"
    path: str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
    user: int = 0
    homes: tuple[tuple[int, str], ...] = ((0, "/root"),)


def dockerfile_image(name: str) -> Image:
    """Our images' ENTRYPOINT, CMD, WORKDIR and PATH from docker/<name>/Dockerfile (one stage each)."""
    entrypoint: tuple[str, ...] = ()
    cmd: tuple[str, ...] = ()
    workdir, path, user, homes = "/", Image().path, 0, Image().homes
    for line in (REPO_ROOT / "docker" / name / "Dockerfile").read_text().splitlines():
        word, _, rest = line.partition(" ")
        if added := re.search(r"useradd --uid (\d+) --create-home (\S+)", line):
            homes += ((int(added.group(1)), f"/home/{added.group(2)}"),)
        if word == "USER":
            user = int(rest.strip())
        elif word == "WORKDIR":
            workdir = rest.strip()
        elif word == "ENTRYPOINT":
            entrypoint = tuple(json.loads(rest))
        elif word == "CMD":
            cmd = tuple(json.loads(rest))
        elif word == "ENV":
            found = re.search(r"PATH=(\S+)", rest)
            if found:
                path = found.group(1).replace("${PATH}", path)
    return Image(entrypoint, cmd, workdir, path, user, homes)


def run_as_user(template: dict[str, Any], container: dict[str, Any], image: Image) -> int:
    """The user the runtime starts the container as (kubernetes pkg/securitycontext/util.go
    DetermineEffectiveSecurityContext: the container's setting over the pod's; neither: the image's)."""
    pod = template["spec"].get("securityContext", {})
    user = container.get("securityContext", {}).get("runAsUser", pod.get("runAsUser"))
    return image.user if user is None else int(user)


def kubelet_argv(container: dict[str, Any], image: Image, env: dict[str, str]) -> list[str]:
    command = [expand(c, env) for c in container.get("command", [])]
    args = [expand(a, env) for a in container.get("args", [])]
    if command:
        return command + args
    return list(image.entrypoint) + (args or list(image.cmd))


def field_value(path: str, pod: dict[str, Any]) -> str:
    """A downward-API fieldRef on the running pod (metadata and spec.nodeName)."""
    meta = pod["metadata"]
    found = re.fullmatch(r"metadata\.(labels|annotations)\['(.+)'\]", path)
    if found:
        return meta.get(found.group(1), {}).get(found.group(2), "")
    return {
        "metadata.name": meta.get("name", ""),
        "metadata.namespace": meta.get("namespace", ""),
        "metadata.uid": meta.get("uid", ""),
        "spec.nodeName": pod["spec"].get("nodeName", ""),
        "status.podIP": pod.get("status", {}).get("podIP", ""),
    }[path]


def container_env(
    container: dict[str, Any],
    pod: dict[str, Any],
    injected: dict[str, str],
    objects: list[dict[str, Any]],
    appended: dict[str, str] | None = None,
) -> dict[str, str]:
    """The container's environment in the kubelet's order: what the kubelet itself gives (``injected``:
    HOSTNAME, the API server's service address), then ``env`` in order, each value expanded against
    what came before, then what the controllers and webhooks append to ``env`` (``appended``: Volcano's
    plugins, KubeRay, the MPI operator and the Pod Identity webhook all append)."""
    env = dict(injected)
    for item in container.get("env", []):
        if "value" in item:
            env[item["name"]] = expand(item["value"], env)
        elif "fieldRef" in item.get("valueFrom", {}):
            env[item["name"]] = field_value(item["valueFrom"]["fieldRef"]["fieldPath"], pod)
        elif "secretKeyRef" in item.get("valueFrom", {}):
            ref = item["valueFrom"]["secretKeyRef"]
            env[item["name"]] = secret_data(find(objects, "Secret", ref["name"], pod)).get(ref["key"], "")
        else:
            raise AssertionError(f"no replay for env {item}")
    return {**env, **(appended or {})}


# --- rendered objects ----------------------------------------------------------------------------
def find(objects: list[dict[str, Any]], kind: str, name: str, pod: dict[str, Any]) -> dict[str, Any]:
    namespace = pod["metadata"].get("namespace")
    (obj,) = [
        o
        for o in objects
        if o["kind"] == kind and o["metadata"]["name"] == name and o["metadata"].get("namespace") == namespace
    ]
    return obj


STAND_IN_SECRET = "stand-in-secret-value"


def secret_data(secret: dict[str, Any]) -> dict[str, str]:
    """A Secret's keys; values the plan keeps secret are a stand-in."""
    data = {k: base64.b64decode(v).decode() for k, v in (secret.get("data") or {}).items()}
    string_data = secret.get("stringData")
    if isinstance(string_data, dict):
        data.update({k: v if isinstance(v, str) else STAND_IN_SECRET for k, v in string_data.items()})
    return data


@dataclass(frozen=True)
class PodContainer:
    """One container of one pod template of one rendered object."""

    obj: dict[str, Any]
    role: str
    template: dict[str, Any]
    container: dict[str, Any]
    init: bool = False

    @property
    def key(self) -> str:
        meta = self.obj["metadata"]
        return f"{self.obj['kind']} {meta.get('namespace', '')}/{meta['name']} {self.role} {self.container['name']}"

    @property
    def image_name(self) -> str:
        return self.container["image"].rsplit("/", 1)[-1].split(":")[0]


def pod_templates(obj: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    kind, spec = obj["kind"], obj.get("spec", {})
    if obj["apiVersion"].startswith("batch.volcano.sh/"):
        for task in spec["tasks"]:
            yield f"task {task['name']}", task["template"]
    elif kind in ("Deployment", "DaemonSet", "Job", "StatefulSet", "ReplicaSet"):
        yield "pod", spec["template"]
    elif kind == "CronJob":
        yield "pod", spec["jobTemplate"]["spec"]["template"]
    elif kind == "Pod":
        yield "pod", obj
    elif kind == "RayJob":
        cluster = spec["rayClusterSpec"]
        yield "head", cluster["headGroupSpec"]["template"]
        for group in cluster.get("workerGroupSpecs", []):
            yield f"worker {group['groupName']}", group["template"]
        yield "submitter", spec.get("submitterPodTemplate") or {"spec": {"containers": [{"name": "ray-job-submitter"}]}}
    elif kind == "MPIJob":
        for role, replica in spec["mpiReplicaSpecs"].items():
            yield role.lower(), replica["template"]


def pod_containers(objects: list[dict[str, Any]]) -> list[PodContainer]:
    found = []
    for obj in objects:
        for role, template in pod_templates(obj):
            for c in template["spec"].get("initContainers", []):
                found.append(PodContainer(obj, role, template, c, init=True))
            for c in template["spec"]["containers"]:
                found.append(PodContainer(obj, role, template, c))
    return found


# --- the sandbox ---------------------------------------------------------------------------------
# Programs that cannot run here; each is a stub (replay_stubs.py) on the container's PATH, and at
# these absolute paths where the images install them.
STUBBED = (
    "torchrun", "neuron_parallel_compile", "mpirun", "ssh", "getent", "sshd", "mpi-user", "mpi-sshd", "aws", "kubectl",
    "tensorboard", "ray", "nginx", "huggingface-cli", "neuron-ls", "neuron-top", "nccom-test", "fi_info", "fi_pingpong",
    "hostname",
)  # fmt: skip
STUB_DIRS = {
    "/opt/aws/neuron/bin": ("neuron-ls", "neuron-top", "nccom-test", "neuron_parallel_compile"),
    "/opt/amazon/efa/bin": ("fi_info", "fi_pingpong"),
    # The DLC's Open MPI build (prefix /usr/local), which the MPIJob launchers call by absolute path, and
    # docker/nxd-llama's MPI start-up scripts (run for real in tests/test_mpi_ssh.py).
    "/usr/local/bin": ("mpirun", "mpi-user", "mpi-sshd"),
    "/usr/sbin": ("sshd",),
}
# The image's own files the pods run: scripts that stand in for the training programs.
# The node's own files a pod reads (the Neuron devices, /proc) stand for a Trainium node's: see
# Sandbox.trainium_node.
PRIVATE_PATHS = (
    "/tmp",
    "/root",
    # The nxd-llama image's MPI user's home (docker/nxd-llama mpi-user).
    "/home/mpiuser",
    "/var/run/secrets/kubernetes.io/serviceaccount",
    "/dev/neuron",
    "/proc/self/status",
    "/proc/meminfo",
    "/dev/termination-log",
    # The file-system roots our workloads keep their data under: the container's own layer unless a
    # volume is mounted there, so data that misses its mount is seen to miss the shared volume.
    "/data",
    "/shared",
)  # fmt: skip


@dataclass
class Replay:
    """A finished container: its argv and environment as the node built them (container paths), its
    pod, exit code, output, and every stub call the sandbox saw so far."""

    argv: list[str]
    env: dict[str, str]
    pod: Pod
    rc: int
    stdout: str
    stderr: str
    calls: list[dict[str, Any]]
    # Files a non-root container left where the image lets only root write (sandbox paths).
    root_owned_writes: list[str] = field(default_factory=list)

    def called(self, program: str) -> list[dict[str, Any]]:
        return [c for c in self.calls if c["program"] == program]


@dataclass
class Pod:
    """A running pod: its name, its template with what the controller filled in, and its sandbox."""

    name: str
    template: dict[str, Any]
    root: Path
    view: list[list[str]] = field(default_factory=list)

    @property
    def image_root(self) -> Path:
        """The image's own "/" (its files but the mapped paths): the working directory when WORKDIR is "/"."""
        return self.root / "image"


def files_under(paths: list[Path]) -> set[str]:
    found = set()
    for path in paths:
        if path.is_file():
            found.add(str(path))
        elif path.is_dir():
            found.update(str(p) for p in path.rglob("*"))
    return found


class Sandbox:
    def __init__(self, root: Path, objects: list[dict[str, Any]], behaviours: dict[str, Any] | None = None) -> None:
        assert SAFE_PATH.fullmatch(str(root)), root
        self.root = root
        self.objects = objects
        self.behaviours = behaviours or {}
        self.cluster: dict[str, Any] = {"hosts": {}, "addresses": {}, "pods": {}, "launcher_view": []}
        # Container -> what it wrote where only root may (Replay.root_owned_writes), for every non-root run.
        self.root_owned_writes: dict[str, list[str]] = {}
        (root / "volumes").mkdir(parents=True, exist_ok=True)
        self.save()

    def save(self) -> None:
        (self.root / "cluster.json").write_text(json.dumps({**self.cluster, "behaviours": self.behaviours}))

    def calls(self) -> list[dict[str, Any]]:
        path = self.root / "calls.jsonl"
        return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []

    def stub(self, path: Path, pod: str, program: str | None = None) -> None:
        """A stand-in program at ``path`` (replay_stubs.main), named ``program`` in the calls."""
        path.parent.mkdir(parents=True, exist_ok=True)
        name = program or path.name
        path.write_text(f'#!/bin/sh\nexec {sys.executable} -S {STUBS_MODULE} {self.root} {pod} {name} "$@"\n')
        path.chmod(0o755)

    def script(self, pod: Pod, container_path: str, program: str | None = None) -> None:
        """An image file that stands in for a training program: Python (run as ``python3 file``) or
        a shell script, recording itself under its file name."""
        path = Path(self.local(pod, container_path))
        name = program or path.name
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.suffix == ".py":
            path.write_text(
                f"import sys; sys.path.insert(0, {str(STUBS_MODULE.parent)!r}); import replay_stubs\n"
                f"sys.argv[1:1] = [{str(self.root)!r}, {pod.name!r}, {name!r}]; sys.exit(replay_stubs.main())\n"
            )
        else:
            self.stub(path, pod.name, name)

    def volume_dir(self, pod: Pod, volume: dict[str, Any]) -> Path:
        """Where a pod volume's files are: one directory per claim (every pod of the cluster sees the
        same file system), the rest per pod."""
        if "persistentVolumeClaim" in volume:
            claim = volume["persistentVolumeClaim"]["claimName"]
            path = self.root / "volumes" / f"{pod.template['metadata']['namespace']}-{claim}"
        else:
            path = pod.root / "volumes" / volume["name"]
        path.mkdir(parents=True, exist_ok=True)
        return path

    def fill(self, pod: Pod, volume: dict[str, Any], path: Path) -> None:
        """A ConfigMap's or Secret's keys as files, from the rendered objects."""
        if "configMap" in volume:
            ref = volume["configMap"]
            data = dict(find(self.objects, "ConfigMap", ref["name"], pod.template).get("data", {}))
        elif "secret" in volume:
            ref = volume["secret"]
            data = secret_data(find(self.objects, "Secret", ref["secretName"], pod.template))
        else:
            return
        for item in ref.get("items") or [{"key": k, "path": k} for k in data]:
            (path / item["path"]).write_text(self.local(pod, data.get(item["key"], STAND_IN_SECRET)))

    def local(self, pod: Pod, text: str) -> str:
        return rewrite(text, pod.view)

    def on_a_claim(self, pod: Pod, path: str) -> bool:
        """Whether ``path`` in the pod is on a persistent volume claim (the cluster's shared FSx), not
        in the container's own layer."""
        return Path(self.local(pod, path)).resolve().is_relative_to((self.root / "volumes").resolve())

    def start_pod(self, name: str, template: dict[str, Any], container: dict[str, Any], image: Image) -> Pod:
        """The pod's view of the files for ``container``: its private paths, the stubs at the paths
        the image has them, the image's WORKDIR, then its mounts (which win where they overlap)."""
        pod = Pod(name, template, self.root / "pods" / name)
        private = pod.root / "private" / container["name"]  # each container has its own /tmp, /etc, ...
        view = {p: str(private / p.strip("/").replace("/", "_")) for p in PRIVATE_PATHS}
        for p in (
            "/tmp",
            "/root",
            "/home/mpiuser",
            "/var/run/secrets/kubernetes.io/serviceaccount",
            "/data",
            "/shared",
        ):
            Path(view[p]).mkdir(parents=True, exist_ok=True)
        private.mkdir(parents=True, exist_ok=True)
        for directory, programs in STUB_DIRS.items():
            view[directory] = str(pod.root / "stubs" / directory.strip("/").replace("/", "_"))
            for program in programs:
                self.stub(Path(view[directory]) / program, name)
        if image.workdir != "/":  # "/" itself is never rewritten: every absolute path would be
            view[image.workdir] = str(pod.root / "image" / image.workdir.strip("/").replace("/", "_"))
            Path(view[image.workdir]).mkdir(parents=True, exist_ok=True)
        volumes = {v["name"]: v for v in template["spec"].get("volumes", [])}
        mounts = [
            (m, volumes[m["name"]], self.volume_dir(pod, volumes[m["name"]])) for m in container.get("volumeMounts", [])
        ]
        for mount, _, host in mounts:
            view[mount["mountPath"]] = str(host / mount["subPath"]) if mount.get("subPath") else str(host)
        pod.view = [[c, h] for c, h in view.items()]
        for _, volume, host in mounts:
            self.fill(pod, volume, host)
        for program in (*STUBBED, "python3"):
            self.stub(pod.root / "bin" / program, name)
        return pod

    def start(
        self,
        pc: PodContainer,
        image: Image,
        *,
        pod_name: str,
        metadata: dict[str, Any] | None = None,
        node_name: str = "ip-100-64-1-1.us-west-2.compute.internal",
        injected: dict[str, str] | None = None,
        appended: dict[str, str] | None = None,
        argv: list[str] | None = None,
        prepare: Callable[[Pod], None] | None = None,
        address: str | None = None,
    ) -> Running:
        """Start the container as its node would: ``argv`` where the controller builds the process
        (KubeRay's ``ray start``), else the kubelet's from command, args and the image; ``injected``
        and ``appended`` go before and after the container's ``env`` (container_env)."""
        template = json.loads(json.dumps(pc.template))
        meta = {**template.get("metadata", {}), **(metadata or {})}
        meta.setdefault("namespace", pc.obj["metadata"].get("namespace", "default"))
        meta.setdefault("name", pod_name)
        meta.setdefault("uid", f"uid-{pod_name}")
        template["metadata"] = meta
        template["spec"].setdefault("nodeName", node_name)
        pod = self.start_pod(pod_name, template, pc.container, image)
        env = container_env(pc.container, template, {"HOSTNAME": pod_name, **(injected or {})}, self.objects, appended)
        command = argv if argv is not None else kubelet_argv(pc.container, image, env)
        env.setdefault("PATH", image.path)
        user = run_as_user(template, pc.container, image)
        home = dict(image.homes).get(user, "/")
        if home not in ("/", "/root"):  # the image user's own home, which it may write
            pod.view.append([home, str(pod.root / "homes" / home.strip("/").replace("/", "_"))])
            Path(pod.view[-1][1]).mkdir(parents=True, exist_ok=True)
        env.setdefault("HOME", home)
        local_env = {k: self.local(pod, v) for k, v in env.items()}
        if env["HOME"] == "/":  # "/" itself is never rewritten
            local_env["HOME"] = str(pod.image_root)
        local_env["PATH"] = f"{pod.root / 'bin'}:{self.local(pod, env['PATH'])}:{HOST_PATH}"
        workdir = pc.container.get("workingDir") or image.workdir
        cwd = self.local(pod, workdir) if workdir != "/" else str(pod.root / "image")
        Path(cwd).mkdir(parents=True, exist_ok=True)
        self.cluster["pods"][pod_name] = {"view": pod.view, "stub_path": str(pod.root / "bin")}
        if address is not None:
            self.cluster["addresses"][address] = pod_name
        self.save()
        if prepare is not None:
            prepare(pod)
        root_only = self.root_only_paths(pod, pc.container, image) if user != 0 else []
        before = files_under(root_only)
        process = subprocess.Popen(
            [self.local(pod, a) for a in command], env=local_env, cwd=cwd, text=True, start_new_session=True,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )  # fmt: skip
        return Running(self, process, command, env, pod, f"{pod_name}/{pc.container['name']}", root_only, before)

    def root_only_paths(self, pod: Pod, container: dict[str, Any], image: Image) -> list[Path]:
        """Where, in the container, the image lets only root write: its "/" and WORKDIR, /root, /etc,
        and /data and /shared unless a volume is mounted there (sandbox paths)."""
        mounted = {m["mountPath"] for m in container.get("volumeMounts", [])}
        paths = [pod.image_root, Path(self.local(pod, "/root")), Path(self.local(pod, "/etc/environment"))]
        if image.workdir != "/" and image.workdir not in mounted:
            paths.append(Path(self.local(pod, image.workdir)))
        paths += [Path(self.local(pod, p)) for p in ("/data", "/shared") if p not in mounted]
        return paths

    def note_root_owned_writes(self, container: str, written: list[str]) -> None:
        if written:
            self.root_owned_writes.setdefault(container, []).extend(written)

    def run(self, pc: PodContainer, image: Image, *, timeout: float = 60, **options: Any) -> Replay:
        return self.start(pc, image, **options).wait(timeout)


@dataclass
class Running:
    sandbox: Sandbox
    process: subprocess.Popen[str]
    argv: list[str]
    env: dict[str, str]
    pod: Pod
    container: str = ""
    root_only: list[Path] = field(default_factory=list)
    before: set[str] = field(default_factory=set)

    def written(self) -> list[str]:
        written = sorted(files_under(self.root_only) - self.before)
        self.sandbox.note_root_owned_writes(self.container, written)
        return written

    def wait(self, timeout: float = 60) -> Replay:
        try:
            stdout, stderr = self.process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            stdout, stderr = self.stop()
            raise AssertionError(f"still running after {timeout} s:\n{stdout}\n{stderr}") from None
        rc, calls = self.process.returncode, self.sandbox.calls()
        return Replay(self.argv, self.env, self.pod, rc, stdout, stderr, calls, self.written())

    def stop(self) -> tuple[str, str]:
        """Kill the container's whole process group, as the kubelet's stop does."""
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
        return self.process.communicate(timeout=10)

    def replay(self) -> Replay:
        stdout, stderr = self.stop()
        rc, calls = self.process.returncode, self.sandbox.calls()
        return Replay(self.argv, self.env, self.pod, rc, stdout, stderr, calls, self.written())
