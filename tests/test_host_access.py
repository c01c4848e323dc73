"""Host access (privileged, host paths, the node's namespaces) is the node agents' alone: the
ValidatingAdmissionPolicy of infra/specs/host_access.py, evaluated by a CEL runtime (cel-cpp through
cel-expr-python, with the optional-types extension Kubernetes' CEL environment includes), its
variables bound in order as the API server binds them."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from infra.specs import host_access, node_metrics
from offline.plan.runner import PlanResult

DAEMON_SET_CONTROLLER = "system:serviceaccount:kube-system:daemon-set-controller"
REPLICA_SET_CONTROLLER = "system:serviceaccount:kube-system:replicaset-controller"
# What a compromised operator calls as (Volcano's controller; KubeRay and the MPI operator alike).
VOLCANO_CONTROLLER = "system:serviceaccount:volcano-system:volcano-controllers"
DEV_ALLOWED = host_access.exemptions(observability=True, neuron_chart=True, neuron_scheduler_extension=False)


def refused(
    pod: dict[str, Any],
    username: str,
    namespace: str,
    allowed: dict[str, tuple[str, ...]] = DEV_ALLOWED,
    operation: str = "CREATE",
    old: dict[str, Any] | None = None,
) -> bool:
    from cel_expr_python import cel
    from cel_expr_python.ext import ext_optional

    env = cel.NewEnv(
        variables={n: cel.Type.DYN for n in ("object", "oldObject", "request")},
        extensions=[ext_optional.ExtOptional()],
    )
    spec = host_access.admission_policy(allowed)["spec"]
    data: dict[str, Any] = {
        "object": pod,
        "oldObject": old,
        "request": {"operation": operation, "namespace": namespace, "userInfo": {"username": username}},
    }
    (validation,) = spec["validations"]
    expression = validation["expression"]
    # Each variable's expression in place of its name, later ones first (they name earlier ones).
    for variable in reversed(spec["variables"]):
        expression = expression.replace(f"variables.{variable['name']}", f"({variable['expression']})")
    assert "variables." not in expression
    return env.compile(expression).eval(data=data).value() is not True


def pod(owner_kind: str | None = "DaemonSet", **spec: Any) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": "p", "generateName": "p-"}
    if owner_kind:
        metadata["ownerReferences"] = [
            {"apiVersion": "apps/v1", "kind": owner_kind, "name": "x", "uid": "1", "controller": True}
        ]
    return {"metadata": metadata, "spec": {"containers": [{"name": "c", "image": "i"}], **spec}}


PRIVILEGED = {"containers": [{"name": "c", "image": "i", "securityContext": {"privileged": True}}]}
HOST_PATH = {"volumes": [{"name": "root", "hostPath": {"path": "/"}}]}


@pytest.mark.parametrize(
    "spec",
    [
        PRIVILEGED,
        HOST_PATH,
        {"hostNetwork": True},
        {"hostPID": True},
        {"hostIPC": True},
        {"initContainers": [{"name": "i", "image": "i", "securityContext": {"privileged": True}}]},
    ],
)
def test_an_operator_cannot_start_a_pod_with_host_access_anywhere(spec):
    for namespace in ("kube-system", "default", "volcano-system", "amazon-cloudwatch"):
        # ownerReferences naming a DaemonSet are the caller's own words, and change nothing.
        assert refused(pod("DaemonSet", **spec), VOLCANO_CONTROLLER, namespace), namespace
        assert refused(pod(None, **spec), "kubernetes-admin", namespace), namespace


def test_the_node_agents_daemon_sets_keep_their_host_access():
    # aws-node, kube-proxy, the device plugins, the FSx CSI node plugin: privileged, host paths, host network.
    agent = pod("DaemonSet", hostNetwork=True, **PRIVILEGED, **HOST_PATH)
    assert not refused(agent, DAEMON_SET_CONTROLLER, "kube-system")
    # The controller manager's own user, where it runs without per-controller service accounts.
    assert not refused(agent, host_access.CONTROLLER_MANAGER, "kube-system")
    assert not refused(agent, DAEMON_SET_CONTROLLER, "amazon-cloudwatch")
    # The Neuron problem detector as chart 1.0.0 renders it with the values we pass: a privileged
    # container (_helpers.tpl, an empty npd.nodeProblemDetector.securityContext) with host paths, in its
    # namespace; never the host network.
    npd = pod("DaemonSet", **PRIVILEGED, **HOST_PATH)
    assert not refused(npd, DAEMON_SET_CONTROLLER, "neuron-healthcheck-system")
    assert refused(pod("DaemonSet", hostNetwork=True), DAEMON_SET_CONTROLLER, "neuron-healthcheck-system")


def test_a_daemon_set_outside_the_agents_namespaces_gets_no_host_access():
    # A DaemonSet an operator wrote in a namespace it may write to (a training namespace, its own).
    for namespace in ("default", "neuron-burn-in", "volcano-system", "kuberay-system", "mpi-operator"):
        assert refused(pod("DaemonSet", **HOST_PATH), DAEMON_SET_CONTROLLER, namespace), namespace


def test_the_daemon_set_controller_gets_host_access_only_for_daemon_sets():
    # The controller's request for a pod that some other object owns (or none) is not a DaemonSet's.
    assert refused(pod("StatefulSet", **PRIVILEGED), DAEMON_SET_CONTROLLER, "kube-system")
    assert refused(pod(None, **PRIVILEGED), DAEMON_SET_CONTROLLER, "kube-system")
    not_controller = pod("DaemonSet", **PRIVILEGED)
    not_controller["metadata"]["ownerReferences"][0]["controller"] = False
    assert refused(not_controller, DAEMON_SET_CONTROLLER, "kube-system")


def test_deployments_get_host_access_only_where_a_chart_needs_it():
    # kube-system's Deployments (CoreDNS, Karpenter, the FSx CSI controller) have none.
    assert refused(pod("ReplicaSet", hostNetwork=True), REPLICA_SET_CONTROLLER, "kube-system")
    with_extension = host_access.exemptions(observability=False, neuron_chart=True, neuron_scheduler_extension=True)
    # The Neuron scheduler extension: the host network, and nothing else.
    assert not refused(pod("ReplicaSet", hostNetwork=True), REPLICA_SET_CONTROLLER, "kube-system", with_extension)
    assert refused(pod("ReplicaSet", **PRIVILEGED), REPLICA_SET_CONTROLLER, "kube-system", with_extension)
    # A DaemonSet's pod claimed by the ReplicaSet controller is not one.
    assert refused(pod("DaemonSet", hostNetwork=True), REPLICA_SET_CONTROLLER, "neuron-healthcheck-system")
    # Without the CloudWatch add-on, its namespace holds no agent.
    without = host_access.exemptions(observability=False, neuron_chart=True, neuron_scheduler_extension=False)
    assert refused(pod("DaemonSet", **HOST_PATH), DAEMON_SET_CONTROLLER, "amazon-cloudwatch", without)


def test_pods_without_host_access_pass_whoever_creates_them():
    plain = pod(None, volumes=[{"name": "data", "persistentVolumeClaim": {"claimName": "fsx-claim"}}])
    for username in (VOLCANO_CONTROLLER, "kubernetes-admin", DAEMON_SET_CONTROLLER):
        assert not refused(plain, username, "default")
    unprivileged = pod(None, containers=[{"name": "c", "image": "i", "securityContext": {"privileged": False}}])
    assert not refused(unprivileged, VOLCANO_CONTROLLER, "default")


def test_no_ephemeral_container_joins_a_pod_with_host_access():
    agent = pod("DaemonSet", hostNetwork=True, **HOST_PATH)
    debugged = copy.deepcopy(agent)
    debugged["spec"]["ephemeralContainers"] = [{"name": "debug", "image": "busybox"}]
    for username in ("kubernetes-admin", DAEMON_SET_CONTROLLER):
        assert refused(debugged, username, "kube-system", operation="UPDATE", old=agent), username
    # A privileged ephemeral container is refused in a plain pod too; an unprivileged one is not.
    plain = pod(None)
    debug = copy.deepcopy(plain)
    debug["spec"]["ephemeralContainers"] = [{"name": "d", "image": "i", "securityContext": {"privileged": True}}]
    assert refused(debug, "kubernetes-admin", "default", operation="UPDATE", old=plain)
    debug["spec"]["ephemeralContainers"][0]["securityContext"]["privileged"] = False
    assert not refused(debug, "kubernetes-admin", "default", operation="UPDATE", old=plain)


def test_the_policy_matches_every_namespace_and_only_pod_creation_and_ephemeral_containers():
    spec = host_access.admission_policy(DEV_ALLOWED)["spec"]
    assert spec["failurePolicy"] == "Fail"
    assert "namespaceSelector" not in spec["matchConstraints"] and "matchConditions" not in spec
    assert [(r["operations"], r["resources"]) for r in spec["matchConstraints"]["resourceRules"]] == [
        (["CREATE"], ["pods"]),
        (["UPDATE"], ["pods/ephemeralcontainers"]),
    ]
    assert host_access.admission_policy_binding()["spec"] == {
        "policyName": host_access.NAME,
        "validationActions": ["Deny"],
    }


def test_the_stacks_declare_the_policy_for_what_they_install(dev: PlanResult, prod: PlanResult) -> None:
    for plan in (dev, prod):
        policy = plan.named(host_access.NAME, "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy")
        binding = plan.named(
            host_access.NAME, "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicyBinding"
        )
        assert policy.urn in binding.dependencies
        allowed = policy.inputs["spec"]["variables"][-1]["expression"]
        assert '"kube-system/DaemonSet"' in allowed
        assert '"neuron-healthcheck-system/DaemonSet": ["hostPath", "privileged"]' in allowed
        # Neither shipped stack turns the Neuron scheduler extension on: no Deployment gets host access.
        assert '"kube-system/ReplicaSet"' not in allowed


# The node agents the cluster stack writes itself while a Prometheus runs (infra/specs/node_metrics.py).
NODE_AGENTS = {node_metrics.NEURON_MONITOR, node_metrics.EFA_EXPORTER}


def test_nothing_this_program_renders_needs_host_access_but_its_node_agents(dev: PlanResult, prod: PlanResult) -> None:
    """Every other pod template the cluster stack writes itself (burn-in DaemonSets, the sweeper) passes
    the policy whoever creates it: none of them is on the node agents' list. The node agents' pods are
    admitted from the DaemonSet controller, and from nobody else."""
    kinds = ("kubernetes:apps/v1:DaemonSet", "kubernetes:batch/v1:CronJob")
    agents = 0
    for plan in (dev, prod):
        for resource in [r for kind in kinds for r in plan.of_type(kind)]:
            spec = resource.inputs["spec"]
            template = spec["template"] if "template" in spec else spec["jobTemplate"]["spec"]["template"]
            namespace = resource.inputs["metadata"]["namespace"]
            if resource.inputs["metadata"]["name"] in NODE_AGENTS:
                agents += 1
                made = pod("DaemonSet", **template["spec"])
                assert not refused(made, DAEMON_SET_CONTROLLER, namespace), resource.name
                assert refused(made, VOLCANO_CONTROLLER, namespace), resource.name
                continue
            assert not refused({"metadata": {}, "spec": template["spec"]}, VOLCANO_CONTROLLER, namespace), resource.name
    assert agents == len(NODE_AGENTS)  # prod's; dev has no Prometheus
