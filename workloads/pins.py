"""The workload stack's pins: the images its workloads run, each read where it is set (the build
arguments `make images` passes, tools/push_images.py BUILD_ARGS, and the images the stack runs
as they are), checked against their end of support like the cluster stack's (infra/facts/pins.py
``verdicts``), before any resource is declared."""

from __future__ import annotations

from datetime import date

from infra.facts import versions
from infra.facts.pins import Pin, image_pins, ray_row, verdicts
from tools.push_images import BUILD_ARGS
from workloads.checks import IMAGES
from workloads.settings import WorkloadsConfig, key_name

# Build arguments that name an image (its tag names its versions), and those that pin a release of
# something with a support row of its own.
IMAGE_ARGS = ("NEURON_DLC", "PYTHON_IMAGE")
RELEASE_ARGS = {
    "RAY_VERSION": ray_row,
    "NEMO_MEGATRON_COMMIT": lambda _: "neuronx-nemo-megatron",
}
# Build arguments that pin code or data at a commit or digest, which has no support window of its
# own: the training scripts are the release matching the image's SDK, whose row covers them.
UNDATED_ARGS = ("BERT_SAMPLES_COMMIT", "RAY_LLAMA2_COMMIT", "LLAMA2_REPO_REVISION", "LLAMA2_SPM_SHA256")
# The gang watchdog and the step gates run the python image as it is (workloads/gang_watchdog.py,
# workloads/step_gate.py) beside these workloads' jobs.
WATCHED = ("bert_pretraining", "ray_llama2", "nemo_llama2", "cluster_check")


def images_run(config: WorkloadsConfig) -> list[str]:
    """docker/<name> of every image the switched-on workloads run (workloads/checks.py IMAGES)."""
    names: list[str] = []
    for workload, images in IMAGES.items():
        if config.on(workload) is not None:
            names += [images] if isinstance(images, str) else list(images)
    if (staging := config.on("data_staging")) is not None and staging.redpajama:
        names.append("nemo-megatron")  # tokenizer and Megatron preprocessing (workloads/data_staging.py)
    return list(dict.fromkeys(names))


def workload_pins(config: WorkloadsConfig) -> list[Pin]:
    pins = []
    for image in images_run(config):
        for arg, value in BUILD_ARGS[image].items():
            if arg in IMAGE_ARGS:
                pins += image_pins(value, f"docker/{image}")
            elif arg in RELEASE_ARGS:
                pins.append(
                    Pin(f"tools/push_images.py BUILD_ARGS[{image!r}][{arg!r}]", value, RELEASE_ARGS[arg](value))
                )
    if any(config.on(w) is not None for w in WATCHED):
        pins += image_pins(versions.PYTHON_SLIM_IMAGE, "gang watchdog, step gates")
    if (board := config.on("tensorboard")) is not None and board.load_balancer is not None:
        pins += image_pins(versions.NGINX_UNPRIVILEGED_IMAGE, "TensorBoard's basic-auth proxy")
    return pins


def end_of_support(config: WorkloadsConfig, today: date) -> tuple[list[str], list[str]]:
    """(refusals, warnings) for the images this stack runs: refused past their end unless the stack
    file's ``endOfSupportAcknowledged`` keeps each by name with a reason; warned 90 days ahead."""
    return verdicts(
        workload_pins(config), config.end_of_support_acknowledged, key_name(("endOfSupportAcknowledged",)), today
    )
