"""Workload settings refused before any Kubernetes object is declared, with messages that
name the key, the value and what the cluster offers."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from infra.config.errors import ConfigError
from offline.plan.runner import PlanResult
from tests.conftest import ALL_ON

NXD_ON = {"nxdLlama": ALL_ON["nxdLlama"]}

KUBERNETES_OBJECTS = "kubernetes:"


def refusal(run: Callable[..., PlanResult], **kwargs: Any) -> list[str]:
    with pytest.raises(ConfigError) as info:
        run(**kwargs)
    return info.value.problems


def set_feature(name: str, value: bool) -> Callable[[dict], None]:
    return lambda outputs: outputs["features"].__setitem__(name, value)


def test_a_node_group_the_cluster_does_not_have(workloads_with) -> None:
    problems = refusal(workloads_with, bertPretraining={"nodeGroup": "trn9-ng", "nodes": 2})
    assert problems == [
        "trainium-workloads:bertPretraining.nodeGroup = 'trn9-ng': the cluster stack has no such accelerator node "
        "group; it has: trn1-32xl-ng1, trn1n-32xl-ng"
    ]


def test_a_group_whose_devices_dra_allocates(workloads_with) -> None:
    # No device plugin runs on such a group's nodes (docs/dra.md): the jobs' aws.amazon.com/neuron requests never fit.
    def dra(outputs: dict) -> None:
        outputs["acceleratorNodeGroups"][0]["resourceClaimTemplate"] = "trn1-32xl-ng1-whole-node"

    problems = refusal(workloads_with, cluster=dra)
    assert any(
        p.startswith(
            "trainium-workloads:bertPretraining.nodeGroup = 'trn1-32xl-ng1': the cluster allocates that group's Neuron "
            "devices by DRA claims (its ResourceClaimTemplate 'trn1-32xl-ng1-whole-node')"
        )
        for p in problems
    )


def test_more_nodes_than_the_group_can_hold(workloads_with) -> None:
    problems = refusal(workloads_with, nxdLlama={"nodeGroup": "trn1-32xl-ng1", "nodes": 8})
    assert any(
        p.startswith("trainium-workloads:nxdLlama.nodes = 8: more than node group 'trn1-32xl-ng1' can hold (maxSize 4)")
        for p in problems
    )
    (problem,) = refusal(workloads_with, rayLlama2={"nodeGroup": "trn1n-32xl-ng", "workers": 3})
    assert problem.startswith(
        "trainium-workloads:rayLlama2.workers = 3: more than node group 'trn1n-32xl-ng' can hold (maxSize 2)"
    )


def test_a_group_without_efa(workloads_with) -> None:
    def no_efa(outputs: dict) -> None:
        outputs["acceleratorNodeGroups"][0].update(
            instanceType="trn1.2xlarge", efaInterfaces=0, neuronDevices=1, neuronCores=2
        )

    problems = refusal(workloads_with, cluster=no_efa, **NXD_ON)
    assert any(
        p.startswith("trainium-workloads:bertPretraining.nodeGroup = 'trn1-32xl-ng1': trn1.2xlarge nodes have no EFA")
        for p in problems
    )
    assert any(
        p.startswith("trainium-workloads:nxdLlama.nodeGroup = 'trn1-32xl-ng1': trn1.2xlarge nodes have no EFA")
        for p in problems
    )


@pytest.mark.parametrize(
    ("feature", "workload"),
    [
        ("mpiOperator", "nxdLlama"),
        ("volcano", "bertPretraining"),
        ("kuberay", "rayLlama2"),
    ],
)
def test_a_workload_whose_software_the_cluster_has_off(workloads_with, feature: str, workload: str) -> None:
    problems = refusal(workloads_with, cluster=set_feature(feature, False), **NXD_ON)
    assert any(
        p.startswith(f"trainium-workloads:{workload}: needs {feature}") and "the cluster stack has off" in p
        for p in problems
    )


def test_the_hugging_face_token_is_required_only_to_download_the_tokenizer(workloads_with) -> None:
    # NxD Training loads the tokenizer from tokenizerPath (data.tokenizer.type), a directory on FSx
    # the RedPajama staging job fills: the training run needs no token.
    (problem,) = refusal(workloads_with, hfToken=None, dataStaging=ALL_ON["dataStaging"])
    assert problem.startswith("trainium-workloads:hfToken: required by dataStaging.redpajama (")
    assert "pulumi config set --secret hfToken" in problem
    nxd_only = workloads_with(hfToken=None, dataStaging={"wikicorpus": True, "redpajama": False})
    assert not [
        r for r in nxd_only.registrations if r.type == "kubernetes:core/v1:Secret" and r.name == "secret-hf-token"
    ]


def test_an_empty_hugging_face_token_is_refused_with_its_key(workloads_with) -> None:
    problems = refusal(workloads_with, hfToken="")
    assert problems == ["trainium-workloads:hfToken = [secret]: String should have at least 1 character"]


def test_a_queue_the_cluster_does_not_have(workloads_with) -> None:
    (problem,) = refusal(workloads_with, bertPretraining={"nodeGroup": "trn1-32xl-ng1", "queue": "fast"})
    assert (
        problem
        == "trainium-workloads:bertPretraining.queue = 'fast': no such Volcano queue in the cluster stack; it has: test, llama2-training-queue"
    )


def test_an_nxd_queue_the_cluster_does_not_have(workloads_with) -> None:
    # The MPIJobs' runPolicy.schedulingPolicy.queue becomes their PodGroup's queue
    # (kubeflow/mpi-operator v0.8.0 pkg/controller/podgroup.go newPodGroup); Volcano leaves a
    # PodGroup in a queue that does not exist unscheduled, so the name is checked up front.
    (problem,) = refusal(workloads_with, nxdLlama={"nodeGroup": "trn1-32xl-ng1", "queue": "fast"})
    assert (
        problem
        == "trainium-workloads:nxdLlama.queue = 'fast': no such Volcano queue in the cluster stack; it has: test, llama2-training-queue"
    )
    (problem,) = refusal(workloads_with, nxdLlama={"nodeGroup": "trn1-32xl-ng1", "queue": ""})
    assert problem == "trainium-workloads:nxdLlama.queue = '': String should have at least 1 character"
    (problem,) = refusal(workloads_with, nxdLlama={"nodeGroup": "trn1-32xl-ng1", "queue": 7})
    assert problem.startswith("trainium-workloads:nxdLlama.queue = 7: ")


def test_a_namespace_the_cluster_did_not_prepare(workloads_with) -> None:
    (problem,) = refusal(workloads_with, namespace="research")
    assert problem.startswith(
        "trainium-workloads:namespace = 'research': the cluster stack prepared no such training namespace; it has: default"
    )


def test_ray_steps_out_of_order_and_trn2_workers(workloads_with) -> None:
    (problem,) = refusal(workloads_with, rayLlama2={"nodeGroup": "trn1n-32xl-ng", "steps": ["train", "precompile"]})
    assert problem.startswith(
        "trainium-workloads:rayLlama2.steps = ['train', 'precompile']: list each step once, in the order"
    )

    def trn2(outputs: dict) -> None:
        outputs["acceleratorNodeGroups"][1].update(instanceType="trn2.48xlarge", neuronCores=64)

    (problem,) = refusal(workloads_with, cluster=trn2)
    assert "ray_train_llama2.py runs 32 workers per node" in problem and "have 64" in problem


@pytest.mark.parametrize("cidrs", [[], ["0.0.0.0/0"], ["not-a-cidr"]])
def test_tensorboard_is_never_opened_to_everyone(workloads_with, cidrs: list[str]) -> None:
    certificate = "arn:aws:acm:us-west-2:123456789012:certificate/12345678-1234-1234-1234-123456789012"
    (problem,) = refusal(
        workloads_with, tensorboard={"loadBalancer": {"allowedCidrs": cidrs, "certificateArn": certificate}}
    )
    assert problem.startswith("trainium-workloads:tensorboard.loadBalancer.allowedCidrs")


def test_shape_errors_name_the_key(workloads_with) -> None:
    problems = refusal(workloads_with, bertPretraining={"nodeGroup": "trn1-32xl-ng1", "nodes": 0, "batchSise": 8})
    assert "trainium-workloads:bertPretraining.nodes = 0: Input should be greater than or equal to 1" in problems
    assert any(p.startswith("trainium-workloads:bertPretraining.batchSise: unknown key") for p in problems)
    (problem,) = refusal(workloads_with, clusterStack="dev")
    assert problem.startswith("trainium-workloads:clusterStack = 'dev': String should match pattern")


def test_a_cluster_stack_without_the_outputs(workloads_with) -> None:
    (problem,) = refusal(workloads_with, cluster=lambda outputs: outputs.pop("volcanoQueues"))
    assert "the cluster stack has no output volcanoQueues" in problem


def test_switching_every_workload_off_declares_no_objects(workloads_with) -> None:
    off = {"enabled": False}
    result = workloads_with(
        bertPretraining={"nodeGroup": "x", **off}, rayLlama2={"nodeGroup": "x", **off},
        nxdLlama={"nodeGroup": "x", **off}, tensorboard=off, dataStaging=off, hfToken=None,
        clusterCheck={"nodeGroup": "x", **off},
    )  # fmt: skip
    assert not [r for r in result.registrations if r.type.startswith(KUBERNETES_OBJECTS)]
    assert result.outputs["workloads"] == {}


def test_nxd_needs_32_neuroncores_per_node(workloads_with) -> None:
    # neuronx-distributed-training (NXDT_EXAMPLES_COMMIT) megatron_llama_7B_config.yaml trainer.devices
    # 32, which train.sh starts per node, one per trn1 NeuronCore; a trn2 node (64 logical cores)
    # would be half used with a wrong world size.
    def trn2(outputs: dict) -> None:
        outputs["acceleratorNodeGroups"][0].update(instanceType="trn2.48xlarge", neuronCores=64)

    problems = refusal(workloads_with, cluster=trn2, **NXD_ON)
    assert any(
        p.startswith(
            "trainium-workloads:nxdLlama.nodeGroup = 'trn1-32xl-ng1': NxD Training's "
            "megatron_llama_7B_config.yaml starts 32 processes per node"
        )
        and "have 64" in p
        for p in problems
    )


def test_nxd_node_count_must_divide_the_global_batch(workloads_with) -> None:
    # megatron_llama_7B_config.yaml: global_batch_size 1024, micro_batch_size 1, tensor parallel 8,
    # pipeline 1; 32 ranks per node -> 4 x nodes data-parallel ranks, and the batch must divide by
    # micro batch x data parallel: 3 nodes (DP 12) cannot.
    (problem,) = refusal(workloads_with, nxdLlama={"nodeGroup": "trn1-32xl-ng1", "nodes": 3})
    assert problem.startswith("trainium-workloads:nxdLlama.nodes = 3: the config's global batch of 1024 must divide")
    assert problem.endswith("use 1, 2, 4, 8, 16, 32, 64 nodes")


def test_ray_gang_larger_than_its_queue_capability(workloads_with) -> None:
    # volcano-sh/volcano v1.15.1 pkg/scheduler/plugins/proportion/proportion.go: allocation stops at the
    # queue's capability; kuberay v1.7.0 volcano_scheduler.go puts head + workers + the submitter
    # (500m/200Mi, common/job.go) in the PodGroup's minResources. 3 x 500Gi + 30Gi > 1500Gi.
    def roomy(outputs: dict) -> None:
        outputs["acceleratorNodeGroups"][1]["maxSize"] = 4

    (problem,) = refusal(
        workloads_with, cluster=roomy, rayLlama2={"nodeGroup": "trn1n-32xl-ng", "workers": 3, "workerMemory": "500Gi"}
    )
    assert problem.startswith(
        "trainium-workloads:rayLlama2.workers = 3: the job's pods together ask for more than "
        "Volcano queue 'llama2-training-queue' allows (memory 1530.1953125Gi > 1500Gi)"
    )
    # The seed's 440Gi workers: 4 of them do not fit either, 3 do.
    (problem,) = refusal(workloads_with, cluster=roomy, rayLlama2={"nodeGroup": "trn1n-32xl-ng", "workers": 4})
    assert "memory 1790.1953125Gi > 1500Gi" in problem
    workloads_with(cluster=roomy, rayLlama2={"nodeGroup": "trn1n-32xl-ng", "workers": 3})


@pytest.mark.parametrize(("setting", "key"), [
    ({"bertPretraining": {"nodeGroup": "trn1-32xl-ng1", "dataDir": "/tmp/wiki"}}, "bertPretraining.dataDir = '/tmp/wiki'"),
    ({"bertPretraining": {"nodeGroup": "trn1-32xl-ng1", "outputDir": "/data/../out"}}, "bertPretraining.outputDir = '/data/../out'"),
    ({"nxdLlama": {"nodeGroup": "trn1-32xl-ng1", "tokenizerPath": "llama7b_tokenizer"}}, "nxdLlama.tokenizerPath = 'llama7b_tokenizer'"),
    ({"nxdLlama": {"nodeGroup": "trn1-32xl-ng1", "datasetPath": "/sharedx/data"}}, "nxdLlama.datasetPath = '/sharedx/data'"),
    ({"tensorboard": {"logDirs": ["/shared/output", "/data/output"]}}, "tensorboard.logDirs = '/data/output'"),
])  # fmt: skip
def test_paths_outside_the_mount_the_job_reads(workloads_with, setting: dict, key: str) -> None:
    (problem,) = refusal(workloads_with, **setting)
    assert problem.startswith(f"trainium-workloads:{key}: not on the FSx volume")


def test_fp32_with_the_bf16_batch_size(workloads_with) -> None:
    # aws-neuron-samples (BERT_SAMPLES_COMMIT) run_dp_bert_large_hf_pretrain_bf16_s128.sh: bf16 runs
    # batch 16 x 32 micro-steps, full fp32 (--enable_fp32) 8 x 64.
    (problem,) = refusal(workloads_with, bertPretraining={"nodeGroup": "trn1-32xl-ng1", "bf16": False, "batchSize": 16})
    assert problem.startswith("trainium-workloads:bertPretraining.batchSize = 16: with bf16: false")
    result = workloads_with(bertPretraining={"nodeGroup": "trn1-32xl-ng1", "bf16": False})
    job = next(r.inputs for r in result.registrations if r.inputs.get("metadata", {}).get("name") == "bert-train")
    assert (
        "--batch_size 8 --grad_accum_usteps 64"
        in job["spec"]["tasks"][0]["template"]["spec"]["containers"][0]["command"][-1]
    )


@pytest.mark.parametrize(("field", "value"), [("workerMemory", "440GB"), ("headCpu", "six"), ("headMemory", "1.5.0Gi")])
def test_kubernetes_quantities_the_api_server_would_refuse(workloads_with, field: str, value: str) -> None:
    # k8s.io/apimachinery pkg/api/resource/quantity.go: "GB" is no suffix (G or Gi are).
    (problem,) = refusal(workloads_with, rayLlama2={"nodeGroup": "trn1n-32xl-ng", field: value})
    assert (
        problem
        == f"trainium-workloads:rayLlama2.{field} = {value!r}: not a Kubernetes quantity such as 120, 500m, 440Gi or 30G"
    )


def test_an_empty_setting_is_refused_with_its_key(workloads_with) -> None:
    # Every config model refuses "" (infra/config/base.py, str_min_length) before any rule runs.
    (problem,) = refusal(workloads_with, rayLlama2={"nodeGroup": "trn1n-32xl-ng", "headMemory": ""})
    assert problem == "trainium-workloads:rayLlama2.headMemory = '': String should have at least 1 character"


def test_the_workload_stacks_profile_scopes_its_kubernetes_access(dev, monkeypatch) -> None:
    # The cluster stack exports a kubeconfig bound to no profile (infra/components/kube.py kubeconfig_for);
    # without this stack's aws:profile, `aws eks get-token` would use the default chain.
    import infra.components.kube
    from infra.config.base import PROFILE_KEY
    from offline.plan.mocks import StackOutputs
    from offline.plan.runner import run_program, stack_config
    from tests.conftest import HF_TOKEN_KEY, STAND_IN_TOKEN, WORKLOADS_DIR
    from workloads.settings import parse_workloads_config

    seen: list = []
    original = infra.components.kube.kubeconfig_for
    monkeypatch.setattr(
        infra.components.kube, "kubeconfig_for", lambda kc, profile: seen.append(profile) or original(kc, profile)
    )
    config = {**stack_config(WORKLOADS_DIR, "dev"), PROFILE_KEY: "research"}
    references = {config["trainium-workloads:clusterStack"]: StackOutputs(dev.outputs, frozenset(dev.secret_outputs))}
    run_program(WORKLOADS_DIR, "dev", config, stack_references=references, secrets={HF_TOKEN_KEY: STAND_IN_TOKEN})
    assert seen == ["research"]
    with pytest.raises(ConfigError) as err:
        parse_workloads_config({"trainium-workloads:clusterStack": "organization/trainium-eks/dev", PROFILE_KEY: "a b"})
    assert "aws:profile = 'a b'" in str(err.value)


def test_settings_a_webhook_or_controller_would_turn_against_us(workloads_with) -> None:
    # volcano v1.15.1 pkg/webhooks/admission/jobs/mutate/mutate_job.go: maxRetry 0 becomes 3,
    # so the live job never matches and every `pulumi up` would replace a running job.
    (problem,) = refusal(workloads_with, bertPretraining={"nodeGroup": "trn1-32xl-ng1", "maxRetry": 0})
    assert problem.startswith(
        "trainium-workloads:bertPretraining.maxRetry = 0: Input should be greater than or equal to 1"
    )
    # kuberay v1.7.0 rayjob_controller.go: activeDeadlineSeconds counts cluster start-up.
    (problem,) = refusal(workloads_with, rayLlama2={"nodeGroup": "trn1n-32xl-ng", "trainDeadlineSeconds": 600})
    assert problem.startswith(
        "trainium-workloads:rayLlama2.trainDeadlineSeconds = 600: Input should be greater than or equal to 1200"
    )


def test_numbers_no_api_here_could_take(workloads_with) -> None:
    # volcano v1.15.1 batch.volcano.sh_jobs.yaml: spec.maxRetry is int32; kuberay v1.7.0
    # ray.io_rayjobs.yaml: spec.activeDeadlineSeconds is int32. Larger values would pass our
    # lower bounds and be refused by the API server only after the earlier steps had run.
    (problem,) = refusal(workloads_with, bertPretraining={"nodeGroup": "trn1-32xl-ng1", "maxRetry": 10**12})
    assert problem == (
        "trainium-workloads:bertPretraining.maxRetry = 1000000000000: at most 2147483647 "
        "(the APIs these settings reach take 32-bit integers)"
    )
    (problem,) = refusal(workloads_with, rayLlama2={"nodeGroup": "trn1n-32xl-ng", "trainDeadlineSeconds": 3 * 10**9})
    assert problem.startswith("trainium-workloads:rayLlama2.trainDeadlineSeconds = 3000000000: at most 2147483647")
    # A floor of infinity can never be met: every healthy cluster would fail its check.
    problems = refusal(workloads_with, clusterCheck={"nodeGroup": "trn1-32xl-ng1", "busBandwidthFloorGBps": "inf"})
    assert any(
        p.startswith("trainium-workloads:clusterCheck.busBandwidthFloorGBps = 'inf': Input should be a finite number")
        for p in problems
    ), problems


def test_odd_values_a_reviewer_tried(workloads_with) -> None:
    (problem,) = refusal(workloads_with, bertPretraining={"nodeGroup": "trn1-32xl-ng1", "nodes": True})
    assert problem.startswith("trainium-workloads:bertPretraining.nodes = True: a number, not true/false")
    (problem,) = refusal(workloads_with, hfToken="   ")
    # A refusal never repeats a secret.
    assert problem == "trainium-workloads:hfToken = [secret]: only whitespace; give a value or leave the key out"
    problems = refusal(workloads_with, nxdLlama={"nodeGroup": "trn1-32xl-ng1", "compile": False, "train": False})
    assert any("nxdLlama.compile = false and train = false: the workload is on but runs nothing" in p for p in problems)


def test_the_neuronx_nemo_megatron_key_is_refused_by_name_with_its_replacement(workloads_with) -> None:
    # A stack file written for the NeMo job: its key is refused as replaced, not as a misspelling, and
    # the refusal names the key that takes its settings.
    (problem,) = refusal(workloads_with, nemoLlama2={"nodeGroup": "trn1-32xl-ng1", "nodes": 4})
    assert problem.startswith("trainium-workloads:nemoLlama2: no longer a workload: ")
    assert "rename the key to nxdLlama" in problem and "unknown key" not in problem


def test_the_renamed_llama_component_keeps_its_objects_identity(workloads_prod) -> None:
    """The MPIJobs and the gate Job keep their Kubernetes names across the NeMo -> NxD rename. Under a new
    URN the engine would create them before deleting the old ones, and pulumi-kubernetes 4.34.2 refuses
    to create an object that exists (provider.py, upsertExistingObjects off): the component carries its
    earlier type and name as an alias, so the engine matches its children to the state's."""
    (component,) = [r for r in workloads_prod.registrations if r.type == "trainium:workloads:NxdLlama"]
    assert component.lifecycle["aliases"] == [
        {"spec": {"name": "nemo-llama2", "type": "trainium:workloads:NemoLlama2", "parentUrn": ""}}
    ]
    kept = {r.name for r in workloads_prod.registrations if r.parent == component.urn}
    assert {"mpijob-llama2-compile", "mpijob-llama2-train", "job-llama2-compile-gate"} <= kept
