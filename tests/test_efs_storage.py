"""Dev's shared file system on Amazon EFS (storage.kind: efs): one Regional file system, a mount target per
node zone behind NFS alone, an access point per namespace carrying its id, and static claims of the names
the workloads mount; FSx-only settings refused with it, and prod's plan as it was."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from bootstrap import permissions
from infra.components.efs_storage import access_point_specs, transition_to_ia, volume_handle
from infra.config.errors import ConfigError
from infra.config.models import EFS_INFREQUENT_ACCESS_DAYS, FSX_ONLY_STORAGE_KEYS, StorageConfig
from infra.contract import Storage
from infra.facts import efs, versions
from infra.specs import image_cache
from infra.specs.burn_in_objects import BurnInTarget, check_script
from infra.validate import parse_stack_config
from offline.plan.runner import PlanResult
from tests.fixture_project import FIXTURE_ROOT
from workloads import goodput

FILE_SYSTEM = "aws:efs/fileSystem:FileSystem"
ACCESS_POINT = "aws:efs/accessPoint:AccessPoint"
MOUNT_TARGET = "aws:efs/mountTarget:MountTarget"
VOLUME = "kubernetes:core/v1:PersistentVolume"
CLAIM = "kubernetes:core/v1:PersistentVolumeClaim"
INGRESS = "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"
EGRESS = "aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule"
EFS = {"kind": "efs"}
# The driver's ids (aws-efs-csi-driver v3.4.1 pkg/driver/node.go isValidFileSystemId, isValidAccessPointId).
HANDLE = re.compile(r"efs:(fs-[0-9a-f]{8,40})::(fsap-[0-9a-f]{8,40})")

# One value a stack file may set for each FSx-only key, each valid on its own with kind fsx.
FSX_VALUES: dict[str, Any] = {
    "deploymentType": "PERSISTENT_1",
    "perUnitStorageThroughput": 250,
    "capacityGib": 2400,
    "lustreVersion": "2.15",
    "compression": "NONE",
    "dataRepositories": [{"fileSystemPath": "/default/datasets", "s3Path": "s3://my-training-data/datasets"}],
    "checkpointExport": {"schedule": "rate(6 hours)", "paths": ["/default/datasets"]},
    "retain": False,
    "backupRetentionDays": 0,
    "backupStartTime": "05:00",
    "rootClaims": "retired",
    "rootDataOwners": {"datasets": "default"},
    "dynamicReclaimPolicy": "Retain",
}


def problems(raw_storage: dict[str, Any], **stack: Any) -> str:
    with pytest.raises(ConfigError) as err:
        parse_stack_config({"region": "us-west-2", "storage": raw_storage, **stack})
    return str(err.value)


def test_every_fsx_only_key_is_listed_with_a_value_to_try():
    camel = {"".join([w if i == 0 else w.title() for i, w in enumerate(k.split("_"))]) for k in FSX_ONLY_STORAGE_KEYS}
    assert camel == set(FSX_VALUES)
    # Every FSx-only key is a storage setting, and nothing EFS reads is among them.
    assert set(FSX_ONLY_STORAGE_KEYS) <= set(StorageConfig.model_fields)
    assert not {"kind", "kms_key_id", "claim_name", "shared_directories"} & set(FSX_ONLY_STORAGE_KEYS)


@pytest.mark.parametrize("key", sorted(FSX_VALUES))
def test_efs_refuses_each_fsx_only_key_naming_key_value_and_allowed(key):
    text = problems({**EFS, key: FSX_VALUES[key]})
    assert f"trainium-eks:storage.{key} = " in text
    assert (
        "an FSx for Lustre setting, and storage.kind is efs (allowed: leave the key out, or storage.kind fsx)" in text
    )


def test_the_same_keys_are_accepted_with_fsx_and_efs_alone_is_accepted_in_dev():
    for key in ("capacityGib", "retain", "rootClaims", "dynamicReclaimPolicy"):
        assert parse_stack_config({"region": "us-west-2", "storage": {key: FSX_VALUES[key]}})
    config = parse_stack_config({"region": "us-west-2", "storage": {**EFS, "kmsKeyId": KMS_ARN}})
    assert config.storage.kind == "efs" and config.storage.infrequent_access_after_days == 7


KMS_ARN = "arn:aws:kms:us-west-2:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"


def test_efs_is_refused_in_prod_and_its_own_key_with_fsx():
    text = problems(EFS, environment="prod", endpointAccess={"public": False})
    assert (
        "trainium-eks:storage.kind = 'efs': prod's file system is FSx for Lustre, protected and backed up "
        "(allowed: fsx, or leave the key out)" in text
    )
    text = problems({"infrequentAccessAfterDays": 30})
    assert (
        "trainium-eks:storage.infrequentAccessAfterDays = 30: an EFS setting, and storage.kind is fsx (allowed: "
        "leave the key out, or storage.kind efs)" in text
    )


@pytest.mark.parametrize("days", [0, 2, 365 + 1])
def test_infrequent_access_takes_only_the_days_efs_offers(days):
    text = problems({**EFS, "infrequentAccessAfterDays": days})
    assert f"storage.infrequentAccessAfterDays = {days}: EFS lifecycle policies take 1, 7, 14, 30" in text
    # The values the EFS API names (TransitionToIA): AFTER_1_DAY, then AFTER_<n>_DAYS.
    assert [transition_to_ia(d) for d in EFS_INFREQUENT_ACCESS_DAYS][:2] == ["AFTER_1_DAY", "AFTER_7_DAYS"]


def test_a_refused_setting_stops_the_program_before_any_resource(plan_with):
    with pytest.raises(ConfigError, match=r"storage\.capacityGib = 2400: an FSx for Lustre setting"):
        plan_with(storage={**EFS, "capacityGib": 2400})


def test_one_regional_elastic_encrypted_file_system_with_an_ia_lifecycle(dev: PlanResult):
    (fs,) = dev.of_type(FILE_SYSTEM)
    inputs = fs.inputs
    assert (inputs["throughputMode"], inputs["performanceMode"], inputs["encrypted"]) == (
        "elastic",
        "generalPurpose",
        True,
    )
    # Regional: no zone; back to Standard on the first access.
    assert "availabilityZoneName" not in inputs and "kmsKeyId" not in inputs
    assert inputs["lifecyclePolicies"] == [
        {"transitionToIa": "AFTER_7_DAYS"},
        {"transitionToPrimaryStorageClass": "AFTER_1_ACCESS"},
    ]
    assert fs.protect is False
    # No FSx anything: no Lustre file system, driver, root claim, root Job or dynamic class.
    names = {r.name for r in dev.registrations}
    assert not {"fsx-training", "aws-fsx-csi-driver", "fsx-lustre", "fsx-namespace-directories"} & names
    assert not [r for r in dev.registrations if r.type.startswith("aws:fsx/")]
    assert not [r for r in dev.of_type(CLAIM) if r.inputs["metadata"]["name"] == "fsx-root"]


def test_the_kms_key_and_ia_days_reach_the_file_system(plan_with):
    plan = plan_with(storage={**EFS, "kmsKeyId": KMS_ARN, "infrequentAccessAfterDays": 30})
    (fs,) = plan.of_type(FILE_SYSTEM)
    assert fs.inputs["kmsKeyId"] == KMS_ARN and fs.inputs["encrypted"] is True
    assert fs.inputs["lifecyclePolicies"][0] == {"transitionToIa": "AFTER_30_DAYS"}


def test_a_mount_target_in_each_node_zone_behind_nfs_alone(dev: PlanResult):
    node_subnets = {
        r.inputs["availabilityZoneId"]: f"subnet-placeholder-{r.name}"
        for r in dev.of_type("aws:ec2/subnet:Subnet")
        if r.name.startswith("network-node-")
    }
    targets = {r.name: r.inputs for r in dev.of_type(MOUNT_TARGET)}
    assert targets == {
        f"efs-mount-{zone}": {
            "fileSystemId": targets[f"efs-mount-{zone}"]["fileSystemId"],
            "subnetId": subnet,
            "securityGroups": ["sg-placeholder-efs-nfs"],
        }
        for zone, subnet in node_subnets.items()
    }
    assert len(targets) == 2
    # The group admits TCP 2049 from the nodes' security group, and nothing else, either way.
    rules = [r.inputs for r in [*dev.of_type(INGRESS), *dev.of_type(EGRESS)] if r.name.startswith("efs-")]
    assert rules == [
        {
            "securityGroupId": "sg-placeholder-efs-nfs",
            "referencedSecurityGroupId": "sg-placeholder-eks-cluster",
            "ipProtocol": "tcp",
            "fromPort": 2049,
            "toPort": 2049,
            "description": "NFS 2049 from the nodes",
        }
    ]
    # Every rule exists before a mount target: no node mounts into a closed group.
    rule_urns = {r.urn for r in dev.of_type(INGRESS) if r.name.startswith("efs-")}
    assert all(rule_urns <= set(mt.dependencies) for mt in dev.of_type(MOUNT_TARGET))


def test_each_namespace_has_an_access_point_of_its_own_id_at_its_own_directory(plan_with):
    plan = plan_with(
        storage=EFS,
        trainingNamespaces=["default", "research"],
        namespaceIds={"default": 20001, "research": 20002},
    )
    points = {r.name: r.inputs for r in plan.of_type(ACCESS_POINT)}
    assert set(points) == {"efs-ap-default", "efs-ap-research", "efs-ap-neuron-burn-in"}
    for namespace, uid, mode in (
        ("default", 20001, "2770"),
        ("research", 20002, "2770"),
        ("neuron-burn-in", 65534, "0755"),
    ):
        ap = points[f"efs-ap-{namespace}"]
        assert ap["posixUser"] == {"uid": uid, "gid": uid}
        assert ap["rootDirectory"] == {
            "path": f"/{namespace}",
            "creationInfo": {"ownerUid": uid, "ownerGid": uid, "permissions": mode},
        }
    # The pure function, as the component reads it.
    specs = access_point_specs(["default"], {"default": 20001}, ["neuron-burn-in"])
    assert [(s.path, s.uid, s.mode) for s in specs.values()] == [
        ("/default", 20001, "2770"),
        ("/neuron-burn-in", 65534, "0755"),
    ]


def test_each_claim_keeps_its_name_and_binds_a_static_volume_on_its_access_point(plan_with):
    plan = plan_with(
        storage={**EFS, "sharedDirectories": {"research": {"default": "read-only"}}},
        trainingNamespaces=["default", "research"],
        namespaceIds={"default": 20001, "research": 20002},
    )
    points = {r.name.removeprefix("efs-ap-"): r for r in plan.of_type(ACCESS_POINT)}
    volumes = {
        v.inputs["spec"]["claimRef"]["namespace"] + "/" + v.inputs["spec"]["claimRef"]["name"]: v
        for v in plan.of_type(VOLUME)
    }
    assert set(volumes) == {
        "default/fsx-claim-default",
        "research/fsx-claim-research",
        "research/fsx-claim-default",
        "neuron-burn-in/fsx-claim-neuron-burn-in",
    }
    fs_ids = set()
    for where, volume in volumes.items():
        namespace, claim_name = where.split("/")
        owner = claim_name.removeprefix("fsx-claim-")
        spec = volume.inputs["spec"]
        found = HANDLE.fullmatch(spec["csi"]["volumeHandle"])
        assert found, spec["csi"]
        fs_ids.add(found.group(1))
        # The owner's access point: its own for a namespace's claim, the owner's for a shared one.
        assert points[owner].urn in volume.dependencies
        assert spec["csi"]["driver"] == "efs.csi.aws.com"
        assert spec.get("csi", {}).get("readOnly", False) is (where == "research/fsx-claim-default")
        assert (spec["accessModes"], spec["persistentVolumeReclaimPolicy"], spec["storageClassName"]) == (
            ["ReadWriteMany"],
            "Retain",
            "",
        )
        assert "mountOptions" not in spec  # the driver adds tls and the access point itself
        # The claim binds this volume at once, under the name the workloads mount.
        (claim,) = [
            c for c in plan.of_type(CLAIM) if c.inputs["metadata"] == {"name": claim_name, "namespace": namespace}
        ]
        assert claim.inputs["spec"]["volumeName"] == volume.inputs["metadata"]["name"]
        assert claim.inputs["spec"]["storageClassName"] == ""
        assert volume.urn in claim.dependencies
        assert claim.lifecycle["replaceWith"] == [volume.urn]
    assert len(fs_ids) == 1  # one file system for every namespace
    # The handle is the driver's new format: type, file system, no subpath, access point.
    assert (
        volume_handle("fs-0123456789abcdef0", "fsap-0123456789abcdef0")
        == "efs:fs-0123456789abcdef0::fsap-0123456789abcdef0"
    )


def test_the_driver_is_the_node_service_alone_with_its_images_through_the_cache(dev: PlanResult):
    assert image_cache.EFS_CSI_CHART == versions.CHARTS["efs-csi-driver"].version == "4.4.1"
    (release,) = [r for r in dev.of_type("kubernetes:helm.sh/v3:Release") if r.name == "aws-efs-csi-driver"]
    values = release.inputs["values"]
    assert (release.inputs["chart"], release.inputs["version"], release.inputs["namespace"]) == (
        "aws-efs-csi-driver",
        "4.4.1",
        "kube-system",
    )
    assert values["controller"] == {"create": False, "serviceAccount": {"create": False}}
    assert "tag" not in json.dumps(values)  # the chart keeps its tags
    cache = "123456789012.dkr.ecr.us-west-2.amazonaws.com/trn-dev/ecr-public"
    for path, image in image_cache.EFS_CSI_NODE_IMAGES.items():
        node = values
        for key in path:
            node = node[key]
        assert node["repository"] == f"{cache}/{image_cache.upstream_repository(image)[0]}"
    repos = {r.inputs["name"] for r in dev.of_type("aws:ecr/repository:Repository")}
    assert {
        f"trn-dev/ecr-public/{image_cache.upstream_repository(i)[0]}" for i in image_cache.EFS_CSI_NODE_IMAGES.values()
    } <= repos
    # The release waits for the cache's rule and repositories.
    cached = {r.urn for r in dev.registrations if r.type.startswith("aws:ecr/")}
    assert cached & set(release.dependencies)


def test_the_burn_in_checks_for_an_nfs_mount(dev: PlanResult):
    target = BurnInTarget("g", "trn1.32xlarge", 16, 32, 8, "fsx-claim-neuron-burn-in", file_system_kind="efs")
    script = check_script(target)
    assert 'expect efs-mount "EFS at /shared (file system type)" nfs ' in script and "lustre" not in script
    fsx = check_script(BurnInTarget("g", "trn1.32xlarge", 16, 32, 8, "fsx-claim-neuron-burn-in"))
    assert 'expect fsx-mount "FSx at /shared (file system type)" lustre ' in fsx
    daemon_sets = [r for r in dev.of_type("kubernetes:apps/v1:DaemonSet") if r.name.startswith("burn-in-daemonset-")]
    assert daemon_sets and all(
        "EFS at /shared (file system type)" in json.dumps(ds.inputs["spec"]["template"]) for ds in daemon_sets
    )


def test_the_storage_output_says_efs_and_the_save_throughput(dev: PlanResult, prod: PlanResult):
    storage = Storage.model_validate(dev.outputs["storage"])
    assert storage.kind == "efs" and storage.throughput_mbps == efs.SAVE_THROUGHPUT_MBPS
    # 1 GiB/s, the lowest published Regional Elastic write limit, in the model's MB/s: 98 GB in about 91 s.
    assert efs.SAVE_THROUGHPUT_MBPS == pytest.approx(1073.7)
    assert goodput.storage_throughput_mbps(storage) == efs.SAVE_THROUGHPUT_MBPS
    assert round(goodput.save_hours(98, goodput.storage_throughput_mbps(storage)) * 3600) == 91
    # Prod's output keeps exactly its keys: no kind, no throughput (FSx is what a stack without one means).
    assert not {"kind", "throughputMbps"} & set(prod.outputs["storage"])
    assert Storage.model_validate(prod.outputs["storage"]).kind == "fsx"


def test_prod_keeps_fsx_and_declares_nothing_of_efs(prod: PlanResult):
    assert not [r for r in prod.registrations if r.type.startswith("aws:efs/")]
    assert prod.named("fsx-training", "aws:fsx/lustreFileSystem:LustreFileSystem")
    assert {r.name for r in prod.of_type("kubernetes:helm.sh/v3:Release")} >= {"aws-fsx-csi-driver"}
    assert "aws-efs-csi-driver" not in {r.name for r in prod.of_type("kubernetes:helm.sh/v3:Release")}


def test_the_deploy_role_gets_the_efs_actions_these_resources_need_and_no_more():
    actions = set(permissions.EFS_DEPLOY_ACTIONS)
    assert all(a.startswith("elasticfilesystem:") and "*" not in a for a in actions)
    # Create and delete each resource, change what changes in place, tag, and the refresh's reads.
    for noun in ("FileSystem", "MountTarget", "AccessPoint"):
        assert {f"elasticfilesystem:Create{noun}", f"elasticfilesystem:Delete{noun}"} <= actions
    assert (
        permissions.reads_for_types([FILE_SYSTEM, ACCESS_POINT, MOUNT_TARGET]) - permissions.reads_for_types([])
        <= actions
    )
    # Never the data: mounting is elasticfilesystem:Client*, which no role here is given.
    assert not [a for a in actions if a.startswith("elasticfilesystem:Client")]
    policy = permissions.deploy_policy(
        frozenset({"ec2", "elasticfilesystem"}), "123456789012", "aws", "arn:aws:s3:::state", "arn:k", [],
        "arn:o", "dev", "arn:s", {}, "arn:b", "arn:aws:iam::123456789012:policy/boundary",
    )  # fmt: skip
    statements = {s["Sid"]: s for s in policy["Statement"]}
    assert statements["ManageStackServices"]["Action"] == ["ec2:*"]
    assert statements["ManageEfs"]["Action"] == list(permissions.EFS_DEPLOY_ACTIONS)


def test_switching_dev_from_fsx_replaces_each_claim_in_place_and_deletes_only_fsx(dev_fsx, dev, tmp_path):
    """The EFS component carries the FSx one's identity, so each volume and claim of the same name is the
    FSx one replaced (claim deleted, then its volume, both created again), never a new claim created while
    the old one still holds its name; the FSx file system, its root claim and Job go, and the guard asks for
    each by name."""
    from offline.diff import compare
    from offline.report.plan_output import write_plan

    write_plan(dev_fsx, tmp_path / "base")
    write_plan(dev, tmp_path / "head")
    (diff,) = [d for d in compare.diff_plan_dirs(tmp_path / "base", tmp_path / "head") if d.project == "trainium-eks"]
    kinds = {(c.type, c.name): c.kind for c in diff.changes}
    for name in ("fsx-claim-default-default", "fsx-claim-neuron-burn-in-neuron-burn-in"):
        assert kinds[(VOLUME, name)] == "replace"
    for name in ("default-fsx-claim-default", "neuron-burn-in-fsx-claim-neuron-burn-in"):
        assert kinds[(CLAIM, name)] == "replace"
    assert kinds[("aws:fsx/lustreFileSystem:LustreFileSystem", "fsx-training")] == "delete"
    assert kinds[(CLAIM, "kube-system-fsx-root")] == "delete"
    assert kinds[("kubernetes:batch/v1:Job", "fsx-namespace-directories")] == "delete"
    assert kinds[(FILE_SYSTEM, "efs-training")] == "create"
    assert not [c for c in diff.changes if c.type.startswith("trainium:infra:")]
    base, head = compare.load_plans(tmp_path / "base"), compare.load_plans(tmp_path / "head")
    refusals = compare.data_store_replacement_refusals([diff], base, head, {})
    assert {r.split("'")[1] for r in refusals} == {
        "fsx-training",
        "fsx-root-kube-system",
        "kube-system-fsx-root",
        "fsx-claim-default-default",
        "default-fsx-claim-default",
        "fsx-claim-neuron-burn-in-neuron-burn-in",
        "neuron-burn-in-fsx-claim-neuron-burn-in",
    }
    # The dev stack file names exactly these, each with its reason.
    acknowledged = compare.stack_acknowledgements([FIXTURE_ROOT], ("dev",))[("trainium-eks", "dev")]
    assert not compare.data_store_replacement_refusals([diff], base, head, {("trainium-eks", "dev"): acknowledged})


def test_the_switchs_acknowledgements_are_spent_once_deployed(dev, dev_fsx, tmp_path):
    """After the switch runs, the deploy job diffs against the commit that made it: the stack file's
    acknowledgements, already there word for word, must neither refuse the next deploy (they name FSx stores
    that are gone) nor let a later replacement of an EFS claim of the same name through."""
    from offline.diff import compare
    from offline.report.plan_output import write_plan

    write_plan(dev, tmp_path / "deployed")
    write_plan(dev, tmp_path / "next")
    write_plan(dev_fsx, tmp_path / "fsx")
    key = ("trainium-eks", "dev")
    acknowledged = compare.stack_acknowledgements([FIXTURE_ROOT], ("dev",))
    deployed, nxt = compare.load_plans(tmp_path / "deployed"), compare.load_plans(tmp_path / "next")
    unchanged = [d for d in compare.diff_plan_dirs(tmp_path / "deployed", tmp_path / "next") if d.project == key[0]]
    # Before: the stale names were refused ("no data store of this stack is named 'fsx-training'").
    assert compare.data_store_replacement_refusals(unchanged, deployed, nxt, acknowledged)
    assert not compare.data_store_replacement_refusals(unchanged, deployed, nxt, acknowledged, deployed=acknowledged)
    # The same acknowledgements, already deployed, do not acknowledge the replacements again.
    (switch,) = [d for d in compare.diff_plan_dirs(tmp_path / "fsx", tmp_path / "next") if d.project == key[0]]
    fsx = compare.load_plans(tmp_path / "fsx")
    again = compare.data_store_replacement_refusals([switch], fsx, nxt, acknowledged, deployed=acknowledged)
    assert {r.split("'")[1] for r in again} == set(acknowledged[key])
    assert all("is spent (the deployed commit held it word for word): reword its reason" in r for r in again)
    # A reason reworded in the change is a new acknowledgement.
    reworded = {key: {**acknowledged[key], "fsx-training": "copied to S3 first"}}
    assert "fsx-training" not in {
        r.split("'")[1]
        for r in compare.data_store_replacement_refusals([switch], fsx, nxt, reworded, deployed=acknowledged)
    }
