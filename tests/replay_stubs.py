"""The stand-ins for programs a pod runs that cannot run here, and the one liberty the replay takes:
container paths rewritten to the sandbox's directories (``rewrite``). Standard library only: every
stub is a two-line shell script that runs ``python3 replay_stubs.py <sandbox> <program> <args>``.

Each stub appends one JSON line to the sandbox's calls.jsonl (program, argv, cwd, environment),
then acts as its ``behaviours`` entry says: print and exit, or, for the launchers that start other
programs (neuron_parallel_compile, torchrun, mpirun, ssh), start them the way the real one does.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

# A container path is rewritten only where it stands as a whole path: not inside a longer path
# (``/mnt/data``) nor followed by more of a name (``/database``, ``/data.txt``).
_BEFORE = r"(?<![\w./-])"
_AFTER = r"(?![\w.-])"


def rewrite(text: str, view: list[list[str]]) -> str:
    """``text`` with each container path of ``view`` ([container path, sandbox path] pairs) replaced."""
    if not view:
        return text
    ordered = sorted(view, key=lambda pair: len(pair[0]), reverse=True)
    pattern = re.compile(_BEFORE + "(" + "|".join(re.escape(c) for c, _ in ordered) + ")" + _AFTER)
    targets = dict((c, h) for c, h in ordered)
    return pattern.sub(lambda m: targets[m.group(1)], text)


def to_container(text: str, view: list[list[str]]) -> str:
    """The inverse of ``rewrite``: the calling pod's sandbox paths back to its container paths, before
    what it passes on (an ssh command, mpirun's argv) is rewritten for the pod that runs it."""
    for container, host in sorted(view, key=lambda pair: len(pair[1]), reverse=True):
        text = text.replace(host, container)
    return text


def load(sandbox: Path) -> dict:
    return json.loads((sandbox / "cluster.json").read_text())


def pod_of(cluster: dict, host: str) -> dict:
    """The pod a host name or address belongs to (``hosts``: name -> address, ``addresses``: address -> pod)."""
    address = cluster["hosts"].get(host, host)
    return cluster["pods"][cluster["addresses"][address]]


def record(sandbox: Path, program: str, argv: list[str], **extra: object) -> None:
    entry = {"program": program, "argv": argv, "cwd": os.getcwd(), "env": dict(os.environ), **extra}
    with open(sandbox / "calls.jsonl", "a") as f:
        f.write(json.dumps(entry) + "\n")


# The image's MPI user (docker/nxd-llama mpi-user): its name and home; sshd's standard PATH for a
# user other than root (Debian's and Ubuntu's build, --with-default-path).
MPI_USER_NAME, MPI_USER_HOME = "mpiuser", "/home/mpiuser"
SSHD_DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin:/usr/games"


def session_file(pod: dict) -> Path:
    """Where a worker's sshd (the mpi-sshd stand-in) keeps what its sessions start with."""
    return Path(pod["stub_path"]).parent / "sshd-session.json"


def pod_env(pod: dict, extra: dict[str, str]) -> dict[str, str]:
    """What an sshd session on a worker starts with (openssh-portable V_9_6_P1 session.c do_setup_env,
    no PAM): the passwd entry's USER, LOGNAME, HOME and SHELL, the standard PATH, then the config's
    SetEnv (what mpi-sshd passes), nothing else of the container's own environment; and ``extra``
    (what mpirun forwards, what the test adds to the pod's sessions). No sshd there: the connection
    is refused."""
    if not session_file(pod).exists():
        sys.exit("ssh: connect to host port 2222: Connection refused")
    env = {"PATH": SSHD_DEFAULT_PATH, **json.loads(session_file(pod).read_text())}
    env.update(pod.get("session_extra", {}))  # sandbox paths already
    env.update({k: rewrite(v, pod["view"]) for k, v in extra.items()})
    env["PATH"] = pod["stub_path"] + ":" + rewrite(env["PATH"], pod["view"])
    return env


def run_in_pod(pod: dict, command: str, env: dict[str, str], cwd: str | None = None) -> int:
    """``bash -c command`` as a remote login runs it in the pod (its paths, its PATH stubs)."""
    workdir = rewrite(cwd or "/root", pod["view"])
    Path(workdir).mkdir(parents=True, exist_ok=True)
    argv = ["bash", "-c", rewrite(command, pod["view"])]
    return subprocess.run(argv, env=env, cwd=workdir).returncode


def ssh(sandbox: Path, args: list[str], caller: str) -> int:
    """OpenSSH's client: ``ssh [-o opt]... host [command...]``; the command words are joined with
    spaces and run by the remote user's shell (ssh(1): "command is executed on the remote host
    instead of a login shell"), on the workers' port (the image's client config; ``-p`` another:
    refused)."""
    cluster = load(sandbox)
    words = [to_container(a, cluster["pods"][caller]["view"]) for a in args]
    while words and words[0].startswith("-"):
        option = words.pop(0)
        if option in ("-o", "-p", "-i", "-l"):
            value = words.pop(0)
            if option == "-p" and value != "2222":
                print(f"ssh: connect to host port {value}: Connection refused", file=sys.stderr)
                return 255
    host, command = words[0], " ".join(words[1:])
    pod = pod_of(cluster, host)
    return run_in_pod(pod, command or "true", pod_env(pod, {}))


def getent(sandbox: Path, args: list[str], caller: str) -> int:
    """``getent hosts <name>``: the worker's address, as cluster DNS answers once its pod is up."""
    cluster = load(sandbox)
    name = args[1]
    for host, address in cluster["hosts"].items():
        if name in (host, host.split(".")[0]):
            print(f"{address}       {host}")
            return 0
    return 2


MPIRUN_WITH_VALUE = {"-np", "-n", "--prefix", "-bind-to", "--bind-to", "-map-by", "--map-by", "-x", "-wdir", "--wdir"}
MPIRUN_WITH_VALUE |= {"-hostfile", "--hostfile", "-H", "--host", "-mca", "--mca"}


def mpirun(sandbox: Path, args: list[str], caller: str) -> int:
    """Open MPI 4.1's mpirun as the launcher runs it: ranks placed on the hostfile's hosts in order,
    ``slots`` each (--map-by slot); each rank started by the remote orted with the session's
    environment, the ``-x`` variables from mpirun's own environment, OMPI_COMM_WORLD_* for its rank,
    in ``-wdir``; ``--prefix`` puts <prefix>/bin and <prefix>/lib first on PATH and LD_LIBRARY_PATH."""
    cluster = load(sandbox)
    options: dict[str, list[str]] = {}
    words = [to_container(a, cluster["pods"][caller]["view"]) for a in args]
    while words and words[0].startswith("-"):
        option = words.pop(0)
        value = words.pop(0) if option in MPIRUN_WITH_VALUE else ""
        options.setdefault(option.lstrip("-"), []).append(value)
    hostfile = os.environ.get("OMPI_MCA_orte_default_hostfile", "/etc/mpi/hostfile")
    slots: list[str] = []
    for line in Path(rewrite(hostfile, cluster["launcher_view"])).read_text().split("\n"):
        if line.strip():
            host, _, count = line.partition(" slots=")
            slots += [host.strip()] * int(count or 1)
    size = int((options.get("np") or options.get("n") or [str(len(slots))])[0])
    # Every OMPI_* and PMIX_* of mpirun's environment reaches the ranks, then -x (open-mpi/ompi v4.1.8
    # orte/mca/schizo/ompi/schizo_ompi.c parse_env l.695-763).
    forwarded = {
        k: to_container(v, cluster["pods"][caller]["view"])
        for k, v in os.environ.items()
        if k.startswith(("OMPI_", "PMIX_"))
    }
    for spec in options.get("x", []):
        name, eq, value = spec.partition("=")
        forwarded[name] = to_container(value if eq else os.environ.get(name, ""), cluster["pods"][caller]["view"])
    prefix = (options.get("prefix") or [""])[0]
    codes = []
    for rank in range(size):
        host = slots[rank % len(slots)]
        pod = pod_of(cluster, host)
        env = pod_env(pod, forwarded)
        if prefix:
            env["PATH"] = pod["stub_path"] + ":" + rewrite(f"{prefix}/bin", pod["view"]) + ":" + env["PATH"]
        env.update({
            "OMPI_COMM_WORLD_RANK": str(rank), "OMPI_COMM_WORLD_SIZE": str(size),
            "OMPI_COMM_WORLD_LOCAL_RANK": str(slots[:rank].count(host)),
            "OMPI_COMM_WORLD_LOCAL_SIZE": str(slots.count(host)),
        })  # fmt: skip
        # orted execs the program with its argv as given: no shell in between.
        workdir = rewrite((options.get("wdir") or ["/root"])[0], pod["view"])
        Path(workdir).mkdir(parents=True, exist_ok=True)
        argv = [rewrite(w, pod["view"]) for w in words]
        codes.append(subprocess.run(argv, env=env, cwd=workdir).returncode)
    return max(codes, default=0)


def mpi_user(sandbox: Path, args: list[str], caller: str) -> int:
    """docker/nxd-llama mpi-user (run for real in tests/test_mpi_ssh.py): its command with the MPI
    user's name and home and nss_wrapper's files; here without the preload itself, which would load
    this machine's library into every stand-in."""
    cluster = load(sandbox)
    state = rewrite("/tmp", cluster["pods"][caller]["view"]) + "/mpi-user"
    env = {**os.environ, "HOME": rewrite(MPI_USER_HOME, cluster["pods"][caller]["view"]), "USER": MPI_USER_NAME,
           "LOGNAME": MPI_USER_NAME, "NSS_WRAPPER_PASSWD": f"{state}/passwd", "NSS_WRAPPER_GROUP": f"{state}/group"}  # fmt: skip
    os.execvpe(args[0], args, env)


def mpi_sshd(sandbox: Path, args: list[str], caller: str) -> int:
    """docker/nxd-llama mpi-sshd (run for real in tests/test_mpi_ssh.py): sshd whose sessions get the
    passwd entry's USER, LOGNAME, HOME and SHELL, nss_wrapper's variables, and the variables whose
    names match MPI_SESSION_ENV (SetEnv); here it records that and exits, as the sshd stub did."""
    cluster = load(sandbox)
    view = cluster["pods"][caller]["view"]
    pattern = os.environ.get("MPI_SESSION_ENV", "")
    names = ["NSS_WRAPPER_PASSWD", "NSS_WRAPPER_GROUP"]
    names += [n for n in os.environ if pattern and re.search(pattern, n) and n not in names]
    session = {"USER": MPI_USER_NAME, "LOGNAME": MPI_USER_NAME, "HOME": MPI_USER_HOME, "SHELL": "/bin/bash"}
    session.update({n: to_container(os.environ[n], view) for n in names})
    session_file(cluster["pods"][caller]).write_text(json.dumps(session))
    return 0


def torchrun(sandbox: Path, args: list[str], caller: str) -> int:
    """torchrun (torch 2.5 and 2.9): its options, then the script and the script's arguments; the elastic
    agent starts ``python3 <script> <args>`` once per local rank with RANK, LOCAL_RANK, WORLD_SIZE,
    ... set (torch 2.9.0 torch/distributed/elastic/agent/server/local_elastic_agent.py l.305-324).
    Here: local rank 0 of node rank 0 only."""
    words = list(args)
    options: dict[str, str] = {}
    while words and words[0].startswith("--"):
        option = words.pop(0)
        if "=" in option:
            name, _, value = option.partition("=")
        else:
            name, value = option, words.pop(0)
        options[name.lstrip("-")] = value
    nproc, nnodes = int(options.get("nproc_per_node", "1")), int(options.get("nnodes", "1").split(":")[-1])
    env = dict(os.environ)
    env.update({
        "RANK": "0", "LOCAL_RANK": "0", "GROUP_RANK": "0", "WORLD_SIZE": str(nproc * nnodes),
        "LOCAL_WORLD_SIZE": str(nproc), "TORCHELASTIC_RUN_ID": options.get("rdzv_id", "none"),
    })  # fmt: skip
    return subprocess.run(["python3", *words], env=env).returncode


def neuron_parallel_compile(sandbox: Path, args: list[str], caller: str) -> int:
    """Runs its command (the words joined) in a shell for the graph-extracting trial run, with
    NEURON_EXTRACT_GRAPHS_ONLY set, then compiles what it extracted (nothing to do here)."""
    env = {**os.environ, "NEURON_EXTRACT_GRAPHS_ONLY": "1", "NEURON_PARALLEL_COMPILE": "1"}
    return subprocess.run(["/bin/sh", "-c", " ".join(args)], env=env).returncode


def sleep(sandbox: Path, args: list[str], caller: str) -> int:
    """coreutils sleep with the scripts' poll interval cut to 20 ms: what they wait for is the same,
    only sooner. ``sleep infinity`` still never returns."""
    if args == ["infinity"]:
        os.execvp("/bin/sleep", ["sleep", "infinity"])
    import time

    time.sleep(0.02)
    return 0


def hostname(sandbox: Path, args: list[str], caller: str) -> int:
    """``hostname`` prints the pod's name; ``--fqdn`` the name cluster DNS knows it by (the kubelet's
    /etc/hosts line for a pod with a subdomain: <pod>.<subdomain>.<namespace>.svc...), else the pod's."""
    cluster = load(sandbox)
    if "--fqdn" in args or "-f" in args:
        names = [host for host in cluster["hosts"] if host.split(".")[0] == caller]
        print(names[0] if names else caller)
    else:
        print(caller)
    return 0


LAUNCHERS = {
    "sleep": sleep,
    "ssh": ssh,
    "getent": getent,
    "mpirun": mpirun,
    "mpi-user": mpi_user,
    "mpi-sshd": mpi_sshd,
    "hostname": hostname,
    "torchrun": torchrun,
    "neuron_parallel_compile": neuron_parallel_compile,
}


def act(sandbox: Path, pod_name: str, program: str, args: list[str]) -> int:
    """A stub's behaviour for this call: the first of its ``answers`` whose pattern the joined
    arguments match, else its defaults; files it ``creates`` (container path: text) appear in the pod."""
    cluster = load(sandbox)
    behaviour = cluster["behaviours"].get(program, {})
    for pattern, answer in behaviour.get("answers", {}).items():
        if re.search(pattern, " ".join(args)):
            behaviour = {**behaviour, **answer}
            break
    view = cluster["pods"].get(pod_name, {}).get("view", [])
    for path, text in behaviour.get("creates", {}).items():
        target = Path(rewrite(path, view))
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    for path, source in behaviour.get("copies", {}).items():  # a file the sandbox prepared, e.g. an archive
        target = Path(rewrite(path, view))
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(Path(source).read_bytes())
    sys.stdout.write(behaviour.get("stdout", ""))
    sys.stderr.write(behaviour.get("stderr", ""))
    sys.stdout.flush()
    return int(behaviour.get("exit", 0))


def main() -> int:
    sandbox, pod_name, program, args = Path(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4:]
    if program == "python3":  # the real interpreter, unless the call runs what is only in the image
        intercepts = load(sandbox)["behaviours"].get("python3", {}).get("answers", {})
        if not any(re.search(p, " ".join(args)) for p in intercepts):
            os.execv(sys.executable, [sys.executable, *args])
    record(sandbox, program, args, pod=pod_name)
    if program in LAUNCHERS:
        return LAUNCHERS[program](sandbox, args, pod_name)
    return act(sandbox, pod_name, program, args)


if __name__ == "__main__":
    sys.exit(main())
