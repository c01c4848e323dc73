"""The bootstrap stack's configuration: one stack per AWS account the pipeline deploys into.

Keys live under ``trainium-bootstrap:`` in ``bootstrap/Pulumi.<stack>.yaml``. Shapes are
checked by the model; rules across fields in ``bootstrap_problems``; every refusal names
the key, the value and what is allowed, before any resource is declared.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import Field

from infra.config.aws_limits import region_partition
from infra.config.base import (
    REGION_KEY,
    ConfigModel,
    project_values,
    qualified_key,
    validated_with_rules,
    with_stray_keys_refused,
)
from infra.config.naming import aws_tag_problem
from infra.config.rules import BUCKET

PROJECT = "trainium-bootstrap"
# GitHub: owner names are 1-39 letters, digits and single hyphens; repository names letters,
# digits, '.', '_' and '-' (at most 100). The OIDC `sub` claim carries them as GitHub spells them,
# and IAM compares it case-sensitively, so the spelling must match the repository's.
REPOSITORY_PATTERN = r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})/[A-Za-z0-9._-]{1,100}$"
# Stack names the workflows deploy (Pulumi stack names; also the GitHub environment names).
ENVIRONMENT_PATTERN = r"^[a-z][a-z0-9-]{0,30}$"
BRANCH_PATTERN = r"^[A-Za-z0-9._/-]{1,200}$"
# What a token's `sub` starts with before `:pull_request`, `:ref:...` or `:environment:...`. GitHub
# docs, "OpenID Connect" concepts, "Immutable subject claims" (github/docs PR #45221) and the changelog
# 2026-04-23 "Immutable subject claims for GitHub Actions OIDC tokens": repositories created, renamed
# or transferred after mid-2026 (and any that opted in) carry the owner's and the repository's numeric
# IDs, `repo:octocat@123456/my-repo@456789`; older ones `repo:octocat/my-repo`. The docs write the ID
# after `@`, the changelog's example after `-`: both are accepted, the prefix is copied from
# GitHub's OIDC settings (docs/pipeline.md), and IAM compares it exactly.
SUBJECT_ID = r"(?:[@-][0-9]{1,20})?"
OIDC_PROVIDER_ARN_PATTERN = (
    r"^arn:(aws|aws-cn|aws-us-gov):iam::[0-9]{12}:oidc-provider/token\.actions\.githubusercontent\.com$"
)
REGION_PATTERN = r"^[a-z]{2}(-gov)?-[a-z]+-[0-9]$"
KMS_ALIAS_PATTERN = r"^alias/[A-Za-z0-9/_-]{1,250}$"
# An S3 bucket name (3-63 lowercase letters, digits, '.' and '-') where `*` stands for any run of them.
DATA_BUCKET_PATTERN = r"^[a-z0-9*][a-z0-9.*-]{1,61}[a-z0-9*]$"
# A GitHub user (@login) or team (@org/team-slug), as CODEOWNERS names owners.
CODE_OWNER_PATTERN = r"^@[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})(?:/[A-Za-z0-9._-]{1,100})?$"
ROLE_PREFIX_PATTERN = r"^[A-Za-z0-9+=,.@_-]{1,32}$"
# IAM quotas: a role name is at most 64 characters; AWS would refuse a longer one only at `up`.
ROLE_NAME_MAX = 64
# The workload deploy jobs request 6-hour sessions (.github/workflows/deploy.yml and deploy-prod.yml,
# role-duration-seconds 21600): as long as a GitHub-hosted job may run.
WORKFLOW_SESSION_HOURS = 6


# The bootstrap stack's own secrets key: <secretsKeyAliasPrefix>-bootstrap (bootstrap/state.py).
BOOTSTRAP_SECRETS = "bootstrap"


def role_name(prefix: str, purpose: str) -> str:
    """``<prefix>-preview``, ``<prefix>-deploy-<environment>``."""
    return f"{prefix}-{purpose}"


def boundary_name(prefix: str, environment: str) -> str:
    """The managed policy every role of ``environment``'s stacks carries as its permissions boundary:
    ``<prefix>-boundary-<environment>`` (the cluster stack's ``permissionsBoundary``)."""
    return role_name(prefix, f"boundary-{environment}")


class DeployEnvironment(ConfigModel):
    # The stack name (dev, prod) this account's deploy role may update, in both projects.
    name: str = Field(pattern=ENVIRONMENT_PATTERN, description="Stack name the deploy role may update (dev, prod).")
    github_environment: bool = Field(
        default=False,
        description=(
            "true: the deploy role trusts only jobs in the GitHub environment of this name (the one with "
            "required reviewers); false: it trusts pushes to the main branch."
        ),
    )
    data_buckets: list[str] = Field(
        default=[],
        description=(
            "Names of the S3 buckets this environment's stacks read (trainingDataBuckets, namespaceDataBuckets, "
            "dataRepositories), `*` as a wildcard: where environments share the account, the others' roles are "
            "denied them, bucket and objects (objects carry no bucket tag, so a name is the only handle)."
        ),
    )
    pull_request_previews: bool = Field(
        default=False,
        description=(
            "true: this environment's preview role also trusts pull requests, whose code nobody has reviewed yet "
            "and which can then read this environment's state and decrypt its secrets; false: only the main "
            "branch (drift checks, the deploy workflow's preview before an approval)."
        ),
    )


class BootstrapConfig(ConfigModel):
    region: str = Field(pattern=REGION_PATTERN, description="AWS region of the state bucket and key (aws:region).")
    github_repository: str = Field(
        pattern=REPOSITORY_PATTERN, description="owner/name of the repository whose workflows may assume the roles."
    )
    oidc_subject_prefix: str | None = Field(
        default=None,
        description=(
            "What the repository's OIDC tokens' sub claim starts with, as GitHub's OIDC settings show it: "
            "repo:OWNER/REPO (the default, repositories from before the immutable subject claims) or "
            "repo:OWNER@OWNER_ID/REPO@REPO_ID (created, renamed or transferred since, or opted in)."
        ),
    )
    main_branch: str = Field(default="main", pattern=BRANCH_PATTERN, description="Branch whose pushes deploy.")
    code_owners: list[str] = Field(
        default=[],
        description=(
            "Who must approve changes to what guards the pipeline (the policy pack and its config, security/, "
            "bootstrap/, .github/): GitHub users or teams (@org/team) of the repository's owner; .github/CODEOWNERS "
            "names exactly them, and branch protection must require code-owner review (docs/pipeline.md)."
        ),
    )
    state_bucket: str = Field(
        pattern=BUCKET, description="Name of the S3 bucket holding Pulumi state (globally unique)."
    )
    state_key_alias: str = Field(
        default="alias/trainium-pulumi-state",
        pattern=KMS_ALIAS_PATTERN,
        description="Alias of the KMS key that encrypts the state bucket (never a stack's secrets).",
    )
    secrets_key_alias_prefix: str = Field(
        default="alias/trainium-pulumi-secrets",
        pattern=KMS_ALIAS_PATTERN,
        description="Alias prefix of the per-environment KMS keys behind the stacks' awskms:// secrets providers: "
        "<prefix>-<environment>, so a role of one environment cannot decrypt another's secrets.",
    )
    role_name_prefix: str = Field(
        default="trainium-github", pattern=ROLE_PREFIX_PATTERN, description="Prefix of the IAM role names."
    )
    environments: list[DeployEnvironment] = Field(
        min_length=1, description="The environments (stacks) deployed into this account, one deploy role each."
    )
    existing_oidc_provider_arn: str | None = Field(
        default=None,
        pattern=OIDC_PROVIDER_ARN_PATTERN,
        description="Reuse the account's GitHub OIDC provider (IAM holds one per URL) instead of creating it.",
    )
    deploy_session_hours: int = Field(
        # Below the workflows' longest role-duration-seconds (21600), STS refuses the job's
        # AssumeRoleWithWebIdentity; 12 h is IAM's MaxSessionDuration ceiling.
        default=WORKFLOW_SESSION_HOURS,
        ge=WORKFLOW_SESSION_HOURS,
        le=12,
        description="Longest session of a deploy role: at least the workflows' role-duration-seconds (6 h for the "
        "workload stack's jobs, as long as a GitHub-hosted job may run).",
    )
    state_noncurrent_version_days: int = Field(
        default=90,
        ge=1,
        le=3650,
        description=(
            "Days an overwritten state checkpoint is kept (S3 noncurrent-version expiry): the window in which a "
            "damaged stack can be restored from an earlier version."
        ),
    )
    tags: dict[str, str] = Field(default_factory=dict, description="Tags on every taggable resource.")


def subject_prefix(config: BootstrapConfig) -> str:
    return config.oidc_subject_prefix or f"repo:{config.github_repository}"


def subject_prefix_problem(prefix: str, repository: str) -> str | None:
    owner, _, name = repository.partition("/")
    form = rf"^repo:{re.escape(owner)}{SUBJECT_ID}/{re.escape(name)}{SUBJECT_ID}$"
    if re.fullmatch(form, prefix):
        return None
    return (
        f"allowed: repo:{repository} or, with the immutable IDs GitHub's OIDC settings show, "
        f"repo:{owner}@<owner id>/{name}@<repository id> (this repository's names, exactly as spelled "
        "in githubRepository; no wildcards, nothing after the repository)"
    )


def key_name(loc: tuple[Any, ...]) -> str:
    return qualified_key(PROJECT, loc)


def bootstrap_problems(config: BootstrapConfig) -> list[str]:
    """Rules across fields the model cannot express."""
    problems: list[str] = []
    names = [e.name for e in config.environments]
    for i, name in enumerate(names):
        if name == BOOTSTRAP_SECRETS:
            problems.append(
                f"{key_name(('environments', i, 'name'))} = {name!r}: the bootstrap stack's own secrets key is "
                f"{config.secrets_key_alias_prefix}-{BOOTSTRAP_SECRETS}; allowed: any other stack name"
            )
        if name in names[:i]:
            problems.append(
                f"{key_name(('environments', i, 'name'))} = {name!r}: listed twice; one deploy role per environment"
            )
        role = role_name(config.role_name_prefix, f"deploy-{name}")  # the longer of its two roles
        if len(role) > ROLE_NAME_MAX:
            problems.append(
                f"{key_name(('environments', i, 'name'))} = {name!r}: its deploy role {role!r} is {len(role)} characters; "
                f"IAM allows at most {ROLE_NAME_MAX} (shorten this name or {key_name(('roleNamePrefix',))} = "
                f"{config.role_name_prefix!r})"
            )
        entry = config.environments[i]
        if entry.github_environment and entry.pull_request_previews:
            problems.append(
                f"{key_name(('environments', i, 'pullRequestPreviews'))} = true: {name!r} deploys only after an "
                "approval (githubEnvironment: true), and a pull request's unreviewed code would read its state and "
                "decrypt its secrets; allowed: false (its preview runs on main, before the approval)"
            )
    if len(config.environments) > 1:
        for i, entry in enumerate(config.environments):
            if entry.github_environment and not entry.data_buckets:
                problems.append(
                    f"{key_name(('environments', i, 'dataBuckets'))} = []: {entry.name!r} deploys after an approval "
                    "and shares this account with other environments, whose roles may otherwise read its training "
                    "data; allowed: the names (or `*` patterns) of the buckets its stacks read"
                )
    for i, entry in enumerate(config.environments):
        for j, bucket in enumerate(entry.data_buckets):
            if not re.fullmatch(DATA_BUCKET_PATTERN, bucket):
                problems.append(
                    f"{key_name(('environments', i, 'dataBuckets', j))} = {bucket!r}: allowed: an S3 bucket name "
                    "(lowercase letters, digits, '.' and '-'), `*` for any run of them"
                )
    owner = config.github_repository.split("/")[0]
    for i, handle in enumerate(config.code_owners):
        if not re.fullmatch(CODE_OWNER_PATTERN, handle):
            problems.append(
                f"{key_name(('codeOwners', i))} = {handle!r}: allowed: a GitHub user (@login) or team (@{owner}/<team>)"
            )
        elif "/" in handle and handle[1:].split("/")[0].lower() != owner.lower():
            problems.append(
                f"{key_name(('codeOwners', i))} = {handle!r}: a team of another organization cannot own paths of "
                f"{config.github_repository}; allowed: @<user> or @{owner}/<team>"
            )
    if config.oidc_subject_prefix is not None:
        problem = subject_prefix_problem(config.oidc_subject_prefix, config.github_repository)
        if problem:
            problems.append(f"{key_name(('oidcSubjectPrefix',))} = {config.oidc_subject_prefix!r}: {problem}")
    for key, value in config.tags.items():
        problem = aws_tag_problem(key, value)
        if problem:
            problems.append(f"{key_name(('tags', key))} = {value!r}: {problem}")
    # IAM is global, but each partition has its own: an OIDC provider of another partition is not this account's.
    arn = config.existing_oidc_provider_arn
    if arn is not None and arn.split(":")[1] != region_partition(config.region):
        problems.append(
            f"{key_name(('existingOidcProviderArn',))} = {arn!r}: of the {arn.split(':')[1]!r} partition, but "
            f"{REGION_KEY} {config.region} is in {region_partition(config.region)!r}; allowed: "
            f"arn:{region_partition(config.region)}:iam::<account>:oidc-provider/token.actions.githubusercontent.com"
        )
    return problems


def parse_bootstrap_config(all_config: dict[str, str]) -> BootstrapConfig:
    """The validated configuration, or ``ConfigError`` naming every bad key."""
    return with_stray_keys_refused(all_config, PROJECT, lambda: _parsed(all_config))


def _parsed(all_config: dict[str, str]) -> BootstrapConfig:
    raw = project_values(all_config, PROJECT)
    if REGION_KEY in all_config:
        raw["region"] = all_config[REGION_KEY]
    return validated_with_rules(BootstrapConfig, raw, key_name, bootstrap_problems)
