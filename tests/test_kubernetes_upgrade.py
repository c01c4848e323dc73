"""Kubernetes version changes EKS refuses are refused first: by the program against the running
cluster, and by `make plan BASE=<ref>` against the base revision.

EKS user guide, "Update existing cluster to new Kubernetes version" (update-cluster.html): "Once
you upgrade a cluster, you can't downgrade to a previous version." The EKS docs' eksctl page
"Cluster upgrades" (cluster-upgrade.html): "The only values allowed ... are the current version of
the cluster or one version higher. Upgrades of more than one Kubernetes version are not
supported." UpdateClusterVersion refuses anything else, after this program has already changed
what comes before the cluster in `pulumi up`'s order.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from infra.config.errors import ConfigError
from infra.config.rules import kubernetes_version_change_problem
from offline.diff.compare import version_change_refusals
from offline.plan.mocks import ExistingCluster
from offline.plan.runner import REPO_ROOT, run_program, stack_config
from tests.fixture_project import FIXTURE_ROOT
from tests.project_copy import dev_groups_at, kept_past_support
from tests.wrapped_text import unwrapped


def test_no_change_and_the_next_minor_are_allowed():
    assert kubernetes_version_change_problem("1.34", "1.34") is None
    assert kubernetes_version_change_problem("1.34", "1.35") is None
    assert kubernetes_version_change_problem("1.9", "1.10") is None  # minors compare as numbers


def test_a_downgrade_is_refused():
    assert kubernetes_version_change_problem("1.34", "1.33") == (
        "trainium-eks:kubernetesVersion = '1.33': the cluster runs 1.34 and EKS cannot downgrade a cluster; "
        "allowed: 1.34 (no change) or 1.35 (the next minor)"
    )


def test_the_refusal_names_who_holds_the_current_version():
    # At deploy time the running cluster; offline (make plan BASE=) the base revision's declaration.
    assert kubernetes_version_change_problem("1.34", "1.33", holder="the base revision declares").startswith(
        "trainium-eks:kubernetesVersion = '1.33': the base revision declares 1.34 and EKS cannot downgrade"
    )


def test_a_skipped_minor_is_refused_with_the_way_there():
    assert kubernetes_version_change_problem("1.34", "1.36") == (
        "trainium-eks:kubernetesVersion = '1.36': the cluster runs 1.34 and EKS upgrades one minor version at a "
        "time; allowed: 1.34 (no change) or 1.35 (the next minor): set 1.35, `pulumi up`, then the next"
    )


def _at(kubernetes_version: str) -> dict[str, str]:
    """The dev stack moved to ``kubernetes_version`` with its Trainium groups' AMI pins."""
    config = stack_config(FIXTURE_ROOT, "dev")
    config["trainium-eks:kubernetesVersion"] = kubernetes_version
    config["trainium-eks:acceleratorNodeGroups"] = json.dumps(dev_groups_at(kubernetes_version))
    config["trainium-eks:endOfSupportAcknowledged"] = json.dumps(kept_past_support(kubernetes_version))
    return config


def _dev(kubernetes_version: str, running: str) -> object:
    config = _at(kubernetes_version)
    return run_program(FIXTURE_ROOT, "dev", config, existing_cluster=ExistingCluster({}, kubernetes_version=running))


def test_the_program_refuses_a_skip_against_the_running_cluster_before_declaring_anything():
    with pytest.raises(ConfigError) as refused:
        _dev("1.35", running="1.33")
    assert "Invalid stack configuration for the running cluster trn-dev" in str(refused.value)
    assert "the cluster runs 1.33 and EKS upgrades one minor version at a time" in str(refused.value)


def test_the_program_goes_ahead_with_the_next_minor():
    plan = _dev("1.34", running="1.33")
    (cluster,) = plan.of_type("eks:index:Cluster")
    assert cluster.inputs["version"] == "1.34"


def _plan_dir(root: Path, version: str) -> None:
    stack = root / "trainium-eks" / "dev"
    stack.mkdir(parents=True)
    resource = {
        "urn": "urn:pulumi:dev::trainium-eks::eks:index:Cluster::cluster-eks",
        "type": "eks:index:Cluster",
        "name": "cluster-eks",
        "inputs": {"version": version},
    }
    (stack / "resources.json").write_text(json.dumps({"resources": [resource], "outputs": {}}))


@pytest.mark.parametrize(
    ("base", "head", "refused"),
    [("1.34", "1.35", False), ("1.34", "1.33", True), ("1.34", "1.36", True), ("1.34", "1.34", False)],
)
def test_make_plan_base_refuses_what_eks_would(tmp_path, base, head, refused):
    _plan_dir(tmp_path / "base", base)
    _plan_dir(tmp_path / "head", head)
    refusals = version_change_refusals(tmp_path / "base", tmp_path / "head")
    assert bool(refusals) is refused
    if refused:
        (refusal,) = refusals
        assert refusal.startswith(f"trainium-eks/dev (Pulumi.dev.yaml): trainium-eks:kubernetesVersion = '{head}'")
        assert f"'{head}': the base revision declares {base} and EKS" in refusal


def test_make_plan_base_exits_2_naming_the_refusal(tmp_path, monkeypatch, capsys):
    from offline.diff import compare

    monkeypatch.setattr(compare, "plan_base", lambda ref, out, stacks: (_plan_dir(out, "1.34"), "main (0123abcd)")[1])
    monkeypatch.setattr(compare, "plan_revision", lambda checkout, out, stacks, label="": _plan_dir(out, "1.36"))
    # The acknowledgements come from the fixture's stack files, not this checkout's.
    acknowledgements = compare.stack_acknowledgements
    fixture_dirs = [FIXTURE_ROOT, FIXTURE_ROOT / "workloads", FIXTURE_ROOT / "bootstrap"]
    monkeypatch.setattr(compare, "stack_acknowledgements", lambda dirs, stacks: acknowledgements(fixture_dirs, stacks))
    assert compare.main(["--base", "main", "--out", str(tmp_path)]) == 2
    err = unwrapped(capsys.readouterr().err)
    assert "EKS would refuse this change against main (0123abcd):" in err
    # Offline, 1.34 is what the base revision declares, not what a cluster runs.
    assert "kubernetesVersion = '1.36': the base revision declares 1.34 and EKS upgrades one minor" in err
    assert "the cluster runs" not in err


def test_every_minor_eks_offers_above_the_pinned_one_has_offline_addon_builds():
    # So `make plan BASE=` of a skipped minor plans both revisions and reaches the version-change
    # refusal, instead of stopping at the offline add-on table. They are stand-ins,
    # said so beside the table (offline/plan/fixtures.py) and in docs/offline-plan.md.
    from infra.facts import versions
    from offline.plan import fixtures

    def minor(v: str) -> tuple[int, ...]:
        return tuple(int(p) for p in v.split("."))

    above = {v for v in versions.EKS_KUBERNETES_VERSIONS if minor(v) >= minor(versions.KUBERNETES_VERSION)}
    assert "1.36" in above and above <= set(fixtures.ADDON_DEFAULT_BUILDS)
    builds = fixtures.ADDON_DEFAULT_BUILDS
    assert set(builds["1.36"]) == set(builds[versions.KUBERNETES_VERSION])
    assert all(b.endswith(tuple(f"-eksbuild.{n}" for n in range(1, 10))) for b in builds["1.36"].values())
    assert "Made-up builds in the real format" in (REPO_ROOT / "offline" / "plan" / "fixtures.py").read_text()


def test_a_skipped_minor_planned_for_real_is_refused_by_the_base_diff(dev, tmp_path):
    # Both revisions planned by the real program (the base: the dev stack at 1.34), then compared as
    # `make plan BASE=` does: the skip to 1.36 plans offline and is refused.
    from offline.report.plan_output import write_plan

    write_plan(_dev("1.34", running="1.34"), tmp_path / "base")
    write_plan(_dev("1.36", running="1.36"), tmp_path / "head")
    (refusal,) = version_change_refusals(tmp_path / "base", tmp_path / "head")
    assert refusal == (
        "trainium-eks/dev (Pulumi.dev.yaml): trainium-eks:kubernetesVersion = '1.36': the base revision declares 1.34 "
        "and EKS upgrades one minor version at a time; allowed: 1.34 (no change) or 1.35 (the next minor): set 1.35, "
        "`pulumi up`, then the next"
    )


def test_a_failed_base_plan_names_the_project_stack_and_revision_not_a_directory(tmp_path, monkeypatch):
    import subprocess

    from offline.diff import compare

    checkout = tmp_path / "review19"  # what a worktree or clone happens to be called
    checkout.mkdir()
    (checkout / "Pulumi.yaml").write_text("name: trainium-eks\nruntime: python\n")
    (checkout / "Pulumi.dev.yaml").write_text("config: {}\n")
    monkeypatch.setattr(
        compare, "run_in", lambda where, argv: subprocess.CompletedProcess(argv, 2, "", "Invalid stack ...")
    )
    with pytest.raises(compare.PlanFailed) as failed:
        compare.plan_revision(checkout, tmp_path / "out", ("dev",), "the base revision main (0123abcd)")
    assert str(failed.value) == (
        "The offline plan of trainium-eks/dev (and the workload and bootstrap stacks of that "
        "name) in the base revision main (0123abcd) failed:\nInvalid stack ..."
    )
    assert "review19" not in str(failed.value)


# --- node groups must match the control plane before it moves ------------------------------------
# AWS CLI reference, eks update-cluster-version: "If your cluster has managed node groups attached to
# it, all of your node groups' Kubernetes versions must match the cluster's Kubernetes version in
# order to update the cluster to a new Kubernetes version."


def test_an_upgrade_waits_for_node_groups_left_behind():
    from infra.config.rules import lagging_node_groups_problem

    assert lagging_node_groups_problem("1.34", "1.35", {"core-1a2b": "1.34", "trn1-32xl-ng1": "1.34"}) is None
    assert lagging_node_groups_problem("1.34", "1.34", {"trn1-32xl-ng1": "1.33"}) is None  # no upgrade asked
    assert lagging_node_groups_problem("1.34", "1.35", {"core-1a2b": "1.34", "trn1-32xl-ng1": "1.33"}) == (
        "trainium-eks:kubernetesVersion = '1.35': the control plane runs 1.34 but the managed node groups "
        "trn1-32xl-ng1 (1.33) do not, and EKS upgrades the control plane only when every managed node group matches "
        "it; allowed: 1.34 until `pulumi up` with kubernetesVersion 1.34 has brought them level, then 1.35"
    )


def test_the_program_refuses_an_upgrade_over_a_lagging_node_group():
    config = _at("1.35")
    lagging = ExistingCluster({}, kubernetes_version="1.34", node_groups={"trn1-32xl-ng1": "1.33", "core-x": "1.34"})
    with pytest.raises(ConfigError) as refused:
        run_program(FIXTURE_ROOT, "dev", config, existing_cluster=lagging)
    assert "managed node groups trn1-32xl-ng1 (1.33) do not" in str(refused.value)
    level = ExistingCluster({}, kubernetes_version="1.34", node_groups={"trn1-32xl-ng1": "1.34", "core-x": "1.34"})
    (cluster,) = run_program(FIXTURE_ROOT, "dev", config, existing_cluster=level).of_type("eks:index:Cluster")
    assert cluster.inputs["version"] == "1.35"


def test_trainium_groups_roll_without_surging_an_extra_instance(dev):
    # EKS API reference, NodegroupUpdateConfig.updateStrategy: DEFAULT "launches the new instances
    # first, before terminating the old instances"; MINIMAL terminates first, "useful in scenarios
    # where you are constrained to resources or costs (for example, with hardware accelerators)".
    # A group on a Capacity Block or a full reservation has no spare instance to surge into.
    for name in ("trn1-32xl-ng1", "trn1n-32xl-ng"):
        assert dev.named(name, "aws:eks/nodeGroup:NodeGroup").inputs["updateConfig"] == {
            "maxUnavailable": 1,
            "updateStrategy": "MINIMAL",
        }


def test_each_minor_runs_its_own_cluster_autoscaler_release_and_one_without_is_warned_about(plan_with):
    """cluster-autoscaler's releases follow Kubernetes minors (kubernetes/autoscaler README, Releases):
    a stack runs the release recorded for its kubernetesVersion, so raising the minor in the stack file
    is all it takes; a minor with none recorded runs the nearest one recorded, with a warning."""
    from infra.config.rules import advisories
    from infra.facts.versions import CLUSTER_AUTOSCALER
    from infra.validate import parse_stack_config

    for minor in CLUSTER_AUTOSCALER:
        config = {
            "region": "us-west-2",
            "kubernetesVersion": minor,
            "endOfSupportAcknowledged": kept_past_support(minor),
        }
        assert not any("cluster-autoscaler" in n for n in advisories(parse_stack_config(config)))
    (note,) = [
        n
        for n in advisories(
            parse_stack_config(
                {
                    "region": "us-west-2",
                    "kubernetesVersion": "1.33",
                    "endOfSupportAcknowledged": kept_past_support("1.33"),
                }
            )
        )
        if "cluster-autoscaler" in n
    ]
    assert note.startswith(
        "trainium-eks:kubernetesVersion = '1.33': no cluster-autoscaler release is recorded for it, so the cluster "
        "runs the one for Kubernetes 1.34 (v1.34.2, chart 9.53.0)"
    )
    from tests.project_copy import dev_groups_at

    for minor, release in CLUSTER_AUTOSCALER.items():
        plan = plan_with(
            kubernetesVersion=minor,
            acceleratorNodeGroups=dev_groups_at(minor),
            endOfSupportAcknowledged=kept_past_support(minor),
        )
        chart = plan.named("cluster-autoscaler").inputs
        assert chart["version"] == release.chart and chart["values"]["image"]["tag"] == release.image_tag


def test_a_minor_past_its_eks_support_is_refused_unless_the_stack_file_keeps_it_with_a_reason():
    """infra/facts/support.py: EKS standard support for 1.34 ends 2026-12-02 (EKS release calendar);
    under upgradePolicy STANDARD, EKS then upgrades the control plane itself. The groups' AMI releases,
    built for 1.34, live as long as it and are named in the same message."""
    from datetime import date

    from infra.config.rules import end_of_support
    from infra.facts.support import EKS_KUBERNETES_SUPPORT
    from infra.facts.versions import EKS_KUBERNETES_VERSIONS
    from infra.validate import parse_stack_config
    from tests.project_copy import shipped_acknowledgements

    assert set(EKS_KUBERNETES_SUPPORT) == set(EKS_KUBERNETES_VERSIONS)
    images = shipped_acknowledgements()  # the burn-in image's lines, kept as the shipped stacks keep them

    def check(today: date, **config: object) -> tuple[list[str], list[str]]:
        kept = {**images, **config.pop("kept", {})}
        raw = {"region": "us-west-2", "kubernetesVersion": "1.34", "endOfSupportAcknowledged": kept, **config}
        refused, warned = end_of_support(parse_stack_config(raw), today)
        return refused, [w for w in warned if "kubernetes-1.34" in w]

    pinned = (
        "trainium-eks:kubernetesVersion = '1.34'; "
        "trainium-eks:acceleratorNodeGroups[0].amiReleaseVersion = '1.34.9-20260625'; "
        "trainium-eks:acceleratorNodeGroups[1].amiReleaseVersion = '1.34.9-20260625'; "
        "infra/facts/versions.py CLUSTER_AUTOSCALER = 'v1.34.2'"
    )
    refused, [warned] = check(date(2026, 11, 27))
    assert refused == [] and warned.startswith(
        f"{pinned}: EKS standard support for Kubernetes 1.34 (kubernetes-1.34) ends 2026-12-02, in 5 days; "
        "step forward: raise kubernetesVersion one minor at a time"
    )
    (refusal,), [] = check(date(2026, 12, 3))
    assert "EKS upgrades the control plane itself, past the version this stack declares; allowed: raise " in refusal
    assert refusal.endswith(
        "or keep it with a reason in trainium-eks:endOfSupportAcknowledged (kubernetes-1.34: <why>)"
    )
    [], (kept,) = check(date(2026, 12, 3), kept={"kubernetes-1.34": "the team upgrades on 2026-12-10"})
    assert "(kubernetes-1.34) ended 2026-12-02; kept by trainium-eks:endOfSupportAcknowledged; step forward: " in kept
    # Under EXTENDED the end that matters is extended support's.
    assert check(date(2026, 12, 3), upgradePolicy="EXTENDED") == ([], [])
    assert check(date(2027, 12, 3), upgradePolicy="EXTENDED")[0]
    # A name the plan does not know, or no reason, is refused by its key.
    (typo,), [] = check(date(2026, 11, 27), kept={"kubernets-1.34": "soon"})
    assert typo.startswith("trainium-eks:endOfSupportAcknowledged.kubernets-1.34 = 'soon': not a pin the plan knows")
    (empty,), [] = check(date(2026, 11, 27), kept={"kubernetes-1.34": " "})
    assert empty == "trainium-eks:endOfSupportAcknowledged.kubernetes-1.34 = ' ': needs a reason"
    # The shipped minor today: nothing to say about it.
    config = parse_stack_config(
        {"region": "us-west-2", "kubernetesVersion": "1.35", "endOfSupportAcknowledged": images}
    )
    refused, warned = end_of_support(config, date(2026, 11, 27))
    assert refused == [] and not [w for w in warned if "kubernetes-" in w]
