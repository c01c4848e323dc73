"""Shared storage: FSx for Lustre through its CSI driver, dynamically provisioned.

The file system is created by the CSI driver when the first `fsx-claim` is bound, in the
accelerator zone (cross-zone Lustre traffic is slow and billed). Lustre needs TCP 988 and
1018-1023 between clients and servers in both directions; the references open only part of
that (988 alone, or 1021-1023).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from infra.config import StorageConfig
from infra.iam import pod_identity_role
from infra.identities import TrainingIdentities
from infra.kube import CORE_NODE_SELECTOR, helm_release
from infra.versions import CHARTS

LUSTRE_PORTS = ((988, 988), (1018, 1023))
PROVISIONER = "fsx.csi.aws.com"
STORAGE_CLASS = "fsx-lustre"
CONTROLLER_SERVICE_ACCOUNT = "fsx-csi-controller-sa"


def csi_controller_policy(partition: str) -> str:
    """What the driver's controller needs to create and delete file systems, nothing more."""
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Sid": "S3DataRepositoryServiceLinkedRole",
                    "Effect": "Allow",
                    "Action": ["iam:CreateServiceLinkedRole", "iam:AttachRolePolicy", "iam:PutRolePolicy"],
                    "Resource": f"arn:{partition}:iam::*:role/aws-service-role/s3.data-source.lustre.fsx.amazonaws.com/*",
                },
                {
                    "Sid": "FsxServiceLinkedRole",
                    "Effect": "Allow",
                    "Action": "iam:CreateServiceLinkedRole",
                    "Resource": "*",
                    "Condition": {"StringLike": {"iam:AWSServiceName": ["fsx.amazonaws.com"]}},
                },
                {
                    "Sid": "ManageFileSystems",
                    "Effect": "Allow",
                    "Action": [
                        "s3:ListBucket",
                        "fsx:CreateFileSystem",
                        "fsx:DeleteFileSystem",
                        "fsx:DescribeFileSystems",
                        "fsx:TagResource",
                        "fsx:UpdateFileSystem",
                    ],
                    "Resource": "*",
                },
            ],
        }
    )


def storage_class_parameters(storage: StorageConfig, subnet_id: str, security_group_id: str) -> dict[str, str]:
    """The driver's dynamic-provisioning parameters; every value is a string."""
    params = {
        "subnetId": subnet_id,
        "securityGroupIds": security_group_id,
        "deploymentType": storage.deployment_type,
        "fileSystemTypeVersion": storage.lustre_version,
        "dataCompressionType": storage.compression,
    }
    if storage.per_unit_storage_throughput is not None:
        params["perUnitStorageThroughput"] = str(storage.per_unit_storage_throughput)
    optional = {"s3ImportPath": storage.s3_import_path, "s3ExportPath": storage.s3_export_path,
                "kmsKeyId": storage.kms_key_id}
    params.update({k: v for k, v in optional.items() if v})
    return params


@dataclass
class FsxStorageArgs:
    cluster_name: pulumi.Input[str]
    partition: str
    vpc_id: pulumi.Input[str]
    subnet_id: pulumi.Input[str]
    node_security_group_ids: list[pulumi.Input[str]]
    storage: StorageConfig
    identities: TrainingIdentities
    namespaces: list[str]
    tags: dict[str, str] = field(default_factory=dict)


class FsxStorage(pulumi.ComponentResource):
    security_group_id: pulumi.Output[str]
    claims: dict[str, k8s.core.v1.PersistentVolumeClaim]

    def __init__(
        self, name: str, args: FsxStorageArgs, provider: k8s.Provider, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("trainium:infra:FsxStorage", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        k8s_child = pulumi.ResourceOptions(parent=self, provider=provider)

        lustre_sg = aws.ec2.SecurityGroup(
            f"{name}-lustre",
            vpc_id=args.vpc_id,
            description="FSx for Lustre: LNet (TCP 988, 1018-1023) with the nodes and between servers",
            tags={**args.tags, "Name": f"{name}-lustre"},
            opts=child,
        )
        self.security_group_id = lustre_sg.id
        self._lustre_rules(name, lustre_sg.id, args.node_security_group_ids)

        _, identity = pod_identity_role(
            f"{name}-csi-controller",
            description="FSx for Lustre CSI controller: create and delete file systems",
            parent=self,
            tags=args.tags,
            inline_policy=csi_controller_policy(args.partition),
            association=(args.cluster_name, "kube-system", CONTROLLER_SERVICE_ACCOUNT),
        )
        driver = helm_release(
            "aws-fsx-csi-driver",
            CHARTS["fsx-csi-driver"],
            "kube-system",
            self.chart_values(),
            pulumi.ResourceOptions(parent=self, provider=provider, depends_on=identity),
        )

        storage = args.storage
        storage_class = k8s.storage.v1.StorageClass(
            STORAGE_CLASS,
            metadata={"name": STORAGE_CLASS},
            provisioner=PROVISIONER,
            parameters=pulumi.Output.all(args.subnet_id, lustre_sg.id).apply(
                lambda ids: storage_class_parameters(storage, ids[0], ids[1])
            ),
            reclaim_policy=storage.reclaim_policy,
            volume_binding_mode="Immediate",
            mount_options=["flock"],
            opts=k8s_child,
        )
        self.claims = {}
        for namespace in args.namespaces:
            self.claims[namespace] = k8s.core.v1.PersistentVolumeClaim(
                f"{namespace}-{storage.claim_name}",
                metadata={"name": storage.claim_name, "namespace": namespace},
                spec={
                    "accessModes": ["ReadWriteMany"],
                    "storageClassName": STORAGE_CLASS,
                    "resources": {"requests": {"storage": f"{storage.capacity_gib}Gi"}},
                },
                opts=pulumi.ResourceOptions(
                    parent=self,
                    provider=provider,
                    depends_on=[storage_class, driver, *args.identities.depends_for(namespace)],
                ),
            )
        self.register_outputs({"securityGroupId": self.security_group_id})

    @staticmethod
    def chart_values() -> dict[str, Any]:
        return {
            "controller": {
                "serviceAccount": {"create": True, "name": CONTROLLER_SERVICE_ACCOUNT},
                "nodeSelector": CORE_NODE_SELECTOR,
            },
            # Every node mounts Lustre, tainted Trainium nodes first of all.
            "node": {"tolerateAllTaints": True},
        }

    def _lustre_rules(self, name: str, lustre_sg: pulumi.Output[str], node_sgs: list[pulumi.Input[str]]) -> None:
        """File system <-> itself and file system <-> nodes, both directions, Lustre ports only."""
        peers: list[tuple[str, pulumi.Input[str], pulumi.Input[str]]] = [("fs-self", lustre_sg, lustre_sg)]
        peers += [(f"node{i}", lustre_sg, sg) for i, sg in enumerate(node_sgs)]
        peers += [(f"node{i}-side", sg, lustre_sg) for i, sg in enumerate(node_sgs)]
        for label, own, other in peers:
            for low, high in LUSTRE_PORTS:
                for direction, rule_type in (("in", aws.vpc.SecurityGroupIngressRule), ("out", aws.vpc.SecurityGroupEgressRule)):
                    rule_type(
                        f"{name}-{label}-{direction}-{low}-{high}",
                        security_group_id=own,
                        referenced_security_group_id=other,
                        ip_protocol="tcp",
                        from_port=low,
                        to_port=high,
                        description=f"Lustre {low}-{high}",
                        opts=pulumi.ResourceOptions(parent=self),
                    )
