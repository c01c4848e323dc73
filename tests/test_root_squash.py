"""Root squash on the training file system, and the only clients it exempts.

- The file system squashes root to `nobody` everywhere but the private subnets, where the core node
  group now lives (routed like the node subnets, in the Lustre security group's reach, untagged for
  Karpenter), replaced new-group-first.
- The two kube-system Jobs that act as root there select those nodes by a label only the new group has,
  and their scripts, run for real under exactly the capabilities their manifests add (tests/
  root_job_runs.py), give each training namespace its directory and its data, mode 2770, and need each
  capability they add.
"""

from __future__ import annotations

import ipaddress
import os
import stat
from pathlib import Path

import pytest

from infra.components.kube import ROOT_SQUASH_EXEMPT_LABELS, ROOT_SQUASH_EXEMPT_SELECTOR
from infra.components.storage import (
    DIRECTORY_JOB,
    ROOT_DATA_JOB,
    directories_script,
    directory_job,
    root_data_job,
    root_data_script,
)
from infra.config.errors import ConfigError
from infra.specs import nodepools
from infra.validate import parse_stack_config
from offline.diff import replacement
from offline.plan.runner import PlanResult
from tests.root_job_runs import needs_root, run_script
from tests.test_lustre_nids import expand

LUSTRE = "aws:fsx/lustreFileSystem:LustreFileSystem"
SUBNET = "aws:ec2/subnet:Subnet"
NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"
JOB = "kubernetes:batch/v1:Job"
IDS = {"default": 20001, "research": 20002}
DIRECTORIES = ["default", "research", "neuron-burn-in"]


def added_capabilities(job: dict) -> tuple[str, ...]:
    (container,) = job["spec"]["template"]["spec"]["containers"]
    return tuple(container["securityContext"]["capabilities"]["add"])


# What the manifests add, not the module's constant: the scripts run with exactly this.
DIRECTORY_CAPABILITIES = added_capabilities(directory_job(DIRECTORIES, IDS))
MOVE_CAPABILITIES = added_capabilities(root_data_job({"output": "default"}, DIRECTORIES, IDS))


def subnets(plan: PlanResult, kind: str) -> dict[str, str]:
    """Placeholder id -> CIDR of the plan's ``kind`` (public, private, node) subnets."""
    prefix = f"network-{kind}-"
    return {
        f"subnet-placeholder-{r.name}": r.inputs["cidrBlock"] for r in plan.of_type(SUBNET) if r.name.startswith(prefix)
    }


# --- the file system ---------------------------------------------------------------------------


@pytest.mark.parametrize("stack", ["dev_fsx", "prod"])
def test_root_is_squashed_everywhere_but_the_private_subnets(stack, request):
    plan = request.getfixturevalue(stack)
    (fs,) = plan.of_type(LUSTRE)
    squash = fs.inputs["rootSquashConfiguration"]
    assert squash["rootSquash"] == "65534:65534"
    exempt = set().union(*map(expand, squash["noSquashNids"]))
    private = set().union(*(set(ipaddress.IPv4Network(c)) for c in subnets(plan, "private").values()))
    assert exempt == private
    # Where every other node, and every pod on it, takes its address: none of it is exempt.
    for cidr in subnets(plan, "node").values():
        block = ipaddress.IPv4Network(cidr)
        assert block.network_address not in exempt and block.broadcast_address not in exempt


def test_scratch_file_systems_are_squashed_too(plan_with):
    """No deployment type the stack file allows lacks root squash (infra/components/storage.py
    root_squash_configuration says why each takes it)."""
    plan = plan_with(storage={"deploymentType": "SCRATCH_2", "perUnitStorageThroughput": None, "rootClaims": "retired"})
    (fs,) = plan.of_type(LUSTRE)
    assert fs.inputs["deploymentType"] == "SCRATCH_2"
    assert fs.inputs["rootSquashConfiguration"]["rootSquash"] == "65534:65534"


def test_a_stack_still_mounting_the_root_is_refused_with_the_way_forward(plan_with):
    """The pods run as their namespace's id and cannot write the root (root's, mode 0755): `mounted`,
    an older version's default, is refused naming the move (docs/operations.md); `migrated` mounts the
    directories, with squash on."""
    with pytest.raises(ConfigError) as refused:
        parse_stack_config({"region": "us-west-2", "storage": {"rootClaims": "mounted"}})
    message = str(refused.value)
    assert "storage.rootClaims = 'mounted': the training pods run as their namespace's id" in message
    assert "storage.rootDataOwners" in message and "or retired (the default)" in message
    migrated = plan_with(storage={"rootClaims": "migrated"})
    (fs,) = migrated.of_type(LUSTRE)
    assert fs.inputs["rootSquashConfiguration"]["rootSquash"] == "65534:65534"


def test_turning_squash_on_updates_the_file_system_in_place(dev_fsx):
    (fs,) = dev_fsx.of_type(LUSTRE)
    new = fs.inputs["rootSquashConfiguration"]
    assert replacement.replaces(LUSTRE, "rootSquashConfiguration", None, new, [], fs.inputs) is None
    assert replacement.replaces(LUSTRE, "rootSquashConfiguration.noSquashNids", [], new["noSquashNids"], []) is None


# --- the exempt nodes --------------------------------------------------------------------------


@pytest.mark.parametrize("stack", ["dev_fsx", "prod"])
def test_the_core_group_lives_in_the_private_subnets_and_nothing_else_does(stack, request):
    plan = request.getfixturevalue(stack)
    private, node = subnets(plan, "private"), subnets(plan, "node")
    assert sorted(plan.named("cluster-core", NODE_GROUP).inputs["subnetIds"]) == sorted(private)
    assert sorted(plan.named("cluster-job-support", NODE_GROUP).inputs["subnetIds"]) == sorted(node)
    for group in plan.of_type(NODE_GROUP):
        if group.name != "cluster-core":
            assert not set(group.inputs["subnetIds"]) & set(private), group.name
            assert not ROOT_SQUASH_EXEMPT_LABELS.items() <= group.inputs.get("labels", {}).items(), group.name
    assert plan.named("cluster-core", NODE_GROUP).inputs["labels"] == {"role": "core", **ROOT_SQUASH_EXEMPT_LABELS}


def test_the_private_subnets_route_like_the_node_subnets(prod):
    """NAT for ECR and the EKS API, the S3 gateway endpoint for S3: the same route table per zone."""
    associations = {
        r.inputs["subnetId"]: r.inputs["routeTableId"]
        for r in prod.of_type("aws:ec2/routeTableAssociation:RouteTableAssociation")
    }
    tables = {f"rtb-placeholder-{r.name}": r for r in prod.of_type("aws:ec2/routeTable:RouteTable")}
    (s3,) = [r for r in prod.of_type("aws:ec2/vpcEndpoint:VpcEndpoint") if r.inputs["serviceName"].endswith(".s3")]
    for private_id in subnets(prod, "private"):
        zone = private_id.removeprefix("subnet-placeholder-network-private-")
        table = associations[private_id]
        assert table == associations[f"subnet-placeholder-network-node-{zone}"]
        assert [r.get("natGatewayId", "").startswith("nat-") for r in tables[table].inputs["routes"]] == [True]
        assert table in s3.inputs["routeTableIds"]


def test_karpenter_never_places_nodes_in_the_exempt_subnets(plan_with):
    plan = plan_with(nodeProvisioner="karpenter")
    for subnet in plan.of_type(SUBNET):
        tagged = nodepools.DISCOVERY_TAG in subnet.inputs["tags"]
        assert tagged == subnet.name.startswith("network-node-"), subnet.name
    node_classes = [r for r in plan.registrations if r.type.endswith("EC2NodeClass")]
    assert node_classes
    for node_class in node_classes:
        terms = node_class.inputs["spec"]["subnetSelectorTerms"]
        assert all(set(t) == {"tags"} and nodepools.DISCOVERY_TAG in t["tags"] for t in terms)


def test_the_core_nodes_still_reach_the_file_system(prod):
    """Lustre's rules name the cluster security group, not addresses; the core group's launch template
    sets no security group or interface, so EKS gives its nodes the cluster security group wherever
    they are."""
    template = prod.named("cluster-core-lt").inputs
    assert "vpcSecurityGroupIds" not in template and "networkInterfaces" not in template
    cluster_sg = "sg-placeholder-eks-cluster"
    rules = [r for r in prod.registrations if r.type in replacement.SG_RULES and r.name.startswith("fsx-node0")]
    opened = {
        (r.type.rsplit(":", 1)[1], r.inputs["fromPort"], r.inputs["toPort"])
        for r in rules
        if cluster_sg in (r.inputs["securityGroupId"], r.inputs["referencedSecurityGroupId"])
    }
    for kind in ("SecurityGroupIngressRule", "SecurityGroupEgressRule"):
        assert {(kind, 988, 988), (kind, 1018, 1023)} <= opened


def test_moving_the_core_group_brings_the_new_nodes_up_first(dev):
    """Its subnets are ForceNew, so the move replaces the group; with a name prefix (no fixed name to
    give up first) and no deleteBeforeReplace, Pulumi creates the new group before deleting the old, and
    the system pods move over as the old nodes drain."""
    core = dev.named("cluster-core", NODE_GROUP)
    assert replacement.replaces(NODE_GROUP, "subnetIds", ["subnet-a"], core.inputs["subnetIds"], []) is not None
    assert core.inputs["nodeGroupNamePrefix"] == "core-" and "nodeGroupName" not in core.inputs
    assert not core.lifecycle.get("deleteBeforeReplace")


@pytest.mark.parametrize("name", [DIRECTORY_JOB, ROOT_DATA_JOB])
def test_the_root_jobs_run_only_on_the_exempt_nodes(name, plan_with):
    plan = plan_with(
        trainingNamespaces=["default", "research"], namespaceIds=IDS, storage={"rootDataOwners": {"output": "default"}}
    )
    job = plan.named(name, JOB)
    pod = job.inputs["spec"]["template"]["spec"]
    # A label the old core nodes lack: during the `up` that moves the group, a root Job never lands on
    # an old (squashed) node.
    assert pod["nodeSelector"] == ROOT_SQUASH_EXEMPT_SELECTOR
    (container,) = pod["containers"]
    context = container["securityContext"]
    assert context["runAsUser"] == 0 and context["allowPrivilegeEscalation"] is False
    assert context["capabilities"]["drop"] == ["ALL"]
    expected = DIRECTORY_CAPABILITIES if name == DIRECTORY_JOB else MOVE_CAPABILITIES
    assert context["capabilities"]["add"] == list(expected)
    # pulumi-kubernetes awaits a Job 10 minutes unless told otherwise; a walk over millions of entries
    # takes longer.
    assert job.lifecycle["customTimeouts"]["create"] == "90m"


def test_the_jobs_add_only_what_they_need():
    """Both within the container runtime's default set (Pod Security baseline; the policy pack's
    no-privileged-or-host-path rule): no FOWNER, FSETID, SETUID or the rest of it."""
    assert DIRECTORY_CAPABILITIES == MOVE_CAPABILITIES == ("CHOWN", "DAC_OVERRIDE")


# --- the directory Job's script, for real ------------------------------------------------------


def owner(path: Path) -> tuple[int, int]:
    st = os.lstat(path)
    return st.st_uid, st.st_gid


def mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def written_before_squash(root: Path) -> Path:
    """`default`'s directory as root pods left it, with a directory an image's own user made (0700),
    a link inside the tree and one pointing out of it."""
    default = root / "fsx" / "default"
    (default / "ckpt" / "step-100").mkdir(parents=True)
    (default / "ckpt" / "step-100" / "model.pt").write_text("weights")
    (default / "neuron_cache").mkdir()
    (default / "latest").symlink_to("ckpt/step-100")
    outside = root / "outside.txt"
    outside.write_text("not the namespace's")
    (default / "escape").symlink_to(outside)
    ray = default / "ray_results"
    ray.mkdir()
    (ray / "result.json").write_text("{}")
    os.chown(ray / "result.json", 1000, 1000)
    os.chown(ray, 1000, 1000)
    ray.chmod(0o700)
    return root / "fsx"


def entries(directory: Path) -> list[Path]:
    return [Path(d) / n for d, dirs, files in os.walk(directory) for n in (*dirs, *files)]


def run_directories(fsx: Path, scratch: Path, ids=IDS, capabilities=DIRECTORY_CAPABILITIES):
    return run_script(directories_script(str(fsx), DIRECTORIES, ids), capabilities, scratch)


@needs_root
def test_the_first_run_gives_each_namespace_its_directory_and_everything_in_it(tmp_path):
    fsx = written_before_squash(tmp_path)
    done = run_directories(fsx, tmp_path / "run")
    assert done.returncode == 0, done.stdout + done.stderr
    default = fsx / "default"
    assert owner(default) == (20001, 20001) and mode(default) == 0o2770
    assert all(owner(p) == (20001, 20001) for p in entries(default)), [(p, owner(p)) for p in entries(default)]
    # Links are changed themselves, never what they point at.
    assert owner(tmp_path / "outside.txt") == (0, 0)
    assert (default / "ckpt" / "step-100" / "model.pt").read_text() == "weights"
    assert owner(fsx / "research") == (20002, 20002) and mode(fsx / "research") == 0o2770
    # A cluster service's directory stays root's, readable by all.
    assert owner(fsx / "neuron-burn-in") == (0, 0) and mode(fsx / "neuron-burn-in") == 0o755
    assert f"{default} ready: 20001:20001, mode 2770" in done.stdout


@needs_root
def test_a_rerun_changes_only_what_root_owns(tmp_path):
    fsx = written_before_squash(tmp_path)
    assert run_directories(fsx, tmp_path / "first").returncode == 0
    again = run_directories(fsx, tmp_path / "again")
    assert again.returncode == 0 and again.chowns == []  # nothing root's: a stat per entry, no write
    default = fsx / "default"
    # An S3 import (a data repository gives an object without POSIX metadata to root), and a file a
    # namespace sharing the directory wrote (its own UID, the directory's group through setgid).
    (default / "datasets").mkdir()
    os.chown(default / "datasets", 0, 0)
    (default / "shared-by-research.txt").write_text("research's")
    os.chown(default / "shared-by-research.txt", 20002, 20001)
    third = run_directories(fsx, tmp_path / "third")
    assert third.returncode == 0, third.stderr
    assert third.chowns == [["-h", "20001:20001", str(default / "datasets")]]
    assert owner(default / "shared-by-research.txt") == (20002, 20001)


@needs_root
def test_a_changed_id_or_mode_is_put_right(tmp_path):
    fsx = written_before_squash(tmp_path)
    assert run_directories(fsx, tmp_path / "first").returncode == 0
    (fsx / "research").chmod(0o777)
    changed = run_directories(fsx, tmp_path / "changed", ids={"default": 20005, "research": 20002})
    assert changed.returncode == 0, changed.stderr
    assert all(owner(p) == (20005, 20005) for p in entries(fsx / "default"))
    assert owner(fsx / "default") == (20005, 20005) and mode(fsx / "default") == 0o2770
    assert mode(fsx / "research") == 0o2770


@needs_root
@pytest.mark.parametrize("missing", ["CHOWN", "DAC_OVERRIDE"])
def test_the_directory_job_needs_each_capability_it_adds(missing, tmp_path):
    fsx = written_before_squash(tmp_path)
    fewer = tuple(c for c in DIRECTORY_CAPABILITIES if c != missing)
    # CHOWN gives owners away; DAC_OVERRIDE walks into the image user's 0700 directory.
    first = run_directories(fsx, tmp_path / "without", capabilities=fewer)
    assert first.returncode != 0
    assert run_directories(fsx, tmp_path / "with").returncode == 0
    # Once the directories are 2770, root reads them only by overriding their permissions.
    if missing == "DAC_OVERRIDE":
        rerun = run_directories(fsx, tmp_path / "rerun", capabilities=fewer)
        assert rerun.returncode != 0 and "Permission denied" in rerun.stderr


# --- the move Job's script, for real -----------------------------------------------------------


def run_move(fsx: Path, scratch: Path, capabilities=MOVE_CAPABILITIES):
    script = root_data_script(str(fsx), {"output": "default", "neuron_cache": "research"}, DIRECTORIES, IDS)
    return run_script(script, capabilities, scratch)


@needs_root
def test_moved_data_becomes_the_namespace_s(tmp_path):
    fsx = tmp_path / "fsx"
    (fsx / "output" / "ckpt").mkdir(parents=True)
    (fsx / "output" / "ckpt" / "model.pt").write_text("weights")
    (fsx / "neuron_cache").write_text("a file, not a directory")
    assert run_directories(fsx, tmp_path / "directories").returncode == 0
    done = run_move(fsx, tmp_path / "move")
    assert done.returncode == 0, done.stdout + done.stderr
    moved = fsx / "default" / "output"
    assert (moved / "ckpt" / "model.pt").read_text() == "weights"
    assert all(owner(p) == (20001, 20001) for p in [moved, *entries(moved)])
    assert owner(fsx / "research" / "neuron_cache") == (20002, 20002)
    again = run_move(fsx, tmp_path / "again")
    assert again.returncode == 0 and "already moved" in again.stdout and again.chowns == []


@needs_root
def test_the_move_needs_dac_override_to_rename_into_a_namespace_s_directory(tmp_path):
    fsx = tmp_path / "fsx"
    (fsx / "output").mkdir(parents=True)
    assert run_directories(fsx, tmp_path / "directories").returncode == 0
    # The destination is 20001:20001, mode 2770: root is neither its owner nor in its group. Reading and
    # searching it (DAC_READ_SEARCH) is not enough to rename into it.
    done = run_move(fsx, tmp_path / "move", capabilities=("CHOWN", "DAC_READ_SEARCH"))
    assert done.returncode != 0 and "Permission denied" in done.stderr
    assert (fsx / "output").is_dir()
