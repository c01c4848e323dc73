"""The workload stacks under the mocks: what each workload declares, read from the cluster
stack's outputs, and in which order."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from infra.facts import versions
from offline.plan.runner import PlanResult
from tests.crd_fields import FILES, undefined_fields
from workloads import pods

TRN1 = {"neuron": "16", "efa": "8"}
TRN1N = {"neuron": "16", "efa": "16"}


def manifest(result: PlanResult, kind: str, name: str) -> dict[str, Any]:
    matches = [
        r
        for r in result.registrations
        if r.type.endswith(f":{kind}") and r.inputs.get("metadata", {}).get("name") == name
    ]
    assert len(matches) == 1, f"{len(matches)} {kind} named {name}"
    return matches[0].inputs


def registration(result: PlanResult, kind: str, name: str):
    return next(r for r in result.registrations if r.type.endswith(f":{kind}") and r.inputs["metadata"]["name"] == name)


def pod_templates(obj: dict[str, Any]) -> list[dict[str, Any]]:
    spec = obj["spec"]
    if obj["kind"] == "Job" and "tasks" in spec:
        return [t["template"] for t in spec["tasks"]]
    if obj["kind"] == "MPIJob":
        return [r["template"] for r in spec["mpiReplicaSpecs"].values()]
    if obj["kind"] == "RayCluster":
        return [spec["headGroupSpec"]["template"], *(g["template"] for g in spec["workerGroupSpecs"])]
    return [spec["template"]]


def limits(template: dict[str, Any]) -> dict[str, str]:
    return template["spec"]["containers"][0]["resources"]["limits"]


def env(container: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container.get("env", [])}


def cluster_group(dev: PlanResult, name: str) -> dict[str, Any]:
    return next(g for g in dev.outputs["acceleratorNodeGroups"] if g["name"] == name)


# --- BERT on Volcano -------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["bert-precompile", "bert-train"])
def test_bert_jobs_gang_schedule_one_pod_per_node_in_the_queue(workloads_dev: PlanResult, name: str) -> None:
    job = manifest(workloads_dev, "Job", name)
    spec = job["spec"]
    assert spec["schedulerName"] == "volcano" and spec["queue"] == "test"
    assert spec["minAvailable"] == 2 and len(spec["tasks"]) == 2
    assert [t["replicas"] for t in spec["tasks"]] == [1, 1]
    assert spec["plugins"]["svc"] == ["--publish-not-ready-addresses"]
    # volcano v1.15.1 job_controller_util.go applyPolicies: the first matching policy of the task
    # wins, so the deadline's exit code (coreutils `timeout`: 124) ends the job before PodFailed
    # restarts it. No PodPending policy (volcano v1.15.1 job_controller_handler.go addPod l.142-200
    # re-arms it on a healthy running job after any controller restart): the gang watchdog's
    # annotation carries the pending bound instead (tests/test_gang_watchdog.py).
    assert spec["tasks"][0]["policies"] == [
        {"exitCode": 124, "action": "TerminateJob"},
        {"event": "PodEvicted", "action": "RestartJob"},
        {"event": "PodFailed", "action": "RestartJob"},
    ]


def test_bert_pods_own_their_node_and_tolerate_the_neuron_taint(workloads_dev: PlanResult, dev: PlanResult) -> None:
    group = cluster_group(dev, "trn1-32xl-ng1")
    for template in pod_templates(manifest(workloads_dev, "Job", "bert-train")):
        spec, container = template["spec"], template["spec"]["containers"][0]
        # Every device and interface of the node; CPU and memory requested so the pod is not BestEffort
        # (first evicted, oom_score_adj 1000), with no limit to be OOM-killed at.
        assert container["resources"]["limits"] == {"aws.amazon.com/neuron": "16", "vpc.amazonaws.com/efa": "8"}
        assert container["resources"]["requests"] == {
            **container["resources"]["limits"],
            "cpu": "100",
            "memory": "400Gi",
        }
        # Every group label but the provisioner's, which a nodeProvisioner switch changes (infra/contract.py).
        assert {k: v for k, v in group["labels"].items() if k != "provisioner"}.items() <= spec["nodeSelector"].items()
        assert "provisioner" not in spec["nodeSelector"]
        assert spec["nodeSelector"]["node.kubernetes.io/instance-type"] == "trn1.32xlarge"
        assert spec["tolerations"] == [
            {"key": "aws.amazon.com/neuron", "operator": "Equal", "value": "true", "effect": "NoSchedule"}
        ]
        assert {"name": "dshm", "emptyDir": {"medium": "Memory"}} in spec["volumes"]
        assert {"name": "fsx", "persistentVolumeClaim": {"claimName": "fsx-claim-default"}} in spec["volumes"]
        assert {m["mountPath"] for m in container["volumeMounts"]} == {"/dev/shm", "/data"}
        assert spec["serviceAccountName"] == "training" and spec["restartPolicy"] == "Never"


def test_bert_environment_and_a_compile_cache_per_replica(workloads_dev: PlanResult) -> None:
    tasks = manifest(workloads_dev, "Job", "bert-train")["spec"]["tasks"]
    variables = [env(t["template"]["spec"]["containers"][0]) for t in tasks]
    for replica, values in enumerate(variables):
        assert {k: values[k] for k in ("FI_PROVIDER", "FI_EFA_USE_DEVICE_RDMA", "FI_EFA_FORK_SAFE", "CCOM_SOCKET_IFNAME",
                                       "NEURON_RT_RESET_CORES", "XLA_TRANSFER_SEED_ASYNC")} == {
            "FI_PROVIDER": "efa", "FI_EFA_USE_DEVICE_RDMA": "1", "FI_EFA_FORK_SAFE": "1", "CCOM_SOCKET_IFNAME": "eth0",
            "NEURON_RT_RESET_CORES": "1", "XLA_TRANSFER_SEED_ASYNC": "1"}  # fmt: skip
        assert values["NEURON_CC_FLAGS"] == f"--cache_dir=/data/neuron_cache/bert-large_{replica}"
        # aws-neuron-samples 2015d65 run_dp_bert_large_hf_pretrain_bf16_s128.sh exports
        # these for every run (lines 7-8) and BUCKET_CAP_MB for multi-node runs (line 70).
        assert {
            k: values[k] for k in ("NEURON_RT_EXEC_TIMEOUT", "NEURON_RT_STOCHASTIC_ROUNDING_SEED", "BUCKET_CAP_MB")
        } == {"NEURON_RT_EXEC_TIMEOUT": "600", "NEURON_RT_STOCHASTIC_ROUNDING_SEED": "0", "BUCKET_CAP_MB": "512"}


def test_bert_torchrun_meets_at_rank_0s_c10d_store_with_one_worker_per_neuroncore(workloads_dev: PlanResult) -> None:
    tasks = manifest(workloads_dev, "Job", "bert-train")["spec"]["tasks"]
    train = tasks[0]["template"]["spec"]["containers"][0]
    # Each attempt under coreutils `timeout`: SIGTERM at trainDeadlineMinutes (dev: 60), SIGKILL 5 min later.
    assert train["command"][:3] == ["timeout", "--kill-after=300", "3600"]
    shell, flag, line = train["command"][3:]
    assert (shell, flag) == ("bash", "-c")
    # Replica 0 hosts the store (localhost, as TorchX sets it); the others reach it by its Volcano host name.
    assert "--rdzv_backend c10d --rdzv_endpoint '$(TORCHX_RANK0_HOST):29500' --rdzv_conf read_timeout=600" in line
    assert env(train)["TORCHX_RANK0_HOST"] == "localhost"
    other = tasks[1]["template"]["spec"]["containers"][0]
    assert "--rdzv_endpoint '$(VC_WORKER_0_HOSTS):29500'" in other["command"][-1]
    assert "TORCHX_RANK0_HOST" not in env(other)
    assert [t["name"] for t in tasks] == ["worker-0", "worker-1"]
    assert manifest(workloads_dev, "Job", "bert-train")["spec"]["plugins"]["svc"] == ["--publish-not-ready-addresses"]
    assert "--nnodes 2 --nproc_per_node 32" in line
    assert "--batch_size 16 --grad_accum_usteps 32" in line
    assert re.search(
        r"--data_dir /data/bert_pretrain_wikicorpus_tokenized_hdf5_seqlen128 --output_dir /data/output/run-[0-9a-f]{12} ",
        line,
    )
    assert "--steps_this_run 200 $resume_args " in line and "--enable_fp32" not in line
    compile_ = manifest(workloads_dev, "Job", "bert-precompile")["spec"]["tasks"][0]["template"]["spec"]["containers"][
        0
    ]
    assert compile_["command"][:3] == ["timeout", "--kill-after=300", "7200"]
    assert compile_["command"][3] == "neuron_parallel_compile" and len(compile_["command"]) == 5
    assert compile_["command"][4].endswith("--steps_this_run 10")


def test_the_gang_waits_for_rank_0s_store_longer_than_rank_0_may_wait_for_the_run_directory() -> None:
    # Replica 0 starts torchrun, which hosts the store, only once its shell holds the run directory's
    # lock (resumable.take_lock); the others keep connecting for read_timeout meanwhile.
    from workloads import bert_launch, resumable

    assert bert_launch.RDZV_READ_TIMEOUT_SECONDS > resumable.LOCK_WAIT_SECONDS + 120


def test_bert_training_waits_for_precompile_which_waits_for_the_dataset(workloads_dev: PlanResult) -> None:
    staging = registration(workloads_dev, "Job", "stage-wikicorpus")
    precompile = registration(workloads_dev, "Job", "bert-precompile")
    train = registration(workloads_dev, "Job", "bert-train")
    gate = registration(workloads_dev, "Job", "bert-precompile-gate")
    # `pulumi up` waits for the precompile through its gate (workloads/step_gate.py), not waitFor.
    assert staging.urn in precompile.dependencies and precompile.urn in gate.dependencies
    assert gate.urn in train.dependencies
    assert precompile.inputs["metadata"]["annotations"]["pulumi.com/skipAwait"] == "true"
    assert "pulumi.com/waitFor" not in precompile.inputs["metadata"]["annotations"]
    assert train.inputs["metadata"]["annotations"] == {
        "pulumi.com/skipAwait": "true",
        "trainium.workloads/pending-timeout-seconds": "2700",
        "trainium.workloads/restart-pending-timeout-seconds": str((45 + 35) * 60),
    }


def test_bert_on_trn1n_requests_its_sixteen_efa_interfaces(workloads_with) -> None:
    result = workloads_with(
        bertPretraining={"nodeGroup": "trn1n-32xl-ng", "nodes": 2, "precompile": False, "bf16": False}, rayLlama2=None
    )
    template = pod_templates(manifest(result, "Job", "bert-train"))[0]
    assert limits(template) == {"aws.amazon.com/neuron": "16", "vpc.amazonaws.com/efa": "16"}
    assert template["spec"]["nodeSelector"]["instance-type"] == "trn1n-32xl"
    assert "--enable_fp32" in template["spec"]["containers"][0]["command"][-1]
    assert not [r for r in result.registrations if r.inputs.get("metadata", {}).get("name") == "bert-precompile"]


def test_a_checkpoint_or_retry_change_replaces_bert_train_only(workloads_dev: PlanResult, workloads_with) -> None:
    """Both Jobs are replaced on any spec change (replaceOnChanges), and the precompile saves no
    checkpoint (aws-neuron-samples d6e1754 dp_bert_large_hf_pretrain_hdf5.py l.560, 572: only
    `if is_root and not extract_graphs_only`): a new checkpoint interval, count kept or maxRetry must
    leave the precompile object as it was, not re-run hours of compilation on two trn1.32xlarge."""
    bert = {
        "nodeGroup": "trn1-32xl-ng1",
        "nodes": 2,
        "trainSteps": 200,
        "trainDeadlineMinutes": 60,
        "firstStepTimeoutMinutes": 30,
    }
    before = workloads_with(bertPretraining={**bert, "maxRetry": 2})
    after = workloads_with(bertPretraining={**bert, "maxRetry": 3, "checkpointEveryShards": 4, "checkpointsToKeep": 3})
    precompile = manifest(after, "Job", "bert-precompile")
    assert precompile == manifest(before, "Job", "bert-precompile") and precompile["spec"]["maxRetry"] == 2
    train = manifest(after, "Job", "bert-train")
    assert train != manifest(before, "Job", "bert-train") and train["spec"]["maxRetry"] == 3
    command = " ".join(train["spec"]["tasks"][0]["template"]["spec"]["containers"][0]["command"])
    assert "--shards_per_ckpt 4 --num_ckpts_to_keep 3" in command


# --- Llama-2 on Ray ---------------------------------------------------------------------------


RAY_JOBS = ["llama2-generate-pretraining-test-data", "llama2-precompilation-job", "llama2-pretraining-job"]


def test_each_ray_step_brings_up_its_own_cluster_head_on_core_nodes_workers_own_trn_nodes(
    workloads_dev: PlanResult,
) -> None:
    # ray-project/kuberay v1.7.0, ray-operator/controllers/ray/batchscheduler/volcano/volcano_scheduler.go
    # (handleRayJob): with `batchScheduler.name: volcano` a RayJob without `rayClusterSpec` (clusterSelector
    # on an existing RayCluster) is refused and requeued forever; with it, one PodGroup `ray-<job>-pg`
    # covers head + workers (minMember = workers + 1), in the queue of the job's `volcano.sh/queue-name` label.
    assert not [r for r in workloads_dev.registrations if r.type.endswith(":RayCluster")]
    for name in RAY_JOBS:
        job = manifest(workloads_dev, "RayJob", name)
        assert "clusterSelector" not in job["spec"]
        assert job["metadata"]["labels"] == {"volcano.sh/queue-name": "llama2-training-queue"}
        cluster = job["spec"]["rayClusterSpec"]
        assert cluster["rayVersion"] == versions.RAY_VERSION
        head = cluster["headGroupSpec"]["template"]["spec"]
        # Heads on the job-support group, which scales from zero (tests/test_job_support_placement.py).
        assert head["nodeSelector"] == {"role": "job-support"}
        assert {p["containerPort"] for p in head["containers"][0]["ports"]} == {6379, 8265, 10001}
    # The data step tokenizes on the CPU, in the entrypoint Ray runs on the head: no Trainium node.
    assert "workerGroupSpecs" not in manifest(workloads_dev, "RayJob", RAY_JOBS[0])["spec"]["rayClusterSpec"]
    for name in RAY_JOBS[1:]:
        (workers,) = manifest(workloads_dev, "RayJob", name)["spec"]["rayClusterSpec"]["workerGroupSpecs"]
        assert workers["replicas"] == workers["minReplicas"] == workers["maxReplicas"] == 2
        worker = workers["template"]["spec"]
        resources = worker["containers"][0]["resources"]
        assert resources["requests"] == {
            "aws.amazon.com/neuron": "16",
            "vpc.amazonaws.com/efa": "16",
            "cpu": "120",
            "memory": "440Gi",
        }
        assert worker["nodeSelector"]["instance-type"] == "trn1n-32xl"
        assert worker["tolerations"][0]["key"] == "aws.amazon.com/neuron"
        assert {m["mountPath"] for m in worker["containers"][0]["volumeMounts"]} == {"/shared", "/dev/shm", "/tmp/ray"}


def kuberay_node_health_path(ray_version: str) -> str:
    """The path KubeRay v1.7.0 probes a Ray node at (common/pod.go supportsUnifiedHealthCheck,
    initLivenessAndReadinessProbe; utils/constant.go): one HTTP endpoint from Ray 2.53.0 on, the
    dashboard agent's raylet check before."""
    if tuple(int(p) for p in ray_version.split(".")) >= (2, 53, 0):
        return "/api/healthz"
    return "/api/local_raylet_healthz"


def test_the_ray_version_is_one_kuberay_supports_and_the_worker_probe_checks_what_kuberay_would(
    workloads_dev: PlanResult,
) -> None:
    """Ray's KubeRay upgrade guide: not Ray 2.11.0-2.37.0 (its dashboard agent hangs once a job is
    created, failing the probes that read it); KubeRay 1.3 and later support Ray 2.38.0 and later. Our
    worker probe replaces KubeRay's, so it reads the endpoint KubeRay would for that version."""
    job = manifest(workloads_dev, "RayJob", "llama2-pretraining-job")
    ray_version = job["spec"]["rayClusterSpec"]["rayVersion"]
    assert tuple(int(p) for p in ray_version.split(".")) >= (2, 38, 0), ray_version
    (workers,) = job["spec"]["rayClusterSpec"]["workerGroupSpecs"]
    probe = " ".join(workers["template"]["spec"]["containers"][0]["livenessProbe"]["exec"]["command"])
    assert f"--health http://localhost:52365{kuberay_node_health_path(ray_version)}" in probe


def test_ray_jobs_run_in_order_and_release_their_nodes(workloads_dev: PlanResult) -> None:
    jobs = [registration(workloads_dev, "RayJob", n) for n in RAY_JOBS]
    gates = [registration(workloads_dev, "Job", f"{n}-gate") for n in RAY_JOBS[:2]]
    # Each step but the last is awaited through its gate (workloads/step_gate.py).
    assert jobs[0].urn in gates[0].dependencies and gates[0].urn in jobs[1].dependencies
    assert jobs[1].urn in gates[1].dependencies and gates[1].urn in jobs[2].dependencies
    # Each step runs one script from the steps' ConfigMap (tests/test_ray_entrypoints.py replays them).
    assert [j.inputs["spec"]["entrypoint"] for j in jobs] == [
        "bash /llama2-steps/data.sh",
        "bash /llama2-steps/precompile.sh",
        "bash /llama2-steps/train.sh",
    ]
    steps = manifest(workloads_dev, "ConfigMap", "ray-llama2-steps")
    assert registration(workloads_dev, "ConfigMap", "ray-llama2-steps").urn in jobs[0].dependencies
    scripts = steps["data"]
    # The data step skips what a finished run left (the marker comes only after get_dataset.py
    # returns); dev's trainSteps (20) ends the train step Succeeded (ray_train_llama2.py
    # --steps_this_run, passed on to the NxD script's own).
    marker = "/shared/examples_datasets/wikicorpus_llama2_tokenized_4k/.staged"
    assert f"if test -f {marker}; then" in scripts["data.sh"]
    assert scripts["data.sh"].endswith(
        'HF_HOME="${HF_HOME:-$HOME/.cache/huggingface}" HOME=/shared python3 get_dataset.py --llama-version 2\n'
        f"touch {marker}\n"
    )
    # dev's trn1n group: 2 nodes of 32 NeuronCores, one Ray Train worker each.
    assert scripts["precompile.sh"].endswith(
        "exec python3 ray_train_llama2.py --num_nodes 2 --neuron_cores_per_node 32 --neuron_parallel_compile\n"
    )
    # The train step runs in its run directory, resuming (tests/test_resilience.py).
    assert re.search(
        r"python3 ray_train_llama2.py --num_nodes 2 --neuron_cores_per_node 32 --steps_this_run 20 "
        r"--output_dir /shared/llama2_output/run-[0-9a-f]{12} ",
        scripts["train.sh"],
    )
    for job in jobs:
        spec = job.inputs["spec"]
        assert spec["submissionMode"] == "K8sJobMode" and "working_dir: /llama2_pretrain" in spec["runtimeEnvYAML"]
        # kuberay v1.7.0 rayjob_controller.go (handleShutdownAfterJobFinishes): once the job is
        # Complete or Failed, its RayCluster is deleted ttlSecondsAfterFinished later, so the
        # Trainium workers go and cluster-autoscaler scales the group back in. utils/validation.go
        # (validateDeletionConfiguration) refuses ttlSecondsAfterFinished > 0 without it.
        assert spec["shutdownAfterJobFinishes"] is True and spec["ttlSecondsAfterFinished"] == 60
    assert [j.inputs["metadata"]["annotations"].get("pulumi.com/skipAwait") for j in jobs] == ["true"] * 3
    # ray-project/kuberay v1.7.0 rayjob_controller.go: the deadline runs from the RayJob's
    # creation, so it must leave room for the cluster to come up from zero Trainium nodes.
    assert [j.inputs["spec"]["activeDeadlineSeconds"] for j in jobs] == [10800, 10800, 3600]
    assert [j.inputs["spec"]["preRunningDeadlineSeconds"] for j in jobs] == [1800] * 3
    assert workloads_dev.outputs["workloads"]["rayLlama2"]["trainEnds"].startswith("Succeeded after 20 steps")


@pytest.mark.parametrize(("kind", "names"), [
    ("Job", ["bert-precompile", "bert-train"]), ("RayJob", RAY_JOBS), ("MPIJob", ["llama2-compile", "llama2-train"]),
])  # fmt: skip
def test_a_changed_job_is_replaced_old_object_first(workloads_all: PlanResult, kind: str, names: list[str]) -> None:
    # volcano-sh/volcano v1.15.1 pkg/webhooks/admission/jobs/validate/admit_job.go (validateJobUpdate) refuses a Job
    # update that changes more than minAvailable, task replicas and priority class; kuberay v1.7.0
    # rayjob_controller.go ("Disregard changes in RayClusterSpec") and a finished RayJob/MPIJob
    # (kubeflow/mpi-operator v0.8.0) never run again when patched. pulumi-kubernetes
    # provider/pkg/provider/provider.go (Diff) compares new inputs with the old inputs only, so an
    # unchanged job has no diff; it sets DeleteBeforeReplace only for its own forced replacements,
    # so a job that keeps its name must ask for it, or the create would collide with the old object.
    # kuberay v1.7.0 volcano_scheduler.go createPodGroup reads the RayJob's queue label only when it
    # creates the PodGroup: a changed label replaces the RayJob too.
    paths = ["spec", "metadata.labels"] if kind == "RayJob" else ["spec"]
    for name in names:
        job = registration(workloads_all, kind, name)
        assert job.lifecycle["replaceOnChanges"] == paths and job.lifecycle["deleteBeforeReplace"] is True


def test_bert_rendezvous_id_is_new_for_every_submission_and_every_restart(workloads_dev: PlanResult) -> None:
    # It names the attempt in torchrun's logs (TORCHELASTIC_RUN_ID). volcano-sh/volcano v1.15.1
    # pkg/controllers/job/job_controller_util.go (createJobPod) annotates each pod with its
    # PodGroup `<job>-<uid>` and `volcano.sh/job-version`, which killJob bumps on every RestartJob.
    for name in ("bert-precompile", "bert-train"):
        for task in manifest(workloads_dev, "Job", name)["spec"]["tasks"]:
            container = task["template"]["spec"]["containers"][0]
            variables = env(container)
            assert variables["VOLCANO_PODGROUP"] == {
                "fieldRef": {"fieldPath": "metadata.annotations['scheduling.k8s.io/group-name']"}
            }
            assert variables["VOLCANO_JOB_VERSION"] == {
                "fieldRef": {"fieldPath": "metadata.annotations['volcano.sh/job-version']"}
            }
            assert "--rdzv_id '$(VOLCANO_PODGROUP)-v$(VOLCANO_JOB_VERSION)'" in container["command"][-1]


# --- Llama-2 on NxD Training / MPI ------------------------------------------------------------


def test_mpi_jobs_put_one_rank_on_each_of_four_nodes(workloads_all: PlanResult) -> None:
    for name, compile_only in (("llama2-compile", True), ("llama2-train", False)):
        spec = manifest(workloads_all, "MPIJob", name)["spec"]
        worker = spec["mpiReplicaSpecs"]["Worker"]
        launcher = spec["mpiReplicaSpecs"]["Launcher"]
        assert worker["replicas"] == 4 and spec["slotsPerWorker"] == 1 and launcher["replicas"] == 1
        assert limits(worker["template"]) == {"aws.amazon.com/neuron": "16", "vpc.amazonaws.com/efa": "8"}
        assert {m["mountPath"] for m in worker["template"]["spec"]["containers"][0]["volumeMounts"]} == {
            "/shared",
            "/dev/shm",
        }
        assert launcher["template"]["spec"]["nodeSelector"] == {"role": "job-support"}
        command = launcher["template"]["spec"]["containers"][0]["command"]
        assert command[command.index("-np") + 1] == "4"
        assert ("COMPILE=1" in command) is compile_only and ("COMPILE=0" in command) is not compile_only
        launcher_env = env(launcher["template"]["spec"]["containers"][0])
        # The data and tokenizer reach the ranks as Hydra overrides (nxd_llama.overrides), not the environment.
        assert "data.tokenizer.type=/shared/llama7b_tokenizer" in command[-1]
        assert "'data.data_prefix=[1.0,/shared/data/redpajama_sample_text_document]'" in command[-1]
        # The compile run logs under its launcher pod's uid; training under its run directory
        # (train_setup.sh: EXPLICIT_LOGDIR=/shared/nemo_experiments/$POD_UID), the same for every restart.
        if compile_only:
            assert launcher_env["POD_UID"] == {"fieldRef": {"fieldPath": "metadata.uid"}}
        else:
            assert re.fullmatch(r"run-[0-9a-f]{12}", launcher_env["POD_UID"])


def test_mpi_jobs_are_gang_scheduled_in_a_volcano_queue_launcher_included(
    workloads_all: PlanResult, workloads_with
) -> None:
    """kubeflow/mpi-operator v0.8.2 pkg/controller/podgroup.go: with --gang-scheduling=volcano the
    operator creates a PodGroup named after the MPIJob, queue = runPolicy.schedulingPolicy.queue,
    minMember = schedulingPolicy.minAvailable, and puts both the launcher and the workers in it
    (decoratePodTemplateSpec, called from newWorker and newLauncherPodTemplate in
    pkg/controller/mpi_job_controller.go). With launcherCreationPolicy AtStartup the launcher Job
    is created with the workers (syncHandler), so it is part of the gang: workers + 1; and its
    activeDeadlineSeconds (newLauncherJob copies runPolicy's) counts from the start, which is the
    MPIJob's only pending timeout under Volcano (VolcanoCtrl.newPodGroup passes no
    scheduleTimeoutSeconds)."""
    for name, deadline in (("llama2-compile", 180), ("llama2-train", 240)):
        spec = manifest(workloads_all, "MPIJob", name)["spec"]
        assert spec["launcherCreationPolicy"] == "AtStartup"
        assert spec["runPolicy"]["schedulingPolicy"] == {
            "queue": "test",
            "minAvailable": spec["mpiReplicaSpecs"]["Worker"]["replicas"] + 1,
        }
        assert spec["runPolicy"]["activeDeadlineSeconds"] == deadline * 60
    two = workloads_with(
        nxdLlama={"nodeGroup": "trn1n-32xl-ng", "nodes": 2, "queue": "llama2-training-queue"}, rayLlama2=None
    )
    policy = manifest(two, "MPIJob", "llama2-train")["spec"]["runPolicy"]["schedulingPolicy"]
    assert policy == {"queue": "llama2-training-queue", "minAvailable": 3}
    # Without Volcano the operator has no --gang-scheduling (infra/components/schedulers.py) and no queue.
    no_volcano = workloads_with(
        cluster=lambda o: o["features"].update(volcano=False), bertPretraining=None, rayLlama2=None,
        nxdLlama={"nodeGroup": "trn1-32xl-ng1", "nodes": 2}, clusterCheck=None,
    )  # fmt: skip
    assert "schedulingPolicy" not in manifest(no_volcano, "MPIJob", "llama2-train")["spec"]["runPolicy"]


def test_mpi_launcher_calls_the_dlcs_open_mpi_on_every_node(workloads_all: PlanResult) -> None:
    # kubeflow/mpi-operator v0.8.2 pkg/controller/mpi_job_controller.go: the launcher runs our
    # command as given, with only hostfile and rsh-args OMPI_MCA_* variables, so mpirun starts
    # orted on each worker over ssh. open-mpi/ompi v4.1.x orte/mca/plm/rsh/plm_rsh_module.c
    # setup_launch: without a prefix the remote command is bare `orted`, found through the ssh
    # session's PATH (not the image's ENV; the DLC also has Ubuntu's openmpi-bin in /usr/bin:
    # aws-neuron/deep-learning-containers 2.30.0 pytorch/training/2.9.0/Dockerfile.neuronx); with
    # --prefix it first sets PATH and LD_LIBRARY_PATH to <prefix>/bin and <prefix>/lib. The DLC
    # builds Open MPI 4.1.5 with the default prefix, /usr/local.
    for name in ("llama2-compile", "llama2-train"):
        launcher = manifest(workloads_all, "MPIJob", name)["spec"]["mpiReplicaSpecs"]["Launcher"]
        command = launcher["template"]["spec"]["containers"][0]["command"]
        # As the namespace's id with its passwd entry (docker/nxd-llama mpi-user), created at start-up, it
        # first waits for every worker's sshd (on the operator's non-root port), then execs mpirun,
        # which no longer needs --allow-run-as-root.
        assert command[0] == pods.MPI_USER
        command = command[1:]
        assert (
            command[:2] == ["bash", "-c"]
            and "ssh -p 2222 -o BatchMode=yes" in command[2]
            and command[2].endswith('exec "$@"\n')
        )
        assert command[4:7] == ["/usr/local/bin/mpirun", "--prefix", "/usr/local"]
        assert "--allow-run-as-root" not in command


def test_mpi_training_follows_compile_which_follows_the_data(workloads_all: PlanResult) -> None:
    secret = registration(workloads_all, "Secret", "hf-token")
    staging = registration(workloads_all, "Job", "stage-redpajama")
    compile_ = registration(workloads_all, "MPIJob", "llama2-compile")
    train = registration(workloads_all, "MPIJob", "llama2-train")
    gate = registration(workloads_all, "Job", "llama2-compile-gate")
    assert staging.urn in compile_.dependencies and compile_.urn in gate.dependencies and gate.urn in train.dependencies
    assert compile_.inputs["metadata"]["annotations"]["pulumi.com/skipAwait"] == "true"
    assert secret.inputs["stringData"] == "[secret]"
    # The run reads the tokenizer from tokenizerPath on FSx (data.tokenizer.type): the training
    # ranks never talk to Hugging Face, so the token stays with the staging job.
    for job in (compile_, train):
        for role in job.inputs["spec"]["mpiReplicaSpecs"].values():
            assert "HF_TOKEN" not in env(role["template"]["spec"]["containers"][0])


# --- TensorBoard and data staging ------------------------------------------------------------


def test_tensorboard_is_cluster_internal_by_default(workloads_dev: PlanResult) -> None:
    services = [r.inputs for r in workloads_dev.of_type("kubernetes:core/v1:Service")]
    assert [s["spec"]["type"] for s in services] == ["ClusterIP"]
    deployment = manifest(workloads_dev, "Deployment", "tensorboard")
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    # The run directories only (BERT's /data/output = /shared/output here, NxD Training's, Ray's), not
    # the whole volume with its datasets and compile cache; tensorboard 2.18.0
    # tensorboard/plugins/core/core_plugin.py: --logdir_spec "name:path,...".
    assert container["command"][:3] == [
        "tensorboard",
        "--logdir_spec",
        "output:/shared/output,nemo_experiments:/shared/nemo_experiments,llama2_output:/shared/llama2_output",
    ]
    assert container["volumeMounts"][0] == {"name": "fsx", "mountPath": "/shared", "readOnly": True}


TENSORBOARD_CERTIFICATE = "arn:aws:acm:us-west-2:123456789012:certificate/12345678-1234-1234-1234-123456789012"


def test_tensorboard_load_balancer_only_behind_a_password_over_tls_and_listed_ranges(workloads_with) -> None:
    workloads_prod = workloads_with(
        tensorboard={"loadBalancer": {"allowedCidrs": ["10.0.0.0/8"], "certificateArn": TENSORBOARD_CERTIFICATE}}
    )
    public = manifest(workloads_prod, "Service", "tensorboard-public")
    assert public["spec"]["type"] == "LoadBalancer"
    assert public["spec"]["loadBalancerSourceRanges"] == ["10.0.0.0/8"]
    # The password crosses the network only inside TLS, internal load balancer or not.
    assert public["spec"]["ports"] == [{"name": "https", "port": 443, "targetPort": "proxy"}]
    annotations = public["metadata"]["annotations"]
    assert annotations["service.beta.kubernetes.io/aws-load-balancer-internal"] == "true"
    assert annotations["service.beta.kubernetes.io/aws-load-balancer-ssl-cert"] == TENSORBOARD_CERTIFICATE
    containers = manifest(workloads_prod, "Deployment", "tensorboard")["spec"]["template"]["spec"]["containers"]
    assert [c["name"] for c in containers] == ["tensorboard", "auth-proxy"]
    # Nothing reaches TensorBoard but through the proxy: it listens on the pod's loopback, and
    # the ClusterIP Service points at the proxy too.
    command = containers[0]["command"]
    assert command[command.index("--host") + 1] == "127.0.0.1"
    assert containers[0]["readinessProbe"] == {
        "exec": {"command": ["curl", "-fsS", "-o", "/dev/null", "http://127.0.0.1:6006/"]}
    }
    assert manifest(workloads_prod, "Service", "tensorboard")["spec"]["ports"][0]["targetPort"] == "proxy"
    assert manifest(workloads_prod, "Secret", "tensorboard-proxy")["stringData"] == "[secret]"
    assert workloads_prod.outputs["workloads"]["tensorboard"]["loadBalancer"] is True


def test_prod_tensorboard_is_reached_by_port_forward_until_it_has_a_certificate(workloads_prod: PlanResult) -> None:
    assert not [
        r for r in workloads_prod.registrations if r.inputs.get("metadata", {}).get("name") == "tensorboard-public"
    ]
    containers = manifest(workloads_prod, "Deployment", "tensorboard")["spec"]["template"]["spec"]["containers"]
    assert [c["name"] for c in containers] == ["tensorboard"]
    assert workloads_prod.outputs["workloads"]["tensorboard"]["loadBalancer"] is False


def test_wikicorpus_staging_downloads_once_from_the_public_bucket(workloads_dev: PlanResult) -> None:
    job = manifest(workloads_dev, "Job", "stage-wikicorpus")
    script = job["spec"]["template"]["spec"]["containers"][0]["command"][2]
    uri = "s3://neuron-s3/training_datasets/bert_pretrain_wikicorpus_tokenized_hdf5/bert_pretrain_wikicorpus_tokenized_hdf5_seqlen128.tar"
    assert f"aws s3 cp {uri} . --no-sign-request --region us-east-1" in script
    assert script.index(".staged ]; then") < script.index("aws s3 cp")
    # pulumi-kubernetes' built-in Job awaiter (provider/pkg/await/job.go, v4.32.0) fails `up` at
    # once on a Failed Job; a pulumi.com/waitFor annotation would replace it and only time out.
    assert job["metadata"]["annotations"] == {"pulumi.com/timeoutSeconds": "14400"}
    assert "ttlSecondsAfterFinished" not in job["spec"]


def test_cmd_shell_pod_mounts_fsx_where_both_seeds_expect_it(workloads_dev: PlanResult) -> None:
    pod = manifest(workloads_dev, "Pod", "cmd-shell")
    mounts = {m["mountPath"] for m in pod["spec"]["containers"][0]["volumeMounts"]}
    assert mounts == {"/data", "/shared"} and pod["spec"]["containers"][0]["image"].endswith(
        f"/cmd-shell:{versions.STAGING_IMAGE_TAG}"
    )


# --- every custom object against its pinned CRD ----------------------------------------------


@pytest.mark.parametrize("stack", ["workloads_dev", "workloads_prod"])
def test_custom_objects_use_only_fields_their_crds_define(stack: str, request: pytest.FixtureRequest) -> None:
    result: PlanResult = request.getfixturevalue(stack)
    objects = [r.inputs for r in result.registrations if (r.inputs.get("apiVersion"), r.inputs.get("kind")) in FILES]
    assert objects
    assert {o["metadata"]["name"]: undefined_fields(o) for o in objects} == {o["metadata"]["name"]: [] for o in objects}


def test_the_field_check_catches_a_misspelled_field(workloads_all: PlanResult) -> None:
    job = manifest(workloads_all, "MPIJob", "llama2-train")
    bad = {**job, "spec": {**job["spec"], "slotPerWorker": 1}}
    assert undefined_fields(bad) == ["spec.slotPerWorker"]


def test_only_the_kubeconfig_stays_secret_though_the_cluster_map_holds_it(dev: PlanResult) -> None:
    # The engine sends the referenced stack's outputs as one map, the kubeconfig a secret value in
    # it, and lists that name in secretOutputNames. The workload program reads each output by name
    # (StackReference.get_output, pulumi 3.272.0 sdk/python/lib/pulumi/stack_reference.py: secret
    # when the name is listed), so the provider's kubeconfig is secret and the `workloads` export
    # built from the other outputs is not, as a whole-map read would make it.
    from pulumi.runtime import rpc

    from offline.plan.mocks import StackOutputs
    from offline.plan.runner import run_program, stack_config
    from tests.conftest import HF_TOKEN_KEY, STAND_IN_TOKEN, WORKLOADS_DIR

    # The wire form of a secret value (pulumi/runtime/rpc.py), as the engine sends it inside the map.
    wire_secret = {rpc._special_sig_key: rpc._special_secret_sig, "value": dev.outputs["kubeconfig"]}  # noqa: SLF001
    config = stack_config(WORKLOADS_DIR, "dev")
    reference = StackOutputs({**dev.outputs, "kubeconfig": wire_secret}, frozenset({"kubeconfig"}))
    result = run_program(
        WORKLOADS_DIR,
        "dev",
        config,
        secrets={HF_TOKEN_KEY: STAND_IN_TOKEN},
        stack_references={config["trainium-workloads:clusterStack"]: reference},
    )
    provider = next(r for r in result.registrations if r.type == "pulumi:providers:kubernetes")
    assert provider.inputs["kubeconfig"] == "[secret]"
    assert result.secret_outputs == set()
    assert result.outputs["workloads"]["bertPretraining"] == ["bert-precompile", "bert-train"]


def test_prod_s_nxd_run_says_how_long_a_step_its_deadline_allows() -> None:
    # megatron_llama_7B_config.yaml (neuronx-distributed-training 9169aa0) trains 20000 steps unless
    # trainer.max_steps is overridden; a run its deadline ends fails the MPIJob and is not retried
    # (workloads/checks.py workload_warnings).
    from offline.plan.runner import stack_config
    from tests.conftest import HF_TOKEN_KEY, STAND_IN_TOKEN, WORKLOADS_DIR
    from workloads import checks
    from workloads.settings import parse_workloads_config

    values = {**stack_config(WORKLOADS_DIR, "prod"), HF_TOKEN_KEY: STAND_IN_TOKEN}
    # Prod leaves the deadline unset: the goodput model derives it from those steps, so nothing to say.
    assert checks.workload_warnings(parse_workloads_config(values)) == []
    deadline = json.loads(values["trainium-workloads:nxdLlama"]) | {"trainDeadlineMinutes": 4320}
    values["trainium-workloads:nxdLlama"] = json.dumps(deadline)
    [warning] = checks.workload_warnings(parse_workloads_config(values))
    assert "runs the config's 20000 steps" in warning
    assert "trainDeadlineMinutes 4320 allows 13.0 s per step" in warning and "not retried" in warning
    bounded = json.loads(values["trainium-workloads:nxdLlama"]) | {"trainIters": 100}
    values["trainium-workloads:nxdLlama"] = json.dumps(bounded)
    assert checks.workload_warnings(parse_workloads_config(values)) == []
