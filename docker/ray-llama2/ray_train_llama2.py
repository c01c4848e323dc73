"""Llama-2-7B pretraining under Ray Train: the NxD example's training script, once per NeuronCore.

The model, data and training loop are aws-neuron/neuronx-distributed's Llama example
(examples/training/llama/tp_zero1_llama_hf_pretrain/tp_zero1_llama_hf_pretrain.py, pinned by
RAY_LLAMA2_NXD_COMMIT), which its own launcher (tp_zero1_llama2_7B_hf_pretrain.sh) starts with
torchrun. Here Ray Train starts those processes instead, one per NeuronCore of every worker node,
and gives each the environment torchrun would; the script itself runs unchanged, as ``__main__``
with its own arguments, and sets up its XLA process group itself.

Ray's own Neuron backend (ray.train.torch.xla.TorchXLAConfig, Ray 2.55.1 python/ray/train/torch/
xla/config.py) cannot be used as it is: it initialises the process group itself (the script would
do it twice), and it sets only torchrun's variables, written for the XRT runtime of torch-neuronx
1.13. torch-neuronx 2.x runs PJRT, whose Neuron client also needs the process's index and the
world's shape: the Neuron team's Ray example for PyTorch 2 sets them (aws-neuron/
aws-neuron-eks-samples 9c66bad llama3.1_8B_finetune_ray_ptl_neuron/llama3_finetune/
ray_neuron_xla_config_20.py _set_pjrt_env_variables, ray_train_llama3.py), and so does this file.
Neuron parallel compilation (--neuron_parallel_compile) is Ray's: extract the graphs while running
a few steps, then compile them into the cache on each node's local rank 0 (config.py
_set_neuron_parallel_compile_env_vars, _neuron_compile_extracted_graphs).

The command line is the one the RayJob steps pass (workloads/ray_llama2.py step_script);
``--resume_ckpt --loading_step <n>`` continues from checkpoint step_<n>.
"""

from __future__ import annotations

import argparse
import os
import re
import runpy
import shutil
import socket
import sys
import uuid
from typing import Any

# In the job's working_dir (the image's /llama2_pretrain), beside this file.
SCRIPT = "tp_zero1_llama_hf_pretrain.py"

# tp_zero1_llama2_7B_hf_pretrain.sh (RAY_LLAMA2_NXD_COMMIT): Llama-2-7B, TP 8, ZeRO-1, mixed
# precision, global batch 1024 sequences of 4096 tokens, micro batch 1, 10000 steps.
TENSOR_PARALLEL = 8
GLOBAL_BATCH = 1024
MICRO_BATCH = 1
TOTAL_STEPS = 10000
WARMUP_STEPS = 100
LEARNING_RATE = "3.0e-4"
SEQ_LEN = 4096
# The NxD launcher's compile run (NEURON_EXTRACT_GRAPHS_ONLY set) traces the graphs in 2 steps.
COMPILE_STEPS = 2
# Where the data step's get_dataset.py --llama-version 2 saves the tokenised WikiCorpus
# (~/examples_datasets/wikicorpus_llama2_tokenized_4k, with HOME=/shared).
DATA_DIR = "/shared/examples_datasets/wikicorpus_llama2_tokenized_4k"
# The compile cache every workload shares (workloads/compile_cache.py).
COMPILE_CACHE = "/shared/neuron_cache"


def get_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("--num_nodes", type=int, required=True, help="Trainium worker nodes")
    parser.add_argument("--neuron_cores_per_node", type=int, required=True, help="NeuronCores of each node")
    parser.add_argument("--neuron_parallel_compile", action="store_true", help="fill the compile cache only")
    parser.add_argument("--steps_this_run", type=int, default=-1, help="stop after this step; -1: max steps")
    parser.add_argument("--output_dir", default="/shared/llama2_output")
    parser.add_argument("--checkpoint_dir", default=None)
    parser.add_argument("--checkpoint_freq", type=int, default=100000)
    parser.add_argument("--num_kept_checkpoint", type=int, default=-1)
    parser.add_argument("--resume_ckpt", action="store_true", help="continue from --loading_step")
    parser.add_argument("--loading_step", type=int, default=-1)
    args = parser.parse_args(argv)
    world = args.num_nodes * args.neuron_cores_per_node
    if world < TENSOR_PARALLEL or world % TENSOR_PARALLEL:
        parser.error(
            f"{world} NeuronCores ({args.num_nodes} x {args.neuron_cores_per_node}): need a multiple of {TENSOR_PARALLEL}, the tensor-parallel degree"
        )
    return args


def script_argv(args: argparse.Namespace) -> list[str]:
    """The NxD script's arguments, as its Llama-2-7B launcher passes them (for args.num_nodes nodes)."""
    data_parallel = args.num_nodes * args.neuron_cores_per_node // TENSOR_PARALLEL
    steps = COMPILE_STEPS if args.neuron_parallel_compile else args.steps_this_run
    argv = [
        *("--metrics_file", os.path.join(args.output_dir, "results.json")),
        *("--model_path", ".", "--data_dir", DATA_DIR, "--output_dir", args.output_dir),
        *("--tensor_parallel_size", str(TENSOR_PARALLEL), "--batch_size", str(MICRO_BATCH)),
        *("--steps_this_run", str(steps), "--max_steps", str(TOTAL_STEPS)),
        *("--warmup_steps", str(WARMUP_STEPS), "--lr", LEARNING_RATE),
        *("--grad_accum_usteps", str(GLOBAL_BATCH // MICRO_BATCH // data_parallel), "--seq_len", str(SEQ_LEN)),
        # Every step, not the upstream launcher's 10: the step line is the job's heartbeat, and ten
        # 7B steps could outlast the hang limit between two lines (a loss read per step is cheap
        # beside a step).
        *("--sequence_parallel_enabled", "--selective_checkpoint_enabled", "--logging_interval", "1"),
        *("--use_mix_precision", "--use_zero_1"),
    ]
    if args.checkpoint_dir:
        argv += ["--checkpoint_dir", args.checkpoint_dir, "--checkpoint_freq", str(args.checkpoint_freq)]
        argv += ["--num_kept_checkpoint", str(args.num_kept_checkpoint)]
        if args.resume_ckpt:
            argv += ["--loading_step", str(args.loading_step)]
    return argv


def job_env(args: argparse.Namespace) -> dict[str, str]:
    """Every worker's environment: the NxD launcher's exports (a compile cache of ours instead of
    its --cache_dir), and PJRT's world shape as the Neuron Ray example sets it."""
    cores = str(args.neuron_cores_per_node)
    return {
        "NEURON_CC_FLAGS": "--model-type transformer",
        "NEURON_COMPILE_CACHE_URL": COMPILE_CACHE,
        "NEURON_FUSE_SOFTMAX": "1",
        "NEURON_RT_ASYNC_EXEC_MAX_INFLIGHT_REQUESTS": "3",
        "MALLOC_ARENA_MAX": "64",
        "FI_EFA_USE_DEVICE_RDMA": "1",
        "FI_PROVIDER": "efa",
        "FI_EFA_FORK_SAFE": "1",
        "CCOM_SOCKET_IFNAME": "eth0",
        "NEURON_RT_NUM_CORES": cores,
        "NUM_NEURONCORES": cores,
        "TPU_NUM_DEVICES": cores,
        "TPU_CHIPS_PER_HOST_BOUNDS": cores,
        "NEURON_PJRT_WORLD_SIZE": str(args.num_nodes * args.neuron_cores_per_node),
        "PJRT_LOCAL_PROCESS_COUNT": cores,
    }


def rank_env(rank: int, local_rank: int, local_world: int, world: int, node_rank: int) -> dict[str, str]:
    """One process's variables: torchrun's (torch/distributed/run.py) and PJRT's process index."""
    return {
        "RANK": str(rank),
        "LOCAL_RANK": str(local_rank),
        "LOCAL_WORLD_SIZE": str(local_world),
        "WORLD_SIZE": str(world),
        "GROUP_RANK": str(node_rank),
        "GROUP_WORLD_SIZE": str(world // local_world),
        "ROLE_RANK": str(rank),
        "ROLE_WORLD_SIZE": str(world),
        "NEURON_PJRT_PROCESS_INDEX": str(rank),
        "PJRT_LOCAL_PROCESS_RANK": str(local_rank),
    }


def _free_address() -> tuple[str, int]:
    import ray

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("", 0))
        return ray.util.get_node_ip_address(), s.getsockname()[1]


def _set_env(env: dict[str, str]) -> None:
    os.environ.update(env)


def _set_rank_env() -> None:
    import ray.train

    c = ray.train.get_context()
    world, local_world = c.get_world_size(), c.get_local_world_size()
    os.environ.update(rank_env(c.get_world_rank(), c.get_local_rank(), local_world, world, c.get_node_rank()))
    # Ray gives each worker the one NeuronCore it reserved (NEURON_RT_VISIBLE_CORES). Under torchrun that
    # variable is unset, and torch_xla's Neuron set-up then sets it to LOCAL_RANK; a set one must list
    # LOCAL_WORLD_SIZE cores, or the import raises (torch_xla 2.9.0 _internal/neuron.py
    # configure_pjrt_environment, _internal/neuron_utils.py remap_visible_cores). Each worker holds a
    # distinct local rank on a node this job has whole, so the cores stay distinct.
    os.environ.pop("NEURON_RT_VISIBLE_CORES", None)


def _compile_extracted_graphs() -> None:
    """Ray 2.55.1 ray/train/torch/xla/config.py _neuron_compile_extracted_graphs: one compiler run
    per node compiles what its processes extracted into the cache."""
    from libneuronxla.neuron_cc_cache import CacheUrl
    from libneuronxla.neuron_parallel_compile import parallel_compile

    if os.environ.get("LOCAL_RANK") != "0":
        return
    workdir = f"/tmp/{os.environ.get('USER', 'no-user')}/parallel_compile_workdir/"
    shutil.rmtree(workdir, ignore_errors=True)
    os.makedirs(workdir, exist_ok=True)
    flags = re.search(r"--cache_dir[= ](\S+)", os.environ.get("NEURON_CC_FLAGS", ""))
    parallel_compile(workdir, CacheUrl.get_cache_url(flags.group(1) if flags else None))


def code_dir() -> str:
    """The job's working_dir in this worker: Ray puts it first on the worker's PYTHONPATH (Ray 2.55.1
    _private/runtime_env/working_dir.py set_pythonpath_in_context), and Ray Train moves the worker's
    current directory to the run's own (train/v2/_internal/callbacks/working_dir_setup.py)."""
    for entry in sys.path:
        if os.path.isfile(os.path.join(entry, SCRIPT)):
            return entry
    raise FileNotFoundError(f"{SCRIPT} is on no entry of sys.path: {sys.path}")


def train_loop_per_worker(config: dict[str, Any]) -> None:
    """Run the NxD script in this process as torchrun would have: as __main__, with its arguments,
    from its own directory (it imports its neighbours and reads the model config there)."""
    here = code_dir()
    os.chdir(here)
    sys.argv = [os.path.join(here, SCRIPT), *config["argv"]]
    runpy.run_path(sys.argv[0], run_name="__main__")


def neuron_processes_config(config_base: type, compile_only: bool, run_id: str) -> Any:
    """A Ray Train backend config (a ``config_base``, TorchConfig for TorchTrainer) whose backend sets
    what torchrun and PJRT would before the script starts, and leaves the process group to it."""
    from ray.train.backend import Backend

    class NeuronProcesses(Backend):
        def on_start(self, worker_group: Any, backend_config: Any) -> None:
            addr, port = worker_group.execute_single(0, _free_address)
            env = {"MASTER_ADDR": addr, "MASTER_PORT": str(port), "TORCHELASTIC_RUN_ID": run_id}
            if compile_only:
                # Ray 2.55.1 xla/config.py _set_neuron_parallel_compile_env_vars.
                env |= {"NEURON_PARALLEL_COMPILE": "1", "NEURON_EXTRACT_GRAPHS_ONLY": "1"}
                env |= {"NEURON_FALL_BACK_TO_NULL_NEFF": "1"}
            worker_group.execute(_set_env, env)

        def on_training_start(self, worker_group: Any, backend_config: Any) -> None:
            worker_group.execute(_set_rank_env)

        def on_shutdown(self, worker_group: Any, backend_config: Any) -> None:
            if compile_only:
                worker_group.execute(_compile_extracted_graphs)

    class NeuronProcessesConfig(config_base):  # type: ignore[misc, valid-type]
        @property
        def backend_cls(self) -> type[Backend]:
            return NeuronProcesses

    return NeuronProcessesConfig()


def main(argv: list[str]) -> None:
    import ray
    from ray.train import RunConfig, ScalingConfig
    from ray.train.torch import TorchConfig, TorchTrainer

    args = get_args(argv)
    ray.init(runtime_env={"env_vars": job_env(args)})
    trainer = TorchTrainer(
        train_loop_per_worker=train_loop_per_worker,
        train_loop_config={"argv": script_argv(args)},
        torch_config=neuron_processes_config(TorchConfig, args.neuron_parallel_compile, str(uuid.uuid4())),
        scaling_config=ScalingConfig(
            num_workers=args.num_nodes * args.neuron_cores_per_node, resources_per_worker={"neuron_cores": 1}
        ),
        # Ray Train's own run state on the shared volume every node mounts.
        run_config=RunConfig(name="ray-train", storage_path=args.output_dir),
    )
    trainer.fit()


if __name__ == "__main__":
    main(sys.argv[1:])
