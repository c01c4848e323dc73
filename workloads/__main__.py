"""The workload stacks: training jobs on the cluster the cluster stack built.

Reads the cluster stack through a StackReference, checks every workload setting against
what that cluster offers, and only then declares the Kubernetes objects. Which workloads
run, and how big, is the stack file's business (see docs/workloads.md).
"""

# Config helpers, instance facts and version pins come from the repository's package
# (pyproject.toml), installed into the virtualenv this project shares with the cluster's.
from datetime import UTC, datetime

import pulumi
import pulumi_kubernetes as k8s

from infra import contract
from infra.components.kube import kubeconfig_for
from infra.config.errors import ConfigError
from infra.config.load import engine_config
from infra.facts.pins import for_terminal
from workloads import bert, checks, goodput, image_prepull, layouts, nxd_llama, pins, progress, ray_llama2, schedule
from workloads.bert import BertPretraining
from workloads.cluster_check import ClusterCheck, summary
from workloads.data_staging import DataStaging
from workloads.gang_watchdog import GangWatchdog, WatchdogLayout
from workloads.image_prepull import ImagePrepull
from workloads.kube import LayoutArgs
from workloads.nxd_llama import HuggingFaceToken, HuggingFaceTokenArgs, NxdLlama
from workloads.ray_llama2 import RayLlama2
from workloads.settings import WorkloadsConfig, parse_workloads_config
from workloads.tensorboard_viewer import TensorBoard, TensorBoardArgs, TensorBoardLayout

config = parse_workloads_config(engine_config(), checks.config_problems)
cluster_stack = pulumi.StackReference("cluster", stack_name=config.cluster_stack)
# The cluster exports a kubeconfig bound to no profile; this stack's own aws:profile is added.
kubeconfig = cluster_stack.get_output("kubeconfig").apply(lambda kc: kubeconfig_for(kc, config.profile) if kc else kc)


def wire(outputs: dict, previous_admissions: dict | None = None) -> dict:
    """Check the settings against the cluster's outputs, then declare every workload.
    ``previous_admissions``: ``stepAdmissions`` of this stack's last update (None before its first)."""
    missing = contract.missing_outputs(outputs)
    if missing and contract.never_deployed(outputs) and pulumi.runtime.is_dry_run():
        # First day: this stack is previewed (pull requests, the prod preview before approval)
        # before its cluster's first `up`. Declaring nothing keeps that preview green and says
        # what it waits for; `pulumi up` still refuses below, as it must.
        pulumi.log.warn(
            f"{config.cluster_stack} has not been deployed yet: this preview declares no workload; "
            "its first `pulumi up` there comes first"
        )
        return {"waitingFor": config.cluster_stack}
    if missing:
        raise ConfigError(
            [
                f"{config.cluster_stack}: the cluster stack has no output {', '.join(missing)}; run `pulumi up` there first"
            ],
            source="cluster stack reference",
        )
    cluster = contract.parse_contract(outputs, config.cluster_stack)
    now = datetime.now(UTC).replace(microsecond=0)
    # What the user left unset and the goodput model derives (checkpoint interval, restart budget, deadline),
    # from the file system's throughput the cluster exports; every check below sees the values the jobs get.
    mbps = goodput.storage_throughput_mbps(cluster.storage)
    if throughput_warning := goodput.throughput_warning(config, cluster.storage):
        pulumi.log.warn(throughput_warning)
    settings = goodput.resolved(config, mbps)
    # Each workload on its own first; the whole schedule only once each one is sound.
    # The images' pins against their end of support last, once the settings are sound.
    unsupported, support_warnings = pins.end_of_support(settings, now.date())
    problems = (
        checks.workload_problems(settings, cluster, now, previous_admissions)
        or goodput.stall_problems(settings, mbps)
        or schedule.schedule_problems(layouts.job_chains(settings, cluster), cluster)
        or unsupported
    )
    if problems:
        raise ConfigError(problems, source="workload configuration")
    for warning in [
        *checks.workload_warnings(config),
        *goodput.deadline_warnings(config, mbps),
        *goodput.stall_warnings(settings, mbps).values(),
    ]:
        pulumi.log.warn(warning)
    for warning in support_warnings:
        pulumi.log.warn(for_terminal(warning))
    declared = declare_workloads(settings, cluster)
    admissions, _ = checks.step_admissions(settings, cluster, previous_admissions, now)
    return {**declared, "stepAdmissions": admissions} if admissions else declared


def run_directories(bert_args, ray_layout, nxd_layout) -> dict[str, str]:
    """Where each training run keeps its checkpoints and heartbeat on FSx (docs/resilience.md)."""
    runs = {}
    if bert_args is not None:
        runs["bertPretraining"] = bert.train_run_dir(bert_args)
    if ray_layout is not None and "train" in ray_layout.settings.steps:
        runs["rayLlama2"] = ray_llama2.run_dir(ray_layout)
    if nxd_layout is not None and nxd_layout.settings.train:
        runs["nxdLlama"] = nxd_llama.run_dir(nxd_layout)
    return runs


def declare_workloads(config: WorkloadsConfig, cluster: contract.ClusterContract) -> dict:
    provider = k8s.Provider("cluster", kubeconfig=kubeconfig, enable_server_side_apply=True)
    opts = pulumi.ResourceOptions(provider=provider)
    ns, claim = config.namespace, cluster.claims.get(config.namespace, "")
    declared: dict = {}
    secrets = []
    if config.hf_token:
        secrets = [HuggingFaceToken("hf-token", HuggingFaceTokenArgs(ns, pulumi.Output.secret(config.hf_token)), opts)]

    ray_on_block = bool((ray := config.on("ray_llama2")) and cluster.node_groups[ray.node_group].capacity_block)
    if ray_on_block or any(config.on(name) is not None for name in ("bert_pretraining", "nxd_llama", "cluster_check")):
        # Ends a Volcano Job or MPIJob whose gang does not run within its pending bound, and stops
        # any job on a Capacity Block group before the block's nodes are drained.
        GangWatchdog("gang-watchdog", WatchdogLayout(ns, cluster.core_node_selector, ray_on_block), opts)
        declared["gangWatchdog"] = "gang-watchdog"

    staging = None
    if (staging_layout := layouts.staging(config, cluster)) is not None:
        staging_settings = staging_layout.settings
        staging = DataStaging("data-staging", LayoutArgs(staging_layout, tuple(secrets)), opts)
        declared["dataStaging"] = [
            n
            for n, on in (
                ("stage-wikicorpus", staging_settings.wikicorpus),
                ("stage-redpajama", staging_settings.redpajama),
                ("cmd-shell", staging_settings.cmd_shell),
            )
            if on
        ]
    after = (staging.wikicorpus,) if staging and staging.wikicorpus else ()
    if (bert_args := layouts.bert_args(config, cluster, after)) is not None:
        bert_settings = bert_args.settings
        declared["bertPretraining"] = (["bert-precompile"] if bert_settings.precompile else []) + ["bert-train"]
        BertPretraining("bert-pretraining", bert_args, opts)
    if (ray_layout := layouts.ray(config, cluster)) is not None:
        RayLlama2("ray-llama2", LayoutArgs(ray_layout), opts)
        ray_settings = ray_layout.settings
        declared["rayLlama2"] = {"jobs": [ray_llama2.JOB_NAMES[step] for step in ray_settings.steps]}
        if "train" in ray_settings.steps:
            # ray_train_llama2.py runs 10000 steps unless told fewer: the deadline then ends it.
            steps = ray_settings.train_steps or int(goodput.figure("rayMaxSteps"))
            declared["rayLlama2"]["trainEnds"] = (
                f"Succeeded after {steps} steps, or Failed at trainDeadlineSeconds"
                if ray_settings.train_steps or "train_deadline_seconds" not in ray_settings.model_fields_set
                else f"Failed (DeadlineExceeded) at trainDeadlineSeconds {ray_settings.train_deadline_seconds} unless "
                f"it fits the script's {steps} steps: set trainSteps, or leave the deadline unset to derive it"
            )
    if (nxd_layout := layouts.nxd(config, cluster)) is not None:
        nxd_settings = nxd_layout.settings
        after = (staging.redpajama,) if staging and staging.redpajama else ()
        NxdLlama("nxd-llama", LayoutArgs(nxd_layout, after), opts)
        declared["nxdLlama"] = (["llama2-compile"] if nxd_settings.compile else []) + (
            ["llama2-train"] if nxd_settings.train else []
        )
    # The images the Trainium jobs above run, pulled on each new node while its burn-in runs.
    prepull_layout = layouts.prepull(config, cluster)
    if prepull := image_prepull.manifests(prepull_layout):
        ImagePrepull("image-prepull", prepull_layout, opts)
        declared["imagePrepull"] = [m["metadata"]["name"] for m in prepull if m["kind"] == "DaemonSet"]
    if runs := run_directories(bert_args, ray_layout, nxd_layout):
        declared["runDirectories"] = runs
    if (check_layout := layouts.check(config, cluster)) is not None:
        check = ClusterCheck("cluster-check", LayoutArgs(check_layout), opts)
        verdict = check.verdict.status.apply(
            lambda st: "passed" if st is not None and (st.succeeded or 0) > 0 else "pending"
        )
        declared["clusterCheck"] = {**summary(check_layout), "result": verdict}
    if config.on("progress_exporter") and (trained := progress.exported(config)):
        bert = config.on("bert_pretraining")
        progress_layout = progress.ProgressLayout(
            ns,
            claim,
            cluster.core_node_selector,
            layouts.namespace_id(config, cluster),
            trained,
            bert.output_dir if bert else progress.BERT_OUTPUT_DIR,
        )
        progress.ProgressExporter(progress.NAME, progress_layout, opts)
        declared["progressExporter"] = {"deployment": progress.NAME, "port": progress.PORT}
    if s := config.on("tensorboard"):
        # Always on while enabled: on the system nodes, so the job-support group can idle at zero.
        layout = TensorBoardLayout(
            namespace=ns,
            claim=claim,
            core_node_selector=cluster.core_node_selector,
            image=layouts.image(cluster, "cmd-shell", s),
            settings=s,
            namespace_id=layouts.namespace_id(config, cluster),
        )
        tensorboard = TensorBoard("tensorboard", TensorBoardArgs(layout), opts)
        declared["tensorboard"] = {"service": "tensorboard", "loadBalancer": s.load_balancer is not None}
        if tensorboard.password is not None:
            # Annotated: Output's __getattr__ makes it look Awaitable too, so mypy infers no U for secret's Input[U].
            password: pulumi.Output[str] = pulumi.Output.secret(tensorboard.password)
            declared["tensorboard"]["password"] = password
    return declared


# One get_output per name the workloads read: pulumi 3.272.0's get_output
# (sdk/python/lib/pulumi/stack_reference.py) makes a value secret only when the cluster stack lists
# its name as secret, so the map's secret kubeconfig (read above, for the provider) leaves these
# outputs, and the `workloads` export built from them, readable.
cluster_outputs = pulumi.Output.all(**{name: cluster_stack.get_output(name) for name in contract.WORKLOAD_INPUTS})
# Each output is described in infra/contract.py (WORKLOAD_OUTPUTS).
pulumi.export("clusterStack", config.cluster_stack)
pulumi.export("namespace", config.namespace)
# This stack's own last update: the jobs it admitted and when (workloads/capacity_windows.py), so that
# the Capacity Block check counts only the jobs this update starts.
own_stack = pulumi.StackReference(
    "own", stack_name=f"{pulumi.get_organization()}/{pulumi.get_project()}/{pulumi.get_stack()}"
)
# An output of its own, with nothing secret in it: the StackReference builtin lists a whole output as
# secret when any part of it is (pulumi v3.259.0 pkg/resource/deploy/builtins.go), and reading
# `workloads`, which holds TensorBoard's password where there is one, would make every later export
# built from it secret.
previous = own_stack.get_output("stepAdmissions")
# Exporting the result is what surfaces a refusal from `wire` as the stack's error.
wired = pulumi.Output.all(cluster_outputs, previous).apply(lambda args: wire(*args))
pulumi.export("workloads", wired.apply(lambda w: {k: v for k, v in w.items() if k != "stepAdmissions"}))
pulumi.export("stepAdmissions", wired.apply(lambda w: w.get("stepAdmissions", {})))
