"""Refusals a newcomer can act on: each names the file, line and key, or the
offline table a look-up came from, and says what to do. Every message text is asserted."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from infra.config.errors import ConfigError
from infra.facts.neuron import compatible_ami_release
from offline.plan import command, stack_files
from offline.plan.runner import REPO_ROOT, run_program, stack_config
from tests.fixture_project import FIXTURE_ROOT
from tests.project_copy import dev_groups_at, kept_past_support, project_copy
from tests.wrapped_text import unwrapped


def _stack_file(tmp_path: Path, text: str, directory: str = "") -> Path:
    folder = tmp_path / directory if directory else tmp_path
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "Pulumi.dev.yaml"
    path.write_text(text)
    return path


def _refusal(path: Path, root: Path) -> str:
    with pytest.raises(ConfigError) as caught:
        stack_files.load(path, root)
    return str(caught.value)


# --- YAML syntax errors and duplicate keys -----------------------------------------------------
# PyYAML 6.0.3 reads a string here, so its own marks name "<unicode string>" (yaml/error.py
# Mark.__str__ prints self.name) and count lines and columns from 0 (Mark.line/column, printed +1);
# the messages below are its `problem` text (yaml/parser.py, yaml/scanner.py).


def test_a_yaml_syntax_error_names_the_file_line_and_key(tmp_path):
    good = (FIXTURE_ROOT / "Pulumi.dev.yaml").read_text()
    # A list item indented one space too few under acceleratorNodeGroups, the usual hand-edit slip.
    bad = good.replace("      instanceType: trn1n.32xlarge", "     instanceType: trn1n.32xlarge")
    path = _stack_file(tmp_path, bad)
    line = bad.splitlines().index("     instanceType: trn1n.32xlarge") + 1
    text = _refusal(path, tmp_path)
    assert text.startswith("Invalid stack file Pulumi.dev.yaml:")
    assert f"Pulumi.dev.yaml:{line}:6: YAML syntax error near key 'instanceType': " in text
    assert "<unicode string>" not in text and "Traceback" not in text
    assert "spaces only, never tabs" in text


def test_an_unclosed_bracket_and_a_tab_are_refused_with_their_line(tmp_path):
    text = _refusal(
        _stack_file(tmp_path, "config:\n  aws:region: us-west-2\n  trainium-eks:clusterAdmins: [a, b\n"), tmp_path
    )
    assert "Pulumi.dev.yaml:4:1: YAML syntax error near key 'trainium-eks:clusterAdmins': " in text
    assert "expected ',' or ']'" in text and "(started on line 3)" in text
    text = _refusal(_stack_file(tmp_path, "config:\n\taws:region: us-west-2\n"), tmp_path)
    assert (
        "Pulumi.dev.yaml:2:1: YAML syntax error near key 'aws:region': found character '\\t' that cannot start any token"
        in text
    )


def test_a_duplicate_key_is_refused_not_silently_overwritten(tmp_path):
    text = _refusal(
        _stack_file(
            tmp_path, "config:\n  trainium-eks:clusterName: a\n  aws:region: us-west-2\n  trainium-eks:clusterName: b\n"
        ),
        tmp_path,
    )
    assert (
        "Pulumi.dev.yaml:4: key 'trainium-eks:clusterName' is given twice in one mapping (first on line 2); "
        "YAML would silently keep the last one: delete the line you do not mean"
    ) in text
    # Nested too: two maxSize in one node group.
    nested = "config:\n  trainium-eks:acceleratorNodeGroups:\n    - name: g\n      maxSize: 2\n      maxSize: 4\n"
    assert "Pulumi.dev.yaml:5: key 'maxSize' is given twice in one mapping (first on line 4)" in _refusal(
        _stack_file(tmp_path, nested), tmp_path
    )


def test_make_plan_exits_2_naming_the_broken_stack_file(tmp_path, capsys):
    # Through the command: exit 2, the file named, nothing written, before any program runs.
    project = tmp_path / "p"
    project.mkdir()
    for name in ("Pulumi.yaml", "__main__.py"):
        (project / name).write_text((REPO_ROOT / name).read_text())
    good = (FIXTURE_ROOT / "Pulumi.dev.yaml").read_text()
    (project / "Pulumi.dev.yaml").write_text(good + "  trainium-eks:clusterName: again\n")
    out = tmp_path / "out"
    assert command.main(["--stack", "dev", "--project-dir", str(project), "--out", str(out)]) == 2
    err = unwrapped(capsys.readouterr().err)
    assert (
        f"{project / 'Pulumi.dev.yaml'}:{len(good.splitlines()) + 1}: key 'trainium-eks:clusterName' is given twice"
        in err
    )
    assert not out.exists()


def test_every_projects_stack_files_go_through_the_same_reader(tmp_path):
    # The workload and bootstrap stack files are read by offline/plan/runner.py stack_config too.
    for project in ("workloads", "bootstrap"):
        folder = tmp_path / project
        folder.mkdir()
        good = (FIXTURE_ROOT / project / "Pulumi.dev.yaml").read_text()
        (folder / "Pulumi.dev.yaml").write_text(good + "  bad: [\n")
        with pytest.raises(ConfigError) as caught:
            stack_config(folder, "dev")
        assert f"{folder / 'Pulumi.dev.yaml'}:{len(good.splitlines()) + 2}:1: YAML syntax error near key 'bad'" in str(
            caught.value
        )


# --- keys nothing would read ----------------------------------------------------------------
# The Pulumi CLI files an unprefixed key under the stack's own project (pulumi/pulumi
# sdk/go/common/workspace/loaders.go stackConfigNamespacedWithProject, v3.259.0) and hands a
# program every key of its stack file, another project's included.


@pytest.mark.parametrize(
    ("project", "line", "expected"),
    [
        ("workloads", "profile: ml", "profile has no project prefix; write it as `trainium-workloads:profile`"),
        (
            "workloads",
            "nxdLlama: {enabled: true}",
            "nxdLlama has no project prefix; `trainium-workloads:nxdLlama` is set too, on line 34: delete the one "
            "you do not mean",
        ),
        (
            "workloads",
            "namespace: research",
            "namespace has no project prefix; `trainium-workloads:namespace` is set too, on line 11: delete the one "
            "you do not mean",
        ),
        (
            "workloads",
            "clusterName: mlp-trn-dev",
            "clusterName has no project prefix; it is a setting of trainium-eks (its stack file: "
            "Pulumi.<stack>.yaml, as `trainium-eks:clusterName`) (here, the CLI would file it as "
            "`trainium-workloads:clusterName`, which nothing reads)",
        ),
        (
            "bootstrap",
            "clustrName: x",
            "clustrName has no project prefix; no project here has a setting named 'clustrName': check the "
            "spelling against docs/configuration.md",
        ),
    ],
)
def test_a_key_without_its_project_prefix_is_refused_naming_its_project(tmp_path, project, line, expected):
    (tmp_path / project).mkdir()
    (tmp_path / project / "Pulumi.yaml").write_text((REPO_ROOT / project / "Pulumi.yaml").read_text())
    good = (FIXTURE_ROOT / project / "Pulumi.dev.yaml").read_text()
    path = _stack_file(tmp_path, f"{good}  {line}\n", project)
    assert f"{project}/Pulumi.dev.yaml:{len(good.splitlines()) + 1}: {expected}" in _refusal(path, tmp_path)


def test_another_projects_key_and_an_unread_namespace_are_refused_with_the_rest():
    from infra.config.base import stray_keys
    from workloads.settings import parse_workloads_config

    workloads = stack_config(FIXTURE_ROOT / "workloads", "dev")
    pasted = {
        **workloads,
        "trainium-eks:clusterName": "mlp-trn-dev",
        "trainum-workloads:namespace": "research",
        "trainium-workloads:clusterCheck": json.dumps({"timeoutMinutes": 10}),
        "aws:skipMetadataApiCheck": "true",
    }
    with pytest.raises(ConfigError) as caught:
        parse_workloads_config(pasted)
    problems = caught.value.problems
    assert problems[:2] == [
        "trainium-eks:clusterName: a setting of the trainium-eks project, which this trainium-workloads stack "
        "never reads; move it to trainium-eks's stack file (Pulumi.<stack>.yaml)",
        "trainum-workloads:namespace: nothing in this stack reads the namespace 'trainum-workloads' (read here: "
        "aws:, eks:, kubernetes:, pulumi:, random:, trainium-workloads:)",
    ]
    # ...reported in the same run as the model's own refusals; provider keys stay the provider's.
    assert any(p.startswith("trainium-workloads:clusterCheck.timeoutMinutes = 10:") for p in problems[2:])
    assert not any("aws:skipMetadataApiCheck" in p for p in problems)
    assert stray_keys(stack_config(FIXTURE_ROOT, "dev"), "trainium-eks") == []
    assert stray_keys(stack_config(FIXTURE_ROOT / "bootstrap", "dev"), "trainium-bootstrap") == []


@pytest.mark.parametrize(
    ("reference", "expected"),
    [
        (None, "trainium-workloads:clusterStack: required but not set"),
        ("acme-ml/trainium-eks", "trainium-workloads:clusterStack = 'acme-ml/trainium-eks': not <organization>/"),
        ("acme-ml/trainium-workloads/dev", "names the project 'trainium-workloads', not the cluster project"),
        ("acme-ml/trainium-eks/dve", "the cluster project has no stack 'dve' (no stack file Pulumi.dve.yaml)"),
    ],
)
def test_a_bad_cluster_reference_is_refused_naming_the_key(reference, expected):
    # What the offline plan must resolve before it can plan the cluster stack a workload stack names.
    problem = command.cluster_reference_problem(reference, FIXTURE_ROOT)
    assert problem is not None and expected in problem
    assert problem.endswith("allowed: <organization>/trainium-eks/<stack>, with a stack of dev, prod")
    assert command.cluster_reference_problem("acme-ml/trainium-eks/prod", FIXTURE_ROOT) is None


def test_an_empty_workload_stack_file_names_the_missing_key(tmp_path, capsys):
    project = project_copy(tmp_path / "p")
    (project / "workloads").mkdir()
    for name in ("Pulumi.yaml", "__main__.py"):
        (project / "workloads" / name).write_text((REPO_ROOT / "workloads" / name).read_text())
    (project / "workloads" / "Pulumi.dev.yaml").write_text("config:\n")
    assert command.main(["--stack", "dev", "--project-dir", str(project), "--out", str(tmp_path / "out")]) == 2
    err = unwrapped(capsys.readouterr().err)
    assert "trainium-workloads:clusterStack: required but not set" in err and '""' not in err


# --- secrets in plain text ---------------------------------------------------------------------


def test_a_plain_text_token_is_refused_with_the_command_that_encrypts_it(tmp_path):
    # The command carries no value: `pulumi config set` prompts for a value not on its command line
    # (Pulumi CLI reference, pulumi config set: "If a value is not present on the command line, pulumi
    # will prompt for the value"), so the token never reaches the shell's history.
    path = _stack_file(
        tmp_path, "config:\n  aws:region: us-west-2\n  trainium-workloads:hfToken: hf_AbCdEf\n", "workloads"
    )
    text = _refusal(path, tmp_path)
    assert (
        "workloads/Pulumi.dev.yaml:3: trainium-workloads:hfToken holds a secret in plain text, which would be "
        "committed with the file; delete that line and store it encrypted with `cd workloads && pulumi config set "
        "--secret --stack dev 'trainium-workloads:hfToken'`, which prompts for the value (so it stays out of your "
        "shell history)"
    ) in text
    assert "hf_AbCdEf" not in text and "<value>" not in text  # never the secret, never a value to type


def test_any_token_or_password_key_must_be_encrypted_at_any_depth(tmp_path):
    text = _refusal(
        _stack_file(tmp_path, "config:\n  trainium-workloads:tensorboard:\n    loadBalancer:\n      password: pw\n"),
        tmp_path,
    )
    assert (
        "Pulumi.dev.yaml:4: trainium-workloads:tensorboard.loadBalancer.password holds a secret in plain text" in text
    )
    assert (
        "`pulumi config set --secret --path --stack dev 'trainium-workloads:tensorboard.loadBalancer.password'`" in text
    )
    # What `pulumi config set --secret` writes is accepted; so are keys that only look alike.
    ok = _stack_file(
        tmp_path,
        "config:\n  trainium-workloads:hfToken:\n    secure: v1:abc\n"
        "  trainium-workloads:tensorboard:\n    loadBalancer:\n      username: admin\n"
        "  trainium-bootstrap:secretsKeyAlias: alias/x\n",
    )
    assert set(stack_files.load(ok, tmp_path)) == {
        "trainium-workloads:hfToken",
        "trainium-workloads:tensorboard",
        "trainium-bootstrap:secretsKeyAlias",
    }


GITHUB_TOKEN = "ghp_" + "A1b2C3d4" * 5  # the shape of a classic personal access token, not a real one
AWS_KEY_ID = "AKIA" + "EXAMPLE0" * 2  # AWS's documentation key id shape


def test_a_credential_in_a_tag_is_refused_not_sent_to_secret_storage(tmp_path):
    # Tags reach AWS as plain text on every tagged resource, so encrypting one in the stack file
    # would not help: the refusal says to leave it out, with no `pulumi config set --secret`.
    text = _refusal(
        _stack_file(
            tmp_path, f"config:\n  trainium-eks:tags:\n    team: ml\n    githubToken: ghp_x\n    owner: {AWS_KEY_ID}\n"
        ),
        tmp_path,
    )
    assert (
        "Pulumi.dev.yaml:4: trainium-eks:tags.githubToken looks like a credential, and tag values reach AWS in "
        "plain text on every tagged resource (encrypting it in the stack file would not change that): delete it, "
        "and keep credentials out of tags"
    ) in text
    assert "Pulumi.dev.yaml:5: trainium-eks:tags.owner looks like a credential" in text  # by its value
    assert "config set" not in text and "team" not in text
    encrypted = _refusal(
        _stack_file(tmp_path, "config:\n  trainium-eks:tags:\n    apiToken:\n      secure: v1:x\n"), tmp_path
    )
    assert "Pulumi.dev.yaml:3: trainium-eks:tags.apiToken looks like a credential" in encrypted


@pytest.mark.parametrize(
    "value", [GITHUB_TOKEN, AWS_KEY_ID, "hf_" + "AbCdEfGhIj" * 3 + "AbCd", "github_pat_" + "11ABCDEFG0" * 4]
)
def test_a_value_that_looks_like_a_credential_is_refused_whatever_its_key(tmp_path, value):
    text = _refusal(_stack_file(tmp_path, f"config:\n  trainium-workloads:notes: {value}\n"), tmp_path)
    assert (
        "Pulumi.dev.yaml:2: trainium-workloads:notes holds a secret in plain text, which would be committed "
        "with the file; delete that line and store it encrypted with `pulumi config set --secret --stack dev "
        "'trainium-workloads:notes'`"
    ) in text
    assert value not in text


@pytest.mark.parametrize(
    "value",
    ["hf_offline", "ghp_short", "AKIA-not-a-key", "alias/trainium-dev", "arn:aws:iam::123456789012:role/AKIAROLE"],
)
def test_values_that_only_start_alike_are_not_credentials(tmp_path, value):
    path = _stack_file(tmp_path, f"config:\n  trainium-workloads:notes: '{value}'\n")
    assert stack_files.load(path, tmp_path) == {"trainium-workloads:notes": value}


# --- offline look-up misses: the offline table, never an AWS fact -----------------------------


def _refused(**overrides) -> str:
    config = stack_config(FIXTURE_ROOT, "dev")
    config.update({k: json.dumps(v) if isinstance(v, (dict, list)) else v for k, v in overrides.items()})
    with pytest.raises(ConfigError) as caught:
        run_program(FIXTURE_ROOT, "dev", config)
    return str(caught.value)


def test_a_core_type_missing_from_the_offline_table_says_so():
    text = _refused(**{"trainium-eks:coreNodeGroup": {"instanceTypes": ["m6a.large"]}})
    assert (
        "trainium-eks:coreNodeGroup.instanceTypes[0] = 'm6a.large': the offering look-up "
        "(ec2:DescribeInstanceTypeOfferings) finds no such instance type in this region [offline answer: "
        "GENERAL_PURPOSE_TYPES in offline/plan/fixtures.py has no entry for m6a.large; that table stands in for AWS "
        "here, and a real `pulumi preview` asks AWS. If AWS offers it, add it to GENERAL_PURPOSE_TYPES to plan "
        "this offline]"
    ) in text
    assert "this region offers" not in text


def test_a_kubernetes_version_without_offline_addon_builds_names_the_table():
    text = _refused(
        **{
            "trainium-eks:kubernetesVersion": "1.32",
            "trainium-eks:acceleratorNodeGroups": dev_groups_at("1.32"),
            "trainium-eks:endOfSupportAcknowledged": kept_past_support("1.32"),
        }
    )
    assert (
        "trainium-eks:kubernetesVersion = '1.32': the add-on look-up (eks:DescribeAddonVersions) finds no vpc-cni"
        in text
    )
    assert "[offline answer: ADDON_DEFAULT_BUILDS in offline/plan/fixtures.py has no entry for 1.32;" in text
    assert "EKS offers no" not in text


def test_a_region_or_zone_offering_missing_offline_names_the_table():
    # eu-west-1 offers Inferentia2 only (infra/facts/regions.py): the dev stack's Trainium groups are refused
    # by type before any zone is looked up, with no offline note (no look-up was made).
    text = _refused(**{"aws:region": "eu-west-1"})
    assert "instanceType = 'trn1.32xlarge': not offered in eu-west-1" in text
    assert "no zone of eu-west-1 offers" not in text and "[offline answer" not in text
    groups = json.loads(stack_config(FIXTURE_ROOT, "dev")["trainium-eks:acceleratorNodeGroups"])
    text = _refused(
        **{
            "trainium-eks:acceleratorNodeGroups": groups
            + [
                {
                    "name": "trn2",
                    "instanceType": "trn2.48xlarge",
                    "maxSize": 2,
                    "amiReleaseVersion": compatible_ami_release(),
                }
            ]
        }
    )
    assert "[offline answer: OFFERINGS['us-west-2'] in offline/plan/fixtures.py has no entry for trn2.48xlarge;" in text


def test_a_refusal_from_the_offline_tables_own_entries_names_the_table_too():
    # usw2-az1 is in the table and the table says it does not offer trn1.32xlarge: that is the
    # table's word, not AWS's, and the refusal says so.
    groups = json.loads(stack_config(FIXTURE_ROOT, "dev")["trainium-eks:acceleratorNodeGroups"])
    groups[0]["azId"] = "usw2-az1"
    text = _refused(**{"trainium-eks:acceleratorNodeGroups": groups})
    assert (
        "trainium-eks:acceleratorNodeGroups[0].azId = 'usw2-az1': does not offer trn1.32xlarge; zones that do: "
        "usw2-az4 [offline answer: what OFFERINGS['us-west-2'] in offline/plan/fixtures.py says about trn1.32xlarge; "
        "that table stands in for AWS here (your account's zones and offerings may differ), and a real `pulumi "
        "preview` asks AWS. If AWS answers otherwise, edit OFFERINGS['us-west-2'], built from NEURON_REGIONS in "
        "infra/facts/regions.py (each region with its source) to plan this offline]"
    ) in text
    groups[0]["azId"] = "usw2-az9"  # not a zone of the region: the zone list is the ZONES table's
    text = _refused(**{"trainium-eks:acceleratorNodeGroups": groups})
    assert (
        "'usw2-az9': not a zone of us-west-2; zones: usw2-az1, usw2-az2, usw2-az3, usw2-az4 [offline answer: "
        "what ZONES in offline/plan/fixtures.py says about usw2-az1, usw2-az2, usw2-az3, usw2-az4;" in text
    )


def test_a_refusal_that_rests_on_no_offline_table_gets_no_note():
    # The other side: a rule of the program's own (a maxSize below minSize) is no look-up's answer.
    groups = json.loads(stack_config(FIXTURE_ROOT, "dev")["trainium-eks:acceleratorNodeGroups"])
    groups[0]["minSize"], groups[0]["maxSize"] = 3, 1
    text = _refused(**{"trainium-eks:acceleratorNodeGroups": groups})
    assert "acceleratorNodeGroups[0]" in text and "offline answer" not in text


def test_a_workload_stack_on_a_cluster_without_its_file_system_is_refused_by_name(tmp_path, capsys):
    # Without fsxCsi the cluster exports null storage fields, which never reach a StackReference
    # (pulumi 3.272.0 pulumi/runtime/rpc.py drops None when it serializes and deserializes): the
    # workload stack reads them as absent and refuses by name, not with the contract's "Field required".
    def no_file_system(config):
        config["trainium-eks:features"] = {"fsxCsi": False}

    project = project_copy(tmp_path / "p", edit=no_file_system)
    project_copy(project / "workloads", FIXTURE_ROOT / "workloads")
    out = ["--stack", "dev", "--project-dir", str(project), "--out", str(tmp_path / "out")]
    assert command.main(out) == 2
    err = unwrapped(capsys.readouterr().err)
    assert "the cluster stack has no FSx claim there, which every workload stack mounts; turn on its storage" in err
    assert "trainium-eks:features.fsxCsi: true" in err and "Field required" not in err
