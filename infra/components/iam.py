"""Trust policies and managed-policy ARNs shared by the components."""

from __future__ import annotations

import json

import pulumi
import pulumi_aws as aws


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


def pod_identity_role(
    name: str,
    *,
    description: str,
    parent: "pulumi.Resource",
    tags: dict[str, str],
    inline_policy: "str | None" = None,
    managed_policy_arns: "tuple[str, ...]" = (),
    association: "tuple[pulumi.Input[str], str, str] | None" = None,
    depends_on: "list[pulumi.Resource] | None" = None,
) -> "tuple[aws.iam.Role, list[pulumi.Resource]]":
    """An IAM role pods assume through EKS Pod Identity, with its permissions.

    ``association`` is (cluster name, namespace, service account) when the role is bound here;
    add-ons bind theirs through the add-on instead. Returns the role and everything a
    consumer should wait for (permissions, association).
    """
    opts = pulumi.ResourceOptions(parent=parent)
    role = aws.iam.Role(
        name, assume_role_policy=pod_identity_trust_policy(), description=description, tags=tags, opts=opts
    )
    ready: list[pulumi.Resource] = []
    if inline_policy is not None:
        ready.append(aws.iam.RolePolicy(f"{name}-policy", role=role.id, policy=inline_policy, opts=opts))
    for i, arn in enumerate(managed_policy_arns):
        ready.append(aws.iam.RolePolicyAttachment(f"{name}-attach-{i}", role=role.name, policy_arn=arn, opts=opts))
    if association is not None:
        cluster_name, namespace, service_account = association
        ready.append(
            aws.eks.PodIdentityAssociation(
                f"{name}-identity",
                cluster_name=cluster_name,
                namespace=namespace,
                service_account=service_account,
                role_arn=role.arn,
                tags=tags,
                opts=pulumi.ResourceOptions(parent=parent, depends_on=depends_on or []),
            )
        )
    return role, ready
