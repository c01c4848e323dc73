"""The bootstrap stack: what the pipeline needs in one AWS account. Wiring only.

State backend (bucket, its KMS key, one secrets key per environment) and GitHub OIDC roles
(a preview and a deploy role per environment); its outputs are the repository
variables the workflows read (docs/pipeline.md).
"""

import pulumi
import pulumi_aws as aws

from bootstrap import permissions
from bootstrap.github_oidc import GitHubOidc, GitHubOidcArgs
from bootstrap.settings import BOOTSTRAP_SECRETS, parse_bootstrap_config, subject_prefix
from bootstrap.state import StateBackend, StateBackendArgs
from bootstrap.variables import backend_url, repository_variables, secrets_key_alias, secrets_provider
from infra.config.load import engine_config

config = parse_bootstrap_config(engine_config())
identity = aws.get_caller_identity()
partition = aws.get_partition().partition

secrets_aliases = {e.name: secrets_key_alias(config.secrets_key_alias_prefix, e.name) for e in config.environments}
bootstrap_alias = secrets_key_alias(config.secrets_key_alias_prefix, BOOTSTRAP_SECRETS)
state = StateBackend(
    "state",
    StateBackendArgs(
        config.state_bucket,
        config.state_key_alias,
        config.tags,
        config.state_noncurrent_version_days,
        secrets_aliases,
        permissions.STACK_TAG,
        bootstrap_alias,
    ),
)
github = GitHubOidc(
    "github",
    GitHubOidcArgs(
        repository=config.github_repository,
        subject_prefix=subject_prefix(config),
        main_branch=config.main_branch,
        environments=config.environments,
        existing_provider_arn=config.existing_oidc_provider_arn,
        role_name_prefix=config.role_name_prefix,
        deploy_session_hours=config.deploy_session_hours,
        account=identity.account_id,
        partition=partition,
        bucket_arn=state.bucket.arn,
        state_key_arn=state.key.arn,
        secrets_key_arns={name: key.arn for name, key in state.secrets_keys.items()},
        bootstrap_secrets_key_arn=state.bootstrap_secrets_key.arn,
        tags=config.tags,
    ),
)

pulumi.export("stateBucket", state.bucket.bucket)
pulumi.export("backendUrl", backend_url(config.state_bucket, config.region))
pulumi.export(
    "secretsProviders", {name: secrets_provider(alias, config.region) for name, alias in secrets_aliases.items()}
)
# The bootstrap stack's own (docs/pipeline.md, "Its own state"): no pipeline role can decrypt it.
pulumi.export("bootstrapSecretsProvider", secrets_provider(bootstrap_alias, config.region))
pulumi.export("bootstrapSecretsKeyArn", state.bootstrap_secrets_key.arn)
pulumi.export("stateKeyArn", state.key.arn)
pulumi.export("secretsKeyArns", {name: key.arn for name, key in state.secrets_keys.items()})
pulumi.export("oidcProviderArn", github.provider_arn)
pulumi.export("previewRoleArns", {name: role.arn for name, role in github.preview_roles.items()})
pulumi.export("deployRoleArns", {name: role.arn for name, role in github.deploy_roles.items()})
# What each environment's cluster stack sets as trainium-eks:permissionsBoundary.
pulumi.export("permissionsBoundaries", {name: policy.name for name, policy in github.boundaries.items()})
pulumi.export(
    "repositoryVariables",
    pulumi.Output.all(
        {n: r.arn for n, r in github.preview_roles.items()}, {n: r.arn for n, r in github.deploy_roles.items()}
    ).apply(lambda a: repository_variables(config.region, config.state_bucket, a[0], a[1])),
)
