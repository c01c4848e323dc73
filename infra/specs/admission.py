"""The envelope every ValidatingAdmissionPolicy of this program shares; the rules themselves live in
host_access.py, namespace_identity.py, webhook_guard.py and burn_in_objects.py."""

from __future__ import annotations

from typing import Any

# Pods as they are created, and the one change a running pod's spec allows: containers joining it.
POD_WRITES: list[dict[str, Any]] = [
    {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]},
    {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["UPDATE"], "resources": ["pods/ephemeralcontainers"]},
]


def validating_policy(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    """``spec`` under a policy named ``name`` that refuses when it cannot evaluate: the API server
    evaluates it in process, so there is no webhook that could be down."""
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name},
        "spec": {"failurePolicy": "Fail", **spec},
    }


def deny_binding(name: str) -> dict[str, Any]:
    """The binding of the policy ``name`` that refuses what it refuses (the policy says where)."""
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": name},
        "spec": {"policyName": name, "validationActions": ["Deny"]},
    }
