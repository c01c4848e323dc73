"""TensorBoard shows every training run and reloads at a pace Lustre bears (workloads/
tensorboard_viewer.py RELOAD_INTERVAL_SECONDS says why the pace, and not the directories, is what
keeps each reload from walking checkpoints)."""

from __future__ import annotations

from offline.plan.runner import PlanResult
from tests.test_workloads import manifest
from workloads import tensorboard_viewer


def tensorboard_command(result: PlanResult) -> list[str]:
    spec = manifest(result, "Deployment", "tensorboard")["spec"]["template"]["spec"]
    return next(c for c in spec["containers"] if c["name"] == "tensorboard")["command"]


def test_every_run_directory_is_under_a_default_log_directory(workloads_all: PlanResult) -> None:
    """The run directories the stack outputs (BERT's as its pods see FSx, at /data) lie under the
    default logDirs (TensorBoard's pod mounts the volume at /shared)."""
    command = tensorboard_command(workloads_all)
    roots = [spec.split(":", 1)[1] for spec in command[command.index("--logdir_spec") + 1].split(",")]
    runs = workloads_all.outputs["workloads"]["runDirectories"]
    assert set(runs) == {"bertPretraining", "rayLlama2", "nxdLlama"}
    for run in runs.values():
        shared = run.replace("/data/", "/shared/", 1)
        assert any(shared.startswith(root + "/") for root in roots), (run, roots)


def test_tensorboard_reloads_every_five_minutes(workloads_dev: PlanResult) -> None:
    command = tensorboard_command(workloads_dev)
    assert command[command.index("--reload_interval") + 1] == str(tensorboard_viewer.RELOAD_INTERVAL_SECONDS) == "300"
