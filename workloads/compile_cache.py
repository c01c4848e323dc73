"""The one Neuron compile cache every workload shares: `/neuron_cache` on the FSx file system.

The directory is fixed by the training code we run, not by us: the Ray image's ray_train_llama2.py
(docker/ray-llama2) passes NEURON_COMPILE_CACHE_URL=/shared/neuron_cache in Ray's runtime
environment, overwriting whatever the pod sets, and NxD Training's runs get the same value as their
config's compiler_cache_url (nxd_llama.overrides; training_orchestrator.py exports it), so their
pods must mount the FSx claim at /shared for the cache to land on FSx rather than in the container. BERT's pods mount
the claim at /data and point torch-neuronx there with NEURON_CC_FLAGS=--cache_dir (which takes
precedence over NEURON_COMPILE_CACHE_URL: aws-neuron-sdk v2.20.2
frameworks/torch/torch-neuronx/api-reference-guide/training/torch-neuron-envvars.rst).

Inside it the cache keys entries by compiler version and graph hash
(`neuronxcc-<version>/MODULE_<hash>/`), so the three images' different SDKs never share an entry.
A precompile step (neuron_parallel_compile) and its training step run the same script with the
same flags and the same cache directory, so training finds every graph precompile compiled.
Entries are guarded by lock files the tool takes per graph (`neuron_parallel_compile --command
clear-locks` removes stale ones); across nodes those locks need a file system with coherent
locking, which is why the FSx volumes mount Lustre with `flock` (infra/components/storage.py).
"""

from __future__ import annotations

# Relative to the file system root.
FSX_DIR = "neuron_cache"
# Where Ray's ray_train_llama2.py and NxD Training's runs put it, in pods mounting FSx at /shared.
UPSTREAM_MOUNT = "/shared"
UPSTREAM_URL = f"{UPSTREAM_MOUNT}/{FSX_DIR}"


def cache_dir(mount: str, subdir: str = "") -> str:
    """The cache (or a directory inside it) in a pod that mounts the FSx claim at ``mount``."""
    path = f"{mount.rstrip('/')}/{FSX_DIR}"
    return f"{path}/{subdir}" if subdir else path
