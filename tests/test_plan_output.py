"""`make plan` prints like `pulumi preview`, in 120 columns, and ends with a summary. The
rendering is offline/report/render.py, tested on the session's plans (no extra runs)."""

from __future__ import annotations

import pytest

from offline.plan import policy_run
from offline.report import plan_output, render, report
from tests.fixture_project import FIXTURE_ROOT


@pytest.mark.parametrize(
    "token, shown",
    [
        # pulumi/pulumi sdk/go/common/tokens/tokens.go Type.DisplayName, and its table in
        # tokens_test.go TestTypeDisplayName (read at the stored snapshot of pulumi/pulumi, commit
        # 1b59498, Aug 2026; the v3.272.0 tag of .pulumi-version was not in that snapshot):
        ("incomplete", "incomplete"),  # not enough parts
        ("pkg:mod:", "pkg:mod:"),  # no name
        ("pkg:mod:typ", "pkg:mod:typ"),  # no slash
        ("pkg:Mod/foo:typ", "pkg:Mod/foo:typ"),  # bad casing
        ("pkg:mod/foo/bar:Bar", "pkg:mod/foo:Bar"),  # remove slash
        ("pkg:mod/foo/bar/baz:Baz", "pkg:mod/foo/bar:Baz"),  # remove up to last slash
        # ... and what that makes of ours: the module file must be the type name in camel case.
        ("aws:ec2/vpcIpv4CidrBlockAssociation:VpcIpv4CidrBlockAssociation", "aws:ec2:VpcIpv4CidrBlockAssociation"),
        ("kubernetes:core/v1:PersistentVolume", "kubernetes:core/v1:PersistentVolume"),
        ("eks:index:Cluster", "eks:index:Cluster"),
    ],
)
def test_types_print_as_pulumis_display_names(token, shown):
    assert render.display_type(token) == shown


def _stack_text(result, estimate, policy, wide=False) -> str:
    kind = "cluster" if result.project == "trainium-eks" else "workloads"
    parts = [
        *render.resource_table(result, plan_output.summarize, wide),
        *render.outputs(result, wide),
        render.cost_section(estimate, result.outputs.get("region", "us-west-2"), kind, wide),
    ]
    if policy is not None:
        text = policy_run.render_report(result.project, result.stack, policy)
        parts.append(text if wide else render.wrapped(text))
    return "\n".join(parts)


@pytest.fixture(scope="module")
def dev_parts(dev, workloads_dev):
    config = policy_run.load_config(FIXTURE_ROOT / "policy" / "config.dev.json")
    region = dev.outputs["region"]
    return [
        (dev, report.cluster_cost(dev), policy_run.run_policies(dev.registrations, config, region)),
        (
            workloads_dev,
            report.workloads_cost(FIXTURE_ROOT / "workloads", "dev", dev),
            policy_run.run_policies(workloads_dev.registrations, config, region),
        ),
    ]


def test_every_line_fits_80_columns(dev_parts, prod):
    for result, estimate, policy in dev_parts:
        text = _stack_text(result, estimate, policy)
        too_wide = [line for line in text.splitlines() if len(line) > render.WIDTH]
        assert too_wide == [], f"{result.project}: {too_wide[:3]}"
        # Nothing is lost: every resource's name and every setting word is still there.
        assert all(r.name in text for r in result.registrations)
    prod_text = _stack_text(prod, report.cluster_cost(prod), None)
    assert max(len(line) for line in prod_text.splitlines()) <= render.WIDTH


def test_wide_keeps_one_resource_a_line_with_its_settings(dev_parts):
    result, estimate, policy = dev_parts[0]
    wide = render.resource_table(result, plan_output.summarize, wide=True)
    assert len(wide) == len(result.registrations) + 1  # a header, then one line each
    row = next(line for line in wide if line.rstrip().endswith("imds=required") and "trn1-32xl-ng1-lt" in line)
    assert "aws:ec2:LaunchTemplate" in row and "efaInterfaces=8 placementGroup" in row
    assert max(len(line) for line in wide) > render.WIDTH  # the full table, however wide
    narrow = render.resource_table(result, plan_output.summarize)
    assert len(narrow) > len(wide)  # settings moved to lines of their own


def test_resources_nest_under_their_component_like_pulumi_preview(dev):
    # pkg/backend/display/progress.go addIndentations: "├─ " for a child, "└─ " for the last one.
    lines = render.resource_table(dev, plan_output.summarize)
    assert lines[0].split() == ["Type", "Name"]
    component = next(i for i, line in enumerate(lines) if "trainium:infra:AcceleratorNodeGroups" in line)
    assert lines[component].startswith(" +   trainium:infra:AcceleratorNodeGroups")
    assert lines[component + 1].startswith(" +   ├─ ")
    group = next(line for line in lines if line.rstrip().endswith(" trn1-32xl-ng1") and "aws:eks:NodeGroup" in line)
    settings = lines[lines.index(group) + 1]
    assert settings.startswith(" " * 8) and "instanceTypes=trn1.32xlarge" in settings


def test_the_closing_summary_says_what_where_and_how_much(dev_parts, tmp_path):
    planned = [
        render.Planned(
            result,
            estimate,
            len(policy.mandatory),
            len(policy.violations) - len(policy.mandatory),
            [f"[{v.enforcement_level}] {v.policy}: {result.project}/dev {v.name}" for v in policy.violations],
            tmp_path / result.project / "dev",
        )
        for result, estimate, policy in dev_parts
    ]
    text = render.summary(planned, "us-west-2", ["trainium-workloads:hfToken"])
    cluster, workloads = dev_parts[0][0], dev_parts[1][0]
    assert f"    + {len(cluster.registrations):>4} to create   trainium-eks/dev" in text
    assert f"    + {len(workloads.registrations):>4} to create   trainium-workloads/dev" in text
    idle = report.money(dev_parts[0][1]["hourly"]["idle"])
    full = report.money(dev_parts[0][1]["hourly"]["fullScale"])
    assert f"cluster idle {idle}/h" in text and f"full scale {full}/h" in text
    advisory = sum(len(p.violations) - len(p.mandatory) for _, _, p in dev_parts)
    assert f"Policy: 0 mandatory, {advisory} advisory violation(s)" in text
    assert "eks-endpoint-not-open: trainium-eks/dev" in text
    assert f"{tmp_path}/trainium-eks/dev/resources.json, manifests/" in " ".join(text.split())
    assert "planned with stand-ins: trainium-workloads:hfToken." in " ".join(text.split())
    # ...in 80 columns, but for the paths, which are never broken (a broken path cannot be copied).
    assert max(len(line) for line in text.splitlines() if str(tmp_path) not in line) <= render.WIDTH


def test_an_unknown_total_reads_as_a_floor(prod, tmp_path):
    # Prod's cluster has a line without a price: the summary gives the priced lines' sum as what it is, a floor.
    estimate = report.cluster_cost(prod)
    assert estimate["hourly"]["idle"] is None  # the case itself: some line has no price
    text = render.summary([render.Planned(prod, estimate, 0, 0, [], tmp_path)], "us-east-2", [])
    floor = report.money(estimate["knownHourly"]["idle"])
    assert f"cluster idle at least {floor}/h (a line has no price)" in text
    assert "unknown (priced lines" not in text and ")/h" not in text
