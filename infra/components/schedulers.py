"""Gang scheduling and job operators: Volcano and its queues, TorchX's etcd, KubeRay, MPI operator."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import yaml

from infra import contract
from infra.components.context import ClusterContext
from infra.components.identities import TrainingIdentities
from infra.components.kube import CORE_NODE_SELECTOR, helm_release
from infra.config.models import QueueConfig
from infra.facts.versions import CHARTS, ETCD_IMAGE, MPI_OPERATOR_IMAGE, MPI_OPERATOR_MANIFEST
from infra.specs.pod_security import NOBODY_UID, container_security_context, from_pods, network_policy, pod_defaults

KUBERAY_NAMESPACE = "kuberay-system"
ETCD_SERVICE = "etcd-server"
ETCD_PORT = 2379
ETCD_LABELS = {"app.kubernetes.io/name": "etcd", "app.kubernetes.io/part-of": "torchx"}
ETCD_DATA = "/var/run/etcd"
# Who may reach etcd: pods that carry this label (the BERT jobs of the workload stacks), and
# pods `torchx run` submits, which TorchX 0.7.0 labels app.kubernetes.io/managed-by:
# torchx.pytorch.org (torchx/schedulers/kubernetes_scheduler.py, pod_labels).
ETCD_CLIENT_LABEL = {"torchx-etcd/client": "true"}
TORCHX_POD_LABEL = {"app.kubernetes.io/managed-by": "torchx.pytorch.org"}


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
# `allocate` moves the PodGroup to Inqueue itself, the pods are created and reported
# unschedulable, and the gang plugin still binds none of them until minAvailable fit at once.
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


def volcano_values() -> dict[str, Any]:
    return {
        "basic": {"image_pull_policy": IMAGE_PULL_POLICY},
        "custom": {
            # Controllers on the core nodes; never on the Trainium nodes they schedule for.
            "default_ns": CORE_NODE_SELECTOR,
            # Replaces the whole volcano-scheduler.conf in the chart's scheduler ConfigMap.
            "scheduler_config_override": volcano_scheduler_conf(),
        },
    }


def kuberay_values(volcano: bool) -> dict[str, Any]:
    values: dict[str, Any] = {"nodeSelector": CORE_NODE_SELECTOR}
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


def _mpi_operator_deployment(args: pulumi.ResourceTransformArgs, gang: bool) -> pulumi.ResourceTransformResult | None:
    # A manifest object's props arrive as plain values (``Inputs`` also admits Outputs and awaitables).
    props: Mapping[str, Any] = args.props
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
    return pulumi.ResourceTransformResult(props={**props, "spec": spec}, opts=args.opts)


def mpi_operator_gang_scheduling(args: pulumi.ResourceTransformArgs) -> pulumi.ResourceTransformResult | None:
    """A transform for the operator's manifest: its Deployment's container gets the flag, the
    release's image tag and its pull policy spelled out.

    Applied to the manifest's own object (Pulumi engine transforms reach the children of
    yaml.v2 components), so the args have one owner: a separate server-side-apply patch would
    contend with the manifest for the atomic `args` list on every refresh or upgrade.
    """
    return _mpi_operator_deployment(args, gang=True)


def mpi_operator_release_image(args: pulumi.ResourceTransformArgs) -> pulumi.ResourceTransformResult | None:
    """The transform without Volcano: the release's image tag and its pull policy only."""
    return _mpi_operator_deployment(args, gang=False)


def etcd_container() -> dict[str, Any]:
    return {
        "name": "etcd",
        "image": ETCD_IMAGE,
        "command": [
            "etcd",
            "--name=etcd-server",
            # A directory etcd creates itself, with the 0700 mode it checks for.
            f"--data-dir={ETCD_DATA}/data",
            f"--listen-client-urls=http://0.0.0.0:{ETCD_PORT}",
            f"--advertise-client-urls=http://{ETCD_SERVICE}:{ETCD_PORT}",
            "--listen-peer-urls=http://0.0.0.0:2380",
            "--initial-cluster-state=new",
            # torch.distributed.elastic's etcd rendezvous uses the v2 API.
            "--enable-v2=true",
        ],
        "ports": [{"name": "client", "containerPort": ETCD_PORT}],
        "readinessProbe": {"tcpSocket": {"port": ETCD_PORT}, "periodSeconds": 5},
        # A wedged member is restarted; its state (open rendezvous) is rebuilt by the next attempt.
        "livenessProbe": {
            "httpGet": {"path": "/health", "port": ETCD_PORT},
            "initialDelaySeconds": 10,
            "periodSeconds": 10,
            "failureThreshold": 6,
        },
        "resources": {"requests": {"cpu": "250m", "memory": "256Mi"}, "limits": {"cpu": "1", "memory": "1Gi"}},
        # It writes only its data directory (an emptyDir).
        "securityContext": container_security_context(read_only_root=True),
        "volumeMounts": [{"name": "data", "mountPath": ETCD_DATA}],
    }


def etcd_network_policy(namespace: str) -> dict[str, Any]:
    """Only rendezvous clients reach etcd, and only on its client port."""
    return network_policy(
        "etcd", namespace, ETCD_LABELS, [from_pods(ETCD_CLIENT_LABEL, TORCHX_POD_LABEL, ports=[ETCD_PORT])]
    )


@dataclass
class SchedulersArgs:
    volcano: bool
    queues: list[QueueConfig]
    kuberay: bool
    mpi_operator: bool
    torchx_etcd: bool
    namespaces: list[str]
    identities: TrainingIdentities


class Schedulers(pulumi.ComponentResource):
    volcano: k8s.helm.v3.Release | None
    # Each queue's name and capability, for the workload stacks (empty without Volcano).
    queues: list[dict[str, Any]]
    etcd_endpoints: dict[str, str]

    def __init__(
        self, name: str, ctx: ClusterContext, args: SchedulersArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("trainium:infra:Schedulers", name, None, opts)
        provider = ctx.kubernetes
        on_cluster = pulumi.ResourceOptions(parent=self, provider=provider)

        self.volcano = None
        self.queues = queue_outputs(args.queues) if args.volcano else []
        if args.volcano:
            self.volcano = helm_release(
                "volcano", CHARTS["volcano"], "volcano-system", volcano_values(), on_cluster, create_namespace=True
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
            helm_release(
                "kuberay-operator",
                CHARTS["kuberay-operator"],
                KUBERAY_NAMESPACE,
                kuberay_values(args.volcano),
                pulumi.ResourceOptions(
                    parent=self, provider=provider, depends_on=[self.volcano] if self.volcano else None
                ),
                create_namespace=True,
            )

        if args.mpi_operator:
            # The manifest is applied from upstream as is, but for the image's tag and, when Volcano
            # is on, the gang-scheduling flag (then also after Volcano, whose PodGroup CRD the operator uses).
            k8s.yaml.v2.ConfigFile(
                "mpi-operator",
                file=MPI_OPERATOR_MANIFEST,
                opts=pulumi.ResourceOptions(
                    parent=self,
                    provider=provider,
                    transforms=[mpi_operator_gang_scheduling if args.volcano else mpi_operator_release_image],
                    depends_on=[self.volcano] if self.volcano else None,
                ),
            )

        self.etcd_endpoints = {}
        if args.torchx_etcd:
            for namespace in args.namespaces:
                self._etcd(namespace, provider, args.identities.depends_for(namespace))
                self.etcd_endpoints[namespace] = f"{ETCD_SERVICE}.{namespace}:{ETCD_PORT}"
        self.register_outputs({})

    def _etcd(self, namespace: str, provider: k8s.Provider, depends_on: list[pulumi.Resource]) -> None:
        """A single-member etcd for TorchX rendezvous (state is per job, nothing to keep)."""
        opts = pulumi.ResourceOptions(parent=self, provider=provider, depends_on=depends_on)
        labels = ETCD_LABELS
        k8s.apps.v1.Deployment(
            f"{namespace}-etcd",
            metadata={"name": "etcd", "namespace": namespace, "labels": labels},
            spec={
                "replicas": 1,
                "selector": {"matchLabels": labels},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {
                        # The image is distroless and needs no root.
                        **pod_defaults(run_as_user=NOBODY_UID, fs_group=NOBODY_UID),
                        "nodeSelector": CORE_NODE_SELECTOR,
                        "containers": [etcd_container()],
                        "volumes": [{"name": "data", "emptyDir": {}}],
                    },
                },
            },
            opts=opts,
        )
        k8s.core.v1.Service(
            f"{namespace}-{ETCD_SERVICE}",
            metadata={"name": ETCD_SERVICE, "namespace": namespace, "labels": labels},
            spec={"selector": labels, "ports": [{"name": "client", "port": ETCD_PORT, "targetPort": ETCD_PORT}]},
            opts=opts,
        )
        policy = etcd_network_policy(namespace)
        k8s.networking.v1.NetworkPolicy(
            f"{namespace}-etcd-policy", metadata=policy["metadata"], spec=policy["spec"], opts=opts
        )
