"""Training namespaces, the service account their jobs run as with S3 read access of its own, and
the NetworkPolicy that keeps every pod of a training namespace away from the instance metadata
service."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from infra.components.context import ClusterContext
from infra.components.iam import pod_identity_role
from infra.specs.node_security import metadata_wall
from infra.specs.pod_security import pod_security_labels

TRAINING_SERVICE_ACCOUNT = "training"


def s3_read_policy(partition: str, buckets: list[str]) -> str:
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Sid": "List",
                    "Effect": "Allow",
                    "Action": ["s3:ListBucket", "s3:GetBucketLocation"],
                    "Resource": [f"arn:{partition}:s3:::{b}" for b in buckets],
                },
                {
                    "Sid": "Read",
                    "Effect": "Allow",
                    "Action": ["s3:GetObject"],
                    "Resource": [f"arn:{partition}:s3:::{b}/*" for b in buckets],
                },
            ],
        }
    )


@dataclass
class TrainingIdentitiesArgs:
    data_buckets: dict[str, list[str]]
    """Per training namespace, the buckets its role reads (the namespaces are its keys)."""


class TrainingIdentities(pulumi.ComponentResource):
    """Per training namespace: the namespace itself (unless built in), a service account whose pods
    assume the namespace's own IAM role through EKS Pod Identity, and the metadata wall (``wall_off``)."""

    namespaces: dict[str, pulumi.Resource]
    role_arns: dict[str, pulumi.Output[str]]

    def __init__(
        self, name: str, ctx: ClusterContext, args: TrainingIdentitiesArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("trainium:infra:TrainingIdentities", name, None, opts)
        self.namespaces = {}
        self.role_arns = {}
        self._in_namespace: dict[str, pulumi.ResourceOptions] = {}
        for namespace, buckets in args.data_buckets.items():
            k8s_child = pulumi.ResourceOptions(parent=self, provider=ctx.kubernetes)
            labels = {"purpose": "training", **pod_security_labels()}
            if namespace != "default":
                ns = k8s.core.v1.Namespace(
                    f"ns-{namespace}", metadata={"name": namespace, "labels": labels}, opts=k8s_child
                )
                self.namespaces[namespace] = ns
                deps: list[pulumi.Resource] = [ns]
            else:
                # The built-in namespace is not ours to create or delete: a server-side apply patch
                # owns just these labels, and `pulumi destroy` removes just them again.
                deps = [
                    k8s.core.v1.NamespacePatch(
                        f"ns-{namespace}-labels", metadata={"name": namespace, "labels": labels}, opts=k8s_child
                    )
                ]
            in_namespace = pulumi.ResourceOptions(parent=self, provider=ctx.kubernetes, depends_on=deps)
            k8s.core.v1.ServiceAccount(
                f"{namespace}-{TRAINING_SERVICE_ACCOUNT}-sa",
                metadata={"name": TRAINING_SERVICE_ACCOUNT, "namespace": namespace},
                opts=in_namespace,
            )
            self._in_namespace[namespace] = in_namespace
            # One role per namespace: a job in one namespace never holds another's data access.
            role, _ = pod_identity_role(
                f"{name}-{namespace}-role",
                description=f"Training jobs in namespace {namespace}: read training data",
                parent=self,
                cluster=ctx,
                service_account=(namespace, TRAINING_SERVICE_ACCOUNT),
                inline_policy=s3_read_policy(ctx.partition, buckets) if buckets else None,
            )
            # Declared here under the name it always had: a changed role is an in-place update
            # (UpdatePodIdentityAssociation takes roleArn), where a new resource would be refused as
            # a second association of the same service account.
            aws.eks.PodIdentityAssociation(
                f"{namespace}-{TRAINING_SERVICE_ACCOUNT}-identity",
                cluster_name=ctx.cluster_name_output,
                namespace=namespace,
                service_account=TRAINING_SERVICE_ACCOUNT,
                role_arn=role.arn,
                tags=ctx.tags,
                opts=pulumi.ResourceOptions(parent=self),
            )
            self.role_arns[namespace] = role.arn
        self.register_outputs({"roleArns": self.role_arns})

    def wall_off(self, file_system_addresses: pulumi.Input[list[str]]) -> None:
        """Each namespace's metadata wall, which also keeps its pods from the file system's servers
        (infra/specs/node_security.py): declared once the file system exists, whose addresses it
        names, under this component as before, so its URN stays the same."""
        addresses = pulumi.Output.from_input(file_system_addresses)
        for namespace, opts in self._in_namespace.items():
            wall = metadata_wall(namespace)

            def spec(servers: list[str], namespace: str = namespace) -> dict[str, Any]:
                return metadata_wall(namespace, servers)["spec"]

            k8s.networking.v1.NetworkPolicy(
                f"{namespace}-{wall['metadata']['name']}",
                metadata=wall["metadata"],
                spec=addresses.apply(spec),
                opts=opts,
            )

    def depends_for(self, namespace: str) -> list[pulumi.Resource]:
        """What an object in ``namespace`` must wait for."""
        return [self.namespaces[namespace]] if namespace in self.namespaces else []
