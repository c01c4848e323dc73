"""The training images: lint-clean, pinned, and built with the versions in infra/facts/versions.py."""

from __future__ import annotations

import hashlib
import re
import subprocess
import sys
from pathlib import Path

import pytest

from infra.components.registries import TRAINING_IMAGES
from infra.facts import versions
from tests.dockerfile_runs import instructions, run_step
from tools.push_images import BUILD_ARGS, DOCKER_DIR, commands

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
    for commit in (
        versions.BERT_SAMPLES_COMMIT,
        versions.RAY_LLAMA2_NXD_COMMIT,
        versions.NXDT_EXAMPLES_COMMIT,
        versions.MEGATRON_LM_COMMIT,
    ):
        assert re.fullmatch(r"[0-9a-f]{40}", commit)


def test_the_shell_image_runs_unprivileged() -> None:
    # workloads/tensorboard_viewer.py runs it as UNPRIVILEGED_UID, which must be the image's own user.
    from infra.specs.pod_security import UNPRIVILEGED_UID

    assert f"USER {UNPRIVILEGED_UID}" in DOCKERFILES["cmd-shell"].read_text()


def test_hadolint_passes() -> None:
    hadolint = Path(sys.executable).parent / "hadolint"
    result = subprocess.run([str(hadolint), *map(str, DOCKERFILES.values())], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_build_commands_push_each_image_to_its_repository_with_the_pinned_tag(dev) -> None:
    repositories = dev.outputs["ecrRepositories"]
    planned = commands(repositories, versions.TRAINING_IMAGE_TAG, record=True)
    assert planned[0][2].startswith("aws ecr get-login-password --region us-west-2 | docker login")
    pushes = [c[2] for c in planned if c[:2] == ["docker", "push"]]
    # After each push, what the image resolved goes back into its constraints.txt.
    records = [c[2] for c in planned if c[:2] == ["sh", "-c"] and "pip-constraints.txt" in c[2]]
    assert len(records) == len(BUILD_ARGS)
    assert all(
        f"docker run --rm --entrypoint cat {p} /opt/pip-constraints.txt" in r
        for p, r in zip(pushes, records, strict=True)
    )
    assert pushes == [f"{repositories[i]}:{versions.TRAINING_IMAGE_TAG}" for i in BUILD_ARGS]
    bert = next(c for c in planned if c[:2] == ["docker", "build"] and c[-1].endswith("bert-pretrain"))
    assert f"BERT_SAMPLES_COMMIT={versions.BERT_SAMPLES_COMMIT}" in bert


# --- how the build steps fail -----------------------------------------------------------------
# POSIX Shell Command Language (IEEE 1003.1-2017, 2.9.4 "The for Loop"): a for loop's exit status
# is that of the last command it ran; 2.14 "set -e": a failure is ignored in any command of an
# AND-OR list but the last. So a download loop followed by `&& pip install` builds an image
# without the files whose download failed unless each download fails the step itself.


def test_a_failed_bert_download_fails_the_build(tmp_path: Path) -> None:
    curl = 'for a; do url=$a; done\ncase "$url" in *lamb.py) exit 22;; esac\ntouch "${url##*/}"\n'
    pip = "echo pip >> pip.log\n"
    result = run_step(DOCKERFILES["bert-pretrain"], "curl", {"curl": curl, "pip": pip}, tmp_path)
    assert result.returncode != 0
    assert not (tmp_path / "pip.log").exists()


# The NxD Llama example's files the Ray image takes (aws-neuron/neuronx-distributed at
# RAY_LLAMA2_NXD_COMMIT, examples/training/llama), and where each lands: side by side in the
# working directory, as the script imports its neighbours and get_dataset.py reads its directory.
NXD_LLAMA_FILES = {
    "requirements.txt": "requirements.txt",
    "get_dataset.py": "get_dataset.py",
    "modeling_llama_nxd.py": "modeling_llama_nxd.py",
    "training_utils.py": "training_utils.py",
    "tp_zero1_llama_hf_pretrain/tp_zero1_llama_hf_pretrain.py": "tp_zero1_llama_hf_pretrain.py",
    "tp_zero1_llama_hf_pretrain/logger.py": "logger.py",
    "tp_zero1_llama_hf_pretrain/7B_config_llama2/config.json": "config.json",
}


def nxd_archive(tmp_path: Path) -> Path:
    """A stand-in for GitHub's archive of the pinned commit: its top directory, then the example's files."""
    import tarfile

    top = tmp_path / "src" / f"neuronx-distributed-{versions.RAY_LLAMA2_NXD_COMMIT}"
    for path in NXD_LLAMA_FILES:
        (top / "examples/training/llama" / path).parent.mkdir(parents=True, exist_ok=True)
        (top / "examples/training/llama" / path).write_text(path)
    (top / "examples/training/llama/tp_zero1_llama_hf_pretrain/8B_config_llama3/").mkdir(parents=True)
    (top / "examples/training/llama/tp_zero1_llama_hf_pretrain/8B_config_llama3/config.json").write_text("llama3")
    archive = tmp_path / "archive.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(top, arcname=top.name)
    return archive


def test_the_ray_image_takes_the_nxd_llama_example_at_the_pinned_commit(tmp_path: Path) -> None:
    archive = nxd_archive(tmp_path)
    work = tmp_path / "llama2_pretrain"
    work.mkdir()
    curl = f'echo "$@" >> {tmp_path}/curl.log\ncat {archive}\n'
    pip = f'echo "$@" >> {tmp_path}/pip.log\n'
    result = run_step(DOCKERFILES["ray-llama2"], "neuronx-distributed", {"curl": curl, "pip": pip}, work)
    assert result.returncode == 0, result.stderr
    url = f"https://github.com/aws-neuron/neuronx-distributed/archive/{versions.RAY_LLAMA2_NXD_COMMIT}.tar.gz"
    assert url in (tmp_path / "curl.log").read_text()
    landed = {p.name: p.read_text() for p in work.iterdir() if p.name != "fake-bin"}
    assert landed == {name: path for path, name in NXD_LLAMA_FILES.items()}
    # The example's own requirements and Ray Train at the pinned version, resolved together.
    pip_args = (tmp_path / "pip.log").read_text().split()
    assert pip_args == [
        "install",
        "--no-cache-dir",
        "-r",
        "requirements.txt",
        f"ray[default,train]=={versions.RAY_VERSION}",
        "protobuf<7",
    ]
    # A failed download fails the step (pipefail): no image without its training code.
    failing = run_step(DOCKERFILES["ray-llama2"], "neuronx-distributed", {"curl": "exit 22\n", "pip": pip}, tmp_path)
    assert failing.returncode != 0


# Hugging Face serves `resolve/<revision>/<file>`; `main` moves. The LFS object id of Meta's
# Llama-2 tokenizer.model (also in NousResearch's copy) is its SHA-256.
CURL_WRITING = (
    'echo "$@" >> curl.log\nwhile [ $# -gt 0 ]; do [ "$1" = -o ] && printf "not the tokenizer" > "$2"; shift; done\n'
)


def test_the_ray_tokenizer_comes_from_the_pinned_revision_and_is_checked(tmp_path: Path) -> None:
    dockerfile = DOCKERFILES["ray-llama2"]
    assert "resolve/main" not in dockerfile.read_text()
    tampered = run_step(dockerfile, "tokenizer.model", {"curl": CURL_WRITING}, tmp_path)
    assert tampered.returncode != 0
    url = (tmp_path / "curl.log").read_text()
    assert f"/NousResearch/Llama-2-7b-hf/resolve/{versions.LLAMA2_TOKENIZER_REVISION}/tokenizer.model" in url
    expected = hashlib.sha256(b"not the tokenizer").hexdigest()
    assert (
        run_step(dockerfile, "tokenizer.model", {"curl": CURL_WRITING}, tmp_path, LLAMA2_SPM_SHA256=expected).returncode
        == 0
    )


def test_the_tokenizer_pins_are_a_commit_and_a_sha256() -> None:
    assert re.fullmatch(r"[0-9a-f]{40}", versions.LLAMA2_TOKENIZER_REVISION)
    assert re.fullmatch(r"[0-9a-f]{64}", versions.LLAMA2_TOKENIZER_SHA256)


@pytest.mark.parametrize("image", sorted(DOCKERFILES))
def test_every_pip_install_resolves_within_the_images_constraints(image: str) -> None:
    # pip reads PIP_CONSTRAINT as --constraint (pip's option-from-environment rule), and
    # a Dockerfile ARG is in the environment of every later RUN of the build, not of the image.
    steps = instructions(DOCKERFILES[image])
    keywords = [k for k, _ in steps]
    copy = steps.index(("COPY", "constraints.txt /tmp/pip-constraints.txt"))
    arg = steps.index(("ARG", "PIP_CONSTRAINT=/tmp/pip-constraints.txt"))
    installs = [i for i, (k, rest) in enumerate(steps) if k == "RUN" and "pip install" in rest]
    # An image that installs nothing over its DLC (nxd-llama) still records what it has, for the next build.
    assert copy < arg < min(installs, default=len(steps)) and keywords[copy - 1] == "FROM"
    record = steps.index(("RUN", "pip list --format=freeze > /opt/pip-constraints.txt"))
    assert record > max(installs, default=arg)
    from tools.push_images import constraint_problems

    assert constraint_problems((DOCKERFILES[image].parent / "constraints.txt").read_text()) == []


def test_constraints_are_exact_pins_or_comments() -> None:
    from tools.push_images import constraint_problems

    assert constraint_problems("# header\nray==2.22.0\ntorch-neuronx==1.13.1.1.14.0\n") == []
    assert constraint_problems("datasets>=2\nnumpy\nfoo @ file:///x.whl\n") == [
        "datasets>=2",
        "numpy",
        "foo @ file:///x.whl",
    ]


def test_the_nxd_image_has_the_open_mpi_the_launcher_calls() -> None:
    # The launcher's absolute mpirun path and --prefix (workloads/nxd_llama.py) must exist in
    # the image; the build checks it.
    from workloads.nxd_llama import OPEN_MPI_PREFIX

    checks = [
        rest
        for keyword, rest in instructions(DOCKERFILES["nxd-llama"])
        if keyword == "RUN" and rest.startswith("test -x")
    ]
    (check,) = checks
    assert check.startswith(f"test -x {OPEN_MPI_PREFIX}/bin/mpirun && test -x {OPEN_MPI_PREFIX}/bin/orted")
    # The DLC's ENV lists the EFA installer's Open MPI libraries (/opt/amazon/openmpi/lib64) before
    # /usr/local/lib (deep-learning-containers 2.30.0 pytorch/training/2.9.0/Dockerfile.neuronx, lines
    # 24-29): the launcher's mpirun must load its own build's libraries, as the orted --prefix starts on
    # the workers does, and the build proves it. grep reads all of ldd's output (a `grep -q` could end
    # the pipe early and fail it under pipefail).
    assert f'ldd {OPEN_MPI_PREFIX}/bin/mpirun | grep "libopen-rte.so.40 => {OPEN_MPI_PREFIX}/lib/" >/dev/null' in check
    assert f'{OPEN_MPI_PREFIX}/bin/mpirun --version | grep "(Open MPI) 4.1.5" >/dev/null' in check
    envs = [rest for keyword, rest in instructions(DOCKERFILES["nxd-llama"]) if keyword == "ENV"]
    assert f"LD_LIBRARY_PATH={OPEN_MPI_PREFIX}/lib:${{LD_LIBRARY_PATH}}" in envs


def test_images_refuse_to_build_from_constraints_that_pin_nothing(dev, monkeypatch, tmp_path, capsys) -> None:
    # The shipped docker/*/constraints.txt are comments only, so a build resolves whatever pip
    # finds that day. `make images` refuses unless told to record what it resolved.
    import tools.push_images as push

    assert set(push.unpinned_images()) == {
        i
        for i in BUILD_ARGS
        if all(
            not line.strip() or line.startswith("#")
            for line in (DOCKER_DIR / i / "constraints.txt").read_text().splitlines()
        )
    }
    for image in BUILD_ARGS:
        (tmp_path / image).mkdir()
        (tmp_path / image / "constraints.txt").write_text("# header\n")
    monkeypatch.setattr(push, "DOCKER_DIR", tmp_path)
    monkeypatch.setattr(push.requires, "report", lambda *a, **k: 0)
    assert push.main(["--dry-run"]) == 2
    assert "docker/bert-pretrain/constraints.txt" in capsys.readouterr().err
    # Without the flag nothing writes back; with it, each pushed image's resolution is recorded.
    assert not any("pip-constraints" in " ".join(c) for c in commands(dev.outputs["ecrRepositories"], "t"))
    # Pinned files build without the flag (the refusal is about empty files only).
    for image in BUILD_ARGS:
        (tmp_path / image / "constraints.txt").write_text("# header\nnumpy==1.26.4\n")
    assert push.unpinned_images() == []
