"""The policy pack as a whole: real plans pass, config files are valid, `make plan` exits 3 on a
mandatory violation, unknown values are never violations, and docs/guardrails.md lists every rule."""

from __future__ import annotations

import json
import re
import runpy
import subprocess
import sys

import pytest
import yaml
from pulumi_policy import EnforcementLevel, ResourceValidationPolicy, StackValidationPolicy
from pulumi_policy.proxy import UNKNOWN_STRING_VALUE

from infra.config.errors import ConfigError
from infra.facts.instances import trains
from infra.facts.regions import NEURON_REGIONS, checked_zone_offerings
from offline.plan import command, fixtures
from offline.plan.policy_run import MANDATORY_EXIT_CODE, load_config, parse_config, run_policies
from offline.plan.runner import REPO_ROOT, project_name, stack_config
from policy.guardrails import BY_NAME, PACK_NAME, POLICIES
from policy.guardrails.declare import ADVISORY, resource_rule, stack_rule
from tests.conftest import remembered_program
from tests.fixture_project import FIXTURE_ROOT, fixture_policy_config
from tests.policy_helpers import first_preview, reg, violations


def _report(result, stack):
    region = stack_config(FIXTURE_ROOT, stack)["aws:region"]
    workloads = FIXTURE_ROOT / command.WORKLOADS_DIR
    directory = workloads if result.project == project_name(workloads) else FIXTURE_ROOT
    return run_policies(
        result.registrations,
        load_config(fixture_policy_config(stack)),
        region,
        stack_config=stack_config(directory, stack),
    )


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
    strict = run_policies(dev.registrations, load_config(fixture_policy_config("prod")), "us-west-2")
    assert "eks-endpoint-not-open" in {v.policy for v in strict.mandatory}


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_config_files_are_valid_and_name_real_policies(stack):
    config = load_config(fixture_policy_config(stack))
    assert set(config.levels) == set(BY_NAME)
    assert config.levels["trainium-hourly-ceiling"] == EnforcementLevel.ADVISORY


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_offered_zones_come_from_the_facts_not_a_second_list(stack):
    # accelerator-single-zone reads infra/facts/regions.py, the table the offline plan answers EC2
    # from, so a valid region change needs no edit here; the config may only add zones to it.
    assert not load_config(fixture_policy_config(stack)).properties["accelerator-single-zone"]["offeredZoneIds"]
    offerings = checked_zone_offerings()
    for region, types in fixtures.OFFERINGS.items():
        for t, zones in types.items():
            if trains(t) and NEURON_REGIONS[region].zones_sourced:
                assert all(set(offerings[z][t]) == zones for z in zones), (region, t)


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_namespaces_come_from_the_stack_config_not_a_second_list(stack, request):
    # The workload stack's objects live in a namespace the cluster stack creates, which a preview of
    # the workload stack cannot see as a resource; its own config names it, and the engine hands a
    # pack the stack's config: no externalNamespaces list repeats trainingNamespaces.
    config = load_config(fixture_policy_config(stack))
    assert not config.properties["namespace-exists"]["externalNamespaces"]
    workload = stack_config(FIXTURE_ROOT / command.WORKLOADS_DIR, stack)["trainium-workloads:namespace"]
    assert workload in request.getfixturevalue(stack).outputs["trainingNamespaces"]
    report = run_policies(request.getfixturevalue(f"workloads_{stack}").registrations, config)
    [message, *_] = [v.message for v in report.violations if v.policy == "namespace-exists"] or [None]
    assert (message is not None) == (workload != "default"), message  # without the stack's config
    if message:
        assert f"namespace-exists.externalNamespaces in policy/config.{stack}.json" in message


def test_schema_defaults_pass_their_own_schema():
    config = parse_config({}, "defaults")
    assert config.properties["trainium-hourly-ceiling"]["maxHourlyUsd"] == 500.0
    assert config.levels == {p.name: p.enforcement_level for p in POLICIES}


@pytest.mark.parametrize(
    "raw, expected",
    [
        (
            {"neuron-taint": "warn"},
            'neuron-taint: "warn" is not an enforcement level (allowed: advisory, mandatory, remediate, disabled)',
        ),
        ({"neuron-taints": "advisory"}, "neuron-taints: no such policy"),
        (
            {"trainium-hourly-ceiling": {"maxHourlyUsd": "500"}},
            'trainium-hourly-ceiling.maxHourlyUsd: "500" is not of type number',
        ),
        (
            {"trainium-hourly-ceiling": {"maxHourlyUsd": -1}},
            "trainium-hourly-ceiling.maxHourlyUsd: -1 is below the minimum 0",
        ),
        # json.loads reads the non-JSON word Infinity: a ceiling nothing can exceed is no ceiling.
        (
            {"trainium-hourly-ceiling": {"maxHourlyUsd": float("inf")}},
            "trainium-hourly-ceiling.maxHourlyUsd: inf is not a finite number",
        ),
        (
            {"trainium-hourly-ceiling": {"maxHourlyUSD": 5}},
            "trainium-hourly-ceiling.maxHourlyUSD: not a setting of this policy (settings: maxHourlyUsd, region)",
        ),
        (
            {"namespace-exists": {"externalNamespaces": ""}},
            'namespace-exists.externalNamespaces: "" is not of type array',
        ),
        ({"all": ""}, 'all: "" is not an enforcement level'),
        ({"neuron-taint": 3}, "neuron-taint: 3 must be an enforcement level or an object"),
        ([], "must hold a JSON object"),
    ],
)
def test_bad_policy_config_is_refused_naming_key_value_and_what_is_allowed(raw, expected):
    with pytest.raises(ConfigError) as caught:
        parse_config(raw, "policy configuration test.json")
    assert expected in str(caught.value)


def test_all_sets_every_level_and_a_policy_entry_overrides_it():
    # pulumi/pulumi sdk/go/pkg/resource/analyzer/config.go applyConfig: "all" first, then each policy.
    config = parse_config(
        {
            "all": {"enforcementLevel": "advisory", "justification": "trial"},
            "neuron-taint": {"enforcementLevel": "mandatory"},
        },
        "t",
    )
    assert config.levels["neuron-taint"] == EnforcementLevel.MANDATORY
    assert config.levels["neuron-ami-type"] == EnforcementLevel.ADVISORY


def test_a_disabled_policy_does_not_run():
    open_rule = reg("aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule", "ssh", {"cidrIpv4": "0.0.0.0/0"})
    report = run_policies(
        [open_rule],
        parse_config(
            {"security-group-no-open-ingress": {"enforcementLevel": "disabled", "justification": "test"}}, "t"
        ),
    )
    assert not report.violations


def test_an_unknown_value_is_a_note_never_a_violation():
    # pulumi-policy v1.21.0 proxy.py: reading an unknown (preview) value raises UnknownValueError;
    # policy.py Analyze turns it into an advisory "can't run during preview" diagnostic.
    lt = reg("aws:ec2/launchTemplate:LaunchTemplate", "lt", {"metadataOptions": {"httpTokens": UNKNOWN_STRING_VALUE}})
    report = run_policies([lt], parse_config({}, "t"), policies=[BY_NAME["launch-template-hardening"]])
    assert not report.violations
    assert report.notes and "can't be known during preview" in report.notes[0]
    # A placement group whose name is still unknown counts as present (only the key is read).
    lt = reg(
        "aws:ec2/launchTemplate:LaunchTemplate",
        "lt",
        {
            "networkInterfaces": [{"networkCardIndex": i, "interfaceType": "efa"} for i in range(8)],
            "placement": {"groupName": UNKNOWN_STRING_VALUE},
        },
    )
    ng = reg(
        "aws:eks/nodeGroup:NodeGroup",
        "ng",
        {"instanceTypes": ["trn1.32xlarge"]},
        {"launchTemplate": [("aws:ec2/launchTemplate:LaunchTemplate", "lt")]},
    )
    assert not violations("placement-group-unless-reserved", lt, ng)


def test_make_plan_exits_3_on_a_mandatory_violation_after_writing_everything(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(command, "run_program", remembered_program)  # the worker's shared runs (tests/conftest.py)
    strict = tmp_path / "strict.json"
    strict.write_text(json.dumps({"all": "mandatory"}))
    out = tmp_path / "out"
    assert (
        command.main(
            ["--stack", "dev", "--project-dir", str(FIXTURE_ROOT), "--out", str(out), "--policy-config", str(strict)]
        )
        == MANDATORY_EXIT_CODE
        == 3
    )
    document = json.loads((out / "trainium-eks" / "dev" / "resources.json").read_text())
    [violation] = [v for v in document["policy"]["violations"] if v["enforcementLevel"] == "mandatory"]
    assert violation["policy"] == "eks-endpoint-not-open" and violation["enforcementLevel"] == "mandatory"
    assert set(violation) == {"policy", "urn", "type", "name", "enforcementLevel", "message"}
    # On pulumi-eks's AWS cluster, as in a real preview (offline/plan/policy_run.py eks_cluster_child).
    assert violation["type"] == "aws:eks/cluster:Cluster"
    assert violation["urn"].endswith("$eks:index:Cluster$aws:eks/cluster:Cluster::cluster-eks-eksCluster")
    assert (out / "trainium-workloads" / "dev" / "resources.json").exists()
    captured = capsys.readouterr()
    assert "[mandatory] eks-endpoint-not-open: cluster-eks-eksCluster" in captured.out
    assert "1 mandatory policy violation(s)" in captured.err


def test_a_bad_policy_config_file_exits_2_before_planning(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text('{"neuron-taint": "warn"}')
    assert (
        command.main(
            [
                "--stack",
                "dev",
                "--project-dir",
                str(FIXTURE_ROOT),
                "--out",
                str(tmp_path / "out"),
                "--policy-config",
                str(bad),
            ]
        )
        == 2
    )
    assert not (tmp_path / "out").exists()
    assert "is not an enforcement level" in capsys.readouterr().err


def test_the_entry_point_only_builds_the_pack(monkeypatch):
    built = []
    monkeypatch.setattr("pulumi_policy.PolicyPack", lambda **kwargs: built.append(kwargs))
    before = list(sys.path)
    runpy.run_path(str(REPO_ROOT / "policy" / "__main__.py"))
    [pack] = built
    assert pack["name"] == PACK_NAME and pack["policies"] == POLICIES
    assert sys.path == before  # the package comes from the virtualenv (pyproject.toml), not a path edit


# What the pulumi/pulumi Python language host runs for a local pack (HEAD after v3.259.0,
# sdk/python/cmd/pulumi-language-python/main.go RunPlugin): `<venv>/bin/python -u -m pulumi.policy
# <engine> <pack dir>` with the pack's directory as working directory; sdk/python/lib/pulumi/policy/
# __main__.py then does runpy.run_path(<pack dir>), which puts that directory first on sys.path.
_AS_THE_ENGINE_RUNS_IT = """
import runpy, sys
import pulumi_policy
pulumi_policy.PolicyPack = lambda **kwargs: print("pack", kwargs["name"], len(kwargs["policies"]))
runpy.run_path(sys.argv[1], run_name="__main__")
import offline
print("offline", offline.__file__)
"""


def test_the_pack_starts_from_its_directory_without_shadowing_the_project(tmp_path):
    # With policy/ first on sys.path a module policy/<name>.py hides the project's top-level
    # package <name> (a policy/offline.py would hide offline/).
    policy_dir = REPO_ROOT / "policy"
    run = subprocess.run(
        [sys.executable, "-c", _AS_THE_ENGINE_RUNS_IT, str(policy_dir)],
        cwd=policy_dir,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert f"pack {PACK_NAME} {len(POLICIES)}" in run.stdout
    assert f"offline {REPO_ROOT / 'offline' / '__init__.py'}" in run.stdout, run.stdout


def test_the_pack_runs_in_the_virtualenv_make_builds():
    # pulumi/pulumi (HEAD after v3.259.0): NewPolicyAnalyzer (pkg/resource/plugin/analyzer_plugin.go)
    # hands the language host the pack's absolute directory as root; parseOptions and
    # ResolveToolchain -> newPip (sdk/python/toolchain/toolchain.go, pip.go) join a relative
    # `virtualenv` to it; RunPlugin runs that virtualenv's python and never creates or installs it
    # for a local pack. So it must be the one `make` builds (requirements.txt pins pulumi-policy,
    # pyproject.toml installs policy/ and infra/ editable), and every workflow job that passes the
    # pack to Pulumi must build it first.
    options = yaml.safe_load((REPO_ROOT / "policy" / "PulumiPolicy.yaml").read_text())["runtime"]["options"]
    makefile = (REPO_ROOT / "Makefile").read_text()
    [venv] = re.findall(r"^VENV := (\S+)$", makefile, re.M)
    assert (REPO_ROOT / "policy" / options["virtualenv"]).resolve() == (REPO_ROOT / venv).resolve()
    assert re.search(r"^pulumi-policy==\S+$", (REPO_ROOT / "requirements.txt").read_text(), re.M)
    assert re.search(
        r"^\$\(VENV\)/\.installed:.*\n(?:\t.*\n)*\t.*pip install .*-r requirements\.txt -e \.$", makefile, re.M
    )
    assert not (REPO_ROOT / "policy" / "requirements.txt").exists(), "one place pins the dependencies"
    checked = 0
    for workflow in sorted((REPO_ROOT / ".github" / "workflows").glob("*.yml")):
        for job_id, job in yaml.safe_load(workflow.read_text())["jobs"].items():
            built = False
            for step in job.get("steps", []):
                built |= step.get("run", "").strip() == f"make {venv}/.installed"
                if "policyPacks" in (step.get("with") or {}):
                    assert built, f"{workflow.name} {job_id}: the policy pack runs before `make {venv}/.installed`"
                    checked += 1
    assert checked


def test_the_guardrails_page_lists_every_rule_with_its_description():
    section = (REPO_ROOT / "docs" / "guardrails.md").read_text()
    rows = re.findall(r"^\| `([a-z0-9-]+)` \| (.+?) \| (\w+) \| (\w+) \|$", section, re.M)
    dev, prod = load_config(fixture_policy_config("dev")), load_config(fixture_policy_config("prod"))
    assert rows == [(p.name, p.description, dev.levels[p.name].value, prod.levels[p.name].value) for p in POLICIES]


def test_lowering_a_level_needs_a_justification():
    with pytest.raises(ConfigError) as caught:
        parse_config({"neuron-taint": "advisory"}, "t")
    assert "neuron-taint: lowered from mandatory to advisory without a justification" in str(caught.value)
    with pytest.raises(ConfigError):
        parse_config({"neuron-taint": {"enforcementLevel": "disabled", "justification": " "}}, "t")
    config = parse_config(
        {"neuron-taint": {"enforcementLevel": "disabled", "justification": "no Neuron groups here"}}, "t"
    )
    assert config.justifications == {"neuron-taint": "no Neuron groups here"}
    assert load_config(fixture_policy_config("dev")).justifications.keys() == {"eks-endpoint-not-open"}


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_every_rule_still_runs_at_the_first_preview(stack, request):
    # pulumi-policy v1.21.0 (proxy.py, policy.py AnalyzeStack): one unknown read ends a stack
    # policy for the whole stack. At a first preview resource policies get inputs whose AWS-assigned
    # values are unknown, and stack policies get outputs (pulumi/pulumi step_generator.go
    # AnalyzeResources), where every output the provider computes is unknown too. The rules read
    # ids only through property dependencies or presence and guard computed outputs, so the first
    # preview gets the same findings and no "could not check".
    result = request.getfixturevalue(stack)
    config = load_config(fixture_policy_config(stack))
    region = stack_config(FIXTURE_ROOT, stack)["aws:region"]
    resource_rules = [p for p in POLICIES if isinstance(p, ResourceValidationPolicy)]
    stack_rules = [p for p in POLICIES if isinstance(p, StackValidationPolicy)]
    known = run_policies(result.registrations, config, region)
    inputs = run_policies(
        [first_preview(r, outputs=False) for r in result.registrations], config, region, resource_rules
    )
    outputs = run_policies([first_preview(r, outputs=True) for r in result.registrations], config, region, stack_rules)
    order = {p.name: i for i, p in enumerate(POLICIES)}
    preview = sorted(inputs.violations + outputs.violations, key=lambda v: order[v.policy])
    assert [v.as_json() for v in preview] == [
        v.as_json() for v in sorted(known.violations, key=lambda v: order[v.policy])
    ]
    assert inputs.notes + outputs.notes == []


def test_a_declared_rule_is_the_sdk_policy_and_its_check_sees_only_the_types_it_names():
    # policy/guardrails/declare.py: the type test the checks do not repeat is the decorator's,
    # by list or by test of the type, and what the engine reads (name, description, level,
    # schema) lands on the pulumi_policy object it expects.
    seen: list[str] = []

    def check(args, report):
        seen.append(args.resource_type)

    listed = resource_rule(
        "listed", "by list", applies_to=("aws:kms/key:Key",), config_schema={"x": {"type": "string"}}
    )(check)
    tested = resource_rule("tested", "by test", applies_to=lambda t: t.startswith("kubernetes:"), level=ADVISORY)(check)
    stack = (
        reg("aws:kms/key:Key", "key", {}),
        reg("aws:ecr/repository:Repository", "repo", {}),
        reg("kubernetes:core/v1:ConfigMap", "cm", {}),
    )
    run_policies(list(stack), parse_config({}, "t", [listed, tested]), policies=[listed])
    assert seen == ["aws:kms/key:Key"]
    seen.clear()
    run_policies(list(stack), parse_config({}, "t", [listed, tested]), policies=[tested])
    assert seen == ["kubernetes:core/v1:ConfigMap"]
    assert isinstance(listed, ResourceValidationPolicy) and listed.config_schema.properties == {"x": {"type": "string"}}
    assert (listed.enforcement_level, tested.enforcement_level) == (
        EnforcementLevel.MANDATORY,
        EnforcementLevel.ADVISORY,
    )
    assert tested.config_schema is None
    assert isinstance(stack_rule("whole", "stack")(check), StackValidationPolicy)
