"""Training pods that mount a claim run as their namespace's id: the ValidatingAdmissionPolicy of
infra/specs/namespace_identity.py, evaluated by a CEL runtime (cel-cpp through cel-expr-python, with the
optional-types and strings extensions Kubernetes' CEL environment includes), its variables bound in
order as the API server binds them (as tests/test_host_access.py does)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from infra.specs import namespace_identity
from offline.plan.runner import PlanResult

IDS = {"default": 20001, "research": 20002, "vision": 20003}
# research reads default's directory (storage.sharedDirectories); vision shares nothing.
SHARED = {"research": {"default": "read-only"}}
NAMESPACES = namespace_identity.identities(IDS, SHARED)
POLICY = "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy"
BINDING = "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicyBinding"


def _env() -> Any:
    from cel_expr_python import cel
    from cel_expr_python.ext import ext_optional, ext_strings

    return cel.NewEnv(
        variables={n: cel.Type.DYN for n in ("object", "oldObject", "request")},
        extensions=[ext_optional.ExtOptional(), ext_strings.ExtStrings()],
    )


def _inline(expression: str, variables: list[dict[str, str]]) -> str:
    # Each variable's expression in place of its name, later ones first (they may name earlier ones).
    for variable in reversed(variables):
        expression = expression.replace(f"variables.{variable['name']}", f"({variable['expression']})")
    assert "variables." not in expression
    return expression


def refusals(
    pod: dict[str, Any], namespace: str, namespaces=NAMESPACES, operation: str = "CREATE", old: Any = None
) -> list[str]:
    """The messages of every validation the pod fails (empty: admitted)."""
    env = _env()
    spec = namespace_identity.admission_policy(namespaces)["spec"]
    data = {"object": pod, "oldObject": old, "request": {"operation": operation, "namespace": namespace}}
    failed = []
    for validation in spec["validations"]:
        if env.compile(_inline(validation["expression"], spec["variables"])).eval(data=data).value() is not True:
            message = env.compile(_inline(validation["messageExpression"], spec["variables"]))
            failed.append(message.eval(data=data).value())
    return failed


def pod(
    run_as: int | None = 20001,
    group: int | None = 20001,
    non_root: bool | None = True,
    claim: bool = True,
    containers: list[dict[str, Any]] | None = None,
    **context: Any,
) -> dict[str, Any]:
    security: dict[str, Any] = {"seccompProfile": {"type": "RuntimeDefault"}, **context}
    for key, value in (("runAsUser", run_as), ("runAsGroup", group), ("runAsNonRoot", non_root)):
        if value is not None:
            security[key] = value
    spec: dict[str, Any] = {
        "securityContext": security,
        "containers": containers or [{"name": "train", "image": "i"}],
    }
    if claim:
        spec["volumes"] = [{"name": "shared", "persistentVolumeClaim": {"claimName": "fsx-claim-default"}}]
    return {"metadata": {"name": "p"}, "spec": spec}


def test_a_pod_running_as_its_namespace_s_id_is_admitted():
    assert refusals(pod(), "default") == []
    assert refusals(pod(20002, 20002), "research") == []
    # Containers may repeat the pod's identity.
    same = [{"name": "c", "image": "i", "securityContext": {"runAsUser": 20001, "runAsGroup": 20001}}]
    assert refusals(pod(containers=same), "default") == []


def test_a_pod_carries_the_group_of_a_directory_it_shares():
    assert refusals(pod(20002, 20002, supplementalGroups=[20001]), "research") == []
    assert refusals(pod(20002, 20002, supplementalGroups=[20002, 20001], fsGroup=20002), "research") == []


@pytest.mark.parametrize(
    ("candidate", "namespace", "says"),
    [
        (pod(0, 0, non_root=False), "default", "runAsUser 20001, runAsGroup 20001"),
        (pod(0, 0, non_root=None), "default", "runAsNonRoot true"),
        (pod(None, None, non_root=None), "default", "runs as the namespace's id"),
        # Another namespace's id: research's pods as default's owner.
        (pod(20001, 20001), "research", "runAsUser 20002"),
        (pod(20001, None), "default", "runAsGroup 20001"),
        (pod(20001, 0), "default", "runAsGroup 20001"),
        (pod(20001, 20001, non_root=False), "default", "runAsNonRoot true"),
    ],
)
def test_a_pod_not_running_as_its_namespace_s_id_is_refused(candidate, namespace, says):
    failed = refusals(candidate, namespace)
    assert failed and any(says in m for m in failed), failed


@pytest.mark.parametrize(
    "field",
    [
        {"runAsUser": 0},
        {"runAsGroup": 0},
        {"runAsUser": 20002},
        {"runAsNonRoot": False},
    ],
)
@pytest.mark.parametrize("where", ["containers", "initContainers"])
def test_no_container_overrides_the_pod_s_identity(field, where):
    candidate = pod()
    container = {"name": "c", "image": "i", "securityContext": field}
    if where == "containers":
        candidate["spec"]["containers"].append(container)
    else:
        candidate["spec"]["initContainers"] = [container]
    failed = refusals(candidate, "default")
    assert failed == ["no container of a pod that mounts a claim in default runs as another user or group than 20001, "
                      "or with runAsNonRoot false"]  # fmt: skip


def test_no_debug_container_joins_as_root():
    running = pod()
    debugged = copy.deepcopy(running)
    debugged["spec"]["ephemeralContainers"] = [{"name": "debug", "image": "i", "securityContext": {"runAsUser": 0}}]
    assert refusals(debugged, "default", operation="UPDATE", old=running)
    debugged["spec"]["ephemeralContainers"][0]["securityContext"] = {"runAsUser": 20001}
    assert refusals(debugged, "default", operation="UPDATE", old=running) == []


@pytest.mark.parametrize(
    ("context", "namespace"),
    [
        ({"supplementalGroups": [20001]}, "vision"),  # vision shares nothing of default's
        ({"supplementalGroups": [20003, 0]}, "vision"),
        ({"supplementalGroups": [20002]}, "default"),  # default shares nothing of research's
        ({"fsGroup": 20001}, "vision"),
    ],
)
def test_a_foreign_group_is_refused(context, namespace):
    number = IDS[namespace]
    failed = refusals(pod(number, number, **context), namespace)
    assert len(failed) == 1 and failed[0].startswith(
        f"a pod that mounts a claim in {namespace} carries only the groups"
    )
    assert f"groups {number} (" in failed[0]


def test_pods_without_a_claim_and_other_namespaces_are_left_alone():
    # A step gate or watchdog with its own non-root user and no claim.
    assert refusals(pod(65532, 65532, claim=False), "default") == []
    # The directory Jobs run as root on purpose, in kube-system; the burn-in in its own namespace. The
    # policy's selector never matches them, and its rules would admit them anyway.
    for namespace in ("kube-system", "neuron-burn-in"):
        assert refusals(pod(0, 0, non_root=False), namespace) == []
    selector = namespace_identity.admission_policy(NAMESPACES)["spec"]["matchConstraints"]["namespaceSelector"]
    assert selector == {
        "matchExpressions": [
            {"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["default", "research", "vision"]}
        ]
    }


def test_the_groups_a_namespace_may_carry():
    assert NAMESPACES == {
        "default": {"id": 20001, "groups": [20001]},
        "research": {"id": 20002, "groups": [20002, 20001]},
        "vision": {"id": 20003, "groups": [20003]},
    }


def test_the_policy_matches_pod_creation_and_debug_containers_and_fails_closed():
    spec = namespace_identity.admission_policy(NAMESPACES)["spec"]
    assert spec["failurePolicy"] == "Fail"
    assert [(r["operations"], r["resources"]) for r in spec["matchConstraints"]["resourceRules"]] == [
        (["CREATE"], ["pods"]),
        (["UPDATE"], ["pods/ephemeralcontainers"]),
    ]
    assert namespace_identity.admission_policy_binding()["spec"] == {
        "policyName": namespace_identity.NAME,
        "validationActions": ["Deny"],
    }


def test_the_stacks_declare_the_policy_with_their_namespaces_ids(dev: PlanResult, prod: PlanResult, plan_with):
    for plan, expected in (
        (dev, {"default": 20001}),
        (prod, {"default": 20001, "research": 20002}),
    ):
        policy = plan.named(namespace_identity.NAME, POLICY)
        binding = plan.named(namespace_identity.NAME, BINDING)
        assert policy.urn in binding.dependencies
        (selector,) = policy.inputs["spec"]["matchConstraints"]["namespaceSelector"]["matchExpressions"]
        assert selector["values"] == sorted(expected)
        ids = next(v for v in policy.inputs["spec"]["variables"] if v["name"] == "id")["expression"]
        assert all(f'"{ns}": {n}' in ids for ns, n in expected.items())
    shared = plan_with(
        trainingNamespaces=["default", "research"],
        namespaceIds={"default": 20001, "research": 20002},
        storage={"sharedDirectories": {"research": {"default": "read-only"}}},
    )
    groups = next(
        v for v in shared.named(namespace_identity.NAME, POLICY).inputs["spec"]["variables"] if v["name"] == "groups"
    )
    assert '"research": [20002, 20001]' in groups["expression"]


def test_nothing_the_cluster_stack_runs_itself_is_refused(dev: PlanResult, prod: PlanResult) -> None:
    """The cluster stack's own pods (the root Jobs in kube-system, the burn-in DaemonSets, the sweeper)
    are outside the training namespaces, and pass the rules wherever they would be evaluated."""
    kinds = ("kubernetes:apps/v1:DaemonSet", "kubernetes:batch/v1:CronJob", "kubernetes:batch/v1:Job")
    for plan in (dev, prod):
        policy = plan.named(namespace_identity.NAME, POLICY)
        training = policy.inputs["spec"]["matchConstraints"]["namespaceSelector"]["matchExpressions"][0]["values"]
        for resource in [r for kind in kinds for r in plan.of_type(kind)]:
            spec = resource.inputs["spec"]
            template = spec["template"] if "template" in spec else spec["jobTemplate"]["spec"]["template"]
            namespace = resource.inputs["metadata"]["namespace"]
            assert namespace not in training, resource.name
            assert refusals({"metadata": {}, "spec": template["spec"]}, namespace) == [], resource.name
