"""What the workflows read from the repository's variables, from the bootstrap's outputs (pure).

One set per environment (stack name) so dev and prod may live in different accounts, each
with its own bootstrap stack; in one account both sets carry the same bucket, and each
environment still has its own preview and deploy role.
"""

from __future__ import annotations


def backend_url(bucket: str, region: str) -> str:
    """`pulumi login` URL of the DIY S3 backend (the bucket's region given, not guessed)."""
    return f"s3://{bucket}?region={region}"


def secrets_provider(alias: str, region: str) -> str:
    """`pulumi stack init --secrets-provider` value for the KMS key behind ``alias``."""
    return f"awskms://{alias}?region={region}"


def variable_suffix(environment: str) -> str:
    return environment.upper().replace("-", "_")


def secrets_key_alias(prefix: str, environment: str) -> str:
    return f"{prefix}-{environment}"


def repository_variables(
    region: str, bucket: str, preview_roles: dict[str, str], deploy_roles: dict[str, str]
) -> dict[str, str]:
    """Per environment: its region, backend, and its own preview and deploy roles."""
    variables: dict[str, str] = {}
    for environment, deploy_role in sorted(deploy_roles.items()):
        suffix = variable_suffix(environment)
        variables[f"AWS_REGION_{suffix}"] = region
        variables[f"PULUMI_BACKEND_URL_{suffix}"] = backend_url(bucket, region)
        variables[f"AWS_PREVIEW_ROLE_{suffix}"] = preview_roles[environment]
        variables[f"AWS_DEPLOY_ROLE_{suffix}"] = deploy_role
    return variables
