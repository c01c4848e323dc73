"""Day one through the pipeline, offline: from an empty AWS account to dev and prod, then a day two.

The walk follows README "Running it from a pipeline", "The first day", in order, and drives the
workflows' own job graph (tests/pipeline_sim.py: needs, if-conditions, environments and their
reviewers, concurrency, every step's action or command) against a stand-in account and Pulumi
CLI whose state carries over from step to step: each `up` records the offline plan's resources
and outputs as that stack's state, each preview and StackReference reads it. It fails when a job
on the path fails on the empty account, when a job reads a stack before it exists, and when a
pull-request job could assume a role that reaches prod.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable
from typing import Any

import pytest

from offline.plan.runner import REPO_ROOT, PlanResult, run_program
from tests import pipeline_sim as sim
from tests.fixture_project import FIXTURE_ROOT
from tests.pipeline_sim import CLUSTER, WORKLOADS, Account, Backend, Commit, Event, Pipeline, Repository, StackState

REPO = "example-org/trainium-eks"
BOOTSTRAP_DIR = FIXTURE_ROOT / "bootstrap"
WORKLOAD_KEYS = ("dataStaging", "bertPretraining", "rayLlama2", "nxdLlama", "tensorboard", "clusterCheck")
DEPLOY_ORDER = [
    "cluster-dev",
    "workloads-dev",
    "preview-cluster-prod",
    "cluster-prod",
    "preview-workloads-prod",
    "workloads-prod",
]

# One program cache for the module: each stack is evaluated once per distinct input (its config
# and the outputs it reads), however many walks read it.
CACHE = sim.ProgramCache()


def test_a_cluster_update_that_passes_its_checks_declares_what_its_preview_declares(dev: PlanResult) -> None:
    # The program cache serves a cluster preview with the update of the same inputs when that
    # update passes (pipeline_sim.ProgramCache.program). Only infra/validate.py reads the deploy
    # context (infra/lookups.py holds it), and its checks refuse on `up` where a preview warns.
    readers = {
        path.relative_to(REPO_ROOT).as_posix()
        for path in [REPO_ROOT / "__main__.py", *(REPO_ROOT / "infra").rglob("*.py")]
        if re.search(r"deploy_context\(|DEPLOY_CONTEXT|PULUMI_CLI|is_dry_run", path.read_text())
    }
    assert readers == {"infra/validate.py", "infra/lookups.py"}
    # The shipped dev stack's first update, run as the walks below run theirs.
    update = CACHE.program(
        CLUSTER, "dev", sim.shipped_commit().config(CLUSTER, "dev"), {}, preview=False, existing=None
    )
    assert update.as_json() == dev.as_json()


# --- the team's first day, as the README's checklist has it -------------------------------------


# GitHub docs, "OpenID Connect" concepts, "Immutable subject claims" (github/docs PR #45221; changelog
# 2026-04-23): a repository created, renamed or transferred after mid-2026 gets tokens whose `sub`
# starts `repo:OWNER@OWNER_ID/REPO@REPO_ID`. The one-account walk's repository is such a one (its
# bootstrap sets oidcSubjectPrefix), the two-account walk's an older one (`repo:OWNER/REPO`).
IMMUTABLE_PREFIX = "repo:example-org@123456/trainium-eks@456789"
SUBJECT_PREFIX = {"two accounts": f"repo:{REPO}", "one account": IMMUTABLE_PREFIX}


@functools.cache
def bootstrap_plans(layout: str) -> dict[str, PlanResult]:
    """Checklist step 1: the administrator's `pulumi up` of the bootstrap, per account (read only
    by the walk, so evaluated once per layout)."""
    if layout == "two accounts":
        return {"dev": run_program(BOOTSTRAP_DIR, "dev"), "prod": run_program(BOOTSTRAP_DIR, "prod")}
    from offline.plan.runner import stack_config

    config = stack_config(BOOTSTRAP_DIR, "dev")
    config["trainium-bootstrap:environments"] = json.dumps(
        [
            {"name": "dev", "pullRequestPreviews": True},
            {"name": "prod", "githubEnvironment": True, "dataBuckets": ["example-org-trainium-prod-*"]},
        ]
    )
    config["trainium-bootstrap:oidcSubjectPrefix"] = IMMUTABLE_PREFIX
    return {"dev": run_program(BOOTSTRAP_DIR, "dev", config)}


def day_zero(layout: str, token_prefix: str | None = None) -> tuple[Pipeline, Account, Repository]:
    """Bootstrap (local state, then moved into its bucket), the four stacks created with their
    environment's secrets provider, the repository's variables, environment and runner.
    ``token_prefix``: what the repository's tokens' `sub` starts with, if not what the layout's
    bootstrap was configured for."""
    plans = bootstrap_plans(layout)
    account = Account(plans)
    repo = Repository(REPO, token_prefix or SUBJECT_PREFIX[layout])
    for stack, plan in plans.items():
        out = plan.outputs
        bucket_arn = f"arn:aws:s3:::{out['stateBucket']}"
        backend = account.backends.setdefault(
            out["backendUrl"], Backend(out["backendUrl"], bucket_arn, out["stateKeyArn"])
        )
        # The administrator's `pulumi login` of the empty bucket wrote .pulumi/meta.yaml, and the
        # bootstrap's own state moved in (`pulumi stack import`).
        backend.meta = True
        # Its secrets provider is the key of its own (docs/pipeline.md), no environment's.
        backend.stacks[("trainium-bootstrap", stack)] = StackState(
            secrets_key=out["bootstrapSecretsKeyArn"], outputs=dict(out)
        )
        for env in out["secretsProviders"]:
            for project in (CLUSTER, WORKLOADS):  # `pulumi stack init <env> --secrets-provider <provider>`
                backend.stacks[(project, env)] = StackState(secrets_key=out["secretsKeyArns"][env])
        repo.variables.update(out["repositoryVariables"])
    repo.variables["PROD_RUNNER"] = "static-ip-runner"
    pipeline = Pipeline(repo, account, CACHE)
    pipeline.commits["c0"] = sim.shipped_commit("c0")  # main before the first pull request
    repo.environments["prod"] = {"reviewers": ["platform-leads"], "branches": ["main"]}
    return pipeline, account, repo


PROD_ENDPOINT = {"public": True, "publicCidrs": [f"{sim.RUNNER_EGRESS_IP}/32"], "private": True}


def first_commit(account: Account) -> Commit:
    """The team's first pull request: each cluster lists its preview role under clusterViewers
    (the refresh reads Kubernetes), prod's API allow-list names the prod runner, and the workload
    stacks start empty: their images can only be pushed once the cluster's first up made the ECR
    repositories."""
    previews = {
        env: arn for plan in account.bootstraps.values() for env, arn in plan.outputs["previewRoleArns"].items()
    }
    edits = {(CLUSTER, env): sim.set_key(CLUSTER, "clusterViewers", [previews[env]]) for env in ("dev", "prod")}
    shipped = sim.shipped_commit("c0")
    commit = shipped.edited("c1", edits)
    # Prod's API allow-list: the shipped documentation range replaced by the prod runner's address.
    sim.set_key(CLUSTER, "endpointAccess", PROD_ENDPOINT)(commit.configs[(CLUSTER, "prod")])
    for env in ("dev", "prod"):
        for key in WORKLOAD_KEYS:
            sim.set_key(WORKLOADS, key, None)(commit.configs[(WORKLOADS, env)])
    return commit


def pull_request(pipeline: Pipeline, commit: Commit, number: int) -> dict[str, sim.JobRun]:
    return pipeline.run("pull-request.yml", Event("pull_request", f"refs/pull/{number}/merge", commit, number, REPO))


def with_prod(pipeline: Pipeline, dev: dict[str, sim.JobRun]) -> dict[str, sim.JobRun]:
    """A deploy.yml run's jobs and those of the deploy-prod.yml run its completion started, once
    that has run (while it waits for prod's group, only dev's)."""
    if not dev:
        return {}  # waiting for dev's group
    number = max(r.run for r in dev.values())  # a re-run keeps earlier attempts' jobs: its own is the newest
    prod = [r for r in pipeline.followers(number) if r.workflow == "deploy-prod.yml"]
    return {**dev, **(prod[-1].results if prod else {})}


def merge(
    pipeline: Pipeline,
    commit: Commit,
    approvals: list[tuple[str, str]] | None = None,
    approve: Callable[[str, str], bool] | None = None,
) -> dict[str, sim.JobRun]:
    """The push to main: deploy.yml, then the prod run its completion starts (workflow_run)."""

    def answer(job: str, environment: str) -> bool:
        if approvals is not None:
            approvals.append((job, environment))
        return approve(job, environment) if approve else True

    return with_prod(pipeline, pipeline.run("deploy.yml", Event("push", "refs/heads/main", commit), answer))


def push_images(account: Account, env: str) -> None:
    """Checklist: `make images STACK=<env>` from a machine with Docker, once the cluster is up."""
    from infra.facts.versions import TRAINING_IMAGE_TAG
    from tools.push_images import commands

    state = next(b.stacks[(CLUSTER, env)] for b in account.backends.values() if (CLUSTER, env) in b.stacks)
    for argv in commands(state.outputs["ecrRepositories"], TRAINING_IMAGE_TAG):
        if argv[:2] == ["docker", "push"]:
            url, tag = argv[2].rsplit(":", 1)
            account.images.add((url.split("/", 1)[1], tag))


def statuses(results: dict[str, sim.JobRun]) -> dict[str, str]:
    return {job: r.status + (f": {r.reason}" if r.status == "failure" else "") for job, r in results.items()}


def state_of(account: Account, project: str, env: str) -> StackState:
    return next(b.stacks[(project, env)] for b in account.backends.values() if (project, env) in b.stacks)


# Reading an object or any earlier version of it (S3 API reference, GetObject: with a versionId "you
# must have the s3:GetObjectVersion permission ... s3:GetObject is not required"; the state bucket is
# versioned), or its attributes.
STATE_READS = ("s3:GetObject", "s3:GetObjectVersion", "s3:GetObjectAttributes", "s3:GetObjectVersionAttributes")


def prod_reach(account: Account, role: str) -> list[str]:
    """What of prod ``role`` can reach: its state (any version), its secrets, its deploy role's
    trust, or the bootstrap's state and secrets (which name and could rewrite every role)."""
    reached = []
    for plan in account.bootstraps.values():
        out = plan.outputs
        bucket = f"arn:aws:s3:::{out['stateBucket']}"
        for stack in ("dev", "prod"):
            checkpoint = f"{bucket}/.pulumi/stacks/trainium-bootstrap/{stack}.json"
            reached += [f"{action} {checkpoint}" for action in STATE_READS if account.can(role, action, checkpoint)]
        if account.can(role, "kms:Decrypt", out["bootstrapSecretsKeyArn"]):
            reached.append("decrypts the bootstrap's secrets")
        if "prod" not in out["secretsKeyArns"]:
            continue
        for project in (CLUSTER, WORKLOADS):
            for obj in sim.stack_objects(bucket, project, "prod").values():
                reached += [f"{action} {obj}" for action in STATE_READS if account.can(role, action, obj)]
        if account.can(role, "kms:Decrypt", out["secretsKeyArns"]["prod"]):
            reached.append("decrypts prod's secrets")
        if role in (out["deployRoleArns"].get("prod"), out["previewRoleArns"].get("prod")):
            reached.append("is a prod role")
    return reached


# --- the walk -----------------------------------------------------------------------------------


@pytest.fixture(scope="module", params=["two accounts", "one account"])
def day_one(request: pytest.FixtureRequest) -> dict[str, Any]:
    pipeline, account, repo = day_zero(request.param)
    commit = first_commit(account)
    approvals: list[tuple[str, str]] = []
    pr = pull_request(pipeline, commit, 1)
    deploy = merge(pipeline, commit, approvals)
    return {
        "layout": request.param,
        "pipeline": pipeline,
        "account": account,
        "repo": repo,
        "commit": commit,
        "pr": pr,
        "deploy": deploy,
        "approvals": approvals,
    }


def test_the_first_pull_request_is_green_on_an_empty_account(day_one) -> None:
    # Branch protection requires these checks (README): every one must pass before any cluster exists.
    assert statuses(day_one["pr"]) == {"test": "success", "plan-diff": "success", "preview-dev": "success"}
    # The dev workload preview ran before dev's cluster existed and declared nothing, naming what it waits for.
    log = day_one["pipeline"].log
    at = log.index(next(line for line in log if "pulumi preview trainium-workloads/dev" in line))
    assert log[at + 1].strip() == "preview: 0 resources, waiting for organization/trainium-eks/dev"


def test_the_first_merge_brings_up_dev_then_prod_in_order_with_two_approvals(day_one) -> None:
    deploy = day_one["deploy"]
    assert statuses(deploy) == {"test": "success", **{job: "success" for job in DEPLOY_ORDER}}, day_one["pipeline"].log
    log = [
        line.split(" @ ")[0].strip()
        for line in day_one["pipeline"].log
        if line.strip().startswith(("pulumi", "approval"))
    ]
    merged = log[log.index("pulumi preview trainium-workloads/dev") + 1 :]  # after the pull request's previews
    assert merged == [
        "pulumi up trainium-eks/dev",
        "pulumi up trainium-workloads/dev",
        # deploy-prod.yml, started by dev's finished run: prod's cluster alone is previewed
        # before the first approval...
        "pulumi preview trainium-eks/prod",
        "approval requested: cluster-prod (prod)",
        "pulumi up trainium-eks/prod",
        # ...and its workloads once that cluster is up, before the second.
        "pulumi preview trainium-workloads/prod",
        "approval requested: workloads-prod (prod)",
        "pulumi up trainium-workloads/prod",
    ]
    assert day_one["approvals"] == [("cluster-prod", "prod"), ("workloads-prod", "prod")]
    for project in (CLUSTER, WORKLOADS):
        for env in ("dev", "prod"):
            state = state_of(day_one["account"], project, env)
            assert state.commit == "c1" and state.outputs is not None, (project, env)
    # Prod's first workload up ran against the cluster its run had just deployed (nothing switched on).
    assert state_of(day_one["account"], WORKLOADS, "prod").outputs["workloads"] == {}


def test_no_pull_request_job_holds_or_can_assume_a_role_that_reaches_prod(day_one) -> None:
    pipeline, account = day_one["pipeline"], day_one["account"]
    assumed = [j for j in pipeline.jobs if j.workflow == "pull-request.yml" and j.role]
    assert [j.job for j in assumed] == ["preview-dev"]
    prefix = SUBJECT_PREFIX[day_one["layout"]]
    for job in assumed:
        assert job.subject == f"{prefix}:pull_request"
        assert prod_reach(account, job.role) == [], (job.job, job.role)
    # The workflow file is the pull request's own: it may name any role. STS decides, on the
    # trust policy, from the token's subject (repo:O/R:pull_request whatever the head repository).
    for variable in ("AWS_PREVIEW_ROLE_PROD", "AWS_DEPLOY_ROLE_PROD"):
        hostile = {
            "permissions": {"id-token": "write"},
            "steps": [
                {
                    "uses": "aws-actions/configure-aws-credentials@x",
                    "with": {"role-to-assume": day_one["repo"].variables[variable], "role-duration-seconds": 900},
                }
            ],
        }
        event = Event("pull_request", "refs/pull/9/merge", day_one["commit"], 9, "someone/fork")
        result = sim.JobRun("pull-request.yml", 0, "hostile", "success")
        with pytest.raises(sim.StepFailed, match=f"does not trust {re.escape(prefix)}:pull_request"):
            sim.JobContext(pipeline, {}, hostile, event, result).run_steps()
    # ...and the one role a pull request can have reads nothing of prod, in either layout.
    dev_preview = day_one["repo"].variables["AWS_PREVIEW_ROLE_DEV"]
    assert prod_reach(account, dev_preview) == []


def test_each_job_ran_with_the_role_and_runner_its_stack_needs(day_one) -> None:
    roles = {
        j.job: j.role.rsplit("/", 1)[-1]
        for j in day_one["pipeline"].jobs
        if j.workflow in ("deploy.yml", "deploy-prod.yml") and j.role
    }
    assert roles == {
        "cluster-dev": "trainium-github-deploy-dev",
        "workloads-dev": "trainium-github-deploy-dev",
        "preview-cluster-prod": "trainium-github-preview-prod",
        "preview-workloads-prod": "trainium-github-preview-prod",
        "cluster-prod": "trainium-github-deploy-prod",
        "workloads-prod": "trainium-github-deploy-prod",
    }


# --- what the walk would catch -------------------------------------------------------------------


@pytest.mark.parametrize(("layout", "tokens"), [("two accounts", IMMUTABLE_PREFIX), ("one account", f"repo:{REPO}")])
def test_a_trust_in_the_other_subject_format_fails_the_walk(layout: str, tokens: str) -> None:
    # A bootstrap configured for one subject format while the repository's tokens carry the other
    # (a repository renamed or transferred after mid-2026 switches to the immutable IDs): STS
    # refuses every role, and the walk says which subject it was.
    pipeline, account, _ = day_zero(layout, tokens)
    results = pull_request(pipeline, first_commit(account), 1)
    assert results["preview-dev"].status == "failure"
    assert f"does not trust {tokens}:pull_request" in results["preview-dev"].reason


def test_a_job_that_reads_a_stack_before_it_exists_fails_the_walk() -> None:
    # Forgetting the checklist's `pulumi stack init` of the prod workload stack: pulumi/actions
    # selectStack (upsert false) fails preview-workloads-prod, and prod's workloads are not deployed.
    pipeline, account, _ = day_zero("two accounts")
    del next(b for b in account.backends.values() if (WORKLOADS, "prod") in b.stacks).stacks[(WORKLOADS, "prod")]
    results = merge(pipeline, first_commit(account))
    assert results["cluster-prod"].status == "success"
    failed = results["preview-workloads-prod"]
    assert failed.status == "failure" and "no stack named 'prod'" in failed.reason
    assert results["workloads-prod"].status == "skipped"
    # A workload `up` before its cluster's is refused by the program itself, never declared blind.
    pipeline, account, _ = day_zero("two accounts")
    ctx = sim.JobContext(
        pipeline,
        {},
        {"steps": []},
        Event("push", "refs/heads/main", first_commit(account)),
        sim.JobRun("deploy.yml", 0, "x", "success"),
    )
    ctx.role = pipeline.repo.variables["AWS_DEPLOY_ROLE_DEV"]
    ctx.result.groups = ("pulumi-trainium-workloads-dev",)
    backend = next(b for b in account.backends.values() if (WORKLOADS, "dev") in b.stacks)
    with pytest.raises(sim.StepFailed, match="the cluster stack has no output"):
        CACHE.simulate(
            ctx,
            backend,
            WORKLOADS,
            "dev",
            {"work-dir": "workloads", "policyPackConfigs": "../policy/config.dev.json"},
            preview=False,
        )


def test_missing_repository_settings_fail_the_walk_where_they_are_needed() -> None:
    # No `prod` environment (or one without reviewers): the prod jobs never get prod's token.
    pipeline, account, repo = day_zero("two accounts")
    del repo.environments["prod"]
    results = merge(pipeline, first_commit(account))
    assert results["cluster-prod"].status == "failure" and "not configured" in results["cluster-prod"].reason
    assert state_of(account, CLUSTER, "prod").outputs is None
    # No clusterViewers entry for the preview role: day two's prod preview cannot refresh Kubernetes.
    pipeline, account, repo = day_zero("two accounts")
    commit = first_commit(account)
    sim.set_key(CLUSTER, "clusterViewers", None)(commit.configs[(CLUSTER, "prod")])
    assert statuses(merge(pipeline, commit))["workloads-prod"] == "success"
    later = commit.edited("c2", {})
    results = merge(pipeline, later)
    assert (
        results["preview-cluster-prod"].status == "failure"
        and "no access entry on the prod cluster" in results["preview-cluster-prod"].reason
    )


def test_prod_is_not_created_while_its_allow_list_is_the_shipped_placeholder() -> None:
    # The shipped Pulumi.prod.yaml lists the documentation range 198.51.100.0/24: its `pulumi up`
    # refuses before creating anything (infra/validate.py), so the first pull request must list
    # the prod runner's range (the first-day checklist, step 4).
    pipeline, account, repo = day_zero("two accounts")
    commit = first_commit(account)
    shipped = sim.shipped_commit().configs[(CLUSTER, "prod")][f"{CLUSTER}:endpointAccess"]
    sim.set_key(CLUSTER, "endpointAccess", json.loads(shipped))(commit.configs[(CLUSTER, "prod")])
    results = merge(pipeline, commit)
    assert results["cluster-dev"].status == "success" and results["preview-cluster-prod"].status == "success"
    assert results["cluster-prod"].status == "failure"
    assert (
        "publicCidrs[0] = '198.51.100.0/24': inside an RFC 5737 documentation range" in results["cluster-prod"].reason
    )
    assert state_of(account, CLUSTER, "prod").outputs is None


# --- day two: a node group's maxSize and a workload setting, dev then prod --------------------------


@pytest.fixture(scope="module")
def day_two(day_one) -> dict[str, Any]:
    if day_one["layout"] != "two accounts":
        pytest.skip("day two walks the shipped two-account layout")
    pipeline, account = day_one["pipeline"], day_one["account"]
    for env in ("dev", "prod"):
        push_images(account, env)
    sizes = {"dev": 6, "prod": 10}

    def grow(env: str):
        def edit(config: dict[str, str]) -> None:
            groups = json.loads(config[f"{CLUSTER}:acceleratorNodeGroups"])
            next(g for g in groups if g["name"] == "trn1-32xl-ng1")["maxSize"] = sizes[env]
            config[f"{CLUSTER}:acceleratorNodeGroups"] = json.dumps(groups)

        return edit

    shipped = sim.shipped_commit()
    edits = {}
    for env in ("dev", "prod"):
        edits[(CLUSTER, env)] = grow(env)
        # The workload setting: the shipped acceptance test (2 trn1.32xlarge nodes) switched on, as
        # prod's stack file says to after a node-group change.
        check = {**json.loads(shipped.configs[(WORKLOADS, env)][f"{WORKLOADS}:clusterCheck"]), "enabled": True}
        edits[(WORKLOADS, env)] = sim.set_key(WORKLOADS, "clusterCheck", check)
    commit = day_one["commit"].edited("c2", edits)
    marker = len(pipeline.log)
    pr = pull_request(pipeline, commit, 2)
    deploy = merge(pipeline, commit)
    return {**day_one, "commit2": commit, "pr2": pr, "deploy2": deploy, "sizes": sizes, "log2": pipeline.log[marker:]}


def test_day_two_reaches_dev_then_prod_in_order(day_two) -> None:
    assert statuses(day_two["pr2"]) == {"test": "success", "plan-diff": "success", "preview-dev": "success"}
    assert statuses(day_two["deploy2"]) == {"test": "success", **{job: "success" for job in DEPLOY_ORDER}}, day_two[
        "log2"
    ]
    ups = [line.split(" @ ")[0].strip() for line in day_two["log2"] if "pulumi up" in line]
    assert ups == [
        "pulumi up trainium-eks/dev",
        "pulumi up trainium-workloads/dev",
        "pulumi up trainium-eks/prod",
        "pulumi up trainium-workloads/prod",
    ]
    account = day_two["account"]
    for env in ("dev", "prod"):
        cluster = state_of(account, CLUSTER, env)
        (group,) = [g for g in cluster.outputs["acceleratorNodeGroups"] if g["name"] == "trn1-32xl-ng1"]
        assert group["maxSize"] == day_two["sizes"][env] and cluster.commit == "c2"
        workloads = state_of(account, WORKLOADS, env)
        assert workloads.commit == "c2"
        # The workload stack ran against the cluster this commit deployed (its job needs the cluster's).
        assert workloads.outputs["workloads"].get("clusterCheck", {}).get("nodes") == 2, (env, workloads.outputs)
        assert any(
            r.type == "kubernetes:batch/v1:Job" and r.inputs["metadata"]["name"] == "cluster-check-nodes"
            for r in workloads.registrations
        )


def test_day_two_previews_dev_on_the_pull_request_and_prod_only_on_main(day_two) -> None:
    previews = [line.strip().split(" as ") for line in day_two["log2"] if "pulumi preview" in line]
    assert [(p[0].split(" @ ")[0], p[1].rsplit("/", 1)[-1]) for p in previews] == [
        ("pulumi preview trainium-eks/dev", "trainium-github-preview-dev"),
        ("pulumi preview trainium-workloads/dev", "trainium-github-preview-dev"),
        ("pulumi preview trainium-eks/prod", "trainium-github-preview-prod"),
        ("pulumi preview trainium-workloads/prod", "trainium-github-preview-prod"),
    ]
    # Prod's one workload preview, the one workloads-prod's reviewers read, comes after prod's
    # cluster took c2's maxSize, and before the approval.
    log = [line.strip().split(" @ ")[0] for line in day_two["log2"]]
    cluster_up = log.index("pulumi up trainium-eks/prod")
    preview = log.index("pulumi preview trainium-workloads/prod")
    assert cluster_up < preview < log.index("approval requested: workloads-prod (prod)")


# --- a workload stack that can never finish ---------------------------------------------------


def _a1_world() -> tuple[Pipeline, Account, Commit]:
    pipeline, account, _ = day_zero("two accounts")
    commit = first_commit(account)
    assert statuses(merge(pipeline, commit))["workloads-prod"] == "success"
    push_images(account, "dev")
    return pipeline, account, commit


def laptop_up(pipeline: Pipeline, account: Account, commit: Commit, project: str, env: str) -> None:
    """The README's first bring-up of a workload stack from a laptop (admin credentials)."""
    backend = next(b for b in account.backends.values() if (project, env) in b.stacks)
    ctx = sim.JobContext(
        pipeline,
        {},
        {"steps": []},
        Event("push", "refs/heads/main", commit),
        sim.JobRun("laptop", 0, "laptop", "success"),
    )
    ctx.need = lambda action, resource: None  # the administrator's own credentials
    CACHE.simulate(
        ctx,
        backend,
        project,
        env,
        {"work-dir": "workloads", "policyPacks": "../policy", "policyPackConfigs": f"../policy/config.{env}.json"},
        preview=False,
    )


def test_the_walk_catches_a_workload_stack_whose_gangs_can_never_all_run() -> None:
    # BERT's unbounded training (2 nodes, not awaited) runs on beside NxD Training's compile (4 nodes,
    # awaited 180 min) on a group of maxSize 4: the compile's gang never starts, its await fails
    # the up, and every later push waits for it again.
    pipeline, account, commit = _a1_world()
    dev = commit.edited(
        "c-a1",
        {
            (WORKLOADS, "dev"): lambda c: c.update(
                {
                    f"{WORKLOADS}:bertPretraining": json.dumps(
                        {"nodeGroup": "trn1-32xl-ng1", "nodes": 2, "precompile": False}
                    ),
                    f"{WORKLOADS}:nxdLlama": json.dumps({"nodeGroup": "trn1-32xl-ng1", "nodes": 4}),
                }
            )
        },
    )
    # The workload program itself refuses the pair before declaring anything (workloads/schedule.py).
    refusal = "need 6 nodes of node group 'trn1-32xl-ng1' at once, and it holds 4 (maxSize)"
    with pytest.raises(sim.StepFailed, match=re.escape(refusal)):
        laptop_up(pipeline, account, dev, WORKLOADS, "dev")
    for _ in range(2):  # ...and on every push after it
        results = merge(pipeline, dev)
        assert results["workloads-dev"].status == "failure", pipeline.log[-8:]
        assert refusal in results["workloads-dev"].reason
        assert results["preview-cluster-prod"].status == "skipped"


def test_the_shipped_dev_workload_stack_deploys_on_a_push_after_its_first_bring_up() -> None:
    pipeline, account, commit = _a1_world()
    shipped = commit.edited(
        "c-shipped", {(WORKLOADS, "dev"): lambda c: c.update(sim.shipped_commit().configs[(WORKLOADS, "dev")])}
    )
    laptop_up(pipeline, account, shipped, WORKLOADS, "dev")
    assert merge(pipeline, shipped)["workloads-dev"].status == "success"


# --- concurrency: every merge reaches every stack, in order, nothing beside a deploy ------------------


def test_three_quick_merges_all_reach_every_stack_in_merge_order() -> None:
    # Merges 2 and 3 arrive while run 1 still deploys. The workflow's group queues them (runs,
    # and within a run each stack's one job, go first in, first out), so each stack's updates
    # are 1, 2, 3. With GitHub's default queue the model drops 2 (it would be cancelled).
    concurrency = sim.workflow_concurrency("deploy.yml")
    assert sim.queue_outcome(concurrency, ["m1", "m2", "m3"]) == ["m1", "m2", "m3"]
    default = {k: v for k, v in concurrency.items() if k != "queue"}
    assert sim.queue_outcome(default, ["m1", "m2", "m3"]) == ["m1", "m3"]


def test_a_drift_check_never_runs_beside_a_deploy_nor_cancels_one_waiting() -> None:
    from tests.test_workflows import concrete_jobs

    deploy_jobs = {
        job["concurrency"]["group"]: job["concurrency"]
        for workflow in ("deploy.yml", "deploy-prod.yml")
        for _, job in concrete_jobs(workflow)
        if job.get("concurrency")
    }
    drift_jobs = [job["concurrency"] for _, job in concrete_jobs("drift.yml")]
    assert {d["group"] for d in drift_jobs} == set(deploy_jobs)
    for drift in drift_jobs:
        # A deploy job runs; the drift check and the next deploy's job arrive, in either order:
        # all three run, one after another.
        deploy = deploy_jobs[drift["group"]]
        for arrivals in (["deploy-1", "drift", "deploy-2"], ["deploy-1", "deploy-2", "drift"]):
            assert sim.queue_outcome(deploy, arrivals) == arrivals == sim.queue_outcome(drift, arrivals)


def test_a_run_that_starts_after_a_newer_merges_run_updates_nothing() -> None:
    # GitHub queues runs by when each started waiting and does not guarantee the order: here the
    # run of merge c3 starts before that of c2 (its parent). c2's jobs find every stack already
    # at a commit that contains theirs (tools/deploy_order.py) and skip their updates: no stack
    # goes back to older code, and c2's change is in c3's deploy.
    pipeline, account, _ = day_zero("two accounts")
    c1 = first_commit(account)
    assert statuses(merge(pipeline, c1))["workloads-prod"] == "success"

    def max_size(size: int):
        def edit(config: dict[str, str]) -> None:
            groups = json.loads(config[f"{CLUSTER}:acceleratorNodeGroups"])
            groups[0]["maxSize"] = size
            config[f"{CLUSTER}:acceleratorNodeGroups"] = json.dumps(groups)

        return edit

    c2 = c1.edited("c2", {(CLUSTER, "dev"): max_size(5)})
    c3 = c2.edited("c3", {(CLUSTER, "dev"): max_size(6)})
    pipeline.commits[c2.sha] = c2  # pushed before c3: the checkout's history holds it
    assert statuses(merge(pipeline, c3)) == {"test": "success", **{job: "success" for job in DEPLOY_ORDER}}
    marker = len(pipeline.log)
    approvals: list[tuple[str, str]] = []
    late_run = merge(pipeline, c2, approvals)
    # Prod's preview finds prod's cluster at c3 already; the prod jobs behind it are
    # skipped, so nobody is asked to approve a run that would update nothing, and its summary says why.
    assert statuses(late_run) == {
        "test": "success",
        "cluster-dev": "success",
        "workloads-dev": "success",
        "preview-cluster-prod": "success",
        "cluster-prod": "skipped",
        "preview-workloads-prod": "skipped",
        "workloads-prod": "skipped",
    }
    assert approvals == []
    assert late_run["preview-cluster-prod"].outputs == {"deploy": "false"}
    assert "Superseded: nothing to deploy or approve" in late_run["preview-cluster-prod"].summary
    assert "`./` `prod` was last deployed from `c3`" in late_run["preview-cluster-prod"].summary
    late = pipeline.log[marker:]
    assert not [line for line in late if "pulumi up" in line or "pulumi preview" in line], late
    assert sum("this run is superseded" in line for line in late) == 3
    for project in (CLUSTER, WORKLOADS):
        for env in ("dev", "prod"):
            assert state_of(account, project, env).commit == "c3", (project, env)
    dev = state_of(account, CLUSTER, "dev")
    assert next(g for g in dev.outputs["acceleratorNodeGroups"] if g["name"] == "trn1-32xl-ng1")["maxSize"] == 6
    # A stack last updated from a commit the checkout does not know (a laptop's) is deployed over.
    dev.history.insert(0, {"kind": "update", "result": "succeeded", "environment": {"git.head": "laptop-0001"}})
    c4 = c3.edited("c4", {})
    results = merge(pipeline, c4)
    assert results["cluster-dev"].status == "success" and dev.commit == "c4"


def test_a_workload_preview_waits_only_for_a_cluster_never_deployed() -> None:
    # A StackReference to a stack that exists but was never deployed reads no outputs: the
    # preview declares nothing and names the stack. Some outputs but not all is a cluster stack
    # from another version of the contract, refused in a preview as in an up.
    from infra.config.errors import ConfigError
    from offline.plan.command import offline_secrets
    from offline.plan.mocks import StackOutputs

    workloads = FIXTURE_ROOT / "workloads"
    config = first_commit(day_zero("two accounts")[1]).config(WORKLOADS, "dev")
    reference = config[f"{WORKLOADS}:clusterStack"]
    secrets = offline_secrets(workloads, "dev", config)
    empty = run_program(workloads, "dev", config, {reference: StackOutputs({})}, secrets, preview=True)
    assert empty.registrations == [] and empty.outputs["workloads"] == {"waitingFor": "organization/trainium-eks/dev"}
    with pytest.raises(ConfigError, match="the cluster stack has no output acceleratorNodeGroups"):
        run_program(
            workloads, "dev", config, {reference: StackOutputs({"clusterName": "trn-dev"})}, secrets, preview=True
        )


# --- a failed job and its retry; drift beside a pending deploy -----------------------------------


def _max_size(env: str, size: int):
    # The sizes the other walks use (dev 5, prod 10: the superseded run's and day two's), so the
    # program cache already holds these evaluations.
    def edit(config: dict[str, str]) -> None:
        groups = json.loads(config[f"{CLUSTER}:acceleratorNodeGroups"])
        groups[0]["maxSize"] = size
        config[f"{CLUSTER}:acceleratorNodeGroups"] = json.dumps(groups)

    return {(CLUSTER, env): edit}


def _failing_dev_deploy(pipeline: Pipeline, repo: Repository, commit: Commit) -> dict[str, sim.JobRun]:
    """A merge whose first update fails (here: the dev deploy role's variable was cleared by
    mistake), so nothing after it runs; the variable is then put back."""
    saved = repo.variables.pop("AWS_DEPLOY_ROLE_DEV")
    results = merge(pipeline, commit)
    repo.variables["AWS_DEPLOY_ROLE_DEV"] = saved
    assert results["cluster-dev"].status == "failure" and "role-to-assume is empty" in results["cluster-dev"].reason
    assert all(results[job].status == "skipped" for job in DEPLOY_ORDER[1:])
    return results


def rerun_failed(
    pipeline: Pipeline, previous: dict[str, sim.JobRun], approvals: list[tuple[str, str]] | None = None
) -> dict[str, sim.JobRun]:
    """ "Re-run failed jobs" of the deploy.yml run ``previous`` holds; its completion starts prod again."""

    def approve(job: str, environment: str) -> bool:
        if approvals is not None:
            approvals.append((job, environment))
        return True

    number = max(r.run for r in previous.values() if r.workflow == "deploy.yml")
    return with_prod(pipeline, pipeline.rerun_failed(number, approve))


def test_a_failed_job_rerun_before_any_newer_merge_deploys_its_commit_everywhere() -> None:
    pipeline, account, repo = day_zero("two accounts")
    c1 = first_commit(account)
    assert statuses(merge(pipeline, c1))["workloads-prod"] == "success"
    c2 = c1.edited("c2", {**_max_size("dev", 5), **_max_size("prod", 10)})
    failed = _failing_dev_deploy(pipeline, repo, c2)
    approvals: list[tuple[str, str]] = []
    retried = rerun_failed(pipeline, failed, approvals)
    assert retried["test"] is failed["test"]  # kept from the first attempt, not run again
    assert statuses(retried) == {"test": "success", **{job: "success" for job in DEPLOY_ORDER}}
    assert approvals == [("cluster-prod", "prod"), ("workloads-prod", "prod")]
    for project in (CLUSTER, WORKLOADS):
        for env in ("dev", "prod"):
            assert state_of(account, project, env).commit == "c2", (project, env)


def test_a_failed_job_rerun_after_a_newer_merges_run_changes_nothing_and_asks_nobody() -> None:
    # The re-run checks out the original event's commit (c2); c3, merged after it, has deployed
    # every stack meanwhile. tools/deploy_order.py finds c3 contains c2: no update goes back to
    # c2's code, and the prod jobs (and their approvals) are skipped.
    pipeline, account, repo = day_zero("two accounts")
    c1 = first_commit(account)
    assert statuses(merge(pipeline, c1))["workloads-prod"] == "success"
    c2 = c1.edited("c2", _max_size("dev", 5))
    failed = _failing_dev_deploy(pipeline, repo, c2)
    c3 = c2.edited("c3", _max_size("dev", 6))
    assert statuses(merge(pipeline, c3)) == {"test": "success", **{job: "success" for job in DEPLOY_ORDER}}
    marker, approvals = len(pipeline.log), []
    retried = rerun_failed(pipeline, failed, approvals)
    assert statuses(retried) == {
        "test": "success",
        "cluster-dev": "success",
        "workloads-dev": "success",
        "preview-cluster-prod": "success",
        "cluster-prod": "skipped",
        "preview-workloads-prod": "skipped",
        "workloads-prod": "skipped",
    }
    assert approvals == [] and not [line for line in pipeline.log[marker:] if "pulumi up" in line]
    for project in (CLUSTER, WORKLOADS):
        for env in ("dev", "prod"):
            assert state_of(account, project, env).commit == "c3", (project, env)
    dev = state_of(account, CLUSTER, "dev")
    assert next(g for g in dev.outputs["acceleratorNodeGroups"] if g["name"] == "trn1-32xl-ng1")["maxSize"] == 6


def drift(pipeline: Pipeline, commit: Commit) -> dict[str, dict[str, str]]:
    """drift.yml's scheduled run on main at ``commit``: per stack, what its steps wrote."""
    runs = []
    saved = pipeline.jobs[:]
    pipeline.run("drift.yml", Event("schedule", "refs/heads/main", commit))
    for job in pipeline.jobs[len(saved) :]:
        runs.append(job)
    assert all(j.status == "success" for j in runs), [(j.job, j.reason) for j in runs]
    keys = [
        ("trainium-eks", "dev"),
        ("trainium-workloads", "dev"),
        ("trainium-eks", "prod"),
        ("trainium-workloads", "prod"),
    ]
    return {
        f"{p}/{s}": {**j.steps.get("deployed", {}), **j.steps.get("check", {})}
        for (p, s), j in zip(keys, runs, strict=True)
    }


def test_a_drift_check_while_a_deploy_waits_for_approval_reports_a_pending_deploy_not_drift() -> None:
    # c2 has reached dev and waits for prod's approval when the daily check runs on
    # main (c2). Each stack is checked at the commit it was last deployed from (`git.head` of
    # its last update, as `pulumi stack history --json` prints it, pulumi/pulumi v3.259.0
    # pkg/cmd/pulumi/metadata/metadata.go addGitCommitMetadata): dev at c2, prod at c1 with main
    # ahead (pending). None has drifted.
    pipeline, account, _ = day_zero("two accounts")
    c1 = first_commit(account)
    assert statuses(merge(pipeline, c1))["workloads-prod"] == "success"
    assert {k: v["commit"] for k, v in drift(pipeline, c1).items()} == dict.fromkeys(
        ["trainium-eks/dev", "trainium-workloads/dev", "trainium-eks/prod", "trainium-workloads/prod"], "c1"
    )
    c2 = c1.edited("c2", {**_max_size("dev", 5), **_max_size("prod", 10)})
    checks: list[dict[str, dict[str, str]]] = []
    backend = next(b for b in account.backends.values() if (CLUSTER, "prod") in b.stacks)
    env = {"PULUMI_BACKEND_URL": backend.url, "WORK_DIR": "./", "STACK": "prod"}

    def main_head_check() -> str:
        """The other side: main's HEAD (c2) checked against prod's state, as a check of main would."""
        ctx = sim.JobContext(
            pipeline,
            {},
            {"steps": []},
            Event("schedule", "refs/heads/main", c2),
            sim.JobRun("drift.yml", 0, "drift", "success"),
        )
        ctx.role, ctx.cli, ctx.step_id = pipeline.repo.variables["AWS_PREVIEW_ROLE_PROD"], True, "check"
        ctx.drift_check(env)
        return ctx.outputs["check"]["status"]

    def approve(job: str, environment: str) -> bool:
        if job == "cluster-prod":  # the reviewers have not answered yet: the daily check runs now
            checks.append(drift(pipeline, c2))
            checks.append({"main's HEAD against prod": {"status": main_head_check()}})
        return True

    assert statuses(merge(pipeline, c2, approve=approve))["workloads-prod"] == "success"
    during, head = checks
    assert during == {
        "trainium-eks/dev": {"commit": "c2", "pending": "false", "status": "0"},
        "trainium-workloads/dev": {"commit": "c2", "pending": "false", "status": "0"},
        "trainium-eks/prod": {"commit": "c1", "pending": "true", "status": "0"},
        "trainium-workloads/prod": {"commit": "c1", "pending": "true", "status": "0"},
    }
    assert head == {"main's HEAD against prod": {"status": "255"}}
    # Once deployed, prod is checked at c2; a real difference in its resources is drift.
    after = drift(pipeline, c2)
    assert after["trainium-eks/prod"] == {"commit": "c2", "pending": "false", "status": "0"}
    prod_state = state_of(account, CLUSTER, "prod")
    urn, entry = next((u, e) for u, e in prod_state.resources.items() if (e["inputs"] or {}).get("tags"))
    prod_state.resources[urn] = {
        "inputs": {**entry["inputs"], "tags": {**entry["inputs"]["tags"], "changed": "by hand"}}
    }
    assert drift(pipeline, c2)["trainium-eks/prod"]["status"] == "255"


def test_a_stack_never_deployed_has_no_drift_check() -> None:
    pipeline, account, _ = day_zero("two accounts")
    checks = drift(pipeline, first_commit(account))
    assert checks == dict.fromkeys(checks, {"commit": "", "pending": "false"})


# --- dev never waits for prod; a cluster change and the workloads that need it reach prod together --


def test_a_merge_waiting_for_prods_approval_never_holds_the_next_merges_dev_deploy() -> None:
    # c2 has reached dev and its prod run waits for the cluster approval when c3 is merged. c3's
    # dev run takes only dev's groups, so it deploys dev at once; its prod run waits in prod's
    # group behind c2's, and runs, with its own approvals, once c2's prod run is done. Each prod
    # run deploys its own merge (the workflow_run payload's head_sha), not main's newest commit.
    pipeline, account, _ = day_zero("two accounts")
    c1 = first_commit(account)
    assert statuses(merge(pipeline, c1))["workloads-prod"] == "success"
    c2 = c1.edited("c2", {**_max_size("dev", 5), **_max_size("prod", 10)})
    c3 = c2.edited("c3", _max_size("dev", 6))
    asked: list[tuple[str, str]] = []
    while_c2_waits: dict[str, Any] = {}

    def approve_c2(job: str, environment: str) -> bool:
        asked.append(("c2", job))
        if job == "cluster-prod":  # the reviewers have not answered yet: c3 is merged now
            while_c2_waits["c3"] = merge(pipeline, c3, approve=approve_c3)
            while_c2_waits["dev"] = {p: state_of(account, p, "dev").commit for p in (CLUSTER, WORKLOADS)}
            while_c2_waits["holding"] = dict(pipeline.holding)
        return True

    def approve_c3(job: str, environment: str) -> bool:
        asked.append(("c3", job))
        if job == "cluster-prod":  # c2's prod run is over: prod runs c2, and c3 is next
            while_c2_waits["prod before c3"] = {p: state_of(account, p, "prod").commit for p in (CLUSTER, WORKLOADS)}
        return True

    c2_run = merge(pipeline, c2, approve=approve_c2)
    assert statuses(c2_run) == {"test": "success", **{job: "success" for job in DEPLOY_ORDER}}
    # c3's dev run finished while c2's prod approval was pending; its prod run had not started.
    assert statuses(while_c2_waits["c3"]) == {"test": "success", "cluster-dev": "success", "workloads-dev": "success"}
    assert while_c2_waits["dev"] == {CLUSTER: "c3", WORKLOADS: "c3"}
    c2_prod = c2_run["cluster-prod"].run
    assert while_c2_waits["holding"] == {"deploy-prod": c2_prod}  # deploy-dev was free for c3's dev run
    (c3_prod,) = pipeline.followers(while_c2_waits["c3"]["test"].run)
    assert c3_prod.status == "completed" and c3_prod.event.workflow_run["head_sha"] == "c3"
    assert statuses(c3_prod.results) == {job: "success" for job in DEPLOY_ORDER[2:]}
    # c2's prod run went on after main had moved to c3 and deployed c2; then c3's deployed c3.
    assert while_c2_waits["prod before c3"] == {CLUSTER: "c2", WORKLOADS: "c2"}
    assert asked == [("c2", "cluster-prod"), ("c2", "workloads-prod"), ("c3", "cluster-prod"), ("c3", "workloads-prod")]
    for project in (CLUSTER, WORKLOADS):
        for env in ("dev", "prod"):
            assert state_of(account, project, env).commit == "c3", (project, env)


def test_a_prod_run_deploys_the_merge_dev_deployed_even_when_main_has_moved_on() -> None:
    # GitHub makes a workflow_run run's GITHUB_SHA main's newest commit when dev's run finishes:
    # a merge pushed while that run was still going (its own dev run waiting in deploy-dev) is
    # already main's head then. The prod jobs check out the payload's head_sha instead.
    pipeline, account, _ = day_zero("two accounts")
    c1 = first_commit(account)
    assert statuses(merge(pipeline, c1))["workloads-prod"] == "success"
    c2 = c1.edited("c2", _max_size("prod", 10))
    c3 = c2.edited("c3", {})
    pipeline.commits.update({c2.sha: c2, c3.sha: c3})
    payload = {
        "head_sha": "c2",
        "conclusion": "success",
        "head_branch": "main",
        "event": "push",
        "head_repository.full_name": REPO,
    }
    results = pipeline.run("deploy-prod.yml", Event("workflow_run", "refs/heads/main", c3, workflow_run=payload))
    assert statuses(results) == {job: "success" for job in DEPLOY_ORDER[2:]}
    for project in (CLUSTER, WORKLOADS):
        assert state_of(account, project, "prod").commit == "c2", project
    # A dev run that failed starts prod too, which then does nothing and asks nobody; so does a
    # successful run of a pull request's own workflow called `deploy` (workflow_run matches on the
    # name and branch only, and a fork's branch may be called main), its commit never checked out.
    asked: list[str] = []
    for other in (
        {"head_sha": "c3", "conclusion": "failure"},
        {"event": "pull_request"},
        {"event": "push", "head_repository.full_name": "someone/fork"},
    ):
        marker = len(pipeline.log)
        event = Event("workflow_run", "refs/heads/main", c3, workflow_run={**payload, **other})
        results = pipeline.run("deploy-prod.yml", event, lambda job, environment: asked.append(job) or True)
        assert {r.status for r in results.values()} == {"skipped"} and not [r for r in results.values() if r.role]
        assert not [line for line in pipeline.log[marker:] if "pulumi " in line], other
    assert asked == []


def test_a_merge_changing_the_cluster_and_the_workloads_that_need_it_reaches_dev_and_prod() -> None:
    # One merge raises the Trainium group's maxSize and switches on the acceptance test across as
    # many nodes: the workload stack refuses it against the cluster as deployed (the group holds
    # fewer), so it can only be previewed, and deployed, once its environment's cluster is updated.
    pipeline, account, _ = day_zero("two accounts")
    c1 = first_commit(account)
    assert statuses(merge(pipeline, c1))["workloads-prod"] == "success"
    for env in ("dev", "prod"):
        push_images(account, env)
    sizes = {"dev": 6, "prod": 10}
    edits: dict[tuple[str, str], Callable[[dict[str, str]], None]] = {
        **_max_size("dev", sizes["dev"]),
        **_max_size("prod", sizes["prod"]),
    }
    shipped = sim.shipped_commit()
    for env in ("dev", "prod"):
        check = json.loads(shipped.configs[(WORKLOADS, env)][f"{WORKLOADS}:clusterCheck"])
        check = {**check, "enabled": True, "nodes": sizes[env]}
        edits[(WORKLOADS, env)] = sim.set_key(WORKLOADS, "clusterCheck", check)
    c2 = c1.edited("c2", edits)
    # Against prod's cluster as c1 left it, the new workload settings are refused.
    prod_before = state_of(account, CLUSTER, "prod")
    reference = c2.config(WORKLOADS, "prod")[f"{WORKLOADS}:clusterStack"]
    with pytest.raises(sim.StepFailed, match=r"\(maxSize 8\)"):
        CACHE.program(
            WORKLOADS,
            "prod",
            c2.config(WORKLOADS, "prod"),
            {reference: sim.StackOutputs(prod_before.outputs, prod_before.secret_outputs)},
            preview=True,
            existing=None,
        )
    # Its pull request: the live dev workload preview reads dev's cluster as deployed and refuses,
    # which does not fail the check because the change alters the cluster outputs the workload
    # stack reads; the offline plan checked the workloads against the cluster this change plans.
    pr = pull_request(pipeline, c2, 2)
    assert statuses(pr) == {"test": "success", "plan-diff": "success", "preview-dev": "success"}
    assert pr["plan-diff"].outputs == {"cluster-outputs-changed": "true"}
    assert "`acceleratorNodeGroups`" in pr["plan-diff"].summary
    (tolerated,) = pr["preview-dev"].tolerated
    assert "trainium-workloads/dev" in tolerated and "(maxSize 4)" in tolerated
    # Without the cluster change, the same workload settings fail the offline plan (the workload
    # stack planned against this revision's cluster), as do settings the new cluster refuses too:
    # a required check, before any live preview.
    too_many = {**json.loads(shipped.configs[(WORKLOADS, "dev")][f"{WORKLOADS}:clusterCheck"]), "enabled": True}
    for sha, cluster_edit, nodes, refusal in (
        ("c2-alone", {}, sizes["dev"], "(maxSize 4)"),
        ("c2-beyond", _max_size("dev", sizes["dev"]), sizes["dev"] + 1, "(maxSize 6)"),
    ):
        edit = sim.set_key(WORKLOADS, "clusterCheck", {**too_many, "nodes": nodes})
        refused = c1.edited(sha, {**cluster_edit, (WORKLOADS, "dev"): edit})
        pipeline.commits[refused.sha] = refused
        pr = pull_request(pipeline, refused, 3)
        assert pr["plan-diff"].status == "failure" and refusal in pr["plan-diff"].reason, sha
        assert pr["preview-dev"].status == "skipped"
    marker = len(pipeline.log)
    results = merge(pipeline, c2)
    assert statuses(results) == {"test": "success", **{job: "success" for job in DEPLOY_ORDER}}, pipeline.log[marker:]
    log = [line.strip().split(" @ ")[0] for line in pipeline.log[marker:]]
    steps = [line for line in log if line.startswith(("pulumi", "approval"))]
    assert steps == [
        "pulumi up trainium-eks/dev",
        "pulumi up trainium-workloads/dev",
        "pulumi preview trainium-eks/prod",
        "approval requested: cluster-prod (prod)",
        "pulumi up trainium-eks/prod",
        "pulumi preview trainium-workloads/prod",
        "approval requested: workloads-prod (prod)",
        "pulumi up trainium-workloads/prod",
    ]
    for env in ("dev", "prod"):
        cluster = state_of(account, CLUSTER, env)
        (group,) = [g for g in cluster.outputs["acceleratorNodeGroups"] if g["name"] == "trn1-32xl-ng1"]
        assert group["maxSize"] == sizes[env] and cluster.commit == "c2"
        workloads = state_of(account, WORKLOADS, env)
        assert workloads.commit == "c2" and workloads.outputs["workloads"]["clusterCheck"]["nodes"] == sizes[env]


def test_a_failed_prod_job_rerun_deploys_its_merge_and_a_rejected_approval_stops_only_prod() -> None:
    # cluster-prod fails (prod's deploy role variable cleared by mistake); "Re-run failed jobs" of
    # the prod run, once it is put back, repeats the same workflow_run event: the same merge.
    pipeline, account, repo = day_zero("two accounts")
    c1 = first_commit(account)
    assert statuses(merge(pipeline, c1))["workloads-prod"] == "success"
    c2 = c1.edited("c2", {**_max_size("dev", 5), **_max_size("prod", 10)})
    saved = repo.variables.pop("AWS_DEPLOY_ROLE_PROD")
    failed = merge(pipeline, c2)
    repo.variables["AWS_DEPLOY_ROLE_PROD"] = saved
    assert failed["cluster-prod"].status == "failure" and "role-to-assume is empty" in failed["cluster-prod"].reason
    assert failed["preview-workloads-prod"].status == failed["workloads-prod"].status == "skipped"
    assert state_of(account, CLUSTER, "dev").commit == "c2" and state_of(account, CLUSTER, "prod").commit == "c1"
    retried = pipeline.rerun_failed(failed["cluster-prod"].run)
    assert retried["preview-cluster-prod"] is failed["preview-cluster-prod"]  # kept, not run again
    assert statuses(retried) == {job: "success" for job in DEPLOY_ORDER[2:]}
    for project in (CLUSTER, WORKLOADS):
        assert state_of(account, project, "prod").commit == "c2", project
    # Prod's reviewers reject c3: its prod run fails at the approval and deploys nothing; dev has c3,
    # and the next merge's dev and prod runs go on.
    c3 = c2.edited("c3", _max_size("dev", 6))
    rejected = merge(pipeline, c3, approve=lambda job, environment: False)
    assert rejected["cluster-prod"].status == "failure" and "rejected" in rejected["cluster-prod"].reason
    assert state_of(account, CLUSTER, "dev").commit == "c3" and state_of(account, CLUSTER, "prod").commit == "c2"
    c4 = c3.edited("c4", {})
    assert statuses(merge(pipeline, c4)) == {"test": "success", **{job: "success" for job in DEPLOY_ORDER}}
    assert state_of(account, CLUSTER, "prod").commit == "c4"
