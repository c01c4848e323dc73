"""The offline plan diff: synthetic plans for each kind of change, real before/after pairs of
the cluster stack, and `make plan BASE=<ref>` through a git worktree."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from offline.diff import compare
from offline.plan.runner import PlanResult, run_program
from offline.report.plan_output import write_plan
from tests.conftest import FSX_STORAGE
from tests.fixture_project import FIXTURE_ROOT
from tests.project_copy import dev_groups_at, kept_past_support


def resource(urn: str, type_: str, inputs: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"urn": urn, "type": type_, "name": urn.rsplit("::", 1)[-1], "dependencies": [], "inputs": inputs, **extra}


def plan(resources: list[dict[str, Any]], outputs: dict[str, Any] | None = None, **sections: Any) -> dict[str, Any]:
    return {"project": "p", "stack": "dev", "resources": resources, "outputs": outputs or {}, **sections}


NG = "urn:pulumi:dev::p::aws:eks/nodeGroup:NodeGroup::ng"
LT = "urn:pulumi:dev::p::aws:ec2/launchTemplate:LaunchTemplate::lt"
FS = "urn:pulumi:dev::p::aws:fsx/lustreFileSystem:LustreFileSystem::fs"
PV = "urn:pulumi:dev::p::kubernetes:core/v1:PersistentVolume::pv"


def test_synthetic_plans_show_each_kind_of_change() -> None:
    base = plan(
        [
            resource(
                NG, "aws:eks/nodeGroup:NodeGroup", {"instanceTypes": ["trn1.32xlarge"], "scalingConfig": {"maxSize": 4}}
            ),
            resource(FS, "aws:fsx/lustreFileSystem:LustreFileSystem", {"storageCapacity": 2400, "storageType": "SSD"}),
            resource(
                PV,
                "kubernetes:core/v1:PersistentVolume",
                {"spec": {"csi": {"volumeHandle": "fs-1"}}},
                replaceOnChanges=["spec.csi"],
            ),
            resource("urn:gone", "aws:ec2/eip:Eip", {"domain": "vpc"}),
        ],
        outputs={"clusterName": "trn-dev", "kubeconfig": "[secret]"},
    )
    head = plan(
        [
            resource(
                NG, "aws:eks/nodeGroup:NodeGroup", {"instanceTypes": ["trn1.32xlarge"], "scalingConfig": {"maxSize": 6}}
            ),
            resource(FS, "aws:fsx/lustreFileSystem:LustreFileSystem", {"storageCapacity": 1200, "storageType": "SSD"}),
            resource(
                PV,
                "kubernetes:core/v1:PersistentVolume",
                {"spec": {"csi": {"volumeHandle": "fs-2"}}},
                replaceOnChanges=["spec.csi"],
            ),
            resource("urn:new", "aws:ec2/eip:Eip", {"domain": "vpc", "tags": {"token": "[secret]"}}),
        ],
        outputs={"clusterName": "trn-dev2", "kubeconfig": "[secret]"},
    )
    d = compare.compare_plans("p", "dev", base, head)
    kinds = {c.name: c.kind for c in d.changes}
    assert kinds == {"ng": "update", "fs": "replace", "pv": "replace", "urn:new": "create", "urn:gone": "delete"}
    (ng,) = [c for c in d.changes if c.name == "ng"]
    assert ng.paths == [compare.PathChange("scalingConfig.maxSize", 4, 6, None)]
    (fs,) = [c for c in d.changes if c.name == "fs"]
    assert fs.paths[0].replace_reason == "FSx cannot shrink a file system"
    (pv,) = [c for c in d.changes if c.name == "pv"]
    assert pv.paths[0].replace_reason == "replaceOnChanges spec.csi"
    # Two secrets cannot be told apart offline, and neither value is ever printed.
    assert d.outputs == [compare.PathChange("clusterName", "trn-dev", "trn-dev2")]
    text = compare.render_text([d], "base")
    assert "scalingConfig.maxSize: 4 => 6" in text and "+- aws:fsx:LustreFileSystem fs" in text
    # Offline, nobody knows whether the base was deployed: the diff says what its replacements mean.
    assert compare.NEVER_DEPLOYED_NOTE.split(":")[0] in " ".join(text.split())
    no_replacements = compare.render_text([compare.compare_plans("p", "dev", head, head)], "b")
    assert "never deployed" not in no_replacements
    markdown = compare.render_markdown([d], "base")
    assert "| p/dev | 1 | 1 | 2 | 1 | 1 | n/a |" in markdown


def test_a_changed_replacement_trigger_replaces_and_takes_replace_with_resources_along() -> None:
    """As the engine does (pulumi/pulumi pkg/resource/deploy/step_generator.go): a replacement
    trigger that changes replaces the resource (shouldTriggerReplace; one that only appears does
    not), and a resource whose replaceWith lists a replaced resource is replaced too. Here: the FSx
    volume whose trigger is its claim as declared, and the claim replaced with it
    (infra/components/storage.py)."""
    claim_urn = "urn:pulumi:dev::p::kubernetes:core/v1:PersistentVolumeClaim::claim"
    spec = {"csi": {"volumeHandle": "fs-1"}}

    def pair(trigger: Any) -> list[dict[str, Any]]:
        volume = resource(
            PV,
            "kubernetes:core/v1:PersistentVolume",
            {"spec": spec},
            deleteBeforeReplace=True,
            **({"replacementTrigger": trigger} if trigger is not None else {}),
        )
        claim = resource(
            claim_urn, "kubernetes:core/v1:PersistentVolumeClaim", {"spec": {"volumeName": "pv"}}, replaceWith=[PV]
        )
        return [volume, claim]

    d = compare.compare_plans(
        "p",
        "dev",
        plan(pair({"spec": {"accessModes": ["ReadWriteMany"]}})),
        plan(pair({"spec": {"accessModes": ["ReadWriteOnce"]}})),
    )
    kinds = {c.name: c for c in d.changes}
    assert kinds["pv"].kind == "replace"
    assert kinds["pv"].paths[0].replace_reason == "replacementTrigger changed"
    assert kinds["claim"].kind == "replace" and kinds["claim"].notes == ["replaced with pv (replaceWith)"]
    # A trigger seen for the first time (a stack deployed before it existed) replaces nothing.
    d = compare.compare_plans("p", "dev", plan(pair(None)), plan(pair({"spec": {}})))
    assert {c.name: c.kind for c in d.changes} == {"pv": "update"}


def test_policy_and_cost_sections_are_compared_when_present() -> None:
    violation = {
        "policy": "no-public-endpoint",
        "urn": NG,
        "name": "ng",
        "type": "aws:eks/nodeGroup:NodeGroup",
        "enforcementLevel": "mandatory",
        "message": "open to the internet",
    }

    def cost(idle: float) -> dict[str, Any]:
        return {
            "currency": "USD",
            "hourly": {"idle": idle, "configured": 1.0, "fullScale": None},
            "monthly": {"idle": idle * 730, "configured": 730.0, "fullScale": None},
            "lines": [],
            "unknown": [],
        }

    base = plan([], policy={"violations": []}, cost=cost(0.5))
    head = plan([], policy={"violations": [violation]}, cost=cost(0.75))
    d = compare.compare_plans("p", "dev", base, head)
    assert d.policy["new"] == [violation] and d.policy["resolved"] == []
    assert [(p.path, p.old, p.new) for p in d.cost] == [("hourly.idle", 0.5, 0.75), ("monthly.idle", 365.0, 547.5)]
    assert "policy NEW mandatory no-public-endpoint" in compare.render_text([d], "b")
    # Plans from before those sections existed compare without them.
    assert compare.compare_plans("p", "dev", plan([]), plan([])).policy == {}


def cluster_plan(tmp: Path, edit: Any = None) -> Path:
    document = yaml.safe_load((FIXTURE_ROOT / "Pulumi.dev.yaml").read_text())["config"]
    if edit:
        edit(document)
    config = {
        k: json.dumps(v)
        if isinstance(v, (dict, list))
        else ("true" if v is True else "false" if v is False else str(v))
        for k, v in document.items()
    }
    write_plan(run_program(FIXTURE_ROOT, "dev", config), tmp)
    return tmp


@pytest.fixture(scope="module")
def base_cluster(dev: PlanResult, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The shipped dev stack's plan (cluster_plan without an edit, the session's run of it)."""
    base = tmp_path_factory.mktemp("base")
    write_plan(dev, base)
    return base


def groups(document: dict[str, Any]) -> list[dict[str, Any]]:
    return document["trainium-eks:acceleratorNodeGroups"]


def changes_of(base: Path, head: Path) -> dict[str, compare.ResourceChange]:
    (d,) = compare.diff_plan_dirs(base, head)
    return {f"{c.type} {c.name}": c for c in d.changes}


def test_raising_max_size_updates_the_node_group_in_place(base_cluster: Path, tmp_path: Path) -> None:
    # terraform-provider-aws internal/service/eks/node_group.go: scaling_config has no ForceNew;
    # resourceNodeGroupUpdate sends it with UpdateNodegroupConfig.
    head = cluster_plan(tmp_path, lambda d: groups(d)[0].update(maxSize=6))
    changes = changes_of(base_cluster, head)
    ng = changes["aws:eks/nodeGroup:NodeGroup trn1-32xl-ng1"]
    assert ng.kind == "update" and [(p.path, p.old, p.new) for p in ng.paths] == [("scalingConfig.maxSize", 4, 6)]
    assert all(c.kind == "update" for c in changes.values())


def test_turning_backups_on_updates_the_file_system_in_place(dev_fsx: PlanResult, tmp_path: Path) -> None:
    # terraform-provider-aws internal/service/fsx/lustre_file_system.go (aws-sdk-go-v2):
    # automatic_backup_retention_days and daily_automatic_backup_start_time are Optional+Computed
    # without ForceNew; resourceLustreFileSystemUpdate sends both in UpdateFileSystem. A deployed
    # stack gets its backups without losing the file system, its volumes or their claims. Dev on FSx.
    base_cluster = tmp_path / "base"
    write_plan(dev_fsx, base_cluster)
    head = cluster_plan(
        tmp_path / "head",
        lambda d: d.update(
            {
                "trainium-eks:storage": {
                    **d["trainium-eks:storage"],
                    **FSX_STORAGE,
                    "backupRetentionDays": 14,
                    "backupStartTime": "05:00",
                }
            }
        ),
    )
    changes = changes_of(base_cluster, head)
    assert list(changes) == ["aws:fsx/lustreFileSystem:LustreFileSystem fsx-training"]
    (fs,) = changes.values()
    assert fs.kind == "update"
    assert [(p.path, p.new, p.replace_reason) for p in fs.paths] == [
        ("automaticBackupRetentionDays", 14, None),
        ("dailyAutomaticBackupStartTime", "05:00", None),
    ]
    text = compare.render_text(compare.diff_plan_dirs(base_cluster, head), "main")
    assert (
        'dailyAutomaticBackupStartTime: (unset) => "05:00"' in text and "automaticBackupRetentionDays: 0 => 14" in text
    )


@pytest.mark.parametrize(("old", "new"), [("1.34", "1.35"), ("1.35", "1.36")])
def test_raising_kubernetes_version_updates_the_cluster_then_every_node_group_in_place(
    tmp_path: Path, old: str, new: str
) -> None:
    """One minor up, from the stack file at ``old`` (1.34 -> 1.35 is the step a cluster made before
    this repository moved takes; offline/plan/fixtures.py holds every minor's add-on builds).
    - pulumi-aws 7.51.1 pulumi_aws/eks/node_group.py: `version` drifts only when set, so each group
      now carries the cluster's version and the upgrade reaches it.
    - hashicorp/terraform-provider-aws internal/service/eks/node_group.go (the resource pulumi-aws
      bridges): `version` is Optional+Computed without ForceNew, and resourceNodeGroupUpdate sends a
      change of launch_template, release_version or version as UpdateNodegroupVersion, a rolling
      update of the same group: no group is replaced.
    - The groups depend on the eks.Cluster component (their `version` and `clusterName` come from
      it), so the engine updates them after the control plane; EKS refuses a node group version
      above its control plane's."""

    def at(minor: str) -> Any:  # kubernetesVersion and the AMI pins together (docs/node-health.md)
        def edit(d: dict[str, Any]) -> None:
            d["trainium-eks:kubernetesVersion"] = minor
            d["trainium-eks:acceleratorNodeGroups"] = dev_groups_at(minor)
            d["trainium-eks:endOfSupportAcknowledged"] = kept_past_support(minor)

        return edit

    base = cluster_plan(tmp_path / "base", at(old))
    head = cluster_plan(tmp_path / "head", at(new))
    changes = changes_of(base, head)
    assert {c.kind for c in changes.values()} == {"update"}
    cluster = changes["eks:index:Cluster cluster-eks"]
    assert ("version", old, new) in [(p.path, p.old, p.new) for p in cluster.paths]
    groups = {k: c for k, c in changes.items() if c.type == "aws:eks/nodeGroup:NodeGroup"}
    assert {c.name for c in groups.values()} == {
        "cluster-core",
        "cluster-job-support",
        "trn1-32xl-ng1",
        "trn1n-32xl-ng",
    }
    (old_release,) = {g["amiReleaseVersion"] for g in dev_groups_at(old)}
    (new_release,) = {g["amiReleaseVersion"] for g in dev_groups_at(new)}
    for change in groups.values():
        expected = {("version", old, new, None)}
        if change.name in ("trn1-32xl-ng1", "trn1n-32xl-ng"):  # the pinned Trainium groups move to the new release too
            expected.add(("releaseVersion", old_release, new_release, None))
        assert {(p.path, p.old, p.new, p.replace_reason) for p in change.paths} == expected
    # cluster-autoscaler follows with its chart and image for the new minor (infra/facts/versions.py).
    from infra.facts.versions import CLUSTER_AUTOSCALER

    autoscaler = changes["kubernetes:helm.sh/v3:Release cluster-autoscaler"]
    assert ("values.image.tag", CLUSTER_AUTOSCALER[old].image_tag, CLUSTER_AUTOSCALER[new].image_tag) in [
        (p.path, p.old, p.new) for p in autoscaler.paths
    ]
    resources = json.loads((head / "trainium-eks" / "dev" / "resources.json").read_text())["resources"]
    cluster_urn = cluster.urn
    for r in resources:
        if r["type"] == "aws:eks/nodeGroup:NodeGroup":
            assert cluster_urn in r["dependencies"], r["name"]
    # ... and the diff lists them in that order: the control plane, then its node groups.
    order = list(changes)
    assert all(order.index("eks:index:Cluster cluster-eks") < order.index(name) for name in groups)


def test_changing_the_instance_type_replaces_the_node_group(base_cluster: Path, tmp_path: Path) -> None:
    # node_group.go: instance_types is ForceNew.
    head = cluster_plan(tmp_path, lambda d: groups(d)[0].update(instanceType="trn1n.32xlarge"))
    ng = changes_of(base_cluster, head)["aws:eks/nodeGroup:NodeGroup trn1-32xl-ng1"]
    assert ng.kind == "replace"
    assert ("instanceTypes[0]", "trn1.32xlarge", "trn1n.32xlarge", "instanceTypes is ForceNew") in [
        (p.path, p.old, p.new, p.replace_reason) for p in ng.paths
    ]


def test_turning_efa_off_is_a_new_launch_template_version_the_group_rolls_to(
    base_cluster: Path, tmp_path: Path
) -> None:
    # ec2/ec2_launch_template.go: network_interfaces is not ForceNew (an update writes a new
    # version); node_group.go: launch_template.version is updated in place (UpdateNodegroupVersion).
    head = cluster_plan(tmp_path, lambda d: groups(d)[0].update(efa=False))
    changes = changes_of(base_cluster, head)
    (lt,) = [c for k, c in changes.items() if k.startswith("aws:ec2/launchTemplate") and "trn1-32xl-ng1" in k]
    assert lt.kind == "update" and any(p.path.startswith("networkInterfaces") for p in lt.paths)
    ng = changes["aws:eks/nodeGroup:NodeGroup trn1-32xl-ng1"]
    assert ng.kind != "replace" and any("launch template's new version" in n for n in ng.notes)


def test_turning_a_feature_off_deletes_its_resources(base_cluster: Path, tmp_path: Path) -> None:
    head = cluster_plan(tmp_path, lambda d: d.__setitem__("trainium-eks:features", {"kuberay": False}))
    (d,) = compare.diff_plan_dirs(base_cluster, head)
    assert {c.kind for c in d.changes} == {"delete"}
    assert any(c.type == "kubernetes:helm.sh/v3:Release" and "kuberay" in c.name for c in d.changes)


def test_the_base_is_planned_in_a_temporary_worktree_at_that_commit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = []

    def fake_plan(checkout: Path, out: Path, stacks: tuple[str, ...], label: str = "") -> None:
        head = subprocess.run(["git", "-C", str(checkout), "rev-parse", "HEAD"], capture_output=True, text=True).stdout
        seen.append((checkout, head.strip(), (checkout / "Pulumi.dev.yaml").exists(), out, stacks))

    monkeypatch.setattr(compare, "plan_revision", fake_plan)
    label = compare.plan_base("HEAD~1", tmp_path, ("dev",))
    ((checkout, commit, has_stack_file, out, stacks),) = seen
    assert commit == compare.git("rev-parse", "HEAD~1") and label.startswith(f"HEAD~1 ({commit[:12]}")
    assert has_stack_file and out == tmp_path and stacks == ("dev",)
    assert not checkout.exists() and str(checkout) not in compare.git("worktree", "list")
    with pytest.raises(compare.PlanFailed, match="not a commit"):
        compare.plan_base("no-such-ref-anywhere", tmp_path, ("dev",))


def test_a_revision_runs_its_own_code_not_the_installed_package(tmp_path: Path) -> None:
    # The editable install (pyproject.toml) maps infra/ to this checkout; a base revision must
    # import its own infra/ and offline/, or the diff would compare this code with itself.
    worktree = tmp_path / "rev"
    compare.git("worktree", "add", "--detach", "--quiet", str(worktree), "HEAD")
    try:
        probe = "import infra, offline.plan.command; print(infra.__file__); print(offline.plan.command.__file__)"
        result = compare.run_in(worktree, [sys.executable, "-c", probe])
        assert result.returncode == 0, result.stderr
        assert all(line.startswith(str(worktree)) for line in result.stdout.split())
    finally:
        compare.git("worktree", "remove", "--force", str(worktree))


def test_a_plan_with_mandatory_policy_violations_is_still_compared() -> None:
    # offline.plan.command writes every plan, then exits with the policy pack's code for mandatory
    # violations; the diff reads those plans (their policy section shows the violations).
    from offline.plan.policy_run import MANDATORY_EXIT_CODE

    assert compare.POLICY_VIOLATIONS_EXIT == MANDATORY_EXIT_CODE


def prod_cost(max_size: int) -> dict[str, Any]:
    from offline.report.report import cluster_cost

    document = yaml.safe_load((FIXTURE_ROOT / "Pulumi.prod.yaml").read_text())["config"]
    groups(document)[0]["maxSize"] = max_size
    config = {
        k: json.dumps(v)
        if isinstance(v, (dict, list))
        else ("true" if v is True else "false" if v is False else str(v))
        for k, v in document.items()
    }
    return cluster_cost(run_program(FIXTURE_ROOT, "prod", config))


def test_raising_max_size_on_prod_shows_its_cost_although_the_totals_are_unknown(prod: PlanResult) -> None:
    # prod's totals are unknown (no sourced trn2.48xlarge nor PERSISTENT_2-250 price), yet a PR
    # that raises trn1-32xl-ng1's maxSize 8 (the shipped file's) -> 16 must say what it adds at full
    # scale: 8 x (21.50 + 200 GiB x 0.08 / 730) per hour to the priced lines and to that group's lines.
    from offline.report.report import cluster_cost

    assert groups(yaml.safe_load((FIXTURE_ROOT / "Pulumi.prod.yaml").read_text())["config"])[0]["maxSize"] == 8
    base, head = cluster_cost(prod), prod_cost(16)
    assert base["hourly"]["fullScale"] is None and head["hourly"]["fullScale"] is None
    changes = {p.path: (p.old, p.new) for p in compare.compare_cost(base, head)}
    old, new = changes["knownHourly.fullScale"]
    assert new - old == pytest.approx(8 * (21.50 + 200 * 0.08 / 730), abs=1e-3)
    old, new = changes["lines.node group trn1-32xl-ng1.fullScale"]
    assert (old, new) == (pytest.approx(8 * 21.50), pytest.approx(16 * 21.50))
    assert "hourly.fullScale" not in changes and "knownHourly.idle" not in changes  # idle did not move
    summary = compare.cost_summary(compare.compare_cost(base, head))
    assert any(line.startswith("full scale per hour: unknown (priced lines: $") for line in summary)
    assert "node group trn1-32xl-ng1, full scale per hour: $172.00 → $344.00" in summary
    d = compare.compare_plans("trainium-eks", "prod", plan([], cost=base), plan([], cost=head))
    assert "cost estimate changed" in compare.summary_line(d)
    assert "priced lines:" in compare.render_text([d], "b") and "priced lines:" in compare.render_markdown([d], "b")


# hashicorp/terraform-provider-aws internal/service/fsx/lustre_file_system.go, the aws-sdk-go-v2
# version pulumi-aws 7.x bridges: per_unit_storage_throughput has no ForceNew (the update sends it
# in UpdateFileSystem); resourceLustreFileSystemStorageCapacityCustomizeDiff forces a new file system
# when the capacity shrinks or the deployment type is SCRATCH_1;
# resourceLustreFileSystemMetadataConfigCustomizeDiff when USER_PROVISIONED metadata IOPS decrease.
# fileSystemTypeVersion: pulumi_aws 7.51.1 fsx/lustre_file_system.py documents a higher version as
# an in-place upgrade and a lower one as a replacement. automatic_backup_retention_days and
# daily_automatic_backup_start_time are Optional+Computed without ForceNew, sent by
# resourceLustreFileSystemUpdate; copy_tags_to_backups is ForceNew.
@pytest.mark.parametrize(
    ("path", "old", "new", "inputs", "replaced"),
    [
        ("perUnitStorageThroughput", 125, 250, {"deploymentType": "PERSISTENT_2"}, False),
        ("storageCapacity", 1200, 2400, {"deploymentType": "PERSISTENT_2"}, False),
        ("storageCapacity", 2400, 1200, {"deploymentType": "PERSISTENT_2"}, True),
        ("storageCapacity", 1200, 2400, {"deploymentType": "SCRATCH_1"}, True),
        ("metadataConfiguration.iops", 3000, 6000, {"metadataConfiguration": {"mode": "USER_PROVISIONED"}}, False),
        ("metadataConfiguration.iops", 6000, 3000, {"metadataConfiguration": {"mode": "USER_PROVISIONED"}}, True),
        ("fileSystemTypeVersion", "2.12", "2.15", {}, False),
        ("fileSystemTypeVersion", "2.15", "2.12", {}, True),
        ("deploymentType", "PERSISTENT_1", "PERSISTENT_2", {}, True),
        ("automaticBackupRetentionDays", None, 14, {"deploymentType": "PERSISTENT_2"}, False),
        ("automaticBackupRetentionDays", 14, 0, {"deploymentType": "PERSISTENT_2"}, False),
        ("dailyAutomaticBackupStartTime", None, "05:00", {"deploymentType": "PERSISTENT_2"}, False),
        ("copyTagsToBackups", None, True, {"deploymentType": "PERSISTENT_2"}, True),
    ],
)
def test_lustre_changes_replace_as_the_bridged_provider_does(path, old, new, inputs, replaced) -> None:
    from offline.diff.replacement import LUSTRE, replaces

    assert bool(replaces(LUSTRE, path, old, new, [], inputs)) is replaced


# hashicorp/terraform-provider-aws (aws-sdk-go-v2 / plugin-framework sources, v6.x):
# internal/service/eks/access_entry.go (type ForceNew), access_policy_association.go (no Update:
# every input replaces), ecr/repository.go (encryption_configuration ForceNew),
# ecr/lifecycle_policy.go (no Update), ec2/vpc.go (resourceVPCUpdate -> modifyVPCTenancy: in place),
# ec2/vpc_security_group_ingress_rule.go (security_group_id RequiresReplace; ModifyPlan replaces on a
# change of source type; other changes go through ModifySecurityGroupRules). pulumi_aws 7.51.1
# amp/scraper.py (the bridged resource's documentation): a scraper's source replaces it, its scrape
# configuration does not (a new scrape job must not cost the collector's re-creation and its gap).
@pytest.mark.parametrize(
    ("type_", "path", "old", "new", "replaced"),
    [
        ("aws:eks/accessEntry:AccessEntry", "type", "STANDARD", "EC2_LINUX", True),
        ("aws:eks/accessPolicyAssociation:AccessPolicyAssociation", "accessScope.type", "cluster", "namespace", True),
        ("aws:ecr/repository:Repository", "encryptionConfigurations[0].encryptionType", "AES256", "KMS", True),
        ("aws:ecr/repository:Repository", "imageTagMutability", "MUTABLE", "IMMUTABLE", False),
        ("aws:ecr/lifecyclePolicy:LifecyclePolicy", "policy", "{}", '{"rules": []}', True),
        ("aws:ec2/vpc:Vpc", "instanceTenancy", "dedicated", "default", False),
        ("aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule", "cidrIpv4", "10.0.0.0/16", "10.1.0.0/16", False),
        ("aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule", "cidrIpv4", "10.0.0.0/16", None, True),
        ("aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule", "securityGroupId", "sg-1", "sg-2", True),
        ("aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule", "fromPort", 443, 8443, False),
        ("aws:amp/scraper:Scraper", "scrapeConfiguration", "global: {}", "global: {}\nscrape_configs: []", False),
        ("aws:amp/scraper:Scraper", "source.eks.subnetIds[1]", "subnet-a", "subnet-b", True),
        # pulumi-kubernetes v4.32.0 provider/pkg/provider/diff.go forceNewProperties (no *Mutable option set).
        ("kubernetes:core/v1:ConfigMap", "data.run.sh", "echo a", "echo b", True),
        ("kubernetes:core/v1:ConfigMap", "metadata.labels.team", "a", "b", False),
        ("kubernetes:core/v1:Secret", "stringData.password", "a", "b", True),
    ],
)
def test_other_replacements_follow_the_provider_source(type_, path, old, new, replaced) -> None:
    from offline.diff.replacement import replaces

    assert bool(replaces(type_, path, old, new, [])) is replaced


def test_the_diff_fits_120_columns_and_diff_md_keeps_the_values_whole():
    # `make plan BASE=` reads like the plan table (offline/report/render.py): display types, 120 columns,
    # long values wrapped under their path; diff.md (the PR comment) keeps each value whole.
    from offline.report import render

    long_name = "cluster-eks-" + "x" * 120
    policy = json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [{"Effect": "Allow", "Resource": "*", "Action": [f"s3:Action{i}" for i in range(20)]}],
        }
    )
    huge = "y" * (compare.TEXT_VALUE + 50)
    lt = "urn:pulumi:dev::p::aws:ec2/launchTemplate:LaunchTemplate::" + long_name
    base = plan(
        [resource(lt, "aws:ec2/launchTemplate:LaunchTemplate", {"policy": "{}", "userData": "a"})],
        {"addonBuilds": {"vpc-cni": "v1.20.4-eksbuild.1", "coredns": "v1.12.4-eksbuild.1"}},
    )
    head = plan(
        [resource(lt, "aws:ec2/launchTemplate:LaunchTemplate", {"policy": policy, "userData": huge})],
        {"addonBuilds": {"vpc-cni": "v1.20.6-eksbuild.1", "coredns": "v1.13.2-eksbuild.1" + "z" * 80}},
    )
    d = compare.compare_plans("p", "dev", base, head)
    text = compare.render_text([d], "main (0123456789ab)")
    assert max(len(line) for line in text.splitlines()) <= render.WIDTH
    assert "aws:ec2:LaunchTemplate" in text and "aws:ec2/launchTemplate:LaunchTemplate" not in text
    # Wrapped, not lost: the policy's last action is there; the huge value is cut with a marker.
    flat = " ".join(line.strip() for line in text.splitlines())
    assert '\\"s3:Action19\\"]' in flat and "… (+52 characters)" in flat  # 650 characters and its quotes
    markdown = compare.render_markdown([d], "main")
    assert huge in markdown and json.dumps(policy) in markdown
    # The other side: full type tokens and one line per path would not fit.
    assert len(f"       userData: {json.dumps(huge)}") > render.WIDTH


def test_a_changed_precompile_replaces_the_training_in_the_plan_diff(workloads_all: PlanResult) -> None:
    # The offline plan's UIDs are stable placeholders, so bert-train's inputs are the same on both sides:
    # only the cascade shows it replaced. pulumi/pulumi v3.259.0 pkg/resource/deploy/step_generator.go
    # l.2044-2075 (deleteBeforeReplace) and calculateDependentReplacements l.3220-3330: a dependent whose
    # property comes from a replaced resource, diffed with that property unknown, is replaced when its
    # replaceOnChanges covers it. One rule for the diff and the preflight (offline/diff/replacement.py).
    base = [r.as_json() for r in workloads_all.registrations]
    head = json.loads(json.dumps(base))
    precompile = next(r for r in head if r["name"] == "job-bert-precompile")
    precompile["inputs"]["spec"]["tasks"][0]["template"]["spec"]["containers"][0]["command"][2] = "1"
    changes = {c.name: c for c in compare.compare_resources(base, head)}
    # Its gate (workloads/step_gate.py) follows it too, and the training follows the precompile, not the gate.
    assert {n: c.kind for n, c in changes.items()} == {
        "job-bert-precompile": "replace",
        "job-bert-precompile-gate": "replace",
        "job-bert-train": "replace",
    }
    assert changes["job-bert-train"].notes == [
        "replaced: spec comes from job-bert-precompile, which is replaced (replaceOnChanges spec)"
    ]
    # The other side: only the training job changes, and the precompile stays.
    head = json.loads(json.dumps(base))
    train = next(r for r in head if r["name"] == "job-bert-train")
    train["inputs"]["spec"]["tasks"][0]["template"]["spec"]["containers"][0]["command"][2] = "1"
    assert {c.name: c.kind for c in compare.compare_resources(base, head)} == {"job-bert-train": "replace"}
    # `depends_on` is no property dependency: a replaced staging Job takes nothing with it.
    head = json.loads(json.dumps(base))
    stage = next(r for r in head if r["name"] == "job-stage-wikicorpus")
    stage["inputs"]["spec"]["template"]["spec"]["containers"][0]["image"] += "-x"
    assert {c.name: c.kind for c in compare.compare_resources(base, head)} == {"job-stage-wikicorpus": "replace"}


def test_the_diff_lists_dependencies_first_and_deletes_dependents_first() -> None:
    def resource(name: str, *needs: str, parent: str = "", provider: str = "") -> dict[str, Any]:
        return {
            "urn": f"urn:{name}",
            "type": "t",
            "name": name,
            "dependencies": [f"urn:{n}" for n in needs],
            "parent": parent and f"urn:{parent}",
            "provider": provider and f"urn:{provider}::id-1",
            "inputs": {"v": 1},
        }

    def bumped(r: dict[str, Any]) -> dict[str, Any]:
        return {**r, "inputs": {"v": 2}}

    # "a-group" sorts before "b-cluster" by name but needs it; "c-addon" is reached through its provider.
    base = [
        resource("b-cluster"),
        resource("a-group", "b-cluster"),
        resource("k8s"),
        resource("c-addon", provider="k8s"),
        resource("z-old"),
        resource("y-old-child", "z-old"),
    ]
    head = [bumped(r) for r in base[:4]]
    changes = compare.compare_resources(base, head)
    assert [(c.kind, c.name) for c in changes] == [
        ("update", "b-cluster"),
        ("update", "a-group"),
        ("update", "k8s"),
        ("update", "c-addon"),
        ("delete", "y-old-child"),
        ("delete", "z-old"),
    ]


def test_an_aliased_component_and_its_children_are_the_same_resources() -> None:
    """A component registered with an alias of its former type and name (workloads/nxd_llama.py FORMERLY)
    keeps its children's identity: the engine matches the former URNs against the state, so a child whose
    inputs changed is replaced or updated in place, not deleted and created again."""
    from offline.diff.compare import compare_resources

    stack = "urn:pulumi:prod::w::"
    old_parent, new_parent = f"{stack}pulumi:pulumi:Stack$t:w:Old::old", f"{stack}pulumi:pulumi:Stack$t:w:New::new"
    job = "kubernetes:batch/v1:Job"
    base = [
        {"urn": old_parent, "type": "t:w:Old", "name": "old", "inputs": {}},
        {"urn": f"{stack}t:w:Old${job}::job-a", "type": job, "name": "job-a", "parent": old_parent,
         "inputs": {"spec": {"template": {"image": "a:1"}}}},
        {"urn": f"{stack}t:w:Old${job}::job-gone", "type": job, "name": "job-gone", "parent": old_parent,
         "inputs": {}},
    ]  # fmt: skip
    head = [
        {"urn": new_parent, "type": "t:w:New", "name": "new", "inputs": {},
         "aliases": [{"spec": {"name": "old", "type": "t:w:Old", "parentUrn": ""}}]},
        {"urn": f"{stack}t:w:New${job}::job-a", "type": job, "name": "job-a", "parent": new_parent,
         "inputs": {"spec": {"template": {"image": "a:2"}}}},
    ]  # fmt: skip
    changes = {(c.kind, c.name) for c in compare_resources(base, head)}
    assert changes == {("replace", "job-a"), ("delete", "job-gone")}
    # Without the alias the same plan is a create and a delete of every child.
    head[0].pop("aliases")
    changes = {(c.kind, c.name) for c in compare_resources(base, head)}
    assert ("create", "job-a") in changes and ("delete", "job-a") in changes


def test_a_change_to_the_bootstrap_says_to_apply_it_first() -> None:
    """The pipeline never runs the bootstrap and its roles are what it declares: a change that needs a
    new permission (a read the preview roles lack) fails every preview until an administrator's `up`
    of bootstrap/, so the diff says that first, in the terminal and in the pull request's comment."""
    policy = "aws:iam/rolePolicy:RolePolicy"
    urn = f"urn:pulumi:dev::{compare.BOOTSTRAP_PROJECT}::{policy}::github-preview-dev-state"
    base = plan([resource(urn, policy, {"policy": '{"Action": ["ec2:DescribeSubnets"]}'})])
    head = plan([resource(urn, policy, {"policy": '{"Action": ["ec2:DescribeNetworkInterfaces"]}'})])
    bootstrap = compare.compare_plans(compare.BOOTSTRAP_PROJECT, "dev", base, head)
    cluster = compare.compare_plans("trainium-eks", "dev", base, base)
    note = compare.bootstrap_note([bootstrap, cluster])
    assert note and note.startswith("The bootstrap changes (dev): an administrator runs `pulumi up` in bootstrap/")
    assert note.split("(dev)")[0] in compare.render_text([bootstrap, cluster], "main", 200)
    assert f"**{note}**" in compare.render_markdown([bootstrap, cluster], "main")
    assert compare.bootstrap_note([cluster]) is None
    assert "The bootstrap changes" not in compare.render_text([cluster], "main")
