"""The RedPajama staging Job survives retries: each step is marked done only once it really
is, and a retry redoes only what is missing. The scripts run here with stand-ins for
huggingface-cli and python3 that behave like the real ones (real files in --local-dir)."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from offline.plan.runner import PlanResult
from tests.test_workloads import manifest
from workloads.data_staging import (
    PREPROCESS_WORKERS,
    redpajama_download_script,
    redpajama_minutes,
    redpajama_prepare_script,
)
from workloads.settings import DataStagingSettings

SAMPLE = "data/RedPajama-Data-1T-Sample"
DATASET = "data/redpajama_sample_text_document"

# huggingface-hub >= 0.23 with --local-dir: real files there, resumable (see test below).
HF_CLI = """\
echo hf >> "$STATE/calls"
while [ $# -gt 0 ]; do [ "$1" = --local-dir ] && dir=$2; shift; done
echo '{"text": "a"}' > "$dir/arxiv_sample.jsonl"
[ -f "$STATE/fail-download" ] && exit 1
echo '{"text": "b"}' > "$dir/c4_sample.jsonl"
"""
PYTHON = """\
if [ "$1" = -c ]; then mkdir -p llama7b_tokenizer && touch llama7b_tokenizer/tokenizer.json; exit 0; fi
echo preprocess >> "$STATE/calls"
for a; do case "$a" in --output-prefix=*) prefix=${a#--output-prefix=};; esac; done
echo partial > "${prefix}_text_document.bin"
[ -f "$STATE/fail-preprocess" ] && exit 1
[ -f "$STATE/no-index" ] && exit 0
echo index > "${prefix}_text_document.idx"
"""


@pytest.fixture
def pod(tmp_path: Path):
    """Run the Job's pod once: the download init container, then (if it succeeded) the main one."""
    root, fakes, state = tmp_path / "shared", tmp_path / "bin", tmp_path / "state"
    for d in (root / "data", fakes, state):
        d.mkdir(parents=True)
    for name, script in (("huggingface-cli", HF_CLI), ("python3", PYTHON)):
        (fakes / name).write_text("#!/bin/sh\n" + script)
        (fakes / name).chmod(0o755)
    env = {**os.environ, "PATH": f"{fakes}:{os.environ['PATH']}", "STATE": str(state), "HF_TOKEN": "hf_x"}

    def run() -> tuple[int, int | None]:
        download = subprocess.run(["bash", "-c", redpajama_download_script(str(root))], env=env, capture_output=True)
        if download.returncode:
            return download.returncode, None
        return 0, subprocess.run(
            ["bash", "-c", redpajama_prepare_script(str(root))], env=env, capture_output=True
        ).returncode

    run.root, run.state = root, state  # type: ignore[attr-defined]
    run.calls = lambda: (state / "calls").read_text().split() if (state / "calls").exists() else []  # type: ignore[attr-defined]
    return run


def test_a_failed_preprocessing_is_retried_without_downloading_again(pod) -> None:
    (pod.state / "fail-preprocess").touch()
    assert pod()[1] != 0
    assert (pod.root / SAMPLE / ".download-complete").exists() and (pod.root / "llama7b_tokenizer/.staged").exists()
    assert not (pod.root / f"{DATASET}.staged").exists()
    (pod.state / "fail-preprocess").unlink()
    assert pod() == (0, 0)
    assert pod.calls() == ["hf", "preprocess", "preprocess"]
    assert (pod.root / f"{DATASET}.staged").exists() and not (pod.root / "redpajama_sample.jsonl").exists()
    assert pod() == (0, 0) and len(pod.calls()) == 3


def test_a_failed_download_is_not_marked_and_runs_again(pod) -> None:
    (pod.state / "fail-download").touch()
    assert pod() == (1, None) and not (pod.root / SAMPLE / ".download-complete").exists()
    (pod.state / "fail-download").unlink()
    assert pod() == (0, 0) and pod.calls() == ["hf", "hf", "preprocess"]


def test_a_dataset_without_its_index_is_not_marked(pod) -> None:
    # preprocess_data_for_megatron.py writes the .idx last (builder.finalize), so no index means
    # the run did not finish, whatever its exit status.
    (pod.state / "no-index").touch()
    assert pod()[1] != 0 and not (pod.root / f"{DATASET}.staged").exists()


def test_links_into_a_dead_pods_cache_and_stale_locks_are_cleared(pod) -> None:
    # huggingface-hub v0.22.2 file_download.py _to_local_dir: with local_dir_use_symlinks="auto"
    # files over 5 MB became links into the pod's own cache (gone with the pod). v0.26.2
    # _hf_hub_download_to_local_dir holds a WeakFileLock under <local_dir>/.cache/huggingface,
    # a SoftFileLock file where the mount has no flock (utils/_fixes.py), left behind if the pod dies.
    sample = pod.root / SAMPLE
    lock = sample / ".cache/huggingface/download/c4_sample.jsonl.lock"
    lock.parent.mkdir(parents=True)
    lock.touch()
    (sample / "book_sample.jsonl").symlink_to("/root/.cache/huggingface/hub/gone")
    assert pod() == (0, 0)
    assert not lock.exists() and not (sample / "book_sample.jsonl").is_symlink()


def test_the_gated_tokenizer_download_passes_the_token_as_transformers_4_56_takes_it() -> None:
    # transformers v4.56.2 (the nxd-llama image's: deep-learning-containers 2.30.0
    # common/nxdt_requirements.txt transformers==4.56.*) src/transformers/models/auto/tokenization_auto.py:
    # get_tokenizer_config takes `token` as a parameter, and from_pretrained turns the deprecated
    # `use_auth_token` into `token` with a warning ("will be removed in v5").
    script = redpajama_prepare_script()
    assert 'from_pretrained("meta-llama/Llama-2-7b-hf", token=open(' in script
    assert "use_auth_token" not in script


def test_the_dataset_is_written_by_megatrons_tool_with_the_saved_tokenizer() -> None:
    # NVIDIA/Megatron-LM core_r0.10.0 tools/preprocess_data.py: --tokenizer-type HuggingFaceTokenizer
    # loads --tokenizer-model with AutoTokenizer (megatron/training/tokenizer/tokenizer.py); the output
    # is <output-prefix>_<json key>_document.{bin,idx} (process_json_file), the prefix the workload reads.
    from workloads.settings import NxdLlamaSettings

    script = redpajama_prepare_script("/shared")
    assert "python3 /opt/Megatron-LM/tools/preprocess_data.py --input=redpajama_sample.jsonl --json-keys=text" in script
    assert "--tokenizer-type=HuggingFaceTokenizer" in script and "--tokenizer-model=/shared/llama7b_tokenizer" in script
    assert "--output-prefix=/shared/data/redpajama_sample" in script and "--append-eod" in script
    fields = NxdLlamaSettings.model_fields
    assert fields["dataset_path"].default == "/shared/data/redpajama_sample_text_document"
    assert fields["tokenizer_path"].default == "/shared/llama7b_tokenizer"
    dockerfile = (Path(__file__).parent.parent / "docker/nxd-llama/Dockerfile").read_text()
    assert "python3 /opt/Megatron-LM/tools/preprocess_data.py --help > /dev/null" in dockerfile


def test_the_download_runs_where_huggingface_hub_writes_real_files(workloads_all: PlanResult) -> None:
    # huggingface/huggingface_hub v0.26.2 src/huggingface_hub/file_download.py
    # _hf_hub_download_to_local_dir: the file is downloaded to <local_dir>/.cache/huggingface/
    # download/*.incomplete (resumed on retry) and moved into local_dir; a file already there
    # with matching metadata is skipped. `local_dir_use_symlinks` is ignored from 0.23.
    job = manifest(workloads_all, "Job", "stage-redpajama")["spec"]["template"]["spec"]
    (download,) = job["initContainers"]
    assert download["image"].rsplit("/", 1)[1].startswith("cmd-shell:")
    assert "HF_TOKEN" not in str(download)
    shell = (Path(__file__).parent.parent / "docker/cmd-shell/Dockerfile").read_text()
    major, minor = map(int, re.search(r"huggingface-hub==(\d+)\.(\d+)\.", shell).groups())
    assert (major, minor) >= (0, 23)
    (main,) = job["containers"]
    assert main["resources"]["requests"]["cpu"] == str(PREPROCESS_WORKERS)
    assert f"--workers={PREPROCESS_WORKERS}" in main["command"][2]


def test_preprocessing_is_sized_to_finish_within_the_timeout() -> None:
    # The seed (llama2-nemo-megatron, NeMo's copy of Megatron's preprocess_data.py): about 60 minutes with
    # --workers=32 on a trn1.32xlarge.
    assert redpajama_minutes(32) == 75
    assert redpajama_minutes() == 175 < DataStagingSettings().timeout_minutes
    # It leaves room on a 16-vCPU core node for its daemon sets.
    assert PREPROCESS_WORKERS <= 14
