"""Volcano's admission service may only set the CA bundle of its own webhook configurations: the
ValidatingAdmissionPolicy of infra/specs/webhook_guard.py, evaluated by a CEL runtime (cel-cpp through
cel-expr-python, with the optional-types extension Kubernetes' CEL environment includes), its match
condition first and its variables inlined, as the API server binds them."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from infra.components.schedulers import VOLCANO_NAMESPACE, VOLCANO_RELEASE
from infra.facts.versions import CHARTS
from infra.specs import webhook_guard
from offline.plan.runner import PlanResult

ADMISSION = webhook_guard.admission_username(VOLCANO_RELEASE, VOLCANO_NAMESPACE)
POLICY = webhook_guard.admission_policy(ADMISSION)
POLICY_TYPE = "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy"
BINDING_TYPE = "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicyBinding"
CA = "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0t"  # base64, as a []byte field is in the object


def refused_by(
    operation: str, new: dict[str, Any] | None, old: dict[str, Any] | None, username: str = ADMISSION
) -> list[int] | None:
    """The indexes of the policy's validations this request fails; None when its match condition
    leaves the request alone. ``new`` is null for a DELETE, ``old`` for a CREATE."""
    from cel_expr_python import cel
    from cel_expr_python.ext import ext_optional

    env = cel.NewEnv(
        variables={n: cel.Type.DYN for n in ("object", "oldObject", "request")},
        extensions=[ext_optional.ExtOptional()],
    )
    spec = POLICY["spec"]
    data = {"object": new, "oldObject": old, "request": {"operation": operation, "userInfo": {"username": username}}}

    def value(expression: str) -> Any:
        for variable in reversed(spec["variables"]):
            expression = expression.replace(f"variables.{variable['name']}", f"({variable['expression']})")
        assert "variables." not in expression
        try:
            return env.compile(expression).eval(data=data).value()
        except Exception as error:  # an evaluation error refuses (failurePolicy: Fail)
            return error

    if not all(value(c["expression"]) is True for c in spec["matchConditions"]):
        return None
    return [i for i, v in enumerate(spec["validations"]) if value(v["expression"]) is not True]


def webhook(path: str, name: str, mutating: bool) -> dict[str, Any]:
    """A webhook as the chart's templates/webhooks.yaml (volcano-sh/volcano v1.15.1) renders it and the
    API server stores it: release `volcano` in `volcano-system`, no caBundle yet (the chart sets none)."""
    hook: dict[str, Any] = {
        "admissionReviewVersions": ["v1"],
        "clientConfig": {
            "service": {"name": "volcano-admission-service", "namespace": "volcano-system", "path": path, "port": 443}
        },
        "failurePolicy": "Fail",
        "matchPolicy": "Equivalent",
        "name": name,
        "namespaceSelector": {
            "matchExpressions": [
                {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["volcano-system", "kube-system"]}
            ]
        },
        "objectSelector": {},
        "rules": [
            {
                "apiGroups": ["batch.volcano.sh"],
                "apiVersions": ["v1alpha1"],
                "operations": ["CREATE"],
                "resources": ["jobs"],
                "scope": "*",
            }
        ],
        "sideEffects": "NoneOnDryRun",
        "timeoutSeconds": 10,
    }
    if mutating:
        hook["reinvocationPolicy"] = "Never"
    return hook


# Each path's webhook name in templates/webhooks.yaml.
CHART_WEBHOOKS = {"/jobs/mutate": "mutatejob.volcano.sh", "/jobs/validate": "validatejob.volcano.sh"}


def configuration(path: str, kind: str, *hooks: dict[str, Any]) -> dict[str, Any]:
    """The configuration of one admission path, holding ``hooks`` or the chart's one webhook."""
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": kind,
        "metadata": {
            # cmd/webhook-manager/app/util.go: volcanoAdmissionPrefix + the path with "/" made "-".
            "name": "volcano-admission-service" + path.replace("/", "-"),
            "labels": {"app.kubernetes.io/managed-by": "Helm"},
            "annotations": {"meta.helm.sh/release-name": "volcano", "meta.helm.sh/release-namespace": "volcano-system"},
            "resourceVersion": "1",
            "generation": 1,
            "managedFields": [{"manager": "helm", "operation": "Update"}],
        },
        "webhooks": list(hooks) or [webhook(path, CHART_WEBHOOKS[path], kind.startswith("Mutating"))],
    }


JOBS_MUTATE = configuration("/jobs/mutate", "MutatingWebhookConfiguration")
JOBS_VALIDATE = configuration("/jobs/validate", "ValidatingWebhookConfiguration")


def with_ca(stored: dict[str, Any], ca: str = CA) -> dict[str, Any]:
    """The update addCaCertForWebhook sends (v1.15.1 cmd/webhook-manager/app/util.go): the object it
    Got, with every webhook's clientConfig.caBundle set to its CA; the API server moves the
    resourceVersion, generation and managedFields."""
    new = copy.deepcopy(stored)
    for hook in new["webhooks"]:
        hook["clientConfig"]["caBundle"] = ca
    new["metadata"]["resourceVersion"] = "2"
    new["metadata"]["generation"] = 2
    new["metadata"]["managedFields"].append({"manager": "vc-webhook-manager", "operation": "Update"})
    return new


def test_the_admission_services_own_ca_bundle_update_is_admitted():
    for stored in (JOBS_MUTATE, JOBS_VALIDATE):
        assert refused_by("UPDATE", with_ca(stored), stored) == [], stored["kind"]
        # A restart with a new certificate replaces the bundle it set before.
        assert refused_by("UPDATE", with_ca(with_ca(stored), "bmV3"), with_ca(stored)) == []
    two = configuration(
        "/jobs/validate",
        "ValidatingWebhookConfiguration",
        webhook("/jobs/validate", "validatejob.volcano.sh", mutating=False),
        webhook("/jobs/validate", "second.volcano.sh", mutating=False),
    )
    assert refused_by("UPDATE", with_ca(two), two) == []


def changed(change) -> dict[str, Any]:
    new = with_ca(JOBS_MUTATE)
    change(new["webhooks"][0])
    return new


CHANGES = {
    "rules": lambda w: w["rules"][0]["resources"].append("pods"),
    "rules for pods": lambda w: w.update(rules=[{**w["rules"][0], "apiGroups": [""], "resources": ["pods"]}]),
    "namespaceSelector": lambda w: w["namespaceSelector"]["matchExpressions"][0]["values"].remove("kube-system"),
    "no namespaceSelector": lambda w: w.pop("namespaceSelector"),
    "objectSelector": lambda w: w.update(objectSelector={"matchLabels": {"app": "x"}}),
    "clientConfig.service.name": lambda w: w["clientConfig"]["service"].update(name="elsewhere"),
    "clientConfig.service.namespace": lambda w: w["clientConfig"]["service"].update(namespace="default"),
    "clientConfig.service.path": lambda w: w["clientConfig"]["service"].update(path="/pods/mutate"),
    "clientConfig.url": lambda w: w["clientConfig"].update(url="https://attacker.example/mutate"),
    "clientConfig.url instead of service": lambda w: w.update(
        clientConfig={"url": "https://a.example/", "caBundle": CA}
    ),
    "failurePolicy": lambda w: w.update(failurePolicy="Ignore"),
    "reinvocationPolicy": lambda w: w.update(reinvocationPolicy="IfNeeded"),
    "matchConditions": lambda w: w.update(matchConditions=[{"name": "all", "expression": "true"}]),
    "timeoutSeconds": lambda w: w.update(timeoutSeconds=30),
    "name": lambda w: w.update(name="other.volcano.sh"),
}


@pytest.mark.parametrize("change", CHANGES.values(), ids=CHANGES.keys())
def test_any_other_change_to_a_webhook_is_refused(change):
    assert refused_by("UPDATE", changed(change), JOBS_MUTATE) == [3]


@pytest.mark.parametrize("field", webhook_guard.WEBHOOK_FIELDS)
def test_every_field_of_a_webhook_is_compared(field):
    """Set, changed or removed: each field the policy lists (all of MutatingWebhook's but name and
    clientConfig, kubernetes/api admissionregistration/v1 types.go v0.35.0) counts."""
    assert refused_by("UPDATE", changed(lambda w: w.update({field: "changed"})), JOBS_MUTATE) == [3]
    if field in JOBS_MUTATE["webhooks"][0]:
        assert refused_by("UPDATE", changed(lambda w: w.pop(field)), JOBS_MUTATE) == [3]


def test_the_policy_lists_every_field_of_a_webhook():
    """The json names of MutatingWebhook (ValidatingWebhook has the same but reinvocationPolicy) and
    WebhookClientConfig in kubernetes/api admissionregistration/v1/types.go, the same at v0.32.0,
    v0.35.0 and v0.36.3: a field missing here would be free to change."""
    mutating_webhook = {
        "name",
        "clientConfig",
        "rules",
        "failurePolicy",
        "matchPolicy",
        "namespaceSelector",
        "objectSelector",
        "sideEffects",
        "timeoutSeconds",
        "admissionReviewVersions",
        "reinvocationPolicy",
        "matchConditions",
    }
    assert {"name", "clientConfig", *webhook_guard.WEBHOOK_FIELDS} == mutating_webhook
    assert {"caBundle", *webhook_guard.CLIENT_CONFIG_FIELDS} == {"url", "service", "caBundle"}


def test_every_field_the_chart_renders_is_compared():
    for stored in (JOBS_MUTATE, JOBS_VALIDATE):
        hook = stored["webhooks"][0]
        assert set(hook) <= {"name", "clientConfig", *webhook_guard.WEBHOOK_FIELDS}
        assert set(hook["clientConfig"]) <= {"caBundle", *webhook_guard.CLIENT_CONFIG_FIELDS}


def test_webhooks_may_not_be_added_removed_or_swapped():
    added = with_ca(JOBS_MUTATE)
    added["webhooks"].append({**copy.deepcopy(added["webhooks"][0]), "name": "mutatepod.volcano.sh"})
    assert refused_by("UPDATE", added, JOBS_MUTATE) == [3]
    two = configuration(
        "/jobs/mutate",
        "MutatingWebhookConfiguration",
        webhook("/jobs/mutate", "mutatejob.volcano.sh", mutating=True),
        webhook("/jobs/mutate", "second.volcano.sh", mutating=True),
    )
    removed = with_ca(two)
    removed["webhooks"].pop()
    assert refused_by("UPDATE", removed, two) == [3]
    # The same count, one of them twice: the other one is gone.
    doubled = with_ca(two)
    doubled["webhooks"][1] = copy.deepcopy(doubled["webhooks"][0])
    assert refused_by("UPDATE", doubled, two) == [3]
    emptied = with_ca(JOBS_MUTATE)
    emptied["webhooks"] = []
    assert refused_by("UPDATE", emptied, JOBS_MUTATE) == [3]


def test_no_webhook_configuration_may_be_created_or_deleted():
    # One in Volcano's own name (the chart's pods/mutate, which the stacks leave off) and another.
    own_name = copy.deepcopy(JOBS_MUTATE)
    own_name["metadata"]["name"] = "volcano-admission-service-pods-mutate"
    other = copy.deepcopy(JOBS_VALIDATE)
    other["metadata"]["name"] = "rewrite-node-agents"
    for new in (own_name, other):
        assert refused_by("CREATE", with_ca(new), None) == [0]
    assert refused_by("DELETE", None, JOBS_MUTATE) == [0]


def test_another_configuration_is_refused_even_for_its_ca_bundle():
    other = copy.deepcopy(JOBS_MUTATE)
    other["metadata"]["name"] = "aws-load-balancer-webhook"
    assert refused_by("UPDATE", with_ca(other), other) == [1]
    # The prefix with its separator: a name that merely starts alike is not Volcano's.
    other["metadata"]["name"] = "volcano-admission-serviceX"
    assert refused_by("UPDATE", with_ca(other), other) == [1]


@pytest.mark.parametrize(
    "change",
    [
        lambda m: m["labels"].update(extra="1"),
        lambda m: m.pop("annotations"),
        lambda m: m.update(finalizers=["example.com/keep"]),
        lambda m: m.update(ownerReferences=[{"apiVersion": "v1", "kind": "Namespace", "name": "x", "uid": "1"}]),
    ],
)
def test_the_configurations_metadata_is_left_as_it_is(change):
    new = with_ca(JOBS_VALIDATE)
    change(new["metadata"])
    assert refused_by("UPDATE", new, JOBS_VALIDATE) == [2]


def test_other_users_are_untouched():
    rewritten = changed(CHANGES["rules for pods"])
    for username in ("kubernetes-admin", "system:serviceaccount:volcano-system:volcano-controllers"):
        assert refused_by("CREATE", rewritten, None, username) is None
        assert refused_by("UPDATE", rewritten, JOBS_MUTATE, username) is None
        assert refused_by("DELETE", None, JOBS_MUTATE, username) is None


def test_the_policy_matches_webhook_configurations_only_and_refuses_on_error():
    spec = POLICY["spec"]
    assert spec["failurePolicy"] == "Fail"
    assert spec["matchConstraints"]["resourceRules"] == [
        {
            "apiGroups": ["admissionregistration.k8s.io"],
            "apiVersions": ["*"],
            "operations": ["CREATE", "UPDATE", "DELETE"],
            "resources": ["mutatingwebhookconfigurations", "validatingwebhookconfigurations"],
        }
    ]
    assert ADMISSION == "system:serviceaccount:volcano-system:volcano-admission"
    assert webhook_guard.admission_policy_binding()["spec"] == {
        "policyName": webhook_guard.NAME,
        "validationActions": ["Deny"],
    }


def test_the_policy_was_read_against_the_pinned_volcano():
    """What the admission binary does to webhook configurations, and the names the chart gives them,
    were read at v1.15.1: another version's cmd/webhook-manager/app/util.go and templates/webhooks.yaml
    must be read again before the pin moves."""
    assert CHARTS["volcano"].version == "1.15.1"


def test_the_stacks_guard_the_release_they_install_before_it_starts(dev: PlanResult, prod: PlanResult) -> None:
    for plan in (dev, prod):
        release = plan.named("volcano", "kubernetes:helm.sh/v3:Release")
        policy = plan.named(webhook_guard.NAME, POLICY_TYPE)
        binding = plan.named(webhook_guard.NAME, BINDING_TYPE)
        # The chart's ServiceAccount is <release>-admission in the release's namespace (templates/admission.yaml).
        username = webhook_guard.admission_username(release.inputs["name"], release.inputs["namespace"])
        assert policy.inputs["spec"] == webhook_guard.admission_policy(username)["spec"]
        assert binding.inputs["spec"]["policyName"] == webhook_guard.NAME
        assert policy.urn in binding.dependencies and binding.urn in release.dependencies
