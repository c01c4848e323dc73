"""Jobs' CPU pods go to the job-support group the cluster exports (idle at zero), the
always-on services to the system nodes; nothing is hard-coded in the workload stack."""

from __future__ import annotations

from typing import Any

from offline.plan.runner import PlanResult
from tests.test_workloads import manifest

JOB_SUPPORT = {"role": "job-support"}
TOLERATION = {"key": "job-support", "operator": "Equal", "value": "true", "effect": "NoSchedule"}


def placed_on_job_support(spec: dict[str, Any]) -> bool:
    return spec["nodeSelector"] == JOB_SUPPORT and TOLERATION in spec["tolerations"]


def test_job_cpu_pods_go_to_the_job_support_group(workloads_all: PlanResult) -> None:
    for name in ("stage-wikicorpus", "stage-redpajama"):
        assert placed_on_job_support(manifest(workloads_all, "Job", name)["spec"]["template"]["spec"])
    for name in ("llama2-compile", "llama2-train"):
        launcher = manifest(workloads_all, "MPIJob", name)["spec"]["mpiReplicaSpecs"]["Launcher"]
        assert placed_on_job_support(launcher["template"]["spec"])
    for name in ("llama2-generate-pretraining-test-data", "llama2-precompilation-job", "llama2-pretraining-job"):
        spec = manifest(workloads_all, "RayJob", name)["spec"]
        assert placed_on_job_support(spec["rayClusterSpec"]["headGroupSpec"]["template"]["spec"])
        # KubeRay uses a given submitter template as is, filling only command and env
        # (ray-project/kuberay v1.7.0 rayjob_controller.go configureSubmitterContainer): without an
        # image the submitter Job could not start.
        submitter = spec["submitterPodTemplate"]["spec"]
        assert placed_on_job_support(submitter) and submitter["restartPolicy"] == "Never"
        assert (
            submitter["containers"][0]["image"]
            == spec["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["image"]
        )


def test_always_on_pods_stay_on_system_nodes(workloads_dev: PlanResult) -> None:
    # A pod that never ends would keep a job-support node (and its $0.77/h) up for good.
    tensorboard = manifest(workloads_dev, "Deployment", "tensorboard")["spec"]["template"]["spec"]
    shell = manifest(workloads_dev, "Pod", "cmd-shell")["spec"]
    for spec in (tensorboard, shell):
        assert spec["nodeSelector"] == {"role": "core"} and "tolerations" not in spec
    # What infra/specs/system_capacity.py counts for it on the system nodes.
    assert shell["containers"][0]["resources"]["requests"] == {"cpu": "250m", "memory": "512Mi"}


def test_placement_follows_the_cluster_outputs(workloads_with) -> None:
    def elsewhere(outputs: dict[str, Any]) -> None:
        outputs["jobSupportPlacement"] = {
            "nodeSelector": {"pool": "cpu-jobs"},
            "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "jobs", "effect": "NoSchedule"}],
        }

    result = workloads_with(cluster=elsewhere)
    spec = manifest(result, "Job", "stage-wikicorpus")["spec"]["template"]["spec"]
    assert spec["nodeSelector"] == {"pool": "cpu-jobs"} and spec["tolerations"][0]["key"] == "dedicated"
