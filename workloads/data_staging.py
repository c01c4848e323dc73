"""Datasets on FSx without anyone exec'ing into a pod: Kubernetes Jobs that download and
prepare what the training jobs read, each skipping work already done (a marker file is
written only after a step has finished), plus the seeds' command-shell pod as an option.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pulumi

from infra.specs import system_pods
from workloads import pods
from workloads.kube import LayoutArgs, declare
from workloads.nxd_llama import HF_TOKEN_KEY, HF_TOKEN_SECRET
from workloads.settings import DataStagingSettings

WIKICORPUS_TAR = "bert_pretrain_wikicorpus_tokenized_hdf5_seqlen128.tar"
WIKICORPUS_URI = f"s3://neuron-s3/training_datasets/bert_pretrain_wikicorpus_tokenized_hdf5/{WIKICORPUS_TAR}"
# The public Neuron bucket lives in us-east-1 whatever the cluster's region.
WIKICORPUS_REGION = "us-east-1"
REDPAJAMA_REPO = "togethercomputer/RedPajama-Data-1T-Sample"
TOKENIZER_REPO = "meta-llama/Llama-2-7b-hf"
# NVIDIA/Megatron-LM core_r0.10.0 tools/preprocess_data.py in the nxd-llama image (docker/nxd-llama).
PREPROCESS = "/opt/Megatron-LM/tools/preprocess_data.py"
REDPAJAMA_DIR = "data/RedPajama-Data-1T-Sample"
REDPAJAMA_PREFIX = "data/redpajama_sample"
# Sizing: the seed tokenizes the 1B-token sample in about 60 minutes with 32 workers on a
# trn1.32xlarge (Ice Lake Xeon, like the m6i core nodes); one worker per core, the work is
# CPU-bound, so 12 workers take about 32 x 60 / 12 = 160 minutes, plus a few for the download
# (~5 GB) and the concatenation: under the 240-minute default timeout. 12 cores fit a fresh
# m6i.4xlarge job-support node (16 vCPU) beside its daemon sets.
PREPROCESS_WORKERS = 12
SEED_PREPROCESS_WORKER_MINUTES = 32 * 60
DOWNLOAD_AND_CONCAT_MINUTES = 15
WORKLOAD = "data-staging"
# The Hugging Face token as a file (a secret volume), not an environment variable, which any
# process of the container and a `kubectl describe` of the pod's env would show.
HF_TOKEN_DIR = "/var/run/secrets/huggingface"
HF_TOKEN_FILE = f"{HF_TOKEN_DIR}/{HF_TOKEN_KEY}"
HF_TOKEN_VOLUME = "hf-token"
# Helpers get a cap so a runaway download or tokenizer cannot starve the other pods on its node.
SMALL = {"requests": {"cpu": "2", "memory": "4Gi"}, "limits": {"cpu": "2", "memory": "8Gi"}}


def redpajama_minutes(workers: int = PREPROCESS_WORKERS) -> int:
    """How long the RedPajama staging Job takes, estimated from the seed's measurement."""
    return -(-SEED_PREPROCESS_WORKER_MINUTES // workers) + DOWNLOAD_AND_CONCAT_MINUTES


WIKICORPUS_SCRIPT = f"""\
set -euo pipefail
cd /data
if [ -f bert_pretrain_wikicorpus_tokenized_hdf5_seqlen128/.staged ]; then
  echo "WikiCorpus already staged"; exit 0
fi
aws s3 cp {WIKICORPUS_URI} . --no-sign-request --region {WIKICORPUS_REGION}
# The files belong to whoever extracts them (the namespace's id), not to the archive's owners.
tar --no-same-owner -xf {WIKICORPUS_TAR}
rm -f {WIKICORPUS_TAR}
touch bert_pretrain_wikicorpus_tokenized_hdf5_seqlen128/.staged
"""


def redpajama_download_script(root: str = "/shared") -> str:
    """The RedPajama sample as real files on FSx, resumable, marked complete only at the end.

    Runs in the cmd-shell image (huggingface-hub 0.26.2): since 0.23 a `--local-dir` download
    writes the files themselves there, resumes from `.cache/huggingface/download/*.incomplete`
    and skips finished files; before, big files were links into the pod's own cache.
    """
    return f"""\
set -euo pipefail
cd {root}
dir={REDPAJAMA_DIR}
if [ -f "$dir/.download-complete" ]; then
  echo "RedPajama sample already downloaded"; exit 0
fi
mkdir -p "$dir"
# Links left by an older huggingface-hub point into a dead pod's cache; locks left by a killed
# pod (a soft lock where the mount has no flock) would block this retry for ever.
find "$dir" -maxdepth 1 -type l -delete
find "$dir" -path '*/.cache/huggingface/*' -name '*.lock' -delete
huggingface-cli download {REDPAJAMA_REPO} --repo-type dataset --include '*.jsonl' --local-dir "$dir"
touch "$dir/.download-complete"
"""


# The nxd-llama image has transformers 4.56 (aws-neuron/deep-learning-containers 2.30.0
# common/nxdt_requirements.txt): AutoTokenizer.from_pretrained passes `token` to every download,
# get_tokenizer_config's first (transformers v4.56.2 src/transformers/models/auto/tokenization_auto.py;
# `use_auth_token` is deprecated there, turned into `token`).
# The dataset: Megatron's preprocess_data.py (core_r0.10.0) with the saved tokenizer
# (--tokenizer-type HuggingFaceTokenizer: AutoTokenizer.from_pretrained(--tokenizer-model),
# megatron/training/tokenizer/tokenizer.py), writing <prefix>_text_document.bin and, last, .idx
# (megatron/core/datasets/indexed_dataset.py IndexedDatasetBuilder.finalize): header MMIDIDX, version
# 1, the layout NxD Training's MegatronDataModule reads through NeMo's MMapIndexedDataset
# (neuronx-distributed-training 9169aa0 lightning_modules/data/datasets/gpt_dataset_patch.py imports it
# from nemo.collections.nlp.data.language_modeling.megatron.indexed_dataset, which checks that header
# and version).
def redpajama_prepare_script(root: str = "/shared") -> str:
    """The Llama-2 tokenizer and the Megatron dataset, each step marked only once it is whole."""
    return f"""\
set -euo pipefail
cd {root}
if [ ! -f llama7b_tokenizer/.staged ]; then
  python3 -c 'import transformers; transformers.AutoTokenizer.from_pretrained("{TOKENIZER_REPO}", token=open("{HF_TOKEN_FILE}").read().strip()).save_pretrained("{root}/llama7b_tokenizer")'
  touch llama7b_tokenizer/.staged
fi
if [ ! -f {REDPAJAMA_PREFIX}_text_document.staged ]; then
  test -f {REDPAJAMA_DIR}/.download-complete
  cat {REDPAJAMA_DIR}/*.jsonl > redpajama_sample.jsonl
  python3 {PREPROCESS} --input=redpajama_sample.jsonl --json-keys=text --tokenizer-type=HuggingFaceTokenizer \\
    --tokenizer-model={root}/llama7b_tokenizer --output-prefix={root}/{REDPAJAMA_PREFIX} \\
    --append-eod --workers={PREPROCESS_WORKERS}
  # The index is written last (builder.finalize): both files there means the dataset is whole.
  # One test per line: `set -e` ignores a failure left of `&&`.
  test -s {REDPAJAMA_PREFIX}_text_document.bin
  test -s {REDPAJAMA_PREFIX}_text_document.idx
  rm -f redpajama_sample.jsonl
  touch {REDPAJAMA_PREFIX}_text_document.staged
fi
echo "RedPajama sample, tokenizer and Megatron dataset are in place"
"""


@dataclass(frozen=True)
class StagingLayout:
    namespace: str
    claim: str
    # The namespace's id, which the staging pods run as (pods.namespace_pod).
    namespace_id: int
    service_account: str
    core_node_selector: Mapping[str, str]
    support_placement: Mapping[str, Any]
    shell_image: str
    nxd_image: str | None
    settings: DataStagingSettings


def _pod_spec(layout: StagingLayout, container: dict[str, Any], restart: str) -> dict[str, Any]:
    container["volumeMounts"] = [
        pods.claim_mount("/data"),
        pods.claim_mount("/shared"),
        *container.get("volumeMounts", []),
    ]
    # The AWS and Hugging Face CLIs and transformers keep caches and config under $HOME.
    container["env"] = pods.env_list(pods.IDENTITY_ENV)
    container["securityContext"] = pods.container_security_context()
    # Staging Jobs on the job-support group (scaled up for them, released after); the
    # long-running shell on the always-on system nodes, where it keeps no extra node up.
    placement = (
        pods.support_placement(layout.support_placement)
        if restart == "Never"
        else {"nodeSelector": dict(layout.core_node_selector)}
    )
    return {
        # The claim is the namespace's own directory, which belongs to the namespace's id.
        **pods.namespace_pod(layout.namespace_id),
        "serviceAccountName": layout.service_account,
        **placement,
        "restartPolicy": restart,
        "containers": [container],
        "volumes": [pods.claim_volume(layout.claim)],
    }


def staging_job(layout: StagingLayout, name: str, image: str, script: str, **container: Any) -> dict[str, Any]:
    spec = _pod_spec(layout, {"name": "stage", "image": image, "command": ["bash", "-c", script], **container}, "Never")
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": layout.namespace,
            "annotations": pods.await_timeout(layout.settings.timeout_minutes),
        },
        # No ttlSecondsAfterFinished: a Job deleted behind Pulumi's back would be re-run on the next up.
        "spec": {"backoffLimit": 2, "template": {"metadata": {"labels": pods.workload_labels(WORKLOAD)}, "spec": spec}},
    }


def wikicorpus_job(layout: StagingLayout) -> dict[str, Any]:
    return staging_job(
        layout, "stage-wikicorpus", layout.shell_image, WIKICORPUS_SCRIPT, resources=copy.deepcopy(SMALL)
    )


def redpajama_job(layout: StagingLayout) -> dict[str, Any]:
    """Download first (init container, shell image), then tokenizer and preprocessing (nxd-llama image)."""
    assert layout.nxd_image is not None
    token = {"name": HF_TOKEN_VOLUME, "mountPath": HF_TOKEN_DIR, "readOnly": True}
    workers = str(PREPROCESS_WORKERS)
    resources = {"requests": {"cpu": workers, "memory": "16Gi"}, "limits": {"cpu": workers, "memory": "32Gi"}}
    job = staging_job(
        layout,
        "stage-redpajama",
        layout.nxd_image,
        redpajama_prepare_script(),
        volumeMounts=[token],
        resources=resources,
    )
    download = {
        "name": "download",
        "image": layout.shell_image,
        "command": ["bash", "-c", redpajama_download_script()],
        "resources": copy.deepcopy(SMALL),
        "env": pods.env_list(pods.IDENTITY_ENV),
        "securityContext": pods.container_security_context(),
        "volumeMounts": [pods.claim_mount("/shared")],
    }
    spec = job["spec"]["template"]["spec"]
    spec["initContainers"] = [download]
    spec["volumes"].append(
        {
            "name": HF_TOKEN_VOLUME,
            "secret": {"secretName": HF_TOKEN_SECRET, "items": [{"key": HF_TOKEN_KEY, "path": HF_TOKEN_KEY}]},
        }
    )
    return job


def cmd_shell_pod(layout: StagingLayout) -> dict[str, Any]:
    # It shares the system nodes (infra/specs/system_capacity.py counts its requests); heavy work belongs in a Job.
    resources = copy.deepcopy(system_pods.CMD_SHELL_RESOURCES)
    container = {"name": "shell", "image": layout.shell_image, "command": ["sleep", "infinity"], "resources": resources}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "cmd-shell",
            "namespace": layout.namespace,
            "labels": pods.workload_labels(WORKLOAD),
            "annotations": pods.skip_await(),
        },
        "spec": _pod_spec(layout, container, "Always"),
    }


def staging_network_policy(namespace: str) -> dict[str, Any]:
    """Staging pods serve nothing: no ingress at all (`kubectl exec` goes through the kubelet)."""
    return pods.network_policy(WORKLOAD, namespace, pods.workload_labels(WORKLOAD), [])


class DataStaging(pulumi.ComponentResource):
    """``wikicorpus`` and ``redpajama`` are the staging Jobs (None when off), for others to wait on."""

    def __init__(self, name: str, args: LayoutArgs[StagingLayout], opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("trainium:workloads:DataStaging", name, None, opts)
        s, after = args.layout.settings, list(args.after)
        after.append(declare(staging_network_policy(args.layout.namespace), self))
        self.wikicorpus = declare(wikicorpus_job(args.layout), self, after) if s.wikicorpus else None
        self.redpajama = declare(redpajama_job(args.layout), self, after) if s.redpajama else None
        self.shell = declare(cmd_shell_pod(args.layout), self, after) if s.cmd_shell else None
        self.register_outputs({})
