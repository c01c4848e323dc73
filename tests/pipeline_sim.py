"""A stand-in for GitHub Actions, AWS and the Pulumi CLI, for walking the pipeline offline.

`tests/test_day_one.py` drives the workflows in `.github/workflows/` with it: the job graph is
read from the YAML (needs, if-conditions, environments, concurrency, each step's action or
command), never restated here, and every step does what its upstream does, as far as the
project relies on it. Each behaviour names its source:

- GitHub Actions: a job runs when every job it `needs` succeeded and its `if:` holds, else it
  is skipped (docs.github.com, "Using jobs in a workflow", jobs.<job_id>.needs); a job
  referencing an environment proceeds only when its protection rules pass: required reviewers,
  deployment branches (docs.github.com/actions/reference/deployments-and-environments); the
  OIDC token's `sub` is `repo:O/R:pull_request` for a pull_request run,
  `repo:O/R:environment:NAME` for a job naming an environment, else `repo:O/R:ref:<ref>`
  ("OpenID Connect reference", example subject claims). A run first takes its workflow-level
  concurrency group and waits while another run holds it ("Control the concurrency of workflows
  and jobs"; `queue_outcome`); a finished run starts the workflows whose `workflow_run` names it,
  with GITHUB_SHA main's newest commit, GITHUB_REF main and the finished run's commit only in the
  payload ("Events that trigger workflows", workflow_run); a `continue-on-error` step's failure
  does not fail its job. Job-level groups are not held while a job runs or waits for approval:
  tests/test_workflows.py checks that dev's and prod's groups are disjoint, and every `up` checks
  it runs in its stack's group.
- aws-actions/configure-aws-credentials v6.2.3: `core.getIDToken(audience)` with audience
  `sts.amazonaws.com` by default (action.yml, src/index.ts), then AssumeRoleWithWebIdentity with
  DurationSeconds = role-duration-seconds (src/assumeRole.ts): STS refuses a token whose claims
  the role's trust policy does not admit, and a duration above the role's MaxSessionDuration.
- pulumi/actions v7.0.0: with no `command` it only installs the CLI; otherwise it logs in (a
  failed login is only a warning) and runs `LocalWorkspace.selectStack` because `upsert`
  defaults to false (action.yml, src/main.ts), so a stack nobody created fails the step; then
  preview or up with the policy pack (src/config.ts).
- Pulumi DIY backend on S3 (pulumi/pulumi v3.259.0, the newest tag in the mirror; the pin is
  .pulumi-version): a stack's checkpoint, lock, history and backups live under
  `.pulumi/{stacks,locks/organization,history,backups}/<project>/<stack>` (pkg/backend/diy
  store.go, lock.go, state.go); a preview reads the checkpoint and takes no lock, an update
  locks, writes the checkpoint and history (backend.go Preview/Update); a stack with an
  `awskms://` secrets provider decrypts its data key even to preview
  (pkg/cmd/pulumi/stack/secrets.go). A StackReference to a stack that exists but was never
  deployed reads no outputs; to a stack that does not exist, fails.
- IAM: a request is allowed when an Allow matches and no Deny does (tests/test_bootstrap.py
  `allowed`, evaluated on the bootstrap plan's own role policies).

What it does not model (said where it matters): the AWS APIs the programs call beyond their
mocks (offline/plan/mocks.py), the time a step really takes, and Kubernetes beyond whether a gang
of Trainium pods can ever be placed.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import json
import math
import re
import shlex
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from infra.lookups import DeployContext
from offline.plan import fixtures
from offline.plan.command import offline_secrets
from offline.plan.mocks import ExistingCluster, StackOutputs
from offline.plan.runner import ORGANIZATION, REPO_ROOT, PlanResult, project_name, run_program, stack_config
from tests.fixture_project import FIXTURE_ROOT
from tests.test_bootstrap import allowed
from tests.test_workflows import WORKFLOWS, expand, load

SUB = "token.actions.githubusercontent.com:sub"
DEFAULT_BRANCH = "main"
AUD = "token.actions.githubusercontent.com:aud"
WORKLOADS = "trainium-workloads"
CLUSTER = "trainium-eks"
# The workflows run in the repository; the stacks they deploy are the tests' copies (tests/fixture_project.py).
PROJECT_DIRS = {CLUSTER: FIXTURE_ROOT, WORKLOADS: FIXTURE_ROOT / "workloads"}
TIMEOUT = "pulumi.com/timeoutSeconds"
SKIP_AWAIT = "pulumi.com/skipAwait"
NEURON = "aws.amazon.com/neuron"


class StepFailed(Exception):
    pass


# --- what a merge or a pull request carries: the stack files ------------------------------------


@dataclass(frozen=True)
class Commit:
    """A revision of the repository: the programs are this checkout's, the stack files its own."""

    sha: str
    configs: dict[tuple[str, str], dict[str, str]]  # (project, stack) -> the stack file's config
    parent: str | None = None

    def config(self, project: str, stack: str) -> dict[str, str]:
        return dict(self.configs[(project, stack)])

    def edited(self, sha: str, edits: dict[tuple[str, str], Callable[[dict[str, str]], None]]) -> Commit:
        configs = {key: dict(value) for key, value in self.configs.items()}
        for key, edit in edits.items():
            edit(configs[key])
        return Commit(sha, configs, self.sha)


@functools.cache
def _shipped_configs() -> dict[tuple[str, str], dict[str, str]]:
    return {
        (project_name(d), stack): stack_config(d, stack) for d in PROJECT_DIRS.values() for stack in ("dev", "prod")
    }


def shipped_commit(sha: str = "c0") -> Commit:
    return Commit(sha, {key: dict(value) for key, value in _shipped_configs().items()})


@functools.cache
def _workflow(name: str) -> tuple[dict[str, Any], dict[str, list[dict[str, Any]]]]:
    """The workflow and each job's concrete (matrix-expanded) forms, parsed once."""
    workflow = load(name)
    return workflow, {job_id: list(expand(job)) for job_id, job in workflow["jobs"].items()}


def set_key(project: str, key: str, value: Any) -> Callable[[dict[str, str]], None]:
    def edit(config: dict[str, str]) -> None:
        full = f"{project}:{key}"
        if value is None:
            config.pop(full, None)
        else:
            config[full] = json.dumps(value) if isinstance(value, (dict, list)) else str(value)

    return edit


# --- the account side: state, images, roles ------------------------------------------------------


@dataclass
class StackState:
    secrets_key: str  # the KMS key its awskms:// provider names
    resources: dict[str, dict[str, Any]] = field(default_factory=dict)  # urn -> {"initErrors": [...]}
    outputs: dict[str, Any] | None = None  # None: never deployed
    secret_outputs: frozenset[str] = frozenset()
    commit: str | None = None
    creator: str | None = None  # who made its EKS cluster (EKS's creator entry)
    registrations: list[Any] = field(default_factory=list)
    # `pulumi stack history --json`, newest first: each update's kind, result and the checkout's
    # HEAD as `environment["git.head"]` (pulumi pkg/cmd/pulumi/metadata/metadata.go).
    history: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class Backend:
    """One DIY S3 backend (a bucket), as `pulumi login s3://...` sees it."""

    url: str
    bucket_arn: str
    state_key: str
    meta: bool = False  # .pulumi/meta.yaml written (first login)
    stacks: dict[tuple[str, str], StackState] = field(default_factory=dict)


@dataclass
class Account:
    """Everything AWS holds for the simulation: bootstrap stacks, backends, ECR images."""

    bootstraps: dict[str, PlanResult]  # bootstrap stack -> its plan (roles, outputs)
    backends: dict[str, Backend] = field(default_factory=dict)
    images: set[tuple[str, str]] = field(default_factory=set)  # (ECR repository name, tag)

    def role(self, arn: str) -> tuple[PlanResult, Any]:
        name = arn.rsplit("/", 1)[-1]
        for plan in self.bootstraps.values():
            for r in plan.of_type("aws:iam/role:Role"):
                if r.inputs["name"] == name:
                    return plan, r
        raise StepFailed(f"AssumeRoleWithWebIdentity: no role {arn}")

    def policy_of(self, arn: str) -> dict[str, Any]:
        """The role's inline policies as one document, plus the part of an attached ReadOnlyAccess
        that matters here: s3:Get* and s3:List* on every bucket (AWS managed policy reference,
        ReadOnlyAccess). It grants no kms:Decrypt and no writes."""
        plan, role = self.role(arn)
        statements = []
        for p in plan.of_type("aws:iam/rolePolicy:RolePolicy"):
            if p.name.startswith(role.name + "-"):
                statements += json.loads(p.inputs["policy"])["Statement"]
        for a in plan.of_type("aws:iam/rolePolicyAttachment:RolePolicyAttachment"):
            if a.name.startswith(role.name + "-") and a.inputs["policyArn"].endswith(":policy/ReadOnlyAccess"):
                statements.append({"Effect": "Allow", "Action": ["s3:Get*", "s3:List*"], "Resource": "*"})
        return {"Version": "2012-10-17", "Statement": statements}

    def owner(self, resource: str) -> PlanResult | None:
        """The bootstrap (account) whose state bucket or key ``resource`` is, if any."""
        for plan in self.bootstraps.values():
            out = plan.outputs
            keys = {out["stateKeyArn"], out["bootstrapSecretsKeyArn"], *out["secretsKeyArns"].values()}
            if resource in keys or resource.startswith(f"arn:aws:s3:::{out['stateBucket']}/"):
                return plan
        return None

    def can(self, arn: str, action: str, resource: str) -> bool:
        # Another account's bucket or key: its resource policy would have to grant the role too
        # (IAM user guide, "Cross-account policy evaluation logic"); the state bucket's policy only
        # denies plain HTTP, and the keys' policies trust their own account.
        plan, _ = self.role(arn)
        owner = self.owner(resource)
        if owner is not None and owner is not plan:
            return False
        return allowed(self.policy_of(arn), action, resource)


def stack_objects(bucket_arn: str, project: str, stack: str) -> dict[str, str]:
    return {
        "checkpoint": f"{bucket_arn}/.pulumi/stacks/{project}/{stack}.json",
        "lock": f"{bucket_arn}/.pulumi/locks/organization/{project}/{stack}/sim.json",
        "history": f"{bucket_arn}/.pulumi/history/{project}/{stack}/{stack}-sim.history.json",
    }


# --- GitHub: the repository's settings and the runs ----------------------------------------------


@dataclass
class Repository:
    name: str
    # What its OIDC tokens' `sub` starts with: `repo:OWNER/REPO`, or with the immutable owner and
    # repository IDs GitHub gives repositories created, renamed or transferred since mid-2026,
    # `repo:OWNER@ID/REPO@ID` (GitHub docs, "OpenID Connect", "Immutable subject claims").
    subject_prefix: str = ""

    def __post_init__(self) -> None:
        self.subject_prefix = self.subject_prefix or f"repo:{self.name}"

    variables: dict[str, str] = field(default_factory=dict)
    # Environment -> its protection rules: {"reviewers": [...], "branches": ["main"]}
    environments: dict[str, dict[str, Any]] = field(default_factory=dict)


@dataclass
class JobRun:
    workflow: str
    run: int
    job: str
    status: str  # success, failure, skipped
    reason: str = ""
    role: str | None = None
    subject: str | None = None
    environment: str | None = None
    groups: tuple[str, ...] = ()
    outputs: dict[str, str] = field(default_factory=dict)  # jobs.<id>.outputs, as `needs.<id>.outputs`
    steps: dict[str, dict[str, str]] = field(default_factory=dict)  # each step id's $GITHUB_OUTPUT
    summary: str = ""  # what the job wrote to $GITHUB_STEP_SUMMARY
    tolerated: list[str] = field(default_factory=list)  # failures of continue-on-error steps


@dataclass
class Event:
    name: str  # pull_request, push, schedule, workflow_run
    ref: str  # refs/heads/main, refs/pull/N/merge
    commit: Commit  # GITHUB_SHA: what actions/checkout checks out unless a step names another ref
    pr_number: int | None = None
    head_repository: str | None = None
    # workflow_run's payload: the finished run's head_sha, conclusion, head_branch and event.
    workflow_run: dict[str, str] | None = None


@dataclass
class Run:
    """One workflow run: its event, its approvals, and its jobs once it has run."""

    number: int
    workflow: str
    event: Event
    approve: Callable[[str, str], bool]
    previous: dict[str, JobRun] | None = None
    triggered_by: int | None = None
    status: str = "queued"  # queued, in_progress, completed, cancelled
    results: dict[str, JobRun] = field(default_factory=dict)


_EXPR = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")


class Pipeline:
    """Runs workflows against the account, one job at a time, in the YAML's order."""

    def __init__(self, repo: Repository, account: Account, caches: ProgramCache) -> None:
        self.repo, self.account, self.cache = repo, account, caches
        self.jobs: list[JobRun] = []
        self.log: list[str] = []
        self.runs = 0
        self.commits: dict[str, Commit] = {}
        self.main: str | None = None  # main's newest commit: GITHUB_SHA of a workflow_run run
        self.all_runs: dict[int, Run] = {}
        self.holding: dict[str, int] = {}  # workflow-level concurrency group -> the run in it
        self.waiting: dict[str, list[Run]] = {}  # group -> runs pending on it, oldest first

    def is_ancestor(self, ancestor: str, sha: str | None) -> bool | None:
        """`git merge-base --is-ancestor`: None for a commit this history does not hold."""
        if sha not in self.commits:
            return None
        while sha is not None:
            if sha == ancestor:
                return True
            sha = self.commits[sha].parent if sha in self.commits else None
        return False

    # --- expressions (the few forms the workflows use; anything else is an error) ---

    def _context(self, event: Event) -> dict[str, Any]:
        head = event.head_repository or self.repo.name
        return {
            "github.repository": self.repo.name,
            "github.ref": event.ref,
            "github.event.pull_request.number": event.pr_number,
            "github.event.pull_request.head.repo.full_name": head,
            "github.event.pull_request.base.sha": event.commit.parent,
            **{f"github.event.workflow_run.{k}": v for k, v in (event.workflow_run or {}).items()},
        }

    def _value(
        self,
        expr: str,
        event: Event,
        steps: dict[str, dict[str, str]] | None = None,
        needs: dict[str, JobRun] | None = None,
    ) -> Any:
        expr = expr.strip()
        if expr.startswith("'") and expr.endswith("'"):
            return expr[1:-1]
        if expr.startswith("needs.") and needs is not None:
            # GitHub docs, "Contexts reference", needs context: needs.<job_id>.outputs.<name> of a
            # job this one needs; an output the job did not set is the empty string.
            job_id, _, name = expr[len("needs.") :].partition(".outputs.")
            return needs[job_id].outputs.get(name, "")
        if expr.startswith("steps.") and steps is not None:
            step_id, _, name = expr[len("steps.") :].partition(".outputs.")
            return steps.get(step_id, {}).get(name, "")  # an unset output is the empty string
        if expr.startswith("vars."):
            return self.repo.variables.get(expr[5:], "")  # an unset variable is the empty string
        context = self._context(event)
        if expr in context:
            return context[expr]
        raise AssertionError(f"the simulation does not evaluate `{expr}`")

    def evaluate(
        self,
        condition: str,
        event: Event,
        steps: dict[str, dict[str, str]] | None = None,
        needs: dict[str, JobRun] | None = None,
    ) -> bool:
        condition = _EXPR.sub(lambda m: m.group(1), condition).strip()
        if "&&" in condition:
            return all(self.evaluate(part, event, steps, needs) for part in condition.split("&&"))
        for operator, compare in (("!=", lambda a, b: a != b), ("==", lambda a, b: a == b)):
            if operator in condition:
                left, right = (self._value(side, event, steps, needs) for side in condition.split(operator))
                return compare(left, right)
        raise AssertionError(f"the simulation does not evaluate `if: {condition}`")

    def substitute(self, value: Any, event: Event, steps: dict[str, dict[str, str]] | None = None) -> Any:
        if isinstance(value, str):
            return _EXPR.sub(lambda m: str(self._value(m.group(1), event, steps)), value)
        if isinstance(value, dict):
            return {k: self.substitute(v, event, steps) for k, v in value.items()}
        if isinstance(value, list):
            return [self.substitute(v, event, steps) for v in value]
        return value

    # --- a run ---

    def run(
        self,
        workflow_file: str,
        event: Event,
        approve: Callable[[str, str], bool] = lambda job, env: True,
        previous: dict[str, JobRun] | None = None,
        triggered_by: int | None = None,
    ) -> dict[str, JobRun]:
        """Every job of ``workflow_file`` for ``event``; ``approve(job, environment)`` is the
        required reviewers' answer. ``previous``: "Re-run failed jobs" of that attempt (GitHub docs,
        "Re-running workflows and jobs": a re-run uses the original event's GITHUB_SHA and
        GITHUB_REF; GitHub also re-runs the jobs that depend on the failed ones, and jobs not
        included keep their outputs from the previous attempt).

        The run first takes its workflow-level concurrency group. While another run holds it, the
        run waits (the returned dict stays empty until it has run; `queue_outcome` says which
        waiting runs a group keeps) and starts when the holder ends, after the holder's
        workflow_run followers were started. A push to main that is newer than main moves main."""
        self.runs += 1
        self.commits.setdefault(event.commit.sha, event.commit)
        if (
            event.name == "push"
            and previous is None
            and (self.main is None or self.is_ancestor(self.main, event.commit.sha))
        ):
            self.main = event.commit.sha
        run = Run(self.runs, workflow_file, event, approve, previous, triggered_by)
        self.all_runs[run.number] = run
        workflow, _ = _workflow(workflow_file)
        concurrency = workflow.get("concurrency")
        group = _group(concurrency, self, event)
        if group and group in self.holding:
            queue = self.waiting.setdefault(group, [])
            queue.append(run)
            kept = queue_outcome(concurrency, ["holder", *(r.number for r in queue)])[1:]
            for dropped in [r for r in queue if r.number not in kept]:
                dropped.status = "cancelled"
                self.log.append(f"{dropped.workflow}#{dropped.number}: cancelled while pending in {group}")
            queue[:] = [r for r in queue if r.number in kept]
            self.log.append(f"{workflow_file}#{run.number}: waiting for {group} (held by #{self.holding[group]})")
            return run.results
        self._execute(run, group)
        return run.results

    def rerun_failed(self, number: int, approve: Callable[[str, str], bool] | None = None) -> dict[str, JobRun]:
        """ "Re-run failed jobs" of run ``number``: the same event (commit, ref, workflow_run payload)."""
        old = self.all_runs[number]
        return self.run(old.workflow, old.event, approve or old.approve, old.results, old.triggered_by)

    def followers(self, number: int) -> list[Run]:
        """The runs run ``number``'s completion started (workflow_run), oldest first."""
        return [r for r in self.all_runs.values() if r.triggered_by == number]

    def _execute(self, run: Run, group: str | None) -> None:
        if group:
            self.holding[group] = run.number
        run.status = "in_progress"
        try:
            run.results.update(self._jobs(run))
        finally:
            run.status = "completed"
            if group:
                del self.holding[group]
        self._completed(run)
        if group and self.waiting.get(group):
            self._execute(self.waiting[group].pop(0), group)

    def _completed(self, run: Run) -> None:
        """workflow_run `completed` (GitHub docs, "Events that trigger workflows", workflow_run): a
        workflow naming this one's `name` under `workflows`, with this run's branch in `branches`,
        runs with GITHUB_SHA main's newest commit and GITHUB_REF main, the default branch; the
        finished run's commit is only in the payload, `workflow_run.head_sha`. Its conclusion is
        failure when a job failed (skipped jobs fail nothing). A re-run's completion starts it again."""
        name = _workflow(run.workflow)[0].get("name")
        branch = run.event.ref.removeprefix("refs/heads/")
        conclusion = "failure" if any(r.status == "failure" for r in run.results.values()) else "success"
        for path in sorted(WORKFLOWS.glob("*.yml")):
            trigger = _workflow(path.name)[0]["on"].get("workflow_run")
            if not trigger or name not in trigger["workflows"] or "completed" not in trigger.get("types", []):
                continue
            if branch not in trigger.get("branches", [branch]):
                continue
            payload = {
                "head_sha": run.event.commit.sha,
                "conclusion": conclusion,
                "head_branch": branch,
                "head_repository.full_name": run.event.head_repository or self.repo.name,
            }
            event = Event(
                "workflow_run", f"refs/heads/{DEFAULT_BRANCH}", self.commits[self.main or run.event.commit.sha]
            )
            event.workflow_run = {**payload, "event": run.event.name}
            self.log.append(f"{path.name}: workflow_run of {run.workflow}#{run.number} ({conclusion})")
            self.run(path.name, event, run.approve, triggered_by=run.number)

    def _jobs(self, run: Run) -> dict[str, JobRun]:
        workflow_file, event, approve, previous, run_number = (
            run.workflow,
            run.event,
            run.approve,
            run.previous,
            run.number,
        )
        workflow, expanded = _workflow(workflow_file)
        results: dict[str, JobRun] = {}
        rerun: set[str] = set()  # the failed jobs and those that depend on them
        for job_id in _topological(workflow["jobs"]):
            job = workflow["jobs"][job_id]
            needs = job.get("needs") or []
            needs = [needs] if isinstance(needs, str) else needs
            if previous is not None and previous[job_id].status != "failure" and not any(n in rerun for n in needs):
                results[job_id] = previous[job_id]  # kept, outputs and all
                self.log.append(f"{workflow_file}#{run_number} {job_id}: kept from the previous attempt")
                continue
            rerun.add(job_id)
            for concrete in copy.deepcopy(expanded[job_id]):
                late = {k: concrete[k] for k in ("steps", "outputs", "if") if k in concrete}  # evaluated as they run
                concrete = self.substitute({k: v for k, v in concrete.items() if k not in late}, event) | late
                result = JobRun(workflow_file, run_number, job_id, "success", environment=concrete.get("environment"))
                result.groups = tuple(
                    g
                    for g in (
                        _group(workflow.get("concurrency"), self, event),
                        _group(concrete.get("concurrency"), self, event),
                    )
                    if g
                )
                if not concrete.get("runs-on"):
                    result.status, result.reason = (
                        "failure",
                        "runs-on is empty: no runner (repository variable not set)",
                    )
                elif any(results[n].status != "success" for n in needs):
                    result.status, result.reason = "skipped", "a job it needs did not succeed"
                elif "if" in concrete and not self.evaluate(concrete["if"], event, None, results):
                    result.status, result.reason = "skipped", f"if: {concrete['if']}"
                else:
                    try:
                        self._environment_gate(concrete, event, approve, job_id)
                        ctx = JobContext(self, workflow, concrete, event, result)
                        ctx.needs = {n: results[n] for n in needs}
                        try:
                            ctx.run_steps()
                        finally:
                            result.steps = ctx.outputs
                        result.outputs = {
                            k: str(self.substitute(v, event, ctx.outputs))
                            for k, v in (concrete.get("outputs") or {}).items()
                        }
                    except StepFailed as exc:
                        result.status, result.reason = "failure", str(exc)
                results[job_id] = result
                self.jobs.append(result)
                self.log.append(
                    f"{workflow_file}#{run_number} {job_id}: {result.status}"
                    + (f" ({result.reason})" if result.reason else "")
                )
        return results

    def _environment_gate(self, job: dict[str, Any], event: Event, approve, job_id: str) -> None:
        name = job.get("environment")
        if not name:
            return
        settings = self.repo.environments.get(name)
        if settings is None:
            # No protection rules means no approval: the walk requires the checklist's reviewers
            # and branch rule (docs.github.com/actions/reference/deployments-and-environments).
            raise StepFailed(f"environment {name!r} is not configured: no required reviewers")
        if not settings.get("reviewers"):
            raise StepFailed(f"environment {name!r} has no required reviewers")
        # Deployment branches are matched against the run's ref: a pull request's refs/pull/N/merge
        # never matches; a workflow_run run's ref is the default branch's.
        branch = event.ref.removeprefix("refs/heads/")
        if not event.ref.startswith("refs/heads/") or branch not in settings.get("branches", []):
            raise StepFailed(
                f"environment {name!r} admits deployments from {settings.get('branches')} only, not {event.ref}"
            )
        self.log.append(f"  approval requested: {job_id} ({name})")
        if not approve(job_id, name):
            raise StepFailed(f"{name}: rejected by its reviewers")


def _group(concurrency: Any, pipeline: Pipeline, event: Event) -> str | None:
    if not concurrency:
        return None
    group = concurrency["group"] if isinstance(concurrency, dict) else concurrency
    return pipeline.substitute(group, event)


def _topological(jobs: dict[str, Any]) -> list[str]:
    order: list[str] = []

    def visit(job_id: str) -> None:
        if job_id in order:
            return
        needs = jobs[job_id].get("needs") or []
        for need in [needs] if isinstance(needs, str) else needs:
            visit(need)
        order.append(job_id)

    for job_id in jobs:
        visit(job_id)
    return order


class JobContext:
    """One job on its runner: the credentials it assumed and what its steps did."""

    def __init__(
        self, pipeline: Pipeline, workflow: dict[str, Any], job: dict[str, Any], event: Event, result: JobRun
    ) -> None:
        self.p, self.workflow, self.job, self.event, self.result = pipeline, workflow, job, event, result
        # What is checked out: the event's commit, until a step checks out another (the drift check).
        self.checkout: Commit = event.commit
        self.role: str | None = None
        self.cli = False
        self.outputs: dict[str, dict[str, str]] = {}  # step id -> its outputs ($GITHUB_OUTPUT)
        self.step_id: str | None = None
        self.needs: dict[str, JobRun] = {}  # the jobs it needs, for `needs.<id>.outputs` in its steps

    def run_steps(self) -> None:
        for step in self.job["steps"]:
            if "if" in step and not self.p.evaluate(step["if"], self.event, self.outputs):
                self.p.log.append(
                    f"  skipped: {step.get('name') or step.get('uses', '').split('@')[0]} (if: {step['if']})"
                )
                continue
            self.step_id = step.get("id")
            # GitHub docs, "Workflow syntax", steps[*].continue-on-error: a failing step with it
            # true does not fail the job (its outcome is failure, its conclusion success).
            tolerated = step.get("continue-on-error", False)
            if isinstance(tolerated, str):
                tolerated = self.p.evaluate(tolerated, self.event, self.outputs, self.needs)
            step = self.p.substitute(
                {k: v for k, v in step.items() if k != "continue-on-error"}, self.event, self.outputs
            )
            try:
                self.run_step(step)
            except StepFailed as exc:
                if not tolerated:
                    raise
                self.result.tolerated.append(str(exc))
                self.p.log.append(f"  failed, continue-on-error: {exc}")

    def run_step(self, step: dict[str, Any]) -> None:
        action = step.get("uses", "").split("@")[0]
        if action == "actions/checkout":
            self.check_out((step.get("with") or {}).get("ref"))
        elif action in ("actions/setup-python", "actions/github-script"):
            return
        elif action == "aws-actions/configure-aws-credentials":
            self.assume(step["with"])
        elif action == "pulumi/actions":
            self.pulumi_action(step["with"])
        elif "run" in step:
            self.shell(step["run"], step.get("env") or {})
        else:
            raise AssertionError(f"the simulation does not know the step {step}")

    def check_out(self, ref: str | None) -> None:
        """actions/checkout v7.0.1 (action.yml `ref`): the named commit, else the event's GITHUB_SHA."""
        if not ref:
            self.checkout = self.event.commit
            return
        if ref not in self.p.commits:
            raise StepFailed(f"actions/checkout: {ref!r} is not a commit of this repository")
        self.checkout = self.p.commits[ref]

    # --- configure-aws-credentials ---

    def subject(self) -> str:
        prefix = self.p.repo.subject_prefix
        if self.job.get("environment"):
            return f"{prefix}:environment:{self.job['environment']}"
        if self.event.name == "pull_request":
            return f"{prefix}:pull_request"
        return f"{prefix}:ref:{self.event.ref}"

    def assume(self, options: dict[str, Any]) -> None:
        arn = options.get("role-to-assume") or ""
        if not arn:
            raise StepFailed("configure-aws-credentials: role-to-assume is empty (repository variable not set)")
        if "id-token" not in (self.job.get("permissions") or {}):
            raise StepFailed("configure-aws-credentials: no id-token permission, no OIDC token")
        _, role = self.p.account.role(arn)
        (statement,) = json.loads(role.inputs["assumeRolePolicy"])["Statement"]
        equals = statement["Condition"]["StringEquals"]
        subjects = equals[SUB] if isinstance(equals[SUB], list) else [equals[SUB]]
        subject = self.subject()
        if subject not in subjects or equals[AUD] != "sts.amazonaws.com":
            raise StepFailed(f"AssumeRoleWithWebIdentity: {arn} does not trust {subject}")
        duration = int(options.get("role-duration-seconds") or 3600)
        if duration > role.inputs["maxSessionDuration"]:
            raise StepFailed(f"AssumeRoleWithWebIdentity: {duration} s exceeds {arn}'s MaxSessionDuration")
        self.role, self.result.role, self.result.subject = arn, arn, subject

    # --- pulumi/actions ---

    def backend(self, url: str) -> Backend:
        if url not in self.p.account.backends:
            raise StepFailed(f"pulumi login {url!r}: no such backend")
        backend = self.p.account.backends[url]
        if not backend.meta:
            raise StepFailed(f"{url}: .pulumi/meta.yaml missing, and a pipeline role may not create it")
        return backend

    def need(self, action: str, resource: str) -> None:
        if self.role is None or not self.p.account.can(self.role, action, resource):
            raise StepFailed(f"AccessDenied: {self.role} may not {action} {resource}")

    def pulumi_action(self, options: dict[str, Any]) -> None:
        self.cli = True
        command = options.get("command")
        if not command:
            return  # install only
        work_dir = (FIXTURE_ROOT / options["work-dir"]).resolve()
        project = project_name(work_dir)
        stack = options["stack-name"]
        backend = self.backend(options["cloud-url"])
        if (project, stack) not in backend.stacks:
            raise StepFailed(f"selectStack: no stack named '{stack}' found in {backend.url} ({project})")
        self.p.cache.check_policy_config(work_dir, options)
        self.p.log.append(f"  pulumi {command} {project}/{stack} @ {self.checkout.sha} as {self.role}")
        if command == "preview":
            self.p.cache.simulate(self, backend, project, stack, options, preview=True)
        elif command == "up":
            self.p.cache.simulate(self, backend, project, stack, options, preview=False)
        else:
            raise AssertionError(f"the simulation does not run `pulumi {command}`")

    # --- run: steps ---

    def shell(self, script: str, env: dict[str, str]) -> None:
        command = " ".join(script.split())
        if command in (".ci/run", "make .venv/.installed"):
            return  # the test suite is this run; the virtualenv is the one running it
        if command.startswith('make plan BASE="$BASE_SHA"'):
            if not env.get("BASE_SHA"):
                raise StepFailed("offline plan diff: no base revision")
            return self.offline_plan()
        if command.startswith('if [ -n "$DEPLOYED" ]; then bin/plan --base "$DEPLOYED" --stacks'):
            # The data-store gate against the deployed commit: offline, no credentials
            # (tests/test_prod_protection.py runs it on real plans); its base must be a known commit.
            deployed = env.get("DEPLOYED", "")
            if deployed and deployed not in self.p.commits:
                raise StepFailed(f"bin/plan --base {deployed}: not a commit in this checkout's history")
            return
        if "-m tools.cluster_change" in command:
            argv = shlex.split(command)
            return self.cluster_change(argv[argv.index("tools.cluster_change") + 1 :])
        if "-m tools.workloads_preflight" in command:
            argv = shlex.split(command)
            args = argv[argv.index("tools.workloads_preflight") + 1 :]
            return self.p.cache.preflight(self, env, args)
        if "-m tools.deploy_order" in command:
            argv = shlex.split(command)
            args = [
                a.replace('"$STACK"', env.get("STACK", ""))
                .replace("$STACK", env.get("STACK", ""))
                .replace("$WORK_DIR", env.get("WORK_DIR", ""))
                for a in argv[argv.index("tools.deploy_order") + 1 :]
            ]
            return self.deploy_order(env, args)
        if command == 'git checkout --detach "$COMMIT"':
            if env["COMMIT"] not in self.p.commits:
                raise StepFailed(f"git checkout: {env['COMMIT']} is not in this checkout's history")
            self.checkout = self.p.commits[env["COMMIT"]]
            self.p.log.append(f"  git checkout {self.checkout.sha}")
            return
        if "pulumi preview" in command and "--expect-no-changes" in command:
            return self.drift_check(env)
        raise AssertionError(f"the simulation does not know how to run: {command}")

    def offline_plan(self) -> None:
        """The part of `make plan BASE=<base>` a walk relies on: every stack of this revision planned
        offline, each workload stack against the cluster plan of its own revision (offline/plan/
        command.py plan_workloads), a refusal failing the step. The comparison itself is
        tests/test_plan_diff.py's."""
        for stack in ("dev", "prod"):
            cluster = self.p.cache.program(CLUSTER, stack, self.checkout.config(CLUSTER, stack), {}, True, None)
            config = self.checkout.config(WORKLOADS, stack)
            reference = config[f"{WORKLOADS}:clusterStack"]
            self.p.cache.program(WORKLOADS, stack, config, {reference: cluster.as_stack_outputs()}, False, None)

    def cluster_change(self, args: list[str]) -> None:
        """tools/cluster_change.py, for real, on the plans `make plan BASE=<base>` leaves: the cluster
        stack's offline plan of the pull request's base commit and of its own (each its stack files)."""
        import contextlib
        import io
        import os
        import tempfile

        import tools.cluster_change as change

        stack = args[args.index("--stack") + 1]
        base = self.p.commits.get(self.event.commit.parent or "")
        if base is None:
            raise StepFailed(f"offline plan diff: base revision {self.event.commit.parent} unknown")
        with (
            tempfile.TemporaryDirectory() as plans,
            tempfile.NamedTemporaryFile("r", suffix=".out") as output,
            tempfile.NamedTemporaryFile("r", suffix=".md") as summary,
        ):
            for revision, commit in (("base", base), ("head", self.checkout)):
                planned = self.p.cache.program(CLUSTER, stack, commit.config(CLUSTER, stack), {}, True, None)
                path = Path(plans) / revision / CLUSTER / stack / "resources.json"
                path.parent.mkdir(parents=True)
                path.write_text(json.dumps(planned.as_json()))
            names = ("GITHUB_OUTPUT", "GITHUB_STEP_SUMMARY")
            saved = {n: os.environ.get(n) for n in names}
            os.environ.update(GITHUB_OUTPUT=output.name, GITHUB_STEP_SUMMARY=summary.name)
            try:
                out = io.StringIO()
                with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
                    code = change.main([*args[:-1], plans])
            finally:
                for name, value in saved.items():
                    if value is None:
                        os.environ.pop(name, None)
                    else:
                        os.environ[name] = value
            if code != 0:
                raise StepFailed(f"cluster_change exited {code}: {out.getvalue().strip()}")
            written = dict(line.split("=", 1) for line in output.read().splitlines() if "=" in line)
            self.result.summary += summary.read()
        if self.step_id:
            self.outputs[self.step_id] = written
        self.p.log.append(f"  cluster_change {' '.join(args)}: " + " ".join(out.getvalue().split()))

    def deploy_order(self, env: dict[str, str], args: list[str]) -> None:
        """tools/deploy_order.py, for real, against the simulated CLI, git and $GITHUB_OUTPUT."""
        import contextlib
        import io
        import os
        import tempfile

        import tools.deploy_order as order

        if not self.cli:
            raise StepFailed("deploy_order: the pulumi CLI is not installed in this job")
        backend = self.backend(env.get("PULUMI_BACKEND_URL", ""))
        head = self.checkout.sha

        def run(argv: list[str], cwd: Any = None, **kwargs: Any) -> subprocess.CompletedProcess:
            if argv[:3] == ["pulumi", "stack", "history"]:
                project = project_name(Path(cwd))
                stack = argv[argv.index("--stack") + 1]
                self.need("s3:ListBucket", backend.bucket_arn)
                state = backend.stacks.get((project, stack))
                if state is None:
                    return subprocess.CompletedProcess(argv, 255, "", f"error: no stack named '{stack}' found\n")
                return subprocess.CompletedProcess(argv, 0, json.dumps(state.history[:1]), "")
            if argv[:3] == ["git", "rev-parse", "HEAD"]:
                return subprocess.CompletedProcess(argv, 0, head + "\n", "")
            if argv[:3] == ["git", "merge-base", "--is-ancestor"]:
                known = self.p.is_ancestor(argv[3], argv[4])
                return subprocess.CompletedProcess(argv, {True: 0, False: 1, None: 128}[known], "", "")
            raise AssertionError(f"deploy_order ran something the simulation does not answer: {argv}")

        with (
            tempfile.NamedTemporaryFile("r", suffix=".out") as output,
            tempfile.NamedTemporaryFile("r", suffix=".md") as summary,
        ):
            names = ("GITHUB_OUTPUT", "GITHUB_STEP_SUMMARY")
            saved, saved_env = order.subprocess.run, {n: os.environ.get(n) for n in names}
            order.subprocess.run = run
            os.environ.update(GITHUB_OUTPUT=output.name, GITHUB_STEP_SUMMARY=summary.name)
            try:
                out = io.StringIO()
                with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
                    code = order.main(args)
            finally:
                order.subprocess.run = saved
                for name, value in saved_env.items():
                    if value is None:
                        os.environ.pop(name, None)
                    else:
                        os.environ[name] = value
            if code != 0:
                raise StepFailed(f"deploy_order exited {code}: {out.getvalue().strip()}")
            written = dict(line.split("=", 1) for line in output.read().splitlines() if "=" in line)
            self.result.summary += summary.read()
        if self.step_id:
            self.outputs[self.step_id] = written
        self.p.log.append(f"  deploy_order {' '.join(args)}: " + " ".join(out.getvalue().split()))

    def drift_check(self, env: dict[str, str]) -> None:
        """drift.yml's `pulumi preview --refresh --expect-no-changes` of the checked-out commit: exit 0
        when the program declares what the stack's state holds (the stand-in account never changes
        behind the state's back, so a difference is the program's), else 255 (pulumi/pulumi v3.259.0
        pkg/cmd/pulumi/operations/preview.go: --expect-no-changes "Return an error if any changes
        occur during this preview"). The status goes to $GITHUB_OUTPUT as the workflow's script does."""
        if not self.cli:
            raise StepFailed("drift check: the pulumi CLI is not installed in this job")
        backend = self.backend(env.get("PULUMI_BACKEND_URL", ""))
        work_dir = (FIXTURE_ROOT / env["WORK_DIR"]).resolve()
        project, stack = project_name(work_dir), env["STACK"]
        state = backend.stacks[(project, stack)]
        self.p.log.append(
            f"  pulumi preview --expect-no-changes {project}/{stack} @ {self.checkout.sha} as {self.role}"
        )
        for obj in ("checkpoint",):
            self.need("s3:GetObject", stack_objects(backend.bucket_arn, project, stack)[obj])
        self.need("kms:Decrypt", backend.state_key)
        self.need("kms:Decrypt", state.secrets_key)
        config = self.checkout.config(project, stack)
        references = self.p.cache.references(self, backend, config) if project == WORKLOADS else {}
        existing = None
        if project == CLUSTER and state.outputs is not None:  # as the update that wrote the state saw it
            entries = {
                r.inputs["principalArn"]: dict(r.inputs.get("tags") or {})
                for r in state.registrations
                if r.type == "aws:eks/accessEntry:AccessEntry"
            }
            existing = ExistingCluster({fixtures.DEPLOYER_ROLE_ARN: {}, **entries})
        result = self.p.cache.program(project, stack, config, references, False, existing)
        declared = {r.urn: r.inputs for r in result.registrations}
        held = {urn: extra.get("inputs") for urn, extra in state.resources.items()}
        status = "0" if declared == held else "255"
        self.outputs[self.step_id or "check"] = {"status": status}
        self.p.log.append(f"    drift: {'none' if status == '0' else 'changes'}")


# --- the programs, evaluated once per (config, what they read) ----------------------------------


# An update is a real `pulumi up` (infra/validate.py check_against_the_account): it refuses an API
# allow-list that does not hold the runner's address. Every update of prod runs on PROD_RUNNER,
# whose static egress address this is; dev's list is open to the internet, so dev never asks.
RUNNER_EGRESS_IP = "52.94.133.131"
RUNNER_DEPLOY = DeployContext(deploying=lambda: True, egress_ipv4=lambda: RUNNER_EGRESS_IP)


def _key(*parts: Any) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()


class ProgramCache:
    """Runs the repository's programs under mocks (offline/plan/runner.py), each distinct input once."""

    def __init__(self) -> None:
        self.runs: dict[str, Any] = {}

    def program(
        self,
        project: str,
        stack: str,
        config: dict[str, str],
        references: dict[str, StackOutputs],
        preview: bool,
        existing: ExistingCluster | None,
    ) -> PlanResult:
        project_dir = PROJECT_DIRS[project]
        # Only the workload program reads is_dry_run (workloads/__main__.py); the cluster program's
        # preview is told by its deploy context, and an update runs as `pulumi up` does: its
        # deploy-time checks refuse.
        dry_run = preview and project == WORKLOADS
        inputs = (
            project,
            stack,
            config,
            {k: (dict(v.outputs), sorted(v.secret_names)) for k, v in references.items()},
            dry_run,
            existing and dict(existing.access_entries),
        )

        def run(deploy: DeployContext | None) -> Any:
            key = _key(*inputs, deploy is None)
            if key not in self.runs:
                try:
                    secrets = offline_secrets(project_dir, stack, config) if project == WORKLOADS else None
                    self.runs[key] = run_program(
                        project_dir, stack, config, references, secrets, existing, preview=dry_run, deploy=deploy
                    )
                except Exception as exc:  # the program refused (ConfigError) or failed: the step fails
                    self.runs[key] = exc
            return self.runs[key]

        # A cluster preview declares what the update of the same inputs declares whenever that
        # update passes its deploy-time checks, which only refuse where a preview warns (infra/
        # validate.py; tests/test_day_one.py checks the two agree): one run serves both.
        result = run(RUNNER_DEPLOY if not preview or project == CLUSTER else None)
        if preview and project == CLUSTER and isinstance(result, Exception):
            result = run(None)
        if isinstance(result, Exception):
            raise StepFailed(f"{project}/{stack}: {type(result).__name__}: {result}")
        return result

    def check_policy_config(self, work_dir: Path, options: dict[str, Any]) -> None:
        # The pack is the repository's; its configuration the stacks' (the fixture's copy).
        pack = (REPO_ROOT / work_dir.relative_to(FIXTURE_ROOT) / options["policyPacks"]).resolve()
        config = (work_dir / options["policyPackConfigs"]).resolve()
        if not (pack / "PulumiPolicy.yaml").exists() or not config.exists():
            raise StepFailed(f"policy pack {pack} or its config {config} missing")

    def policy(
        self, result: PlanResult, work_dir: Path, options: dict[str, Any], region: str, stack: dict[str, str]
    ) -> list[str]:
        """The pack's mandatory findings, given the stack's config as the engine gives a Python pack
        (PULUMI_CONFIG: policy/guardrails/readiness.py)."""
        from offline.plan.policy_run import load_config, run_policies

        key = _key("policy", id(result), options["policyPackConfigs"])
        if key not in self.runs:
            config = load_config((work_dir / options["policyPackConfigs"]).resolve())
            report = run_policies(result.registrations, config, region, stack_config=stack)
            self.runs[key] = [f"{v.policy}: {v.message}" for v in report.mandatory]
        return self.runs[key]

    def references(self, ctx: JobContext, backend: Backend, config: dict[str, str]) -> dict[str, StackOutputs]:
        reference = config.get(f"{WORKLOADS}:clusterStack", "")
        _, project, stack = reference.split("/")
        state = backend.stacks.get((project, stack))
        if state is None:
            return {}  # the mocks then fail the StackReference, as Pulumi does for a missing stack
        ctx.need("s3:GetObject", stack_objects(backend.bucket_arn, project, stack)["checkpoint"])
        return {reference: StackOutputs(state.outputs or {}, state.secret_outputs)}

    def simulate(
        self, ctx: JobContext, backend: Backend, project: str, stack: str, options: dict[str, Any], preview: bool
    ) -> None:
        state = backend.stacks[(project, stack)]
        objects = stack_objects(backend.bucket_arn, project, stack)
        ctx.need("s3:GetObject", objects["checkpoint"])
        ctx.need("kms:Decrypt", backend.state_key)  # SSE-KMS object read
        ctx.need("kms:Decrypt", state.secrets_key)  # the stack's awskms:// data key
        if not preview:
            # An update holds its stack's concurrency group, the one the drift check of that stack
            # shares, so no two updates of a stack and no drift check run beside it.
            if ctx.result.workflow != "laptop" and f"pulumi-{project}-{stack}" not in ctx.result.groups:
                raise StepFailed(f"pulumi up {project}/{stack} outside the concurrency group pulumi-{project}-{stack}")
            for action in ("s3:PutObject", "s3:DeleteObject"):
                ctx.need(action, objects["lock"])
            ctx.need("s3:PutObject", objects["checkpoint"])
            ctx.need("s3:PutObject", objects["history"])
            ctx.need("kms:GenerateDataKey", backend.state_key)
            ctx.need("kms:Encrypt", state.secrets_key)
        config = ctx.checkout.config(project, stack)
        references = self.references(ctx, backend, config) if project == WORKLOADS else {}
        # `--refresh` reads every Kubernetes object in the state through the cluster's API:
        # the role needs an access entry there (EKS creator entry, clusterAdmins or clusterViewers).
        if options.get("refresh") and any(
            urn.split("::")[2].split("$")[-1].startswith("kubernetes:") for urn in state.resources
        ):
            self.need_kubernetes(ctx, backend, project, stack)
        existing = None
        if project == CLUSTER and state.outputs is not None:
            entries = {
                r.inputs["principalArn"]: dict(r.inputs.get("tags") or {})
                for r in state.registrations
                if r.type == "aws:eks/accessEntry:AccessEntry"
            }
            existing = ExistingCluster({fixtures.DEPLOYER_ROLE_ARN: {}, **entries})
        result = self.program(project, stack, config, references, preview, existing)
        work_dir = (FIXTURE_ROOT / options["work-dir"]).resolve()
        mandatory = self.policy(result, work_dir, options, config.get("aws:region", ""), config)
        if mandatory:
            raise StepFailed(f"{project}/{stack}: mandatory policy violations: {mandatory}")
        if preview:
            waiting = (result.outputs.get("workloads") or {}).get("waitingFor") if project == WORKLOADS else None
            ctx.p.log.append(
                f"    preview: {len(result.registrations)} resources" + (f", waiting for {waiting}" if waiting else "")
            )
            return
        blocked = gangs_that_never_start(result, references, state) if project == WORKLOADS else {}
        # As `pulumi stack export` shows them: each resource's inputs, and initErrors for a create
        # whose await failed.
        state.resources = {
            r.urn: {"inputs": r.inputs, **({"initErrors": [blocked[r.urn]]} if r.urn in blocked else {})}
            for r in result.registrations
        }
        state.registrations = list(result.registrations)
        state.outputs, state.secret_outputs = dict(result.outputs), frozenset(result.secret_outputs)
        state.commit = ctx.checkout.sha
        state.history.insert(
            0,
            {
                "kind": "update",
                "result": "failed" if blocked else "succeeded",
                "environment": {"git.head": ctx.checkout.sha},
            },
        )
        if project == CLUSTER and state.creator is None:
            state.creator = ctx.role
        if blocked:
            raise StepFailed(f"{project}/{stack}: " + "; ".join(sorted(blocked.values())))

    def need_kubernetes(self, ctx: JobContext, backend: Backend, project: str, stack: str) -> None:
        cluster = backend.stacks.get((CLUSTER, stack))
        viewers = {
            r.inputs["principalArn"]
            for r in (cluster.registrations if cluster else [])
            if r.type == "aws:eks/accessEntry:AccessEntry"
        }
        if cluster is None or (ctx.role != cluster.creator and ctx.role not in viewers):
            raise StepFailed(
                f"{project}/{stack}: {ctx.role} has no access entry on the {stack} cluster "
                "(clusterViewers / clusterAdmins): the refresh cannot read its Kubernetes objects"
            )

    # --- tools/workloads_preflight.py, for real, against the simulated CLI and ECR ---

    def preflight(self, ctx: JobContext, env: dict[str, str], args: list[str]) -> None:
        import tools.workloads_preflight as preflight

        if not ctx.cli:
            raise StepFailed("workloads_preflight: the pulumi CLI is not installed in this job")
        backend = ctx.backend(env.get("PULUMI_BACKEND_URL", ""))
        stack = args[args.index("--stack") + 1]
        commit = ctx.checkout
        config = commit.config(WORKLOADS, stack)
        reference = config[f"{WORKLOADS}:clusterStack"]
        cluster_stack = reference.split("/")[-1]
        cluster_state = backend.stacks.get((CLUSTER, cluster_stack))

        def planned(
            _stack: str, deployed: dict[str, Any] | None = None, admissions: dict[str, Any] | None = None
        ) -> tuple[PlanResult, PlanResult]:
            # What the preflight renders from the checked-out stack files (this commit's), with the
            # deployed cluster's outputs where `pulumi stack output --json` shows them, and the workload
            # stack's own Capacity Block admissions.
            cluster = self.program(CLUSTER, cluster_stack, commit.config(CLUSTER, cluster_stack), {}, True, None)
            outputs = cluster.as_stack_outputs()
            if deployed is not None:
                real = {k: v for k, v in deployed.items() if v != preflight.MASKED}
                outputs = StackOutputs({**outputs.outputs, **real}, outputs.secret_names)
            references = {reference: outputs}
            if admissions is not None:
                own = f"{ORGANIZATION}/{WORKLOADS}/{stack}"
                references[own] = StackOutputs({"stepAdmissions": admissions}, frozenset())
            workloads = self.program(WORKLOADS, stack, config, references, False, None)
            return cluster, workloads

        def cli(argv: list[str], **kwargs: Any) -> subprocess.CompletedProcess:
            if argv[:3] == ["pulumi", "stack", "output"] and argv[argv.index("--stack") + 1] == stack:
                # The workload stack's own outputs (its stepAdmissions), masked as the CLI shows them.
                ctx.need("s3:GetObject", stack_objects(backend.bucket_arn, WORKLOADS, stack)["checkpoint"])
                own_state = backend.stacks.get((WORKLOADS, stack))
                if own_state is None:
                    return subprocess.CompletedProcess(argv, 255, "", f"error: no stack named '{stack}' found\n")
                shown = {
                    k: (preflight.MASKED if k in own_state.secret_outputs else v)
                    for k, v in (own_state.outputs or {}).items()
                }
                return subprocess.CompletedProcess(argv, 0, json.dumps(shown), "")
            if argv[:3] == ["pulumi", "stack", "output"]:
                ctx.need("s3:GetObject", stack_objects(backend.bucket_arn, CLUSTER, cluster_stack)["checkpoint"])
                if cluster_state is None:
                    return subprocess.CompletedProcess(
                        argv, 255, "", f"error: no stack named '{cluster_stack}' found\n"
                    )
                if argv[3] == "--json":  # every output, secrets masked as the CLI shows them
                    shown = {
                        k: (preflight.MASKED if k in cluster_state.secret_outputs else v)
                        for k, v in (cluster_state.outputs or {}).items()
                    }
                    return subprocess.CompletedProcess(argv, 0, json.dumps(shown), "")
                name = argv[3]
                if not cluster_state.outputs or name not in cluster_state.outputs:
                    return subprocess.CompletedProcess(
                        argv, 255, "", f'error: current stack does not have output property "{name}"\n'
                    )
                return subprocess.CompletedProcess(argv, 0, json.dumps(cluster_state.outputs[name]), "")
            if argv[:3] == ["pulumi", "stack", "export"]:
                ctx.need("s3:GetObject", stack_objects(backend.bucket_arn, WORKLOADS, stack)["checkpoint"])
                state = backend.stacks.get((WORKLOADS, stack))
                if state is None:
                    return subprocess.CompletedProcess(argv, 255, "", f"error: no stack named '{stack}' found\n")
                resources = [{"urn": urn, **extra} for urn, extra in state.resources.items()]
                return subprocess.CompletedProcess(
                    argv, 0, json.dumps({"version": 3, "deployment": {"resources": resources}}), ""
                )
            if argv[:3] == ["aws", "ecr", "describe-images"]:
                repository = argv[argv.index("--repository-name") + 1]
                tag = argv[argv.index("--image-ids") + 1].removeprefix("imageTag=")
                if (repository, tag) in self_images:
                    return subprocess.CompletedProcess(argv, 0, "{}", "")
                return subprocess.CompletedProcess(argv, 254, "", "An error occurred (ImageNotFoundException)\n")
            raise AssertionError(f"the preflight ran something the simulation does not answer: {argv}")

        def checked_out(_stack: str) -> tuple[dict[str, str], dict[str, str]]:
            # The checked-out commit's workload stack file, as the preflight reads it from the checkout.
            return config, preflight.offline_secrets(PROJECT_DIRS[WORKLOADS], stack, config)

        self_images = ctx.p.account.images
        saved = (preflight.subprocess.run, preflight.plan, preflight.workload_config)
        preflight.subprocess.run, preflight.plan, preflight.workload_config = cli, planned, checked_out
        try:
            import contextlib
            import io

            out, err = io.StringIO(), io.StringIO()
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                code = preflight.main(args)
        finally:
            preflight.subprocess.run, preflight.plan, preflight.workload_config = saved
        if code != 0:
            raise StepFailed(f"workloads_preflight exited {code}: {(err.getvalue() + out.getvalue()).strip()}")
        ctx.p.log.append(f"  workloads_preflight {' '.join(args)}: " + " ".join(out.getvalue().split()))


# --- Kubernetes, as far as `pulumi up` of a workload stack depends on it ----------------------------


def _trainium_gangs(result: PlanResult, groups: list[dict[str, Any]]) -> dict[str, dict[str, int]]:
    """urn -> {node group: nodes} for every object whose pods run on an accelerator group: a pod
    template with replicas (Volcano task, MPIJob replica spec, Ray worker group; a Job's
    parallelism), placed by the group's labels, each pod taking its Neuron devices of a node."""
    gangs: dict[str, dict[str, int]] = {}

    def walk(value: Any, found: dict[str, int]) -> None:
        if isinstance(value, dict):
            pod = (value.get("template") or {}).get("spec") if isinstance(value.get("template"), dict) else None
            if isinstance(pod, dict) and "containers" in pod:
                selector = pod.get("nodeSelector") or {}
                for group in groups:
                    labels = group.get("labels") or {}
                    if labels and all(selector.get(k) == v for k, v in labels.items()):
                        devices = sum(
                            int((c.get("resources") or {}).get("limits", {}).get(NEURON, 0) or 0)
                            for c in pod["containers"]
                        )
                        pods = int(value.get("replicas") or value.get("parallelism") or 1)
                        per_node = max(1, int(group["neuronDevices"]) // max(devices, 1))
                        found[group["name"]] = found.get(group["name"], 0) + math.ceil(pods / per_node)
            for v in value.values():
                walk(v, found)
        elif isinstance(value, list):
            for v in value:
                walk(v, found)

    for r in result.registrations:
        found: dict[str, int] = {}
        walk(r.inputs.get("spec"), found)
        if found:
            gangs[r.urn] = found
    return gangs


def gangs_that_never_start(
    result: PlanResult, references: dict[str, StackOutputs], state: StackState
) -> dict[str, str]:
    """Awaited steps this `up` waits for whose Trainium gang can never be placed: the nodes it
    needs plus those held by training runs `up` does not wait for (skipAwait: they run on after
    it) and that do not come after it, exceed the group's maxSize. Volcano binds a gang only
    whole (volcano v1.15.1 plugins/gang/gang.go), so it waits until its await times out; the
    resource is then in the state with initErrors and every later `up` waits for it again
    (pulumi pkg/resource/deploy/step_generator.go). Waits behind runs that do end are the
    preflight's and the workload checks' business, not this model's."""
    (outputs,) = [ref.outputs for ref in references.values()] or [{}]
    groups = outputs.get("acceleratorNodeGroups") or []
    max_size = {g["name"]: int(g["maxSize"]) for g in groups}
    gangs = _trainium_gangs(result, groups)
    by_urn = {r.urn: r for r in result.registrations}
    done = {urn for urn, extra in state.resources.items() if not extra.get("initErrors")}

    def annotations(urn: str) -> dict[str, str]:
        return ((by_urn[urn].inputs.get("metadata") or {}).get("annotations")) or {}

    def after(urn: str) -> set[str]:
        later, frontier = set(), [urn]
        while frontier:
            current = frontier.pop()
            for r in result.registrations:
                if current in r.dependencies and r.urn not in later:
                    later.add(r.urn)
                    frontier.append(r.urn)
        return later

    long_running = [u for u in gangs if annotations(u).get(SKIP_AWAIT) == "true"]
    blocked: dict[str, str] = {}
    for urn, need in gangs.items():
        if TIMEOUT not in annotations(urn) or annotations(urn).get(SKIP_AWAIT) == "true" or urn in done:
            continue
        beside = [u for u in long_running if u != urn and u not in after(urn)]
        for group, nodes in need.items():
            held = sum(gangs[u].get(group, 0) for u in beside)
            if nodes + held > max_size.get(group, 0):
                holders = ", ".join(sorted(by_urn[u].inputs["metadata"]["name"] for u in beside if gangs[u].get(group)))
                blocked[urn] = (
                    f"{by_urn[urn].inputs['metadata']['name']} needs {nodes} nodes of {group} "
                    f"(maxSize {max_size.get(group, 0)}) while {holders} hold {held}: it never starts"
                )
    return blocked


# --- GitHub's concurrency groups --------------------------------------------------------------------


def queue_outcome(concurrency: dict[str, Any] | None, arrivals: list[str]) -> list[str]:
    """Which of ``arrivals`` (runs or jobs entering one group while the first still runs) run, in
    order. GitHub docs, "Control the concurrency of workflows and jobs": at most one running and,
    by default (`queue: single`), one pending, a newer pending one cancelling it; with `queue: max`
    up to 100 pending, first in, first out."""
    if not concurrency:
        return list(arrivals)  # no group: all run, side by side
    if concurrency.get("cancel-in-progress") is True:
        return arrivals[-1:]
    if concurrency.get("queue") == "max":
        return list(arrivals[:101])
    return arrivals[:1] + arrivals[-1:] if len(arrivals) > 1 else list(arrivals)


def workflow_file(name: str) -> Path:
    return WORKFLOWS / name


def workflow_concurrency(name: str) -> dict[str, Any] | None:
    return yaml.safe_load(workflow_file(name).read_text()).get("concurrency")


def deepcopy(value: Any) -> Any:
    return copy.deepcopy(value)
