"""GitHub Actions' way into the account: the OIDC provider and the preview and deploy roles."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from bootstrap import permissions, trust
from bootstrap.settings import DeployEnvironment, boundary_name, role_name

# One hour covers a preview of every stack; deploy sessions are configured (a first cluster
# `pulumi up` runs past an hour, and expired credentials would fail it half-way).
PREVIEW_SESSION_SECONDS = 3600


@dataclass
class GitHubOidcArgs:
    repository: str
    # What the tokens' sub starts with (bootstrap/settings.py subject_prefix).
    subject_prefix: str
    main_branch: str
    environments: list[DeployEnvironment]
    existing_provider_arn: str | None
    role_name_prefix: str
    deploy_session_hours: int
    account: str
    partition: str
    bucket_arn: pulumi.Input[str]
    state_key_arn: pulumi.Input[str]
    # Environment -> the ARN of its secrets key.
    secrets_key_arns: dict[str, pulumi.Input[str]]
    bootstrap_secrets_key_arn: pulumi.Input[str]
    tags: dict[str, str]


class GitHubOidc(pulumi.ComponentResource):
    """One preview and one deploy role per environment: a role of one environment reads and writes
    only that environment's state and secrets (bootstrap/permissions.py)."""

    def __init__(self, name: str, args: GitHubOidcArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("trainium:bootstrap:GitHubOidc", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)

        if args.existing_provider_arn:
            provider_arn: pulumi.Input[str] = args.existing_provider_arn
        else:
            # IAM no longer checks thumbprints for this issuer (it trusts its own CA library), so
            # none is pinned; the audience is what aws-actions/configure-aws-credentials asks for.
            provider = aws.iam.OpenIdConnectProvider(
                f"{name}-provider",
                url=trust.OIDC_URL,
                client_id_lists=[trust.AUDIENCE],
                tags=args.tags,
                opts=pulumi.ResourceOptions(parent=self, protect=True),
            )
            provider_arn = provider.arn

        iam_arn = f"arn:{args.partition}:iam::{args.account}"
        names = {
            e.name: (
                role_name(args.role_name_prefix, f"preview-{e.name}"),
                role_name(args.role_name_prefix, f"deploy-{e.name}"),
            )
            for e in args.environments
        }
        protected = sorted(f"{iam_arn}:role/{n}" for pair in names.values() for n in pair)
        secrets = pulumi.Output.all(**{k: pulumi.Output.from_input(v) for k, v in args.secrets_key_arns.items()})
        data_buckets = {e.name: list(e.data_buckets) for e in args.environments}
        # Known before the policies exist, so each deploy policy can name every environment's.
        boundary_arns = {
            e.name: f"{iam_arn}:policy/{boundary_name(args.role_name_prefix, e.name)}" for e in args.environments
        }
        self.boundaries: dict[str, aws.iam.Policy] = {}

        self.preview_roles: dict[str, aws.iam.Role] = {}
        self.deploy_roles: dict[str, aws.iam.Role] = {}

        # One call per environment: the documents computed later (apply) close over that call's env.
        def declare_roles(env: DeployEnvironment) -> None:
            preview_name, deploy_name = names[env.name]
            self.boundaries[env.name] = aws.iam.Policy(
                f"{name}-boundary-{env.name}",
                name=boundary_name(args.role_name_prefix, env.name),
                description=f"Permissions boundary of every role the {env.name} stacks of {args.repository} create",
                policy=pulumi.Output.all(
                    args.bucket_arn, args.state_key_arn, secrets, args.bootstrap_secrets_key_arn, provider_arn
                ).apply(
                    lambda a: json.dumps(
                        permissions.boundary_policy(
                            args.account,
                            args.partition,
                            env.name,
                            a[0],
                            [a[1], *a[2].values(), a[3]],
                            [*protected, a[4], *boundary_arns.values()],
                            {k: v for k, v in a[2].items() if k != env.name},
                            data_buckets,
                        )
                    )
                ),
                tags=args.tags,
                opts=child,
            )
            subjects = trust.preview_subjects(args.subject_prefix, args.main_branch, env.pull_request_previews)
            preview = aws.iam.Role(
                f"{name}-preview-{env.name}",
                name=preview_name,
                description=f"Pulumi previews of the {env.name} stacks of {args.repository}: "
                + ("pull requests, " if env.pull_request_previews else "")
                + "main (drift, before approval)",
                assume_role_policy=pulumi.Output.from_input(provider_arn).apply(
                    lambda arn: json.dumps(trust.github_trust_policy(arn, subjects))
                ),
                max_session_duration=PREVIEW_SESSION_SECONDS,
                tags=args.tags,
                opts=child,
            )
            aws.iam.RolePolicyAttachment(
                f"{name}-preview-{env.name}-view-only",
                role=preview.name,
                policy_arn=f"arn:{args.partition}:iam::aws:policy/{permissions.PREVIEW_MANAGED_POLICY}",
                opts=child,
            )
            aws.iam.RolePolicy(
                f"{name}-preview-{env.name}-state",
                role=preview.name,
                policy=pulumi.Output.all(
                    args.bucket_arn, args.state_key_arn, secrets, args.bootstrap_secrets_key_arn
                ).apply(
                    lambda a: json.dumps(
                        permissions.preview_policy(
                            a[0],
                            a[1],
                            env.name,
                            a[2][env.name],
                            {k: v for k, v in a[2].items() if k != env.name},
                            a[3],
                            args.partition,
                            data_buckets=data_buckets,
                        )
                    )
                ),
                opts=child,
            )
            self.preview_roles[env.name] = preview

            deploy_subjects = trust.deploy_subjects(
                args.subject_prefix, args.main_branch, env.name, env.github_environment
            )
            role = aws.iam.Role(
                f"{name}-deploy-{env.name}",
                name=deploy_name,
                description=f"pulumi up of the {env.name} stacks of {args.repository}",
                assume_role_policy=pulumi.Output.from_input(provider_arn).apply(
                    lambda arn: json.dumps(trust.github_trust_policy(arn, deploy_subjects))
                ),
                max_session_duration=args.deploy_session_hours * 3600,
                tags=args.tags,
                opts=child,
            )
            aws.iam.RolePolicy(
                f"{name}-deploy-{env.name}-policy",
                role=role.name,
                policy=pulumi.Output.all(
                    args.bucket_arn,
                    args.state_key_arn,
                    provider_arn,
                    secrets,
                    args.bootstrap_secrets_key_arn,
                ).apply(
                    lambda a: json.dumps(
                        permissions.deploy_policy(
                            permissions.DEPLOY_SERVICES,
                            args.account,
                            args.partition,
                            a[0],
                            a[1],
                            protected,
                            a[2],
                            env.name,
                            a[3][env.name],
                            {k: v for k, v in a[3].items() if k != env.name},
                            a[4],
                            boundary_arns[env.name],
                            data_buckets,
                        )
                    )
                ),
                opts=child,
            )
            self.deploy_roles[env.name] = role

        for env in args.environments:
            declare_roles(env)
        self.provider_arn = pulumi.Output.from_input(provider_arn)
        self.register_outputs({})
