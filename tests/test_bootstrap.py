"""The bootstrap project under mocks: state backend, GitHub OIDC trust, role permissions, config."""

from __future__ import annotations

import json
from typing import Any

import pytest

from bootstrap import permissions, trust
from bootstrap.variables import repository_variables
from infra.config.errors import ConfigError
from offline.plan.runner import REPO_ROOT, PlanResult, run_program, stack_config
from tests.conftest import remembered_program
from tests.fixture_project import FIXTURE_ROOT

BOOTSTRAP_DIR = FIXTURE_ROOT / "bootstrap"
REPO = "example-org/trainium-eks"
# In a shared account, the buckets prod's stacks read (bootstrap environments[].dataBuckets).
PROD_DATA = ["example-org-trainium-prod-*"]


def bootstrap(stack: str = "dev", **overrides: Any) -> PlanResult:
    config = stack_config(BOOTSTRAP_DIR, stack)
    for key, value in overrides.items():
        full = key if ":" in key else f"trainium-bootstrap:{key}"
        if value is None:
            config.pop(full, None)
        else:
            config[full] = json.dumps(value) if isinstance(value, (dict, list)) else str(value)
    return run_program(BOOTSTRAP_DIR, stack, config)


@pytest.fixture(scope="module")
def boot_dev() -> PlanResult:
    return bootstrap("dev")


@pytest.fixture(scope="module")
def boot_prod() -> PlanResult:
    return bootstrap("prod")


def condition(role_inputs: dict[str, Any]) -> dict[str, Any]:
    (statement,) = json.loads(role_inputs["assumeRolePolicy"])["Statement"]
    assert statement["Action"] == "sts:AssumeRoleWithWebIdentity"
    assert statement["Principal"]["Federated"].endswith(":oidc-provider/token.actions.githubusercontent.com")
    assert list(statement["Condition"]) == ["StringEquals"], "no StringLike: wildcards would let other refs in"
    return statement["Condition"]["StringEquals"]


# GitHub docs, "Configuring OpenID Connect in Amazon Web Services" (docs.github.com/en/actions/
# how-tos/secure-your-work/security-harden-deployments/oidc-in-aws) and "OpenID Connect reference",
# example subject claims: aud is sts.amazonaws.com for aws-actions/configure-aws-credentials;
# sub is repo:ORG/REPO:pull_request for pull_request runs, repo:ORG/REPO:ref:refs/heads/BRANCH for
# pushes and schedules, and repo:ORG/REPO:environment:NAME for any job naming an environment
# (the environment then replaces the ref, so a branch trust never matches an environment job).
def test_dev_preview_role_trusts_this_repositorys_pull_requests_and_main_only(boot_dev: PlanResult) -> None:
    cond = condition(boot_dev.named("github-preview-dev", "aws:iam/role:Role").inputs)
    assert cond["token.actions.githubusercontent.com:aud"] == "sts.amazonaws.com"
    assert sorted(cond["token.actions.githubusercontent.com:sub"]) == [
        f"repo:{REPO}:pull_request",
        f"repo:{REPO}:ref:refs/heads/main",
    ]


def test_no_pull_request_can_assume_a_role_of_prod(boot_prod: PlanResult) -> None:
    # A pull_request run's token says repo:O/R:pull_request whatever its head repository (GitHub
    # docs, "OpenID Connect reference"), and runs the PR's own workflow file and program, so the
    # only boundary is the trust policy: prod's preview role trusts main, its deploy role prod's
    # environment.
    for role in boot_prod.of_type("aws:iam/role:Role"):
        subjects = condition(role.inputs)["token.actions.githubusercontent.com:sub"]
        subjects = [subjects] if isinstance(subjects, str) else subjects
        assert f"repo:{REPO}:pull_request" not in subjects, role.name
    cond = condition(boot_prod.named("github-preview-prod", "aws:iam/role:Role").inputs)
    assert cond["token.actions.githubusercontent.com:sub"] == f"repo:{REPO}:ref:refs/heads/main"


# GitHub docs, "OpenID Connect" concepts, "Immutable subject claims" (github/docs PR #45221) and
# changelog 2026-04-23 "Immutable subject claims for GitHub Actions OIDC tokens": repositories
# created, renamed or transferred after mid-2026 carry immutable owner and repository IDs,
# repo:octocat@123456/my-repo@456789:ref:refs/heads/main; "Configuring OpenID Connect in AWS": "Make
# sure your trust policy matches the format your repository uses".
IMMUTABLE = "repo:example-org@123456/trainium-eks@456789"


@pytest.mark.parametrize("prefix", [None, IMMUTABLE])
def test_every_trust_uses_the_configured_subject_prefix_and_only_it(prefix: str | None) -> None:
    plan = bootstrap(
        "dev",
        oidcSubjectPrefix=prefix,
        environments=[
            {"name": "dev", "pullRequestPreviews": True},
            {"name": "prod", "githubEnvironment": True, "dataBuckets": PROD_DATA},
        ],
    )
    expected, other = (prefix, f"repo:{REPO}") if prefix else (f"repo:{REPO}", IMMUTABLE)
    subjects = {
        role.name: condition(role.inputs)["token.actions.githubusercontent.com:sub"]
        for role in plan.of_type("aws:iam/role:Role")
    }
    assert subjects == {
        "github-preview-dev": sorted([f"{expected}:pull_request", f"{expected}:ref:refs/heads/main"]),
        "github-deploy-dev": f"{expected}:ref:refs/heads/main",
        "github-preview-prod": f"{expected}:ref:refs/heads/main",
        "github-deploy-prod": f"{expected}:environment:prod",
    }
    assert other not in json.dumps(subjects)


def test_dev_deploy_role_trusts_pushes_to_main(boot_dev: PlanResult) -> None:
    cond = condition(boot_dev.named("github-deploy-dev", "aws:iam/role:Role").inputs)
    assert cond == {
        "token.actions.githubusercontent.com:aud": "sts.amazonaws.com",
        "token.actions.githubusercontent.com:sub": f"repo:{REPO}:ref:refs/heads/main",
    }


def test_prod_deploy_role_trusts_only_the_prod_environment(boot_prod: PlanResult) -> None:
    cond = condition(boot_prod.named("github-deploy-prod", "aws:iam/role:Role").inputs)
    assert cond["token.actions.githubusercontent.com:sub"] == f"repo:{REPO}:environment:prod"
    assert len(boot_prod.of_type("aws:iam/role:Role")) == 2


def test_a_deploy_session_outlasts_a_first_cluster_deploy(boot_prod: PlanResult, boot_dev: PlanResult) -> None:
    # configure-aws-credentials asks for the workflow's role-duration-seconds; IAM refuses more
    # than the role's MaxSessionDuration, and expired credentials would fail `pulumi up` half-way.
    # 6 h: the workload jobs' role-duration-seconds, as long as a GitHub-hosted job may run.
    assert boot_prod.named("github-deploy-prod", "aws:iam/role:Role").inputs["maxSessionDuration"] == 6 * 3600
    assert boot_dev.named("github-deploy-dev", "aws:iam/role:Role").inputs["maxSessionDuration"] == 6 * 3600


def test_the_state_bucket_and_key_survive_destroy_and_are_locked_down(boot_dev: PlanResult) -> None:
    bucket = boot_dev.named("state-bucket", "aws:s3/bucket:Bucket")
    key = boot_dev.named("state-key", "aws:kms/key:Key")
    secrets = boot_dev.named("state-secrets-dev", "aws:kms/key:Key")
    for resource in (bucket, key, secrets):
        assert resource.protect and resource.lifecycle.get("retainOnDelete")
    assert key.inputs["enableKeyRotation"] is True
    versioning = boot_dev.named("state-versioning").inputs["versioningConfiguration"]
    assert versioning["status"] == "Enabled"
    block = boot_dev.named("state-public-access").inputs
    assert all(
        block[k] is True for k in ("blockPublicAcls", "blockPublicPolicy", "ignorePublicAcls", "restrictPublicBuckets")
    )
    (rule,) = boot_dev.named("state-encryption").inputs["rules"]
    assert rule["applyServerSideEncryptionByDefault"] == {
        "sseAlgorithm": "aws:kms",
        "kmsMasterKeyId": key_arn(boot_dev),
    }
    (deny,) = json.loads(boot_dev.named("state-tls-only").inputs["policy"])["Statement"]
    assert deny["Effect"] == "Deny" and deny["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
    assert deny["Resource"] == [
        "arn:aws:s3:::example-org-trainium-pulumi-state-dev",
        "arn:aws:s3:::example-org-trainium-pulumi-state-dev/*",
    ]


def key_arn(plan: PlanResult) -> str:
    return plan.outputs["stateKeyArn"]


def test_preview_reads_state_and_never_writes_it(boot_dev: PlanResult) -> None:
    # pulumi/pulumi pkg/backend/diy/backend.go (v3.x): Preview calls apply() with DryRun and
    # without Lock(); apply() saves no checkpoint, history or backup on a dry run. So a preview
    # (with --refresh, which is part of the dry run) needs s3 Get/List and kms Decrypt only.
    policy = json.loads(boot_dev.named("github-preview-dev-state").inputs["policy"])
    state = {
        a
        for s in policy["Statement"]
        if s["Effect"] == "Allow" and s["Sid"] != "RefreshStackResources"
        for a in s["Action"]
    }
    assert state == {"s3:ListBucket", "s3:GetBucketLocation", "s3:GetObject", "kms:Decrypt", "kms:DescribeKey"}
    (refresh,) = [s for s in policy["Statement"] if s["Sid"] == "RefreshStackResources"]
    assert set(refresh["Action"]) == permissions.PREVIEW_READS
    assert all(a.split(":")[1].startswith(("Get", "Describe", "List")) for a in refresh["Action"]), refresh["Action"]
    attachment = boot_dev.named("github-preview-dev-view-only").inputs["policyArn"]
    assert attachment == "arn:aws:iam::aws:policy/job-function/ViewOnlyAccess"
    assert not boot_dev.of_type("aws:iam/rolePolicyAttachment:RolePolicyAttachment")[1:], "ReadOnlyAccess is gone"


def test_a_deploy_cannot_widen_its_own_trust_or_remove_the_backend(boot_dev: PlanResult) -> None:
    policy = json.loads(boot_dev.named("github-deploy-dev-policy").inputs["policy"])
    denies = {s["Sid"]: s for s in policy["Statement"] if s["Effect"] == "Deny"}
    assert sorted(denies["KeepPipelineTrust"]["Resource"]) == sorted(
        [
            "arn:aws:iam::123456789012:policy/trainium-github-boundary-dev",
            "arn:aws:iam::123456789012:role/trainium-github-preview-dev",
            "arn:aws:iam::123456789012:role/trainium-github-deploy-dev",
            "arn:aws:iam::123456789012:oidc-provider/token.actions.githubusercontent.com",
        ]
    )
    assert "s3:DeleteBucket" in denies["KeepStateBucket"]["Action"]
    assert "kms:ScheduleKeyDeletion" in denies["KeepStateKey"]["Action"]
    assert denies["KeepStateKey"]["Resource"] == sorted([key_arn(boot_dev), boot_dev.outputs["secretsKeyArns"]["dev"]])


# The variants a stack file may switch on whose AWS resources differ from the shipped files': each
# is planned for dev and prod, cluster and workload stacks, and the deploy role must reach them all.
def with_karpenter(config: dict[str, str]) -> None:
    config["trainium-eks:nodeProvisioner"] = "karpenter"


def with_cluster_access(config: dict[str, str]) -> None:
    # docs/pipeline.md: the preview role as a cluster viewer, an administrator's role as admin.
    config["trainium-eks:clusterViewers"] = json.dumps(["arn:aws:iam::123456789012:role/trainium-github-preview-dev"])
    config["trainium-eks:clusterAdmins"] = json.dumps(["arn:aws:iam::123456789012:role/MlOps"])


def with_data_repository(config: dict[str, str]) -> None:
    # An FSx feature: on FSx (dev's shipped file system is EFS, which the shipped variant plans).
    storage = json.loads(config.get("trainium-eks:storage", "{}"))
    storage["kind"] = "fsx"
    storage["dataRepositories"] = [{"fileSystemPath": "/default/datasets", "s3Path": "s3://my-training-data/datasets"}]
    config["trainium-eks:storage"] = json.dumps(storage)


def with_checkpoint_export(config: dict[str, str]) -> None:
    # Inside with_data_repository's link, which exports nothing by itself.
    storage = json.loads(config.get("trainium-eks:storage", "{}"))
    storage["checkpointExport"] = {"schedule": "rate(6 hours)", "paths": ["/default/datasets"]}
    config["trainium-eks:storage"] = json.dumps(storage)


def with_node_recovery(config: dict[str, str]) -> None:
    features = json.loads(config.get("trainium-eks:features", "{}"))
    config["trainium-eks:features"] = json.dumps({**features, "neuronNodeRecovery": True})


# The shipped files, and each stack with the switches above on, as many at once as go together
# (Karpenter refuses node recovery): the switches add resources independently, and the suite's
# time is shared.
VARIANTS: dict[str, Any] = {
    "shipped": None,
    "karpenter": lambda config: (with_karpenter(config), with_data_repository(config), with_cluster_access(config)),
    "nodeRecovery": lambda config: (
        with_node_recovery(config),
        with_data_repository(config),
        with_checkpoint_export(config),
    ),
}


def variant_config(stack: str, variant: str) -> dict[str, str]:
    config = stack_config(FIXTURE_ROOT, stack)
    if VARIANTS[variant] is not None:
        VARIANTS[variant](config)
    return config


@pytest.fixture(scope="module")
def plans_by_variant() -> dict[tuple[str, str], tuple[PlanResult, PlanResult]]:
    """(stack, variant) -> its cluster and workload plans."""
    from offline.plan.command import plan_workloads

    plans = {}
    for stack in ("dev", "prod"):
        for variant in VARIANTS:
            cluster = remembered_program(FIXTURE_ROOT, stack, variant_config(stack, variant))
            plans[(stack, variant)] = (cluster, plan_workloads(FIXTURE_ROOT / "workloads", stack, cluster))
    return plans


@pytest.fixture(scope="module")
def types_by_variant(plans_by_variant) -> dict[tuple[str, str], set[str]]:
    return {key: {r.type for plan in pair for r in plan.registrations} for key, pair in plans_by_variant.items()}


def test_deploy_roles_reach_every_service_every_variant_declares(types_by_variant) -> None:
    # Every AWS resource type the cluster and workload programs declare, in each stack and variant,
    # mapped to the IAM service that manages it; a type nobody mapped fails here instead of at
    # `pulumi up` (a preview creates nothing, so it would not catch a missing service either).
    needed = {key: permissions.services_for_types(types) for key, types in types_by_variant.items()}
    for key, services in needed.items():
        assert services <= permissions.DEPLOY_SERVICES, (key, services - permissions.DEPLOY_SERVICES)
    # ...and nothing more than they need.
    assert set().union(*needed.values()) == permissions.DEPLOY_SERVICES
    # Karpenter's interruption queue (SQS) and its EventBridge rules (IAM prefix `events`, not cloudwatch).
    assert {"sqs", "events"} <= needed[("dev", "karpenter")] and {"sqs", "events"} <= needed[("prod", "karpenter")]
    assert "aws:sqs/queue:Queue" in types_by_variant[("prod", "karpenter")]
    with pytest.raises(permissions.UnmappedType, match="aws:lambda/function:Function"):
        permissions.services_for_types(types_by_variant[("dev", "shipped")] | {"aws:lambda/function:Function"})


def test_preview_roles_read_what_a_refresh_of_every_variant_reads_and_no_more(types_by_variant) -> None:
    needed = {key: permissions.reads_for_types(types) for key, types in types_by_variant.items()}
    for key, reads in needed.items():
        assert reads <= permissions.PREVIEW_READS, (key, reads - permissions.PREVIEW_READS)
    assert set().union(*needed.values()) == permissions.PREVIEW_READS
    with pytest.raises(permissions.UnmappedType, match="aws:lambda/function:Function: no refresh reads"):
        permissions.reads_for_types({"aws:lambda/function:Function"})


def test_a_variant_declaring_a_service_the_deploy_role_lacks_fails_the_check() -> None:
    # The check above compares against DEPLOY_SERVICES; without `sqs` the Karpenter variant fails it.
    needed = permissions.services_for_types({"aws:sqs/queue:Queue", "aws:cloudwatch/eventRule:EventRule"})
    assert not needed <= permissions.DEPLOY_SERVICES - {"sqs"}
    assert not needed <= permissions.DEPLOY_SERVICES - {"events"}


def test_an_existing_oidc_provider_is_reused_not_created() -> None:
    arn = "arn:aws:iam::123456789012:oidc-provider/token.actions.githubusercontent.com"
    plan = bootstrap("dev", existingOidcProviderArn=arn)
    assert not plan.of_type("aws:iam/openIdConnectProvider:OpenIdConnectProvider")
    (statement,) = json.loads(plan.named("github-preview-dev", "aws:iam/role:Role").inputs["assumeRolePolicy"])[
        "Statement"
    ]
    assert statement["Principal"]["Federated"] == arn


def test_a_new_provider_is_for_githubs_issuer_and_audience(boot_dev: PlanResult) -> None:
    (provider,) = boot_dev.of_type("aws:iam/openIdConnectProvider:OpenIdConnectProvider")
    assert provider.inputs["url"] == trust.OIDC_URL and provider.inputs["clientIdLists"] == ["sts.amazonaws.com"]
    assert provider.protect


def test_outputs_are_the_repository_variables_the_workflows_read(boot_dev: PlanResult, boot_prod: PlanResult) -> None:
    assert boot_dev.outputs["repositoryVariables"] == {
        "AWS_REGION_DEV": "us-west-2",
        "PULUMI_BACKEND_URL_DEV": "s3://example-org-trainium-pulumi-state-dev?region=us-west-2",
        "AWS_PREVIEW_ROLE_DEV": "arn:aws:iam::123456789012:role/trainium-github-preview-dev",
        "AWS_DEPLOY_ROLE_DEV": "arn:aws:iam::123456789012:role/trainium-github-deploy-dev",
    }
    assert boot_prod.outputs["secretsProviders"] == {
        "prod": "awskms://alias/trainium-pulumi-secrets-prod?region=us-east-2"
    }
    one_account = repository_variables("us-west-2", "b", {"dev": "pd", "prod": "pp"}, {"dev": "d", "prod": "p"})
    assert one_account["AWS_PREVIEW_ROLE_DEV"] == "pd" and one_account["AWS_PREVIEW_ROLE_PROD"] == "pp"
    assert (
        one_account["AWS_DEPLOY_ROLE_PROD"] == "p"
        and one_account["PULUMI_BACKEND_URL_PROD"] == "s3://b?region=us-west-2"
    )


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"githubRepository": ""}, "trainium-bootstrap:githubRepository = '': String should have at least 1 character"),
        (
            {"githubRepository": "trainium-eks"},
            "trainium-bootstrap:githubRepository = 'trainium-eks': String should match pattern",
        ),
        ({"githubRepository": None}, "trainium-bootstrap:githubRepository: required but not set"),
        ({"stateBucket": "My_Bucket"}, "trainium-bootstrap:stateBucket = 'My_Bucket': String should match pattern"),
        ({"environments": []}, "trainium-bootstrap:environments: List should have at least 1 item"),
        (
            {"environments": [{"name": "dev"}, {"name": "dev"}]},
            "trainium-bootstrap:environments[1].name = 'dev': listed twice",
        ),
        (
            {"environments": [{"name": "prod", "githubEnvironment": "yes please"}]},
            "trainium-bootstrap:environments[0].githubEnvironment = 'yes please': Input should be a valid boolean",
        ),
        (
            {"deploySessionHours": "true"},
            "trainium-bootstrap:deploySessionHours = 'true': Input should be a valid integer",
        ),
        # The workload jobs assume the deploy role for 21600 s; a shorter MaxSessionDuration
        # makes STS refuse them at configure-aws-credentials.
        (
            {"deploySessionHours": 5},
            "trainium-bootstrap:deploySessionHours = '5': Input should be greater than or equal to 6",
        ),
        (
            {"deploySessionHours": 13},
            "trainium-bootstrap:deploySessionHours = '13': Input should be less than or equal to 12",
        ),
        (
            {"existingOidcProviderArn": "arn:aws:iam::123456789012:oidc-provider/accounts.google.com"},
            "trainium-bootstrap:existingOidcProviderArn = 'arn:aws:iam::123456789012:oidc-provider/accounts.google.com'",
        ),
        ({"tags": {"aws:owner": "me"}}, "trainium-bootstrap:tags.aws:owner = 'me': the aws: prefix is reserved"),
        ({"stateBuckett": "x"}, "trainium-bootstrap:stateBuckett: unknown key"),
        ({"aws:region": None}, "aws:region: required but not set"),
        # IAM quotas: role names are at most 64 characters; AWS refuses a longer one only at `up`.
        (
            {"roleNamePrefix": "p" * 32, "environments": [{"name": "e" * 25}]},
            "trainium-bootstrap:environments[0].name = '"
            + "e" * 25
            + "': its deploy role '"
            + "p" * 32
            + "-deploy-"
            + "e" * 25
            + "' is 65 characters; IAM allows at most 64",
        ),
        (
            {"stateNoncurrentVersionDays": 0},
            "trainium-bootstrap:stateNoncurrentVersionDays = '0': Input should be greater than or equal to 1",
        ),
        ({"stateNoncurrentVersionDays": ""}, "trainium-bootstrap:stateNoncurrentVersionDays = ''"),
        # Prod deploys after an approval; a pull request's code previewing it would read its secrets first.
        (
            {"environments": [{"name": "prod", "githubEnvironment": True, "pullRequestPreviews": True}]},
            "trainium-bootstrap:environments[0].pullRequestPreviews = true: 'prod' deploys only after an approval "
            "(githubEnvironment: true), and a pull request's unreviewed code would read its state and decrypt its secrets; "
            "allowed: false",
        ),
        (
            {"stateKeyAlias": "trainium-state"},
            "trainium-bootstrap:stateKeyAlias = 'trainium-state': String should match pattern",
        ),
        (
            {"environments": [{"name": "bootstrap"}]},
            "trainium-bootstrap:environments[0].name = 'bootstrap': the bootstrap stack's own secrets key is "
            "alias/trainium-pulumi-secrets-bootstrap; allowed: any other stack name",
        ),
        # The sub claim's prefix must be this repository's, in one of GitHub's two forms, exactly.
        (
            {"oidcSubjectPrefix": "repo:example-org/*"},
            "trainium-bootstrap:oidcSubjectPrefix = 'repo:example-org/*': allowed: repo:example-org/trainium-eks or, "
            "with the immutable IDs GitHub's OIDC settings show, repo:example-org@<owner id>/trainium-eks@<repository id>",
        ),
        (
            {"oidcSubjectPrefix": "repo:other-org@1/trainium-eks@2"},
            "trainium-bootstrap:oidcSubjectPrefix = "
            "'repo:other-org@1/trainium-eks@2': allowed: repo:example-org/trainium-eks",
        ),
        (
            {"oidcSubjectPrefix": "repo:example-org@123/trainium-eks@456:ref:refs/heads/main"},
            "trainium-bootstrap:oidcSubjectPrefix = 'repo:example-org@123/trainium-eks@456:ref:refs/heads/main': allowed",
        ),
        (
            {"oidcSubjectPrefix": "repo:Example-Org@123/trainium-eks@456"},
            "trainium-bootstrap:oidcSubjectPrefix = 'repo:Example-Org@123/trainium-eks@456': allowed",
        ),
    ],
)
def test_bad_configuration_is_refused_before_anything_is_declared(overrides: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as refused:
        bootstrap("dev", **overrides)
    assert message in str(refused.value)


def test_make_plan_plans_the_bootstrap_stack_too(tmp_path, monkeypatch) -> None:
    # `make plan STACK=prod` end to end, its programs' runs shared with the worker's.
    from offline.plan import command

    monkeypatch.setattr(command, "run_program", remembered_program)
    assert command.main(["--stack", "prod", "--project-dir", str(FIXTURE_ROOT), "--out", str(tmp_path)]) == 0
    for project in ("trainium-eks", "trainium-workloads", "trainium-bootstrap"):
        assert (tmp_path / project / "prod" / "resources.json").is_file(), project
    written = json.loads((tmp_path / "trainium-bootstrap" / "prod" / "resources.json").read_text())
    assert written["outputs"]["deployRoleArns"] == {
        "prod": "arn:aws:iam::123456789012:role/trainium-github-deploy-prod"
    }


def test_programs_import_the_installed_package_without_editing_sys_path(workloads_dev: PlanResult) -> None:
    # pyproject.toml installs infra/, workloads/, offline/, bootstrap/ into the virtualenv every
    # Pulumi project here uses, so running a program adds nothing to the import path.
    import sys

    before = list(sys.path)
    bootstrap("dev")
    from offline.plan.command import plan_workloads

    plan_workloads(FIXTURE_ROOT / "workloads", "dev", run_program(FIXTURE_ROOT, "dev"))
    assert sys.path == before


# --- the cluster side: the preview role reads Kubernetes, never administers it -------------------

PREVIEW_ROLE = "arn:aws:iam::123456789012:role/trainium-github-preview-dev"
ADMIN = "arn:aws:iam::123456789012:role/MlOps"


def cluster_with(**overrides: Any) -> PlanResult:
    config = stack_config(FIXTURE_ROOT, "dev")
    for key, value in overrides.items():
        config[f"trainium-eks:{key}"] = json.dumps(value)
    return run_program(FIXTURE_ROOT, "dev", config)


def test_a_cluster_viewer_gets_an_admin_view_entry_the_kubernetes_provider_waits_for() -> None:
    # `pulumi preview --refresh` reads every Kubernetes object the stacks own, Helm's release
    # Secrets included: EKS user guide, "Review access policy permissions", AmazonEKSAdminViewPolicy
    # lists and views all resources including Secrets. Cluster-admin would hand pull requests'
    # code (which the preview runs) the cluster.
    from infra.components.cluster import principal_key

    plan = cluster_with(clusterViewers=[PREVIEW_ROLE], clusterAdmins=[ADMIN])
    key = principal_key(PREVIEW_ROLE, "viewer")
    assert plan.named(key, "aws:eks/accessEntry:AccessEntry").inputs["principalArn"] == PREVIEW_ROLE
    view = plan.named(f"{key}-admin-view").inputs
    assert view["policyArn"] == "arn:aws:eks::aws:cluster-access-policy/AmazonEKSAdminViewPolicy"
    assert view["accessScope"] == {"type": "cluster"}
    associations = {
        r.inputs["principalArn"]: r.inputs["policyArn"]
        for r in plan.of_type("aws:eks/accessPolicyAssociation:AccessPolicyAssociation")
    }
    assert associations[ADMIN].endswith("/AmazonEKSClusterAdminPolicy") and len(associations) == 2
    provider = plan.named("cluster", "pulumi:providers:kubernetes")
    assert plan.named(f"{key}-admin-view").urn in provider.dependencies


@pytest.mark.parametrize(
    ("viewers", "message"),
    [
        ([ADMIN], "trainium-eks:clusterViewers[0] = 'arn:aws:iam::123456789012:role/MlOps': also in clusterAdmins"),
        ([PREVIEW_ROLE, PREVIEW_ROLE], "trainium-eks:clusterViewers[1] = '" + PREVIEW_ROLE + "': listed twice"),
        (
            ["trainium-github-preview"],
            "trainium-eks:clusterViewers[0] = 'trainium-github-preview': must be an IAM role",
        ),
        ([""], "trainium-eks:clusterViewers[0]"),
    ],
)
def test_bad_cluster_viewers_are_refused(viewers: list[str], message: str) -> None:
    with pytest.raises(ConfigError) as refused:
        cluster_with(clusterViewers=viewers, clusterAdmins=[ADMIN])
    assert message in str(refused.value)


# --- what the deploy role may do, evaluated ------------------------------------------------------
# IAM policy evaluation logic (AWS IAM user guide, "Policy evaluation logic"): a request is allowed
# when some Allow statement matches its action and resource and no Deny statement does; an
# explicit Deny always wins. Action names compare case-insensitively, `*` and `?` are wildcards
# in both actions and resources.


def _matches(pattern: str, value: str, case: bool) -> bool:
    import fnmatch

    return fnmatch.fnmatchcase(value, pattern) if case else fnmatch.fnmatchcase(value.lower(), pattern.lower())


def _condition_holds(operator: str, key: str, expected: Any, context: dict[str, Any]) -> bool:
    """IAM user guide, "IAM JSON policy elements: Condition operators" and "Single-valued vs.
    multivalued context keys": a String/Arn operator on an absent key is false, its negated form
    (StringNotEquals) true; ForAnyValue: matches when any of the request's values matches, false when
    the key is absent. Only the operators the rendered policies use are known here."""
    expected = expected if isinstance(expected, list) else [expected]
    present = key in context
    values = context.get(key)
    values = values if isinstance(values, list) else [values]
    if operator in ("StringEquals", "ArnEquals"):
        return present and all(v in expected for v in values)
    if operator == "StringLike":
        return present and all(any(_matches(e, v, True) for e in expected) for v in values)
    if operator == "StringNotEquals":
        return not present or all(v not in expected for v in values)
    if operator == "ForAnyValue:StringEquals":
        return present and any(v in expected for v in values)
    if operator == "Null":  # "true": the key is absent; "false": present
        return present != (expected == ["true"])
    raise AssertionError(f"evaluator does not know {operator}")


def allowed(
    policy: dict[str, Any], action: str, resource: str, context: dict[str, Any] | None = None, *more: dict[str, Any]
) -> bool:
    """``context``: the request's condition keys (aws:ResourceTag/stack...; a list for a multivalued
    key such as aws:TagKeys). ``more``: further policies evaluated with ``policy`` as one set (a
    role's inline policy and its attached managed policy)."""
    context = context or {}

    def listed(value: Any) -> list[str]:
        return value if isinstance(value, list) else [value]

    def hits(statement: dict[str, Any]) -> bool:
        if "NotResource" in statement:  # every resource but the listed ones
            on_resource = not any(_matches(r, resource, True) for r in listed(statement["NotResource"]))
        else:
            on_resource = any(_matches(r, resource, True) for r in listed(statement["Resource"]))
        if "NotAction" in statement:
            on_action = not any(_matches(a, action, False) for a in listed(statement["NotAction"]))
        else:
            on_action = any(_matches(a, action, False) for a in listed(statement["Action"]))
        conditions = statement.get("Condition", {})
        return (
            on_action
            and on_resource
            and all(
                _condition_holds(op, key, value, context)
                for op, tests in conditions.items()
                for key, value in tests.items()
            )
        )

    statements = [s for p in (policy, *more) for s in p["Statement"] if hits(s)]
    return any(s["Effect"] == "Allow" for s in statements) and not any(s["Effect"] == "Deny" for s in statements)


def effective(identity: dict[str, Any], boundary: dict[str, Any], action: str, resource: str, context=None) -> bool:
    """A role with a permissions boundary: allowed only where both its own policies and the boundary
    allow, and neither denies (IAM user guide, "Policy evaluation logic": the boundary limits the
    identity-based policies)."""
    return allowed(identity, action, resource, context) and allowed(boundary, action, resource, context)


DEPLOY_DEV = "arn:aws:iam::123456789012:role/trainium-github-deploy-dev"
PREVIEW = "arn:aws:iam::123456789012:role/trainium-github-preview-dev"
GITHUB_PROVIDER = "arn:aws:iam::123456789012:oidc-provider/token.actions.githubusercontent.com"


def test_the_deploy_role_reads_its_own_role_as_the_cluster_program_needs(boot_dev: PlanResult) -> None:
    # The cluster program calls aws.iam.get_session_context (infra/lookups.py); for an assumed-role
    # caller that data source calls iam:GetRole on the caller's own role
    # (hashicorp/terraform-provider-aws internal/service/iam/session_context_data_source.go,
    # dataSourceSessionContextRead -> findRoleByName). Under `iam:*` denied on the pipeline roles,
    # every cluster `pulumi up` from the pipeline stopped there with AccessDenied.
    policy = json.loads(boot_dev.named("github-deploy-dev-policy").inputs["policy"])
    assert allowed(policy, "iam:GetRole", DEPLOY_DEV)
    assert allowed(policy, "iam:ListRoleTags", DEPLOY_DEV)
    # The other look-ups the cluster program makes (aws.*.get_* in infra/ and __main__.py), each
    # the API call its terraform-provider-aws data source makes.
    for action in (
        "ec2:DescribeCapacityReservations",
        "ec2:DescribeInstanceTypes",
        "ec2:DescribeInstanceTypeOfferings",
        "ec2:DescribeAvailabilityZones",
        "eks:DescribeAccessEntry",
        "eks:DescribeAddonVersions",
        "eks:DescribeCluster",
    ):
        assert allowed(policy, action, "*"), action
    assert allowed(policy, "iam:GetOpenIDConnectProvider", GITHUB_PROVIDER)
    assert allowed(policy, "sts:GetCallerIdentity", "*")


BOUNDARY_DEV = "arn:aws:iam::123456789012:policy/trainium-github-boundary-dev"
STACK_ROLE = "arn:aws:iam::123456789012:role/cluster-node-3f2a9c1"
# What a `pulumi up` of the dev cluster stack sends with each call on one of its own roles: the
# role's stack tag, and (granting calls) its boundary, (PassRole) the service it is passed to.
OWN_ROLE = {"aws:ResourceTag/stack": "dev", "iam:PermissionsBoundary": BOUNDARY_DEV}
ROLE_CALLS = {
    "iam:CreateRole": {"iam:PermissionsBoundary": BOUNDARY_DEV, "aws:RequestTag/stack": "dev"},
    "iam:PutRolePolicy": OWN_ROLE,
    "iam:UpdateAssumeRolePolicy": OWN_ROLE,
    "iam:AttachRolePolicy": {
        **OWN_ROLE,
        "iam:PolicyARN": "arn:aws:iam::aws:policy/AmazonEKSWorkerNodePolicy",
    },
    "iam:DeleteRolePolicy": OWN_ROLE,
    "iam:DetachRolePolicy": OWN_ROLE,
    "iam:UpdateRole": OWN_ROLE,
    "iam:PutRolePermissionsBoundary": OWN_ROLE,
    "iam:DeleteRole": OWN_ROLE,
    "iam:TagRole": {**OWN_ROLE, "aws:TagKeys": ["project"]},
    "iam:PassRole": {"aws:ResourceTag/stack": "dev", "iam:PassedToService": "eks.amazonaws.com"},
}


@pytest.mark.parametrize("action", sorted(ROLE_CALLS))
@pytest.mark.parametrize("role", [DEPLOY_DEV, PREVIEW])
def test_the_deploy_role_cannot_change_the_pipeline_roles(boot_dev: PlanResult, action: str, role: str) -> None:
    policy = json.loads(boot_dev.named("github-deploy-dev-policy").inputs["policy"])
    assert not allowed(policy, action, role, ROLE_CALLS[action])
    # ...while the stacks' own roles stay manageable.
    assert allowed(policy, action, STACK_ROLE, ROLE_CALLS[action])


@pytest.mark.parametrize(
    "action",
    [
        "iam:UpdateOpenIDConnectProviderThumbprint",
        "iam:AddClientIDToOpenIDConnectProvider",
        "iam:RemoveClientIDFromOpenIDConnectProvider",
        "iam:DeleteOpenIDConnectProvider",
        "iam:TagOpenIDConnectProvider",
    ],
)
def test_the_deploy_role_cannot_change_the_github_provider(boot_dev: PlanResult, action: str) -> None:
    policy = json.loads(boot_dev.named("github-deploy-dev-policy").inputs["policy"])
    assert not allowed(policy, action, GITHUB_PROVIDER)


def test_the_deploy_role_writes_state_but_cannot_purge_its_history(boot_dev: PlanResult) -> None:
    # A DIY update puts and deletes objects (checkpoints, the lock: gocloud blob Delete is
    # DeleteObject without a version); deleting a version is only ever needed to erase history.
    policy = json.loads(boot_dev.named("github-deploy-dev-policy").inputs["policy"])
    bucket = "arn:aws:s3:::example-org-trainium-pulumi-state-dev"
    state = f"{bucket}/.pulumi/stacks/trainium-eks/dev.json"
    for action in ("s3:GetObject", "s3:PutObject", "s3:DeleteObject"):
        assert allowed(policy, action, state)
    assert not allowed(policy, "s3:DeleteObjectVersion", state)
    for action in ("s3:PutBucketVersioning", "s3:PutLifecycleConfiguration", "s3:PutBucketOwnershipControls"):
        assert not allowed(policy, action, bucket)


def test_old_checkpoints_expire_after_the_configured_days(boot_dev: PlanResult) -> None:
    (rule,) = boot_dev.named("state-history").inputs["rules"]
    assert rule["status"] == "Enabled" and rule["filter"] == {"prefix": ""}
    assert rule["noncurrentVersionExpiration"] == {"noncurrentDays": 90}
    assert "expiration" not in rule, "the current state must never expire"
    plan = bootstrap("dev", stateNoncurrentVersionDays=30)
    (rule,) = plan.named("state-history").inputs["rules"]
    assert rule["noncurrentVersionExpiration"] == {"noncurrentDays": 30}


def test_the_shortest_deploy_session_allowed_is_the_workflows_longest_role_duration() -> None:
    # configure-aws-credentials passes role-duration-seconds to AssumeRoleWithWebIdentity, which
    # STS refuses above the role's MaxSessionDuration (deploySessionHours * 3600).
    import yaml

    from bootstrap.settings import WORKFLOW_SESSION_HOURS

    workflows = (REPO_ROOT / ".github" / "workflows").glob("*.yml")
    durations = [
        int(step["with"]["role-duration-seconds"])
        for w in workflows
        for job in yaml.safe_load(w.read_text())["jobs"].values()
        for step in job.get("steps", [])
        if "role-duration-seconds" in (step.get("with") or {})
    ]
    assert WORKFLOW_SESSION_HOURS * 3600 == max(durations)


# --- one account for dev and prod: each environment's roles stay in their lane ----------------------


@pytest.fixture(scope="module")
def one_account() -> PlanResult:
    return bootstrap(
        "dev",
        environments=[
            {"name": "dev", "pullRequestPreviews": True},
            {"name": "prod", "githubEnvironment": True, "dataBuckets": PROD_DATA},
        ],
    )


BUCKET = "arn:aws:s3:::example-org-trainium-pulumi-state-dev"


def _policy(plan: PlanResult, name: str) -> dict[str, Any]:
    return json.loads(plan.named(name).inputs["policy"])


def _state_objects(project: str, stack: str) -> list[str]:
    # What the DIY backend writes for one stack (pulumi/pulumi v3.259.0 pkg/backend/diy: store.go,
    # lock.go, state.go): the checkpoint and its .bak, a lock, history and backups.
    return [
        f"{BUCKET}/.pulumi/stacks/{project}/{stack}.json",
        f"{BUCKET}/.pulumi/stacks/{project}/{stack}.json.bak",
        f"{BUCKET}/.pulumi/locks/organization/{project}/{stack}/0f3c.json",
        f"{BUCKET}/.pulumi/history/{project}/{stack}/{stack}-1732400000.history.json",
        f"{BUCKET}/.pulumi/backups/{project}/{stack}/{stack}.1732400000.json",
    ]


def test_the_pipeline_projects_are_the_repositorys_projects() -> None:
    from offline.plan.runner import project_name

    assert permissions.STACK_PROJECTS == (project_name(REPO_ROOT), project_name(REPO_ROOT / "workloads"))
    assert permissions.BOOTSTRAP_PROJECT == project_name(BOOTSTRAP_DIR)


@pytest.mark.parametrize(("env", "other"), [("dev", "prod"), ("prod", "dev")])
def test_in_one_account_a_deploy_role_writes_only_its_own_environments_state(one_account, env, other) -> None:
    policy = _policy(one_account, f"github-deploy-{env}-policy")
    for project in permissions.STACK_PROJECTS:
        for obj in _state_objects(project, env):
            assert all(allowed(policy, a, obj) for a in ("s3:GetObject", "s3:PutObject", "s3:DeleteObject")), obj
        for obj in _state_objects(project, other):
            assert not any(allowed(policy, a, obj) for a in ("s3:GetObject", "s3:PutObject", "s3:DeleteObject")), obj
    # Every login reads meta.yaml; nobody but the administrator writes it (it exists from day one).
    assert allowed(policy, "s3:GetObject", f"{BUCKET}/.pulumi/meta.yaml")
    assert not allowed(policy, "s3:PutObject", f"{BUCKET}/.pulumi/meta.yaml")


# Every S3 action that reads an object's data, a version of it, or its metadata (Service Authorization
# Reference, "Actions defined by Amazon S3"). S3 API reference, GetObject: with a versionId "you must
# have the s3:GetObjectVersion permission ... s3:GetObject is not required"; the state bucket is
# versioned, so a Deny of s3:GetObject alone leaves every earlier checkpoint readable.
OBJECT_READS = (
    "s3:GetObject",
    "s3:GetObjectVersion",
    "s3:GetObjectAttributes",
    "s3:GetObjectVersionAttributes",
    "s3:GetObjectTorrent",
    "s3:GetObjectVersionForReplication",
    "s3:RestoreObject",
)
OBJECT_WRITES = ("s3:PutObject", "s3:DeleteObject", "s3:PutObjectAcl", "s3:PutObjectVersionAcl", "s3:ReplicateObject")


def with_read_only_access(policy: dict[str, Any]) -> dict[str, Any]:
    """A preview role's inline policy plus the S3 part of the AWS managed ReadOnlyAccess (AWS managed
    policy reference: s3:Get* and s3:List* on *): the widest read any policy on the role could
    grant, which the role's own denials must still hold against."""
    return {
        **policy,
        "Statement": [*policy["Statement"], {"Effect": "Allow", "Action": ["s3:Get*", "s3:List*"], "Resource": "*"}],
    }


@pytest.mark.parametrize(
    "name",
    ["github-deploy-dev-policy", "github-deploy-prod-policy", "github-preview-dev-state", "github-preview-prod-state"],
)
def test_no_pipeline_role_reads_or_writes_the_bootstraps_own_state_or_secrets(one_account, name) -> None:
    # The administrator's next bootstrap `pulumi up` acts on that state with admin rights; its
    # secrets live under a key of their own that no pipeline role (pull requests' included) opens.
    policy = _policy(one_account, name)
    policy = with_read_only_access(policy) if "preview" in name else policy
    for stack in ("dev", "prod"):
        for obj in _state_objects("trainium-bootstrap", stack):
            assert not any(allowed(policy, a, obj) for a in OBJECT_READS + OBJECT_WRITES), obj
    bootstrap_key = one_account.outputs["bootstrapSecretsKeyArn"]
    assert bootstrap_key not in {one_account.outputs["stateKeyArn"], *one_account.outputs["secretsKeyArns"].values()}
    assert not any(allowed(policy, a, bootstrap_key) for a in ("kms:Decrypt", "kms:Encrypt", "kms:GenerateDataKey"))
    # Both sides: the role still reads its own environment's state, versions included where
    # ReadOnlyAccess grants them (a preview role), and decrypts its own secrets.
    env = name.split("-")[2]
    assert allowed(policy, "s3:GetObject", f"{BUCKET}/.pulumi/stacks/trainium-eks/{env}.json")
    assert allowed(policy, "kms:Decrypt", one_account.outputs["secretsKeyArns"][env])
    if "preview" in name:
        assert allowed(policy, "s3:GetObjectVersion", f"{BUCKET}/.pulumi/stacks/trainium-eks/{env}.json")


def test_the_bootstrap_stack_has_a_secrets_provider_of_its_own(boot_dev: PlanResult) -> None:
    assert (
        boot_dev.outputs["bootstrapSecretsProvider"]
        == "awskms://alias/trainium-pulumi-secrets-bootstrap?region=us-west-2"
    )
    assert boot_dev.named("state-secrets-bootstrap", "aws:kms/key:Key").protect


@pytest.mark.parametrize("name", ["github-preview-dev-state", "github-deploy-dev-policy"])
def test_in_one_account_no_role_of_dev_reads_any_version_of_prods_state(one_account, name) -> None:
    # Denying s3:GetObject alone would leave GetObjectVersion (ReadOnlyAccess's
    # s3:Get*) open on prod's earlier checkpoints, decrypted by the shared state key.
    policy = _policy(one_account, name)
    policy = with_read_only_access(policy) if "preview" in name else policy
    for project in permissions.STACK_PROJECTS:
        for obj in _state_objects(project, "prod"):
            assert not any(allowed(policy, a, obj) for a in OBJECT_READS + OBJECT_WRITES), (obj, name)
        assert allowed(policy, "s3:GetObject", f"{BUCKET}/.pulumi/stacks/{project}/dev.json")


def test_in_one_account_a_role_of_dev_cannot_decrypt_prods_secrets_or_read_its_state(one_account) -> None:
    keys = one_account.outputs["secretsKeyArns"]
    assert keys["dev"] != keys["prod"] != one_account.outputs["stateKeyArn"]
    for name in ("github-deploy-dev-policy", "github-preview-dev-state"):
        policy = _policy(one_account, name)
        assert allowed(policy, "kms:Decrypt", keys["dev"]) and allowed(
            policy, "kms:Decrypt", one_account.outputs["stateKeyArn"]
        )
        assert not allowed(policy, "kms:Decrypt", keys["prod"]), name
        assert not allowed(policy, "s3:GetObject", f"{BUCKET}/.pulumi/stacks/trainium-eks/prod.json"), name
    # ReadOnlyAccess (attached to the preview roles) allows s3:GetObject on every object; the explicit
    # Deny of prod's state in the dev preview role's inline policy is what wins over it.
    (deny,) = [
        s
        for s in _policy(one_account, "github-preview-dev-state")["Statement"]
        if s["Sid"] == "NoOtherEnvironmentsState"
    ]
    assert deny["Effect"] == "Deny" and f"{BUCKET}/.pulumi/stacks/trainium-workloads/prod.json*" in deny["Resource"]


def test_in_one_account_the_dev_deploy_role_cannot_change_prods_resources(one_account) -> None:
    # The cluster program tags every taggable resource `stack: <stack>`; IAM compares the resource's
    # tag (aws:ResourceTag) and a request's tags (aws:RequestTag) with the denied environments.
    policy = _policy(one_account, "github-deploy-dev-policy")
    prod_cluster = "arn:aws:eks:us-west-2:123456789012:cluster/trn-prod"
    assert not allowed(policy, "eks:UpdateClusterConfig", prod_cluster, {"aws:ResourceTag/stack": "prod"})
    assert not allowed(policy, "ec2:TerminateInstances", "*", {"aws:ResourceTag/stack": "prod"})
    assert not allowed(policy, "ec2:CreateVpc", "*", {"aws:RequestTag/stack": "prod"})
    assert allowed(
        policy,
        "eks:UpdateClusterConfig",
        "arn:aws:eks:us-west-2:123456789012:cluster/trn-dev",
        {"aws:ResourceTag/stack": "dev"},
    )
    assert allowed(policy, "ec2:CreateVpc", "*", {"aws:RequestTag/stack": "dev"})
    # The dev preview role (which pull requests get) is kept off prod-tagged resources as well.
    preview = _policy(one_account, "github-preview-dev-state")
    assert not allowed(preview, "eks:DescribeCluster", prod_cluster, {"aws:ResourceTag/stack": "prod"})
    # In an account of its own, no other environment is named (there is none to protect).
    alone = json.loads(bootstrap("dev").named("github-deploy-dev-policy").inputs["policy"])
    assert not [s for s in alone["Statement"] if s["Sid"].startswith("NoOtherEnvironments")]
    assert "prod" not in json.dumps(alone)


def test_each_environments_secrets_key_is_tagged_with_its_stack(one_account) -> None:
    for env in ("dev", "prod"):
        key = one_account.named(f"state-secrets-{env}", "aws:kms/key:Key")
        assert key.inputs["tags"][permissions.STACK_TAG] == env
    assert one_account.outputs["secretsProviders"] == {
        env: f"awskms://alias/trainium-pulumi-secrets-{env}?region=us-west-2" for env in ("dev", "prod")
    }


def test_every_tagged_cluster_resource_carries_its_stack_and_no_stack_file_can_move_it(dev, plan_with) -> None:
    tagged = [r for r in dev.registrations if isinstance(r.inputs.get("tags"), dict)]
    assert len(tagged) > 20
    assert {r.inputs["tags"].get(permissions.STACK_TAG) for r in tagged} == {"dev"}
    with pytest.raises(ConfigError) as refused:
        plan_with(tags={"stack": "prod"})
    assert "trainium-eks:tags.stack = 'prod': set by the program" in str(refused.value)


# --- the permissions boundary: on every role the stacks create, and the deploy role can make no other ----


def boundary_arn(stack: str) -> str:
    from bootstrap.settings import boundary_name

    return f"arn:aws:iam::123456789012:policy/{boundary_name('trainium-github', stack)}"


def test_each_shipped_cluster_stack_names_its_environments_bootstrap_boundary(boot_dev, boot_prod) -> None:
    # The deploy role creates a role only with iam:PermissionsBoundary equal to its environment's
    # boundary; a stack file naming another would fail every role at `pulumi up`.
    for stack, boot in (("dev", boot_dev), ("prod", boot_prod)):
        assert (
            stack_config(FIXTURE_ROOT, stack)["trainium-eks:permissionsBoundary"]
            == boot.outputs["permissionsBoundaries"][stack]
        )
        policy = boot.named(f"github-boundary-{stack}", "aws:iam/policy:Policy")
        assert policy.inputs["name"] == boot.outputs["permissionsBoundaries"][stack]
        deploy = json.loads(boot.named(f"github-deploy-{stack}-policy").inputs["policy"])
        (grant,) = [s for s in deploy["Statement"] if s["Sid"] == "GrantOnlyWithinTheBoundary"]
        assert grant["Condition"] == {"StringEquals": {"iam:PermissionsBoundary": boundary_arn(stack)}}


def test_every_role_of_every_variant_carries_the_boundary(plans_by_variant) -> None:
    for (stack, variant), pair in plans_by_variant.items():
        roles = [r for plan in pair for r in plan.of_type("aws:iam/role:Role")]
        assert roles, (stack, variant)
        for role in roles:
            assert role.inputs.get("permissionsBoundary") == boundary_arn(stack), (stack, variant, role.name)
    recovery = plans_by_variant[("dev", "nodeRecovery")][0]
    assert any("neuron-node-recovery" in r.name for r in recovery.of_type("aws:iam/role:Role"))
    karpenter = plans_by_variant[("prod", "karpenter")][0]
    assert {"karpenter-controller", "karpenter-node"} <= {r.name for r in karpenter.of_type("aws:iam/role:Role")}


def test_pulumi_eks_own_service_role_gets_the_boundary_through_a_transform(dev) -> None:
    # pulumi/pulumi-eks nodejs/eks/cluster/cluster.ts (v4.3.0+, the pinned 4.4.0's line): without
    # `serviceRole` it makes a ServiceRole (nodejs/eks/servicerole.ts: an aws.iam.Role with no
    # permissionsBoundary argument); with skipDefaultNodeGroup and no createInstanceRole it makes no
    # instance role. The offline plan does not run the remote component, so the transform the
    # cluster carries is checked here as the engine would apply it to that child.
    from infra.components.iam import bounded_roles

    (cluster,) = dev.of_type("eks:index:Cluster")
    assert cluster.lifecycle.get("transforms") == 1
    transform = bounded_roles(boundary_arn("dev"))

    def run(type_: str, props: dict[str, Any]) -> Any:
        import pulumi

        return transform(
            pulumi.ResourceTransformArgs(True, type_, "cluster-eks-eksRole-role", props, pulumi.ResourceOptions())
        )

    role = run("aws:iam/role:Role", {"assumeRolePolicy": "{}", "tags": {"stack": "dev"}})
    assert role.props == {
        "assumeRolePolicy": "{}",
        "tags": {"stack": "dev"},
        "permissionsBoundary": boundary_arn("dev"),
    }
    assert run("aws:iam/rolePolicyAttachment:RolePolicyAttachment", {"role": "r"}) is None


def test_without_the_key_no_role_has_a_boundary() -> None:
    # An administrator's deploy into an account without the bootstrap: the key removed.
    config = stack_config(FIXTURE_ROOT, "dev")
    del config["trainium-eks:permissionsBoundary"]
    plan = remembered_program(FIXTURE_ROOT, "dev", config)
    assert not [r for r in plan.of_type("aws:iam/role:Role") if r.inputs.get("permissionsBoundary")]
    (cluster,) = plan.of_type("eks:index:Cluster")
    assert "transforms" not in cluster.lifecycle


def test_a_boundary_that_is_no_policy_name_is_refused(plan_with) -> None:
    with pytest.raises(ConfigError) as refused:
        plan_with(permissionsBoundary="arn:aws:iam::123456789012:policy/trainium-github-boundary-dev")
    assert "trainium-eks:permissionsBoundary = 'arn:aws:iam::123456789012:policy/trainium-github-boundary-dev'" in str(
        refused.value
    )


def _request_for(statement: dict[str, Any], stack: str) -> dict[str, Any]:
    """A request the statement was written to allow: each condition key set to its first value
    (negated operators left unset), and the resources it acts on carrying the stack's tag (every
    role and resource the stack makes does)."""
    context: dict[str, Any] = {f"aws:ResourceTag/{permissions.STACK_TAG}": stack}
    for operator, tests in statement.get("Condition", {}).items():
        if "Not" in operator or operator.startswith("Null"):
            continue
        for key, value in tests.items():
            first = value[0] if isinstance(value, list) else value
            context[key] = [first] if operator.startswith("ForAllValues") else first
    return context


def _requested_resource(action: str, resource: str, context: dict[str, Any]) -> str:
    """The ARN a request acts on where the statement allows `*`: CreateServiceLinkedRole creates
    role/aws-service-role/<service>/... (IAM user guide, "Using service-linked roles")."""
    if action == "iam:CreateServiceLinkedRole" and resource == "*":
        return f"arn:aws:iam::123456789012:role/aws-service-role/{context['iam:AWSServiceName']}/AWSServiceRole"
    return resource


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_the_boundary_keeps_every_inline_grant_of_every_stack_role(
    plans_by_variant, boot_dev, boot_prod, stack
) -> None:
    # Each Allow in each role's own policy (Karpenter's controller, the FSx CSI driver, the
    # autoscaler, the CloudWatch agent, training namespaces, node recovery...), requested as it was
    # written to be, is still allowed under the boundary. AWS managed policies (node, CNI, EBS CSI)
    # are not readable offline; they hold no IAM writes but the service-linked-role creation the
    # boundary keeps (AmazonEKSClusterPolicy).
    boot = boot_dev if stack == "dev" else boot_prod
    boundary = json.loads(boot.named(f"github-boundary-{stack}", "aws:iam/policy:Policy").inputs["policy"])
    checked = 0
    for variant in VARIANTS:
        for plan in plans_by_variant[(stack, variant)]:
            for inline in plan.of_type("aws:iam/rolePolicy:RolePolicy"):
                for statement in json.loads(inline.inputs["policy"])["Statement"]:
                    if statement["Effect"] != "Allow":
                        continue
                    context = _request_for(statement, stack)
                    resources = (
                        statement["Resource"] if isinstance(statement["Resource"], list) else [statement["Resource"]]
                    )
                    actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
                    for action in actions:
                        for resource in resources:
                            requested = _requested_resource(action, resource, context)
                            assert allowed(boundary, action, requested, context), (
                                variant,
                                inline.name,
                                action,
                                resource,
                            )
                            checked += 1
    assert checked > 50


BOUNDARY_DENIES = [
    ("iam:CreateRole", "arn:aws:iam::123456789012:role/escalate", {}),
    ("iam:PutRolePolicy", "arn:aws:iam::123456789012:role/cluster-node-3f2a9c1", {}),
    ("iam:AttachRolePolicy", "arn:aws:iam::123456789012:role/cluster-node-3f2a9c1", {}),
    ("iam:UpdateAssumeRolePolicy", "arn:aws:iam::123456789012:role/cluster-node-3f2a9c1", {}),
    ("iam:CreatePolicyVersion", "arn:aws:iam::123456789012:policy/trainium-github-boundary-dev", {}),
    ("iam:CreateUser", "arn:aws:iam::123456789012:user/backdoor", {}),
    ("iam:CreateAccessKey", "arn:aws:iam::123456789012:user/admin", {}),
    # A role made elsewhere (no stack tag) handed to EC2 through an instance profile.
    ("iam:PassRole", "arn:aws:iam::123456789012:role/OrgAdmin", {"iam:PassedToService": "ec2.amazonaws.com"}),
    ("sts:AssumeRole", "arn:aws:iam::123456789012:role/trainium-github-deploy-dev", {}),
    ("s3:GetObject", "arn:aws:s3:::example-org-trainium-pulumi-state-dev/.pulumi/stacks/trainium-eks/dev.json", {}),
    ("s3:PutBucketPolicy", "arn:aws:s3:::example-org-trainium-pulumi-state-dev", {}),
]


@pytest.mark.parametrize(("action", "resource", "context"), BOUNDARY_DENIES)
def test_the_boundary_denies_what_a_minted_role_would_climb_with(boot_dev, action, resource, context) -> None:
    boundary = json.loads(boot_dev.named("github-boundary-dev", "aws:iam/policy:Policy").inputs["policy"])
    assert not allowed(boundary, action, resource, context)
    for key in [
        boot_dev.outputs["stateKeyArn"],
        boot_dev.outputs["secretsKeyArns"]["dev"],
        boot_dev.outputs["bootstrapSecretsKeyArn"],
    ]:
        assert not allowed(boundary, "kms:Decrypt", key)
    # ...while what Karpenter's controller does with its own node role stays allowed.
    node = {"aws:ResourceTag/stack": "dev", "iam:PassedToService": "ec2.amazonaws.com"}
    assert allowed(boundary, "iam:PassRole", "arn:aws:iam::123456789012:role/karpenter-node-1a2b3c4", node)
    assert allowed(boundary, "iam:AddRoleToInstanceProfile", "arn:aws:iam::123456789012:instance-profile/trn-dev_123")


# --- what a preview reads: the refresh, never data ----------------------------------------------------

EVERYTHING = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}
DATA_READS = [
    ("s3:GetObject", "arn:aws:s3:::my-training-data/datasets/shard-0001.parquet"),
    ("s3:GetObjectVersion", "arn:aws:s3:::my-training-data/datasets/shard-0001.parquet"),
    ("secretsmanager:GetSecretValue", "arn:aws:secretsmanager:us-west-2:123456789012:secret:hf-token-AbCdEf"),
    ("ssm:GetParameter", "arn:aws:ssm:us-west-2:123456789012:parameter/team/db-password"),
    ("ssm:GetParametersByPath", "arn:aws:ssm:us-west-2:123456789012:parameter/team"),
    ("kms:Decrypt", "arn:aws:kms:us-west-2:123456789012:key/0b1c2d3e-other-teams-key"),
    ("logs:GetLogEvents", "arn:aws:logs:us-west-2:123456789012:log-group:/aws/containerinsights/trn-dev/application"),
    ("logs:FilterLogEvents", "arn:aws:logs:us-west-2:123456789012:log-group:/aws/eks/trn-dev/cluster"),
]


@pytest.mark.parametrize(("action", "resource"), DATA_READS)
def test_a_preview_reads_no_data_whatever_else_its_role_is_granted(boot_dev, action, resource) -> None:
    # The inline policy's denials hold even beside an Allow of everything (a managed policy AWS
    # widens, a policy someone attaches by hand).
    policy = json.loads(boot_dev.named("github-preview-dev-state").inputs["policy"])
    assert not allowed(policy, action, resource, {}, EVERYTHING)


def test_a_preview_still_reads_its_state_keys_refresh_and_public_parameters(boot_dev) -> None:
    policy = json.loads(boot_dev.named("github-preview-dev-state").inputs["policy"])
    for action, resource in [
        ("s3:GetObject", f"{DEV_BUCKET}/.pulumi/stacks/trainium-eks/dev.json"),
        ("s3:GetObject", f"{DEV_BUCKET}/.pulumi/meta.yaml"),
        ("kms:Decrypt", boot_dev.outputs["stateKeyArn"]),
        ("kms:Decrypt", boot_dev.outputs["secretsKeyArns"]["dev"]),
        ("iam:GetRolePolicy", "arn:aws:iam::123456789012:role/cluster-node-3f2a9c1"),
        ("kms:GetKeyPolicy", "arn:aws:kms:us-west-2:123456789012:key/0b1c2d3e"),
        ("fsx:DescribeDataRepositoryAssociations", "*"),
    ]:
        assert allowed(policy, action, resource), (action, resource)
    # AWS's public parameters hold no secret (pulumi-eks nodes/ami.ts reads the EKS AMI ids there).
    public = "arn:aws:ssm:us-west-2::parameter/aws/service/eks/optimized-ami/1.35/amazon-linux-2023/x86_64/standard/recommended/image_id"
    assert allowed(policy, "ssm:GetParameter", public, {}, EVERYTHING)
    sids = {s["Sid"] for s in policy["Statement"]}
    assert {"KeepBootstrapState", "KeepBootstrapSecrets", "NoObjectsButOwnState", "DecryptOnlyOwnKeys"} <= sids


DEV_BUCKET = "arn:aws:s3:::example-org-trainium-pulumi-state-dev"


# --- attack paths (docs/security.md), evaluated on the rendered policies of one shared account --------

PROD_DATA_OBJECT = "arn:aws:s3:::example-org-trainium-prod-datasets/redpajama/shard-0001.jsonl"
PROD_CLUSTER = "arn:aws:eks:us-west-2:123456789012:cluster/trn-prod"


def _boundary(plan: PlanResult, env: str) -> dict[str, Any]:
    return json.loads(plan.named(f"github-boundary-{env}", "aws:iam/policy:Policy").inputs["policy"])


def test_attack_path_12_a_pull_request_reads_no_data_of_dev_or_prod(one_account) -> None:
    # A same-repository pull request runs its own code with dev's preview role.
    preview = _policy(one_account, "github-preview-dev-state")
    keys = one_account.outputs["secretsKeyArns"]
    for action, resource, context in [
        ("s3:GetObject", PROD_DATA_OBJECT, {}),
        ("s3:ListBucket", "arn:aws:s3:::example-org-trainium-prod-datasets", {}),
        ("s3:GetObject", "arn:aws:s3:::example-org-trainium-dev-datasets/wikicorpus/part-0", {}),
        ("s3:GetObjectVersion", f"{BUCKET}/.pulumi/stacks/trainium-eks/prod.json", {}),
        ("kms:Decrypt", keys["prod"], {}),
        ("eks:DescribeCluster", PROD_CLUSTER, {"aws:ResourceTag/stack": "prod"}),
        ("secretsmanager:GetSecretValue", "*", {}),
    ]:
        assert not allowed(preview, action, resource, context, EVERYTHING), (action, resource)
    assert allowed(preview, "kms:Decrypt", keys["dev"])


def test_attack_path_14_a_merged_change_cannot_reach_prod_through_devs_deploy_role(one_account) -> None:
    deploy = _policy(one_account, "github-deploy-dev-policy")
    dev_boundary, prod_boundary = boundary_arn("dev"), boundary_arn("prod")
    minted = "arn:aws:iam::123456789012:role/escalate"
    # 1. A role without dev's boundary, or with prod's, cannot be made; with dev's it can.
    assert not allowed(deploy, "iam:CreateRole", minted, {"aws:RequestTag/stack": "dev"})
    assert not allowed(
        deploy, "iam:CreateRole", minted, {"iam:PermissionsBoundary": prod_boundary, "aws:RequestTag/stack": "dev"}
    )
    assert not allowed(
        deploy, "iam:CreateRole", minted, {"iam:PermissionsBoundary": dev_boundary, "aws:RequestTag/stack": "prod"}
    )
    assert allowed(
        deploy, "iam:CreateRole", minted, {"iam:PermissionsBoundary": dev_boundary, "aws:RequestTag/stack": "dev"}
    )
    # 2. ...nor be given an administrator's policy, nor lose or change the boundary.
    admin = {"iam:PermissionsBoundary": dev_boundary, "iam:PolicyARN": "arn:aws:iam::aws:policy/AdministratorAccess"}
    assert not allowed(deploy, "iam:AttachRolePolicy", minted, admin)
    assert not allowed(deploy, "iam:DeleteRolePermissionsBoundary", minted, {"iam:PermissionsBoundary": dev_boundary})
    for policy_arn in (dev_boundary, prod_boundary):
        for action in ("iam:CreatePolicyVersion", "iam:SetDefaultPolicyVersion", "iam:DeletePolicy"):
            assert not allowed(deploy, action, policy_arn), (action, policy_arn)
    # 3. A role another stack tagged cannot be moved into dev; a role made elsewhere cannot have its
    # trust edited or be passed while untagged.
    foreign = "arn:aws:iam::123456789012:role/OrgAdmin"
    prods = "arn:aws:iam::123456789012:role/cluster-node-9e8d7c6"
    retag = {"aws:TagKeys": ["stack"], "aws:RequestTag/stack": "dev", "aws:ResourceTag/stack": "prod"}
    assert not allowed(deploy, "iam:TagRole", prods, retag)
    assert not allowed(deploy, "iam:UntagRole", prods, {"aws:TagKeys": ["stack"], "aws:ResourceTag/stack": "prod"})
    assert not allowed(deploy, "iam:PutRolePermissionsBoundary", foreign, {"iam:PermissionsBoundary": dev_boundary})
    # A new role's own tags are authorized whether or not IAM puts its boundary in the TagRole
    # check's context (the service authorization reference does not list the key for TagRole).
    new_role_tags = {"aws:TagKeys": ["stack", "project"], "aws:RequestTag/stack": "dev"}
    assert allowed(deploy, "iam:TagRole", minted, new_role_tags)
    assert allowed(deploy, "iam:TagRole", minted, {**new_role_tags, "iam:PermissionsBoundary": dev_boundary})
    assert not allowed(deploy, "iam:UpdateAssumeRolePolicy", foreign, {})
    assert not allowed(deploy, "iam:PassRole", foreign, {"iam:PassedToService": "eks.amazonaws.com"})
    prod_role = {"aws:ResourceTag/stack": "prod", "iam:PassedToService": "eks.amazonaws.com"}
    assert not allowed(deploy, "iam:PassRole", "arn:aws:iam::123456789012:role/cluster-node-9e8d7c6", prod_role)
    assert not allowed(
        deploy, "iam:PassRole", STACK_ROLE, {"aws:ResourceTag/stack": "dev", "iam:PassedToService": "ec2.amazonaws.com"}
    )
    # 4. What the minted role can do (`*` in its own policy, dev's boundary) reaches nothing of prod.
    bounded = _boundary(one_account, "dev")
    for action, resource, context in [
        ("eks:UpdateClusterConfig", PROD_CLUSTER, {"aws:ResourceTag/stack": "prod"}),
        (
            "ec2:TerminateInstances",
            "arn:aws:ec2:us-west-2:123456789012:instance/i-0prod",
            {"aws:ResourceTag/stack": "prod"},
        ),
        ("s3:GetObject", PROD_DATA_OBJECT, {}),
        ("s3:PutObject", f"{BUCKET}/.pulumi/stacks/trainium-eks/prod.json", {}),
        ("kms:Decrypt", one_account.outputs["secretsKeyArns"]["prod"], {}),
        ("sts:AssumeRole", "arn:aws:iam::123456789012:role/trainium-github-deploy-prod", {}),
        ("iam:UpdateAssumeRolePolicy", "arn:aws:iam::123456789012:role/trainium-github-deploy-prod", {}),
        ("iam:CreateRole", minted + "2", {"iam:PermissionsBoundary": dev_boundary}),
        ("iam:PassRole", foreign, {"iam:PassedToService": "ec2.amazonaws.com"}),
    ]:
        assert not effective(EVERYTHING, bounded, action, resource, context), (action, resource)
    # ...while dev's own work stays possible under it.
    assert effective(
        EVERYTHING,
        bounded,
        "eks:DescribeCluster",
        "arn:aws:eks:us-west-2:123456789012:cluster/trn-dev",
        {"aws:ResourceTag/stack": "dev"},
    )


def test_attack_path_16_neither_the_deploy_role_nor_a_role_it_mints_rewrites_history_or_bootstrap_state(
    one_account,
) -> None:
    deploy = _policy(one_account, "github-deploy-dev-policy")
    bounded = _boundary(one_account, "dev")
    own_state = f"{BUCKET}/.pulumi/stacks/trainium-eks/dev.json"
    bootstrap_state = f"{BUCKET}/.pulumi/stacks/trainium-bootstrap/dev.json"
    assert allowed(deploy, "s3:PutObject", own_state)
    for action, resource in [
        ("s3:DeleteObjectVersion", own_state),
        ("s3:PutObject", bootstrap_state),
        ("s3:GetObject", bootstrap_state),
        ("s3:PutBucketVersioning", BUCKET),
        ("s3:PutLifecycleConfiguration", BUCKET),
        ("kms:ScheduleKeyDeletion", one_account.outputs["stateKeyArn"]),
        ("kms:Decrypt", one_account.outputs["bootstrapSecretsKeyArn"]),
    ]:
        assert not allowed(deploy, action, resource), (action, resource)
        assert not effective(EVERYTHING, bounded, action, resource), (action, resource)
    # The minted role cannot even read its own environment's state: no stack role needs it.
    assert not effective(EVERYTHING, bounded, "s3:GetObject", own_state)


def test_a_shared_account_must_name_prods_data_buckets() -> None:
    with pytest.raises(ConfigError) as refused:
        bootstrap("dev", environments=[{"name": "dev"}, {"name": "prod", "githubEnvironment": True}])
    assert "trainium-bootstrap:environments[1].dataBuckets = []: 'prod' deploys after an approval" in str(refused.value)
    with pytest.raises(ConfigError) as refused:
        bootstrap(
            "dev",
            environments=[{"name": "dev"}, {"name": "prod", "githubEnvironment": True, "dataBuckets": ["S3://x"]}],
        )
    assert "trainium-bootstrap:environments[1].dataBuckets[0] = 'S3://x'" in str(refused.value)


def test_code_owners_must_belong_to_the_repositorys_owner() -> None:
    with pytest.raises(ConfigError) as refused:
        bootstrap("dev", codeOwners=["@other-org/admins"])
    assert (
        "trainium-bootstrap:codeOwners[0] = '@other-org/admins': a team of another organization cannot own paths of "
        "example-org/trainium-eks; allowed: @<user> or @example-org/<team>"
    ) in str(refused.value)
    with pytest.raises(ConfigError) as refused:
        bootstrap("dev", codeOwners=["example-org/admins"])
    assert "trainium-bootstrap:codeOwners[0] = 'example-org/admins': allowed: a GitHub user (@login)" in str(
        refused.value
    )


def test_every_policy_fits_iams_size_quotas(one_account, boot_dev) -> None:
    # IAM quotas (IAM user guide, "IAM and AWS STS quotas"): a role's inline policies together at
    # most 10,240 characters, a managed policy 6,144, whitespace not counted; AWS would refuse a
    # larger one only at the bootstrap's `up`. The shared account's documents are the largest.
    import re

    for plan in (one_account, boot_dev):
        for policy in plan.of_type("aws:iam/rolePolicy:RolePolicy"):
            assert len(re.sub(r"\s", "", policy.inputs["policy"])) <= 10_240, policy.name
        for policy in plan.of_type("aws:iam/policy:Policy"):
            assert len(re.sub(r"\s", "", policy.inputs["policy"])) <= 6_144, policy.name


def test_a_deploy_can_link_a_file_system_to_s3(one_account) -> None:
    # FSx makes AWSServiceRoleForFSxS3Access_<fs-id> for a data repository association and attaches
    # and puts its policies as the caller (kubernetes-sigs/aws-fsx-csi-driver v1.9.0 docs/install.md):
    # allowed without a boundary on that path only, and never an administrator's policy.
    deploy = _policy(one_account, "github-deploy-dev-policy")
    link_role = "arn:aws:iam::123456789012:role/aws-service-role/s3.data-source.lustre.fsx.amazonaws.com/AWSServiceRoleForFSxS3Access_fs-0123"
    for action in ("iam:AttachRolePolicy", "iam:PutRolePolicy"):
        assert allowed(deploy, action, link_role, {"iam:PolicyARN": "arn:aws:iam::aws:policy/aws-service-role/x"})
    other = "arn:aws:iam::123456789012:role/aws-service-role/eks.amazonaws.com/AWSServiceRoleForAmazonEKS"
    assert not allowed(deploy, "iam:PutRolePolicy", other, {})
    admin = {"iam:PolicyARN": "arn:aws:iam::aws:policy/AdministratorAccess"}
    assert not allowed(deploy, "iam:AttachRolePolicy", link_role, admin)
