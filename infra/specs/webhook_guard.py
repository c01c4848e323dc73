"""What Volcano's admission service may do to webhook configurations: a ValidatingAdmissionPolicy.

Volcano's chart grants its admission service account ``create`` and ``update`` on every mutating and
validating webhook configuration (volcano-sh/volcano v1.15.1
installer/helm/chart/volcano/templates/admission.yaml, ClusterRole ``<release>-admission``). With that,
a compromised admission image could register a mutating webhook of its own that rewrites a node
agent's pod (privileged, host paths) on its way in, which the host-access policy admits
(infra/specs/host_access.py): the rewritten pod still comes from the DaemonSet controller.

The binary needs far less (v1.15.1 cmd/webhook-manager/app/util.go, ``addCaCertForWebhook``, called
once per enabled admission path by cmd/webhook-manager/app/server.go): it Gets the configurations the
chart's templates/webhooks.yaml creates, named ``volcano-admission-service`` plus the admission path
with "/" replaced by "-", sets ``clientConfig.caBundle`` of every webhook in them to its own CA, and
Updates the configuration when a bundle differed. Nothing in its ``cmd/`` or ``pkg/`` creates, patches
or deletes a webhook configuration. So for requests by that account this policy refuses every CREATE
and DELETE, and every UPDATE but one of a ``volcano-admission-service-*`` configuration whose
webhooks are the same ones, each unchanged but for its CA bundle, with the same labels, annotations,
finalizers and owners. The CA bundle only says whom the API server trusts when it calls the
configuration's own service, which is Volcano's admission anyway.

A ValidatingAdmissionPolicy is evaluated for webhook configurations, unlike admission webhooks:
kubernetes/apiserver (v0.32.0 to v0.36.3, the staging copy of Kubernetes 1.32 to 1.36)
pkg/admission/plugin/policy/generic/plugin.go skips (``shouldIgnoreResource``, in 1.36
``isExcludedFromAllHooks``/``isExcludedFromAPIHooks``) only the admission policies and their bindings
(``admissionResources``) and what the API server adds through ``SetExcludedAdmissionResources``:
kubernetes/kubernetes pkg/controlplane/apiserver/admission/config.go passes
``exclusion.Excluded()``, which pkg/kubeapiserver/admission/exclusion/resources.go lists as the
token and access reviews only (both read on the main branch, commit 008b3652 for the list: that
repository is too large to check out at a tag here). The exemption of webhook configurations is
webhook admission's alone (apiserver pkg/admission/plugin/webhook/generic/webhook.go,
``rules.IsExemptAdmissionConfigurationResource``). The API server evaluates the policy in process: no
webhook that could be down, and ``failurePolicy: Fail`` refuses on any evaluation error.
"""

from __future__ import annotations

from typing import Any

from infra.specs import admission

NAME = "volcano-admission-webhook-ca-only"
# cmd/webhook-manager/app/util.go volcanoAdmissionPrefix, joined to a path that starts with "/".
WEBHOOK_CONFIGURATION_PREFIX = "volcano-admission-service-"
# Every field of a webhook but the two the expression treats on their own: ``name``, by which the old
# and the new webhooks are paired, and ``clientConfig``, compared without its CA bundle. The fields
# of MutatingWebhook (ValidatingWebhook has all but reinvocationPolicy) and WebhookClientConfig in
# kubernetes/api admissionregistration/v1/types.go, the same from v0.32.0 to v0.36.3.
WEBHOOK_FIELDS = (
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
)
CLIENT_CONFIG_FIELDS = ("url", "service")
# The metadata a client may write; the API server's own (resourceVersion, generation, managedFields)
# changes on every update.
METADATA_FIELDS = ("labels", "annotations", "finalizers", "ownerReferences")


def admission_username(release: str, namespace: str) -> str:
    """The user the admission Deployment calls the API as: the chart's ServiceAccount
    ``<release>-admission`` in the release's namespace (templates/admission.yaml)."""
    return f"system:serviceaccount:{namespace}:{release}-admission"


def _same(new: str, old: str, fields: tuple[str, ...]) -> str:
    """Each field absent from both, or present in both and equal (optional values compare so)."""
    return " && ".join(f"{new}.?{field} == {old}.?{field}" for field in fields)


_SAME_WEBHOOK = (
    f"o.name == w.name && {_same('w.clientConfig', 'o.clientConfig', CLIENT_CONFIG_FIELDS)}"
    f" && {_same('w', 'o', WEBHOOK_FIELDS)}"
)
_UPDATE = "request.operation != 'UPDATE' || "
VALIDATIONS: tuple[tuple[str, str], ...] = (
    (
        "request.operation == 'UPDATE'",
        "Volcano's admission service may not create or delete webhook configurations",
    ),
    (
        f"{_UPDATE}oldObject.metadata.name.startsWith('{WEBHOOK_CONFIGURATION_PREFIX}')",
        f"Volcano's admission service may update only its own webhook configurations ({WEBHOOK_CONFIGURATION_PREFIX}*)",
    ),
    (
        f"{_UPDATE}{_same('object.metadata', 'oldObject.metadata', METADATA_FIELDS)}",
        "Volcano's admission service may not change a webhook configuration's labels, annotations, "
        "finalizers or owners",
    ),
    (
        f"{_UPDATE}variables.newWebhooks.size() == variables.oldWebhooks.size()"
        " && variables.oldWebhooks.all(o, variables.newWebhooks.exists(w, w.name == o.name))"
        f" && variables.newWebhooks.all(w, variables.oldWebhooks.exists(o, {_SAME_WEBHOOK}))",
        "Volcano's admission service may change only the clientConfig.caBundle of its webhooks",
    ),
)


def admission_policy(username: str) -> dict[str, Any]:
    return admission.validating_policy(
        NAME,
        {
            # A PATCH reaches admission as an UPDATE.
            "matchConstraints": {
                "resourceRules": [
                    {
                        "apiGroups": ["admissionregistration.k8s.io"],
                        "apiVersions": ["*"],
                        "operations": ["CREATE", "UPDATE", "DELETE"],
                        "resources": ["mutatingwebhookconfigurations", "validatingwebhookconfigurations"],
                    }
                ]
            },
            # Everyone else (Helm installing the chart's configurations, the cluster's admins) is untouched.
            "matchConditions": [
                {"name": "volcano-admission", "expression": f"request.userInfo.username == '{username}'"}
            ],
            "variables": [
                {"name": "oldWebhooks", "expression": "oldObject.?webhooks.orValue([])"},
                {"name": "newWebhooks", "expression": "object.?webhooks.orValue([])"},
            ],
            "validations": [{"expression": e, "message": m} for e, m in VALIDATIONS],
        },
    )


def admission_policy_binding() -> dict[str, Any]:
    return admission.deny_binding(NAME)
