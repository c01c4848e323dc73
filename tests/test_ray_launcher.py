"""The Ray image's launcher (docker/ray-llama2/ray_train_llama2.py): what it hands the NxD Llama
script and every process, checked against the script's own command line at the pinned commit.

aws-neuron/neuronx-distributed fbac349 (RAY_LLAMA2_NXD_COMMIT)
examples/training/llama/tp_zero1_llama_hf_pretrain/tp_zero1_llama_hf_pretrain.py l.527-675 declares
these options; the flags are ``store_true``, the others take one value. ``--model_path``,
``--data_dir``, ``--max_steps`` and ``--steps_this_run`` have no default, and l.679 compares
``steps_this_run`` with 0, so a run without them fails. Its launcher, tp_zero1_llama2_7B_hf_pretrain.sh,
sets GBS 1024, MBS 1, TP 8 and passes ``--grad_accum_usteps $((GBS / MBS / DP))`` with
``DP = NEURON_RT_NUM_CORES * nodes / TP``; under NEURON_EXTRACT_GRAPHS_ONLY it runs 2 steps.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import pytest

from tests.test_ray_entrypoints import LAUNCHER

NXD_FLAGS = {
    "print_grad_norm",
    "use_mix_precision",
    "use_zero_1",
    "sequence_parallel_enabled",
    "selective_checkpoint_enabled",
    "use_meta_device_init",
    "qkv_linear",
    "pretrained_weight",
}
NXD_VALUED = {
    "model_path",
    "data_dir",
    "output_dir",
    "metrics_file",
    "batch_size",
    "max_steps",
    "steps_this_run",
    "seed",
    "lr",
    "warmup_steps",
    "grad_accum_usteps",
    "tensor_parallel_size",
    "context_parallel_size",
    "seq_len",
    "num_layers",
    "logging_interval",
    "kv_replicator",
    "use_gpu_compatible_precision",
    "weight_decay",
    "beta1",
    "beta2",
    "checkpoint_freq",
    "checkpoint_dir",
    "loading_step",
    "num_kept_checkpoint",
    "hidden_size",
    "use_flash_attention",
    "fuse_qkv",
    "transpose_nki_inputs",
}
NXD_NO_DEFAULT = {"model_path", "data_dir", "max_steps", "steps_this_run"}


def nxd_parse(argv: list[str]) -> argparse.Namespace:
    """The NxD script's command line (module docstring): unknown options and missing values fail."""
    parser = argparse.ArgumentParser(exit_on_error=False)
    for name in NXD_FLAGS:
        parser.add_argument(f"--{name}", action="store_true")
    for name in NXD_VALUED:
        parser.add_argument(f"--{name}")
    return parser.parse_args(argv)


def launch(*argv: str) -> list[str]:
    return LAUNCHER.script_argv(LAUNCHER.get_args(list(argv)))


def test_the_train_step_runs_the_nxd_llama2_7b_recipe() -> None:
    args = nxd_parse(launch("--num_nodes", "2", "--neuron_cores_per_node", "32", "--steps_this_run", "20"))
    assert {n for n in NXD_NO_DEFAULT if getattr(args, n) is None} == set()
    assert (args.tensor_parallel_size, args.batch_size, args.seq_len, args.max_steps) == ("8", "1", "4096", "10000")
    # 2 nodes x 32 cores / TP 8 = 8 data-parallel ranks: 1024 / 1 / 8 accumulation micro-steps.
    assert args.grad_accum_usteps == "128"
    assert args.steps_this_run == "20"
    assert args.use_mix_precision and args.use_zero_1
    assert args.sequence_parallel_enabled and args.selective_checkpoint_enabled
    assert args.data_dir == LAUNCHER.DATA_DIR and args.model_path == "."
    # No checkpoint options without --checkpoint_dir; the script's own defaults then save none.
    assert args.checkpoint_dir is None and args.loading_step is None


def test_without_a_step_limit_the_script_runs_to_its_max_steps() -> None:
    assert nxd_parse(launch("--num_nodes", "1", "--neuron_cores_per_node", "32")).steps_this_run == "-1"


def test_precompile_extracts_two_steps_of_the_same_graphs() -> None:
    args = nxd_parse(launch("--num_nodes", "2", "--neuron_cores_per_node", "32", "--neuron_parallel_compile"))
    assert args.steps_this_run == "2"
    train = nxd_parse(launch("--num_nodes", "2", "--neuron_cores_per_node", "32"))
    # Everything that shapes the graphs is the training run's.
    same = ("tensor_parallel_size", "batch_size", "seq_len", "grad_accum_usteps", "use_mix_precision", "use_zero_1")
    assert [getattr(args, n) for n in same] == [getattr(train, n) for n in same]


def test_checkpoints_and_resume_reach_the_script() -> None:
    common = ["--num_nodes", "2", "--neuron_cores_per_node", "32", "--output_dir", "/shared/o/run-1"]
    common += ["--checkpoint_dir", "/shared/o/run-1/checkpoints", "--checkpoint_freq", "100"]
    common += ["--num_kept_checkpoint", "3"]
    fresh = nxd_parse(launch(*common))
    assert (fresh.checkpoint_dir, fresh.checkpoint_freq, fresh.num_kept_checkpoint) == (
        "/shared/o/run-1/checkpoints",
        "100",
        "3",
    )
    assert fresh.loading_step is None  # the script's "-1": start afresh
    assert fresh.metrics_file == "/shared/o/run-1/results.json" and fresh.output_dir == "/shared/o/run-1"
    # workloads/resilience.py appends `--resume_ckpt --loading_step <n>`; NxD loads tag step_<n>.
    resumed = nxd_parse(launch(*common, "--resume_ckpt", "--loading_step", "200"))
    assert resumed.loading_step == "200"


def test_every_process_gets_torchruns_variables_and_its_pjrt_index() -> None:
    env = LAUNCHER.rank_env(rank=37, local_rank=5, local_world=32, world=64, node_rank=1)
    assert (env["RANK"], env["LOCAL_RANK"], env["WORLD_SIZE"], env["LOCAL_WORLD_SIZE"]) == ("37", "5", "64", "32")
    assert (env["GROUP_RANK"], env["GROUP_WORLD_SIZE"]) == ("1", "2")
    assert env["NEURON_PJRT_PROCESS_INDEX"] == "37" and env["PJRT_LOCAL_PROCESS_RANK"] == "5"
    # Left to torch_xla's Neuron set-up, which sets it to LOCAL_RANK when unset (below).
    assert "NEURON_RT_VISIBLE_CORES" not in env
    job = LAUNCHER.job_env(LAUNCHER.get_args(["--num_nodes", "2", "--neuron_cores_per_node", "32"]))
    assert (job["NEURON_PJRT_WORLD_SIZE"], job["PJRT_LOCAL_PROCESS_COUNT"], job["NEURON_RT_NUM_CORES"]) == (
        "64",
        "32",
        "32",
    )
    # The compile cache every workload shares (workloads/compile_cache.py), not a --cache_dir of the script's.
    from workloads import compile_cache

    assert job["NEURON_COMPILE_CACHE_URL"] == compile_cache.UPSTREAM_URL
    assert "--cache_dir" not in job["NEURON_CC_FLAGS"]


def test_the_launcher_refuses_a_run_without_its_shape(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        LAUNCHER.get_args(["--neuron_cores_per_node", "32"])
    # Fewer NeuronCores than one tensor-parallel group, or a remainder, leaves no data-parallel rank.
    for cores in ("4", "12"):
        with pytest.raises(SystemExit):
            LAUNCHER.get_args(["--num_nodes", "1", "--neuron_cores_per_node", cores])
        assert "need a multiple of 8, the tensor-parallel degree" in capsys.readouterr().err


def test_the_script_is_found_where_ray_puts_the_jobs_working_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ray Train runs each worker in the run's own directory, not the job's working_dir, which Ray
    puts first on the worker's PYTHONPATH (module docstring of the launcher, code_dir)."""
    code = tmp_path / "working_dir"
    code.mkdir()
    monkeypatch.setattr("sys.path", [str(tmp_path), str(code)])
    with pytest.raises(FileNotFoundError):
        LAUNCHER.code_dir()
    (code / LAUNCHER.SCRIPT).write_text("")
    assert LAUNCHER.code_dir() == str(code)


def test_each_worker_leaves_its_core_to_torch_xla_as_under_torchrun(monkeypatch) -> None:
    """Ray sets a worker's NEURON_RT_VISIBLE_CORES to the one core it reserved. torch_xla 2.9.0 under
    torchrun (_internal/neuron.py configure_pjrt_environment) sets an unset one to LOCAL_RANK, but a set
    one must list LOCAL_WORLD_SIZE cores (_internal/neuron_utils.py remap_visible_cores raises
    "LOCAL_WORLD_SIZE ... is not equal to count 1"): the launcher unsets it before the script imports
    torch_xla."""
    import types

    context = types.SimpleNamespace(
        get_world_size=lambda: 64,
        get_local_world_size=lambda: 32,
        get_world_rank=lambda: 37,
        get_local_rank=lambda: 5,
        get_node_rank=lambda: 1,
    )
    ray = types.ModuleType("ray")
    train = types.ModuleType("ray.train")
    train.get_context = lambda: context  # type: ignore[attr-defined]
    ray.train = train  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "ray", ray)
    monkeypatch.setitem(sys.modules, "ray.train", train)
    environ = {"NEURON_RT_VISIBLE_CORES": "12"}
    monkeypatch.setattr(os, "environ", environ)
    LAUNCHER._set_rank_env()
    assert "NEURON_RT_VISIBLE_CORES" not in environ
    assert (environ["LOCAL_RANK"], environ["LOCAL_WORLD_SIZE"], environ["RANK"]) == ("5", "32", "37")
