"""The workload stacks: training jobs on the cluster the cluster stack built.

Reads the cluster stack through a StackReference, checks every workload setting against
what that cluster offers, and only then declares the Kubernetes objects. Which workloads
run, and how big, is the stack file's business (see docs/workloads.md).
"""

# Config helpers, instance facts and version pins come from the repository's package
# (pyproject.toml), installed into the virtualenv this project shares with the cluster's.
import pulumi
import pulumi_kubernetes as k8s

from infra.config.errors import ConfigError
from infra.components.kube import kubeconfig_for
from infra.config.load import engine_config
from workloads import checks, contract
from workloads.bert import BertPretraining, BertPretrainingArgs
from workloads.cluster_check import CheckLayout, ClusterCheck, ClusterCheckArgs, summary
from workloads.data_staging import DataStaging, DataStagingArgs, StagingLayout
from workloads.nemo_llama2 import HuggingFaceToken, HuggingFaceTokenArgs, NemoLayout, NemoLlama2, NemoLlama2Args
from workloads.ray_llama2 import RayLayout, RayLlama2, RayLlama2Args
from workloads.settings import WorkloadsConfig, parse_workloads_config
from workloads.tensorboard_viewer import TensorBoard, TensorBoardArgs, TensorBoardLayout

config = parse_workloads_config(engine_config())
cluster_stack = pulumi.StackReference("cluster", stack_name=config.cluster_stack)
# The cluster exports a kubeconfig bound to no profile; this stack's own aws:profile is added.
kubeconfig = cluster_stack.get_output("kubeconfig").apply(lambda kc: kubeconfig_for(kc, config.profile) if kc else kc)


def wire(outputs: dict) -> dict:
    """Check the settings against the cluster's outputs, then declare every workload."""
    missing = contract.missing_outputs(outputs)
    if missing and contract.never_deployed(outputs) and pulumi.runtime.is_dry_run():
        # First day: this stack is previewed (pull requests, the prod preview before approval)
        # before its cluster's first `up`. Declaring nothing keeps that preview green and says
        # what it waits for; `pulumi up` still refuses below, as it must.
        pulumi.log.warn(f"{config.cluster_stack} has not been deployed yet: this preview declares no workload; "
                        "its first `pulumi up` there comes first")
        return {"waitingFor": config.cluster_stack}
    if missing:
        raise ConfigError(
            [f"{config.cluster_stack}: the cluster stack has no output {', '.join(missing)}; run `pulumi up` there first"],
            source="cluster stack reference",
        )
    cluster = contract.parse_contract(outputs)
    problems = checks.workload_problems(config, cluster)
    if problems:
        raise ConfigError(problems, source="workload configuration")
    return declare_workloads(config, cluster)


def declare_workloads(config: WorkloadsConfig, cluster: contract.ClusterContract) -> dict:
    provider = k8s.Provider("cluster", kubeconfig=kubeconfig, enable_server_side_apply=True)
    opts = pulumi.ResourceOptions(provider=provider)
    ns, claim = config.namespace, cluster.claims.get(config.namespace, "")

    def image(repository: str, settings) -> str:
        return f"{cluster.repositories[repository]}:{settings.image_tag}"

    common = dict(namespace=ns, claim=claim, support_placement=cluster.support_placement)
    declared: dict = {}
    secrets = []
    if config.hf_token:
        secrets = [HuggingFaceToken("hf-token", HuggingFaceTokenArgs(ns, pulumi.Output.secret(config.hf_token)), opts)]

    staging = None
    if s := config.on("data_staging"):
        layout = StagingLayout(
            **common, core_node_selector=cluster.core_node_selector, service_account=cluster.service_account, shell_image=image("cmd-shell", s),
            nemo_image=image("nemo-megatron", s), settings=s,
        )  # fmt: skip
        staging = DataStaging("data-staging", DataStagingArgs(layout, tuple(secrets)), opts)
        declared["dataStaging"] = [n for n, on in (("stage-wikicorpus", s.wikicorpus), ("stage-redpajama", s.redpajama), ("cmd-shell", s.cmd_shell)) if on]
    if s := config.on("bert_pretraining"):
        after = (staging.wikicorpus,) if staging and staging.wikicorpus else ()
        args = BertPretrainingArgs(
            settings=s, namespace=ns, repository=cluster.repositories["bert-pretrain"],
            group=cluster.node_groups[s.node_group], claim=claim, etcd_endpoint=cluster.etcd_endpoints[ns],
            service_account=cluster.service_account, after=after,
        )  # fmt: skip
        declared["bertPretraining"] = (["bert-precompile"] if s.precompile else []) + ["bert-train"]
        BertPretraining("bert-pretraining", args, opts)
    if s := config.on("ray_llama2"):
        layout = RayLayout(
            **common, image=image("ray-llama2", s), group=cluster.node_groups[s.node_group],
            service_account=cluster.service_account, settings=s,
        )  # fmt: skip
        RayLlama2("ray-llama2", RayLlama2Args(layout), opts)
        declared["rayLlama2"] = ["kuberay-trn1", *s.steps]
    if s := config.on("nemo_llama2"):
        after = (staging.redpajama,) if staging and staging.redpajama else ()
        layout = NemoLayout(
            **common, image=image("nemo-megatron", s), group=cluster.node_groups[s.node_group],
            service_account=cluster.service_account, settings=s,
            gang_queue=s.queue if cluster.feature("volcano") else None,
        )  # fmt: skip
        NemoLlama2("nemo-llama2", NemoLlama2Args(layout, after), opts)
        declared["nemoLlama2"] = (["llama2-compile"] if s.compile else []) + (["llama2-train"] if s.train else [])
    if s := config.on("cluster_check"):
        layout = CheckLayout(
            **common, image=image("nemo-megatron", s), group=cluster.node_groups[s.node_group],
            service_account=cluster.service_account, settings=s,
            gang_queue=s.queue if cluster.feature("volcano") else None, verdict_image=image("cmd-shell", s),
        )  # fmt: skip
        check = ClusterCheck("cluster-check", ClusterCheckArgs(layout), opts)
        verdict = check.verdict.status.apply(lambda st: "passed" if st is not None and (st.succeeded or 0) > 0 else "pending")
        declared["clusterCheck"] = {**summary(layout), "result": verdict}
    if s := config.on("tensorboard"):
        # Always on while enabled: on the system nodes, so the job-support group can idle at zero.
        layout = TensorBoardLayout(
            namespace=ns, claim=claim, core_node_selector=cluster.core_node_selector, image=image("cmd-shell", s), settings=s
        )
        tensorboard = TensorBoard("tensorboard", TensorBoardArgs(layout), opts)
        declared["tensorboard"] = {"service": "tensorboard", "loadBalancer": s.load_balancer is not None}
        if tensorboard.password is not None:
            declared["tensorboard"]["password"] = pulumi.Output.secret(tensorboard.password)
    return declared


needed = [*contract.REQUIRED_OUTPUTS]
cluster_outputs = pulumi.Output.all(*[cluster_stack.get_output(k) for k in needed]).apply(
    lambda values: dict(zip(needed, values))
)
# Each output is described in infra/facts/outputs.py (WORKLOAD_OUTPUTS).
pulumi.export("clusterStack", config.cluster_stack)
pulumi.export("namespace", config.namespace)
# Exporting the result is what surfaces a refusal from `wire` as the stack's error.
pulumi.export("workloads", cluster_outputs.apply(wire))
