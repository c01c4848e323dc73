"""Datasets on FSx without anyone exec'ing into a pod: Kubernetes Jobs that download and
prepare what the training jobs read, each skipping work already done (a marker file is
written only after a step has finished), plus the seeds' command-shell pod as an option.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Optional

import pulumi

from workloads import pods
from workloads.kube import declare
from workloads.nemo_llama2 import HF_TOKEN_KEY, HF_TOKEN_SECRET
from workloads.settings import DataStagingSettings

WIKICORPUS_TAR = "bert_pretrain_wikicorpus_tokenized_hdf5_seqlen128.tar"
WIKICORPUS_URI = f"s3://neuron-s3/training_datasets/bert_pretrain_wikicorpus_tokenized_hdf5/{WIKICORPUS_TAR}"
# The public Neuron bucket lives in us-east-1 whatever the cluster's region.
WIKICORPUS_REGION = "us-east-1"
REDPAJAMA_REPO = "togethercomputer/RedPajama-Data-1T-Sample"
TOKENIZER_REPO = "meta-llama/Llama-2-7b-hf"
PREPROCESS = "/opt/neuronx-nemo-megatron/nemo/scripts/nlp_language_modeling/preprocess_data_for_megatron.py"
PREPROCESS_WORKERS = 8

WIKICORPUS_SCRIPT = f"""\
set -euo pipefail
cd /data
if [ -f bert_pretrain_wikicorpus_tokenized_hdf5_seqlen128/.staged ]; then
  echo "WikiCorpus already staged"; exit 0
fi
aws s3 cp {WIKICORPUS_URI} . --no-sign-request --region {WIKICORPUS_REGION}
tar -xf {WIKICORPUS_TAR}
rm -f {WIKICORPUS_TAR}
touch bert_pretrain_wikicorpus_tokenized_hdf5_seqlen128/.staged
"""

REDPAJAMA_SCRIPT = f"""\
set -euo pipefail
cd /shared
if [ ! -f llama7b_tokenizer/.staged ]; then
  python3 -c 'import os, transformers; transformers.AutoTokenizer.from_pretrained("{TOKENIZER_REPO}", token=os.environ["{HF_TOKEN_KEY}"]).save_pretrained("/shared/llama7b_tokenizer")'
  touch llama7b_tokenizer/.staged
fi
if [ ! -f data/RedPajama-Data-1T-Sample/.staged ]; then
  huggingface-cli download {REDPAJAMA_REPO} --repo-type dataset --include '*.jsonl' --local-dir data/RedPajama-Data-1T-Sample
  touch data/RedPajama-Data-1T-Sample/.staged
fi
if [ ! -f data/redpajama_sample_text_document.staged ]; then
  cat data/RedPajama-Data-1T-Sample/*.jsonl > redpajama_sample.jsonl
  python3 {PREPROCESS} --input=redpajama_sample.jsonl --json-keys=text --tokenizer-library=huggingface \\
    --tokenizer-type=/shared/llama7b_tokenizer --dataset-impl=mmap --output-prefix=/shared/data/redpajama_sample \\
    --append-eod --need-pad-id --workers={PREPROCESS_WORKERS}
  rm -f redpajama_sample.jsonl
  touch data/redpajama_sample_text_document.staged
fi
echo "RedPajama sample, tokenizer and Megatron dataset are in place"
"""


@dataclass(frozen=True)
class StagingLayout:
    namespace: str
    claim: str
    service_account: str
    core_node_selector: Mapping[str, str]
    shell_image: str
    nemo_image: Optional[str]
    settings: DataStagingSettings


def _pod_spec(layout: StagingLayout, container: dict[str, Any], restart: str) -> dict[str, Any]:
    container["volumeMounts"] = [pods.claim_mount("/data"), pods.claim_mount("/shared")]
    return {
        "serviceAccountName": layout.service_account,
        # The FSx file system's root directory belongs to root.
        "securityContext": {"runAsUser": 0},
        "nodeSelector": dict(layout.core_node_selector),
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
            "annotations": pods.wait_for("condition=Complete", layout.settings.timeout_minutes),
        },
        # No ttlSecondsAfterFinished: a Job deleted behind Pulumi's back would be re-run on the next up.
        "spec": {"backoffLimit": 2, "template": {"spec": spec}},
    }


def wikicorpus_job(layout: StagingLayout) -> dict[str, Any]:
    resources = {"requests": {"cpu": "2", "memory": "4Gi"}}
    return staging_job(layout, "stage-wikicorpus", layout.shell_image, WIKICORPUS_SCRIPT, resources=resources)


def redpajama_job(layout: StagingLayout) -> dict[str, Any]:
    assert layout.nemo_image is not None
    token = {"name": HF_TOKEN_KEY, "valueFrom": {"secretKeyRef": {"name": HF_TOKEN_SECRET, "key": HF_TOKEN_KEY}}}
    resources = {"requests": {"cpu": str(PREPROCESS_WORKERS), "memory": "16Gi"}}
    return staging_job(layout, "stage-redpajama", layout.nemo_image, REDPAJAMA_SCRIPT, env=[token], resources=resources)


def cmd_shell_pod(layout: StagingLayout) -> dict[str, Any]:
    container = {"name": "shell", "image": layout.shell_image, "command": ["sleep", "infinity"]}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "cmd-shell", "namespace": layout.namespace, "annotations": pods.skip_await()},
        "spec": _pod_spec(layout, container, "Always"),
    }


@dataclass(frozen=True)
class DataStagingArgs:
    layout: StagingLayout
    after: tuple[pulumi.Resource, ...] = ()


class DataStaging(pulumi.ComponentResource):
    """``wikicorpus`` and ``redpajama`` are the staging Jobs (None when off), for others to wait on."""

    def __init__(self, name: str, args: DataStagingArgs, opts: Optional[pulumi.ResourceOptions] = None) -> None:
        super().__init__("trainium:workloads:DataStaging", name, None, opts)
        s, after = args.layout.settings, list(args.after)
        self.wikicorpus = declare(wikicorpus_job(args.layout), self, after) if s.wikicorpus else None
        self.redpajama = declare(redpajama_job(args.layout), self, after) if s.redpajama else None
        self.shell = declare(cmd_shell_pod(args.layout), self, after) if s.cmd_shell else None
        self.register_outputs({})
