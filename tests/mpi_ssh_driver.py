"""Run an MPI worker's sshd and a launcher's command in a network namespace of their own, where the
workers' port is free whatever this machine runs. Started by tests/test_mpi_ssh.py under
``unshare --net`` (root) or ``unshare --user --map-current-user --net --keep-caps`` (anyone; or on
this machine's network where no user namespace can be made and the port is free); both
processes run under ``as_user`` (setpriv: the pod's non-root id, no capability), each with exactly
the environment given. Standard library only.

    python3 mpi_ssh_driver.py REQUEST.json   ->   prints the result as JSON
"""

from __future__ import annotations

import fcntl
import json
import os
import signal
import socket
import struct
import subprocess
import sys
import time

# linux/sockios.h and linux/if.h: read and set an interface's flags; IFF_UP.
SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP = 0x8913, 0x8914, 0x1


def loopback_up() -> None:
    """A new network namespace's loopback is down: bring it up (what `ip link set lo up` does)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        request = struct.pack("16sH", b"lo", 0)
        flags = struct.unpack("16sH", fcntl.ioctl(s, SIOCGIFFLAGS, request)[:18])[1]
        fcntl.ioctl(s, SIOCSIFFLAGS, struct.pack("16sH", b"lo", flags | IFF_UP))


def listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def main() -> int:
    request = json.loads(open(sys.argv[1]).read())
    as_user, port, timeout = request["as_user"], request["port"], request["timeout"]
    if request["network_namespace"]:
        loopback_up()
    worker = subprocess.Popen(
        [*as_user, *request["worker"]["argv"]], env=request["worker"]["env"], cwd=request["cwd"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    result: dict[str, object] = {}
    try:
        deadline = time.monotonic() + timeout
        while not listening(port) and worker.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        result["listening"] = listening(port)
        if result["listening"]:
            launcher = subprocess.run(
                [*as_user, *request["launcher"]["argv"]], env=request["launcher"]["env"], cwd=request["cwd"],
                capture_output=True, text=True, timeout=timeout,
            )  # fmt: skip
            result["launcher"] = {"rc": launcher.returncode, "stdout": launcher.stdout, "stderr": launcher.stderr}
    finally:
        if worker.poll() is None:
            os.killpg(worker.pid, signal.SIGTERM)
        out, err = worker.communicate(timeout=10)
        result["worker"] = {"rc": worker.returncode, "stdout": out, "stderr": err}
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
