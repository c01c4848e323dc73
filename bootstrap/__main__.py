"""The bootstrap stack: what the pipeline needs in one AWS account. Wiring only.

State backend (bucket + KMS key) and GitHub OIDC roles; its outputs are the repository
variables the workflows read (docs/pipeline.md).
"""

import pulumi
import pulumi_aws as aws

from bootstrap.github_oidc import GitHubOidc, GitHubOidcArgs
from bootstrap.settings import parse_bootstrap_config
from bootstrap.state import StateBackend, StateBackendArgs
from bootstrap.variables import backend_url, repository_variables, secrets_provider
from infra.config.load import engine_config

config = parse_bootstrap_config(engine_config())
identity = aws.get_caller_identity()
partition = aws.get_partition().partition

state = StateBackend("state", StateBackendArgs(
    config.state_bucket, config.secrets_key_alias, config.tags, config.state_noncurrent_version_days
))
github = GitHubOidc(
    "github",
    GitHubOidcArgs(
        repository=config.github_repository,
        main_branch=config.main_branch,
        environments=config.environments,
        existing_provider_arn=config.existing_oidc_provider_arn,
        role_name_prefix=config.role_name_prefix,
        deploy_session_hours=config.deploy_session_hours,
        account=identity.account_id,
        partition=partition,
        bucket_arn=state.bucket.arn,
        key_arn=state.key.arn,
        tags=config.tags,
    ),
)

pulumi.export("stateBucket", state.bucket.bucket)
pulumi.export("backendUrl", backend_url(config.state_bucket, config.region))
pulumi.export("secretsProvider", secrets_provider(config.secrets_key_alias, config.region))
pulumi.export("secretsKeyArn", state.key.arn)
pulumi.export("oidcProviderArn", github.provider_arn)
pulumi.export("previewRoleArn", github.preview_role.arn)
pulumi.export("deployRoleArns", {name: role.arn for name, role in github.deploy_roles.items()})
pulumi.export(
    "repositoryVariables",
    pulumi.Output.all(github.preview_role.arn, {n: r.arn for n, r in github.deploy_roles.items()}).apply(
        lambda a: repository_variables(config.region, config.state_bucket, a[0], a[1])
    ),
)
