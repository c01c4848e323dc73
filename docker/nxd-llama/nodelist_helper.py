#!/usr/bin/env python3
"""The MPIJob's worker host names, rank order, for train_setup.sh (HOSTS; MASTER_ADDR is the first).

Run by each rank that mpirun starts: the MPI operator names worker i ``<job>-worker-<i>`` in the
job's headless service (kubeflow/mpi-operator v0.8.2 pkg/controller/mpi_job_controller.go workerName,
newConfigMap: ``<job>-worker-<i>.<job>.<namespace>.svc``), and Open MPI gives every rank the world
size (OMPI_COMM_WORLD_SIZE). Same contract as neuronx-nemo-megatron's k8s/docker/nodelist_helper.py
(d22aabf): this host's own name with the index replaced, space-separated.
"""

import os
import re
import subprocess
import sys


def hosts(this_host: str, world_size: int) -> list[str]:
    # In the first DNS label only: a namespace may itself end in "-worker-<n>".
    match = re.match(r"^([^.]*-worker)-\d+(\..*)?$", this_host)
    if match is None:
        raise ValueError(f"{this_host}: not an MPIJob worker's name (<job>-worker-<i>)")
    return [f"{match.group(1)}-{i}{match.group(2) or ''}" for i in range(world_size)]


def main() -> int:
    size = os.environ.get("OMPI_COMM_WORLD_SIZE")
    if not size:
        print("nodelist_helper.py: OMPI_COMM_WORLD_SIZE is unset: run it under mpirun", file=sys.stderr)
        return 1
    # The fully qualified name (kubelet's /etc/hosts line for a pod with a subdomain), so the names
    # printed resolve from any worker: a bare "<job>-worker-<i>" is not a name the service answers.
    this_host = subprocess.check_output(["hostname", "--fqdn"], text=True).strip()
    print(" ".join(hosts(this_host, int(size))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
