"""The training images: lint-clean, pinned, and built with the versions in infra/versions.py."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tools.push_images import BUILD_ARGS, DOCKER_DIR, commands
from infra import versions
from infra.registries import TRAINING_IMAGES

DOCKERFILES = {image: DOCKER_DIR / image / "Dockerfile" for image in BUILD_ARGS}


def arg_defaults(dockerfile: Path) -> dict[str, str]:
    return dict(re.findall(r"^ARG (\w+)=(\S+)$", dockerfile.read_text(), flags=re.M))


def test_there_is_an_image_for_every_repository_the_cluster_creates() -> None:
    assert set(DOCKERFILES) == set(TRAINING_IMAGES)
    assert all(path.exists() for path in DOCKERFILES.values())


@pytest.mark.parametrize("image", sorted(BUILD_ARGS))
def test_dockerfile_defaults_equal_the_pins(image: str) -> None:
    defaults = arg_defaults(DOCKERFILES[image])
    assert {k: defaults.get(k) for k in BUILD_ARGS[image]} == BUILD_ARGS[image]


@pytest.mark.parametrize("image", sorted(BUILD_ARGS))
def test_base_images_are_pinned_tags(image: str) -> None:
    base = next(v for k, v in BUILD_ARGS[image].items() if k in ("NEURON_DLC", "PYTHON_IMAGE"))
    assert re.fullmatch(r"public\.ecr\.aws/[\w/.-]+:[\w.-]+", base) and not base.endswith(":latest")


def test_commits_are_full_shas() -> None:
    for commit in (versions.BERT_SAMPLES_COMMIT, versions.RAY_LLAMA2_COMMIT, versions.NEMO_MEGATRON_COMMIT):
        assert re.fullmatch(r"[0-9a-f]{40}", commit)


def test_the_shell_image_runs_unprivileged() -> None:
    assert "USER 1000" in DOCKERFILES["cmd-shell"].read_text()


def test_hadolint_passes() -> None:
    hadolint = Path(sys.executable).parent / "hadolint"
    result = subprocess.run([str(hadolint), *map(str, DOCKERFILES.values())], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_build_commands_push_each_image_to_its_repository_with_the_pinned_tag(dev) -> None:
    repositories = dev.outputs["ecrRepositories"]
    planned = commands(repositories, versions.TRAINING_IMAGE_TAG)
    assert planned[0][2].startswith("aws ecr get-login-password --region us-west-2 | docker login")
    pushes = [c[2] for c in planned if c[:2] == ["docker", "push"]]
    assert pushes == [f"{repositories[i]}:{versions.TRAINING_IMAGE_TAG}" for i in BUILD_ARGS]
    bert = next(c for c in planned if c[:2] == ["docker", "build"] and c[-1].endswith("bert-pretrain"))
    assert f"BERT_SAMPLES_COMMIT={versions.BERT_SAMPLES_COMMIT}" in bert
