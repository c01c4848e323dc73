"""Prod's data does not rest on one line of its stack file.

- Prod-ness comes from the stack's name (prod, prod-<suffix>) as well as from `environment`; a
  prod-named stack that says another environment is refused, naming the key.
- In prod the program refuses `storage.retain: false` and SCRATCH file systems, and the mandatory
  pack's prod-data-protected refuses an unprotected, SCRATCH or no-final-backup file system, from the
  stack name in each URN or from policy/config.prod.json.
- `make plan BASE=` refuses a data-store replacement the stack file does not acknowledge by name,
  and any replacement of a resource protected before and after: pulumi/pulumi v3.259.0
  pkg/resource/deploy/step_generator.go (generateSteps) refuses "unable to replace resource ... as it
  is currently marked for protection" when new.Protect && old.Protect, so a real `pulumi up` of prod
  cannot replace its file system while storage.retain stays on, which prod requires.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from infra.config.errors import ConfigError
from infra.config.load import raw_from_pulumi_config
from infra.config.models import is_prod_stack
from infra.validate import parse_stack_config
from offline.diff.compare import (
    compare_plans,
    data_store_replacement_refusals,
    load_plans,
    stack_acknowledgements,
)
from offline.plan.policy_run import parse_config, run_policies
from offline.plan.runner import run_program, stack_config
from offline.report.plan_output import write_plan
from policy.guardrails import POLICIES
from tests.fixture_project import FIXTURE_ROOT
from tests.policy_helpers import reg
from tests.wrapped_text import unwrapped

LUSTRE = "aws:fsx/lustreFileSystem:LustreFileSystem"
ASSOCIATION = "aws:fsx/dataRepositoryAssociation:DataRepositoryAssociation"
KMS_ARN = "arn:aws:kms:us-west-2:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab"


def _prod_raw(**overrides: object) -> dict[str, object]:
    """Pulumi.prod.yaml's keys as the program reads them (infra/config/load.py), with ``overrides``
    (None: the key left out)."""
    raw = {**raw_from_pulumi_config(stack_config(FIXTURE_ROOT, "prod")), **overrides}
    return {k: v for k, v in raw.items() if v is not None}


# --- prod-ness follows the stack's name ----------------------------------------------------------


@pytest.mark.parametrize(
    ("stack", "prod"),
    [("prod", True), ("prod-eu", True), ("prod-2", True), ("dev", False), ("production", False), ("preprod", False)],
)
def test_prod_stacks_are_named_prod_or_prod_with_a_suffix(stack, prod):
    assert is_prod_stack(stack) is prod


def test_a_prod_named_stack_without_the_environment_line_is_still_prod():
    config = parse_stack_config(_prod_raw(environment=None), stack="prod")
    assert config.environment == "prod" and config.retain_storage
    # The same file under another stack name is dev: the name alone made the difference.
    assert parse_stack_config(_prod_raw(environment=None), stack="staging").environment == "dev"


def test_a_prod_named_stack_that_says_dev_is_refused_naming_the_key():
    with pytest.raises(ConfigError) as refused:
        parse_stack_config(_prod_raw(environment="dev"), stack="prod-eu")
    assert (
        "trainium-eks:environment = 'dev': stack 'prod-eu' is named as a prod stack (prod or prod-<suffix>), so "
        "its environment is prod (allowed: prod, or leave the key out)"
    ) in str(refused.value)


def test_the_program_protects_prods_file_system_without_the_environment_line():
    # The real program under the mocks, stack prod, its stack file less `environment: prod`: the
    # name is read from the engine (pulumi.get_stack()).
    config = {k: v for k, v in stack_config(FIXTURE_ROOT, "prod").items() if k != "trainium-eks:environment"}
    fs = run_program(FIXTURE_ROOT, "prod", config).named("fsx-training", LUSTRE)
    assert fs.protect and fs.inputs["skipFinalBackup"] is False


@pytest.mark.parametrize(
    ("storage", "refusal"),
    [
        ({"retain": False}, "trainium-eks:storage.retain = false: prod retains its file system"),
        (
            {"deploymentType": "SCRATCH_2", "perUnitStorageThroughput": None, "backupRetentionDays": 0},
            "trainium-eks:storage.deploymentType = 'SCRATCH_2': prod's file system is persistent",
        ),
    ],
)
def test_prod_refuses_a_file_system_that_may_be_lost(storage, refusal):
    raw = _prod_raw()
    raw["storage"] = {**raw["storage"], **storage}  # type: ignore[dict-item]
    with pytest.raises(ConfigError) as refused:
        parse_stack_config(raw, stack="prod")
    assert refusal in str(refused.value)
    # Dev may keep a file system it can lose.
    dev = {**raw, "environment": "dev", "endpointAccess": {"public": True}}
    dev["storage"] = {**raw["storage"], "backupRetentionDays": 0}  # type: ignore[dict-item]
    assert parse_stack_config(dev, stack="dev").retain_storage is False


def test_prods_image_repositories_are_never_force_deleted():
    with pytest.raises(ConfigError) as refused:
        parse_stack_config(_prod_raw(ecrForceDelete=True), stack="prod")
    assert (
        "trainium-eks:ecrForceDelete = true: prod's image repositories are not deleted while they hold images "
        "(allowed: false, or leave the key out, which is false in prod)"
    ) in str(refused.value)
    # Dropping the key, and the environment line with it, leaves a prod-named stack's repositories kept.
    assert (
        parse_stack_config(_prod_raw(ecrForceDelete=None, environment=None), stack="prod").force_delete_registries
        is False
    )
    dev = {**_prod_raw(ecrForceDelete=None), "environment": "dev", "endpointAccess": {"public": True}}
    assert parse_stack_config(dev, stack="dev").force_delete_registries is True


def test_the_program_keeps_prods_repositories_without_the_key():
    config = {
        k: v
        for k, v in stack_config(FIXTURE_ROOT, "prod").items()
        if k not in ("trainium-eks:environment", "trainium-eks:ecrForceDelete")
    }
    repositories = run_program(FIXTURE_ROOT, "prod", config).of_type("aws:ecr/repository:Repository")
    # The images teams push are kept; the pull-through cache's copies of public images go with the stack.
    pushed = [r for r in repositories if "/ecr-public/" not in r.inputs["name"]]
    assert pushed and all(r.inputs.get("forceDelete") is False for r in pushed)
    assert all(r.inputs.get("forceDelete") is True for r in repositories if r not in pushed)


def test_an_acknowledged_replacement_says_why():
    with pytest.raises(ConfigError) as refused:
        parse_stack_config(_prod_raw(replacementsAcknowledged={"fsx-training": "  "}), stack="prod")
    assert "trainium-eks:replacementsAcknowledged.fsx-training = '  ': say why this data store may be replaced" in str(
        refused.value
    )


# --- the mandatory pack ---------------------------------------------------------------------------


def _file_system(stack: str, protect: bool = True, **props: object):
    registration = reg(LUSTRE, "fsx-training", {"deploymentType": "PERSISTENT_2", "skipFinalBackup": False, **props})
    registration.urn = f"urn:pulumi:{stack}::trainium-eks::{LUSTRE}::fsx-training"
    registration.protect = protect
    return registration


def _prod_data(*registrations, config: dict[str, object] | None = None) -> list[str]:
    pack = parse_config({"prod-data-protected": config} if config else {}, "test policy config")
    rule = [p for p in POLICIES if p.name == "prod-data-protected"]
    return [v.message for v in run_policies(list(registrations), pack, "us-east-2", rule).violations]


@pytest.mark.parametrize(
    ("change", "says"),
    [
        ({"protect": False}, "LustreFileSystem 'fsx-training' is not protected in prod (stack 'prod'"),
        ({"deploymentType": "SCRATCH_2"}, "is SCRATCH_2 in prod (stack 'prod'"),
        ({"skipFinalBackup": True}, "skips its final backup in prod"),
        ({"skipFinalBackup": None}, "skips its final backup in prod"),
    ],
)
def test_the_pack_refuses_a_prod_file_system_that_may_be_lost(change, says):
    (message,) = _prod_data(_file_system("prod", **change))
    assert says in message
    # Not in dev, unless dev's pack config says it is prod.
    assert not _prod_data(_file_system("dev", **change))
    assert _prod_data(_file_system("dev", **change), config={"environment": "prod"})


def test_the_pack_refuses_an_unprotected_prod_data_repository_association():
    association = reg(ASSOCIATION, "fsx-data-0", {})
    association.urn = f"urn:pulumi:prod-eu::trainium-eks::{ASSOCIATION}::fsx-data-0"
    (message,) = _prod_data(association)
    assert "DataRepositoryAssociation 'fsx-data-0' is not protected in prod (stack 'prod-eu'" in message


def test_the_shipped_prod_pack_config_turns_the_rule_on_and_the_shipped_stacks_pass(prod, dev):
    shipped = json.loads((FIXTURE_ROOT / "policy" / "config.prod.json").read_text())
    assert shipped["prod-data-protected"] == {"environment": "prod"} and shipped["all"] == "mandatory"
    assert not _prod_data(*prod.registrations, config=shipped["prod-data-protected"])
    assert not _prod_data(*dev.registrations)
    # Prod's file system, as the program declares it, unprotected: refused by the shipped config
    # even under a stack name that is not prod.
    fs = prod.named("fsx-training", LUSTRE)
    unprotected = _file_system("staging", protect=False, **fs.inputs)
    assert _prod_data(unprotected, config=shipped["prod-data-protected"])


# --- the plan diff's gate --------------------------------------------------------------------------


def _gate(base_root: Path, head_root: Path, acknowledged: dict[str, str] | None = None) -> list[str]:
    base, head = load_plans(base_root), load_plans(head_root)
    diffs = [compare_plans(p, s, base.get((p, s)), head.get((p, s))) for p, s in sorted(base.keys() | head.keys())]
    return data_store_replacement_refusals(diffs, base, head, {("trainium-eks", "dev"): acknowledged or {}})


def test_a_planned_file_system_replacement_is_refused_unless_acknowledged(dev_fsx, plan_with, tmp_path):
    # Both revisions planned by the real program: dev's file system (on FSx) moved to a customer key, which
    # replaces it (kmsKeyId is ForceNew, offline/diff/replacement.py).
    write_plan(dev_fsx, tmp_path / "base")
    head = plan_with(storage={"kmsKeyId": KMS_ARN})
    write_plan(head, tmp_path / "head")
    (refusal,) = _gate(tmp_path / "base", tmp_path / "head")
    assert refusal == (
        "trainium-eks/dev (Pulumi.dev.yaml): LustreFileSystem 'fsx-training' would be replaced, which deletes or "
        "strands its data; undo the change that replaces it, or name it in trainium-eks:replacementsAcknowledged "
        "with the reason"
    )
    assert not _gate(tmp_path / "base", tmp_path / "head", {"fsx-training": "dev data is scratch; moving to a CMK"})
    # A name that is no data store of the stack is refused, with the names that are.
    (unknown,) = _gate(tmp_path / "base", tmp_path / "head", {"fsx-training": "cmk", "fsx-trainign": "typo"})
    assert unknown.startswith(
        "trainium-eks/dev (Pulumi.dev.yaml): trainium-eks:replacementsAcknowledged.fsx-trainign: no data store of "
        "this stack is named 'fsx-trainign' (allowed: "
    )
    assert "fsx-training" in unknown and "default-fsx-claim" in unknown
    # The key passes the program's own validation (it is declared, not an unknown key).
    assert plan_with(storage={}, replacementsAcknowledged={"fsx-training": "cmk"}).named("fsx-training", LUSTRE)


def _plan_dir(root: Path, stack: str, protect: bool, kms_key_id: str | None) -> None:
    where = root / "trainium-eks" / stack
    where.mkdir(parents=True)
    resource = {
        "urn": f"urn:pulumi:{stack}::trainium-eks::{LUSTRE}::fsx-training",
        "type": LUSTRE,
        "name": "fsx-training",
        "protect": protect,
        "inputs": {"deploymentType": "PERSISTENT_2", **({"kmsKeyId": kms_key_id} if kms_key_id else {})},
    }
    (where / "resources.json").write_text(json.dumps({"resources": [resource], "outputs": {}}))


def test_a_protected_file_system_replacement_is_refused_even_when_acknowledged(tmp_path):
    _plan_dir(tmp_path / "base", "dev", protect=True, kms_key_id=None)
    _plan_dir(tmp_path / "head", "dev", protect=True, kms_key_id=KMS_ARN)
    (refusal,) = _gate(tmp_path / "base", tmp_path / "head", {"fsx-training": "new key"})
    assert "LustreFileSystem 'fsx-training' would be replaced, and it is protected: `pulumi up` refuses" in refusal
    # The engine lets a resource unprotected in the same update be replaced: then the acknowledgement decides.
    _plan_dir(tmp_path / "head2", "dev", protect=False, kms_key_id=KMS_ARN)
    assert not _gate(tmp_path / "base", tmp_path / "head2", {"fsx-training": "new key"})
    assert _gate(tmp_path / "base", tmp_path / "head2")


def test_acknowledgements_are_read_from_each_projects_stack_file(tmp_path):
    (tmp_path / "Pulumi.yaml").write_text("name: trainium-eks\nruntime: python\n")
    (tmp_path / "Pulumi.dev.yaml").write_text(
        "config:\n  trainium-eks:replacementsAcknowledged:\n    fsx-training: dev data is scratch\n"
    )
    (tmp_path / "Pulumi.prod.yaml").write_text("config:\n  aws:region: us-east-2\n")
    assert stack_acknowledgements([tmp_path], ("dev", "prod", "test")) == {
        ("trainium-eks", "dev"): {"fsx-training": "dev data is scratch"},
        ("trainium-eks", "prod"): {},
    }


@pytest.mark.parametrize(
    ("mode", "code", "heading"),
    [
        # The deploy jobs, against the commit the stack was deployed from: refused.
        ("refuse", 2, "This change replaces data stores against main (0123abcd):"),
        # A pull request, against its base, which may never have been deployed (a team's first pull
        # request changes the region): reported, not refused.
        (
            "report",
            0,
            "This change would replace data stores against main (0123abcd) (if the stack was deployed from it: the "
            "deploy job checks against what runs):",
        ),
    ],
)
def test_make_plan_base_on_an_unacknowledged_data_store_replacement(tmp_path, monkeypatch, capsys, mode, code, heading):
    from offline.diff import compare

    # prod's stack file: dev's acknowledges its own move to EFS, which names no store of these plans.
    monkeypatch.setattr(
        compare, "plan_base", lambda ref, out, stacks: (_plan_dir(out, "prod", False, None), "main (0123abcd)")[1]
    )
    monkeypatch.setattr(
        compare, "plan_revision", lambda checkout, out, stacks, label="": _plan_dir(out, "prod", False, KMS_ARN)
    )
    # The acknowledgements come from the fixture's stack files, not this checkout's.
    acknowledgements = compare.stack_acknowledgements
    fixture_dirs = [FIXTURE_ROOT, FIXTURE_ROOT / "workloads", FIXTURE_ROOT / "bootstrap"]
    monkeypatch.setattr(compare, "stack_acknowledgements", lambda dirs, stacks: acknowledgements(fixture_dirs, stacks))
    argv = ["--base", "main", "--out", str(tmp_path), "--data-store-replacements", mode]
    assert compare.main(argv) == code
    err = unwrapped(capsys.readouterr().err)
    assert heading in err
    assert "LustreFileSystem 'fsx-training' would be replaced" in err


def test_a_stack_that_mounted_the_root_does_not_lose_sight_of_its_data_silently(plan_with, tmp_path):
    # A stack of an older version mounted the file system's root (its default rootClaims was
    # `mounted`); planned now with the key left out, its root claims and their static volumes are
    # deleted and its pods mount their (empty) directories: the data stays at the root, unseen. The
    # gate refuses it until the stack file says so, and the way forward is `migrated`
    # (docs/operations.md).
    write_plan(plan_with(storage={"rootClaims": "migrated"}), tmp_path / "base")
    write_plan(plan_with(storage={"capacityGib": 1200}), tmp_path / "head")
    refusals = _gate(tmp_path / "base", tmp_path / "head")
    assert (
        "trainium-eks/dev (Pulumi.dev.yaml): PersistentVolumeClaim 'default-fsx-claim' would be deleted, which "
        "strands its data (its pods would mount something else, or nothing); undo the change that deletes it, or "
        "name it in trainium-eks:replacementsAcknowledged with the reason"
    ) in refusals
    assert any("PersistentVolume 'fsx-claim-default' would be deleted" in r for r in refusals)
    retired = {r.split("'")[1]: "no pod mounts the root claims (docs/operations.md)" for r in refusals}
    assert not _gate(tmp_path / "base", tmp_path / "head", retired)
