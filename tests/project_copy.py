"""A Pulumi project of this repository copied into a temporary directory with an edited stack file,
for tests that need the real program under a stack file the repository does not ship."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from tests.fixture_project import FIXTURE_ROOT


def project_copy(
    destination: Path,
    source: Path = FIXTURE_ROOT,
    stack: str = "dev",
    edit: Callable[[dict[str, Any]], None] | None = None,
    from_stack: str | None = None,
    config: dict[str, Any] | None = None,
) -> Path:
    """``source``'s program as ``destination`` with a ``Pulumi.<stack>.yaml``: ``config`` as given,
    or the config of ``Pulumi.<from_stack or stack>.yaml`` changed in place by ``edit``."""
    destination.mkdir(parents=True)
    for name in ("Pulumi.yaml", "__main__.py"):
        (destination / name).write_text((source / name).read_text())
    if config is None:
        config = yaml.safe_load((source / f"Pulumi.{from_stack or stack}.yaml").read_text())["config"]
    if edit is not None:
        edit(config)
    (destination / f"Pulumi.{stack}.yaml").write_text(yaml.safe_dump({"config": config}))
    return destination


def dev_groups_at(kubernetes_version: str) -> list[dict[str, Any]]:
    """The dev stack's Trainium groups as an upgrade to ``kubernetes_version`` must set them: an AMI
    release is built for one minor, so each pin moves with kubernetesVersion, to the release
    infra/facts/neuron.py records for that minor (docs/node-health.md, upgrading with a pinned AMI)."""
    from infra.facts.neuron import compatible_ami_release

    groups = yaml.safe_load((FIXTURE_ROOT / "Pulumi.dev.yaml").read_text())["config"][
        "trainium-eks:acceleratorNodeGroups"
    ]
    return [{**g, "amiReleaseVersion": compatible_ami_release(kubernetes_version)} for g in groups]


def shipped_acknowledgements(project_dir: Path = FIXTURE_ROOT) -> dict[str, str]:
    """What the shipped dev stack file of the project in ``project_dir`` keeps past its end of support
    (``endOfSupportAcknowledged``): the pins of the images the repository builds today."""
    config = yaml.safe_load((project_dir / "Pulumi.dev.yaml").read_text())["config"]
    return next((v for k, v in config.items() if k.endswith(":endOfSupportAcknowledged")), {})


def kept_past_support(kubernetes_version: str) -> dict[str, str]:
    """endOfSupportAcknowledged for a test that plans ``kubernetes_version`` whatever the date: a minor
    past its EKS support is refused otherwise (infra/facts/support.py), and these tests plan old
    minors on purpose (the upgrade steps from them); with what the shipped stack keeps besides."""
    from infra.facts.support import kubernetes_pin

    return {**shipped_acknowledgements(), kubernetes_pin(kubernetes_version): "a test plans the upgrade from it"}
