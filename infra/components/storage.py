"""Shared training storage: one FSx for Lustre file system per cluster, owned by the stack.

The file system lives in the accelerator zone (cross-zone Lustre traffic is slow and billed),
behind a security group that opens exactly what Lustre needs: TCP 988 and 1018-1023, both
directions, between clients and servers (the references open only 988, or 1021-1023). S3 is
linked through data repository associations. Every training namespace gets a static
PersistentVolume that mounts only its own directory of the one file system, `/<namespace>`, and
the `fsx-claim-<namespace>` claim bound to it: binding is immediate, so `pulumi up` never waits on
provisioning, no namespace gets a file system of its own, and no namespace reaches another's
checkpoints or data through its volume. A namespace that must read or write another's directory
says so in `storage.sharedDirectories` and gets a claim for it alone. A Job on a core node
creates the directories before any such claim exists; another moves data the namespaces wrote at
the root into their directories (`storage.rootDataOwners`).

Root squash is on: root on any client is FSx's `nobody` (65534:65534), except on the clients in the
private subnets, where the core nodes live (Lustre NID ranges, infra/specs/lustre_nids.py). There
the two kube-system Jobs act as root: each training namespace's directory belongs to the namespace's
own UID/GID (`namespaceIds`), mode 2770 (setgid: what is created in it keeps the namespace's group), and
what root wrote into it (before squash, or an S3 import) is given to that id. Training pods run as their namespace's id
(infra/specs/namespace_identity.py), so a `research` pod reaches `default`'s directory neither through
its mount nor, once on a node, as root.

Stacks whose namespaces mounted the root as `fsx-claim` move over in two ups
(`storage.rootClaims`), neither of which deletes a claim a pod may hold or hides data: the
directory claims come next to the root claims, the root's entries move into the directories and
the workload stacks are pointed at them (`migrated`); a later up deletes the root claims (`retired`).
Destroy runs in dependency order: claims, volumes, the CSI driver, the associations, the file
system, then its security group and subnet.

The `fsx-lustre` StorageClass stays for extra, per-job volumes that the CSI driver creates.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from infra import contract
from infra.components.context import ClusterContext
from infra.components.iam import pod_identity_role, service_trust_policy
from infra.components.identities import TrainingIdentities
from infra.components.kube import CORE_NODE_SELECTOR, ROOT_SQUASH_EXEMPT_SELECTOR, helm_release
from infra.config.models import SQUASHED_ID, CheckpointExportConfig, DataRepositoryConfig, StorageConfig
from infra.facts.versions import CHARTS, PYTHON_SLIM_IMAGE
from infra.specs import image_cache
from infra.specs.lustre_nids import LUSTRE_PORTS
from infra.specs.system_capacity import HA_CONTROLLER_REPLICAS

PROVISIONER = "fsx.csi.aws.com"
STORAGE_CLASS = "fsx-lustre"
CONTROLLER_SERVICE_ACCOUNT = "fsx-csi-controller-sa"
# FSx creation takes 5-15 minutes (longer for large PERSISTENT_2 file systems); deletion
# with a final backup longer still.
FILE_SYSTEM_TIMEOUTS = pulumi.CustomTimeouts(create="60m", update="60m", delete="60m")


# What the controller may never do to the stack's own file system: delete it (the driver's
# DeleteFileSystem sends no LustreConfiguration, so FSx keeps no final backup: kubernetes-sigs/
# aws-fsx-csi-driver v1.9.0 pkg/cloud/cloud.go, DeleteFileSystem), shrink its settings, or retag it.
# Pulumi's `protect` binds only Pulumi; this binds the controller's own credentials.
PROTECTED_FILE_SYSTEM_ACTIONS = ("fsx:DeleteFileSystem", "fsx:TagResource", "fsx:UntagResource", "fsx:UpdateFileSystem")
# The tag the driver puts on every file system it creates, with the volume's name as its value, and
# reads back to find a volume by name (aws-fsx-csi-driver v1.9.0 pkg/cloud/cloud.go: VolumeNameTagKey,
# CreateFileSystem's Tags, pollFileSystems). It sends no other tag: the only other sources are the
# StorageClass parameter extraTags, which storage_class_parameters never sets, and the chart's
# controller.extraTags (chart 1.17.0 values.yaml: empty), which chart_values never sets.
DRIVER_VOLUME_TAG = "CSIVolumeName"
# The tag every resource of this program carries (__main__.py tags, bootstrap/permissions.py STACK_TAG).
PROGRAM_STACK_TAG = "stack"


def csi_controller_policy(file_system_arn: str) -> str:
    """What the driver's controller needs to create, resize and delete dynamic volumes, only on file
    systems it created itself, and nothing on ``file_system_arn``, the stack's own file system.

    The actions are the driver's own list (kubernetes-sigs/aws-fsx-csi-driver v1.9.0, docs/install.md,
    chart 1.17.0): CreateFileSystem with its tags (FSx authorizes fsx:TagResource for tags given on
    create), DescribeFileSystems to wait and to find a volume by name, UpdateFileSystem to resize,
    DeleteFileSystem. The driver never calls TagResource or UntagResource on its own (pkg/cloud/cloud.go
    has no such call). Static volumes need none of them: the node plugin only mounts.

    Scoped by the driver's tag: create only with it in the request, update and delete only where the
    file system carries it, tag only with it and nothing else. FSx has no condition key that tells
    tagging on create from a later TagResource call (Service Authorization Reference, Amazon FSx:
    TagResource takes aws:RequestTag, aws:ResourceTag and aws:TagKeys only), so the controller could
    still put the tag on a file system it did not create: every file system this program makes carries
    its `stack` tag, which the controller can neither remove (no UntagResource) nor get past (an
    explicit deny wins over every allow), and the stack's own file system is denied by its ARN as well.
    """
    has_driver_tag = {"Null": {f"aws:ResourceTag/{DRIVER_VOLUME_TAG}": "false"}}
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Sid": "FsxServiceLinkedRole",
                    "Effect": "Allow",
                    "Action": "iam:CreateServiceLinkedRole",
                    "Resource": "*",
                    "Condition": {"StringLike": {"iam:AWSServiceName": ["fsx.amazonaws.com"]}},
                },
                {"Sid": "FindVolumes", "Effect": "Allow", "Action": "fsx:DescribeFileSystems", "Resource": "*"},
                {
                    "Sid": "CreateOnlyWithTheDriversTag",
                    "Effect": "Allow",
                    "Action": "fsx:CreateFileSystem",
                    "Resource": "*",
                    "Condition": {"Null": {f"aws:RequestTag/{DRIVER_VOLUME_TAG}": "false"}},
                },
                {
                    "Sid": "TagOnlyWithTheDriversTag",
                    "Effect": "Allow",
                    "Action": "fsx:TagResource",
                    "Resource": "*",
                    "Condition": {
                        "Null": {f"aws:RequestTag/{DRIVER_VOLUME_TAG}": "false"},
                        "ForAllValues:StringEquals": {"aws:TagKeys": [DRIVER_VOLUME_TAG]},
                    },
                },
                {
                    "Sid": "ResizeAndDeleteOnlyTheDriversVolumes",
                    "Effect": "Allow",
                    "Action": ["fsx:DeleteFileSystem", "fsx:UpdateFileSystem"],
                    "Resource": "*",
                    "Condition": has_driver_tag,
                },
                {
                    "Sid": "NeverTheStackFileSystem",
                    "Effect": "Deny",
                    "Action": list(PROTECTED_FILE_SYSTEM_ACTIONS),
                    "Resource": file_system_arn,
                },
                {
                    "Sid": "NeverAFileSystemOfThisProgram",
                    "Effect": "Deny",
                    "Action": list(PROTECTED_FILE_SYSTEM_ACTIONS),
                    "Resource": "*",
                    "Condition": {"Null": {f"aws:ResourceTag/{PROGRAM_STACK_TAG}": "false"}},
                },
            ],
        }
    )


def storage_class_parameters(storage: StorageConfig, subnet_id: str, security_group_id: str) -> dict[str, str]:
    """The driver's dynamic-provisioning parameters (same type and tier as the stack's file
    system); every value is a string."""
    params = {
        "subnetId": subnet_id,
        "securityGroupIds": security_group_id,
        "deploymentType": storage.deployment_type,
        "fileSystemTypeVersion": storage.lustre_version,
        "dataCompressionType": storage.compression,
    }
    if storage.per_unit_storage_throughput is not None:
        params["perUnitStorageThroughput"] = str(storage.per_unit_storage_throughput)
    if storage.kms_key_id:
        params["kmsKeyId"] = storage.kms_key_id
    return params


def static_volume_name(claim: str, namespace: str, file_system_id: str) -> str:
    return f"{claim}-{namespace}-{file_system_id}"


def mounted_path(mount_name: str, directory: str) -> str:
    """What a volume's ``mountname`` attribute carries: the Lustre file system name, then the
    directory the volume is confined to (empty: the root).

    kubernetes-sigs/aws-fsx-csi-driver v1.9.0, pkg/driver/node.go NodePublishVolume (l.107-119):
    the node takes ``mountname`` from the volume context as is and mounts
    ``fmt.Sprintf("%s@tcp:/%s", dnsname, mountname)`` with `mount -t lustre` (l.177); it has no
    NodeStageVolume (l.91-93, Unimplemented), so nothing else rewrites the source. A
    ``<fsname>/<dir>`` mountname is therefore a Lustre subdirectory mount: mount.lustre(8) (lustre-release,
    Documentation/man8/mount.lustre.8) takes ``MGSNAME:/FSNAME[/SUBDIR]``, "optionally starting at
    subdirectory SUBDIR within the filesystem", the fileset mount of the FSx for Lustre User Guide
    (mounting-from-fileset.html). The client sees that directory as its root and nothing above it.
    The directory must exist first, or the mount fails.
    """
    return f"{mount_name}/{directory}" if directory else mount_name


def static_volume(
    name: str,
    namespace: str,
    claim: str,
    capacity_gib: int,
    file_system_id: str,
    dns_name: str,
    mount_name: str,
    *,
    directory: str,
    read_only: bool = False,
) -> dict[str, Any]:
    """A PersistentVolume for ``directory`` of the stack's file system, reserved for one claim.

    kubernetes-sigs/aws-fsx-csi-driver v1.9.0 (chart 1.17.0), examples/kubernetes/
    static_provisioning/specs/pv.yaml and pkg/driver/node.go: volumeHandle is the file system
    id; the node mounts ``<dnsname>@tcp:/<mountname>`` (``mounted_path``). Retain: the volume never
    owns the file system, so deleting a claim must never reach it. Read-only: the kubelet passes
    the CSI source's ``readOnly`` to NodePublishVolume, where the driver adds ``ro`` to the
    mount options (node.go l.146-147), so no pod of the claim can write whatever it asks for.
    """
    csi: dict[str, Any] = {
        "driver": PROVISIONER,
        "volumeHandle": file_system_id,
        "volumeAttributes": {"dnsname": dns_name, "mountname": mounted_path(mount_name, directory)},
    }
    if read_only:
        csi["readOnly"] = True
    return {
        "metadata": {"name": name, "labels": {"app.kubernetes.io/part-of": "training-storage"}},
        "spec": {
            "capacity": {"storage": f"{capacity_gib}Gi"},
            "volumeMode": "Filesystem",
            # Read-only volumes too: the driver accepts only the single-node and multi-node writer
            # modes (controller.go l.38-45, isValidVolumeCapabilities l.427, which NodePublishVolume
            # applies as well), so ReadOnlyMany would never mount; ``ro`` comes from readOnly.
            "accessModes": ["ReadWriteMany"],
            "persistentVolumeReclaimPolicy": "Retain",
            # Empty: no class, so no provisioner ever acts on it or on its claim.
            "storageClassName": "",
            "mountOptions": ["flock"],
            # Reserved for this claim: no other claim can bind it first.
            "claimRef": {"namespace": namespace, "name": claim},
            "csi": csi,
        },
    }


# What every static claim requests: FSx's smallest size. Binding needs only the volume's
# capacity to cover it, and a claim's request of a class-less volume cannot change later
# (Kubernetes expands only claims whose class allows it), so growing the file system changes
# the volume's capacity, never the claim.
CLAIM_REQUEST = "1200Gi"


def static_claim(namespace: str, claim: str, volume: str) -> dict[str, Any]:
    return {
        "metadata": {"name": claim, "namespace": namespace},
        "spec": {
            "accessModes": ["ReadWriteMany"],
            # Empty: bound to the named volume, never provisioned. pulumi-kubernetes logs "no
            # storage class found" for it and then awaits Bound, which is immediate.
            "storageClassName": "",
            "volumeName": volume,
            "resources": {"requests": {"storage": CLAIM_REQUEST}},
        },
    }


# The namespace of the one claim on the file system's root, and of the Job that creates the
# namespaces' directories through it: only cluster administrators run pods there.
ROOT_NAMESPACE = "kube-system"
ROOT_CLAIM = "fsx-root"
DIRECTORY_JOB = "fsx-namespace-directories"
ROOT_DATA_JOB = "fsx-namespace-data-from-root"
# Where the Job mounts the root.
ROOT_MOUNT = "/fsx"
# What root on a squashed client becomes: `nobody`, which owns nothing a namespace wrote.
ROOT_SQUASH = f"{SQUASHED_ID}:{SQUASHED_ID}"
# The mode of a training namespace's directory: its id reads and writes, the id's group too (the
# namespaces configured to share it, storage.sharedDirectories, carry that group), nobody else; the
# setgid bit makes what is created in it the namespace's group whoever creates it.
NAMESPACE_DIRECTORY_MODE = "2770"

# What the root Jobs may do beyond a plain root process, checked on the Lustre servers as on the client:
# the client sends the caller's capabilities, and the metadata server keeps them for an unsquashed
# root (lustre-release v2_15_8 lustre/mdt/mdt_lib.c, old_init_ucred_common/mdt_root_squash; it drops them
# for a squashed one). lustre/mdd/mdd_object.c mdd_fix_attr: chown and chgrp need CAP_CHOWN; the Jobs
# chmod a directory only while they own it, so no CAP_FOWNER. lustre/mdd/mdd_permission.c
# mdd_permission_internal: searching or writing a directory another UID owns needs CAP_DAC_OVERRIDE
# (searching alone CAP_DAC_READ_SEARCH too).
# - CHOWN: give each directory, and what root wrote in it, to the namespace's id; give moved entries.
# - DAC_OVERRIDE: the directory Job walks the namespaces' directories, which are their ids', mode 2770,
#   with nothing for others (and whatever in them denies others: a 0700 directory an image's user made);
#   the move Job renames entries into them, which needs write permission there. The walk alone would do
#   with DAC_READ_SEARCH, but that one is outside the container runtime's default set, which the policy
#   pack's no-privileged-or-host-path rule and Pod Security baseline hold every pod to; and it would
#   narrow nothing: with CHOWN, root can make any file its own and then write it anyway.
ROOT_JOB_CAPABILITIES = ("CHOWN", "DAC_OVERRIDE")
# How long `pulumi up` waits for either Job: a run walks every entry of the namespaces' directories
# (one stat each; the first one also a chown each, everything being root's), which on a file system
# with millions of files may take longer than pulumi-kubernetes' 10-minute default for a Job
# (pulumi/pulumi-kubernetes v4.32.0 provider/pkg/await/job.go DefaultJobTimeoutMins; the create timeout
# overrides it, awaiters.go getTimeout). Should it still run out, the Job keeps going in the cluster
# and the next `pulumi up` waits for it again; what it did stays done, and a re-run leaves it be.
ROOT_JOB_TIMEOUTS = pulumi.CustomTimeouts(create="90m", update="90m")


def _ownership_pass(variable: str, owner: str, select: str, *, itself: bool = False) -> str:
    """A shell line that gives every entry under ``$variable`` (and, with ``itself``, that path too) that
    ``select`` (a find test) picks to ``owner:owner``. find stats each entry once and chown runs only on
    those picked, in batches; -h and find's default of not following links keep it inside the tree."""
    depth = "" if itself else " -mindepth 1"
    return f'find "${variable}"{depth} {select} -exec chown -h "{owner}:{owner}" {{}} +'


# What find picks: an entry root owns (written before squash was on, or imported from S3 by a data
# repository association, which gives an object without POSIX metadata to root), or an entry not yet
# the id's at all (a directory changing hands: the first time, or a changed id).
ROOT_OWNED = "\\( -uid 0 -o -gid 0 \\)"
NOT_OWNED_BY = '! \\( -uid "{id}" -gid "{id}" \\)'


def directories_script(root: str, directories: list[str], ids: dict[str, int]) -> str:
    """Create every namespace's directory under ``root``, leaving existing ones and their contents where
    they are; make each training namespace's (those in ``ids``) its id's, mode 2770. A cluster service's
    directory (the burn-in's, not in ``ids``) stays root's, mode 0755: nothing writes to it.

    Ownership, idempotent: a directory that is not yet its id's has everything in it given to the id
    (the first run on a stack whose pods wrote as root; a changed id); one that is has only what root
    owns in it given (a data repository's imports). So a run changes nothing that is right, writes
    nothing when nothing is root's, and leaves alone what another namespace sharing the directory wrote
    (its own UID, the directory's group). Each run stats every entry once: the Job runs only when its
    spec changes (a namespace added, an id changed) or is replaced by hand (docs/operations.md).

    The directory's mode is set while the Job owns it (chown to root first): chmod keeps the setgid bit
    only for a caller in the file's group or with CAP_FSETID (lustre-release v2_15_8 mdd_fix_attr, "Also
    check the setgid bit!"; the kernel's setattr_prepare alike), and chown keeps it on a directory (ibid.:
    only a non-directory loses it). The directory is given to the id last, so a run cut short walks it
    in full again next time."""
    entries = " ".join(f"'{d}' '{ids.get(d, '')}'" for d in directories)
    mode = NAMESPACE_DIRECTORY_MODE
    return f"""set -eu
umask 022
set -- {entries}
while [ "$#" -gt 0 ]; do
  d="{root}/$1"; id="$2"; shift 2
  mkdir -p "$d"
  if [ -z "$id" ]; then
    echo "$d ready"
    continue
  fi
  owner=$(stat -c %u:%g "$d")
  if [ "$owner" = "$id:$id" ]; then
    {_ownership_pass("d", "$id", ROOT_OWNED)}
  else
    echo "$d belongs to $owner: giving it and everything in it to $id:$id"
    {_ownership_pass("d", "$id", NOT_OWNED_BY.format(id="$id"))}
  fi
  if [ "$owner" != "$id:$id" ] || [ "$(stat -c %a "$d")" != {mode} ]; then
    chown 0:0 "$d"
    chmod {mode} "$d"
    chown "$id:$id" "$d"
  fi
  echo "$d ready: $id:$id, mode {mode}"
done
"""


def directory_job(directories: list[str], ids: dict[str, int]) -> dict[str, Any]:
    """The Job that creates the directories the namespaces' volumes mount (a Lustre subdirectory
    mount of a missing directory fails) and gives them to their namespaces' ids. Its spec lists them
    and the ids, so a new namespace or a changed id re-runs it."""
    return root_job(DIRECTORY_JOB, "mkdir", directories_script(ROOT_MOUNT, directories, ids))


def root_data_job(moves: dict[str, str], directories: list[str], ids: dict[str, int]) -> dict[str, Any]:
    """The Job that moves the namespaces' data from the root into their directories
    (``root_data_script``). Its spec lists the moves, so a changed list runs it again."""
    return root_job(ROOT_DATA_JOB, "move", root_data_script(ROOT_MOUNT, moves, directories, ids))


def root_job(name: str, container: str, script: str) -> dict[str, Any]:
    """A Job that runs ``script`` as root with the file system's root at ROOT_MOUNT, on a core node in
    the subnets root squash exempts (ROOT_SQUASH_EXEMPT_SELECTOR): anywhere else its root would be
    `nobody`, which may not create or chown anything there."""
    return {
        "metadata": {"name": name, "namespace": ROOT_NAMESPACE},
        "spec": {
            "backoffLimit": 3,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "nodeSelector": ROOT_SQUASH_EXEMPT_SELECTOR,
                    "automountServiceAccountToken": False,
                    "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
                    "containers": [
                        {
                            "name": container,
                            "image": PYTHON_SLIM_IMAGE,
                            "command": ["sh", "-c", script],
                            # Root, with only the capabilities its script needs (ROOT_JOB_CAPABILITIES),
                            # not the runtime's whole default set.
                            "securityContext": {
                                "runAsUser": 0,
                                "privileged": False,
                                "allowPrivilegeEscalation": False,
                                "readOnlyRootFilesystem": True,
                                "capabilities": {"drop": ["ALL"], "add": list(ROOT_JOB_CAPABILITIES)},
                            },
                            # A walk over millions of entries is metadata round trips, each some CPU in
                            # the client: a whole core at most, memory for find's path and chown's batch.
                            "resources": {
                                "requests": {"cpu": "10m", "memory": "32Mi"},
                                "limits": {"cpu": "1", "memory": "128Mi"},
                            },
                            "volumeMounts": [{"name": "fsx", "mountPath": ROOT_MOUNT}],
                        }
                    ],
                    "volumes": [{"name": "fsx", "persistentVolumeClaim": {"claimName": ROOT_CLAIM}}],
                }
            },
        },
    }


def root_squash_configuration(no_squash_nids: list[str]) -> aws.fsx.LustreFileSystemRootSquashConfigurationArgs:
    """Root on every client but ``no_squash_nids`` becomes `nobody` on the file system.

    Every deployment type the stack file allows (PERSISTENT_2, PERSISTENT_1, SCRATCH_2) takes it, as far as
    the documentation says: the API reference (LustreRootSquashConfiguration), the user guide
    (LustreGuide/root-squash.html) and pulumi-aws 7.51.1's own description (fsx/lustre_file_system.py) name
    no deployment type it is limited to, and terraform-provider-aws tests it on a scratch file system
    (internal/service/fsx/lustre_file_system_test.go, testAccLustreFileSystemConfig_rootSquash: the
    provider's default type, SCRATCH_2 in GovCloud).

    It changes in place: not ForceNew in the aws-sdk-go-v2 resource pulumi-aws 7.x bridges,
    resourceLustreFileSystemUpdate sends it in UpdateFileSystem (its acceptance test changes it on the same
    file system), so turning it on keeps the file system and its data (offline/diff/replacement.py lists no
    rootSquashConfiguration). To turn it off again, set "0:0": the provider sends nothing for a removed
    block (expandLustreRootSquashConfiguration), which would leave it on."""
    return aws.fsx.LustreFileSystemRootSquashConfigurationArgs(root_squash=ROOT_SQUASH, no_squash_nids=no_squash_nids)


def declare_static_pair(
    parent: pulumi.Resource,
    namespace: str,
    claim_name: str,
    file_system_id: pulumi.Output[str],
    manifest_for: Callable[[pulumi.Output[str]], pulumi.Output[dict[str, Any]]],
    provider: k8s.Provider,
    volume_after: list[pulumi.Resource],
    claim_after: list[pulumi.Resource],
    replace_on_source: bool = True,
    delete_timeout: str | None = None,
) -> k8s.core.v1.PersistentVolumeClaim:
    """A static volume (``manifest_for`` its name) and its claim ``claim_name`` in ``namespace``, replaced as a
    pair, the volume leading (FsxStorage._claim says why; EfsStorage follows it). The volume's name carries the
    file system id: a PersistentVolume's source is immutable, so a replaced file system means a new volume, and
    its claim with it. What re-creates the pair: any change to the claim as declared or, with
    ``replace_on_source``, to what the volume mounts (its CSI source cannot change in place; its capacity can)."""
    volume_name = file_system_id.apply(lambda fs_id: static_volume_name(claim_name, namespace, fs_id))
    manifest = manifest_for(volume_name)
    declared_claim = volume_name.apply(lambda name: static_claim(namespace, claim_name, name))
    trigger = (
        pulumi.Output.all(declared_claim, manifest["spec"]["csi"]).apply(lambda v: {"claim": v[0], "source": v[1]})
        if replace_on_source
        else declared_claim
    )
    volume = k8s.core.v1.PersistentVolume(
        f"{claim_name}-{namespace}",
        metadata=manifest["metadata"],
        spec=manifest["spec"],
        opts=pulumi.ResourceOptions(
            parent=parent,
            provider=provider,
            depends_on=volume_after,
            replacement_trigger=trigger,
            # Its name stays when only the claim changes: the old volume must go first.
            delete_before_replace=True,
        ),
    )
    # The volume's own name output: a property dependency, so the claim is deleted before it.
    claim = volume.metadata.apply(lambda meta: static_claim(namespace, claim_name, meta["name"]))
    return k8s.core.v1.PersistentVolumeClaim(
        f"{namespace}-{claim_name}",
        metadata=claim["metadata"],
        spec=claim["spec"],
        opts=pulumi.ResourceOptions(
            parent=parent,
            provider=provider,
            depends_on=[volume, *claim_after],
            # Re-created whenever its volume is, even when the volume keeps its name.
            replace_with=[volume],
            replace_on_changes=["spec.volumeName"],
            # Same claim name: the old claim must go before the new one can exist.
            delete_before_replace=True,
            custom_timeouts=pulumi.CustomTimeouts(delete=delete_timeout) if delete_timeout else None,
        ),
    )


def directory_claim_name(claim: str, owner: str) -> str:
    """The claim through which a namespace mounts ``owner``'s directory: its own, or another's it
    shares (storage.sharedDirectories). Never ``claim`` itself, the root claim's name, so a directory
    claim is made next to a root claim still in use and never replaces it."""
    return f"{claim}-{owner}"


# How long `pulumi up` waits for a root claim to go once the stack retires it. pulumi-kubernetes
# (pulumi/pulumi-kubernetes provider/pkg/await/await.go Deletion; metadata/overrides.go
# DeletedCondition, whose skipAwait exception lists no PersistentVolumeClaim) deletes the claim and
# then waits until it is gone, 10 minutes unless the delete timeout says otherwise. A claim a pod
# still mounts keeps the kubernetes.io/pvc-protection finalizer until that pod ends, so the wait would
# last the whole run of a training job: the up fails after this instead, naming the finalizer, with
# the claim Terminating (no new pod can mount it) until its last pod ends, and the next up finishes.
ROOT_CLAIM_DELETE_TIMEOUT = "3m"


# Entries at the root that are the file system's own (Lustre's .lustre, fid-based access), never data.
LUSTRE_ROOT_ENTRIES = (".lustre", "lost+found")


def root_data_script(root: str, moves: dict[str, str], directories: list[str], ids: dict[str, int]) -> str:
    """Move each entry ``moves`` assigns to a namespace from ``root`` into ``root/<namespace>/``
    (a rename on the one file system: no data is copied, nothing half-moved is left) and give it, and
    everything in it, to the namespace's id (``ids``), then list what stays at the root with no declared
    owner. An entry already at its destination counts as moved; what root owns in it is given to the id
    (should a run have stopped between the rename and the chown), what others wrote there since is left
    as it is. One at both places is a conflict, left for a person to merge: the script ends failing so
    `pulumi up` stops before the workload stacks are pointed at the directories. What was renamed before
    stays renamed, and the next run skips it."""
    quoted_moves = " ".join(f"'{entry}' '{owner}' '{ids[owner]}'" for entry, owner in sorted(moves.items()))
    known = " ".join(f"'{n}'" for n in sorted({*directories, *moves, *LUSTRE_ROOT_ENTRIES}))
    return f"""set -eu
root="{root}"
conflicts=0
set -- {quoted_moves}
while [ "$#" -gt 0 ]; do
  entry="$1"; owner="$2"; id="$3"; shift 3
  from="$root/$entry"; to="$root/$owner/$entry"
  if [ -e "$from" ] || [ -L "$from" ]; then
    if [ -e "$to" ] || [ -L "$to" ]; then
      echo "conflict: $from and $to both exist; left both for a person to merge"
      conflicts=$((conflicts + 1))
      continue
    fi
    mv -- "$from" "$to"
    echo "moved: $from -> $to"
    {_ownership_pass("to", "$id", NOT_OWNED_BY.format(id="$id"), itself=True)}
  elif [ -e "$to" ] || [ -L "$to" ]; then
    echo "already moved: $to"
    {_ownership_pass("to", "$id", ROOT_OWNED, itself=True)}
  else
    echo "absent: $from (nothing to move)"
  fi
done
for path in "$root"/* "$root"/.[!.]* "$root"/..?*; do
  [ -e "$path" ] || [ -L "$path" ] || continue
  name="${{path##*/}}"
  case " {known} " in
    *" '$name' "*) ;;
    *) echo "left at the root, no owner declared (storage.rootDataOwners): $path" ;;
  esac
done
if [ "$conflicts" -gt 0 ]; then
  echo "$conflicts conflict(s): merge them by hand, then replace this Job (pulumi up --replace)" >&2
  exit 1
fi
"""


def event_flows(repo: DataRepositoryConfig) -> str:
    """What replaces an association when its event lists change.

    terraform-provider-aws aws_fsx_data_repository_association declares the s3 policies and
    their events Optional+Computed and drops an all-empty block when expanding it: emptying a
    list plans no change and the old events stay. A replacement (metadata re-imported; file
    data kept, delete_data_in_filesystem is false) is the way to make any change take effect.
    """
    return f"import={','.join(repo.auto_import)};export={','.join(repo.auto_export)}"


def _s3_links(storage: StorageConfig) -> list[dict[str, Any]]:
    return [
        contract.exported(contract.S3Link, path=r.file_system_path, s3_path=r.s3_path)
        for r in storage.data_repositories
    ]


def association_s3(repo: DataRepositoryConfig) -> aws.fsx.DataRepositoryAssociationS3Args:
    """Which changes flow each way; both policies are sent, empty lists included."""
    return aws.fsx.DataRepositoryAssociationS3Args(
        auto_import_policy=aws.fsx.DataRepositoryAssociationS3AutoImportPolicyArgs(events=list(repo.auto_import)),
        auto_export_policy=aws.fsx.DataRepositoryAssociationS3AutoExportPolicyArgs(events=list(repo.auto_export)),
    )


@dataclass
class FsxStorageArgs:
    vpc_id: pulumi.Input[str]
    subnet_id: pulumi.Input[str]
    node_security_group_ids: list[pulumi.Input[str]]
    storage: StorageConfig
    retain: bool
    # Days of daily automatic backups (StackConfig.storage_backup_retention_days); 0 for none.
    backup_retention_days: int
    identities: TrainingIdentities
    namespaces: list[str]
    # Each training namespace's UID and GID (StackConfig.namespace_ids): its directory's owner.
    namespace_ids: dict[str, int]
    # The clients root squash leaves alone, as FSx NoSquashNids (infra/specs/lustre_nids.py): the
    # private subnets', where the core nodes are.
    no_squash_nids: list[str]
    # Namespaces of cluster services that mount the file system too (the burn-in checks the mount),
    # each with the resource that creates it.
    system_namespaces: dict[str, pulumi.Resource] = field(default_factory=dict)
    # The pull-through cache the driver's node images come through (Registries.pull_through_cache): the
    # release waits for it, so no node pulls a reference nothing serves yet.
    image_cache: list[pulumi.Resource] = field(default_factory=list)
    # The CSI controller's replicas (infra/specs/system_capacity.py controller_replicas).
    controller_replicas: int = HA_CONTROLLER_REPLICAS


class FsxStorage(pulumi.ComponentResource):
    security_group_id: pulumi.Output[str]
    file_system: aws.fsx.LustreFileSystem
    server_addresses: pulumi.Output[list[str]]
    # Per namespace, the claim on its own directory.
    claims: dict[str, k8s.core.v1.PersistentVolumeClaim]
    # (namespace, owner): the claim on ``owner``'s directory in ``namespace``.
    shared_claims: dict[tuple[str, str], k8s.core.v1.PersistentVolumeClaim]
    # Per namespace, its claim on the root, until storage.rootClaims is ``retired``.
    root_claims: dict[str, k8s.core.v1.PersistentVolumeClaim]

    def output(self, storage: StorageConfig, namespaces: list[str], zone_id: str) -> dict[str, Any]:
        """The file system as the workload stacks read it (``storage``, infra/contract.py)."""
        return contract.exported(
            contract.Storage,
            enabled=True,
            file_system_id=self.file_system.id,
            dns_name=self.file_system.dns_name,
            mount_name=self.file_system.mount_name,
            storage_class=STORAGE_CLASS,
            claim_name=storage.claim_name,
            namespaces=namespaces,
            capacity_gib=storage.capacity_gib,
            deployment_type=storage.deployment_type,
            per_unit_storage_throughput=storage.per_unit_storage_throughput,
            zone=zone_id,
            s3_links=_s3_links(storage),
            claims={ns: self.claims[ns].metadata.name for ns in namespaces},
        )

    @staticmethod
    def disabled_output(storage: StorageConfig, zone_id: str) -> dict[str, Any]:
        """The same keys when the shared file system's feature is off: nothing to mount (an EFS stack's
        has no FSx figures either)."""
        fsx = storage.kind == "fsx"
        return contract.exported(
            contract.Storage,
            enabled=False,
            **({} if fsx else {"kind": storage.kind}),
            file_system_id=None,
            dns_name=None,
            mount_name=None,
            storage_class=None,
            claim_name=None,
            namespaces=[],
            capacity_gib=storage.capacity_gib if fsx else None,
            deployment_type=storage.deployment_type if fsx else None,
            per_unit_storage_throughput=storage.per_unit_storage_throughput if fsx else None,
            zone=zone_id,
            s3_links=[],
            claims={},
        )

    def __init__(
        self, name: str, ctx: ClusterContext, args: FsxStorageArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("trainium:infra:FsxStorage", name, None, opts)
        provider = ctx.kubernetes
        child = pulumi.ResourceOptions(parent=self)
        storage = args.storage

        lustre_sg = aws.ec2.SecurityGroup(
            f"{name}-lustre",
            vpc_id=args.vpc_id,
            description="FSx for Lustre: LNet (TCP 988, 1018-1023) with the nodes and between servers",
            tags={**ctx.tags, "Name": f"{name}-lustre"},
            opts=child,
        )
        self.security_group_id = lustre_sg.id
        rules = self._lustre_rules(name, lustre_sg.id, args.node_security_group_ids)

        self.file_system = self._file_system(name, ctx, args, lustre_sg, rules)
        # The servers' addresses: every address of the interfaces "from which a specific file system is
        # accessible" (FSx API reference, FileSystem.NetworkInterfaceIds), for the training namespaces'
        # egress wall (infra/specs/node_security.py), whose Lustre-port rule also covers any it lacks.
        self.server_addresses: pulumi.Output[list[str]] = self.file_system.network_interface_ids.apply(
            lambda ids: pulumi.Output.all(
                *(
                    aws.ec2.get_network_interface_output(id=i, opts=pulumi.InvokeOutputOptions(parent=self)).private_ips
                    for i in ids or []
                )
            ).apply(lambda lists: sorted({address for addresses in lists for address in addresses}))
        )
        associations = [
            aws.fsx.DataRepositoryAssociation(
                f"{name}-s3-{i}",
                file_system_id=self.file_system.id,
                file_system_path=repo.file_system_path,
                data_repository_path=repo.s3_path,
                batch_import_meta_data_on_create=repo.import_metadata_on_create,
                s3=association_s3(repo),
                # Destroying the link must not delete training data from the file system.
                delete_data_in_filesystem=False,
                tags=ctx.tags,
                # Importing a large bucket's metadata keeps the association CREATING well past
                # the provider's 10-minute default.
                opts=pulumi.ResourceOptions(
                    parent=self,
                    protect=args.retain,
                    custom_timeouts=FILE_SYSTEM_TIMEOUTS,
                    replacement_trigger=event_flows(repo),
                ),
            )
            for i, repo in enumerate(storage.data_repositories)
        ]

        if storage.checkpoint_export is not None:
            checkpoint_export(name, ctx, storage.checkpoint_export, self.file_system, associations, self)

        _, identity = pod_identity_role(
            f"{name}-csi-controller",
            description="FSx for Lustre CSI controller: create and delete per-job file systems",
            parent=self,
            cluster=ctx,
            service_account=("kube-system", CONTROLLER_SERVICE_ACCOUNT),
            # The file system exists first: a new stack installs the driver once it does.
            inline_policy=self.file_system.arn.apply(csi_controller_policy),
            associate_in=ctx.cluster_name_output,
        )
        driver = helm_release(
            "aws-fsx-csi-driver",
            CHARTS["fsx-csi-driver"],
            "kube-system",
            self.chart_values(ctx, args.controller_replicas),
            pulumi.ResourceOptions(parent=self, provider=provider, depends_on=[*identity, *args.image_cache]),
        )
        k8s.storage.v1.StorageClass(
            STORAGE_CLASS,
            metadata={"name": STORAGE_CLASS},
            provisioner=PROVISIONER,
            parameters=pulumi.Output.all(args.subnet_id, lustre_sg.id).apply(
                lambda ids: storage_class_parameters(storage, ids[0], ids[1])
            ),
            reclaim_policy=storage.dynamic_reclaim_policy,
            # A claim on it binds when its first pod is scheduled, so neither `pulumi up` nor a
            # job submission blocks for the 5-15 minutes FSx takes to create.
            volume_binding_mode="WaitForFirstConsumer",
            mount_options=["flock"],
            opts=pulumi.ResourceOptions(parent=self, provider=provider, depends_on=[driver]),
        )
        after = [driver, *associations]
        root_claim = self._claim(ROOT_NAMESPACE, ROOT_CLAIM, "", args, provider, after)
        directories = [*args.namespaces, *args.system_namespaces]
        # The namespaces' claims on the root, declared as the stacks made them (same names, same
        # volume, same replacement trigger), so keeping them changes nothing that runs.
        self.root_claims = (
            {}
            if storage.root_claims == "retired"
            else {
                namespace: self._claim(
                    namespace,
                    storage.claim_name,
                    "",
                    args,
                    provider,
                    after,
                    replace_on_source=False,
                    delete_timeout=ROOT_CLAIM_DELETE_TIMEOUT,
                )
                for namespace in directories
            }
        )
        # pulumi-kubernetes awaits a batch/v1 Job until Complete and fails on Failed (pulumi/
        # pulumi-kubernetes provider/pkg/await/job.go), so no claim below exists, and no workload
        # stack mounts one, before its directory does. The pod template is immutable: a changed list
        # replaces the Job, the old one first (same name).
        # Both root Jobs come after the file system's root squash setting (the root claim's volume waits
        # for the file system) and after the core group in the exempt subnets (every Kubernetes resource
        # waits for it through the provider, __main__.py).
        ids = {ns: args.namespace_ids[ns] for ns in args.namespaces}
        job = k8s.batch.v1.Job(
            DIRECTORY_JOB,
            **directory_job(directories, ids),
            opts=pulumi.ResourceOptions(
                parent=self,
                provider=provider,
                depends_on=[root_claim],
                replace_on_changes=["spec"],
                delete_before_replace=True,
                custom_timeouts=ROOT_JOB_TIMEOUTS,
            ),
        )
        if storage.root_data_owners:
            # After the directories exist; moved entries are renamed into them.
            k8s.batch.v1.Job(
                ROOT_DATA_JOB,
                **root_data_job(storage.root_data_owners, directories, ids),
                opts=pulumi.ResourceOptions(
                    parent=self,
                    provider=provider,
                    depends_on=[root_claim, job],
                    replace_on_changes=["spec"],
                    delete_before_replace=True,
                    custom_timeouts=ROOT_JOB_TIMEOUTS,
                ),
            )
        self.claims = {
            namespace: self._claim(
                namespace,
                directory_claim_name(storage.claim_name, namespace),
                namespace,
                args,
                provider,
                [*after, job],
            )
            for namespace in directories
        }
        self.shared_claims = {
            (namespace, owner): self._claim(
                namespace,
                directory_claim_name(storage.claim_name, owner),
                owner,
                args,
                provider,
                [*after, job],
                read_only=mode == "read-only",
            )
            for namespace, owners in storage.shared_directories.items()
            for owner, mode in owners.items()
        }
        self.register_outputs({"fileSystemId": self.file_system.id})

    def _file_system(
        self,
        name: str,
        ctx: ClusterContext,
        args: FsxStorageArgs,
        lustre_sg: aws.ec2.SecurityGroup,
        rules: list[pulumi.Resource],
    ) -> aws.fsx.LustreFileSystem:
        storage = args.storage
        persistent = storage.deployment_type != "SCRATCH_2"
        return aws.fsx.LustreFileSystem(
            f"{name}-training",
            deployment_type=storage.deployment_type,
            storage_type="SSD",
            storage_capacity=storage.capacity_gib,
            per_unit_storage_throughput=storage.per_unit_storage_throughput,
            file_system_type_version=storage.lustre_version,
            data_compression_type=storage.compression,
            kms_key_id=storage.kms_key_id,
            subnet_ids=args.subnet_id,
            security_group_ids=[lustre_sg.id],
            # Delete keeps a final backup when the stack retains its data (FSx's default is none).
            skip_final_backup=not (persistent and args.retain),
            final_backup_tags={**ctx.tags, "Name": f"{name}-final"} if persistent and args.retain else None,
            # `protect` and the final backup guard only against `pulumi destroy`; daily backups are what
            # is left after an `rm -rf` or a torn run directory. Both settings change in place
            # (terraform-provider-aws internal/service/fsx/lustre_file_system.go, the aws-sdk-go-v2
            # rewrite pulumi-aws 7.x bridges: neither is ForceNew, resourceLustreFileSystemUpdate sends
            # them in UpdateFileSystem). The retention is always explicit, 0 included: the attribute is
            # Computed, so leaving it unset would keep whatever an earlier setting left. SCRATCH_2 takes
            # no backups at all. copy_tags_to_backups stays unset: it is ForceNew there, so turning it on
            # would replace the file system and lose its data; backups carry the file system's id.
            automatic_backup_retention_days=args.backup_retention_days if persistent else None,
            root_squash_configuration=root_squash_configuration(args.no_squash_nids),
            daily_automatic_backup_start_time=storage.backup_start_time
            if persistent and args.backup_retention_days
            else None,
            tags={**ctx.tags, "Name": f"{name}-training"},
            opts=pulumi.ResourceOptions(
                parent=self,
                # Lustre clients and servers must reach each other before the file system is used.
                depends_on=rules,
                protect=args.retain,
                custom_timeouts=FILE_SYSTEM_TIMEOUTS,
            ),
        )

    def _claim(
        self,
        namespace: str,
        claim_name: str,
        directory: str,
        args: FsxStorageArgs,
        provider: k8s.Provider,
        after: list[pulumi.Resource],
        read_only: bool = False,
        replace_on_source: bool = True,
        delete_timeout: str | None = None,
    ) -> k8s.core.v1.PersistentVolumeClaim:
        """A volume confined to ``directory`` (empty: the root) and its claim ``claim_name`` in
        ``namespace``, replaced as a pair, the volume's replacement leading.

        A Retain volume whose claim is deleted stays Released with the old claim's UID in its
        claimRef, and a new claim of the same name never binds to it (Kubernetes
        pv_controller.go: syncVolume treats a claim with another UID as missing; syncUnboundClaim
        leaves a claim Pending on a volume "already bound to a different claim"). So the claim is
        never re-created alone: whatever would replace it replaces the volume, whose replacement
        brings the claim's (`replace_with`). The volume is the one the claim depends on, so
        Pulumi deletes the claim first, then the volume (a Bound volume cannot be deleted: the
        pv-protection finalizer stays while it is Bound), creates the volume, then the claim,
        which binds at once. `pulumi up --replace` on the claim alone bypasses this: replace the
        volume instead (README, Storage).
        """
        storage, fs = args.storage, self.file_system
        # A root claim's source follows its name (the file system id) and the claim alone triggers it
        # (``replace_on_source`` False), as it always has: a trigger's value is compared with the one stored,
        # so another shape would replace it.
        return declare_static_pair(
            self,
            namespace,
            claim_name,
            fs.id,
            lambda volume_name: pulumi.Output.all(volume_name, fs.id, fs.dns_name, fs.mount_name).apply(
                lambda v: static_volume(
                    v[0], namespace, claim_name, storage.capacity_gib, *v[1:], directory=directory, read_only=read_only
                )
            ),
            provider,
            volume_after=[fs, *after],
            claim_after=[
                *args.identities.depends_for(namespace),
                *([args.system_namespaces[namespace]] if namespace in args.system_namespaces else []),
            ],
            replace_on_source=replace_on_source,
            delete_timeout=delete_timeout,
        )

    @staticmethod
    def chart_values(ctx: ClusterContext, replicas: int = HA_CONTROLLER_REPLICAS) -> dict[str, Any]:
        # The chart's own replicaCount is 2 (chart 1.17.0 values.yaml l.78): set only when it differs.
        replica_count = {} if replicas == HA_CONTROLLER_REPLICAS else {"replicaCount": replicas}
        return {
            # Every node pulls the node DaemonSet's images at launch: through the cluster's own registry
            # (infra/specs/image_cache.py FSX_CSI_NODE_IMAGES).
            **image_cache.chart_repositories(
                image_cache.FSX_CSI_NODE_IMAGES, ctx.partition, ctx.region, ctx.account_id, ctx.cluster_name
            ),
            "controller": {
                "serviceAccount": {"create": True, "name": CONTROLLER_SERVICE_ACCOUNT},
                "nodeSelector": CORE_NODE_SELECTOR,
                # The chart's default, said explicitly: at its two replicas (replicaCount: 2) a drain
                # takes one at a time, at one the drain evicts it (chart 1.17.0 templates/pdb.yaml:
                # maxUnavailable 1 up to two replicas, minAvailable 2 above).
                "podDisruptionBudget": {"enabled": True},
                "podAnnotations": {"cluster-autoscaler.kubernetes.io/safe-to-evict": "true"},
                **replica_count,
            },
            # Every node mounts Lustre, tainted Trainium nodes first of all.
            "node": {"tolerateAllTaints": True},
        }

    def _lustre_rules(
        self, name: str, lustre_sg: pulumi.Output[str], node_sgs: list[pulumi.Input[str]]
    ) -> list[pulumi.Resource]:
        """File system <-> itself and file system <-> nodes, both directions, Lustre ports only."""
        peers: list[tuple[str, pulumi.Input[str], pulumi.Input[str]]] = [("fs-self", lustre_sg, lustre_sg)]
        peers += [(f"node{i}", lustre_sg, sg) for i, sg in enumerate(node_sgs)]
        peers += [(f"node{i}-side", sg, lustre_sg) for i, sg in enumerate(node_sgs)]
        rules: list[pulumi.Resource] = []
        for label, own, other in peers:
            for low, high in LUSTRE_PORTS:
                for direction, rule_type in (
                    ("in", aws.vpc.SecurityGroupIngressRule),
                    ("out", aws.vpc.SecurityGroupEgressRule),
                ):
                    rules.append(
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
                    )
        return rules


# The scheduled export: an EventBridge Scheduler schedule whose universal target calls FSx
# CreateDataRepositoryTask (Scheduler user guide, managing-targets-universal: the target ARN is
# arn:<partition>:scheduler:::aws-sdk:<service>:<apiAction>, Input the API's request as JSON).
EXPORT_TARGET_ACTION = "aws-sdk:fsx:createDataRepositoryTask"
SCHEDULER_SERVICE = "scheduler.amazonaws.com"


def export_task_request(file_system_id: str, paths: list[str]) -> str:
    """The CreateDataRepositoryTask request a scheduled export sends (FSx API reference).

    EXPORT_TO_REPOSITORY writes each file under ``Paths`` to the bucket of the data repository
    association that holds it, only what was created or changed since the last export (FSx for Lustre
    user guide, export-changed-data-meta-dra); deletions are not exported, so S3 keeps every checkpoint
    the run has pruned. ``Paths`` are relative to the file system's root ("/nemo_experiments" is
    "nemo_experiments"; none is the root). ``Report`` is required; its ``Path`` only when enabled: off, since the
    task's own status and failure count (DescribeDataRepositoryTasks) say whether it failed, and a
    report would need a place in a training bucket.
    """
    request: dict[str, Any] = {"FileSystemId": file_system_id, "Type": "EXPORT_TO_REPOSITORY"}
    # No Paths exports from the root, which "/" asks for.
    if "/" not in paths:
        request["Paths"] = [path.lstrip("/") for path in paths]
    return json.dumps({**request, "Report": {"Enabled": False}})


def export_role_policy(file_system_arn: str, task_arns: str) -> str:
    """The schedule's one permission: CreateDataRepositoryTask on this file system. The action
    authorizes both the file system and the new task (Service Authorization Reference, Amazon FSx:
    resource types file-system and task), and a task's id exists only once it is created, hence
    ``task_arns``: every task of the account in this region. A request naming another file system
    is refused, since that file system is not in ``Resource``."""
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Sid": "ExportThisFileSystem",
                    "Effect": "Allow",
                    "Action": "fsx:CreateDataRepositoryTask",
                    "Resource": [file_system_arn, task_arns],
                }
            ],
        }
    )


def checkpoint_export(
    name: str,
    ctx: ClusterContext,
    export: CheckpointExportConfig,
    file_system: aws.fsx.LustreFileSystem,
    associations: list[aws.fsx.DataRepositoryAssociation],
    parent: pulumi.Resource,
) -> aws.scheduler.Schedule:
    """The role the schedule runs as and the schedule. The trust names the account only
    (aws:SourceAccount): schedules carry no tags to condition on, and only callers allowed to pass
    this role can attach it to a schedule. Created after the associations: before them an export
    task has nowhere to go and fails."""
    opts = pulumi.ResourceOptions(parent=parent)
    role = aws.iam.Role(
        f"{name}-checkpoint-export",
        assume_role_policy=service_trust_policy(
            SCHEDULER_SERVICE, conditions={"StringEquals": {"aws:SourceAccount": ctx.account_id}}
        ),
        description="EventBridge Scheduler: start FSx export tasks of the training file system",
        permissions_boundary=ctx.permissions_boundary_arn,
        tags=ctx.tags,
        opts=opts,
    )
    task_arns = f"arn:{ctx.partition}:fsx:{ctx.region}:{ctx.account_id}:task/*"
    policy = aws.iam.RolePolicy(
        f"{name}-checkpoint-export-policy",
        role=role.id,
        policy=file_system.arn.apply(lambda arn: export_role_policy(arn, task_arns)),
        opts=opts,
    )
    return aws.scheduler.Schedule(
        f"{name}-checkpoint-export",
        description=f"Export {', '.join(export.paths)} of the training file system to S3",
        schedule_expression=export.schedule,
        schedule_expression_timezone="UTC",
        flexible_time_window=aws.scheduler.ScheduleFlexibleTimeWindowArgs(mode="OFF"),
        target=aws.scheduler.ScheduleTargetArgs(
            arn=f"arn:{ctx.partition}:scheduler:::{EXPORT_TARGET_ACTION}",
            role_arn=role.arn,
            input=file_system.id.apply(lambda fs_id: export_task_request(fs_id, export.paths)),
        ),
        opts=pulumi.ResourceOptions(parent=parent, depends_on=[policy, *associations]),
    )
