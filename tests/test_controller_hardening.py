"""Controllers cannot be the way in: what their credentials and namespaces allow."""

from __future__ import annotations

import fnmatch
import json
from typing import Any

from infra.components.storage import csi_controller_policy
from offline.plan.runner import PlanResult

STACK_FILE_SYSTEM = "arn:aws:fsx:us-east-1:123456789012:file-system/fs-0123456789abcdef0"
DYNAMIC_FILE_SYSTEM = "arn:aws:fsx:us-east-1:123456789012:file-system/fs-0fedcba9876543210"
FOREIGN_FILE_SYSTEM = "arn:aws:fsx:us-east-1:123456789012:file-system/fs-0aaaaaaaaaaaaaaaa"


def permits(policy: dict[str, Any], action: str, resource: str, request: dict[str, Any]) -> bool:
    """IAM's evaluation for one request (IAM user guide, "Policy evaluation logic" and "Condition
    operators"): allowed when a statement allows and none denies. ``request`` holds the condition
    keys FSx sends: aws:RequestTag/<k> and aws:ResourceTag/<k> strings, aws:TagKeys a list; an absent
    key is null. Null "false" holds when the key is present; ForAllValues holds for an empty or
    absent set; any other operator on an absent key does not hold."""

    def holds(operator: str, key: str, wanted: Any) -> bool:
        wanted = wanted if isinstance(wanted, list) else [wanted]
        value = request.get(key)
        if operator == "Null":
            return (value is None) == (wanted == ["true"])
        if operator == "ForAllValues:StringEquals":
            return all(v in wanted for v in (value or []))
        if value is None:
            return False
        if operator == "StringEquals":
            return value in wanted
        if operator == "StringLike":
            return any(fnmatch.fnmatchcase(value, w) for w in wanted)
        raise AssertionError(f"evaluator does not know {operator}")

    def applies(statement: dict[str, Any]) -> bool:
        actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
        resources = statement["Resource"] if isinstance(statement["Resource"], list) else [statement["Resource"]]
        return (
            any(fnmatch.fnmatchcase(action, a) for a in actions)
            and any(fnmatch.fnmatchcase(resource, r) for r in resources)
            and all(
                holds(op, key, wanted)
                for op, tests in statement.get("Condition", {}).items()
                for key, wanted in tests.items()
            )
        )

    hits = [s for s in policy["Statement"] if applies(s)]
    return any(s["Effect"] == "Allow" for s in hits) and not any(s["Effect"] == "Deny" for s in hits)


# What the driver sends (aws-fsx-csi-driver v1.9.0 pkg/cloud/cloud.go): CreateFileSystem with the tag
# CSIVolumeName=<volume> and no other (FSx then authorizes fsx:TagResource for those tags); Update and
# Delete on a file system that carries it.
CREATE = {"aws:RequestTag/CSIVolumeName": "pvc-1", "aws:TagKeys": ["CSIVolumeName"]}
DRIVERS_VOLUME = {"aws:ResourceTag/CSIVolumeName": "pvc-1"}
# The stack's own file system carries the program's tags (__main__.py).
PROGRAM_TAGS = {"aws:ResourceTag/project": "trainium-eks", "aws:ResourceTag/stack": "prod"}


def test_the_fsx_controller_provisions_dynamic_volumes_but_never_touches_the_stacks_file_system() -> None:
    policy = json.loads(csi_controller_policy(STACK_FILE_SYSTEM))
    for action in ("fsx:CreateFileSystem", "fsx:TagResource"):
        assert permits(policy, action, DYNAMIC_FILE_SYSTEM, CREATE), action
    for action in ("fsx:UpdateFileSystem", "fsx:DeleteFileSystem"):
        assert permits(policy, action, DYNAMIC_FILE_SYSTEM, DRIVERS_VOLUME), action
    assert permits(policy, "fsx:DescribeFileSystems", "*", {})
    assert permits(policy, "fsx:DescribeFileSystems", STACK_FILE_SYSTEM, PROGRAM_TAGS)
    # The stack's own file system: no delete (which keeps no final backup), no update, no retagging,
    # not even once it carries the driver's tag.
    for tags in (PROGRAM_TAGS, {**PROGRAM_TAGS, **DRIVERS_VOLUME}, DRIVERS_VOLUME):
        for action in ("fsx:DeleteFileSystem", "fsx:UpdateFileSystem", "fsx:TagResource", "fsx:UntagResource"):
            assert not permits(policy, action, STACK_FILE_SYSTEM, {**tags, **CREATE}), (action, tags)


def test_the_fsx_controller_deletes_and_resizes_only_what_it_created() -> None:
    policy = json.loads(csi_controller_policy(STACK_FILE_SYSTEM))
    # Any file system without the driver's tag (another team's, a backup restored by hand).
    for action in ("fsx:DeleteFileSystem", "fsx:UpdateFileSystem"):
        assert not permits(policy, action, FOREIGN_FILE_SYSTEM, {}), action
        assert not permits(policy, action, FOREIGN_FILE_SYSTEM, {"aws:ResourceTag/team": "research"}), action
    # Create only with the driver's tag; tag only with it, nothing else alongside it.
    assert not permits(policy, "fsx:CreateFileSystem", DYNAMIC_FILE_SYSTEM, {})
    assert not permits(policy, "fsx:TagResource", FOREIGN_FILE_SYSTEM, {"aws:RequestTag/stack": "prod"})
    assert not permits(
        policy,
        "fsx:TagResource",
        DYNAMIC_FILE_SYSTEM,
        {"aws:RequestTag/CSIVolumeName": "pvc-1", "aws:RequestTag/team": "x", "aws:TagKeys": ["CSIVolumeName", "team"]},
    )
    assert not permits(policy, "fsx:UntagResource", DYNAMIC_FILE_SYSTEM, DRIVERS_VOLUME)
    # FSx cannot tell a TagResource call from tagging on create, so the tag can be put on another
    # file system; one of this program (any stack's: it carries `stack`) stays out of reach even then,
    # and its `stack` tag cannot be removed.
    other_stack = "arn:aws:fsx:us-east-1:123456789012:file-system/fs-0bbbbbbbbbbbbbbbb"
    tagged = {"aws:ResourceTag/stack": "dev", **DRIVERS_VOLUME}
    for action in ("fsx:DeleteFileSystem", "fsx:UpdateFileSystem", "fsx:TagResource", "fsx:UntagResource"):
        assert not permits(policy, action, other_stack, {**tagged, **CREATE}), action


def test_the_deployed_fsx_controller_policy_denies_the_stacks_own_file_system(
    dev_fsx: PlanResult, prod: PlanResult
) -> None:
    for plan in (dev_fsx, prod):
        policy = json.loads(plan.named("fsx-csi-controller-policy").inputs["policy"])
        (deny,) = [s for s in policy["Statement"] if s["Effect"] == "Deny" and s["Resource"] != "*"]
        # The offline mocks name a resource's ARN after the resource: the deny is on the training file system.
        assert deny["Resource"].startswith("arn:aws:fsx:") and deny["Resource"].endswith("/fsx-training"), deny
        assert not permits(policy, "fsx:DeleteFileSystem", deny["Resource"], DRIVERS_VOLUME)
        # The training file system carries the `stack` tag the blanket deny relies on.
        fs = plan.named("fsx-training", "aws:fsx/lustreFileSystem:LustreFileSystem")
        assert fs.inputs["tags"]["stack"] == plan.stack


# --- Pod Security levels of the controllers' namespaces -------------------------------------------

PSA = "pod-security.kubernetes.io"


def levels(labels: dict[str, str]) -> tuple[str, str, str]:
    from infra.specs.pod_security import PSA_POLICY_VERSION

    for mode in ("enforce", "warn", "audit"):
        assert labels[f"{PSA}/{mode}-version"] == PSA_POLICY_VERSION, (mode, labels)
    return labels[f"{PSA}/enforce"], labels[f"{PSA}/warn"], labels[f"{PSA}/audit"]


def test_operator_namespaces_enforce_the_strictest_level_their_pods_pass(dev: PlanResult, prod: PlanResult) -> None:
    for plan in (dev, prod):
        patches = {r.inputs["metadata"]["name"]: r for r in plan.of_type("kubernetes:core/v1:NamespacePatch")}
        assert levels(patches["kuberay-system"].inputs["metadata"]["labels"]) == ("restricted",) * 3
        assert levels(patches["volcano-system"].inputs["metadata"]["labels"]) == (
            "baseline",
            "restricted",
            "restricted",
        )
        # Each patch lands once its release has created the namespace (Helm's create_namespace).
        assert plan.named("volcano").urn in patches["volcano-system"].dependencies
        assert plan.named("kuberay-operator").urn in patches["kuberay-system"].dependencies
        npd = plan.named("neuron-healthcheck-system", "kubernetes:core/v1:Namespace").inputs["metadata"]["labels"]
        # Its node problem detector mounts host paths: privileged, with baseline's refusals reported.
        assert levels(npd) == ("privileged", "baseline", "baseline")
        assert npd["purpose"] == "neuron-health"


def test_the_mpi_operator_manifest_namespace_gets_its_level_and_nothing_else_changes() -> None:
    import pulumi

    from infra.components.schedulers import mpi_operator_gang_scheduling, mpi_operator_release_image

    upstream = {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": "mpi-operator", "labels": {"app": "mpi-operator"}},
    }
    for transform in (mpi_operator_gang_scheduling, mpi_operator_release_image):
        result = transform(
            pulumi.ResourceTransformArgs(
                True, "kubernetes:core/v1:Namespace", "mpi-operator", upstream, pulumi.ResourceOptions()
            )
        )
        labels = result.props["metadata"]["labels"]
        assert levels(labels) == ("baseline", "restricted", "restricted")
        assert labels["app"] == "mpi-operator"
    assert set(upstream["metadata"]["labels"]) == {"app"}
    other = pulumi.ResourceTransformArgs(
        True, "kubernetes:core/v1:Namespace", "x", {"metadata": {"name": "elsewhere"}}, pulumi.ResourceOptions()
    )
    assert mpi_operator_gang_scheduling(other) is None


def test_chart_values_keep_what_the_levels_rely_on(dev: PlanResult) -> None:
    """The levels hold for the charts' own security contexts (infra/specs/pod_security.py,
    CONTROLLER_NAMESPACE_LEVELS): our values must not replace them or turn on the Volcano agent."""
    values = {r.name: r.inputs["values"] for r in dev.of_type("kubernetes:helm.sh/v3:Release")}
    assert not {"securityContext", "podSecurityContext"} & set(values["kuberay-operator"])
    volcano_custom = values["volcano"]["custom"]
    assert not [k for k in volcano_custom if k.endswith(("_sc", "_csc"))], volcano_custom
    assert not volcano_custom.get("colocation_enable")


def test_every_level_is_a_pod_security_level() -> None:
    from infra.specs.pod_security import CONTROLLER_NAMESPACE_LEVELS

    order = ["privileged", "baseline", "restricted"]
    for namespace, (enforce, warn) in CONTROLLER_NAMESPACE_LEVELS.items():
        # What is warned about is never laxer than what is enforced.
        assert order.index(warn) >= order.index(enforce), namespace


def test_the_fsx_controller_keeps_its_disruption_budget_at_two_replicas(dev_fsx: PlanResult) -> None:
    # aws-fsx-csi-driver chart 1.17.0: templates/pdb.yaml renders maxUnavailable 1 when
    # controller.podDisruptionBudget.enabled and replicaCount <= 2; values.yaml replicaCount 2.
    controller = {r.name: r.inputs for r in dev_fsx.of_type("kubernetes:helm.sh/v3:Release")}["aws-fsx-csi-driver"]
    assert controller["values"]["controller"]["podDisruptionBudget"] == {"enabled": True}
    assert "replicaCount" not in controller["values"]["controller"]


# --- controllers that elect a leader run a standby ------------------------------------------------


def _preferred_spread(affinity: dict[str, Any]) -> dict[str, str]:
    (term,) = affinity["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert term["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"
    assert "requiredDuringSchedulingIgnoredDuringExecution" not in affinity["podAntiAffinity"]
    return term["podAffinityTerm"]["labelSelector"]["matchLabels"]


def test_volcano_runs_two_of_each_component_with_leader_election_and_budgets(dev: PlanResult, prod: PlanResult) -> None:
    from infra.components.schedulers import VOLCANO_PODS

    for plan in (dev, prod):
        custom = plan.named("volcano", "kubernetes:helm.sh/v3:Release").inputs["values"]["custom"]
        # Without leader election two schedulers would both bind pods (volcano v1.15.1
        # templates/scheduler.yaml: --leader-elect={{ custom.leader_elect_enable }}).
        assert custom["leader_elect_enable"] is True
        budgets = {
            r.inputs["metadata"]["name"]: r
            for r in plan.of_type("kubernetes:policy/v1:PodDisruptionBudget")
            if r.inputs["metadata"]["namespace"] == "volcano-system"
        }
        for component, labels in VOLCANO_PODS.items():
            assert custom[f"{component}_replicas"] == 2
            assert _preferred_spread(custom[f"{component}_affinity"]) == labels
            budget = budgets[f"volcano-{component}"]
            assert budget.inputs["spec"] == {"maxUnavailable": 1, "selector": {"matchLabels": labels}}
            assert plan.named("volcano", "kubernetes:helm.sh/v3:Release").urn in budget.dependencies
    assert VOLCANO_PODS == {
        "scheduler": {"app": "volcano-scheduler"},
        "controller": {"app": "volcano-controller"},
        "admission": {"app": "volcano-admission"},
    }


def test_kuberay_and_cluster_autoscaler_run_a_standby_with_a_budget(dev: PlanResult) -> None:
    values = {r.name: r.inputs["values"] for r in dev.of_type("kubernetes:helm.sh/v3:Release")}
    # kuberay v1.7.0 values.yaml leaderElectionEnabled: true (left to the chart), replicas read by
    # templates/deployment.yaml; the selector is app.kubernetes.io/name + instance.
    kuberay = values["kuberay-operator"]
    assert kuberay["replicas"] == 2 and "leaderElectionEnabled" not in kuberay
    labels = {"app.kubernetes.io/name": "kuberay-operator", "app.kubernetes.io/instance": "kuberay-operator"}
    assert _preferred_spread(kuberay["affinity"]) == labels
    budget = dev.named("kuberay-system-kuberay-operator", "kubernetes:policy/v1:PodDisruptionBudget")
    assert budget.inputs["spec"] == {"maxUnavailable": 1, "selector": {"matchLabels": labels}}
    # cluster-autoscaler elects a leader by default (1.35.2 main.go); its chart renders the budget.
    autoscaler = values["cluster-autoscaler"]
    assert autoscaler["replicaCount"] == 2 and autoscaler["podDisruptionBudget"] == {"maxUnavailable": 1}
    assert "leader-elect" not in autoscaler["extraArgs"]
    assert _preferred_spread(autoscaler["affinity"]) == {
        "app.kubernetes.io/instance": "cluster-autoscaler",
        "app.kubernetes.io/name": "aws-cluster-autoscaler",
    }


def test_the_mpi_operator_runs_a_standby() -> None:
    import pulumi

    from infra.components.schedulers import mpi_operator_gang_scheduling

    upstream = {
        "metadata": {"name": "mpi-operator", "namespace": "mpi-operator"},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "mpi-operator"}},
            "template": {
                "metadata": {"labels": {"app": "mpi-operator"}},
                "spec": {"containers": [{"name": "mpi-operator", "image": "mpioperator/mpi-operator:0.8"}]},
            },
        },
    }
    result = mpi_operator_gang_scheduling(
        pulumi.ResourceTransformArgs(
            True, "kubernetes:apps/v1:Deployment", "mpi-operator/mpi-operator", upstream, pulumi.ResourceOptions()
        )
    )
    spec = result.props["spec"]
    assert spec["replicas"] == 2
    assert _preferred_spread(spec["template"]["spec"]["affinity"]) == spec["selector"]["matchLabels"]


def test_the_capacity_check_counts_the_standbys() -> None:
    from infra.config.models import FeaturesConfig
    from infra.specs.system_capacity import HA_CONTROLLER_REPLICAS, cluster_pods, controller_replicas

    assert HA_CONTROLLER_REPLICAS == 2 and controller_replicas(2) == controller_replicas(3) == 2
    for count in (controller_replicas(2), controller_replicas(1)):
        replicas = {p.name: p.replicas for p in cluster_pods(FeaturesConfig(), ["default"], replicas=count)}
        assert replicas["volcano"] == 3 * count
        for name in ("coredns", "fsx-csi-controller", "kuberay-operator", "mpi-operator", "cluster-autoscaler"):
            assert replicas[name] == count, name
    assert controller_replicas(1) == 1


def test_the_mpi_operator_gets_a_budget_in_the_namespace_its_manifest_creates(dev, prod) -> None:
    # kubeflow/mpi-operator v0.8.2 deploy/v2beta1/mpi-operator.yaml creates Namespace mpi-operator and
    # ships no PodDisruptionBudget; the pack learns the namespace from the pinned manifest's URL.
    from infra.facts.versions import MANIFEST_NAMESPACES, MPI_OPERATOR_MANIFEST
    from offline.plan.policy_run import parse_config, run_policies

    assert MANIFEST_NAMESPACES[MPI_OPERATOR_MANIFEST] == ("mpi-operator",)
    for plan in (dev, prod):
        budget = plan.named("mpi-operator-mpi-operator", "kubernetes:policy/v1:PodDisruptionBudget").inputs
        assert budget["metadata"] == {"name": "mpi-operator", "namespace": "mpi-operator"}
        assert budget["spec"] == {"maxUnavailable": 1, "selector": {"matchLabels": {"app": "mpi-operator"}}}
        report = run_policies(plan.registrations, parse_config({}, "defaults"), "us-west-2")
        assert not [v for v in report.violations if v.policy == "namespace-exists"]


def test_the_mpi_operator_loses_pods_exec_and_nothing_else() -> None:
    # kubeflow/mpi-operator v0.8.2 deploy/v2beta1/mpi-operator.yaml grants `create` on pods/exec in
    # its ClusterRole; the v2 controller calls no exec (pkg/, cmd/), so a compromised image would only
    # use it to run commands in other pods, node agents included (attack path 7).
    import pulumi
    import pytest

    from infra.components.schedulers import mpi_operator_gang_scheduling, mpi_operator_release_image

    pods = {"apiGroups": [""], "resources": ["pods"], "verbs": ["create", "get", "list", "watch", "delete"]}
    exec_ = {"apiGroups": [""], "resources": ["pods/exec"], "verbs": ["create"]}
    upstream = {"metadata": {"name": "mpi-operator"}, "rules": [pods, exec_]}
    role = "kubernetes:rbac.authorization.k8s.io/v1:ClusterRole"
    for transform in (mpi_operator_gang_scheduling, mpi_operator_release_image):
        result = transform(pulumi.ResourceTransformArgs(True, role, "mpi-operator", upstream, pulumi.ResourceOptions()))
        assert result.props["rules"] == [pods]
    assert upstream["rules"] == [pods, exec_]  # the manifest's object itself is left alone
    with pytest.raises(ValueError, match="no pods/exec rule"):
        mpi_operator_release_image(
            pulumi.ResourceTransformArgs(
                True,
                role,
                "mpi-operator",
                {"metadata": {"name": "mpi-operator"}, "rules": [pods]},
                pulumi.ResourceOptions(),
            )
        )
