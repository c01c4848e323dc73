"""Does the stack's schedule work as a whole? Pure functions over the rendered jobs.

Each workload is sound on its own (``checks.py``); this checks them together, from the very
objects the program declares (``layouts.job_chains``):

- **Every pod fits its node**: CPU, memory, Neuron devices and EFA interfaces asked by one pod
  against what one node of its group can allocate after the kubelet's reservations and the
  DaemonSets there (the cluster stack's ``allocatable``). A pod larger than its node stays
  Pending for ever, and cluster-autoscaler still adds nodes for it that it cannot use.
- **Trainium gangs on one group fit together**: the steps of one workload run one after another
  (`pulumi up` creates each once the step before it has finished, workloads/kube.py), but
  workloads are not ordered against each other, so each group must hold every workload's largest
  step at once. Otherwise a gang waits behind another one's run, beyond its own pending timeout
  and `pulumi up`'s wait, while the autoscaler adds nodes the gang cannot use (volcano v1.15.1
  pkg/scheduler/plugins/gang/gang.go binds no pod of a job below its minMember).
- **Gangs sharing a Volcano queue fit its capability together**: the proportion plugin never
  allocates a queue beyond its capability (volcano v1.15.1 pkg/scheduler/plugins/proportion), so a
  gang whose queue is full waits, nodes and all (``checks.py`` checks each workload alone).
- **The job-support group holds every job's CPU pods together** (Ray heads and submitters, MPI
  launchers, staging and check Jobs): a Ray gang spans both groups, and its Trainium workers sit
  idle while the job-support group is full.

Steps of one workload overlap only briefly: a finished RayJob's cluster lives
``ttlSecondsAfterFinished`` on while the next step's starts (kuberay v1.7.0
rayjob_controller.go handleShutdownAfterJobFinishes); ``checks.py`` keeps that under the pending
timeout.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from infra.contract import ClusterContract, NodeGroup
from workloads import quantities
from workloads.settings import key_name

NEURON = "aws.amazon.com/neuron"
EFA = "vpc.amazonaws.com/efa"
RESOURCES = ("cpu", "memory", NEURON, EFA)
SUPPORT = "job-support"
# KubeRay v1.7.0's default submitter (ray-operator/controllers/ray/common/job.go
# GetDefaultSubmitterContainer) when a RayJob gives no submitterPodTemplate.
RAY_DEFAULT_SUBMITTER = {"cpu": Decimal("0.5"), "memory": Decimal(200 * 2**20)}


@dataclass(frozen=True)
class PodShape:
    """``count`` identical pods of one object: what each asks for and where it may run."""

    job: str
    role: str
    count: int
    requests: Mapping[str, Decimal]
    node_selector: Mapping[str, str]


def _container_requests(container: Mapping[str, Any]) -> dict[str, Decimal]:
    # A resource with a limit and no request is requested at its limit (Kubernetes defaulting).
    resources = container.get("resources") or {}
    wanted = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
    return {k: v for k, v in ((k, quantities.parse(str(v))) for k, v in wanted.items()) if v is not None}


def pod_requests(spec: Mapping[str, Any]) -> dict[str, Decimal]:
    """What the scheduler counts for a pod: its containers' requests summed, or its largest init
    container's where that is more (kubernetes/kubernetes pkg/api/v1/resource PodRequests)."""
    total: dict[str, Decimal] = {}
    for container in spec.get("containers") or []:
        for name, amount in _container_requests(container).items():
            total[name] = total.get(name, Decimal(0)) + amount
    for init in spec.get("initContainers") or []:
        for name, amount in _container_requests(init).items():
            total[name] = max(total.get(name, Decimal(0)), amount)
    return total


def _shape(job: str, role: str, count: int, template: Mapping[str, Any]) -> PodShape:
    spec = template.get("spec") or {}
    return PodShape(job, role, count, pod_requests(spec), dict(spec.get("nodeSelector") or {}))


def pods_of(obj: Mapping[str, Any]) -> list[PodShape]:
    """The pods an object makes, by the controller that makes them."""
    name, spec, kind = obj["metadata"]["name"], obj.get("spec") or {}, obj["kind"]
    if kind == "Job" and obj["apiVersion"].startswith("batch.volcano.sh"):
        return [_shape(name, t["name"], int(t.get("replicas", 1)), t["template"]) for t in spec["tasks"]]
    if kind == "Job":
        return [_shape(name, "pod", int(spec.get("parallelism", 1)), spec["template"])]
    if kind == "MPIJob":
        return [
            _shape(name, role.lower(), int(r.get("replicas", 1)), r["template"])
            for role, r in spec["mpiReplicaSpecs"].items()
        ]
    if kind == "RayJob":
        cluster = spec["rayClusterSpec"]
        shapes = [_shape(name, "head", 1, cluster["headGroupSpec"]["template"])]
        shapes += [
            _shape(name, g["groupName"], int(g["replicas"]), g["template"]) for g in cluster.get("workerGroupSpecs", [])
        ]
        submitter = spec.get("submitterPodTemplate")
        shapes.append(
            _shape(name, "submitter", 1, submitter)
            if submitter
            else PodShape(name, "submitter", 1, RAY_DEFAULT_SUBMITTER, {})
        )
        return shapes
    return []


def awaited(obj: Mapping[str, Any]) -> bool:
    """Does `pulumi up` wait for the object to finish before it creates the next one? A batch/v1
    Job by pulumi-kubernetes' own Job awaiter, anything else through `pulumi.com/waitFor`."""
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    if annotations.get("pulumi.com/skipAwait") == "true":
        return False
    return "pulumi.com/waitFor" in annotations or (obj["kind"] == "Job" and obj["apiVersion"] == "batch/v1")


def phases(chain: Sequence[Mapping[str, Any]]) -> list[list[Mapping[str, Any]]]:
    """The chain's objects grouped by what runs at the same time: an object awaited by `pulumi
    up` ends its phase; one that is not runs beside the next."""
    out: list[list[Mapping[str, Any]]] = [[]]
    for obj in chain:
        out[-1].append(obj)
        if awaited(obj):
            out.append([])
    return [p for p in out if p]


@dataclass(frozen=True)
class Node:
    """One node's room for pods: cpu, memory, Neuron devices, EFA interfaces (None: unknown)."""

    what: str  # "a trn1.32xlarge node of group 'x'"
    room: Mapping[str, Decimal | None]


def _room(group: NodeGroup) -> Node:
    alloc = group.allocatable
    return Node(
        f"a {group.instance_type} node of group {group.name!r}",
        {
            "cpu": quantities.parse(alloc["cpu"]) if alloc else None,
            "memory": quantities.parse(alloc["memory"]) if alloc else None,
            NEURON: Decimal(group.neuron_devices),
            EFA: Decimal(group.efa_interfaces),
        },
    )


def _support_room(cluster: ClusterContract) -> Node:
    alloc = cluster.support_allocatable
    return Node(
        "a job-support node",
        {
            "cpu": quantities.parse(alloc["cpu"]) if alloc else None,
            "memory": quantities.parse(alloc["memory"]) if alloc else None,
            NEURON: Decimal(0),
            EFA: Decimal(0),
        },
    )


def placement(pod: PodShape, cluster: ClusterContract) -> str | None:
    """The Trainium group's name, SUPPORT, or None (elsewhere: not checked here)."""
    for group in cluster.node_groups.values():
        if group.node_selector.items() <= pod.node_selector.items():
            return group.name
    if dict(cluster.support_placement["nodeSelector"]).items() <= pod.node_selector.items() and pod.node_selector:
        return SUPPORT
    return None


def _shown(name: str, amount: Decimal) -> str:
    if name == "memory" and amount % 2**30 and amount % 2**20 == 0:
        return f"{(amount / 2**20).normalize():f}Mi"  # what allocatable says, not 508.52...Gi
    return quantities.show(name, amount)


def too_big(requests: Mapping[str, Decimal], node: Node) -> list[str]:
    over = []
    for name in RESOURCES:
        have, want = node.room.get(name), requests.get(name, Decimal(0))
        if have is not None and want > have:
            over.append(f"{name} {_shown(name, want)} (it can allocate {_shown(name, have)})")
    return over


def nodes_needed(pods: Iterable[Mapping[str, Decimal]], node: Node) -> int:
    """How many such nodes the pods take, packed first-fit, largest first (every pod fits one)."""

    def size(p: Mapping[str, Decimal]) -> tuple[Decimal, ...]:
        return tuple(p.get(r, Decimal(0)) for r in (NEURON, EFA, "cpu", "memory"))

    free: list[dict[str, Decimal]] = []
    for pod in sorted(pods, key=size, reverse=True):
        for left in free:
            if all(pod.get(r, Decimal(0)) <= left[r] for r in left):
                for r in left:
                    left[r] -= pod.get(r, Decimal(0))
                break
        else:
            room = {r: v for r, v in node.room.items() if v is not None}
            free.append({r: room[r] - pod.get(r, Decimal(0)) for r in room})
    return len(free)


def queue_of(obj: Mapping[str, Any]) -> str | None:
    """The Volcano queue of a gang: a Volcano Job's spec.queue, the label KubeRay v1.7.0 reads
    (volcano_scheduler.go), the MPI operator's runPolicy.schedulingPolicy.queue (podgroup.go)."""
    spec = obj.get("spec") or {}
    if obj["kind"] == "Job" and obj["apiVersion"].startswith("batch.volcano.sh"):
        return spec.get("queue")
    if obj["kind"] == "RayJob":
        return ((obj.get("metadata") or {}).get("labels") or {}).get("volcano.sh/queue-name")
    if obj["kind"] == "MPIJob":
        return ((spec.get("runPolicy") or {}).get("schedulingPolicy") or {}).get("queue")
    return None


def queue_problems(chains: Mapping[str, Sequence[Sequence[Mapping[str, Any]]]], cluster: ClusterContract) -> list[str]:
    """Workloads whose largest gangs in one capped queue ask together for more than it allows."""
    demand: dict[str, dict[str, dict[str, Decimal]]] = {}  # queue -> workload -> largest gang's cpu/memory
    for workload, workload_chains in chains.items():
        for chain in workload_chains:
            for phase in phases(chain):
                for obj in phase:
                    queue = queue_of(obj)
                    if queue is None:
                        continue
                    asked = quantities.total(
                        [
                            {k: str(v) for k, v in p.requests.items() if k in ("cpu", "memory")}
                            for p in pods_of(obj)
                            for _ in range(p.count)
                        ]
                    )
                    best = demand.setdefault(queue, {}).setdefault(workload, {})
                    for name, amount in asked.items():
                        best[name] = max(best.get(name, Decimal(0)), amount)
    problems = []
    for queue, by_workload in demand.items():
        capability = cluster.volcano_queues.get(queue) or {}
        if len(by_workload) < 2 or not capability:
            continue
        together: dict[str, Decimal] = {}
        for asked in by_workload.values():
            for name, amount in asked.items():
                together[name] = together.get(name, Decimal(0)) + amount
        over = quantities.exceeded(together, capability)
        if over:
            problems.append(
                f"{', '.join(key_name((w,)) for w in by_workload)}: their gangs in Volcano queue {queue!r} ask together "
                f"for more than it allows ({'; '.join(over)}); Volcano would hold one of them, with the nodes it was "
                "given, until another ends. Use separate queues, lower the requests, or raise the queue's capability "
                "in the cluster stack"
            )
    return problems


def schedule_problems(
    chains: Mapping[str, Sequence[Sequence[Mapping[str, Any]]]], cluster: ClusterContract
) -> list[str]:
    """Every problem of the schedule as a whole; ``chains`` per workload key (layouts.job_chains)."""
    rooms = {g.name: _room(g) for g in cluster.node_groups.values()}
    rooms[SUPPORT] = _support_room(cluster)
    problems: list[str] = []
    # Per workload and place: the pods of its most demanding phase (chains of a workload run side by side).
    peaks: dict[str, dict[str, list[Mapping[str, Decimal]]]] = {}
    for workload, workload_chains in chains.items():
        for chain in workload_chains:
            best: dict[str, list[Mapping[str, Decimal]]] = {}
            for phase in phases(chain):
                here: dict[str, list[Mapping[str, Decimal]]] = {}
                for obj in phase:
                    for pod in pods_of(obj):
                        where = placement(pod, cluster)
                        if where is None:
                            continue
                        over = too_big(pod.requests, rooms[where])
                        if over:
                            problems.append(
                                f"{key_name((workload,))}: {pod.role} pods of {pod.job} ask for more than {rooms[where].what} "
                                f"can allocate after the kubelet's reservations and its DaemonSets: {'; '.join(over)}. "
                                "It would stay Pending while cluster-autoscaler adds nodes it cannot use; lower the "
                                "request or use a larger instance type"
                            )
                            continue
                        here.setdefault(where, []).extend([pod.requests] * pod.count)
                for where, pods in here.items():
                    if nodes_needed(pods, rooms[where]) > nodes_needed(best.get(where, []), rooms[where]):
                        best[where] = pods
            for where, pods in best.items():
                peaks.setdefault(where, {}).setdefault(workload, []).extend(pods)
    if problems:
        return problems
    problems += queue_problems(chains, cluster)
    for where, by_workload in peaks.items():
        limit = cluster.support_max_size if where == SUPPORT else cluster.node_groups[where].max_size
        if limit is None or (where == SUPPORT and cluster.support_allocatable is None):
            continue
        need = {w: nodes_needed(p, rooms[where]) for w, p in by_workload.items()}
        together = nodes_needed([p for pods in by_workload.values() for p in pods], rooms[where])
        if together <= limit:
            continue
        names = ", ".join(f"{key_name((w,))} ({n})" for w, n in need.items())
        if where == SUPPORT:
            problems.append(
                f"{names}: their CPU pods (Ray heads and submitters, MPI launchers, staging and check Jobs) need "
                f"{together} job-support nodes at once, and the group holds {limit} (jobNodeGroup.maxSize in the "
                "cluster stack). A gang whose CPU pod finds no room leaves its Trainium nodes idle; raise that "
                "maxSize or switch a workload off (enabled: false)"
            )
        else:
            problems.append(
                f"{names}: at their largest steps these need {together} nodes of node group {where!r} at once, "
                f"and it holds {limit} (maxSize). Workloads are not ordered against each other, so one gang would "
                "wait behind another's run beyond its pending timeout and `pulumi up`'s wait, while "
                "cluster-autoscaler adds nodes it cannot use. Move one to another group, switch one off "
                "(enabled: false), or raise the group's maxSize in the cluster stack"
            )
    return problems
