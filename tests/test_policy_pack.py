"""The policy pack as a whole: real plans pass, config files are valid, `make plan` exits 3 on a
mandatory violation, unknown values are never violations, and the README lists every rule."""

from __future__ import annotations

import json
import re
import runpy

import pytest
from pulumi_policy import EnforcementLevel
from pulumi_policy.proxy import UNKNOWN_STRING_VALUE

from infra.errors import ConfigError
from offline import fixtures, plan
from offline.runner import REPO_ROOT, stack_config
from policy.guardrails import BY_NAME, PACK_NAME, POLICIES
from policy.offline import MANDATORY_EXIT_CODE, config_path, load_config, parse_config, run_policies
from tests.policy_helpers import reg, violations


def _report(result, stack):
    region = stack_config(REPO_ROOT, stack)["aws:region"]
    return run_policies(result.registrations, load_config(config_path(stack)), region)


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_real_plans_have_no_mandatory_violation(stack, request):
    for fixture in (stack, f"workloads_{stack}"):
        report = _report(request.getfixturevalue(fixture), stack)
        assert not report.mandatory, [v.message for v in report.mandatory]
        assert not report.notes


def test_dev_endpoint_is_advisory_by_design_and_mandatory_in_prod(dev):
    # Dev's API endpoint is open to 0.0.0.0/0 by design (Pulumi.dev.yaml); the same plan under
    # prod's levels would be refused.
    found = [v for v in _report(dev, "dev").violations if v.policy == "eks-endpoint-not-open"]
    assert [v.enforcement_level for v in found] == ["advisory"]
    strict = run_policies(dev.registrations, load_config(config_path("prod")), "us-west-2")
    assert "eks-endpoint-not-open" in {v.policy for v in strict.mandatory}


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_config_files_are_valid_and_name_real_policies(stack):
    config = load_config(config_path(stack))
    assert set(config.levels) == set(BY_NAME)
    assert config.levels["trainium-hourly-ceiling"] == EnforcementLevel.ADVISORY


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_config_offered_zones_match_the_offering_facts(stack):
    zones = load_config(config_path(stack)).properties["accelerator-single-zone"]["offeredZoneIds"]
    expected: dict[str, set[str]] = {}
    for types in fixtures.OFFERINGS.values():
        for t, z in types.items():
            if t.startswith("trn"):
                expected.setdefault(t, set()).update(z)
    assert {t: set(z) for t, z in zones.items()} == expected


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_external_namespaces_cover_the_cluster_training_namespaces(stack, request):
    # The workload stack's objects live in namespaces the cluster stack creates, which a preview of
    # the workload stack cannot see: the config file names them.
    config = load_config(config_path(stack))
    known = set(config.properties["namespace-exists"].get("externalNamespaces", [])) | {"default"}
    assert set(request.getfixturevalue(stack).outputs["trainingNamespaces"]) <= known


def test_schema_defaults_pass_their_own_schema():
    config = parse_config({}, "defaults")
    assert config.properties["trainium-hourly-ceiling"]["maxHourlyUsd"] == 500.0
    assert config.levels == {p.name: p.enforcement_level for p in POLICIES}


@pytest.mark.parametrize("raw, expected", [
    ({"neuron-taint": "warn"}, "neuron-taint: \"warn\" is not an enforcement level (allowed: advisory, mandatory, remediate, disabled)"),
    ({"neuron-taints": "advisory"}, "neuron-taints: no such policy"),
    ({"trainium-hourly-ceiling": {"maxHourlyUsd": "500"}}, "trainium-hourly-ceiling.maxHourlyUsd: \"500\" is not of type number"),
    ({"trainium-hourly-ceiling": {"maxHourlyUsd": -1}}, "trainium-hourly-ceiling.maxHourlyUsd: -1 is below the minimum 0"),
    ({"trainium-hourly-ceiling": {"maxHourlyUSD": 5}}, "trainium-hourly-ceiling.maxHourlyUSD: not a setting of this policy (settings: maxHourlyUsd, region)"),
    ({"namespace-exists": {"externalNamespaces": ""}}, "namespace-exists.externalNamespaces: \"\" is not of type array"),
    ({"all": ""}, "all: \"\" is not an enforcement level"),
    ({"neuron-taint": 3}, "neuron-taint: 3 must be an enforcement level or an object"),
    ([], "must hold a JSON object"),
])
def test_bad_policy_config_is_refused_naming_key_value_and_what_is_allowed(raw, expected):
    with pytest.raises(ConfigError) as caught:
        parse_config(raw, "policy configuration test.json")
    assert expected in str(caught.value)


def test_all_sets_every_level_and_a_policy_entry_overrides_it():
    # pulumi/pulumi sdk/go/pkg/resource/analyzer/config.go applyConfig: "all" first, then each policy.
    config = parse_config({"all": {"enforcementLevel": "advisory", "justification": "trial"}, "neuron-taint": {"enforcementLevel": "mandatory"}}, "t")
    assert config.levels["neuron-taint"] == EnforcementLevel.MANDATORY
    assert config.levels["neuron-ami-type"] == EnforcementLevel.ADVISORY


def test_a_disabled_policy_does_not_run():
    open_rule = reg("aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule", "ssh", {"cidrIpv4": "0.0.0.0/0"})
    report = run_policies([open_rule], parse_config({"security-group-no-open-ingress": {"enforcementLevel": "disabled", "justification": "test"}}, "t"))
    assert not report.violations


def test_an_unknown_value_is_a_note_never_a_violation():
    # pulumi-policy v1.21.0 proxy.py: reading an unknown (preview) value raises UnknownValueError;
    # policy.py Analyze turns it into an advisory "can't run during preview" diagnostic.
    lt = reg("aws:ec2/launchTemplate:LaunchTemplate", "lt", {"metadataOptions": {"httpTokens": UNKNOWN_STRING_VALUE}})
    report = run_policies([lt], parse_config({}, "t"), policies=[BY_NAME["launch-template-hardening"]])
    assert not report.violations
    assert report.notes and "can't be known during preview" in report.notes[0]
    # A placement group whose name is still unknown counts as present (only the key is read).
    lt = reg("aws:ec2/launchTemplate:LaunchTemplate", "lt", {
        "networkInterfaces": [{"networkCardIndex": i, "interfaceType": "efa"} for i in range(8)],
        "placement": {"groupName": UNKNOWN_STRING_VALUE}})
    ng = reg("aws:eks/nodeGroup:NodeGroup", "ng", {"instanceTypes": ["trn1.32xlarge"]},
             {"launchTemplate": [("aws:ec2/launchTemplate:LaunchTemplate", "lt")]})
    assert not violations("placement-group-unless-reserved", lt, ng)


def test_make_plan_exits_3_on_a_mandatory_violation_after_writing_everything(tmp_path, capsys):
    strict = tmp_path / "strict.json"
    strict.write_text(json.dumps({"all": "mandatory"}))
    out = tmp_path / "out"
    assert plan.main(["--stack", "dev", "--out", str(out), "--policy-config", str(strict)]) == MANDATORY_EXIT_CODE == 3
    document = json.loads((out / "trainium-eks" / "dev" / "resources.json").read_text())
    [violation] = document["policy"]["violations"]
    assert violation["policy"] == "eks-endpoint-not-open" and violation["enforcementLevel"] == "mandatory"
    assert set(violation) == {"policy", "urn", "type", "name", "enforcementLevel", "message"}
    assert violation["type"] == "eks:index:Cluster" and violation["urn"].endswith("::cluster-eks")
    assert (out / "trainium-workloads" / "dev" / "resources.json").exists()
    captured = capsys.readouterr()
    assert "[mandatory] eks-endpoint-not-open: cluster-eks" in captured.out
    assert "1 mandatory policy violation(s)" in captured.err


def test_a_bad_policy_config_file_exits_2_before_planning(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text('{"neuron-taint": "warn"}')
    assert plan.main(["--stack", "dev", "--out", str(tmp_path / "out"), "--policy-config", str(bad)]) == 2
    assert not (tmp_path / "out").exists()
    assert "is not an enforcement level" in capsys.readouterr().err


def test_the_entry_point_only_builds_the_pack(monkeypatch):
    built = []
    monkeypatch.setattr("pulumi_policy.PolicyPack", lambda **kwargs: built.append(kwargs))
    runpy.run_path(str(REPO_ROOT / "policy" / "__main__.py"))
    [pack] = built
    assert pack["name"] == PACK_NAME and pack["policies"] == POLICIES


def test_the_pack_pins_the_same_sdk_as_the_project():
    pin = re.compile(r"^pulumi-policy==\S+$", re.M)
    assert pin.findall((REPO_ROOT / "policy" / "requirements.txt").read_text()) == pin.findall((REPO_ROOT / "requirements.txt").read_text())


def test_readme_lists_every_rule_with_its_description():
    readme = (REPO_ROOT / "README.md").read_text()
    section = readme.split("## Guardrails", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `([a-z0-9-]+)` \| (.+?) \| (\w+) \| (\w+) \|$", section, re.M)
    dev, prod = load_config(config_path("dev")), load_config(config_path("prod"))
    assert rows == [(p.name, p.description, dev.levels[p.name].value, prod.levels[p.name].value) for p in POLICIES]


def test_lowering_a_level_needs_a_justification():
    with pytest.raises(ConfigError) as caught:
        parse_config({"neuron-taint": "advisory"}, "t")
    assert "neuron-taint: lowered from mandatory to advisory without a justification" in str(caught.value)
    with pytest.raises(ConfigError):
        parse_config({"neuron-taint": {"enforcementLevel": "disabled", "justification": " "}}, "t")
    config = parse_config({"neuron-taint": {"enforcementLevel": "disabled", "justification": "no Neuron groups here"}}, "t")
    assert config.justifications == {"neuron-taint": "no Neuron groups here"}
    assert load_config(config_path("dev")).justifications.keys() == {"eks-endpoint-not-open"}


def _as_at_first_preview(value):
    """Every value AWS assigns (the plan's placeholders) unknown, as in a preview from zero."""
    if isinstance(value, dict):
        return {k: _as_at_first_preview(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_as_at_first_preview(v) for v in value]
    return UNKNOWN_STRING_VALUE if isinstance(value, str) and "placeholder" in value else value


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_every_rule_still_runs_at_the_first_preview(stack, request):
    # pulumi-policy v1.21.0 (proxy.py, policy.py AnalyzeStack): one unknown read ends a stack
    # policy for the whole stack. The rules read ids only through property dependencies or
    # presence, so the first preview (no ids yet) gets the same findings and no "could not check".
    import copy

    result = request.getfixturevalue(stack)
    registrations = copy.deepcopy(result.registrations)
    for r in registrations:
        r.inputs = _as_at_first_preview(r.inputs)
    config = load_config(config_path(stack))
    region = stack_config(REPO_ROOT, stack)["aws:region"]
    known, preview = run_policies(result.registrations, config, region), run_policies(registrations, config, region)
    assert [v.as_json() for v in preview.violations] == [v.as_json() for v in known.violations]
    assert preview.notes == []
