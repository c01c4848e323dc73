"""Who may assume the pipeline's roles: IAM trust policies for GitHub's OIDC tokens (pure).

GitHub docs, "Configuring OpenID Connect in Amazon Web Services" and "OpenID Connect
reference" (example subject claims): the token's ``aud`` is ``sts.amazonaws.com`` for
aws-actions/configure-aws-credentials, and its ``sub`` is
``repo:OWNER/REPO:pull_request`` for a pull_request run,
``repo:OWNER/REPO:ref:refs/heads/BRANCH`` for a push or schedule on a branch, and
``repo:OWNER/REPO:environment:NAME`` for any job that names an environment (which then
replaces the ref). ``REPO`` here is the subject prefix (bootstrap/settings.py ``subject_prefix``):
``repo:OWNER/REPO`` or, for repositories with immutable subject claims, ``repo:OWNER@ID/REPO@ID``
(GitHub docs, "OpenID Connect", "Immutable subject claims"). The conditions compare with ``StringEquals``: no wildcards, so no other
repository, branch or environment matches.
"""

from __future__ import annotations

from typing import Any

OIDC_HOST = "token.actions.githubusercontent.com"
OIDC_URL = f"https://{OIDC_HOST}"
AUDIENCE = "sts.amazonaws.com"


def pull_request_subject(prefix: str) -> str:
    return f"{prefix}:pull_request"


def branch_subject(prefix: str, branch: str) -> str:
    return f"{prefix}:ref:refs/heads/{branch}"


def environment_subject(prefix: str, environment: str) -> str:
    return f"{prefix}:environment:{environment}"


def preview_subjects(prefix: str, branch: str, pull_requests: bool) -> list[str]:
    """The main branch previews (drift on a schedule, and the deploy workflow's preview of prod
    before its approval, which names no environment); pull requests only where the environment
    allows them (dev): their code is unreviewed, and the preview runs it with the role."""
    return ([pull_request_subject(prefix)] if pull_requests else []) + [branch_subject(prefix, branch)]


def deploy_subjects(prefix: str, branch: str, environment: str, github_environment: bool) -> list[str]:
    if github_environment:
        return [environment_subject(prefix, environment)]
    return [branch_subject(prefix, branch)]


def github_trust_policy(provider_arn: str, subjects: list[str]) -> dict[str, Any]:
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Principal": {"Federated": provider_arn},
                "Action": "sts:AssumeRoleWithWebIdentity",
                "Condition": {
                    "StringEquals": {
                        f"{OIDC_HOST}:aud": AUDIENCE,
                        f"{OIDC_HOST}:sub": subjects[0] if len(subjects) == 1 else sorted(subjects),
                    }
                },
            }
        ],
    }
