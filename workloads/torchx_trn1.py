"""A TorchX component for BERT-large pretraining on Trainium, for users of `torchx run`.

From the repository root, with the image `make images` pushed:

    torchx run -s kubernetes --workspace "" \\
        -cfg queue=test,namespace=default,service_account=training \\
        workloads/torchx_trn1.py:trn1_dist_ddp --image <ecr>/bert-pretrain:<tag> \\
        --nnodes 2 --nproc_per_node 32 --precompile True --steps_this_run 10

``--workspace ""`` matters: TorchX's default workspace is the working directory, which its
Kubernetes scheduler would docker-build onto the image; the image already holds the script.
The pods run what the Volcano Jobs the workload stack declares (``bert.py``) run: the same
command (deadline, run-directory lock, resume, heartbeat), environment, devices, EFA interfaces,
CPU and memory requests, shared memory and FSx mount, but in a run directory and compile cache of
their own by default (``torchx-<name>``), so a hand-run job does not write where the stack's does. What TorchX
0.7.0 cannot express (a liveness probe, the pending bound, the deadline's exit-code policy, the
pod security posture) is listed in docs/workloads.md. TorchX sets no tolerations; EKS's
ExtendedResourceToleration admission plugin adds the one for the `aws.amazon.com/neuron` taint
because the pods request that resource. Devices and EFA interfaces per node come from the same
instance table the cluster stack sizes its node groups with.

No ``from __future__ import annotations`` here: TorchX builds its argument parser from the
parameters' annotation objects, and cannot decode string annotations.
"""

import importlib.util
import math
import re
import sys
from pathlib import Path

import torchx.specs as specs


def _repository_root() -> str:
    root = Path.cwd()
    if not (root / "workloads" / "bert_launch.py").is_file():
        raise ImportError(f"run `torchx run` from the repository root (the directory holding workloads/), not {root}")
    return str(root)


# `torchx run FILE:FN` exec()s this file's source inside torchx.specs.finder's globals, so
# __file__ is TorchX's, and the `torchx` console script puts only its bin directory on
# sys.path: the shared launch code is found from the working directory.
if importlib.util.find_spec("workloads") is None:
    sys.path.append(_repository_root())

from infra.facts.instances import NEURON_INSTANCE_TYPES  # noqa: E402
from infra.specs.node_template import EFA_RESOURCE  # noqa: E402
from workloads import bert_launch, quantities  # noqa: E402
from workloads.pods import NEURON_DEVICE_RESOURCE, TRAINING_REQUESTS  # noqa: E402

MULTI_NODE_TYPES = sorted(t for t, facts in NEURON_INSTANCE_TYPES.items() if facts.max_efa_interfaces)
# The workload stack's defaults of bertPretraining.precompileDeadlineMinutes and trainDeadlineMinutes
# (workloads/settings.py needs pydantic, which this component does without; a test holds them equal).
DEFAULT_DEADLINE_MINUTES = {"precompile": 120, "train": 2880}
# What a name becomes part of: the run directory and the compile cache on FSx.
NAME_PATTERN = re.compile(r"^[a-z0-9][a-z0-9-]*$")
# torchx 0.7.0 torchx/schedulers/kubernetes_scheduler.py role_to_pod: a role's `cpu` and `memMB` become
# the container's limits, and its requests are those less RESERVED_MILLICPU (100) and RESERVED_MEMMB
# (1024, in MB of 10^6 bytes). Not imported: that module imports yaml, which the component does without.
TORCHX_RESERVED_MILLICPU, TORCHX_RESERVED_MEMMB = 100, 1024


def role_cpu_and_memory(requests: dict[str, str]) -> tuple[float, int]:
    """The role's ``cpu`` and ``memMB`` whose pod requests are at least ``requests`` (memory rounded up
    to whole MB)."""
    cpu, memory = quantities.parse(requests["cpu"]), quantities.parse(requests["memory"])
    if cpu is None or memory is None:
        raise ValueError(f"requests {requests}: {quantities.ALLOWED}")
    return (int(cpu * 1000) + TORCHX_RESERVED_MILLICPU) / 1000, math.ceil(memory / 10**6) + TORCHX_RESERVED_MEMMB


def trn1_dist_ddp(
    image: str,
    nnodes: int = 2,
    nproc_per_node: int = 32,
    name: str = "bert",
    instance_type: str = "trn1.32xlarge",
    precompile: bool = False,
    steps_this_run: int = -1,
    batch_size: int = 16,
    grad_accum_usteps: int = 32,
    bf16: bool = True,
    cacheset: str = "",
    output_dir: str = "",
    deadline_minutes: int = -1,
    claim: str = "fsx-claim-default",
    max_retries: int = 3,
    checkpoint_every_shards: int = 1,
    checkpoints_to_keep: int = 2,
) -> specs.AppDef:
    """BERT-large phase-1 data-parallel pretraining: ``nnodes`` x ``nproc_per_node`` workers.

    Args:
        image: the bert-pretrain image from the cluster's ECR repository
        nnodes: number of Trainium nodes
        nproc_per_node: workers per node, one per NeuronCore
        name: job name prefix, and the default run directory's and compile cache's name (torchx-<name>)
        instance_type: a Trainium type with EFA (MULTI_NODE_TYPES: the table in infra/facts/instances.py)
        precompile: run under neuron_parallel_compile to fill the compile cache
        steps_this_run: stop after this many steps (-1: run to max_steps)
        batch_size: per-worker batch size
        grad_accum_usteps: gradient accumulation micro-steps
        bf16: train in bf16 (else full fp32)
        cacheset: compile cache prefix on FSx (default torchx-<name>); concurrent jobs must not share one,
            and the workload stack's bert jobs use theirs (bertPretraining.cacheset, bert-large)
        output_dir: where the run directory run-<hash> goes (default /data/output/torchx-<name>); a
            training run resumes from the newest complete checkpoint there, and one job at a time
            writes it (a second is refused)
        deadline_minutes: each attempt's deadline (-1: the workload stack's default, 120 for a
            precompile, 2880 for training)
        claim: the FSx PersistentVolumeClaim mounted at /data: the job's namespace's own directory,
            fsx-claim-<namespace> (the cluster stack's output storage.claims)
        max_retries: restarts of the whole job on a pod failure, the deadline's included
        checkpoint_every_shards: checkpoint after every this many dataset shards
        checkpoints_to_keep: complete checkpoints kept in the run directory
    """
    if instance_type not in MULTI_NODE_TYPES:
        raise ValueError(f"instance_type {instance_type!r}: allowed: {', '.join(MULTI_NODE_TYPES)}")
    if not NAME_PATTERN.match(name):
        raise ValueError(f"name {name!r}: allowed: lower-case letters, digits and '-', starting with a letter or digit")
    facts = NEURON_INSTANCE_TYPES[instance_type]
    run = bert_launch.BertRun(
        nnodes=nnodes,
        nproc_per_node=nproc_per_node,
        batch_size=batch_size,
        grad_accum_steps=grad_accum_usteps,
        output_dir=output_dir or f"{bert_launch.DATA_MOUNT}/output/torchx-{name}",
        steps_this_run=None if steps_this_run < 0 else steps_this_run,
        bf16=bf16,
        precompile=precompile,
        cacheset=cacheset or f"torchx-{name}",
        checkpoint_every_shards=checkpoint_every_shards,
        checkpoints_to_keep=checkpoints_to_keep,
    )
    if deadline_minutes < 0:
        deadline_minutes = DEFAULT_DEADLINE_MINUTES["precompile" if precompile else "train"]
    cpu, mem_mb = role_cpu_and_memory(TRAINING_REQUESTS)
    # TorchX's app id is the same for every Volcano retry of the job, which the c10d rendezvous
    # allows (its store starts empty in every attempt, bert_launch.torchrun); it also names the job
    # that holds the run directory's lock, taken by replica 0. rank0_env: rank 0's host, per replica.
    app_id, replica = specs.macros.app_id, specs.macros.replica_id
    command = bert_launch.command(run, app_id, specs.macros.rank0_env, app_id, replica)
    entrypoint, *args = bert_launch.with_deadline(command, deadline_minutes)
    return specs.AppDef(
        name=name,
        roles=[
            specs.Role(
                name=bert_launch.ROLE,
                image=image,
                entrypoint=entrypoint,
                args=args,
                num_replicas=nnodes,
                env=bert_launch.environment(run, specs.macros.replica_id),
                resource=specs.Resource(
                    # Annotated int in torchx 0.7.0, but role_to_pod takes int(cpu * 1000) millicores:
                    # a fraction is what gives the stack's whole-CPU request.
                    cpu=cpu,  # type: ignore[arg-type]
                    gpu=0,
                    memMB=mem_mb,
                    capabilities={"node.kubernetes.io/instance-type": instance_type},
                    devices={NEURON_DEVICE_RESOURCE: facts.neuron_devices, EFA_RESOURCE: facts.max_efa_interfaces},
                ),
                port_map={"c10d": bert_launch.RDZV_PORT},
                max_retries=max_retries,
                retry_policy=specs.RetryPolicy.APPLICATION,
                mounts=[specs.VolumeMount(src=claim, dst_path=bert_launch.DATA_MOUNT)],
            )
        ],
    )
