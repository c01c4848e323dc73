"""Shared training storage of `storage.kind: efs`: one Regional Amazon EFS file system per cluster.

Elastic throughput (billed per GB read and written, nothing while idle but what is stored), encrypted at
rest (storage.kmsKeyId, else EFS's service key), General Purpose mode, and a lifecycle that moves a file to
Infrequent Access after storage.infrequentAccessAfterDays without access and back to Standard on its next
access. One mount target in each zone of the node subnets, so a node mounts in its own zone; their security
group admits TCP 2049 (NFS) from the nodes' security group and nothing else.

Each training namespace reaches the file system only through its own access point, whose root directory is
`/<namespace>` and whose POSIX user is the namespace's UID/GID (`namespaceIds`): EFS "replaces the NFS
client's user and group IDs with the identity configured on the access point for all file system
operations", and creates the directory with the access point's CreationInfo (owner and mode) on first use
(Amazon EFS user guide, awsdocs/amazon-efs-user-guide @3f3a66e doc_source/efs-access-points.md). So root in
a pod is the namespace's id there, the root squash FSx needs root-squash NIDs and two kube-system root Jobs
for comes with every mount, and no directory needs creating or giving away beforehand: there are no root
Jobs and no root claim. A namespace that shares another's directory (storage.sharedDirectories) mounts the
owner's access point through a claim of its own: read-only ones are mounted `ro`; read-write ones write as
the owner's id (where FSx writes them as the sharer's id in the owner's group).

Every claim keeps the name the workloads already mount (`<claimName>-<namespace>`, `<claimName>-<owner>`),
bound to a static PersistentVolume whose volumeHandle is `efs:<file system>::<access point>`
(kubernetes-sigs/aws-efs-csi-driver v3.4.1 examples/kubernetes/efs/access_points, pkg/driver/node.go
parseVolumeId: the `efs:` type, no subpath, the access point; NodePublishVolume adds `tls` and
`accesspoint=` for it and `ro` for a read-only volume). The driver is chart 4.4.1 with its node service
only: static volumes need no controller ("The CSI driver is only involved at mount time", docs/design.md at
v3.4.1, Static Provisioning), so there is no controller, IAM role or dynamic StorageClass.

The mounts are the node's: the node plugin (hostNetwork, kube-system) runs the mount helper and its TLS
proxy, which reach the mount targets from the node's network namespace. Pods never need to: the training
namespaces' egress wall leaves the mount targets' addresses out altogether (infra/specs/node_security.py),
since a pod speaking NFS to them itself could mount the file system's root, past every access point.

Destroy runs in dependency order: claims, volumes, the driver, the access points, the mount targets, the
file system, then its security group.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from infra import contract
from infra.components.context import ClusterContext
from infra.components.identities import TrainingIdentities
from infra.components.kube import helm_release
from infra.components.storage import (
    CLAIM_REQUEST,
    NAMESPACE_DIRECTORY_MODE,
    declare_static_pair,
    directory_claim_name,
)
from infra.config.models import SQUASHED_ID, StorageConfig
from infra.facts import efs
from infra.facts.versions import CHARTS
from infra.specs import image_cache

DRIVER = "efs.csi.aws.com"
NFS_PORT = 2049
# The mode of a cluster service's directory (the burn-in's): its own id writes, everyone reads; it is
# mounted read-only anyway.
SERVICE_DIRECTORY_MODE = "0755"
# EFS's lifecycle policy values (pulumi-aws 7.51.1 efs/_inputs.py FileSystemLifecyclePolicy): the days before
# a file moves to Infrequent Access, and its way back on the first access.
BACK_TO_STANDARD = "AFTER_1_ACCESS"


def transition_to_ia(days: int) -> str:
    return f"AFTER_{days}_DAY" if days == 1 else f"AFTER_{days}_DAYS"


def lifecycle_policies(days: int) -> list[aws.efs.FileSystemLifecyclePolicyArgs]:
    """One policy object per transition: the EFS API takes each in its own LifecyclePolicy element
    (PutLifecycleConfiguration), and the provider sends each block as one."""
    return [
        aws.efs.FileSystemLifecyclePolicyArgs(transition_to_ia=transition_to_ia(days)),
        aws.efs.FileSystemLifecyclePolicyArgs(transition_to_primary_storage_class=BACK_TO_STANDARD),
    ]


@dataclass(frozen=True)
class AccessPointSpec:
    """One directory of the file system and the identity every client of its access point acts as."""

    directory: str
    uid: int
    mode: str

    @property
    def path(self) -> str:
        return f"/{self.directory}"


def access_point_specs(
    namespaces: list[str], namespace_ids: dict[str, int], service_namespaces: list[str]
) -> dict[str, AccessPointSpec]:
    """Per directory (a training namespace's, or a cluster service's), its access point: the namespace's
    own UID and GID, mode 2770, at `/<namespace>`; a service's (the burn-in's, which only checks the mount)
    as `nobody` (the id FSx's root squash gives), mode 0755."""
    specs = {ns: AccessPointSpec(ns, namespace_ids[ns], NAMESPACE_DIRECTORY_MODE) for ns in namespaces}
    specs.update({ns: AccessPointSpec(ns, SQUASHED_ID, SERVICE_DIRECTORY_MODE) for ns in service_namespaces})
    return specs


def access_point_args(spec: AccessPointSpec) -> dict[str, Any]:
    """The access point's identity and root directory (EFS CreateAccessPoint: PosixUser, RootDirectory with
    its CreationInfo, used only when the directory does not exist yet)."""
    return {
        "posix_user": aws.efs.AccessPointPosixUserArgs(uid=spec.uid, gid=spec.uid),
        "root_directory": aws.efs.AccessPointRootDirectoryArgs(
            path=spec.path,
            creation_info=aws.efs.AccessPointRootDirectoryCreationInfoArgs(
                owner_uid=spec.uid, owner_gid=spec.uid, permissions=spec.mode
            ),
        ),
    }


def volume_handle(file_system_id: str, access_point_id: str) -> str:
    """kubernetes-sigs/aws-efs-csi-driver v3.4.1 pkg/driver/node.go parseVolumeId, new format
    `<type>:<file system>:<subpath>:<access point>`: no subpath, so the access point's root directory is the
    mount's root (examples/kubernetes/efs/access_points/specs/example.yaml: `efs:fs-…::fsap-…`)."""
    return f"efs:{file_system_id}::{access_point_id}"


def static_efs_volume(
    name: str, namespace: str, claim: str, file_system_id: str, access_point_id: str, *, read_only: bool = False
) -> dict[str, Any]:
    """A PersistentVolume mounting one access point, reserved for one claim. Retain: deleting a claim never
    reaches the data. ReadWriteMany: the driver's only multi-node mode; read-only comes from the CSI source's
    readOnly, which the kubelet passes to NodePublishVolume and the driver turns into `ro` (node.go
    NodePublishVolume, `req.GetReadonly()`). No mountOptions: the driver adds `tls` and the access point."""
    csi: dict[str, Any] = {"driver": DRIVER, "volumeHandle": volume_handle(file_system_id, access_point_id)}
    if read_only:
        csi["readOnly"] = True
    return {
        "metadata": {"name": name, "labels": {"app.kubernetes.io/part-of": "training-storage"}},
        "spec": {
            # EFS has no size: the driver ignores capacity (the example's 5Gi). The claims' request, so the
            # claim binds and keeps the shape it has on FSx.
            "capacity": {"storage": CLAIM_REQUEST},
            "volumeMode": "Filesystem",
            "accessModes": ["ReadWriteMany"],
            "persistentVolumeReclaimPolicy": "Retain",
            "storageClassName": "",
            "claimRef": {"namespace": namespace, "name": claim},
            "csi": csi,
        },
    }


def chart_values(ctx: ClusterContext) -> dict[str, Any]:
    """The node service alone, its images through the cluster's pull-through cache
    (image_cache.EFS_CSI_NODE_IMAGES); the chart's node toleration (`operator: Exists`) puts it on every
    node, tainted Trainium ones included. No resources are set: the chart sets none, and the driver's FAQ
    warns that a tight memory limit gets its TLS proxy OOM-killed under heavy writes (docs/faq.md at v3.4.1)."""
    return {
        **image_cache.chart_repositories(
            image_cache.EFS_CSI_NODE_IMAGES, ctx.partition, ctx.region, ctx.account_id, ctx.cluster_name
        ),
        "controller": {"create": False, "serviceAccount": {"create": False}},
    }


@dataclass
class EfsStorageArgs:
    vpc_id: pulumi.Input[str]
    # Zone id -> the node subnet there: one mount target each.
    node_subnet_by_zone_id: Mapping[str, pulumi.Input[str]]
    node_security_group_ids: list[pulumi.Input[str]]
    storage: StorageConfig
    identities: TrainingIdentities
    namespaces: list[str]
    namespace_ids: dict[str, int]
    system_namespaces: dict[str, pulumi.Resource] = field(default_factory=dict)
    image_cache: list[pulumi.Resource] = field(default_factory=list)


class EfsStorage(pulumi.ComponentResource):
    file_system: aws.efs.FileSystem
    mount_targets: dict[str, aws.efs.MountTarget]
    access_points: dict[str, aws.efs.AccessPoint]
    server_addresses: pulumi.Output[list[str]]
    claims: dict[str, k8s.core.v1.PersistentVolumeClaim]
    shared_claims: dict[tuple[str, str], k8s.core.v1.PersistentVolumeClaim]

    def output(self, storage: StorageConfig, namespaces: list[str], zone_id: str) -> dict[str, Any]:
        """The file system as the workload stacks read it (``storage``, infra/contract.py): no Lustre name,
        class, capacity or tier, and the save throughput the goodput model takes (infra/facts/efs.py)."""
        return contract.exported(
            contract.Storage,
            enabled=True,
            kind="efs",
            file_system_id=self.file_system.id,
            dns_name=self.file_system.dns_name,
            mount_name=None,
            storage_class=None,
            claim_name=storage.claim_name,
            namespaces=namespaces,
            capacity_gib=None,
            deployment_type=None,
            per_unit_storage_throughput=None,
            throughput_mbps=efs.SAVE_THROUGHPUT_MBPS,
            zone=zone_id,
            s3_links=[],
            claims={ns: self.claims[ns].metadata.name for ns in namespaces},
        )

    def __init__(
        self, name: str, ctx: ClusterContext, args: EfsStorageArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("trainium:infra:EfsStorage", name, None, opts)
        provider = ctx.kubernetes
        child = pulumi.ResourceOptions(parent=self)
        storage = args.storage

        nfs_sg = aws.ec2.SecurityGroup(
            f"{name}-nfs",
            vpc_id=args.vpc_id,
            description="EFS mount targets: NFS (TCP 2049) from the nodes",
            tags={**ctx.tags, "Name": f"{name}-nfs"},
            opts=child,
        )
        # Ingress only: NFS clients connect to the server, whose replies the group lets back (security groups
        # are stateful), and the server never opens a connection of its own (v3.4.1
        # docs/efs-create-filesystem.md: an inbound rule for NFS from the cluster's security group).
        rules = [
            aws.vpc.SecurityGroupIngressRule(
                f"{name}-node{i}-in-{NFS_PORT}",
                security_group_id=nfs_sg.id,
                referenced_security_group_id=sg,
                ip_protocol="tcp",
                from_port=NFS_PORT,
                to_port=NFS_PORT,
                description=f"NFS {NFS_PORT} from the nodes",
                opts=child,
            )
            for i, sg in enumerate(args.node_security_group_ids)
        ]
        self.file_system = aws.efs.FileSystem(
            f"{name}-training",
            encrypted=True,
            kms_key_id=storage.kms_key_id,
            performance_mode="generalPurpose",
            throughput_mode="elastic",
            lifecycle_policies=lifecycle_policies(storage.infrequent_access_after_days),
            tags={**ctx.tags, "Name": f"{name}-training"},
            opts=child,
        )
        self.mount_targets = {
            zone: aws.efs.MountTarget(
                f"{name}-mount-{zone}",
                file_system_id=self.file_system.id,
                subnet_id=subnet,
                security_groups=[nfs_sg.id],
                opts=pulumi.ResourceOptions(parent=self, depends_on=rules),
            )
            for zone, subnet in sorted(args.node_subnet_by_zone_id.items())
        }
        # The mount targets' addresses, which the training namespaces' egress wall leaves out.
        self.server_addresses = pulumi.Output.all(*(mt.ip_address for mt in self.mount_targets.values())).apply(
            lambda addresses: sorted(set(addresses))
        )
        services = list(args.system_namespaces)
        specs = access_point_specs(args.namespaces, args.namespace_ids, services)
        self.access_points = {
            directory: aws.efs.AccessPoint(
                f"{name}-ap-{directory}",
                file_system_id=self.file_system.id,
                **access_point_args(spec),
                tags={**ctx.tags, "Name": f"{name}-{directory}"},
                opts=child,
            )
            for directory, spec in specs.items()
        }
        driver = helm_release(
            "aws-efs-csi-driver",
            CHARTS["efs-csi-driver"],
            "kube-system",
            chart_values(ctx),
            pulumi.ResourceOptions(parent=self, provider=provider, depends_on=args.image_cache),
        )
        # A claim's volume mounts once a node reaches a mount target: every one exists first.
        after = [driver, *self.mount_targets.values()]
        self.claims = {
            namespace: self._claim(
                namespace, directory_claim_name(storage.claim_name, namespace), namespace, args, provider, after
            )
            for namespace in [*args.namespaces, *services]
        }
        self.shared_claims = {
            (namespace, owner): self._claim(
                namespace,
                directory_claim_name(storage.claim_name, owner),
                owner,
                args,
                provider,
                after,
                read_only=mode == "read-only",
            )
            for namespace, owners in storage.shared_directories.items()
            for owner, mode in owners.items()
        }
        self.register_outputs({"fileSystemId": self.file_system.id})

    def _claim(
        self,
        namespace: str,
        claim_name: str,
        directory: str,
        args: EfsStorageArgs,
        provider: k8s.Provider,
        after: list[pulumi.Resource],
        read_only: bool = False,
    ) -> k8s.core.v1.PersistentVolumeClaim:
        """The volume on ``directory``'s access point and its claim in ``namespace``, replaced as a pair,
        the volume leading: a Retain volume never binds a new claim of the same name (the reasoning of
        infra/components/storage.py FsxStorage._claim, which this follows)."""
        fs, access_point = self.file_system, self.access_points[directory]
        return declare_static_pair(
            self,
            namespace,
            claim_name,
            fs.id,
            lambda volume_name: pulumi.Output.all(volume_name, fs.id, access_point.id).apply(
                lambda v: static_efs_volume(v[0], namespace, claim_name, v[1], v[2], read_only=read_only)
            ),
            provider,
            volume_after=[fs, access_point, *after],
            claim_after=[
                *args.identities.depends_for(namespace),
                *([args.system_namespaces[namespace]] if namespace in args.system_namespaces else []),
            ],
        )
