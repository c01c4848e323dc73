"""The GitHub workflows' structure: what runs in which order, as whom, with which rights.

Lint (GitHub's workflow schema, zizmor) runs in `make lint`; this checks what they cannot:
that each job's OIDC subject is one the bootstrap's trust policy admits for the role it
assumes, that deploys are ordered and never cancelled, and that pins and commands agree.
"""

from __future__ import annotations

import copy
import functools
import itertools
import json
import re
import shutil
from collections.abc import Iterator
from importlib.metadata import version
from typing import Any

import pytest
import yaml

from bootstrap import trust
from bootstrap.settings import parse_bootstrap_config, subject_prefix
from bootstrap.variables import repository_variables
from offline.plan.runner import REPO_ROOT, stack_config
from tests.conftest import remembered_program
from tests.fixture_project import FIXTURE_ROOT, build
from tests.project_copy import project_copy

WORKFLOWS = REPO_ROOT / ".github" / "workflows"
CONFIGURE_AWS = "aws-actions/configure-aws-credentials"
PULUMI_ACTION = "pulumi/actions"
SHA_PIN = re.compile(r"^\s*(?:-\s*)?uses:\s*([\w.-]+/[\w.-]+)@([0-9a-f]{40}) # (v\d+\.\d+\.\d+)\s*$")
ROLE_VAR = re.compile(r"^\$\{\{ vars\.AWS_(PREVIEW|DEPLOY)_ROLE_([A-Z]+) \}\}$")


@functools.cache
def _parsed(name: str, text: str) -> dict[str, Any]:
    document = yaml.safe_load(text)
    document["on"] = document.pop(True, document.get("on"))  # YAML 1.1 reads the key `on` as true
    return document


def load(name: str) -> dict[str, Any]:
    """The workflow file, parsed (each text once per process; callers get their own copy)."""
    return copy.deepcopy(_parsed(name, (WORKFLOWS / name).read_text()))


MATRIX_EXPRESSION = re.compile(r"^\$\{\{ matrix\.([\w-]+) \}\}$")


def _filled(value: Any, values: dict[str, Any]) -> Any:
    """``${{ matrix.x }}`` filled in as GitHub does: a value that is only the expression takes the
    matrix value's own type; inside a longer string, its text (booleans as `true`/`false`)."""
    if isinstance(value, str):
        whole = MATRIX_EXPRESSION.match(value)
        if whole and whole.group(1) in values:
            return values[whole.group(1)]
        for key, filling in values.items():
            value = value.replace(
                f"${{{{ matrix.{key} }}}}", json.dumps(filling) if isinstance(filling, bool) else str(filling)
            )
        return value
    if isinstance(value, dict):
        return {_filled(k, values): _filled(v, values) for k, v in value.items()}
    if isinstance(value, list):
        return [_filled(v, values) for v in value]
    return value


def expand(job: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """A matrix job as the concrete jobs it runs, `${{ matrix.x }}` filled in (a string stays a string)."""
    includes = (job.get("strategy") or {}).get("matrix", {}).get("include") or [{}]
    job = {k: v for k, v in job.items() if k != "strategy"}
    for values in includes:
        yield _filled(job, values)


def steps_using(job: dict[str, Any], action: str) -> list[dict[str, Any]]:
    return [s for s in job["steps"] if s.get("uses", "").split("@")[0] == action]


def test_matrix_values_are_filled_in_as_github_fills_them() -> None:
    # Expressions have boolean, null, number and string values, booleans spelled `true`/`false`
    # (GitHub docs, "Evaluate expressions in workflows and actions", Literals): a value that is one
    # expression keeps the matrix value (`timeout-minutes` takes a number); inside a string, its text.
    job = {
        "runs-on": "${{ matrix.runner }}",
        "timeout-minutes": "${{ matrix.minutes }}",
        "name": "drift ${{ matrix.stack }} ${{ matrix.on }}",
        "strategy": {"matrix": {"include": [{"runner": "ubuntu-latest", "minutes": 30, "stack": "dev", "on": True}]}},
    }
    (concrete,) = expand(job)
    assert concrete == {"runs-on": "ubuntu-latest", "timeout-minutes": 30, "name": "drift dev true"}


def concrete_jobs(name: str) -> Iterator[tuple[str, dict[str, Any]]]:
    for job_id, job in load(name)["jobs"].items():
        for concrete in expand(job):
            yield job_id, concrete


ALL = [(w.name, job_id, job) for w in sorted(WORKFLOWS.glob("*.yml")) for job_id, job in concrete_jobs(w.name)]


def bootstrap_config(environment: str) -> Any:
    """The bootstrap stack that holds ``environment``'s deploy role (bootstrap/Pulumi.<stack>.yaml)."""
    for path in sorted((REPO_ROOT / "bootstrap").glob("Pulumi.*.yaml")):
        config = parse_bootstrap_config(stack_config(FIXTURE_ROOT / "bootstrap", path.name.split(".")[1]))
        if any(e.name == environment for e in config.environments):
            return config
    raise AssertionError(f"no bootstrap stack deploys {environment}")


def oidc_subject(workflow: dict[str, Any], job: dict[str, Any], prefix: str) -> str:
    # GitHub docs, "OpenID Connect reference", example subject claims: a job naming an
    # environment presents environment:NAME; otherwise pull_request, or the run's ref: the pushed
    # or scheduled branch, and for workflow_run the default branch ("Events that trigger
    # workflows", workflow_run: GITHUB_REF is the default branch), main.
    if job.get("environment"):
        return trust.environment_subject(prefix, job["environment"])
    if "pull_request" in workflow["on"]:
        return trust.pull_request_subject(prefix)
    return trust.branch_subject(prefix, "main")


def test_every_action_is_pinned_to_a_commit_with_its_version_beside_it() -> None:
    seen: dict[tuple[str, str], str] = {}
    for path in sorted(WORKFLOWS.glob("*.yml")):
        for line in path.read_text().splitlines():
            if "uses:" not in line:
                continue
            match = SHA_PIN.match(line)
            assert match, f"{path.name}: not pinned to a full commit SHA with '# vX.Y.Z': {line.strip()}"
            action, sha, tag = match.groups()
            assert seen.setdefault((action, tag), sha) == sha, f"{action} {tag} pinned to two commits"


def test_workflows_grant_nothing_by_default_and_each_job_only_what_it_uses() -> None:
    assert {w.name for w in WORKFLOWS.glob("*.yml")} == {"pull-request.yml", *DEPLOY_WORKFLOWS, "drift.yml"}
    for name in ("pull-request.yml", *DEPLOY_WORKFLOWS, "drift.yml"):
        assert load(name)["permissions"] == {}, name
    for workflow, job_id, job in ALL:
        perms = job["permissions"]
        assert perms.get("contents") == "read", (workflow, job_id)
        assert ("id-token" in perms) == bool(steps_using(job, CONFIGURE_AWS)), (workflow, job_id)
        writes = {k for k, v in perms.items() if v == "write"} - {"id-token"}
        uses_github_api = steps_using(job, "actions/github-script") or any(
            s.get("with", {}).get("comment-on-pr") for s in steps_using(job, PULUMI_ACTION)
        )
        assert bool(writes) == bool(uses_github_api), (workflow, job_id, writes)


def test_each_job_presents_an_oidc_subject_the_role_it_assumes_trusts() -> None:
    for workflow, job_id, job in ALL:
        for step in steps_using(job, CONFIGURE_AWS):
            kind, env = ROLE_VAR.match(step["with"]["role-to-assume"]).groups()
            config = bootstrap_config(env.lower())
            subject = oidc_subject(load(workflow), job, subject_prefix(config))
            (entry,) = [e for e in config.environments if e.name == env.lower()]
            if kind == "PREVIEW":
                allowed = trust.preview_subjects(
                    subject_prefix(config), config.main_branch, entry.pull_request_previews
                )
                longest = 3600
            else:
                allowed = trust.deploy_subjects(
                    subject_prefix(config), config.main_branch, entry.name, entry.github_environment
                )
                longest = config.deploy_session_hours * 3600
            assert subject in allowed, (workflow, job_id, subject, allowed)
            # STS refuses a session longer than the role's MaxSessionDuration.
            assert int(step["with"]["role-duration-seconds"]) <= longest, (workflow, job_id)


DEPLOY_WORKFLOWS = ("deploy.yml", "deploy-prod.yml")


def deploy_jobs() -> dict[str, dict[str, Any]]:
    """Dev's and prod's deploy jobs by id (each id names one job across the two workflows)."""
    jobs: dict[str, dict[str, Any]] = {}
    for name in DEPLOY_WORKFLOWS:
        for job_id, job in load(name)["jobs"].items():
            assert job_id not in jobs, job_id
            jobs[job_id] = job
    return jobs


def _groups(workflow: dict[str, Any]) -> set[str]:
    jobs = [j["concurrency"]["group"] for j in workflow["jobs"].values() if j.get("concurrency")]
    return {workflow["concurrency"]["group"], *jobs}


def test_deploy_order_environments_and_concurrency() -> None:
    dev, prod = load("deploy.yml"), load("deploy-prod.yml")
    assert dev["on"] == {"push": {"branches": ["main"]}}
    # GitHub docs, "Events that trigger workflows", workflow_run: `workflows` names a workflow by its
    # `name`; `branches` filters on the finished run's branch. Both a pull request's own workflow
    # file can copy, so prod does anything only for a successful run of a push to this repository
    # (the payload's event and head_repository: octokit/webhooks common/workflow-run.schema.json).
    assert prod["on"] == {"workflow_run": {"workflows": [dev["name"]], "types": ["completed"], "branches": ["main"]}}
    assert prod["jobs"]["preview-cluster-prod"]["if"].split(" && ") == [
        "github.event.workflow_run.conclusion == 'success'",
        "github.event.workflow_run.event == 'push'",
        "github.event.workflow_run.head_repository.full_name == github.repository",
    ]
    # GitHub docs, "Control the concurrency of workflows and jobs" (docs.github.com/en/actions/how-tos/
    # write-workflows/choose-when-workflows-run/control-workflow-concurrency) and the changelog of
    # 2026-05-07 ("concurrency groups now allow larger queues"): by default a newer pending run
    # cancels the older pending one; `queue: max` keeps up to 100 waiting, first in, first out, and
    # is refused together with cancel-in-progress: true. Runs of either workflow queue, never cancel.
    for workflow, group in ((dev, "deploy-dev"), (prod, "deploy-prod")):
        assert workflow["concurrency"] == {"group": group, "cancel-in-progress": False, "queue": "max"}
    # Concurrency groups are per repository: a dev run or job waits only for a holder of one of its
    # own groups, and no prod run or job ever holds one (a prod run waiting for its approval holds
    # deploy-prod and, at most, the prod stacks' groups).
    assert not _groups(dev) & _groups(prod), (_groups(dev), _groups(prod))
    assert all("dev" in g for g in _groups(dev)) and all("prod" in g for g in _groups(prod))
    dev_chain = ["test", "cluster-dev", "workloads-dev"]
    prod_chain = ["preview-cluster-prod", "cluster-prod", "preview-workloads-prod", "workloads-prod"]
    assert list(dev["jobs"]) == dev_chain and list(prod["jobs"]) == prod_chain
    for chain, jobs in ((dev_chain, dev["jobs"]), (prod_chain, prod["jobs"])):
        for before, after in itertools.pairwise(chain):
            assert jobs[after]["needs"] == before
    jobs = deploy_jobs()
    assert "needs" not in jobs["preview-cluster-prod"]
    assert {j: jobs[j].get("environment") for j in dev_chain + prod_chain} == {
        "test": None,
        "cluster-dev": None,
        "workloads-dev": None,
        "preview-cluster-prod": None,
        "cluster-prod": "prod",
        "preview-workloads-prod": None,
        "workloads-prod": "prod",
    }
    # A workflow_run run's GITHUB_SHA is the default branch's newest commit (GitHub docs, "Events that
    # trigger workflows", workflow_run), which a later merge may have moved: every prod job checks
    # out the commit dev's run deployed (actions/checkout v7.0.1 action.yml `ref`).
    for job_id in prod_chain:
        (checkout,) = steps_using(jobs[job_id], "actions/checkout")
        assert checkout["with"]["ref"] == "${{ github.event.workflow_run.head_sha }}", job_id
    # Each approval follows a preview of what it approves, made after every update that preview
    # reads: the cluster alone first, so a merge whose workloads need its own cluster change is
    # never previewed against the cluster before it, and no workload preview stands between the
    # cluster's approval and its update; prod's workloads once prod's cluster is updated. Both
    # with prod's read-only preview role (no environment, so no approval and no deploy role).
    for preview, stack_dir in (("preview-cluster-prod", "./"), ("preview-workloads-prod", "workloads")):
        commands = [s["with"] for s in steps_using(jobs[preview], PULUMI_ACTION) if s["with"].get("command")]
        assert [(w["command"], w["work-dir"], w["stack-name"]) for w in commands] == [("preview", stack_dir, "prod")]
        (assume,) = steps_using(jobs[preview], CONFIGURE_AWS)
        assert assume["with"]["role-to-assume"] == "${{ vars.AWS_PREVIEW_ROLE_PROD }}"
    # A run a newer merge's run superseded asks nobody to approve: each prod preview
    # runs tools/deploy_order.py and the job behind it runs only on deploy == 'true' (GitHub docs,
    # "Control jobs with conditions": a job whose `if` is false "will be marked as skipped";
    # "Reviewing deployments" (github/docs content/actions/managing-workflow-runs/
    # reviewing-deployments.md): "Jobs that reference an environment configured with required
    # reviewers will wait for an approval before starting", so a job that never starts asks
    # nobody; "Contexts reference", needs.<job_id>.outputs).
    for preview, approved, dirs in (
        ("preview-cluster-prod", "cluster-prod", ["./"]),
        ("preview-workloads-prod", "workloads-prod", ["workloads", "./"]),
    ):
        assert jobs[preview]["outputs"] == {"deploy": "${{ steps.order.outputs.deploy }}"}
        (order,) = [s for s in jobs[preview]["steps"] if s.get("id") == "order"]
        run = order["run"].split()
        assert run[run.index("--stack") + 1 :] == ["prod", *dirs]
        assert jobs[approved]["if"] == f"needs.{preview}.outputs.deploy == 'true'"
        previews = [s for s in steps_using(jobs[preview], PULUMI_ACTION) if s["with"].get("command")]
        assert previews and all(s["if"] == "steps.order.outputs.deploy == 'true'" for s in previews)
    groups = []
    for job_id in dev_chain + prod_chain:
        for step in steps_using(jobs[job_id], PULUMI_ACTION):
            if step["with"].get("command") == "up":
                concurrency = jobs[job_id]["concurrency"]
                assert concurrency["cancel-in-progress"] is False and concurrency["queue"] == "max"
                project = "trainium-workloads" if step["with"]["work-dir"] == "workloads" else "trainium-eks"
                assert concurrency["group"] == f"pulumi-{project}-{step['with']['stack-name']}"
                groups.append(concurrency["group"])
    assert len(groups) == len(set(groups)) == 4
    # The workload stack's update never runs in the same job as, or before, its cluster's.
    for job_id in dev_chain + prod_chain:
        dirs = [s["with"]["work-dir"] for s in steps_using(jobs[job_id], PULUMI_ACTION) if s["with"].get("command")]
        assert dirs in ([], ["./"], ["workloads"]), job_id


def test_the_one_zizmor_finding_suppressed_is_prods_workflow_run_trigger() -> None:
    # make lint's zizmor runs clean; the only finding it is told to ignore is dangerous-triggers on
    # deploy-prod.yml's trigger, whose risk that workflow's first condition closes (above; tests/
    # test_day_one.py walks a pull request's look-alike run through it).
    suppressed = [
        (path.name, line.split("#", 1)[0].strip())
        for path in sorted(WORKFLOWS.glob("*.yml"))
        for line in path.read_text().splitlines()
        if "zizmor: ignore" in line
    ]
    assert suppressed == [("deploy-prod.yml", "workflow_run:")]
    text = (WORKFLOWS / "deploy-prod.yml").read_text()
    assert "workflow_run: # zizmor: ignore[dangerous-triggers]" in text
    assert not (REPO_ROOT / ".github" / "zizmor.yml").exists()


def test_pulumi_steps_read_the_one_cli_pin_and_apply_the_policy_pack() -> None:
    cli = (REPO_ROOT / ".pulumi-version").read_text().strip()
    assert cli.split(".")[:2] == version("pulumi").split(".")[:2], "CLI and Python SDK from the same release line"
    for workflow, job_id, job in ALL:
        for step in steps_using(job, PULUMI_ACTION):
            options = step["with"]
            assert options["pulumi-version-file"] == ".pulumi-version"
            if options.get("command") in ("preview", "up"):
                assert options["diff"] is True and options["refresh"] is True, (workflow, job_id)
                # pulumi/actions (v7.0.0 src/main.ts) runs the CLI in work-dir: paths are relative to it.
                work_dir = REPO_ROOT / options["work-dir"]
                assert (work_dir / options["policyPacks"]).resolve() == REPO_ROOT / "policy"
                assert (
                    work_dir / options["policyPackConfigs"]
                ).resolve() == REPO_ROOT / "policy" / f"config.{options['stack-name']}.json"
                env = options["stack-name"].upper()
                assert options["cloud-url"] == f"${{{{ vars.PULUMI_BACKEND_URL_{env} }}}}"


def test_pull_requests_preview_dev_only_cluster_first_and_forks_stop_offline() -> None:
    jobs = load("pull-request.yml")["jobs"]
    assert jobs["plan-diff"]["needs"] == "test" and "if" not in jobs["plan-diff"]
    assert jobs["preview-dev"]["if"] == "github.event.pull_request.head.repo.full_name == github.repository"
    stacks = set()
    for job_id, job in concrete_jobs("pull-request.yml"):
        steps = steps_using(job, PULUMI_ACTION)
        assert all(s["with"]["command"] == "preview" for s in steps), job_id
        stacks |= {(s["with"]["work-dir"], s["with"]["stack-name"]) for s in steps}
        # No pull-request job names prod anywhere: not its role, its backend or its runner.
        assert "PROD" not in yaml.safe_dump(job), job_id
    assert stacks == {("./", "dev"), ("workloads", "dev")}
    steps = steps_using(jobs["preview-dev"], PULUMI_ACTION)
    assert [s["with"]["work-dir"] for s in steps] == ["./", "workloads"]
    diff_step = next(s for s in jobs["plan-diff"]["steps"] if "make plan BASE=" in s.get("run", ""))
    assert diff_step["env"]["BASE_SHA"] == "${{ github.event.pull_request.base.sha }}"
    # The live workload preview may fail without failing the check only when the change alters the
    # cluster outputs the workload stack reads, as the offline plan diff (which plans the workload
    # stack against this change's cluster, and fails on what it refuses) just found.
    steps = jobs["plan-diff"]["steps"]
    (gate,) = [i for i, s in enumerate(steps) if "tools.cluster_change" in s.get("run", "")]
    assert steps.index(diff_step) < gate and steps[gate]["id"] == "cluster"
    assert steps[gate]["run"] == ".venv/bin/python -m tools.cluster_change --stack dev build/plan-diff"
    assert jobs["plan-diff"]["outputs"] == {"cluster-outputs-changed": "${{ steps.cluster.outputs.changed }}"}
    assert jobs["preview-dev"]["needs"] == ["test", "plan-diff"]
    tolerant = {
        s["with"]["work-dir"]: s.get("continue-on-error") for s in steps_using(jobs["preview-dev"], PULUMI_ACTION)
    }
    assert tolerant == {"./": None, "workloads": "${{ needs.plan-diff.outputs.cluster-outputs-changed == 'true' }}"}


def _cluster_plans(root, base: dict[str, Any] | None, head: dict[str, Any] | None):
    for revision, outputs in (("base", base), ("head", head)):
        if outputs is not None:
            path = root / revision / "trainium-eks" / "dev" / "resources.json"
            path.parent.mkdir(parents=True)
            path.write_text(json.dumps({"resources": [], "outputs": outputs}))
    return root


def test_cluster_change_names_the_workload_inputs_a_change_alters(tmp_path, monkeypatch, capsys, dev) -> None:
    # Run for real on plans laid out as offline/diff/compare.py leaves them (<out>/base|head/<project>/
    # <stack>/resources.json, offline.plan.runner PlanResult.as_json), from the shipped dev plan.
    from infra.contract import WORKLOAD_INPUTS
    from tools import cluster_change

    outputs = dev.as_json()["outputs"]
    assert set(WORKLOAD_INPUTS) <= set(outputs)
    grown = json.loads(json.dumps(outputs))
    grown["acceleratorNodeGroups"][0]["maxSize"] += 2
    unread = {**outputs, "notReadByWorkloads": "x"}
    for name, head, changed in (("same", outputs, "false"), ("grown", grown, "true"), ("unread", unread, "false")):
        out, summary = tmp_path / f"{name}.out", tmp_path / f"{name}.md"
        monkeypatch.setenv("GITHUB_OUTPUT", str(out))
        monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
        plans = _cluster_plans(tmp_path / name, outputs, head)
        assert cluster_change.main(["--stack", "dev", str(plans)]) == 0
        assert out.read_text() == f"changed={changed}\n", name
        written = summary.read_text() if summary.exists() else ""
        assert ("Changed cluster outputs: `acceleratorNodeGroups`." in written) == (changed == "true"), name
    # No plan of the base (the diff did not run): an error, not a guess.
    monkeypatch.setenv("GITHUB_OUTPUT", str(tmp_path / "missing.out"))
    assert cluster_change.main(["--stack", "dev", str(_cluster_plans(tmp_path / "missing", None, outputs))]) == 1
    assert "no offline plan of trainium-eks/dev" in capsys.readouterr().err
    assert not (tmp_path / "missing.out").exists()


def test_drift_checks_every_stack_in_its_deploys_group_and_never_cancels_a_deploy() -> None:
    # Concurrency groups are per repository, across workflows (GitHub docs, as above): a drift job
    # in the deploy's group of its stack waits for a running update and keeps an update waiting;
    # with `queue: max` neither cancels the other while pending.
    workflow = load("drift.yml")
    assert "schedule" in workflow["on"]
    deploy_groups = {}
    for _, job in itertools.chain(*(concrete_jobs(name) for name in DEPLOY_WORKFLOWS)):
        for step in steps_using(job, PULUMI_ACTION):
            if step["with"].get("command") == "up":
                deploy_groups[(step["with"]["work-dir"], step["with"]["stack-name"])] = job["concurrency"]["group"]
    checked = set()
    for job in expand(workflow["jobs"]["drift"]):
        assert job["concurrency"]["cancel-in-progress"] is False and job["concurrency"]["queue"] == "max"
        run = next(s for s in job["steps"] if s.get("id") == "check")
        assert "--refresh --expect-no-changes" in run["run"]
        stack = (run["env"]["WORK_DIR"], run["env"]["STACK"])
        assert job["concurrency"]["group"] == deploy_groups[stack], stack
        checked.add(stack)
    assert checked == set(deploy_groups) == {("./", "dev"), ("workloads", "dev"), ("./", "prod"), ("workloads", "prod")}


def test_every_job_ends_before_its_credentials_do() -> None:
    # configure-aws-credentials v6.2.3 (src/index.ts DEFAULT_ROLE_DURATION 3600, src/assumeRole.ts
    # DurationSeconds) asks STS for role-duration-seconds once, after checkout and set-up; an
    # update still running when the session ends fails half-way with the lock held. GitHub ends a
    # job at timeout-minutes (360 when unset, on hosted runners), so each job sets one within it.
    for workflow, job_id, job in ALL:
        assert isinstance(job.get("timeout-minutes"), int), (workflow, job_id)
        for step in steps_using(job, CONFIGURE_AWS):
            assert job["timeout-minutes"] * 60 <= int(step["with"]["role-duration-seconds"]), (workflow, job_id)


def test_prod_jobs_run_where_prods_api_endpoint_admits_them() -> None:
    # infra/config/rules.py: prod refuses a public endpoint open to 0.0.0.0/0 and needs the
    # deployers' egress ranges in endpointAccess.publicCidrs. GitHub-hosted standard runners
    # have no fixed egress, so prod jobs run on the runner named by vars.PROD_RUNNER (a larger
    # runner with static IP ranges, listed in Pulumi.prod.yaml).
    for workflow, job_id, job in ALL:
        uses_prod = "_PROD }}" in yaml.safe_dump(job)
        assert (job["runs-on"] == "${{ vars.PROD_RUNNER }}") == uses_prod, (workflow, job_id)


def test_run_scripts_never_interpolate_expressions() -> None:
    # Expressions are expanded into the script before the shell sees it; values go through env.
    for workflow, job_id, job in ALL:
        for step in job["steps"]:
            assert "${{" not in step.get("run", ""), (workflow, job_id, step.get("name"))


def test_the_variables_the_workflows_read_are_the_bootstraps_outputs() -> None:
    produced = set(repository_variables("r", "b", {"dev": "pd", "prod": "pp"}, {"dev": "d", "prod": "p"})) | {
        "PROD_RUNNER"
    }
    read = set()
    for path in WORKFLOWS.glob("*.yml"):
        read |= set(re.findall(r"vars\.([A-Z_]+)", path.read_text()))
    assert read == produced


def test_ci_runs_the_readmes_test_command() -> None:
    readme = (REPO_ROOT / "README.md").read_text()
    assert re.search(r"^make test\s+#.*what CI runs", readme, re.M)
    ci_run = (REPO_ROOT / ".ci" / "run").read_text().strip().splitlines()
    assert ci_run[-1] == "make test"
    for name in ("pull-request.yml", "deploy.yml"):
        test = load(name)["jobs"]["test"]
        assert [s["run"] for s in test["steps"] if "run" in s] == [".ci/run"], name


# --- the workload deploys: images first, and credentials that outlive the job --------------------


def _all_image_refs(value: Any) -> set[str]:
    if isinstance(value, dict):
        return {r for v in value.values() for r in _all_image_refs(v)}
    if isinstance(value, list):
        return {r for v in value for r in _all_image_refs(v)}
    return {value} if isinstance(value, str) and ".dkr.ecr." in value and ":" in value.rsplit("/", 1)[-1] else set()


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_the_preflight_checks_exactly_the_images_and_waits_the_stack_declares(
    stack: str, request: pytest.FixtureRequest
) -> None:
    # Checked against the planned workload stack with this test's own walk: every ECR image
    # any planned resource runs, and every await annotation (pulumi.com/timeoutSeconds, which
    # pulumi-kubernetes honours for the resources it waits for; workloads/pods.py).
    from tools.workloads_preflight import awaited_steps, required_images

    planned = request.getfixturevalue(f"workloads_{stack}")
    cluster = request.getfixturevalue(stack)
    assert required_images(planned, cluster.outputs["ecrRepositories"]) == _planned_images(planned, cluster)
    timeouts = [
        int(res.inputs["metadata"]["annotations"]["pulumi.com/timeoutSeconds"])
        for res in planned.registrations
        if "pulumi.com/timeoutSeconds" in ((res.inputs.get("metadata") or {}).get("annotations") or {})
    ]
    assert sum(s.minutes for s in awaited_steps(planned)) * 60 == sum(timeouts)


def _planned_images(planned: Any, cluster: Any) -> set[tuple[str, str]]:
    urls = {url: image for image, url in cluster.outputs["ecrRepositories"].items()}
    refs = {r for res in planned.registrations for r in _all_image_refs(res.inputs)}
    return {(urls[ref.rsplit(":", 1)[0]], ref.rsplit(":", 1)[1]) for ref in refs}


def test_the_preflight_wants_the_shell_image_when_redpajama_is_the_only_staging_step(workloads_with, dev) -> None:
    # workloads/data_staging.py: the RedPajama Job's `download` init container runs the shell
    # image, so a stack that stages only RedPajama still pulls cmd-shell (without
    # it the Job would wait in ImagePullBackOff for its 240 minutes).
    from tools.workloads_preflight import required_images

    planned = workloads_with(
        dataStaging={"wikicorpus": False, "redpajama": True},
        bertPretraining=None,
        rayLlama2=None,
        nxdLlama=None,
        clusterCheck=None,
        tensorboard=None,
    )
    images = required_images(planned, dev.outputs["ecrRepositories"])
    assert images == _planned_images(planned, dev)
    assert {image for image, _ in images} == {"cmd-shell", "nxd-llama"}


def test_the_longest_wait_is_the_dependency_chain_of_steps_not_yet_in_the_state(workloads_prod) -> None:
    # Pulumi creates a resource only after its dependencies; prod's NxD Training compile depends on the
    # RedPajama staging Job (workloads/__main__.py `after`), so a first up waits 240 + 185 min
    # in a row (staging's timeoutMinutes; the compile's deadline of 180 min + the 5-minute margin,
    # workloads/deadlines.py).
    from tools.workloads_preflight import awaited_steps, longest_wait

    steps = {s.name: s for s in awaited_steps(workloads_prod)}
    assert longest_wait(workloads_prod.registrations, list(steps.values())) == (
        425,
        ["stage-redpajama", "llama2-compile"],
    )
    staged = frozenset({steps["stage-redpajama"].urn})
    assert longest_wait(workloads_prod.registrations, list(steps.values()), staged) == (185, ["llama2-compile"])


def test_the_pipeline_page_says_what_the_preflight_computes_for_a_first_bring_up(workloads_dev, workloads_prod) -> None:
    # docs/pipeline.md section 3 states the job's budget and that both shipped stacks exceed it on
    # their first up; both figures come from the deploy workflows and the preflight's own chain computation.
    from tools.workloads_preflight import awaited_steps, longest_wait

    jobs = deploy_jobs()
    page = " ".join((REPO_ROOT / "docs" / "pipeline.md").read_text().split())
    for stack, planned in (("dev", workloads_dev), ("prod", workloads_prod)):
        job = jobs[f"workloads-{stack}"]
        (run,) = [s["run"] for s in job["steps"] if "tools.workloads_preflight" in s.get("run", "")]
        budget = int(run.split("--budget-minutes")[1].split()[0])
        assert f"({budget} of the job's {job['timeout-minutes']} minutes)" in page
        assert longest_wait(planned.registrations, awaited_steps(planned))[0] > budget, stack
    assert "With the shipped defaults both dev and prod exceed the budget on their first up" in page


class _Cli:
    """Stands in for `pulumi` and `aws`: answers by the command's first words, records each call."""

    def __init__(self, answers: dict[tuple[str, ...], tuple[int, str, str]]) -> None:
        self.answers, self.calls = answers, []

    def __call__(self, argv: list[str], **kwargs: Any) -> Any:
        import subprocess

        self.calls.append((argv, kwargs.get("cwd")))
        key = next(k for k in self.answers if tuple(argv[: len(k)]) == k)
        code, out, err = self.answers[key]
        return subprocess.CompletedProcess(argv, code, out, err)


def _preflight(monkeypatch, cli: _Cli, planned: tuple[Any, Any], budget: int = 330) -> int:
    import tools.workloads_preflight as preflight

    monkeypatch.setattr(preflight.subprocess, "run", cli)
    monkeypatch.setattr(preflight, "plan", lambda stack, deployed=None, admissions=None: planned)
    stack_files = preflight.workload_config
    monkeypatch.setattr(preflight, "workload_config", lambda stack, project_dir=None: stack_files(stack, FIXTURE_ROOT))
    return preflight.main(["--stack", "prod", "--budget-minutes", str(budget)])


def test_the_preflight_reads_the_cluster_stack_the_workload_stack_names_and_shows_pulumis_error(
    monkeypatch, capsys, prod, workloads_prod
) -> None:
    # The program's StackReference reads `clusterStack` (workloads/__main__.py); a DIY backend
    # takes the organization/project/stack form. A failing CLI must show its own stderr.
    cli = _Cli({("pulumi", "stack", "output"): (255, "", "error: no permission to read s3://state\n")})
    assert _preflight(monkeypatch, cli, (prod, workloads_prod)) == 1
    ((argv, cwd),) = cli.calls
    assert argv[argv.index("--stack") + 1] == "organization/trainium-eks/prod" and cwd == REPO_ROOT
    err = capsys.readouterr().err
    assert "error: no permission to read s3://state" in err and "Traceback" not in err


def test_a_first_bring_up_longer_than_the_job_fails_the_preflight_unless_its_steps_are_in_the_state(
    monkeypatch, capsys, prod, workloads_prod
) -> None:
    # GitHub cancels a job at its time limit; a `pulumi up` killed that way leaves the DIY lock
    # (pulumi pkg/backend/diy/lock.go: "locked ... delete the lock file with `pulumi cancel`").
    # `pulumi stack export` of a stack not created yet fails with backenderr's "no stack named".
    import json

    outputs = json.dumps({**prod.outputs, "kubeconfig": "[secret]"})  # `pulumi stack output --json`
    answers = {
        ("pulumi", "stack", "output"): (0, outputs, ""),
        ("aws", "ecr"): (0, "{}", ""),
        ("pulumi", "stack", "export"): (255, "", "error: no stack named 'prod' found\n"),
    }
    assert _preflight(monkeypatch, _Cli(answers), (prod, workloads_prod)) == 1
    out = capsys.readouterr().out
    assert "\n::error::This up creates awaited steps" in out  # a workflow command, on stdout
    assert "425 min" in out and "stage-redpajama -> llama2-compile" in out and "laptop" in out
    export = {
        "version": 3,
        "deployment": {
            "resources": [{"urn": r.urn, "type": r.type, "inputs": r.inputs} for r in workloads_prod.registrations]
        },
    }
    answers[("pulumi", "stack", "export")] = (0, json.dumps(export), "")
    cli = _Cli(answers)
    assert _preflight(monkeypatch, cli, (prod, workloads_prod)) == 0
    assert [cwd for argv, cwd in cli.calls if argv[:3] == ["pulumi", "stack", "export"]] == [REPO_ROOT / "workloads"]
    # The workload stack's own outputs too: its Capacity Block admissions (workloads/capacity_windows.py).
    assert (["pulumi", "stack", "output", "--json", "--stack", "prod"], REPO_ROOT / "workloads") in cli.calls
    assert _preflight(monkeypatch, _Cli(answers), (prod, workloads_prod), budget=0) == 0
    # A step whose first wait failed (it timed out while still running) is in the state with
    # initErrors, and the next up waits for it again: it is not done.
    failed = {"job-stage-redpajama"}
    export["deployment"]["resources"] = [
        {
            "urn": r.urn,
            "type": r.type,
            "inputs": r.inputs,
            **({"initErrors": ["timed out waiting for the Job"]} if r.name in failed else {}),
        }
        for r in workloads_prod.registrations
    ]
    answers[("pulumi", "stack", "export")] = (0, json.dumps(export), "")
    assert _preflight(monkeypatch, _Cli(answers), (prod, workloads_prod), budget=200) == 1
    assert "stage-redpajama" in capsys.readouterr().out


def test_the_preflight_counts_replacements_as_waits(monkeypatch, capsys, prod, workloads_prod) -> None:
    # An image-tag bump keeps every URN but replaces the jobs. A batch/v1
    # Job with a new pod template is replaced (pulumi-kubernetes v4.32.0 provider/pkg/provider/diff.go
    # forceNew `job`: .spec.template), the MPIJob by its replaceOnChanges ["spec"]: the chain waits
    # 240 + 185 min again, as on the first up, decided by offline/diff/replacement.py `replaces`.
    import json

    from infra.facts import versions

    outputs = json.dumps({**prod.outputs, "kubeconfig": "[secret]"})
    # Both tags move, so the staging Job is replaced as well.
    tagged = json.dumps([r.inputs for r in workloads_prod.registrations])
    for tag in (versions.TRAINING_IMAGE_TAG, versions.STAGING_IMAGE_TAG):
        tagged = tagged.replace(f":{tag}", ":2026.11.1")
    older = json.loads(tagged)
    export = {
        "version": 3,
        "deployment": {
            "resources": [
                {"urn": r.urn, "type": r.type, "inputs": i}
                for r, i in zip(workloads_prod.registrations, older, strict=True)
            ]
        },
    }
    answers = {
        ("pulumi", "stack", "output"): (0, outputs, ""),
        ("aws", "ecr"): (0, "{}", ""),
        ("pulumi", "stack", "export"): (0, json.dumps(export), ""),
    }
    assert _preflight(monkeypatch, _Cli(answers), (prod, workloads_prod)) == 1
    out = capsys.readouterr().out
    assert "425 min in a row (stage-redpajama -> llama2-compile)" in out
    assert "stage-redpajama: replaced (spec.template.spec.containers[0].image: spec.template is ForceNew)" in out
    # `up` awaits the compile through its gate (workloads/step_gate.py), replaced with it.
    assert "llama2-compile: replaced (follows: spec comes from mpijob-llama2-compile, which is replaced" in out
    # The same state with the new tag: nothing to wait for.
    export["deployment"]["resources"] = [
        {"urn": r.urn, "type": r.type, "inputs": r.inputs} for r in workloads_prod.registrations
    ]
    answers[("pulumi", "stack", "export")] = (0, json.dumps(export), "")
    assert _preflight(monkeypatch, _Cli(answers), (prod, workloads_prod), budget=0) == 0


def test_the_preflight_renders_the_stack_from_the_deployed_cluster_outputs(prod, monkeypatch) -> None:
    # The state holds the inputs `pulumi up` sent, rendered from the real cluster outputs: the plan
    # compared with it must be rendered from them too (real ECR URLs, not the offline account), or
    # every job would look replaced. A masked secret output keeps the offline value.
    import tools.workloads_preflight as preflight

    monkeypatch.setattr(preflight, "run_program", remembered_program)
    deployed = {
        **prod.outputs,
        "kubeconfig": "[secret]",
        "ecrRepositories": {
            k: v.replace("123456789012", "999999999999") for k, v in prod.outputs["ecrRepositories"].items()
        },
    }
    _, planned = preflight.plan("prod", deployed, project_dir=FIXTURE_ROOT)
    images = {i for r in planned.registrations for i in preflight._strings(r.inputs) if ".dkr.ecr." in i}
    assert images and all(i.startswith("999999999999.dkr.ecr.") for i in images)


def test_a_replaced_precompile_replaces_the_training_that_follows_it(workloads_all) -> None:
    # pulumi/pulumi v3.259.0 pkg/resource/deploy/step_generator.go calculateDependentReplacements: a
    # dependent is deleted before a deleteBeforeReplace resource only when one of its properties
    # comes from it (PropertyDependencies) and its diff with that property unknown replaces it
    # (applyReplaceOnChanges). The training job carries the precompile's UID in its spec
    # (workloads/kube.py follow); `depends_on` alone (the staging Job before the precompile) is not one.
    from tools.workloads_preflight import waiting_steps

    by_name = {r.name: r for r in workloads_all.registrations}
    precompile, train = by_name["job-bert-precompile"], by_name["job-bert-train"]
    assert train.property_dependencies["spec"] == [precompile.urn]
    assert by_name["job-stage-wikicorpus"].urn in precompile.dependencies
    assert by_name["job-stage-wikicorpus"].urn not in precompile.property_dependencies.get("spec", [])
    for later, before in (
        ("mpijob-llama2-train", "mpijob-llama2-compile"),
        ("rayjob-llama2-pretraining-job", "rayjob-llama2-precompilation-job"),
    ):
        assert by_name[later].property_dependencies["spec"] == [by_name[before].urn]
    task = train.inputs["spec"]["tasks"][0]["template"]
    assert task["metadata"]["annotations"]["trainium.workloads/follows-uid"] == "uid-placeholder-job-bert-precompile"

    def state(change: str) -> dict[str, dict]:
        out = {}
        for r in workloads_all.registrations:
            inputs = json.loads(json.dumps(r.inputs))
            if r.name == change:
                inputs["spec"]["tasks"][0]["template"]["spec"]["containers"][0]["command"][2] = "1"
            out[r.urn] = {"urn": r.urn, "inputs": inputs}
        return out

    import json

    why = waiting_steps(workloads_all.registrations, state("job-bert-precompile"))
    # The chain rule is offline/diff/replacement.py dependent_replacements, the one the plan diff applies
    # (tests/test_plan_diff.py test_a_changed_precompile_replaces_the_training_in_the_plan_diff).
    # Its gate (workloads/step_gate.py) follows it too; the training follows the precompile, not the gate.
    gate = by_name["job-bert-precompile-gate"]
    assert gate.property_dependencies["spec"] == [precompile.urn] and gate.urn in train.dependencies
    assert why == {
        precompile.urn: why[precompile.urn],
        gate.urn: "replaced (follows: spec comes from job-bert-precompile, which is replaced (replaceOnChanges *))",
        train.urn: "replaced (follows: spec comes from job-bert-precompile, which is replaced (replaceOnChanges spec))",
    }
    assert why[precompile.urn].startswith(
        "replaced (spec.tasks[0].template.spec.containers[0].command[2]: replaceOnChanges spec)"
    )
    # Only the training run changes: the precompile stays, and nothing waits.
    assert list(waiting_steps(workloads_all.registrations, state("job-bert-train"))) == [train.urn]


@pytest.mark.parametrize("job_id", ["workloads-dev", "workloads-prod"])
def test_workload_deploys_check_images_first_and_keep_credentials_for_the_whole_job(job_id: str) -> None:
    job = deploy_jobs()[job_id]
    runs = [s.get("run", "") for s in job["steps"]]
    (check,) = [i for i, r in enumerate(runs) if "tools.workloads_preflight" in r]
    (up,) = [i for i, s in enumerate(job["steps"]) if s.get("with", {}).get("command") == "up"]
    assert check < up
    budget = int(runs[check].split("--budget-minutes")[1].split()[0])
    # GitHub-hosted runners end a job at 6 h (GitHub docs, "Usage limits": job execution time).
    assert job["timeout-minutes"] <= 360 and budget < job["timeout-minutes"]
    (creds,) = steps_using(job, CONFIGURE_AWS)
    # Credentials that expire before the job does would fail `pulumi up` half-way (S3 checkpoint
    # writes, `aws eks get-token`), leaving pending operations in the state.
    assert int(creds["with"]["role-duration-seconds"]) >= job["timeout-minutes"] * 60


def test_drift_issues_carry_the_full_diff_only_in_private_repositories() -> None:
    # Issues of a public repository are world-readable; the preview diff names ARNs and addresses.
    # github-script exposes the event payload as context.payload; repository.private is GitHub's flag.
    (job,) = load("drift.yml")["jobs"].values()
    (script,) = [s["with"]["script"] for s in job["steps"] if s.get("uses", "").startswith("actions/github-script@")]
    assert "context.payload.repository?.private === true" in script
    assert "isPrivate ? text.slice(-60000) : summary" in script


def test_the_preflight_renders_a_stack_whose_file_holds_an_encrypted_token(monkeypatch, tmp_path) -> None:
    # docs/pipeline.md section 2 has the pipeline's stack files hold `hfToken` encrypted (`secure: v1:...`,
    # Pulumi's stack file format), which only the secrets provider opens: the preflight plans
    # with a stand-in (offline/plan/command.py offline_secrets), as `make plan` does.
    import tools.workloads_preflight as preflight

    project = build(tmp_path / "project")
    project_copy(
        tmp_path / "workloads",
        project / "workloads",
        "prod",
        lambda config: config.update({"trainium-workloads:hfToken": {"secure": "v1:abcd"}}),
    )
    shutil.copyfile(tmp_path / "workloads" / "Pulumi.prod.yaml", project / "workloads" / "Pulumi.prod.yaml")
    monkeypatch.setattr(preflight, "run_program", remembered_program)
    cluster, planned = preflight.plan("prod", project_dir=project)
    assert planned.outputs["clusterStack"] == "organization/trainium-eks/prod"
    assert preflight.longest_wait(planned.registrations, preflight.awaited_steps(planned))[0] == 425


def test_every_update_is_skipped_when_a_newer_merge_already_deployed_its_stacks() -> None:
    # GitHub docs ("Control the concurrency of workflows and jobs"): a queue is first in, first
    # out by when each run started waiting, and ordering is not guaranteed. Each `up` runs only
    # when tools/deploy_order.py found no newer deployed commit of its stack, or, for a workload
    # stack, of the cluster stack it reads; it needs the whole history (actions/checkout v7.0.1
    # action.yml: `fetch-depth: 0` fetches all history for all branches and tags) and the CLI.
    for job_id, job in itertools.chain(*(concrete_jobs(name) for name in DEPLOY_WORKFLOWS)):
        ups = [i for i, s in enumerate(job["steps"]) if s.get("with", {}).get("command") == "up"]
        if not ups:
            continue
        (up,) = ups
        (order,) = [i for i, s in enumerate(job["steps"]) if s.get("id") == "order"]
        (install,) = [
            i
            for i, s in enumerate(job["steps"])
            if s.get("uses", "").startswith(PULUMI_ACTION) and "command" not in s.get("with", {})
        ]
        assert install < order < up, job_id
        options = job["steps"][up]["with"]
        run = job["steps"][order]["run"].split()
        dirs = ["workloads", "./"] if options["work-dir"] == "workloads" else ["./"]
        assert run[run.index("--stack") + 1 :] == [options["stack-name"], *dirs], job_id
        assert job["steps"][order]["env"]["PULUMI_BACKEND_URL"] == options["cloud-url"], job_id
        for step in job["steps"][order + 1 :]:
            assert step.get("if") == "steps.order.outputs.deploy == 'true'", (job_id, step.get("name"))
        (checkout,) = steps_using(job, "actions/checkout")
        assert checkout["with"]["fetch-depth"] == 0, job_id


def test_drift_previews_the_commit_each_stack_was_last_deployed_from() -> None:
    # Main may be ahead of a stack (a merge waiting for prod's approval, or queued);
    # previewing main would report that pending deploy as drift. The check reads the commit of the
    # stack's last update (tools/deploy_order.py --deployed: `git.head` from `pulumi stack history
    # --json`, pulumi/pulumi v3.259.0 pkg/cmd/pulumi/stack/stack_history.go), checks it out (the
    # whole history is fetched: actions/checkout v7.0.1 action.yml, `fetch-depth: 0`), builds that
    # commit's virtualenv and previews it; a stack never deployed is not checked.
    for job in expand(load("drift.yml")["jobs"]["drift"]):
        steps = job["steps"]
        (checkout,) = steps_using(job, "actions/checkout")
        assert checkout["with"]["fetch-depth"] == 0
        index = {s.get("id") or s.get("name") or s.get("uses"): i for i, s in enumerate(steps)}
        deployed = steps[index["deployed"]]
        assert deployed["run"] == 'python -m tools.deploy_order --deployed --stack "$STACK" "$WORK_DIR"'
        assert deployed["env"]["STACK"] == next(s for s in steps if s.get("id") == "check")["env"]["STACK"]
        (git_checkout,) = [i for i, s in enumerate(steps) if s.get("run") == 'git checkout --detach "$COMMIT"']
        (venv,) = [i for i, s in enumerate(steps) if s.get("run") == "make .venv/.installed"]
        assert index["deployed"] < git_checkout < venv < index["check"]
        assert steps[git_checkout]["env"] == {"COMMIT": "${{ steps.deployed.outputs.commit }}"}
        for i in (git_checkout, venv, index["check"], len(steps) - 1):
            assert steps[i]["if"] == "steps.deployed.outputs.commit != ''", steps[i].get("name")
    # The check reads only the standard library before the virtualenv exists.
    import ast

    tree = ast.parse((REPO_ROOT / "tools" / "deploy_order.py").read_text())
    imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert imported <= {"__future__", "argparse", "json", "os", "subprocess", "sys", "pathlib", "typing"}


def test_a_training_image_bump_fits_the_ci_deploy_budget(workloads_dev, workloads_with) -> None:
    # With every job on TRAINING_IMAGE_TAG a bump would replace stage-wikicorpus (240 min) and then
    # bert-precompile (175), 415 min in a row, past deploy.yml's --budget-minutes 330. The staging Jobs
    # run STAGING_IMAGE_TAG (infra/facts/versions.py), so a bump leaves them in place. The state here is
    # the shipped dev stack as deployed under the previous tag; the new plan is what a bump of
    # TRAINING_IMAGE_TAG changes: every workload's imageTag but dataStaging's.
    import json as _json

    from infra.facts import versions
    from tools.workloads_preflight import awaited_steps, longest_wait, waiting_steps
    from workloads.settings import BertPretrainingSettings, DataStagingSettings

    assert DataStagingSettings.model_fields["image_tag"].default == versions.STAGING_IMAGE_TAG
    assert BertPretrainingSettings.model_fields["image_tag"].default == versions.TRAINING_IMAGE_TAG
    budget = int(
        next(
            s["run"]
            for s in load("deploy.yml")["jobs"]["workloads-dev"]["steps"]
            if "tools.workloads_preflight" in s.get("run", "")
        )
        .split("--budget-minutes")[1]
        .split()[0]
    )
    state = {r.urn: {"urn": r.urn, "inputs": _json.loads(_json.dumps(r.inputs))} for r in workloads_dev.registrations}
    config = {
        k.split(":", 1)[1]: _json.loads(v)
        for k, v in stack_config(FIXTURE_ROOT / "workloads", "dev").items()
        if v.startswith("{")
    }
    bumped = {
        k: {**v, "imageTag": "2099.1.1"}
        for k, v in config.items()
        if k not in ("dataStaging", "endOfSupportAcknowledged")
    }

    def wait(planned):
        waiting = waiting_steps(planned.registrations, state)
        done = frozenset(r.urn for r in planned.registrations if r.urn not in waiting)
        return longest_wait(planned.registrations, awaited_steps(planned), done)

    planned = workloads_with(**bumped)
    waiting = {
        r.inputs["metadata"]["name"]
        for r in planned.registrations
        if r.urn in waiting_steps(planned.registrations, state) and isinstance(r.inputs.get("metadata"), dict)
    }
    assert "stage-wikicorpus" not in waiting and {"bert-precompile", "bert-train"} <= waiting
    # What is left over the budget is Ray's own chain, data step 185 + precompile 185 (stepDeadlineMinutes
    # 180 + 5 each): docs/workloads.md says to drop generate-data from `steps` once its data is staged, or
    # to bring such a bump up from a laptop; the preflight refuses it in CI.
    assert wait(planned) == (370, ["llama2-generate-pretraining-test-data", "llama2-precompilation-job"])
    ray_staged = {**bumped["rayLlama2"], "steps": ["precompile", "train"]}
    minutes, chain = wait(workloads_with(**{**bumped, "rayLlama2": ray_staged}))
    assert chain == ["llama2-precompilation-job"] and minutes == 185 <= budget
    # The other side: had the staging Jobs moved with the training tag, BERT's chain alone would not fit.
    minutes, chain = wait(
        workloads_with(
            **{**bumped, "rayLlama2": ray_staged}, dataStaging={**config["dataStaging"], "imageTag": "2099.1.1"}
        )
    )
    assert chain == ["stage-wikicorpus", "bert-precompile"] and minutes == 240 + 175 > budget


@pytest.mark.parametrize(("job_id", "stack"), [("cluster-dev", "dev"), ("preview-cluster-prod", "prod")])
def test_the_pipeline_refuses_an_unacknowledged_data_store_replacement_before_its_update(
    job_id: str, stack: str, tmp_path
) -> None:
    # The plan diff's data-store gate (offline/diff/compare.py data_store_replacement_refusals) runs
    # against the commit the stack was last deployed from, before the job's `pulumi up` or preview
    # (cluster-prod needs preview-cluster-prod, so a refusal there stops prod before its approval).
    import subprocess

    job = deploy_jobs()[job_id]
    steps = job["steps"]
    index = {s.get("id") or s.get("name") or s.get("uses"): i for i, s in enumerate(steps)}
    deployed = steps[index["deployed"]]
    assert deployed["run"] == f".venv/bin/python -m tools.deploy_order --deployed --stack {stack} ./"
    assert deployed["env"] == steps[index["order"]]["env"]
    (gate,) = [i for i, s in enumerate(steps) if "bin/plan --base" in s.get("run", "")]
    assert steps[gate]["env"] == {"DEPLOYED": "${{ steps.deployed.outputs.commit }}"}
    (pulumi,) = [i for i, s in enumerate(steps) if s.get("uses", "").startswith(PULUMI_ACTION) and "with" in s
                 and s["with"].get("command") and s["with"].get("work-dir") == "./"]  # fmt: skip
    assert index["order"] < index["deployed"] < gate < pulumi
    # The step's script, run by bash as the runner does, with a bin/plan that records its argv and
    # fails as a refusal does: it fails the job, and a stack never deployed is not compared.
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "plan").write_text('#!/bin/sh\necho "$@" > argv\nexit 2\n')
    (tmp_path / "bin" / "plan").chmod(0o755)
    script = steps[gate]["run"]
    run = lambda commit: subprocess.run(["bash", "-e", "-c", script], cwd=tmp_path, env={"DEPLOYED": commit})  # noqa: E731
    assert run("").returncode == 0 and not (tmp_path / "argv").exists()
    assert run("0123abcd").returncode == 2
    assert (tmp_path / "argv").read_text().split() == ["--base", "0123abcd", "--stacks", stack]


def test_the_pull_requests_plan_diff_reports_data_store_replacements_and_the_deploys_refuse_them() -> None:
    # The pull request's base may never have been deployed; the deploy jobs compare with the deployed
    # commit (tests above) and refuse there.
    workflow = yaml.safe_load((REPO_ROOT / ".github" / "workflows" / "pull-request.yml").read_text())
    runs = [s.get("run", "") for job in workflow["jobs"].values() for s in job["steps"]]
    assert any('make plan BASE="$BASE_SHA" ARGS="--data-store-replacements report"' in r for r in runs)
    deploys = [s.get("run", "") for job in deploy_jobs().values() for s in job["steps"]]
    assert all("--data-store-replacements" not in r for r in deploys)
