"""Evaluate a Pulumi program from this repository under the mock runtime.

Used by the offline plan (``offline/plan/command.py``) and by the tests, so both see exactly what
``pulumi up`` would declare, minus the cloud.
"""

from __future__ import annotations

import json
import re
import runpy
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pulumi
import yaml

from infra import lookups
from infra.config.errors import ConfigError
from offline.plan import fixtures, stack_files
from offline.plan.mocks import SECRET, CloudMocks, ExistingCluster, RecordingMonitor, Registration, StackOutputs

REPO_ROOT = Path(__file__).resolve().parents[2]


def _no_network() -> str:
    raise AssertionError("an offline run never looks up the deployer's address")


# The program runs with preview=False under the mocks (so every mocked output is known), but
# an offline plan is a preview: checks that refuse `pulumi up` warn, and nothing is asked of
# the network. Tests pass ``deploy=`` to play a `pulumi up` with a stand-in address.
OFFLINE_PREVIEW = lookups.DeployContext(deploying=lambda: False, egress_ipv4=_no_network)


@dataclass
class PlanResult:
    project: str
    stack: str
    registrations: list[Registration]
    outputs: dict[str, Any]
    secret_outputs: set[str] = field(default_factory=set)

    def of_type(self, type_: str) -> list[Registration]:
        return [r for r in self.registrations if r.type == type_]

    def named(self, name: str, type_: str | None = None) -> Registration:
        matches = [r for r in self.registrations if r.name == name and (type_ is None or r.type == type_)]
        if len(matches) != 1:
            raise KeyError(f"{len(matches)} resources named {name!r}" + (f" of type {type_}" if type_ else ""))
        return matches[0]

    def as_stack_outputs(self) -> StackOutputs:
        """These outputs as another stack's StackReference sees them."""
        return StackOutputs(self.outputs, frozenset(self.secret_outputs))

    def as_json(self) -> dict[str, Any]:
        return {
            "project": self.project,
            "stack": self.stack,
            "resources": [r.as_json() for r in self.registrations],
            "outputs": {k: (SECRET if k in self.secret_outputs else v) for k, v in self.outputs.items()},
        }


# The DIY backend's organization, as the stacks' references name it (organization/<project>/<stack>).
ORGANIZATION = "organization"


def own_reference(project_dir: Path, stack: str) -> str:
    """The name a program's StackReference to its own stack has in the offline plan."""
    return f"{ORGANIZATION}/{project_name(project_dir)}/{stack}"


def project_name(project_dir: Path) -> str:
    return yaml.safe_load((project_dir / "Pulumi.yaml").read_text())["name"]


def _config_text(value: Any) -> str:
    """Config as the Pulumi engine hands it to a program: JSON for structures, text for scalars."""
    if isinstance(value, (dict, list)):
        return json.dumps(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _stack_document(project_dir: Path, stack: str) -> dict[str, Any]:
    path = project_dir / f"Pulumi.{stack}.yaml"
    if not path.exists():
        raise FileNotFoundError(f"no stack file {path.relative_to(REPO_ROOT)}")
    return stack_files.load(path, REPO_ROOT)


def _encrypted(value: Any) -> bool:
    """`pulumi config set --secret` writes `{secure: v1:...}`, which only the secrets provider opens."""
    return isinstance(value, dict) and set(value) == {"secure"}


def stack_config(project_dir: Path, stack: str) -> dict[str, str]:
    """The stack file's plain config; encrypted values are left to ``encrypted_keys``."""
    return {
        key: _config_text(value) for key, value in _stack_document(project_dir, stack).items() if not _encrypted(value)
    }


def encrypted_keys(project_dir: Path, stack: str) -> list[str]:
    """Keys the stack file holds encrypted: offline runs give them stand-ins."""
    return [key for key, value in _stack_document(project_dir, stack).items() if _encrypted(value)]


def offline_answered(
    error: ConfigError, misses: Sequence[tuple[str, str]], answered: Sequence[tuple[str, str]] = ()
) -> ConfigError:
    """``error`` with a note on each refusal that rests on an offline table: a look-up the tables
    could not answer (``misses``: "not offered" means "not in offline/plan/fixtures.py"), or one they
    answered (``answered``: which zones offer a type is the table's word, not AWS's)."""

    def named(asked: str, problem: str) -> bool:
        return re.search(rf"(?<![\w.-]){re.escape(asked)}(?![\w-])", problem) is not None

    problems = []
    for problem in error.problems:
        noted = set()
        for table in sorted({table for asked, table in misses if named(asked, problem)}):
            asked = ", ".join(sorted({a for a, t in misses if t == table and named(a, problem)}))
            problem += (
                f" [offline answer: {table} in offline/plan/fixtures.py has no entry for {asked}; that table stands "
                f"in for AWS here, and a real `pulumi preview` asks AWS. If AWS offers it, add it to "
                f"{fixtures.home_of(table)} to plan this offline]"
            )
            noted.add(table)
        # One note on what the tables answered, the offerings' first (it covers the zones too).
        for table in sorted(
            {table for asked, table in answered if not noted and named(asked, problem)}, key=lambda t: (t == "ZONES", t)
        )[:1]:
            asked = ", ".join(sorted({a for a, t in answered if t == table and named(a, problem)}))
            problem += (
                f" [offline answer: what {table} in offline/plan/fixtures.py says about {asked}; that table stands "
                f"in for AWS here (your account's zones and offerings may differ), and a real `pulumi preview` "
                f"asks AWS. If AWS answers otherwise, edit {fixtures.home_of(table)} to plan this offline]"
            )
        problems.append(problem)
    return error if problems == error.problems else ConfigError(problems)


def run_program(
    project_dir: Path = REPO_ROOT,
    stack: str = "dev",
    config: dict[str, str] | None = None,
    stack_references: dict[str, StackOutputs] | None = None,
    secrets: dict[str, str] | None = None,
    existing_cluster: ExistingCluster | None = None,
    deploy: lookups.DeployContext | None = None,
    preview: bool = False,
) -> PlanResult:
    """Run ``project_dir/__main__.py`` for ``stack``.

    ``config`` replaces the stack file's config; ``secrets`` adds secret config values (which
    a stack file can only hold encrypted); ``stack_references`` answers StackReferences;
    ``existing_cluster`` makes it a later `pulumi up` of a cluster that already exists;
    ``deploy`` replaces the offline preview's deploy context (``OFFLINE_PREVIEW``);
    ``preview`` runs it as `pulumi preview` does (``pulumi.runtime.is_dry_run()`` is true).
    """
    project = project_name(project_dir)
    values = dict(stack_config(project_dir, stack) if config is None else config)
    values.update(secrets or {})
    region = values.get("aws:region", "us-west-2")

    pulumi.runtime.reset_options()
    pulumi.runtime.set_all_config(values, sorted(secrets or {}))
    mocks = CloudMocks(region, stack_references, existing_cluster)
    monitor = RecordingMonitor(mocks)
    pulumi.runtime.set_mocks(
        monitor.mocks, project=project, stack=stack, preview=preview, monitor=monitor, organization=ORGANIZATION
    )

    outputs: dict[str, Any] = {}
    secret_outputs: set[str] = set()

    def program() -> Any:
        runpy.run_path(str(project_dir / "__main__.py"), run_name="__main__")
        root = pulumi.runtime.get_root_resource()
        exported = {k: pulumi.Output.from_input(v) for k, v in getattr(root, "outputs", {}).items()}

        async def collect() -> None:
            for key, output in exported.items():
                outputs[key] = await output.future()
                if await output.is_secret():
                    secret_outputs.add(key)

        return pulumi.Output.from_input(collect())

    lookups.DEPLOY_CONTEXT = deploy or OFFLINE_PREVIEW
    try:
        pulumi.runtime.test(program)()
    except ConfigError as error:
        raise offline_answered(error, mocks.misses, mocks.answered) from None
    finally:
        lookups.DEPLOY_CONTEXT = lookups.PULUMI_CLI

    # Registration order is asynchronous; URN order is stable and groups children under components.
    registrations = sorted(monitor.registrations, key=lambda r: r.urn)
    return PlanResult(project, stack, registrations, outputs, secret_outputs)
