"""Training namespaces and the service account their jobs run as, with S3 read access."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from infra.components.iam import pod_identity_role
from infra.plans.pod_security import pod_security_labels
from infra.facts.versions import KUBERNETES_VERSION

TRAINING_SERVICE_ACCOUNT = "training"


def s3_read_policy(partition: str, buckets: list[str]) -> str:
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [
                {"Sid": "List", "Effect": "Allow", "Action": ["s3:ListBucket", "s3:GetBucketLocation"],
                 "Resource": [f"arn:{partition}:s3:::{b}" for b in buckets]},
                {"Sid": "Read", "Effect": "Allow", "Action": ["s3:GetObject"],
                 "Resource": [f"arn:{partition}:s3:::{b}/*" for b in buckets]},
            ],
        }
    )


@dataclass
class TrainingIdentitiesArgs:
    cluster_name: pulumi.Input[str]
    partition: str
    namespaces: list[str]
    data_buckets: list[str]
    tags: dict[str, str] = field(default_factory=dict)
    # Pod Security levels are pinned to the cluster's version (see pod_security_labels).
    kubernetes_version: str = KUBERNETES_VERSION


class TrainingIdentities(pulumi.ComponentResource):
    """Per training namespace: the namespace itself (unless built in) and a service account whose
    pods assume one IAM role through EKS Pod Identity."""

    namespaces: dict[str, pulumi.Resource]

    def __init__(
        self, name: str, args: TrainingIdentitiesArgs, provider: k8s.Provider, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("trainium:infra:TrainingIdentities", name, None, opts)
        aws_child = pulumi.ResourceOptions(parent=self)
        role, _ = pod_identity_role(
            f"{name}-role",
            description="Training jobs: read training data",
            parent=self,
            tags=args.tags,
            inline_policy=s3_read_policy(args.partition, args.data_buckets) if args.data_buckets else None,
        )
        self.namespaces = {}
        for namespace in args.namespaces:
            k8s_child = pulumi.ResourceOptions(parent=self, provider=provider)
            deps: list[pulumi.Resource] = []
            labels = {"purpose": "training", **pod_security_labels(args.kubernetes_version)}
            if namespace != "default":
                ns = k8s.core.v1.Namespace(f"ns-{namespace}", metadata={"name": namespace, "labels": labels}, opts=k8s_child)
                self.namespaces[namespace] = ns
                deps = [ns]
            else:
                # The built-in namespace is not ours to create or delete: a server-side apply patch
                # owns just these labels, and `pulumi destroy` removes just them again.
                deps = [k8s.core.v1.NamespacePatch(f"ns-{namespace}-labels", metadata={"name": namespace, "labels": labels}, opts=k8s_child)]
            k8s.core.v1.ServiceAccount(
                f"{namespace}-{TRAINING_SERVICE_ACCOUNT}-sa",
                metadata={"name": TRAINING_SERVICE_ACCOUNT, "namespace": namespace},
                opts=pulumi.ResourceOptions(parent=self, provider=provider, depends_on=deps),
            )
            aws.eks.PodIdentityAssociation(
                f"{namespace}-{TRAINING_SERVICE_ACCOUNT}-identity",
                cluster_name=args.cluster_name,
                namespace=namespace,
                service_account=TRAINING_SERVICE_ACCOUNT,
                role_arn=role.arn,
                tags=args.tags,
                opts=aws_child,
            )
        self.role_arn = role.arn
        self.register_outputs({"roleArn": self.role_arn})

    def depends_for(self, namespace: str) -> list[pulumi.Resource]:
        """What an object in ``namespace`` must wait for."""
        return [self.namespaces[namespace]] if namespace in self.namespaces else []
