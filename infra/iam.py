"""Trust policies and managed-policy ARNs shared by the components."""

from __future__ import annotations

import json


def service_trust_policy(service: str, *, tag_session: bool = False) -> str:
    """A role trust policy for an AWS service principal (EKS Pod Identity also needs TagSession)."""
    actions = ["sts:AssumeRole", "sts:TagSession"] if tag_session else ["sts:AssumeRole"]
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [{"Effect": "Allow", "Principal": {"Service": service}, "Action": actions}],
        }
    )


def pod_identity_trust_policy() -> str:
    return service_trust_policy("pods.eks.amazonaws.com", tag_session=True)


def managed_policy(partition: str, name: str) -> str:
    return f"arn:{partition}:iam::aws:policy/{name}"
