"""`make plan`'s entry point: what it writes, and how it refuses bad configuration."""

from __future__ import annotations

import contextlib
import io
import json
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from infra.facts.neuron import compatible_ami_release
from offline.plan import command
from offline.plan.mocks import SECRET
from offline.plan.runner import REPO_ROOT, stack_config
from tests.conftest import remembered_program
from tests.fixture_project import FIXTURE_ROOT
from tests.project_copy import project_copy
from tests.wrapped_text import unwrapped


def bad_project(tmp_path: Path, config: dict) -> Path:
    return project_copy(tmp_path / "project", stack="bad", config=config)


@dataclass(frozen=True)
class Planned:
    out: Path
    stdout: str
    stderr: str


@pytest.fixture(scope="module")
def planned_dev(tmp_path_factory) -> Planned:
    """`make plan`'s dev plan, once for this file."""
    out = tmp_path_factory.mktemp("plan")
    stdout, stderr = io.StringIO(), io.StringIO()
    # The programs' runs are the worker's shared ones (tests/conftest.py): main's own work is the subject.
    with pytest.MonkeyPatch.context() as patch, contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        patch.setattr(command, "run_program", remembered_program)
        assert command.main(["--stack", "dev", "--project-dir", str(FIXTURE_ROOT), "--out", str(out)]) == 0
    return Planned(out, stdout.getvalue(), stderr.getvalue())


def test_plan_writes_resources_json(planned_dev):
    tmp_path = planned_dev.out
    document = json.loads((tmp_path / "trainium-eks" / "dev" / "resources.json").read_text())
    assert (document["project"], document["stack"]) == ("trainium-eks", "dev")
    assert {"urn", "type", "name", "parent", "provider", "dependencies", "protect", "inputs"} <= set(
        document["resources"][0]
    )
    # Lifecycle choices are visible to reviewers: the node groups leave desiredSize to the
    # autoscaler, a static volume is deleted before its replacement (same name).
    by_name = {r["name"]: r for r in document["resources"]}
    assert by_name["trn1-32xl-ng1"]["ignoreChanges"] == ["scalingConfig.desiredSize"]
    assert by_name["fsx-claim-default-default"]["deleteBeforeReplace"] is True
    assert "ignoreChanges" not in by_name["network-vpc"]
    assert document["outputs"]["kubeconfig"] == "[secret]"
    assert (tmp_path / "trainium-eks" / "dev" / "manifests").is_dir()
    types = {r["type"] for r in document["resources"]}
    assert {"eks:index:Cluster", "aws:eks/nodeGroup:NodeGroup", "aws:ec2/launchTemplate:LaunchTemplate"} <= types
    manifests = sorted(p.name for p in (tmp_path / "trainium-eks" / "dev" / "manifests").iterdir())
    assert manifests == [
        # The Trainium burn-in: its identity, admission policy and a DaemonSet per group, its sweeper and the
        # gang hold, each with its own (docs/node-health.md).
        "clusterrole-gang-hold.yaml",
        "clusterrole-neuron-burn-in-sweeper.yaml",
        "clusterrole-neuron-burn-in.yaml",
        "clusterrolebinding-gang-hold.yaml",
        "clusterrolebinding-neuron-burn-in-sweeper.yaml",
        "clusterrolebinding-neuron-burn-in.yaml",
        "cronjob-neuron-burn-in-gang-hold.yaml",
        "cronjob-neuron-burn-in-neuron-burn-in-sweeper.yaml",
        "daemonset-neuron-burn-in-burn-in-trn1-32xl-ng1.yaml",
        "daemonset-neuron-burn-in-burn-in-trn1n-32xl-ng.yaml",
        # The server-side-apply patch that puts the Pod Security labels on the built-in namespace.
        # (Dev's file system is EFS: its access points create the namespaces' directories, no root Job.)
        "namespace-default.yaml",
        # The operators' namespaces get their Pod Security labels the same way (Helm creates them).
        "namespace-kuberay-system.yaml",
        "namespace-neuron-burn-in.yaml",
        "namespace-neuron-healthcheck-system.yaml",
        "namespace-volcano-system.yaml",
        # Every pod of the namespace kept from the instance metadata service (infra/specs/node_security.py).
        "networkpolicy-default-deny-instance-metadata.yaml",
        "networkpolicy-neuron-burn-in-neuron-burn-in.yaml",
        "persistentvolume-fsx-claim-default-default-fs-c7fd80aa373b0b8be.yaml",
        "persistentvolume-fsx-claim-neuron-burn-in-neuron-burn-in-fs-c7fd80aa373b0b8be.yaml",
        "persistentvolumeclaim-default-fsx-claim-default.yaml",
        "persistentvolumeclaim-neuron-burn-in-fsx-claim-neuron-burn-in.yaml",
        # One replica at a time may be evicted from a controller that runs a standby (docs/security.md).
        "poddisruptionbudget-kuberay-system-kuberay-operator.yaml",
        "poddisruptionbudget-mpi-operator-mpi-operator.yaml",
        "poddisruptionbudget-volcano-system-volcano-admission.yaml",
        "poddisruptionbudget-volcano-system-volcano-controller.yaml",
        "poddisruptionbudget-volcano-system-volcano-scheduler.yaml",
        "queue-llama2-training-queue.yaml",
        "queue-test.yaml",
        "serviceaccount-default-training.yaml",
        "serviceaccount-neuron-burn-in-gang-hold.yaml",
        "serviceaccount-neuron-burn-in-neuron-burn-in-sweeper.yaml",
        "serviceaccount-neuron-burn-in-neuron-burn-in.yaml",
        "validatingadmissionpolicy-gang-hold.yaml",
        # Host access only for the node agents' DaemonSets (infra/specs/host_access.py).
        "validatingadmissionpolicy-host-access-only-for-node-agents.yaml",
        "validatingadmissionpolicy-neuron-burn-in-sweeper.yaml",
        "validatingadmissionpolicy-neuron-burn-in.yaml",
        # Training pods that mount a claim run as their namespace's id (infra/specs/namespace_identity.py).
        "validatingadmissionpolicy-training-pods-run-as-their-namespace.yaml",
        # Volcano's admission may only set its webhooks' CA bundle (infra/specs/webhook_guard.py).
        "validatingadmissionpolicy-volcano-admission-webhook-ca-only.yaml",
        "validatingadmissionpolicybinding-gang-hold.yaml",
        "validatingadmissionpolicybinding-host-access-only-for-node-agents.yaml",
        "validatingadmissionpolicybinding-neuron-burn-in-sweeper.yaml",
        "validatingadmissionpolicybinding-neuron-burn-in.yaml",
        "validatingadmissionpolicybinding-training-pods-run-as-their-namespace.yaml",
        "validatingadmissionpolicybinding-volcano-admission-webhook-ca-only.yaml",
    ]
    claim = yaml.safe_load(
        (
            tmp_path / "trainium-eks" / "dev" / "manifests" / "persistentvolumeclaim-default-fsx-claim-default.yaml"
        ).read_text()
    )
    assert (claim["apiVersion"], claim["kind"]) == ("v1", "PersistentVolumeClaim")
    printed = planned_dev.stdout
    assert "trn1-32xl-ng1-lt" in printed and "efaInterfaces=8" in printed
    assert "placeholder" in printed
    workloads = tmp_path / "trainium-workloads" / "dev" / "manifests"
    written = {p.name for p in workloads.iterdir()}
    assert {
        "job-default-bert-train.yaml",
        "rayjob-default-llama2-pretraining-job.yaml",
        "mpijob-default-cluster-check-allreduce.yaml",
    } <= written
    bert = yaml.safe_load((workloads / "job-default-bert-train.yaml").read_text())
    assert (bert["apiVersion"], bert["kind"]) == ("batch.volcano.sh/v1alpha1", "Job")
    assert "Offline plan of trainium-workloads / dev" in printed
    # Both stacks' documents carry the estimate in the shape other tools read.
    assert set(document["cost"]) >= {"currency", "hourly", "monthly", "lines", "unknown"}
    assert set(document["cost"]["hourly"]) == {"idle", "configured", "fullScale"}
    work = json.loads((tmp_path / "trainium-workloads" / "dev" / "resources.json").read_text())
    assert work["cost"]["hourly"]["idle"] == 0
    assert printed.count("Cost estimate (") == 2 and "TOTAL per month" in printed


def test_bad_configuration_exits_2_and_writes_nothing(tmp_path, capsys):
    project = bad_project(
        tmp_path,
        {
            "aws:region": "us-west-2",
            "trainium-eks:acceleratorNodeGroups": [{"name": "gpu", "instanceType": "p4d.24xlarge", "maxSize": 2}],
        },
    )
    out = tmp_path / "out"
    assert command.main(["--stack", "bad", "--project-dir", str(project), "--out", str(out)]) == 2
    assert not out.exists()
    err = unwrapped(capsys.readouterr().err)
    assert (
        "trainium-eks:acceleratorNodeGroups[0].instanceType = 'p4d.24xlarge': not a supported Neuron instance type"
        in err
    )


def test_a_refused_workload_stack_leaves_every_plan_as_it_was(tmp_path, capsys):
    # The cluster stack is fine, the workload stack file is not: nothing is written, so
    # build/plan never holds a new cluster plan next to a stale workload plan.
    project = bad_project(tmp_path, yaml.safe_load((FIXTURE_ROOT / "Pulumi.dev.yaml").read_text())["config"])

    def too_many_nodes(config: dict) -> None:
        config["trainium-workloads:clusterStack"] = "organization/trainium-eks/bad"
        config["trainium-workloads:nxdLlama"].update(enabled=True, nodes=400)

    project_copy(project / "workloads", FIXTURE_ROOT / "workloads", "bad", too_many_nodes, from_stack="dev")
    out = tmp_path / "out"
    assert command.main(["--stack", "bad", "--project-dir", str(project), "--out", str(out)]) == 2
    assert not out.exists()
    assert "trainium-workloads:nxdLlama.nodes" in unwrapped(capsys.readouterr().err)


def test_placement_errors_also_exit_2(tmp_path, capsys):
    project = bad_project(
        tmp_path,
        {
            "aws:region": "us-west-2",
            "trainium-eks:acceleratorNodeGroups": [
                {
                    "name": "trn1",
                    "instanceType": "trn1.32xlarge",
                    "maxSize": 2,
                    "azId": "usw2-az2",
                    "amiReleaseVersion": compatible_ami_release(),
                }
            ],
        },
    )
    assert command.main(["--stack", "bad", "--project-dir", str(project), "--out", str(tmp_path / "out")]) == 2
    assert "does not offer trn1.32xlarge; zones that do: usw2-az4" in unwrapped(capsys.readouterr().err)


def test_no_traceback_from_the_command_line(tmp_path):
    project = bad_project(tmp_path, {"aws:region": "us-west-2", "trainium-eks:network": {"vpcCidr": "10.0.0.0/33"}})
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "offline.plan",
            "--stack",
            "bad",
            "--project-dir",
            str(project),
            "--out",
            str(tmp_path / "o"),
        ],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 2
    assert "Traceback" not in run.stderr
    assert "trainium-eks:network.vpcCidr = '10.0.0.0/33'" in unwrapped(run.stderr)


def test_a_stack_file_with_an_encrypted_secret_plans_with_a_stand_in(tmp_path, dev):
    # `pulumi config set --secret hfToken ...` writes `{secure: v1:...}` into the stack file, which
    # only the stack's secrets provider opens: offline, the key gets a stand-in instead of being
    # read as a (malformed) token.
    workloads = project_copy(
        tmp_path / "workloads",
        FIXTURE_ROOT / "workloads",
        "dev",
        lambda config: config.update({"trainium-workloads:hfToken": {"secure": "v1:AAAAencryptedAAAA"}}),
    )
    assert "trainium-workloads:hfToken" not in stack_config(workloads, "dev")
    result = command.plan_workloads(workloads, "dev", dev)
    # Planned, and the Secret's data stays masked as a secret's.
    assert result.named("secret-hf-token").inputs["stringData"] == SECRET


def test_a_refused_plan_says_build_plan_is_still_the_last_successful_one(tmp_path, capsys):
    # Every stack is planned before anything is written, so a refusal leaves the previous plan's
    # files as they were (never half new); the refusal says so, lest they be read as this one's.
    project = bad_project(tmp_path, {"aws:region": "us-west-2", "trainium-eks:network": {"vpcCidr": "10.0.0.0/33"}})
    out = tmp_path / "out"
    assert command.main(["--stack", "bad", "--project-dir", str(project), "--out", str(out)]) == 2
    assert f"Nothing more was planned. Nothing was written to {out}." in unwrapped(capsys.readouterr().err)
    earlier = out / "trainium-eks" / "bad" / "resources.json"
    earlier.parent.mkdir(parents=True)
    earlier.write_text('{"from": "the last plan that succeeded"}')
    assert command.main(["--stack", "bad", "--project-dir", str(project), "--out", str(out)]) == 2
    assert (
        f"Nothing more was planned. {out} was left as it was: its bad files are from the last bad plan that "
        "succeeded, not from this configuration."
    ) in unwrapped(capsys.readouterr().err)
    assert earlier.read_text() == '{"from": "the last plan that succeeded"}'


def test_refusals_wrap_to_the_terminal_and_keep_commands_whole():
    from offline.report import render

    command = "`cd workloads && pulumi config set --secret --stack dev 'trainium-workloads:hfToken'`"
    text = (
        "Invalid stack file workloads/Pulumi.dev.yaml:\n  - workloads/Pulumi.dev.yaml:3: trainium-workloads:hfToken "
        f"holds a secret in plain text, which would be committed with the file; delete that line and store it "
        f"encrypted with {command}, which prompts for the value"
    )
    wrapped = render.message(text, width=100)
    lines = wrapped.splitlines()
    assert len(lines) > 2 and max(len(line) for line in lines) <= 100
    assert command in wrapped  # on one line, so it copies whole
    assert all(line.startswith("      ") for line in lines[2:])  # under the "- " of its problem
    assert " ".join(wrapped.split()) == " ".join(text.split())  # nothing lost


@pytest.mark.parametrize(("columns", "width"), [(None, 80), ("100", 100), ("132", 132), ("60", 80), ("junk", 80)])
def test_the_width_is_the_terminals_down_to_80(monkeypatch, columns, width):
    # shutil.get_terminal_size reads COLUMNS first, then the terminal stdout is (none under pytest's
    # capture), else the fallback; below 80 every table would fall apart, so 80 is the floor.
    from offline.report import render

    if columns is None:
        monkeypatch.delenv("COLUMNS", raising=False)
    else:
        monkeypatch.setenv("COLUMNS", columns)
    monkeypatch.setattr(sys, "__stdout__", None)  # no terminal, as in CI
    assert render.terminal_width() == width
    refusal = "Invalid stack configuration:\n  - " + "word " * 60
    assert max(len(line) for line in render.message(refusal).splitlines()) <= width


def test_the_command_prints_and_writes_what_main_does(tmp_path_factory, planned_dev):
    """`python -m offline.plan` runs with the collector off and ends with ``os._exit`` once the plan
    is out (offline/plan/command.py exit_without_teardown): every line printed and every file written still
    gets out, byte for byte what ``main`` prints and writes in this process."""
    tmp_path = tmp_path_factory.mktemp("plan")  # a path as long as planned_dev's: lines wrap alike
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "offline.plan",
            "--stack",
            "dev",
            "--project-dir",
            str(FIXTURE_ROOT),
            "--out",
            str(tmp_path),
        ],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.replace(str(tmp_path), "OUT") == planned_dev.stdout.replace(str(planned_dev.out), "OUT")
    # stderr holds only the warnings for the pins the dev stack files keep past their end of support
    # (infra/facts/pins.py), each wrapped to an 80-column terminal; the in-process plan's programs may
    # have run (and warned) earlier in this worker, so its stderr is not compared.
    warnings = re.split(r"\n(?! )", run.stderr.strip())
    assert warnings and all("endOfSupportAcknowledged" in " ".join(w.split()) for w in warnings), run.stderr
    assert max(len(line) for line in run.stderr.splitlines()) <= 80
    written = {p.relative_to(planned_dev.out): p.read_bytes() for p in planned_dev.out.rglob("*") if p.is_file()}
    assert len(written) > 30
    assert {p.relative_to(tmp_path): p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == written
