"""A TorchX component for BERT-large pretraining on Trainium, for users of `torchx run`.

From the repository root, with the image `make images` pushed:

    torchx run -s kubernetes --workspace "" \\
        -cfg queue=test,namespace=default,service_account=training \\
        workloads/torchx_trn1.py:trn1_dist_ddp --image <ecr>/bert-pretrain:<tag> \\
        --nnodes 2 --nproc_per_node 32 --precompile True --steps_this_run 10

``--workspace ""`` matters: TorchX's default workspace is the working directory, which its
Kubernetes scheduler would docker-build onto the image; the image already holds the script.
The pods it produces match the Volcano Jobs the workload stack declares (``bert.py``): same
command, environment, devices, EFA interfaces, shared memory and FSx mount. TorchX sets no
tolerations; EKS's ExtendedResourceToleration admission plugin adds the one for the
`aws.amazon.com/neuron` taint because the pods request that resource. Devices and EFA
interfaces per node come from the same instance table the cluster stack sizes its node
groups with.

No ``from __future__ import annotations`` here: TorchX builds its argument parser from the
parameters' annotation objects, and cannot decode string annotations.
"""

import importlib.util
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
from workloads import bert_launch  # noqa: E402
from workloads.pods import NEURON_DEVICE_RESOURCE  # noqa: E402

MULTI_NODE_TYPES = sorted(t for t, facts in NEURON_INSTANCE_TYPES.items() if facts.max_efa_interfaces)


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
    cacheset: str = "bert-large",
    etcd_endpoint: str = "etcd-server:2379",
    claim: str = "fsx-claim",
    max_retries: int = 3,
    checkpoint_every_shards: int = 1,
    checkpoints_to_keep: int = 2,
) -> specs.AppDef:
    """BERT-large phase-1 data-parallel pretraining: ``nnodes`` x ``nproc_per_node`` workers.

    Args:
        image: the bert-pretrain image from the cluster's ECR repository
        nnodes: number of Trainium nodes
        nproc_per_node: workers per node, one per NeuronCore
        name: job name prefix
        instance_type: a Trainium type with EFA (MULTI_NODE_TYPES: the table in infra/facts/instances.py)
        precompile: run under neuron_parallel_compile to fill the compile cache
        steps_this_run: stop after this many steps (-1: run to max_steps)
        batch_size: per-worker batch size
        grad_accum_usteps: gradient accumulation micro-steps
        bf16: train in bf16 (else full fp32)
        cacheset: compile cache prefix on FSx; concurrent jobs must not share one
        etcd_endpoint: the cluster's etcd rendezvous endpoint (host:port)
        claim: the FSx PersistentVolumeClaim mounted at /data
        max_retries: restarts of the whole job on a pod failure
        checkpoint_every_shards: checkpoint after every this many dataset shards
        checkpoints_to_keep: complete checkpoints kept; a training run (not precompile) resumes
            from the newest complete one in its run directory (/data/output/run-<hash>)
    """
    if instance_type not in MULTI_NODE_TYPES:
        raise ValueError(f"instance_type {instance_type!r}: allowed: {', '.join(MULTI_NODE_TYPES)}")
    facts = NEURON_INSTANCE_TYPES[instance_type]
    run = bert_launch.BertRun(
        nnodes=nnodes,
        nproc_per_node=nproc_per_node,
        etcd_endpoint=etcd_endpoint,
        batch_size=batch_size,
        grad_accum_steps=grad_accum_usteps,
        steps_this_run=None if steps_this_run < 0 else steps_this_run,
        bf16=bf16,
        precompile=precompile,
        cacheset=cacheset,
        checkpoint_every_shards=checkpoint_every_shards,
        checkpoints_to_keep=checkpoints_to_keep,
    )
    # TorchX's app id is the same for every Volcano retry of the job, and etcd rendezvous closes
    # a run id when its run ends: each retry picks the next id still open (bert_launch).
    entrypoint, *args = bert_launch.command_with_fresh_rdzv_id(run, specs.macros.app_id)
    return specs.AppDef(
        name=name,
        roles=[
            specs.Role(
                name="worker",
                image=image,
                entrypoint=entrypoint,
                args=args,
                num_replicas=nnodes,
                env=bert_launch.environment(run, specs.macros.replica_id),
                resource=specs.Resource(
                    cpu=0,
                    gpu=0,
                    memMB=0,
                    capabilities={"node.kubernetes.io/instance-type": instance_type},
                    devices={NEURON_DEVICE_RESOURCE: facts.neuron_devices, EFA_RESOURCE: facts.max_efa_interfaces},
                ),
                max_retries=max_retries,
                retry_policy=specs.RetryPolicy.APPLICATION,
                mounts=[specs.VolumeMount(src=claim, dst_path=bert_launch.DATA_MOUNT)],
            )
        ],
    )
