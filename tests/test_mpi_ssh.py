"""The MPI pods' SSH as their namespace's id, run for real: the image's start-up scripts
(docker/nxd-llama mpi-user and mpi-sshd), its sshd and ssh client configs, OpenSSH's own sshd and
ssh, and nss_wrapper, with the commands and environments the workload renders (the cluster check's
all-reduce MPIJob: its worker's sshd, its launcher's wait and its ssh to worker 0, whose session
starts nccom-test, whose mpirun reaches every worker over ssh again).

What stands in for the cluster: a network namespace of its own (tests/mpi_ssh_driver.py), so the
workers' port 2222 is free; 127.0.0.1 and 127.0.0.2 are two workers, both the one sshd; getent
answers for cluster DNS; the image's paths (/home/mpiuser, /etc/ssh/mpi_sshd_config,
/etc/ssh/ssh_config.d/mpi.conf, /opt/aws/neuron/bin, the FSx mount, the hostfile) are directories
of a temporary tree; nccom-test is a script that does what its MPI run does over ssh. The job's key
pair is made as the MPI operator makes it (kubeflow/mpi-operator v0.8.2 mpi_job_controller.go
newSSHAuthSecret: ECDSA P-521, PEM "EC PRIVATE KEY"), its files root's with mode 0644 when this
suite runs as root (setupSSHOnPod: the Secret's default mode away from /root/.ssh); run as another
user the private key is that user's own, so it is 0600 (OpenSSH refuses an open key of its user's own).
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.test_cluster_check import _layout, write_attempts
from workloads import cluster_check, pods

ROOT = Path(__file__).resolve().parent.parent
IMAGE_DIR = ROOT / "docker" / "nxd-llama"
DRIVER = Path(__file__).resolve().parent / "mpi_ssh_driver.py"
# The image's files, as the Dockerfile copies them: file in docker/nxd-llama -> path in the image.
IMAGE_FILES = {
    "mpi-user": pods.MPI_USER,
    "mpi-sshd": pods.MPI_SSHD,
    "mpi_sshd_config": "/etc/ssh/mpi_sshd_config",
    "mpi_ssh_config": "/etc/ssh/ssh_config.d/mpi.conf",
}
STANDARD_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
QUOTED = 'a "quoted" \\value $HOME # not a comment'


def missing_tools() -> list[str]:
    missing = [p for p in ("/usr/sbin/sshd",) if not os.access(p, os.X_OK)]
    missing += [t for t in ("ssh", "ssh-keygen", "unshare", "setpriv") if shutil.which(t) is None]
    preload = subprocess.run(
        ["true"], env={"LD_PRELOAD": "libnss_wrapper.so", "PATH": STANDARD_PATH}, capture_output=True
    )
    if b"cannot be preloaded" in preload.stderr:
        missing.append("libnss_wrapper.so")
    return missing


@pytest.fixture(scope="module")
def openssh() -> None:
    if missing := missing_tools():
        pytest.fail(
            f"the MPI SSH tests run OpenSSH's sshd and ssh with nss_wrapper, as the nxd-llama image does; missing: "
            f"{', '.join(missing)}: install them (Debian/Ubuntu: apt-get install openssh-server openssh-client "
            "libnss-wrapper util-linux; .ci/run does it when it runs as root)"
        )


@pytest.fixture
def tree() -> Iterator[Path]:
    """A temporary tree the pod's id can read (pytest's own tmp_path is its user's alone)."""
    path = Path(tempfile.mkdtemp(prefix="mpi-ssh-"))
    path.chmod(0o755)
    (path / "tmp").mkdir(mode=0o1777)
    (path / "tmp").chmod(0o1777)  # the container's /tmp, where mpi-user writes (TMPDIR)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def image_file(tree: Path, name: str) -> str:
    target = tree / "image" / name
    target.parent.mkdir(exist_ok=True)
    shutil.copy(IMAGE_DIR / name, target)
    target.chmod(0o755 if name.startswith("mpi-") else 0o644)
    return str(target)


def job_keys(home: Path) -> None:
    """The MPI operator's Secret at sshAuthMountPath (<home>/.ssh): id_rsa, id_rsa.pub, authorized_keys."""
    ssh = home / ".ssh"
    ssh.mkdir(parents=True)
    subprocess.run(["ssh-keygen", "-q", "-t", "ecdsa", "-b", "521", "-m", "PEM", "-N", "", "-f", str(ssh / "id_rsa")],
                   check=True, capture_output=True)  # fmt: skip
    assert (ssh / "id_rsa").read_text().startswith("-----BEGIN EC PRIVATE KEY-----")
    shutil.copy(ssh / "id_rsa.pub", ssh / "authorized_keys")
    for f in ssh.iterdir():
        f.chmod(0o644 if os.geteuid() == 0 or f.name != "id_rsa" else 0o600)
    ssh.chmod(0o755)
    home.chmod(0o1777)  # as the image makes it


def identity(namespace_id: int) -> tuple[int, list[str], list[str]]:
    """Who the pods run as here, how the driver becomes it, and the network namespace to run in: as
    root, a new one and the namespace's id; as anyone else, that user in a new user and network
    namespace where unprivileged user namespaces are allowed, else this machine's own network when
    port 2222 is free there."""
    if os.geteuid() == 0:
        become = ["setpriv", f"--reuid={namespace_id}", f"--regid={namespace_id}", "--clear-groups"]
        return namespace_id, become, ["unshare", "--net"]
    drop = ["setpriv", "--inh-caps=-all", "--ambient-caps=-all"]
    keep = ["unshare", "--user", "--map-current-user", "--net", "--keep-caps"]
    if subprocess.run([*keep, "true"], capture_output=True).returncode == 0:
        return os.getuid(), drop, keep
    with socket.socket() as s:
        if s.connect_ex(("127.0.0.1", pods.MPI_SSH_PORT)) != 0:
            return os.getuid(), drop, []
    pytest.fail(
        f"no network namespace for the MPI SSH test (unprivileged user namespaces are off here) and port "
        f"{pods.MPI_SSH_PORT} is taken: run the suite as root, or free the port"
    )


def container(job: dict[str, Any], role: str) -> tuple[dict[str, Any], dict[str, Any]]:
    template = job["spec"]["mpiReplicaSpecs"][role]["template"]
    return template["spec"], template["spec"]["containers"][0]


def in_image(argv: list[str], files: dict[str, str]) -> list[str]:
    return [files.get(word, word) for word in argv]


def test_the_allreduce_launcher_reaches_every_worker_as_the_namespaces_id(openssh: None, tree: Path) -> None:
    layout = _layout()
    job = cluster_check.allreduce_job(layout)
    files = {path: image_file(tree, name) for name, path in IMAGE_FILES.items()}
    home = tree / "home" / "mpiuser"
    job_keys(home)
    assert job["spec"]["sshAuthMountPath"] == f"{pods.MPI_USER_HOME}/.ssh"
    worker_spec, worker = container(job, "Worker")
    launcher_spec, launcher = container(job, "Launcher")
    uid, become, namespace = identity(worker_spec["securityContext"]["runAsUser"])
    assert launcher_spec["securityContext"]["runAsUser"] == worker_spec["securityContext"]["runAsUser"] == 20001

    # The image's ssh client reads /etc/ssh/ssh_config.d/mpi.conf; here, the same file through -F.
    bin_dir = tree / "bin"
    bin_dir.mkdir()
    (bin_dir / "ssh").write_text(
        f'#!/bin/sh\nexec {shutil.which("ssh")} -F {files["/etc/ssh/ssh_config.d/mpi.conf"]} "$@"\n'
    )
    # Cluster DNS: the hostfile's two workers.
    (bin_dir / "getent").write_text(
        '#!/bin/sh\ncase "$2" in *worker-0*) echo "127.0.0.1 $2";; *worker-1*) echo "127.0.0.2 $2";; esac\n'
    )
    # nccom-test's multi-node run on worker 0 starts its ranks through Open MPI over ssh on every host of
    # --hosts (aws-neuron-sdk v2.30.0 nccom-test.rst "MPI Execution"): its own ssh, from the session.
    neuron_bin = tree / "neuron-bin"
    neuron_bin.mkdir()
    (neuron_bin / "nccom-test").write_text(
        "#!/bin/bash\nset -u\n"
        'echo "nccom-test as $(id -un) uid=$(id -u) home=$HOME root=$NEURON_RT_ROOT_COMM_ID fi=$FI_PROVIDER '
        'other=${OTHER_VAR-unset} capeff=$(awk \'/^CapEff/ {print $2}\' /proc/self/status)"\n'
        'echo "quoted=$NEURON_TEST_QUOTED"\n'
        'hosts=(); after=0; for a in "$@"; do [ $after = 1 ] && hosts+=("$a"); [ "$a" = --hosts ] && after=1; done\n'
        'for h in "${hosts[@]}"; do\n'
        '  ssh "$h" \'set -- $SSH_CONNECTION; echo "rank on $3 as $(id -un) fi=$FI_PROVIDER"\' || exit 1\n'
        'done\n'
        'echo "    1073741824       268435456    fp32       41000          24.39          47.09"\n'
    )  # fmt: skip
    for f in (*bin_dir.iterdir(), neuron_bin / "nccom-test"):
        f.chmod(0o755)
    shared = tree / "shared"
    shared.mkdir()
    write_attempts(shared, {"job-b": (["PASS", "PASS"], None)}, current="job-b")
    subprocess.run(["chmod", "-R", "a+rwX", str(shared)], check=True)
    hostfile = tree / "hostfile"
    hostfile.write_text("".join(f"cluster-check-allreduce-worker-{i}.cluster-check-allreduce.default.svc slots=1\n" for i in range(2)))  # fmt: skip
    script = (
        launcher["command"][-1]
        .replace(cluster_check.HOSTFILE, str(hostfile))
        .replace(cluster_check.SHARED_MOUNT, str(shared))
        .replace(cluster_check.NEURON_BIN, str(neuron_bin))
    )
    assert launcher["command"][:3] == [pods.MPI_USER, "bash", "-c"]
    path = f"{bin_dir}:{STANDARD_PATH}"
    # What the kubelet gives each container beside its env (the image's PATH; MPI_USER_HOME places the
    # image's /home/mpiuser in the tree; TMPDIR keeps mpi-user's files there), and what the operator adds.
    common = {"PATH": path, "MPI_USER_HOME": str(home), "TMPDIR": str(tree / "tmp"), "HOME": "/"}
    worker_env = {e["name"]: e["value"] for e in worker["env"]}
    request = {
        "as_user": become,
        "network_namespace": bool(namespace),
        "port": pods.MPI_SSH_PORT,
        "timeout": 30,
        "cwd": str(tree),
        "worker": {
            # The image's sshd config stands at /etc/ssh/mpi_sshd_config: a later -f wins (sshd.c).
            "argv": [*in_image(worker["command"], files), "-f", files["/etc/ssh/mpi_sshd_config"]],
            "env": {**common, **worker_env, "K_MPI_JOB_ROLE": "worker", "NEURON_TEST_QUOTED": QUOTED, "OTHER_VAR": "1"},
        },
        "launcher": {
            "argv": [files[pods.MPI_USER], "bash", "-c", script],
            "env": {**common, "K_MPI_JOB_ROLE": "launcher", "OMPI_MCA_orte_default_hostfile": str(hostfile)},
        },
    }
    (tree / "request.json").write_text(json.dumps(request))
    for f in (tree / "request.json", hostfile):
        f.chmod(0o644)
    done = subprocess.run([*namespace, sys.executable, str(DRIVER), str(tree / "request.json")],
                          capture_output=True, text=True, timeout=90)  # fmt: skip
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["listening"], result["worker"]
    run = result["launcher"]
    log = (shared / "cluster-check" / layout.run / "attempts" / "job-b" / "allreduce.txt").read_text()
    assert run["rc"] == 0, (run, log, result["worker"]["stderr"])
    # Worker 0's session: the namespace's id by its passwd entry and home, no capability, the worker's
    # EFA settings and PATH (MPI_SESSION_ENV, SetEnv: values whole, quotes and all), nothing else.
    assert (
        f"nccom-test as mpiuser uid={uid} home={home} root=127.0.0.1:45654 fi=efa other=unset capeff=0000000000000000"
        in log
    )
    assert f"quoted={QUOTED}" in log
    # nccom-test's own ssh from that session, on the client config's port (no -p), found the user too.
    assert "rank on 127.0.0.1 " in log and "rank on 127.0.0.2 " in log
    assert log.count(" as mpiuser fi=efa") == 2
    status = shared / "cluster-check" / layout.run / "attempts" / "job-b" / "allreduce.status"
    assert status.read_text().strip() == "PASS"
    assert "Accepted publickey for mpiuser" in result["worker"]["stderr"]


def test_without_its_passwd_entry_the_ssh_client_refuses_the_namespaces_id(openssh: None, tree: Path) -> None:
    """What mpi-user is for: OpenSSH's client exits when getpwuid() finds nothing (openssh-portable
    V_9_6_P1 ssh.c main, "No user exists for uid"); under mpi-user it goes on to connect."""
    if os.geteuid() != 0:
        pytest.skip("needs an id without a passwd entry: run as root, which becomes one")
    become = ["setpriv", "--reuid=20001", "--regid=20001", "--clear-groups"]
    user = image_file(tree, "mpi-user")
    env = {"PATH": STANDARD_PATH, "TMPDIR": str(tree / "tmp")}
    bare = subprocess.run([*become, "ssh", "-o", "BatchMode=yes", "-p", "1", "127.0.0.1", "true"],
                          env=env, capture_output=True, text=True)  # fmt: skip
    assert bare.returncode == 255 and "No user exists for uid 20001" in bare.stderr
    wrapped = subprocess.run([*become, user, "ssh", "-o", "BatchMode=yes", "-p", "1", "127.0.0.1", "true"],
                             env=env, capture_output=True, text=True)  # fmt: skip
    assert "No user exists" not in wrapped.stderr and "port 1" in wrapped.stderr


def test_mpi_user_gives_the_id_one_entry_and_refuses_root(openssh: None, tree: Path) -> None:
    """An id this machine's /etc/passwd already names (as root: nobody's; else this user's own) is
    replaced, not listed twice: sshd must find this user's home, where the operator mounts the keys.
    The id without an entry is the all-reduce test's."""
    user = image_file(tree, "mpi-user")
    env = {"PATH": STANDARD_PATH, "TMPDIR": str(tree / "tmp")}
    if os.geteuid() == 0:
        uid = gid = pwd.getpwnam("nobody").pw_uid
        become = ["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups"]
    else:
        uid, gid, become = os.getuid(), os.getgid(), []
    assert pwd.getpwuid(uid).pw_name != "mpiuser"
    script = (
        'getent passwd "$(id -u)"; id -un; id -gn; echo "$HOME $USER $LOGNAME"; '
        """awk -F: -v u="$(id -u)" '$3 == u' "$NSS_WRAPPER_PASSWD" | wc -l; grep -c '^root:' "$NSS_WRAPPER_PASSWD" """
    )
    shown = subprocess.run([*become, user, "sh", "-c", script], env=env, capture_output=True, text=True)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.split("\n")[:6] == [
        f"mpiuser:x:{uid}:{gid}:MPI user:{pods.MPI_USER_HOME}:/bin/bash",
        "mpiuser",
        "mpiuser",
        f"{pods.MPI_USER_HOME} mpiuser mpiuser",
        "1",
        "1",
    ]
    if os.geteuid() == 0:
        refused = subprocess.run([user, "true"], env=env, capture_output=True, text=True)
        assert refused.returncode == 1 and "running as root" in refused.stderr


def test_the_image_ships_the_scripts_and_configs_where_the_pods_call_them(openssh: None) -> None:
    dockerfile = (IMAGE_DIR / "Dockerfile").read_text()
    assert "COPY --chmod=755 mpi-user mpi-sshd /usr/local/bin/" in dockerfile
    assert "COPY mpi_sshd_config /etc/ssh/mpi_sshd_config" in dockerfile
    assert "COPY mpi_ssh_config /etc/ssh/ssh_config.d/mpi.conf" in dockerfile
    assert "install -d -m 1777 /home/mpiuser" in dockerfile and "libnss-wrapper" in dockerfile
    assert pods.MPI_USER == "/usr/local/bin/mpi-user" and pods.MPI_SSHD == "/usr/local/bin/mpi-sshd"
    assert "/etc/ssh/mpi_sshd_config" in (IMAGE_DIR / "mpi-sshd").read_text()
    assert f"home=${{MPI_USER_HOME:-{pods.MPI_USER_HOME}}}" in (IMAGE_DIR / "mpi-user").read_text()
    # The port, as sshd and the client read their files: the Dockerfile's own build check, run here.
    config = subprocess.run(["ssh", "-G", "-F", str(IMAGE_DIR / "mpi_ssh_config"), "worker"],
                            capture_output=True, text=True, check=True).stdout.splitlines()  # fmt: skip
    assert f"port {pods.MPI_SSH_PORT}" in config and "stricthostkeychecking false" in config
    assert f"Port {pods.MPI_SSH_PORT}\n" in (IMAGE_DIR / "mpi_sshd_config").read_text()
