"""Training storage as a real deploy meets it: one FSx file system per cluster, owned by the
stack, linked to S3, mounted in every training namespace through a static volume."""

from __future__ import annotations

import stat
import subprocess

import pytest

from infra.components.storage import directories_script, static_volume
from infra.config.errors import ConfigError
from infra.config.rules import fsx_capacity_problem
from infra.validate import parse_stack_config

FILE_SYSTEM = "aws:fsx/lustreFileSystem:LustreFileSystem"
ASSOCIATION = "aws:fsx/dataRepositoryAssociation:DataRepositoryAssociation"
VOLUME = "kubernetes:core/v1:PersistentVolume"
CLAIM = "kubernetes:core/v1:PersistentVolumeClaim"
STORAGE_CLASS = "kubernetes:storage.k8s.io/v1:StorageClass"
S3_LINK = {"fileSystemPath": "/default/datasets", "s3Path": "s3://my-training-data/datasets"}


def test_one_file_system_per_cluster_whatever_the_namespaces(prod):
    # Before: each namespace's dynamic `fsx-claim` made the CSI driver create a file system of
    # its own (prod: two 4800 GiB file systems).
    (fs,) = prod.of_type(FILE_SYSTEM)
    assert fs.inputs["storageCapacity"] == 4800
    # One claim per training namespace, the burn-in's (which checks the mount) and the root's.
    assert len(prod.of_type(CLAIM)) == 4 and len(prod.of_type(VOLUME)) == 4
    handles = {v.inputs["spec"]["csi"]["volumeHandle"] for v in prod.of_type(VOLUME)}
    assert handles == {"fs-placeholder-fsx-training"}


def test_file_system_settings(dev):
    fs = dev.named("fsx-training", FILE_SYSTEM)
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
        r.urn for r in dev.registrations if r.type.startswith("aws:vpc/securityGroup") and r.name.startswith("fsx-")
    ]
    assert set(rules) <= set(fs.dependencies) and len(rules) == 12


def test_dev_file_system_is_destroyable_and_prod_is_protected_with_a_final_backup(dev, prod):
    # terraform-provider-aws, aws_fsx_lustre_file_system: skip_final_backup defaults to true
    # (as does the FSx API), so without setting it a destroyed PERSISTENT file system leaves
    # nothing behind.
    dev_fs, prod_fs = dev.named("fsx-training", FILE_SYSTEM), prod.named("fsx-training", FILE_SYSTEM)
    assert dev_fs.protect is False and dev_fs.inputs["skipFinalBackup"] is True
    assert prod_fs.protect is True and prod_fs.inputs["skipFinalBackup"] is False
    assert prod_fs.inputs["finalBackupTags"]["Name"] == "fsx-final"


def test_a_retained_file_system_takes_daily_backups_and_dev_takes_none(dev, prod):
    # FSx CreateFileSystem: AutomaticBackupRetentionDays defaults to 0 (no automatic backups), and
    # `protect` or the final backup guard only `pulumi destroy`. Prod's stack file keeps two weeks.
    dev_fs, prod_fs = dev.named("fsx-training", FILE_SYSTEM), prod.named("fsx-training", FILE_SYSTEM)
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


def test_claim_binds_its_static_volume_without_waiting_for_provisioning(dev):
    # pulumi/pulumi-kubernetes provider/pkg/await/awaiters.go (v4.32.0, unchanged on master):
    # a PVC is awaited until Bound with a fixed 5-minute watch; dynamic FSx takes 5-15 min,
    # a claim pre-bound to an existing volume binds at once.
    claim = dev.named("default-fsx-claim", CLAIM)
    assert claim.inputs["metadata"] == {"name": "fsx-claim", "namespace": "default"}
    assert claim.inputs["spec"] == {
        "accessModes": ["ReadWriteMany"],
        "storageClassName": "",
        "volumeName": "fsx-claim-default-fs-placeholder-fsx-training",
        "resources": {"requests": {"storage": "1200Gi"}},
    }
    volume = dev.named("fsx-claim-default", VOLUME)
    assert volume.inputs["spec"]["csi"]["volumeAttributes"] == {
        "dnsname": "fs-placeholder-fsx-training.fsx.us-west-2.amazonaws.com",
        "mountname": "placeholder/default",
    }
    assert volume.urn in claim.dependencies


def test_a_replaced_file_system_gets_new_volumes_and_rebound_claims(dev):
    # kubernetes/kubernetes pkg/apis/core/validation/validation.go (v1.34),
    # ValidatePersistentVolumeUpdate / ValidatePersistentVolumeClaimUpdate: a volume's source
    # and a claim's volumeName cannot change. The volume's name carries the file system id, so
    # a new file system means a new volume (its name changes: pulumi-kubernetes replaces it) and
    # a replaced claim, old-first because its own name stays the same (see the next test).
    volume, claim = dev.named("fsx-claim-default", VOLUME), dev.named("default-fsx-claim", CLAIM)
    assert volume.inputs["metadata"]["name"] == "fsx-claim-default-fs-placeholder-fsx-training"
    assert claim.lifecycle["replaceOnChanges"] == ["spec.volumeName"]
    assert claim.lifecycle["deleteBeforeReplace"] is True


def test_a_claim_is_only_ever_recreated_with_its_volume_and_after_it(dev):
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
    volume, claim = dev.named("fsx-claim-default", VOLUME), dev.named("default-fsx-claim", CLAIM)
    declared = {"metadata": claim.inputs["metadata"], "spec": claim.inputs["spec"]}
    # The volume's CSI source too: what it mounts cannot change in place either.
    assert volume.lifecycle["replacementTrigger"] == {"claim": declared, "source": volume.inputs["spec"]["csi"]}
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
    assert plan.named("default-fsx-claim", CLAIM).inputs["spec"]["resources"] == {"requests": {"storage": "1200Gi"}}
    assert plan.named("fsx-claim-default", VOLUME).inputs["spec"]["capacity"] == {"storage": "2400Gi"}


def test_destroy_runs_claims_then_volumes_then_driver_then_file_system_then_network(dev):
    # Pulumi deletes dependents first: each arrow below is a recorded dependency.
    claim, volume = dev.named("default-fsx-claim", CLAIM), dev.named("fsx-claim-default", VOLUME)
    driver, fs = dev.named("aws-fsx-csi-driver"), dev.named("fsx-training", FILE_SYSTEM)
    assert volume.urn in claim.dependencies
    # The node plugin must still be there to unmount while volumes go away.
    assert driver.urn in volume.dependencies and fs.urn in volume.dependencies
    sg = dev.named("fsx-lustre", "aws:ec2/securityGroup:SecurityGroup")
    assert sg.urn in fs.dependencies
    subnet = dev.named("network-private-usw2-az4", "aws:ec2/subnet:Subnet")
    assert subnet.urn in fs.dependencies


def test_storage_class_for_extra_volumes_never_blocks_up(dev):
    # pulumi-kubernetes awaiters.go: a PVC whose class is WaitForFirstConsumer counts as
    # ready while Pending, so neither `pulumi up` nor a job submission waits for FSx.
    (storage_class,) = [r.inputs for r in dev.of_type(STORAGE_CLASS)]
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
    # The training namespaces', and the burn-in's (it checks the mount on each new Trainium node).
    # The directory Job's root claim lives in kube-system.
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
        "fsx-claim-default-fs-placeholder-fsx-training",
        "fsx-claim-neuron-burn-in-fs-placeholder-fsx-training",
        "fsx-claim-research-fs-placeholder-fsx-training",
        "fsx-root-kube-system-fs-placeholder-fsx-training",
    ]
    research = prod.named("research-fsx-claim", CLAIM)
    assert prod.named("ns-research").urn in research.dependencies
    burn_in = prod.named("neuron-burn-in-fsx-claim", CLAIM)
    assert prod.named("burn-in-namespace-neuron-burn-in").urn in burn_in.dependencies


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
    claim = plan.named("default-fsx-claim", CLAIM)
    assert {plan.named(f"fsx-s3-{i}").urn for i in (0, 1)} <= set(plan.named("fsx-claim-default", VOLUME).dependencies)
    assert claim


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


def test_each_namespace_mounts_only_its_own_directory(prod):
    # kubernetes-sigs/aws-fsx-csi-driver v1.9.0 pkg/driver/node.go NodePublishVolume mounts
    # "<dnsname>@tcp:/<mountname>" as given: mountname "<fsname>/<namespace>" is a Lustre
    # subdirectory mount, so a pod of `research` has no path to `default`'s checkpoints.
    mounted = {
        v.inputs["spec"]["claimRef"]["namespace"]: v.inputs["spec"]["csi"]["volumeAttributes"]["mountname"]
        for v in prod.of_type(VOLUME)
    }
    assert mounted == {
        "default": "placeholder/default",
        "research": "placeholder/research",
        "neuron-burn-in": "placeholder/neuron-burn-in",
        # The one root volume: only the directory Job in kube-system mounts it.
        "kube-system": "placeholder",
    }
    root = prod.named("fsx-root-kube-system", VOLUME)
    assert root.inputs["spec"]["claimRef"] == {"namespace": "kube-system", "name": "fsx-root"}
    # No training namespace has a claim on the root or on another namespace's directory.
    claims = {(c.inputs["metadata"]["namespace"], c.inputs["metadata"]["name"]) for c in prod.of_type(CLAIM)}
    assert claims == {
        ("default", "fsx-claim"),
        ("research", "fsx-claim"),
        ("neuron-burn-in", "fsx-claim"),
        ("kube-system", "fsx-root"),
    }


def test_directories_exist_before_any_namespace_claim(prod):
    (job,) = prod.of_type(JOB)
    pod = job.inputs["spec"]["template"]["spec"]
    assert job.inputs["metadata"] == {"name": "fsx-namespace-directories", "namespace": "kube-system"}
    assert pod["volumes"] == [{"name": "fsx", "persistentVolumeClaim": {"claimName": "fsx-root"}}]
    assert pod["nodeSelector"] == {"role": "core"}
    (container,) = pod["containers"]
    script = container["command"][2]
    for namespace in ("default", "research", "neuron-burn-in"):
        assert f"'{namespace}'" in script
    assert prod.named("kube-system-fsx-root", CLAIM).urn in job.dependencies
    # A subdirectory mount of a missing directory fails: every namespace's volume waits for the
    # Job (pulumi-kubernetes awaits a Job until Complete), and so do their claims.
    for namespace in ("default", "research", "neuron-burn-in"):
        assert job.urn in prod.named(f"fsx-claim-{namespace}", VOLUME).dependencies
    # Its pod template is immutable: a new namespace list replaces the Job, the old one first.
    assert job.lifecycle["replaceOnChanges"] == ["spec"] and job.lifecycle["deleteBeforeReplace"] is True


def test_directories_script_creates_missing_directories_and_keeps_existing_data(tmp_path):
    (tmp_path / "default").mkdir()
    (tmp_path / "default" / "checkpoint.pt").write_text("weights")
    script = directories_script(str(tmp_path), ["default", "research", "neuron-burn-in"])
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
        ["sh", "-c", directories_script(str(tmp_path), ["research"])], capture_output=True, check=False
    )
    assert done.returncode != 0


SHARED = {"trainingNamespaces": ["default", "research"]}


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
    with pytest.raises(ConfigError) as err:
        parse_stack_config(
            {"region": "us-west-2", **SHARED, "storage": {"dataRepositories": [{**S3_LINK, "fileSystemPath": path}]}}
        )
    assert message in str(err.value)
    for inside in ("/research", "/research/datasets"):
        links = [{**S3_LINK, "fileSystemPath": inside}]
        assert parse_stack_config({"region": "us-west-2", **SHARED, "storage": {"dataRepositories": links}})
