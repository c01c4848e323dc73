"""One Neuron compile cache on FSx (`/neuron_cache`) for BERT, Ray and NxD Training, laid out so
precompile populates what training reads (see workloads/compile_cache.py for the sources).

Ray's training code hard-codes NEURON_COMPILE_CACHE_URL=/shared/neuron_cache (data-on-eks
a32d9f25 gen-ai/training/raytrain-llama2-pretrain-trn1/llama2_pretrain/ray_train_llama2.py),
overwriting the pod's environment, and NxD Training's runs get the same path as the config's
compiler_cache_url (neuronx-distributed-training 9169aa0 examples/training_orchestrator.py exports
it): what keeps their cache on FSx is that their pods mount the claim at /shared. The acceptance test compiles nothing through torch-neuronx
(nccom-test builds its own collectives), so it has no cache to share.
"""

from __future__ import annotations

import posixpath
from typing import Any

from infra.components.storage import static_volume
from offline.plan.runner import PlanResult
from tests.test_workloads import env, manifest
from workloads import compile_cache

CACHE_VARS = ("NEURON_CC_FLAGS", "NEURON_COMPILE_CACHE_URL")


def fsx_path(container: dict[str, Any], pod: dict[str, Any], path: str) -> str:
    """``path`` in the pod, as a path from the FSx root; fails if it is not on the FSx claim."""
    claim_volumes = {v["name"] for v in pod["volumes"] if "persistentVolumeClaim" in v}
    for mount in container["volumeMounts"]:
        if mount["name"] in claim_volumes and (path + "/").startswith(mount["mountPath"].rstrip("/") + "/"):
            return posixpath.relpath(path, mount["mountPath"])
    raise AssertionError(f"{path} is not on the FSx claim in this pod")


def test_bert_precompile_fills_exactly_what_training_reads(workloads_dev: PlanResult) -> None:
    caches: dict[str, list[str]] = {}
    for job in ("bert-precompile", "bert-train"):
        for task in manifest(workloads_dev, "Job", job)["spec"]["tasks"]:
            pod = task["template"]["spec"]
            container = pod["containers"][0]
            flags = env(container)["NEURON_CC_FLAGS"]
            assert flags.startswith("--cache_dir=")
            caches.setdefault(job, []).append(fsx_path(container, pod, flags.removeprefix("--cache_dir=")))
    # Replica i of training reads the directory replica i of precompile wrote, inside the one cache.
    assert (
        caches["bert-precompile"] == caches["bert-train"] == ["neuron_cache/bert-large_0", "neuron_cache/bert-large_1"]
    )


def test_nxd_cache_is_the_shared_one_on_fsx(workloads_all: PlanResult) -> None:
    for job in ("llama2-compile", "llama2-train"):
        replicas = manifest(workloads_all, "MPIJob", job)["spec"]["mpiReplicaSpecs"]
        rank = replicas["Launcher"]["template"]["spec"]["containers"][0]["command"][-1]
        assert f" compiler_cache_url={compile_cache.UPSTREAM_URL} " in rank
        pod = replicas["Worker"]["template"]["spec"]
        container = pod["containers"][0]
        assert fsx_path(container, pod, compile_cache.UPSTREAM_URL) == compile_cache.FSX_DIR
        launcher = replicas["Launcher"]["template"]["spec"]["containers"][0]
        assert not set(CACHE_VARS) & set(env(launcher)) and not set(CACHE_VARS) & set(env(container))


def test_ray_cache_is_the_shared_one_on_fsx(workloads_dev: PlanResult) -> None:
    for name in ("llama2-precompilation-job", "llama2-pretraining-job"):
        cluster = manifest(workloads_dev, "RayJob", name)["spec"]["rayClusterSpec"]
        for template in (cluster["headGroupSpec"]["template"], cluster["workerGroupSpecs"][0]["template"]):
            pod = template["spec"]
            assert fsx_path(pod["containers"][0], pod, compile_cache.UPSTREAM_URL) == compile_cache.FSX_DIR
        assert "neuron_cache" not in manifest(workloads_dev, "RayJob", name)["spec"]["runtimeEnvYAML"]


def test_cache_locks_are_coherent_across_nodes() -> None:
    # The cache takes a lock per graph (neuron_parallel_compile's `clear-locks` removes stale ones);
    # Neuron's training troubleshooting guide (v2.20.2) blames shared-cache errors on file systems
    # without coherent locking. Lustre gives cluster-wide flock only with the `flock` mount option.
    volume = static_volume(
        "fsx-claim-default",
        "default",
        "fsx-claim",
        1200,
        "fs-0abc",
        "fs-0abc.fsx.us-west-2.amazonaws.com",
        "x7yz",
        directory="default",
    )
    assert "flock" in volume["spec"]["mountOptions"]
