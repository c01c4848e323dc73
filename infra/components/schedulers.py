"""Gang scheduling and job operators: Volcano and its queues, KubeRay, MPI operator."""

from __future__ import annotations

import copy
import functools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import yaml

from infra import contract
from infra.components.context import ClusterContext
from infra.components.kube import (
    CORE_NODE_SELECTOR,
    admission_policy,
    disruption_budget,
    helm_release,
    spread_across_nodes,
)
from infra.config.models import QueueConfig
from infra.facts.versions import CHARTS, MANIFEST_NAMESPACES, MPI_OPERATOR_IMAGE, MPI_OPERATOR_MANIFEST
from infra.specs import webhook_guard
from infra.specs.pod_security import controller_namespace_labels
from infra.specs.system_capacity import HA_CONTROLLER_REPLICAS

KUBERAY_NAMESPACE = "kuberay-system"
VOLCANO_NAMESPACE = "volcano-system"
VOLCANO_RELEASE = "volcano"
(MPI_OPERATOR_NAMESPACE,) = MANIFEST_NAMESPACES[MPI_OPERATOR_MANIFEST]


def queue_spec(queue: QueueConfig) -> dict[str, Any]:
    spec: dict[str, Any] = {"weight": queue.weight, "reclaimable": queue.reclaimable}
    capability = {k: v for k, v in (("cpu", queue.cpu), ("memory", queue.memory)) if v is not None}
    if capability:
        spec["capability"] = capability
    return spec


# The chart's default scheduler conf (config/volcano-scheduler.conf at v1.15.1) minus the
# `enqueue` action. With `enqueue`, the proportion/overcommit plugins keep a PodGroup Pending
# while its minResources exceed what the nodes have *now*; the job controller creates no pod
# for a Pending PodGroup, so nothing is Unschedulable and cluster-autoscaler never adds a
# Trainium node to a group idling at zero (volcano-sh/volcano#3910). Without `enqueue`,
# `allocate` moves the PodGroup to Inqueue itself, the pods are created, those that fit nowhere are
# reported unschedulable (the ones placed but held for the gang are marked Schedulable:
# pkg/scheduler/api/job_info.go), and the gang plugin binds none of them until minAvailable fit at once.
VOLCANO_SCHEDULER_ACTIONS = ("allocate", "backfill")
VOLCANO_SCHEDULER_TIERS: list[dict[str, Any]] = [
    {"plugins": [{"name": "priority"}, {"name": "gang", "enablePreemptable": False}, {"name": "conformance"}]},
    {
        "plugins": [
            {"name": "overcommit"},
            {"name": "drf", "enablePreemptable": False},
            {"name": "predicates"},
            # Still caps each queue at its capability when pods are allocated.
            {"name": "proportion"},
            {"name": "nodeorder"},
            {"name": "binpack"},
        ]
    },
]


def volcano_scheduler_conf() -> str:
    conf = {"actions": ", ".join(VOLCANO_SCHEDULER_ACTIONS), "tiers": VOLCANO_SCHEDULER_TIERS}
    return yaml.safe_dump(conf, sort_keys=False)


def queue_outputs(queues: list[QueueConfig]) -> list[dict[str, Any]]:
    """What the workload stacks need to know of each queue: its name and its caps."""
    return [
        contract.exported(contract.VolcanoQueue, name=q.name, capability=queue_spec(q).get("capability", {}))
        for q in queues
    ]


# Volcano's images come from Docker Hub (chart 1.15.1 values: basic.image_registry docker.io) and
# the chart pulls them `Always` (basic.image_pull_policy, used by every container in its
# templates): each restart of a Volcano pod would re-pull anonymously through the NAT gateway.
# The tags are pinned versions, so a node's cached copy is the same image.
IMAGE_PULL_POLICY = "IfNotPresent"


# Each Volcano component's pods, as its Deployment selects them (volcano-sh/volcano v1.15.1
# installer/helm/chart/volcano/templates/{scheduler,controllers,admission}.yaml, spec.selector).
VOLCANO_PODS = {
    "scheduler": {"app": "volcano-scheduler"},
    "controller": {"app": "volcano-controller"},
    "admission": {"app": "volcano-admission"},
}
# ray-project/kuberay v1.7.0 helm-chart/kuberay-operator templates/deployment.yaml spec.selector
# (kuberay-operator.name is the chart's name; the instance is the release's).
KUBERAY_PODS = {"app.kubernetes.io/name": "kuberay-operator", "app.kubernetes.io/instance": "kuberay-operator"}
# kubeflow/mpi-operator v0.8.2 deploy/v2beta1/mpi-operator.yaml, the Deployment's spec.selector.
MPI_OPERATOR_PODS = {"app": "mpi-operator"}


def volcano_values(replicas: int = HA_CONTROLLER_REPLICAS) -> dict[str, Any]:
    """``replicas`` of each component (controller_replicas: two, one on a one-node core group). The scheduler and the controller elect a leader only with
    custom.leader_elect_enable (values.yaml: false; templates/scheduler.yaml and controllers.yaml pass
    --leader-elect from it, in the release's namespace): two without it would both act. The admission
    webhook is a stateless server, safe at any count. The chart has no PodDisruptionBudget template:
    Schedulers declares one per component."""
    custom: dict[str, Any] = {
        # Controllers on the core nodes; never on the Trainium nodes they schedule for.
        "default_ns": CORE_NODE_SELECTOR,
        # Replaces the whole volcano-scheduler.conf in the chart's scheduler ConfigMap.
        "scheduler_config_override": volcano_scheduler_conf(),
        "leader_elect_enable": True,
    }
    for component, labels in VOLCANO_PODS.items():
        # values.yaml custom.<component>_replicas; each template takes `or custom.<component>_affinity
        # custom.default_affinity`.
        custom[f"{component}_replicas"] = replicas
        custom[f"{component}_affinity"] = spread_across_nodes(labels)
    return {"basic": {"image_pull_policy": IMAGE_PULL_POLICY}, "custom": custom}


def kuberay_values(volcano: bool, replicas: int = HA_CONTROLLER_REPLICAS) -> dict[str, Any]:
    """``replicas`` (controller_replicas): the operator elects a leader by default (values.yaml leaderElectionEnabled: true,
    passed as --enable-leader-election by templates/deployment.yaml, which reads `replicas` and
    `affinity`). The chart has no PodDisruptionBudget template: Schedulers declares one."""
    values: dict[str, Any] = {
        "nodeSelector": CORE_NODE_SELECTOR,
        "replicas": replicas,
        "affinity": spread_across_nodes(KUBERAY_PODS),
    }
    if volcano:
        # `batchScheduler.enabled` is deprecated; the name selects the integration.
        values["batchScheduler"] = {"name": "volcano"}
    return values


# kubeflow/mpi-operator v0.8.2: the Deployment's container and its args in the release manifest
# (deploy/v2beta1/mpi-operator.yaml); `--gang-scheduling=volcano` (cmd/mpi-operator/app/options)
# makes the controller create a Volcano PodGroup per MPIJob and put its launcher and worker pods
# in it (pkg/controller/podgroup.go), so MPIJobs are gang-scheduled like the other jobs.
MPI_OPERATOR_CONTAINER = "mpi-operator"
MPI_OPERATOR_UPSTREAM_ARGS = ("-alsologtostderr", "--lock-namespace=mpi-operator")


MPI_OPERATOR_GANG_ARGS = [*MPI_OPERATOR_UPSTREAM_ARGS, "--gang-scheduling=volcano"]


def without_pod_exec(cluster_role: Mapping[str, Any]) -> dict[str, Any]:
    """The operator's ClusterRole without `pods/exec`: the v2 controller never execs into a pod (kubeflow/
    mpi-operator v0.8.2: nothing under pkg/ or cmd/ calls the exec subresource; the launcher reaches
    the workers over SSH), and the grant would let a compromised operator image run commands in any
    pod of the cluster, the node agents' included."""
    rules = [
        rule
        for rule in cluster_role.get("rules", [])
        if not (rule.get("apiGroups") == [""] and rule.get("resources") == ["pods/exec"])
    ]
    if len(rules) == len(cluster_role.get("rules", [])):
        # A manifest that reshaped the rule must be read again, not silently keep the grant.
        raise ValueError("the MPI operator's ClusterRole has no pods/exec rule of the shape v0.8.2 ships")
    return {**cluster_role, "rules": rules}


def _mpi_operator_deployment(
    args: pulumi.ResourceTransformArgs, gang: bool, replicas: int
) -> pulumi.ResourceTransformResult | None:
    # A manifest object's props arrive as plain values (``Inputs`` also admits Outputs and awaitables).
    props: Mapping[str, Any] = args.props
    if args.type_ == "kubernetes:core/v1:Namespace" and props.get("metadata", {}).get("name") == MPI_OPERATOR_NAMESPACE:
        # The manifest's own Namespace, so its Pod Security labels have the manifest's owner too.
        metadata = dict(props["metadata"])
        metadata["labels"] = {**metadata.get("labels", {}), **controller_namespace_labels(MPI_OPERATOR_NAMESPACE)}
        return pulumi.ResourceTransformResult(props={**props, "metadata": metadata}, opts=args.opts)
    if (
        args.type_ == "kubernetes:rbac.authorization.k8s.io/v1:ClusterRole"
        and props.get("metadata", {}).get("name") == "mpi-operator"
    ):
        return pulumi.ResourceTransformResult(props=without_pod_exec(props), opts=args.opts)
    if args.type_ != "kubernetes:apps/v1:Deployment" or props.get("metadata", {}).get("name") != "mpi-operator":
        return None
    spec = copy.deepcopy(dict(props["spec"]))
    containers = [c for c in spec["template"]["spec"]["containers"] if c.get("name") == MPI_OPERATOR_CONTAINER]
    if not containers:
        # A manifest that renamed its container must not quietly run another image or turn gang scheduling off.
        raise ValueError(f"the MPI operator manifest has no container {MPI_OPERATOR_CONTAINER!r} to pin or flag")
    for container in containers:
        if gang:
            container["args"] = list(MPI_OPERATOR_GANG_ARGS)
        # The release manifest names the moving minor tag (`:0.8`): the release's own tag instead.
        container["image"] = MPI_OPERATOR_IMAGE
        # What the API server defaults a non-`latest` tag to (SetDefaults_Container), said
        # explicitly: the image is on Docker Hub.
        container["imagePullPolicy"] = IMAGE_PULL_POLICY
    # The operator always elects a leader on a Lease in --lock-namespace (kubeflow/mpi-operator v0.8.2
    # cmd/mpi-operator/app/server.go: election.RunOrDie), so a second replica waits as a standby; its
    # disruption budget is declared beside the manifest (Schedulers).
    spec["replicas"] = replicas
    spec["template"]["spec"]["affinity"] = spread_across_nodes(MPI_OPERATOR_PODS)
    return pulumi.ResourceTransformResult(props={**props, "spec": spec}, opts=args.opts)


def mpi_operator_gang_scheduling(
    args: pulumi.ResourceTransformArgs, replicas: int = HA_CONTROLLER_REPLICAS
) -> pulumi.ResourceTransformResult | None:
    """A transform for the operator's manifest: its Deployment's container gets the flag, the
    release's image tag and its pull policy spelled out; its Namespace, Pod Security labels.

    Applied to the manifest's own object (Pulumi engine transforms reach the children of
    yaml.v2 components), so the args have one owner: a separate server-side-apply patch would
    contend with the manifest for the atomic `args` list on every refresh or upgrade.
    """
    return _mpi_operator_deployment(args, gang=True, replicas=replicas)


def mpi_operator_release_image(
    args: pulumi.ResourceTransformArgs, replicas: int = HA_CONTROLLER_REPLICAS
) -> pulumi.ResourceTransformResult | None:
    """The transform without Volcano: the release's image tag, its pull policy and the namespace's labels."""
    return _mpi_operator_deployment(args, gang=False, replicas=replicas)


def pod_security_patch(namespace: str, release: k8s.helm.v3.Release, opts: pulumi.ResourceOptions) -> None:
    """The release's namespace gets its Pod Security labels once the release has created it.

    A server-side apply patch owns just the labels: Helm created the namespace (create_namespace),
    and pulumi-kubernetes 4.34.2 refuses to create an object that exists. The chart's first pods
    start before the labels land; every pod created afterwards, a restart or one a compromised
    controller makes, is checked against them.
    """
    k8s.core.v1.NamespacePatch(
        f"ns-{namespace}-pod-security",
        metadata={"name": namespace, "labels": controller_namespace_labels(namespace)},
        opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=[release])),
    )


@dataclass
class SchedulersArgs:
    volcano: bool
    queues: list[QueueConfig]
    kuberay: bool
    mpi_operator: bool
    controller_replicas: int = HA_CONTROLLER_REPLICAS
    """Of each leader-elected controller (infra/specs/system_capacity.py controller_replicas)."""


class Schedulers(pulumi.ComponentResource):
    volcano: k8s.helm.v3.Release | None
    # Each queue's name and capability, for the workload stacks (empty without Volcano).
    queues: list[dict[str, Any]]

    def __init__(
        self, name: str, ctx: ClusterContext, args: SchedulersArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("trainium:infra:Schedulers", name, None, opts)
        provider = ctx.kubernetes
        on_cluster = pulumi.ResourceOptions(parent=self, provider=provider)

        self.volcano = None
        self.queues = queue_outputs(args.queues) if args.volcano else []
        if args.volcano:
            # The admission service's webhook grant narrowed to its CA bundle (infra/specs/webhook_guard.py),
            # in force before its first pod starts: its own update at start-up is then the first one checked.
            _, guard = admission_policy(
                webhook_guard.NAME,
                webhook_guard.admission_policy(webhook_guard.admission_username(VOLCANO_RELEASE, VOLCANO_NAMESPACE)),
                webhook_guard.admission_policy_binding(),
                on_cluster,
            )
            self.volcano = helm_release(
                VOLCANO_RELEASE,
                CHARTS["volcano"],
                VOLCANO_NAMESPACE,
                volcano_values(args.controller_replicas),
                pulumi.ResourceOptions.merge(on_cluster, pulumi.ResourceOptions(depends_on=[guard])),
                create_namespace=True,
            )
            pod_security_patch(VOLCANO_NAMESPACE, self.volcano, on_cluster)
            for component, labels in VOLCANO_PODS.items():
                disruption_budget(
                    f"volcano-{component}",
                    VOLCANO_NAMESPACE,
                    labels,
                    pulumi.ResourceOptions.merge(on_cluster, pulumi.ResourceOptions(depends_on=[self.volcano])),
                )
            for queue in args.queues:
                k8s.apiextensions.CustomResource(
                    f"queue-{queue.name}",
                    api_version="scheduling.volcano.sh/v1beta1",
                    kind="Queue",
                    metadata={"name": queue.name},
                    spec=queue_spec(queue),
                    # The Queue CRD and its admission webhook come with the release.
                    opts=pulumi.ResourceOptions(parent=self, provider=provider, depends_on=[self.volcano]),
                )

        if args.kuberay:
            # With `batchScheduler.name: volcano` the operator watches Volcano's PodGroup type from
            # start-up (kuberay v1.7.0 volcano_scheduler.go, ConfigureReconciler: b.Owns(&PodGroup{}))
            # and exits until that CRD exists; Volcano's chart applies its CRDs as ordinary templates,
            # after its pre-install hook Job. Installing both at once can time the atomic release out.
            kuberay = helm_release(
                "kuberay-operator",
                CHARTS["kuberay-operator"],
                KUBERAY_NAMESPACE,
                kuberay_values(args.volcano, args.controller_replicas),
                pulumi.ResourceOptions(
                    parent=self, provider=provider, depends_on=[self.volcano] if self.volcano else None
                ),
                create_namespace=True,
            )
            pod_security_patch(KUBERAY_NAMESPACE, kuberay, on_cluster)
            disruption_budget(
                "kuberay-operator",
                KUBERAY_NAMESPACE,
                KUBERAY_PODS,
                pulumi.ResourceOptions.merge(on_cluster, pulumi.ResourceOptions(depends_on=[kuberay])),
            )

        if args.mpi_operator:
            # The manifest is applied from upstream as is, but for the image's tag and, when Volcano
            # is on, the gang-scheduling flag (then also after Volcano, whose PodGroup CRD the operator uses).
            mpi_operator = k8s.yaml.v2.ConfigFile(
                "mpi-operator",
                file=MPI_OPERATOR_MANIFEST,
                opts=pulumi.ResourceOptions(
                    parent=self,
                    provider=provider,
                    # A partial is a transform like any callable: the SDK keys each by the object and calls it
                    # with the args alone (pulumi 3.272.0 runtime/_callbacks.py register_transform).
                    transforms=[
                        functools.partial(
                            mpi_operator_gang_scheduling if args.volcano else mpi_operator_release_image,
                            replicas=args.controller_replicas,
                        )
                    ],
                    depends_on=[self.volcano] if self.volcano else None,
                ),
            )
            # The manifest ships no budget; with two replicas (mpi_operator_release_image) one keeps the lease.
            # maxUnavailable 1 lets a drain evict the only one too.
            disruption_budget(
                "mpi-operator",
                MPI_OPERATOR_NAMESPACE,
                MPI_OPERATOR_PODS,
                pulumi.ResourceOptions.merge(on_cluster, pulumi.ResourceOptions(depends_on=[mpi_operator])),
            )

        self.register_outputs({})
