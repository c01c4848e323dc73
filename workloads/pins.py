"""The workload stack's pins: the images its workloads run, each read where it is set
(infra/facts/versions.py, through infra/facts/neuron.py TRAINING_IMAGES for the Trainium images'
bases), checked against their end of support like the cluster stack's (infra/facts/pins.py
``verdicts``), before any resource is declared."""

from __future__ import annotations

from datetime import date

from infra.facts import versions
from infra.facts.neuron import TRAINING_IMAGES
from infra.facts.pins import Pin, image_pins, ray_row, verdicts
from workloads.checks import IMAGES
from workloads.settings import WorkloadsConfig, key_name

# Each image's base (docker/<name>/Dockerfile FROM): the Trainium images' as infra/facts/neuron.py
# TRAINING_IMAGES records them, cmd-shell's the python image.
BASES = {image.name: image.base for image in TRAINING_IMAGES} | {"cmd-shell": versions.PYTHON_SLIM_IMAGE}
# What else an image's build pins that has a support row of its own (infra/facts/versions.py constants).
# Everything else its build pins is code or data at a commit or digest (the training scripts, the
# tokenizer), the release matching the image's SDK, whose row covers it; tests/test_support.py
# checks the two lists against the build arguments `make images` passes (tools/push_images.py).
RELEASES = {
    # The Ray image trains with neuronx-distributed's example code on the DLC's NxD Core training APIs.
    "ray-llama2": {"RAY_VERSION": ray_row, "RAY_LLAMA2_NXD_COMMIT": lambda _: "nxd-core-0.19"},
    # The MPI operator's Llama job: NxD Training's example scripts on the DLC's NxD Training library.
    "nxd-llama": {"NXDT_EXAMPLES_COMMIT": lambda _: "nxd-training-1.7"},
}
# The gang watchdog and the step gates run the python image as it is (workloads/gang_watchdog.py,
# workloads/step_gate.py) beside these workloads' jobs.
WATCHED = ("bert_pretraining", "ray_llama2", "nxd_llama", "cluster_check")


def images_run(config: WorkloadsConfig) -> list[str]:
    """docker/<name> of every image the switched-on workloads run (workloads/checks.py IMAGES)."""
    names: list[str] = []
    for workload, images in IMAGES.items():
        if config.on(workload) is not None:
            names += [images] if isinstance(images, str) else list(images)
    if (staging := config.on("data_staging")) is not None and staging.redpajama:
        names.append("nxd-llama")  # tokenizer and Megatron preprocessing (workloads/data_staging.py)
    return list(dict.fromkeys(names))


def workload_pins(config: WorkloadsConfig) -> list[Pin]:
    pins = []
    for image in images_run(config):
        pins += image_pins(BASES[image], f"docker/{image}")
        for name, row in RELEASES.get(image, {}).items():
            value = getattr(versions, name)
            pins.append(Pin(f"infra/facts/versions.py {name} (docker/{image})", value, row(value)))
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
