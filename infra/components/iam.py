"""Trust policies and managed-policy ARNs shared by the components."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pulumi
import pulumi_aws as aws

from infra.components.context import ClusterContext
from infra.specs import image_cache

POD_IDENTITY_SERVICE = "pods.eks.amazonaws.com"


def service_trust_policy(service: str, *, tag_session: bool = False, conditions: dict[str, Any] | None = None) -> str:
    """A role trust policy for an AWS service principal (EKS Pod Identity also needs TagSession)."""
    actions = ["sts:AssumeRole", "sts:TagSession"] if tag_session else ["sts:AssumeRole"]
    statement: dict[str, Any] = {"Effect": "Allow", "Principal": {"Service": service}, "Action": actions}
    if conditions:
        statement["Condition"] = conditions
    return json.dumps({"Version": "2012-10-17", "Statement": [statement]})


def pod_identity_trust_policy(cluster: ClusterContext, namespace: str, service_account: str) -> str:
    """Pod Identity may assume the role only for this account, this cluster and this service account.

    EKS Pod Identity tags its AssumeRole session with eks-cluster-arn, kubernetes-namespace and
    kubernetes-service-account (EKS user guide, pod-id-role.adoc and pod-id-abac.adoc, "Enable or
    disable session tags"), so the trust policy can name them as aws:RequestTag conditions; and
    aws:SourceAccount, the account the request comes from (a trust policy with it alone works,
    awslabs/mountpoint-s3-csi-driver#781; EKS best practices recommend it). The cluster is named through the
    eks-cluster-arn tag, not aws:SourceArn: the user guide documents no aws:SourceArn for
    pods.eks.amazonaws.com, and users report it carries the association's ARN, not the cluster's
    (awslabs/mountpoint-s3-csi-driver#781): a wrong value there would refuse every credential.
    Without these conditions any association in the account could bind the role to any cluster,
    namespace or service account.
    """
    return service_trust_policy(
        POD_IDENTITY_SERVICE,
        tag_session=True,
        conditions={
            "StringEquals": {
                "aws:SourceAccount": cluster.account_id,
                "aws:RequestTag/eks-cluster-arn": cluster.cluster_arn,
                "aws:RequestTag/kubernetes-namespace": namespace,
                "aws:RequestTag/kubernetes-service-account": service_account,
            }
        },
    )


def bounded_roles(boundary_arn: str) -> pulumi.ResourceTransform:
    """A transform giving every IAM role a component creates ``boundary_arn`` as its permissions
    boundary: for pulumi-eks's Cluster, whose cluster service role (nodejs/eks/servicerole.ts
    ServiceRole, made in nodejs/eks/cluster/cluster.ts when no ``serviceRole`` is given) takes no
    boundary argument. Passing our own ``service_role`` instead would replace the EKS cluster (its
    roleArn cannot change in place); the transform sets the boundary on the existing role. Pulumi
    engine transforms reach the children of a remote component (as for the MPI operator's manifest,
    infra/components/schedulers.py)."""

    def transform(args: pulumi.ResourceTransformArgs) -> pulumi.ResourceTransformResult | None:
        if args.type_ != "aws:iam/role:Role":
            return None
        return pulumi.ResourceTransformResult(props={**args.props, "permissionsBoundary": boundary_arn}, opts=args.opts)

    return transform


def managed_policy(partition: str, name: str) -> str:
    return f"arn:{partition}:iam::aws:policy/{name}"


def node_role_with_policies(
    name: str, description: str, cluster: ClusterContext, policies: Sequence[str], opts: pulumi.ResourceOptions
) -> tuple[aws.iam.Role, list[pulumi.Resource]]:
    """An EC2 node role (``name``) with the managed ``policies`` attached (``name-<policy>``), and the pull
    through the cluster's cache of public images (``name-pull-through-cache``, infra/specs/image_cache.py):
    on every node role, since the managed groups share one role and any of its nodes may run a cached image."""
    role = aws.iam.Role(
        name,
        assume_role_policy=service_trust_policy("ec2.amazonaws.com"),
        description=description,
        permissions_boundary=cluster.permissions_boundary_arn,
        tags=dict(cluster.tags),
        opts=opts,
    )
    attached: list[pulumi.Resource] = [
        aws.iam.RolePolicyAttachment(
            f"{name}-{policy}", role=role.name, policy_arn=managed_policy(cluster.partition, policy), opts=opts
        )
        for policy in policies
    ]
    attached.append(
        aws.iam.RolePolicy(
            f"{name}-pull-through-cache",
            role=role.id,
            policy=image_cache.node_policy(cluster.partition, cluster.region, cluster.account_id, cluster.cluster_name),
            opts=opts,
        )
    )
    return role, attached


def pod_identity_role(
    name: str,
    *,
    cluster: ClusterContext,
    service_account: tuple[str, str],
    description: str,
    parent: pulumi.Resource,
    inline_policy: pulumi.Input[str] | None = None,
    managed_policy_arns: tuple[str, ...] = (),
    associate_in: pulumi.Input[str] | None = None,
    depends_on: list[pulumi.Resource] | None = None,
) -> tuple[aws.iam.Role, list[pulumi.Resource]]:
    """An IAM role the pods of one (namespace, service account) of ``cluster`` assume through EKS Pod Identity.

    ``associate_in`` is the cluster name when the association is declared here; add-ons bind
    theirs through the add-on instead. Returns the role and everything a consumer should wait
    for (permissions, association).
    """
    namespace, account = service_account
    opts = pulumi.ResourceOptions(parent=parent)
    role = aws.iam.Role(
        name,
        assume_role_policy=pod_identity_trust_policy(cluster, namespace, account),
        description=description,
        permissions_boundary=cluster.permissions_boundary_arn,
        tags=cluster.tags,
        opts=opts,
    )
    ready: list[pulumi.Resource] = []
    if inline_policy is not None:
        ready.append(aws.iam.RolePolicy(f"{name}-policy", role=role.id, policy=inline_policy, opts=opts))
    for i, arn in enumerate(managed_policy_arns):
        ready.append(aws.iam.RolePolicyAttachment(f"{name}-attach-{i}", role=role.name, policy_arn=arn, opts=opts))
    if associate_in is not None:
        ready.append(
            aws.eks.PodIdentityAssociation(
                f"{name}-identity",
                cluster_name=associate_in,
                namespace=namespace,
                service_account=account,
                role_arn=role.arn,
                tags=cluster.tags,
                opts=pulumi.ResourceOptions(parent=parent, depends_on=depends_on or []),
            )
        )
    return role, ready
