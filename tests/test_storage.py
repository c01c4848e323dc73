"""Training storage as a real deploy meets it: one FSx file system per cluster, owned by the
stack, linked to S3, mounted in every training namespace through a static volume of its own
directory, and the move there from the root claims without a hung up or hidden data."""

from __future__ import annotations

import json
import re
import stat
import subprocess
import tempfile
from pathlib import Path

import pytest

from bootstrap import permissions
from infra.components.kube import ROOT_SQUASH_EXEMPT_SELECTOR
from infra.components.storage import (
    ROOT_JOB_CAPABILITIES,
    directories_script,
    export_task_request,
    root_data_script,
    static_volume,
)
from infra.config.errors import ConfigError
from infra.config.rules import fsx_capacity_problem
from infra.validate import parse_stack_config
from tests.root_job_runs import run_script

FILE_SYSTEM = "aws:fsx/lustreFileSystem:LustreFileSystem"
ASSOCIATION = "aws:fsx/dataRepositoryAssociation:DataRepositoryAssociation"
VOLUME = "kubernetes:core/v1:PersistentVolume"
CLAIM = "kubernetes:core/v1:PersistentVolumeClaim"
STORAGE_CLASS = "kubernetes:storage.k8s.io/v1:StorageClass"
S3_LINK = {"fileSystemPath": "/default/datasets", "s3Path": "s3://my-training-data/datasets"}


@pytest.fixture
def migrated(plan_with):
    """dev as a stack deployed before the per-namespace directories, once it moves on (storage.rootClaims:
    migrated): its root claims stay for pods still holding them."""
    return plan_with(storage={"rootClaims": "migrated"})


def test_one_file_system_per_cluster_whatever_the_namespaces(prod):
    # Before: each namespace's dynamic `fsx-claim` made the CSI driver create a file system of
    # its own (prod: two 4800 GiB file systems).
    (fs,) = prod.of_type(FILE_SYSTEM)
    assert fs.inputs["storageCapacity"] == 4800
    # Per training namespace and the burn-in's (which checks the mount): a claim on its directory (the
    # shipped stacks have retired the root claims); and the directory Job's root claim.
    assert len(prod.of_type(CLAIM)) == 4 and len(prod.of_type(VOLUME)) == 4
    handles = {v.inputs["spec"]["csi"]["volumeHandle"] for v in prod.of_type(VOLUME)}
    assert handles == {"fs-placeholder-fsx-training"}


def test_file_system_settings(dev_fsx):
    fs = dev_fsx.named("fsx-training", FILE_SYSTEM)
    assert fs.inputs["deploymentType"] == "PERSISTENT_2"
    assert fs.inputs["perUnitStorageThroughput"] == 125
    assert fs.inputs["fileSystemTypeVersion"] == "2.15"
    assert fs.inputs["dataCompressionType"] == "LZ4"
    assert fs.inputs["storageType"] == "SSD"
    # The accelerator zone's private subnet, behind the Lustre security group only.
    assert fs.inputs["subnetIds"] == "subnet-placeholder-network-private-usw2-az4"
    assert fs.inputs["securityGroupIds"] == ["sg-placeholder-fsx-lustre"]
    # Creating a file system takes 5-15 minutes: room beyond the default.
    assert fs.lifecycle["customTimeouts"] == {"create": "60m", "update": "60m", "delete": "60m"}
    # Every Lustre rule exists before the file system, so the first mount cannot hang on LNet.
    rules = [
        r.urn for r in dev_fsx.registrations if r.type.startswith("aws:vpc/securityGroup") and r.name.startswith("fsx-")
    ]
    assert set(rules) <= set(fs.dependencies) and len(rules) == 12


def test_dev_file_system_is_destroyable_and_prod_is_protected_with_a_final_backup(dev_fsx, prod):
    # terraform-provider-aws, aws_fsx_lustre_file_system: skip_final_backup defaults to true
    # (as does the FSx API), so without setting it a destroyed PERSISTENT file system leaves
    # nothing behind.
    dev_fs, prod_fs = dev_fsx.named("fsx-training", FILE_SYSTEM), prod.named("fsx-training", FILE_SYSTEM)
    assert dev_fs.protect is False and dev_fs.inputs["skipFinalBackup"] is True
    assert prod_fs.protect is True and prod_fs.inputs["skipFinalBackup"] is False
    assert prod_fs.inputs["finalBackupTags"]["Name"] == "fsx-final"


def test_a_retained_file_system_takes_daily_backups_and_dev_takes_none(dev_fsx, prod):
    # FSx CreateFileSystem: AutomaticBackupRetentionDays defaults to 0 (no automatic backups), and
    # `protect` or the final backup guard only `pulumi destroy`. Prod's stack file keeps two weeks.
    dev_fs, prod_fs = dev_fsx.named("fsx-training", FILE_SYSTEM), prod.named("fsx-training", FILE_SYSTEM)
    assert prod_fs.inputs["automaticBackupRetentionDays"] == 14
    assert prod_fs.inputs["dailyAutomaticBackupStartTime"] == "05:00"
    # Dev is not retained: explicitly none (the attribute is Computed: unset would keep what an
    # earlier setting left), and no start time for backups that never run.
    assert dev_fs.inputs["automaticBackupRetentionDays"] == 0
    assert "dailyAutomaticBackupStartTime" not in dev_fs.inputs
    # copy_tags_to_backups is ForceNew in terraform-provider-aws: turning it on would replace the
    # file system and its data.
    assert "copyTagsToBackups" not in prod_fs.inputs and "copyTagsToBackups" not in dev_fs.inputs


def test_retention_follows_retain_unless_the_stack_sets_it(plan_with):
    fs = plan_with(storage={"retain": True}).named("fsx-training", FILE_SYSTEM)
    assert fs.protect and fs.inputs["automaticBackupRetentionDays"] == 7
    fs = plan_with(storage={"backupRetentionDays": 3, "backupStartTime": "22:30"}).named("fsx-training", FILE_SYSTEM)
    assert not fs.protect and fs.inputs["automaticBackupRetentionDays"] == 3
    assert fs.inputs["dailyAutomaticBackupStartTime"] == "22:30"


PROD_BASE = {"region": "us-east-2", "environment": "prod", "endpointAccess": {"publicCidrs": ["203.0.113.0/24"]}}


@pytest.mark.parametrize(
    ("config", "message"),
    [
        (
            {"storage": {"backupRetentionDays": 91}},
            "storage.backupRetentionDays = 91: FSx keeps automatic backups 0 to 90 days (0 turns them off)",
        ),
        (
            {"storage": {"backupRetentionDays": -1}},
            "storage.backupRetentionDays = -1: FSx keeps automatic backups 0 to 90 days",
        ),
        (
            {"storage": {"backupStartTime": "5:00"}},
            "storage.backupStartTime = '5:00': a UTC time HH:MM such as 05:00",
        ),
        (
            {"storage": {"deploymentType": "SCRATCH_2", "perUnitStorageThroughput": None, "backupRetentionDays": 7}},
            "storage.backupRetentionDays = 7: SCRATCH_2 file systems take no backups; use PERSISTENT_2 or 0",
        ),
        (
            {"storage": {"retain": True, "backupRetentionDays": 0}},
            "storage.backupRetentionDays = 0: a retained file system keeps daily automatic backups (allowed: 1 to 90)",
        ),
        (
            {**PROD_BASE, "storage": {"backupRetentionDays": 3}},
            "storage.backupRetentionDays = 3: prod keeps automatic backups at least 7 days (allowed: 7 to 90)",
        ),
        (
            {**PROD_BASE, "storage": {"retain": False}},
            "storage.backupRetentionDays = not set (0 without storage.retain): prod keeps automatic backups at least 7",
        ),
    ],
)
def test_backup_retention_refusals(config, message):
    with pytest.raises(ConfigError) as err:
        parse_stack_config({"region": "us-west-2", **config})
    assert message in str(err.value)


def test_backup_retention_defaults():
    assert parse_stack_config({"region": "us-west-2"}).storage_backup_retention_days == 0
    assert parse_stack_config(PROD_BASE).storage_backup_retention_days == 7
    assert parse_stack_config({**PROD_BASE, "storage": {"backupRetentionDays": 30}}).storage_backup_retention_days == 30


def test_static_volume_matches_the_csi_driver_contract():
    # kubernetes-sigs/aws-fsx-csi-driver v1.9.0 (chart 1.17.0): examples/kubernetes/
    # static_provisioning/specs/pv.yaml and pkg/driver/node.go: volumeHandle is the file
    # system id; the node mounts "<dnsname>@tcp:/<mountname>" (mountname defaults to "fsx",
    # wrong for PERSISTENT_2, so it is always passed); mountOptions are passed to mount.
    volume = static_volume(
        "fsx-claim-research",
        "research",
        "fsx-claim",
        2400,
        "fs-0abc",
        "fs-0abc.fsx.us-west-2.amazonaws.com",
        "x7yzbmav",
        directory="research",
    )
    spec = volume["spec"]
    # The directory rides in mountname: the node mounts "<dnsname>@tcp:/x7yzbmav/research", a
    # Lustre subdirectory mount that shows the pod nothing above /research.
    assert spec["csi"] == {
        "driver": "fsx.csi.aws.com",
        "volumeHandle": "fs-0abc",
        "volumeAttributes": {"dnsname": "fs-0abc.fsx.us-west-2.amazonaws.com", "mountname": "x7yzbmav/research"},
    }
    assert spec["mountOptions"] == ["flock"]
    assert spec["accessModes"] == ["ReadWriteMany"] and spec["capacity"] == {"storage": "2400Gi"}
    # Retain: deleting the claim must never ask anything to delete the stack's file system.
    assert spec["persistentVolumeReclaimPolicy"] == "Retain"
    # No class and a claimRef: no provisioner acts on it and only that namespace's claim binds it.
    assert spec["storageClassName"] == ""
    assert spec["claimRef"] == {"namespace": "research", "name": "fsx-claim"}


def test_claim_binds_its_static_volume_without_waiting_for_provisioning(dev_fsx):
    # pulumi/pulumi-kubernetes provider/pkg/await/awaiters.go (v4.32.0, unchanged on master):
    # a PVC is awaited until Bound with a fixed 5-minute watch; dynamic FSx takes 5-15 min,
    # a claim pre-bound to an existing volume binds at once.
    claim = dev_fsx.named("default-fsx-claim-default", CLAIM)
    assert claim.inputs["metadata"] == {"name": "fsx-claim-default", "namespace": "default"}
    assert claim.inputs["spec"] == {
        "accessModes": ["ReadWriteMany"],
        "storageClassName": "",
        "volumeName": "fsx-claim-default-default-fs-placeholder-fsx-training",
        "resources": {"requests": {"storage": "1200Gi"}},
    }
    volume = dev_fsx.named("fsx-claim-default-default", VOLUME)
    assert volume.inputs["spec"]["csi"]["volumeAttributes"] == {
        "dnsname": "fs-placeholder-fsx-training.fsx.us-west-2.amazonaws.com",
        "mountname": "placeholder/default",
    }
    assert volume.urn in claim.dependencies


def test_a_replaced_file_system_gets_new_volumes_and_rebound_claims(migrated):
    # kubernetes/kubernetes pkg/apis/core/validation/validation.go (v1.34),
    # ValidatePersistentVolumeUpdate / ValidatePersistentVolumeClaimUpdate: a volume's source
    # and a claim's volumeName cannot change. The volume's name carries the file system id, so
    # a new file system means a new volume (its name changes: pulumi-kubernetes replaces it) and
    # a replaced claim, old-first because its own name stays the same (see the next test).
    volume, claim = migrated.named("fsx-claim-default", VOLUME), migrated.named("default-fsx-claim", CLAIM)
    assert volume.inputs["metadata"]["name"] == "fsx-claim-default-fs-placeholder-fsx-training"
    assert claim.lifecycle["replaceOnChanges"] == ["spec.volumeName"]
    assert claim.lifecycle["deleteBeforeReplace"] is True


def test_a_claim_is_only_ever_recreated_with_its_volume_and_after_it(migrated):
    """Why: the static volume is Retain. When its claim is deleted, the volume keeps the old claim's
    UID in claimRef: kubernetes/kubernetes pkg/controller/volume/persistentvolume/pv_controller.go,
    syncVolume ("claim ... has different UID, the old one must have been deleted": treated as
    missing, the volume goes Released and Retain does nothing) and syncUnboundClaim (a claim
    naming a volume "claimed by someone else" stays Pending). A claim re-created alone never binds
    and pulumi-kubernetes awaits Bound until it times out.

    How: the volume leads. pulumi SDK 3.272.0 pulumi/resource.py, ResourceOptions:
    `replacement_trigger` "the engine will diff this with the last recorded value, and trigger a
    replace if they are not equal" (pulumi/pulumi step_generator.go shouldTriggerReplace, v3.259.0:
    a trigger that appears, null before, replaces nothing, so existing stacks keep their pairs);
    `replace_with` "this resource will also be replaced whenever any of the provided resources are
    replaced". The volume's trigger is the claim as declared, so any change to the claim replaces
    the volume; the claim is replaced with it. The volume deletes before replacing (its name
    does not change with the claim), and the engine then deletes, in reverse dependency order,
    the resources replaced with it (step_generator.go, delete-before-replace:
    calculateDependentReplacements + findDependentCascadeReplacements): the claim goes first,
    which it must, since kubernetes pkg/controller/volume/pvprotection/pv_protection_controller.go
    isBeingUsed keeps a Bound volume's finalizer and its deletion would wait forever. The claim
    depends on the volume's own name output for the same ordering on destroy.

    Not the other way round: a volume depending on its claim (its claimRef.uid, say) would be
    deleted before the claim in such a chain and hang on that finalizer; and pulumi-kubernetes
    replaces a PersistentVolume only for its volume source (provider/pkg/provider/diff.go: the
    PersistentVolume forceNew list has no claimRef)."""
    for volume_name, claim_name in (
        ("fsx-claim-default-default", "default-fsx-claim-default"),
        ("fsx-claim-default", "default-fsx-claim"),
    ):
        volume, claim = migrated.named(volume_name, VOLUME), migrated.named(claim_name, CLAIM)
        declared = {"metadata": claim.inputs["metadata"], "spec": claim.inputs["spec"]}
        if volume_name == "fsx-claim-default":
            # The root claim's trigger is the declared claim, the value its stack stored: any other
            # value, the same claim in another shape included, would replace a claim pods hold.
            assert volume.lifecycle["replacementTrigger"] == declared
        else:
            # The volume's CSI source too: what it mounts cannot change in place either.
            source = volume.inputs["spec"]["csi"]
            assert volume.lifecycle["replacementTrigger"] == {"claim": declared, "source": source}
        assert volume.lifecycle["deleteBeforeReplace"] is True
        assert claim.lifecycle["replaceWith"] == [volume.urn]
        assert volume.urn in claim.property_dependencies["spec"]
        assert claim.inputs["spec"]["volumeName"] == volume.inputs["metadata"]["name"]
        # Nothing of the claim flows into the volume: no dependency the wrong way.
        assert claim.urn not in volume.dependencies


def test_growing_the_file_system_leaves_the_claims_unchanged(plan_with):
    # A class-less claim's request cannot be raised (the API server allows expanding only
    # claims whose StorageClass has allowVolumeExpansion), and pulumi-kubernetes patches a
    # changed request in place (provider/pkg/provider/diff.go, v4.32.0): the patch would be
    # refused half-way through `pulumi up`. Only the volume's capacity follows the config.
    plan = plan_with(storage={"capacityGib": 2400})
    claim = plan.named("default-fsx-claim-default", CLAIM)
    assert claim.inputs["spec"]["resources"] == {"requests": {"storage": "1200Gi"}}
    volume = next(v for v in plan.of_type(VOLUME) if v.inputs["metadata"]["name"] == claim.inputs["spec"]["volumeName"])
    assert volume.inputs["spec"]["capacity"] == {"storage": "2400Gi"}


def test_destroy_runs_claims_then_volumes_then_driver_then_file_system_then_network(migrated):
    # Pulumi deletes dependents first: each arrow below is a recorded dependency.
    claim, volume = migrated.named("default-fsx-claim", CLAIM), migrated.named("fsx-claim-default", VOLUME)
    driver, fs = migrated.named("aws-fsx-csi-driver"), migrated.named("fsx-training", FILE_SYSTEM)
    assert volume.urn in claim.dependencies
    # The node plugin must still be there to unmount while volumes go away.
    assert driver.urn in volume.dependencies and fs.urn in volume.dependencies
    sg = migrated.named("fsx-lustre", "aws:ec2/securityGroup:SecurityGroup")
    assert sg.urn in fs.dependencies
    subnet = migrated.named("network-private-usw2-az4", "aws:ec2/subnet:Subnet")
    assert subnet.urn in fs.dependencies


def test_storage_class_for_extra_volumes_never_blocks_up(dev_fsx):
    # pulumi-kubernetes awaiters.go: a PVC whose class is WaitForFirstConsumer counts as
    # ready while Pending, so neither `pulumi up` nor a job submission waits for FSx.
    (storage_class,) = [r.inputs for r in dev_fsx.of_type(STORAGE_CLASS)]
    assert storage_class["volumeBindingMode"] == "WaitForFirstConsumer"
    assert storage_class["provisioner"] == "fsx.csi.aws.com"
    assert storage_class["reclaimPolicy"] == "Delete"
    assert storage_class["parameters"] == {
        "subnetId": "subnet-placeholder-network-private-usw2-az4",
        "securityGroupIds": "sg-placeholder-fsx-lustre",
        "deploymentType": "PERSISTENT_2",
        "fileSystemTypeVersion": "2.15",
        "dataCompressionType": "LZ4",
        "perUnitStorageThroughput": "125",
    }


def test_prod_storage_tier_and_namespaces(prod):
    fs = prod.named("fsx-training", FILE_SYSTEM)
    assert fs.inputs["perUnitStorageThroughput"] == 250
    assert fs.inputs["subnetIds"] == "subnet-placeholder-network-private-use2-az3"
    claims = [r.inputs for r in prod.of_type(CLAIM)]
    # The training namespaces', and the burn-in's (it checks the mount on each new Trainium node): one
    # each, on its own directory (the shipped stacks have retired the root claims). The directory
    # Job's root claim lives in kube-system.
    assert sorted(c["metadata"]["namespace"] for c in claims) == [
        "default",
        "kube-system",
        "neuron-burn-in",
        "research",
    ]
    # The volumes carry the file system's size; the claims FSx's smallest, which any volume covers.
    assert {c["spec"]["resources"]["requests"]["storage"] for c in claims} == {"1200Gi"}
    assert {v.inputs["spec"]["capacity"]["storage"] for v in prod.of_type(VOLUME)} == {"4800Gi"}
    volumes = sorted(v.inputs["metadata"]["name"] for v in prod.of_type(VOLUME))
    assert volumes == [
        "fsx-claim-default-default-fs-placeholder-fsx-training",
        "fsx-claim-neuron-burn-in-neuron-burn-in-fs-placeholder-fsx-training",
        "fsx-claim-research-research-fs-placeholder-fsx-training",
        "fsx-root-kube-system-fs-placeholder-fsx-training",
    ]
    assert prod.named("ns-research").urn in prod.named("research-fsx-claim-research", CLAIM).dependencies
    burn_in = prod.named("neuron-burn-in-fsx-claim-neuron-burn-in", CLAIM)
    assert prod.named("burn-in-namespace-neuron-burn-in").urn in burn_in.dependencies


def test_the_shipped_workloads_mount_only_their_own_namespaces_directory(workloads_dev, workloads_prod):
    # Attack path 3 of the security review (a pod reading another namespace's data on FSx) is closed in
    # the stacks as shipped: every claim a workload pod mounts is its own namespace's directory claim.
    for plan in (workloads_dev, workloads_prod):
        mounted = {
            (r.inputs["metadata"].get("namespace", "default"), v["persistentVolumeClaim"]["claimName"])
            for r in plan.registrations
            for v in _volumes(r.inputs)
            if "persistentVolumeClaim" in v
        }
        assert mounted and all(claim == f"fsx-claim-{namespace}" for namespace, claim in mounted), mounted


def _volumes(value):
    """Every `volumes` entry anywhere in a manifest (pods, pod templates, Volcano tasks, Ray groups)."""
    if isinstance(value, dict):
        for key, inner in value.items():
            if key == "volumes" and isinstance(inner, list):
                yield from (v for v in inner if isinstance(v, dict))
            else:
                yield from _volumes(inner)
    elif isinstance(value, list):
        for inner in value:
            yield from _volumes(inner)


def test_s3_links_are_data_repository_associations(plan_with):
    plan = plan_with(
        storage={
            "dataRepositories": [
                S3_LINK,
                {
                    "fileSystemPath": "/default/checkpoints",
                    "s3Path": "s3://my-checkpoints",
                    "autoImport": [],
                    "autoExport": ["NEW", "CHANGED"],
                },
            ]
        }
    )
    datasets, checkpoints = (plan.named(f"fsx-s3-{i}", ASSOCIATION).inputs for i in (0, 1))
    assert datasets["fileSystemId"] == "fs-placeholder-fsx-training"
    assert (
        datasets["fileSystemPath"] == "/default/datasets"
        and datasets["dataRepositoryPath"] == "s3://my-training-data/datasets"
    )
    # Both policies always sent: an omitted one would leave the previous policy in place.
    assert datasets["s3"] == {
        "autoImportPolicy": {"events": ["NEW", "CHANGED", "DELETED"]},
        "autoExportPolicy": {"events": []},
    }
    assert plan.named("fsx-s3-0").lifecycle["customTimeouts"] == {"create": "60m", "update": "60m", "delete": "60m"}
    assert datasets["batchImportMetaDataOnCreate"] is True
    # Unlinking must not delete the training data in the file system.
    assert datasets["deleteDataInFilesystem"] is False
    assert checkpoints["s3"] == {"autoImportPolicy": {"events": []}, "autoExportPolicy": {"events": ["NEW", "CHANGED"]}}
    # terraform-provider-aws aws_fsx_data_repository_association: the policies are
    # Optional+Computed and an all-empty block is dropped, so an emptied list would plan no
    # change; the event lists therefore trigger a replacement instead.
    assert plan.named("fsx-s3-1").lifecycle["replacementTrigger"] == "import=;export=NEW,CHANGED"
    assert plan.named("fsx-s3-0").lifecycle["replacementTrigger"] == "import=NEW,CHANGED,DELETED;export="
    assert plan.outputs["storage"]["s3Links"] == [
        {"path": "/default/datasets", "s3Path": "s3://my-training-data/datasets"},
        {"path": "/default/checkpoints", "s3Path": "s3://my-checkpoints"},
    ]
    # The namespace's volume waits for the links, so its pods see the imported listing.
    claim = plan.named("default-fsx-claim-default", CLAIM)
    volume = next(v for v in plan.of_type(VOLUME) if v.inputs["metadata"]["name"] == claim.inputs["spec"]["volumeName"])
    assert {plan.named(f"fsx-s3-{i}").urn for i in (0, 1)} <= set(volume.dependencies)


def test_persistent_2_takes_s3_links_now():
    # Associations are how PERSISTENT_2 links S3, so S3 with PERSISTENT_2 is accepted.
    config = parse_stack_config({"region": "us-west-2", "storage": {"dataRepositories": [S3_LINK]}})
    assert config.storage.data_repositories[0].s3_path == "s3://my-training-data/datasets"


@pytest.mark.parametrize(
    ("repositories", "message"),
    [
        ([{**S3_LINK, "fileSystemPath": "datasets"}], "fileSystemPath = 'datasets': an absolute path such as /data"),
        (
            [S3_LINK, {**S3_LINK, "fileSystemPath": "/default/datasets/bert", "s3Path": "s3://other"}],
            "dataRepositories[1].fileSystemPath = '/default/datasets/bert': overlaps '/default/datasets'; associations "
            "may not nest",
        ),
        (
            [{**S3_LINK, "fileSystemPath": "/"}, {**S3_LINK, "fileSystemPath": "/default/x", "s3Path": "s3://other"}],
            "'/' can only be linked when it is the only association",
        ),
        (
            [S3_LINK, {**S3_LINK, "fileSystemPath": "/default/other"}],
            "dataRepositories[1].s3Path = 's3://my-training-data/datasets': bucket 'my-training-data' is already linked",
        ),
        (
            [{**S3_LINK, "s3Path": "my-training-data"}],
            "s3Path = 'my-training-data': must be an s3://bucket[/prefix] URL",
        ),
        ([{**S3_LINK, "autoImport": ["NEW", "NEW"]}], "autoImport = ['NEW', 'NEW']: lists an event twice"),
        (
            [{**S3_LINK, "autoImport": ["ADDED"]}],
            "autoImport[0] = 'ADDED': Input should be 'NEW', 'CHANGED' or 'DELETED'",
        ),
    ],
)
def test_s3_link_rules_the_fsx_api_applies(repositories, message):
    # FSx API, CreateDataRepositoryAssociation: FileSystemPath starts with '/', '/' only as the
    # sole association, associations may not overlap, a bucket is linked once, events are
    # NEW/CHANGED/DELETED.
    with pytest.raises(ConfigError) as err:
        parse_stack_config({"region": "us-west-2", "storage": {"dataRepositories": repositories}})
    assert message in str(err.value)


def test_persistent_2_needs_lustre_2_15():
    with pytest.raises(ConfigError) as err:
        parse_stack_config({"region": "us-west-2", "storage": {"lustreVersion": "2.12"}})
    assert "storage.lustreVersion = '2.12': PERSISTENT_2 file systems run Lustre 2.15" in str(err.value)


@pytest.mark.parametrize("key", ["alias/fsx", "1234abcd-12ab-34cd-56ef-1234567890ab"])
def test_kms_key_must_be_a_key_arn(key):
    # terraform-provider-aws aws_fsx_lustre_file_system kms_key_id: ValidateFunc verify.ValidARN.
    with pytest.raises(ConfigError) as err:
        parse_stack_config({"region": "us-west-2", "storage": {"kmsKeyId": key}})
    assert f"storage.kmsKeyId = {key!r}: a KMS key ARN" in str(err.value)
    key = "arn:aws:kms:us-west-2:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"
    assert parse_stack_config({"region": "us-west-2", "storage": {"kmsKeyId": key}}).storage.kms_key_id == key


def test_capacity_steps():
    assert fsx_capacity_problem(1200) is None and fsx_capacity_problem(7200) is None
    assert "nearest: 2400 or 4800" in (fsx_capacity_problem(3600) or "")


def test_storage_off_declares_no_file_system(plan_with):
    plan = plan_with(features={"fsxCsi": False})
    assert not plan.of_type(FILE_SYSTEM) and not plan.of_type(VOLUME)
    assert plan.outputs["storage"]["fileSystemId"] is None and plan.outputs["storage"]["claims"] == {}


JOB = "kubernetes:batch/v1:Job"


IDS = {"default": 20001, "research": 20002}
RETIRED = {"trainingNamespaces": ["default", "research"], "namespaceIds": IDS, "storage": {"rootClaims": "retired"}}


def test_each_namespace_mounts_only_its_own_directory(plan_with):
    # kubernetes-sigs/aws-fsx-csi-driver v1.9.0 pkg/driver/node.go NodePublishVolume mounts
    # "<dnsname>@tcp:/<mountname>" as given: mountname "<fsname>/<namespace>" is a Lustre
    # subdirectory mount, so a pod of `research` has no path to `default`'s checkpoints.
    plan = plan_with(**RETIRED)
    mounted = {
        v.inputs["spec"]["claimRef"]["namespace"]: v.inputs["spec"]["csi"]["volumeAttributes"]["mountname"]
        for v in plan.of_type(VOLUME)
    }
    assert mounted == {
        "default": "placeholder/default",
        "research": "placeholder/research",
        "neuron-burn-in": "placeholder/neuron-burn-in",
        # The one root volume: only the Jobs in kube-system mount it.
        "kube-system": "placeholder",
    }
    root = plan.named("fsx-root-kube-system", VOLUME)
    assert root.inputs["spec"]["claimRef"] == {"namespace": "kube-system", "name": "fsx-root"}
    # No training namespace has a claim on the root or on another namespace's directory.
    claims = {(c.inputs["metadata"]["namespace"], c.inputs["metadata"]["name"]) for c in plan.of_type(CLAIM)}
    assert claims == {
        ("default", "fsx-claim-default"),
        ("research", "fsx-claim-research"),
        ("neuron-burn-in", "fsx-claim-neuron-burn-in"),
        ("kube-system", "fsx-root"),
    }
    assert plan.outputs["storage"]["claims"] == {"default": "fsx-claim-default", "research": "fsx-claim-research"}


def test_directories_exist_before_any_namespace_claim(prod):
    job = prod.named("fsx-namespace-directories", JOB)
    pod = job.inputs["spec"]["template"]["spec"]
    assert job.inputs["metadata"] == {"name": "fsx-namespace-directories", "namespace": "kube-system"}
    assert pod["volumes"] == [{"name": "fsx", "persistentVolumeClaim": {"claimName": "fsx-root"}}]
    # On a core node in the subnets root squash exempts (tests/test_root_squash.py).
    assert pod["nodeSelector"] == ROOT_SQUASH_EXEMPT_SELECTOR
    (container,) = pod["containers"]
    script = container["command"][2]
    # Each training namespace with its id; the burn-in's directory with none (it stays root's).
    assert "set -- 'default' '20001' 'research' '20002' 'neuron-burn-in' ''" in script
    assert prod.named("kube-system-fsx-root", CLAIM).urn in job.dependencies
    # A subdirectory mount of a missing directory fails: every namespace's volume waits for the
    # Job (pulumi-kubernetes awaits a Job until Complete), and so do their claims.
    for namespace in ("default", "research", "neuron-burn-in"):
        assert job.urn in prod.named(f"fsx-claim-{namespace}-{namespace}", VOLUME).dependencies
    # Its pod template is immutable: a new namespace list replaces the Job, the old one first.
    assert job.lifecycle["replaceOnChanges"] == ["spec"] and job.lifecycle["deleteBeforeReplace"] is True


def test_directories_script_creates_missing_directories_and_keeps_existing_data(tmp_path):
    """Creating and keeping; who owns them is tests/test_root_squash.py's (it needs root)."""
    (tmp_path / "default").mkdir()
    (tmp_path / "default" / "checkpoint.pt").write_text("weights")
    script = directories_script(str(tmp_path), ["default", "research", "neuron-burn-in"], {})
    for _ in range(2):  # a re-run (a replaced Job) finds them all and succeeds
        done = subprocess.run(["sh", "-c", script], capture_output=True, text=True, check=False)
        assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["default", "neuron-burn-in", "research"]
    assert (tmp_path / "default" / "checkpoint.pt").read_text() == "weights"
    assert stat.S_IMODE((tmp_path / "research").stat().st_mode) == 0o755
    assert f"{tmp_path}/research ready" in done.stdout


def test_directories_script_fails_when_it_cannot_create_one(tmp_path):
    (tmp_path / "research").write_text("a file where the directory belongs")
    done = subprocess.run(
        ["sh", "-c", directories_script(str(tmp_path), ["research"], {})], capture_output=True, check=False
    )
    assert done.returncode != 0


SHARED = {"trainingNamespaces": ["default", "research"], "namespaceIds": IDS}


def test_a_namespace_mounts_another_directory_only_as_configured(plan_with):
    plan = plan_with(
        **SHARED,
        storage={"sharedDirectories": {"research": {"default": "read-only"}, "default": {"research": "read-write"}}},
    )
    ro = plan.named("fsx-claim-default-research", VOLUME).inputs["spec"]
    assert ro["claimRef"] == {"namespace": "research", "name": "fsx-claim-default"}
    assert ro["csi"]["volumeAttributes"]["mountname"] == "placeholder/default"
    # node.go NodePublishVolume adds "ro" to the mount options when the kubelet passes readonly,
    # which it does for a CSI source with readOnly; the access mode stays one the driver accepts.
    assert ro["csi"]["readOnly"] is True and ro["accessModes"] == ["ReadWriteMany"]
    rw = plan.named("fsx-claim-research-default", VOLUME).inputs["spec"]
    assert rw["claimRef"] == {"namespace": "default", "name": "fsx-claim-research"}
    assert rw["csi"]["volumeAttributes"]["mountname"] == "placeholder/research" and "readOnly" not in rw["csi"]
    claim = plan.named("research-fsx-claim-default", CLAIM)
    assert claim.inputs["spec"]["volumeName"] == "fsx-claim-default-research-fs-placeholder-fsx-training"


@pytest.mark.parametrize(
    ("shared", "message"),
    [
        (
            {"staging": {"default": "read-only"}},
            "storage.sharedDirectories.staging = {'default': 'read-only'}: not a training namespace",
        ),
        (
            {"research": {"ops": "read-write"}},
            "storage.sharedDirectories.research.ops = 'read-write': not a training namespace, so it has no directory",
        ),
        (
            {"research": {"research": "read-only"}},
            "storage.sharedDirectories.research.research = 'read-only': a namespace always mounts its own directory",
        ),
        ({"research": {"default": "write"}}, "storage.sharedDirectories.research.default"),
    ],
)
def test_shared_directories_refusals(shared, message):
    with pytest.raises(ConfigError) as err:
        parse_stack_config({"region": "us-west-2", **SHARED, "storage": {"sharedDirectories": shared}})
    assert message in str(err.value)


@pytest.mark.parametrize(
    ("path", "message"),
    [
        (
            "/datasets",
            "storage.dataRepositories[0].fileSystemPath = '/datasets': outside every training namespace's "
            "directory, so no training pod sees it (each mounts only its own); put it under one of ['/default', "
            "'/research'], such as /default/datasets",
        ),
        ("/", "storage.dataRepositories[0].fileSystemPath = '/': outside every training namespace's directory"),
        # A prefix of a namespace's name is not its directory.
        ("/defaults/x", "fileSystemPath = '/defaults/x': outside every training namespace's directory"),
    ],
)
def test_a_link_outside_every_namespace_directory_is_refused(path, message):
    links = [{**S3_LINK, "fileSystemPath": path}]
    for phase in ("migrated", "retired"):
        with pytest.raises(ConfigError) as err:
            parse_stack_config(
                {"region": "us-west-2", **SHARED, "storage": {"rootClaims": phase, "dataRepositories": links}}
            )
        assert message in str(err.value)
    # Left out, rootClaims is retired: refused too.
    with pytest.raises(ConfigError):
        parse_stack_config({"region": "us-west-2", **SHARED, "storage": {"dataRepositories": links}})
    for inside in ("/research", "/research/datasets"):
        links = [{**S3_LINK, "fileSystemPath": inside}]
        storage = {"rootClaims": "retired", "dataRepositories": links}
        assert parse_stack_config({"region": "us-west-2", **SHARED, "storage": storage})


# --- moving a stack whose namespaces mounted the root ------------------------------------------

DAEMON_SET = "kubernetes:apps/v1:DaemonSet"


def _burn_in_claims(plan) -> set[str]:
    return {
        v["persistentVolumeClaim"]["claimName"]
        for d in plan.of_type(DAEMON_SET)
        for v in d.inputs["spec"]["template"]["spec"].get("volumes", [])
        if "persistentVolumeClaim" in v
    }


def test_the_directory_claims_come_next_to_the_root_claims_which_stay(migrated):
    """`migrated`: nothing a pod holds is deleted or replaced. The root claims keep their names, volumes
    and replacement trigger (what the stacks stored), so the engine plans no replacement, for pods still
    holding them; the workload stacks and the burn-in mount the directory claims next to them."""
    root, volume = migrated.named("default-fsx-claim", CLAIM), migrated.named("fsx-claim-default", VOLUME)
    assert root.inputs["metadata"] == {"name": "fsx-claim", "namespace": "default"}
    assert root.inputs["spec"]["volumeName"] == "fsx-claim-default-fs-placeholder-fsx-training"
    assert volume.inputs["spec"]["csi"]["volumeAttributes"]["mountname"] == "placeholder"
    assert volume.inputs["spec"]["claimRef"] == {"namespace": "default", "name": "fsx-claim"}
    assert migrated.named("default-fsx-claim-default", CLAIM).inputs["metadata"]["name"] == "fsx-claim-default"
    assert migrated.outputs["storage"]["claims"] == {"default": "fsx-claim-default"}
    assert _burn_in_claims(migrated) == {"fsx-claim-neuron-burn-in"}


def test_a_retired_root_claim_fails_the_up_in_minutes_while_a_pod_holds_it(migrated):
    # pulumi/pulumi-kubernetes provider/pkg/await/await.go Deletion waits for a deleted claim to be
    # gone, 10 minutes unless the delete timeout says otherwise; metadata/overrides.go
    # allowsSkipAwaitWithDelete lists no PersistentVolumeClaim, so skipAwait would not help. The
    # pvc-protection finalizer keeps a claim a pod mounts until that pod ends. The timeout is stored
    # with the claim while it is declared, which is what its deletion by a later up uses.
    for namespace in ("default", "neuron-burn-in"):
        claim = migrated.named(f"{namespace}-fsx-claim", CLAIM)
        assert claim.lifecycle["customTimeouts"] == {"delete": "3m"}
        assert "customTimeouts" not in migrated.named(f"{namespace}-fsx-claim-{namespace}", CLAIM).lifecycle


def test_migrated_points_the_workloads_at_the_directories_and_keeps_the_root_claims(plan_with):
    plan = plan_with(trainingNamespaces=["default", "research"], namespaceIds=IDS, storage={"rootClaims": "migrated"})
    assert plan.outputs["storage"]["claims"] == {"default": "fsx-claim-default", "research": "fsx-claim-research"}
    assert _burn_in_claims(plan) == {"fsx-claim-neuron-burn-in"}
    # Pods started before still hold the root claims: they stay until `retired`.
    for namespace in ("default", "research", "neuron-burn-in"):
        assert plan.named(f"{namespace}-fsx-claim", CLAIM).inputs["metadata"]["name"] == "fsx-claim"


def test_retired_deletes_only_the_root_claims(plan_with):
    plan = plan_with(**RETIRED)
    names = {r.name for r in plan.of_type(CLAIM)}
    assert names == {
        "default-fsx-claim-default",
        "research-fsx-claim-research",
        "neuron-burn-in-fsx-claim-neuron-burn-in",
        "kube-system-fsx-root",
    }
    assert _burn_in_claims(plan) == {"fsx-claim-neuron-burn-in"}


def test_the_root_data_job_runs_after_the_directories_and_only_when_owners_are_declared(dev_fsx, plan_with):
    assert [j.name for j in dev_fsx.of_type(JOB) if j.name.startswith("fsx-")] == ["fsx-namespace-directories"]
    plan = plan_with(
        trainingNamespaces=["default", "research"],
        namespaceIds=IDS,
        storage={"rootDataOwners": {"output": "default", "nemo_experiments": "research"}},
    )
    job = plan.named("fsx-namespace-data-from-root", JOB)
    assert job.inputs["metadata"]["namespace"] == "kube-system"
    pod = job.inputs["spec"]["template"]["spec"]
    assert pod["volumes"] == [{"name": "fsx", "persistentVolumeClaim": {"claimName": "fsx-root"}}]
    (container,) = pod["containers"]
    assert container["command"][:2] == ["sh", "-c"]
    assert "set -- 'nemo_experiments' 'research' '20002' 'output' 'default' '20001'" in container["command"][2]
    directories = plan.named("fsx-namespace-directories", JOB)
    assert directories.urn in job.dependencies
    assert plan.named("kube-system-fsx-root", CLAIM).urn in job.dependencies
    # The pod posture the directory Job's pod passes (checkov and the admission rules scan that one).
    (mkdir,) = directories.inputs["spec"]["template"]["spec"]["containers"]
    for key in ("image", "securityContext", "resources", "volumeMounts"):
        assert container[key] == mkdir[key]
    assert {k: v for k, v in pod.items() if k != "containers"} == {
        k: v for k, v in directories.inputs["spec"]["template"]["spec"].items() if k != "containers"
    }
    assert job.lifecycle["replaceOnChanges"] == ["spec"] and job.lifecycle["deleteBeforeReplace"] is True


def _tree(tmp_path):
    """A root as the dev stack's `default` workloads left it (workloads/*.py, all under /shared):
    BERT's output and dataset, the compile cache, the cluster check; and another team's entry."""
    for d in ("default", "research", "neuron-burn-in"):
        (tmp_path / d).mkdir()
    (tmp_path / "output" / "ckpt").mkdir(parents=True)
    (tmp_path / "output" / "ckpt" / "model.pt").write_text("weights")
    (tmp_path / "neuron_cache").mkdir()
    (tmp_path / "cluster-check").mkdir()
    (tmp_path / "team-b-notes.txt").write_text("whose?")
    (tmp_path / ".hidden").mkdir()
    (tmp_path / ".lustre").mkdir()
    return tmp_path


def _move(tmp_path, moves):
    """As the Job runs it (tests/root_job_runs.py: as root, only its capabilities; else chown recorded)."""
    script = root_data_script(str(tmp_path), moves, ["default", "research", "neuron-burn-in"], IDS)
    with tempfile.TemporaryDirectory() as scratch:
        return run_script(script, ROOT_JOB_CAPABILITIES, Path(scratch))


def test_root_data_moves_only_what_is_declared_and_lists_the_rest(tmp_path):
    root = _tree(tmp_path)
    moves = {"output": "default", "neuron_cache": "default", "llama2_output": "default"}
    done = _move(root, moves)
    assert done.returncode == 0, done.stdout + done.stderr
    # Renamed, contents and all; the pod that mounts /default sees it where it wrote it (/shared/output).
    assert (root / "default" / "output" / "ckpt" / "model.pt").read_text() == "weights"
    assert (root / "default" / "neuron_cache").is_dir()
    assert not (root / "output").exists() and not (root / "neuron_cache").exists()
    assert f"moved: {root}/output -> {root}/default/output" in done.stdout
    assert f"absent: {root}/llama2_output (nothing to move)" in done.stdout
    # What no one declared stays where it is, listed; the namespaces' directories and Lustre's own are not.
    left = sorted(line for line in done.stdout.splitlines() if line.startswith("left at the root"))
    assert left == [
        f"left at the root, no owner declared (storage.rootDataOwners): {root}/{name}"
        for name in (".hidden", "cluster-check", "team-b-notes.txt")
    ]
    assert (root / "team-b-notes.txt").read_text() == "whose?"
    # A re-run (a replaced Job) finds everything moved and succeeds.
    again = _move(root, moves)
    assert again.returncode == 0 and f"already moved: {root}/default/output" in again.stdout


def test_root_data_at_both_places_is_left_for_a_person_and_fails_the_job(tmp_path):
    root = _tree(tmp_path)
    (root / "default" / "output").mkdir()
    (root / "default" / "output" / "new.pt").write_text("written since")
    done = _move(root, {"output": "default", "neuron_cache": "default"})
    assert done.returncode == 1
    assert f"conflict: {root}/output and {root}/default/output both exist" in done.stdout
    assert "1 conflict(s)" in done.stderr
    # Nothing merged or overwritten; the unambiguous move still happened.
    assert (root / "output" / "ckpt" / "model.pt").read_text() == "weights"
    assert sorted(p.name for p in (root / "default" / "output").iterdir()) == ["new.pt"]
    assert (root / "default" / "neuron_cache").is_dir()


@pytest.mark.parametrize(
    ("owners", "message"),
    [
        ({"output": "staging"}, "storage.rootDataOwners.output = 'staging': not a training namespace"),
        ({"a/b": "default"}, "storage.rootDataOwners.a/b = 'default': 'a/b' is not an entry of the root"),
        ({"..": "default"}, "'..' is not an entry of the root"),
        ({".lustre": "default"}, "'.lustre' is not an entry of the root"),
        ({"it's": "default"}, '"it\'s" is not an entry of the root'),
        ({"research": "default"}, "storage.rootDataOwners.research = 'default': 'research' is a namespace's own"),
        ({"neuron-burn-in": "default"}, "'neuron-burn-in' is a namespace's own directory, never moved"),
        (
            {"nemo_experiments": "research"},
            "storage.rootDataOwners.nemo_experiments = 'research': storage.dataRepositories[0] links /nemo_experiments "
            "to s3://my-checkpoints/runs; link it again under /research instead",
        ),
    ],
)
def test_root_data_owners_refusals(owners, message):
    # A link left at the root by a stack that mounted it (refused on its own too: outside every directory).
    at_root = {**CHECKPOINTS_LINK, "fileSystemPath": "/nemo_experiments"}
    with pytest.raises(ConfigError) as err:
        storage = {"rootDataOwners": owners, "dataRepositories": [at_root]}
        parse_stack_config({"region": "us-west-2", **SHARED, "storage": storage})
    assert message in str(err.value)


SCHEDULE = "aws:scheduler/schedule:Schedule"
ROLE = "aws:iam/role:Role"
ROLE_POLICY = "aws:iam/rolePolicy:RolePolicy"
CHECKPOINTS_LINK = {
    "fileSystemPath": "/default/nemo_experiments",
    "s3Path": "s3://my-checkpoints/runs",
    "autoImport": [],
}
EXPORT = {"schedule": "rate(6 hours)", "paths": ["/default/nemo_experiments"]}


def test_checkpoints_are_exported_to_their_linked_bucket_on_a_schedule(plan_with):
    """EventBridge Scheduler's universal target calls FSx CreateDataRepositoryTask with the request as
    JSON (Scheduler user guide, managing-targets-universal; FSx API reference)."""
    plan = plan_with(storage={"dataRepositories": [S3_LINK, CHECKPOINTS_LINK], "checkpointExport": EXPORT})
    schedule = plan.named("fsx-checkpoint-export", SCHEDULE)
    inputs = schedule.inputs
    assert inputs["scheduleExpression"] == "rate(6 hours)" and inputs["scheduleExpressionTimezone"] == "UTC"
    assert inputs["flexibleTimeWindow"] == {"mode": "OFF"}
    target = inputs["target"]
    assert target["arn"] == "arn:aws:scheduler:::aws-sdk:fsx:createDataRepositoryTask"
    assert json.loads(target["input"]) == {
        "FileSystemId": "fs-placeholder-fsx-training",
        "Type": "EXPORT_TO_REPOSITORY",
        # Relative to the file system's root, as the API takes them.
        "Paths": ["default/nemo_experiments"],
        "Report": {"Enabled": False},
    }
    # Created once the associations exist: before them a task has no bucket to go to.
    assert {plan.named(f"fsx-s3-{i}").urn for i in (0, 1)} <= set(schedule.dependencies)
    role = plan.named("fsx-checkpoint-export", ROLE)
    assert role.urn in schedule.property_dependencies["target"] and target["roleArn"].startswith("arn:aws:iam::")
    trust = json.loads(role.inputs["assumeRolePolicy"])["Statement"]
    assert [s["Principal"] for s in trust] == [{"Service": "scheduler.amazonaws.com"}]
    assert trust[0]["Condition"]["StringEquals"]["aws:SourceAccount"]
    (statement,) = json.loads(plan.named("fsx-checkpoint-export-policy", ROLE_POLICY).inputs["policy"])["Statement"]
    policy = plan.named("fsx-checkpoint-export-policy", ROLE_POLICY)
    assert plan.named("fsx-training", FILE_SYSTEM).urn in policy.property_dependencies["policy"]
    # That one call, on that one file system (and the task it creates), nothing else.
    assert statement["Effect"] == "Allow" and statement["Action"] == "fsx:CreateDataRepositoryTask"
    assert re.fullmatch(r"arn:aws:fsx:us-west-2:\d{12}:\S*fsx-training", statement["Resource"][0])
    assert re.fullmatch(r"arn:aws:fsx:us-west-2:\d{12}:task/\*", statement["Resource"][1])
    assert not any("*" in r.split(":task/")[0] for r in statement["Resource"])
    # The pipeline's deploy role may create all of it (a type it cannot manage fails only at `pulumi up`).
    assert permissions.services_for_types({r.type for r in plan.registrations}) <= permissions.DEPLOY_SERVICES


def test_exporting_the_root_sends_no_paths():
    request = json.loads(export_task_request("fs-1", ["/"]))
    assert "Paths" not in request and request["Type"] == "EXPORT_TO_REPOSITORY"


def test_no_export_schedule_unless_the_stack_asks(dev, prod):
    assert not dev.of_type(SCHEDULE) and not prod.of_type(SCHEDULE)


@pytest.mark.parametrize(
    ("storage", "features", "message"),
    [
        (
            {"checkpointExport": EXPORT},
            {},
            "storage.checkpointExport: storage.dataRepositories is empty; an export needs a data repository linked",
        ),
        (
            {"dataRepositories": [S3_LINK], "checkpointExport": EXPORT},
            {},
            "storage.checkpointExport.paths[0] = '/default/nemo_experiments': no data repository is linked there "
            "(storage.dataRepositories fileSystemPaths: '/default/datasets')",
        ),
        (
            {
                "dataRepositories": [{**CHECKPOINTS_LINK, "autoExport": ["NEW", "CHANGED"]}],
                "checkpointExport": EXPORT,
            },
            {},
            "storage.checkpointExport.paths[0] = '/default/nemo_experiments': storage.dataRepositories[0] already exports it "
            "automatically (autoExport ['NEW', 'CHANGED']), and FSx does not run automatic export and export tasks",
        ),
        (
            {"dataRepositories": [CHECKPOINTS_LINK], "checkpointExport": {**EXPORT, "schedule": "rate(1 hours)"}},
            {},
            "storage.checkpointExport.schedule = 'rate(1 hours)': a recurring EventBridge Scheduler expression",
        ),
        (
            {
                "dataRepositories": [CHECKPOINTS_LINK],
                "checkpointExport": {**EXPORT, "schedule": "at(2026-12-01T00:00:00)"},
            },
            {},
            "storage.checkpointExport.schedule = 'at(2026-12-01T00:00:00)': a recurring EventBridge Scheduler",
        ),
        (
            {"dataRepositories": [CHECKPOINTS_LINK], "checkpointExport": {**EXPORT, "paths": ["nemo_experiments"]}},
            {},
            "storage.checkpointExport.paths[0] = 'nemo_experiments': an absolute path such as /nemo_experiments",
        ),
        (
            {"dataRepositories": [CHECKPOINTS_LINK], "checkpointExport": {**EXPORT, "paths": []}},
            {},
            "storage.checkpointExport.paths = []: name at least one file-system path to export",
        ),
        (
            {"dataRepositories": [CHECKPOINTS_LINK], "checkpointExport": EXPORT},
            {"fsxCsi": False},
            "storage.checkpointExport: set, but features.fsxCsi is false, so there is no file system to export from",
        ),
    ],
)
def test_export_schedule_refusals_name_the_key(storage, features, message):
    with pytest.raises(ConfigError) as err:
        parse_stack_config({"region": "us-west-2", "storage": storage, "features": features})
    assert message in str(err.value)


@pytest.mark.parametrize("schedule", ["rate(1 hour)", "rate(12 hours)", "rate(2 days)", "cron(0 */6 * * ? *)"])
def test_export_schedules_accepted(schedule):
    storage = {"dataRepositories": [CHECKPOINTS_LINK], "checkpointExport": {**EXPORT, "schedule": schedule}}
    config = parse_stack_config({"region": "us-west-2", "storage": storage})
    assert config.storage.checkpoint_export is not None and config.storage.checkpoint_export.schedule == schedule
    # A path below the link's own is covered by it.
    storage["checkpointExport"]["paths"] = ["/default/nemo_experiments/run-1/checkpoints"]
    assert parse_stack_config({"region": "us-west-2", "storage": storage}).storage.checkpoint_export
