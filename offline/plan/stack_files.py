"""Reading a Pulumi stack file (``Pulumi.<stack>.yaml``) the way a newcomer can act on.

Every offline tool (``make plan``, ``make plan BASE=``, ``make docs``, the workload preflight)
reads stack files through ``offline/plan/runner.py``, which calls ``load`` here. Three refusals, each
a ``ConfigError`` (exit code 2) that names the file, the line and the key:

- a YAML syntax error (PyYAML's own message, with the file name it cannot know: it reads a
  string, so its marks say ``"<unicode string>"``; yaml/error.py ``Mark``);
- a key given twice in one mapping (PyYAML keeps the last one without a word:
  yaml/constructor.py ``BaseConstructor.construct_mapping`` assigns ``mapping[key] = value``);
- a secret in plain text: a key named like a token or password, or a value that looks like a
  credential whatever its key (a GitHub, Hugging Face or AWS access key), holds a plain value
  instead of the ``{secure: v1:...}`` that ``pulumi config set --secret`` writes. The refusal gives
  the line and the command without the value: `pulumi config set` prompts for a value not on its
  command line (Pulumi CLI reference, ``pulumi config set``: "If a value is not present on the
  command line, pulumi will prompt for the value"), so the secret stays out of shell history;
- a credential in a tag (``tags.*``): tag values reach AWS in plain text on every tagged resource,
  encrypted in the stack file or not, so the only fix is to leave it out.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from infra.config.base import PROJECT_STACK_FILES, ConfigModel
from infra.config.errors import ConfigError

# Keys whose values are credentials: hfToken, hf_token, githubToken, adminPassword, apiSecret...
SECRET_NAME = re.compile(r"(token|password|passwd|secret)$", re.I)
# Values that are credentials whatever their key: GitHub tokens (ghp_, gho_, ghu_, ghs_, ghr_,
# github_pat_), Hugging Face tokens (hf_), AWS access key ids (AKIA long-term, ASIA temporary).
SECRET_VALUE = re.compile(
    r"\b(gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,}|hf_[A-Za-z0-9]{30,}"
    r"|(?:AKIA|ASIA)[A-Z0-9]{16})\b"
)
_KEY_ON_LINE = re.compile(r"^\s*(?:-\s+)?([^\s#\[{-][^#]*?)\s*:(?:\s|$)")


def shown(path: Path, root: Path) -> str:
    return str(path.relative_to(root)) if path.is_relative_to(root) else str(path)


class _UniqueKeyLoader(yaml.SafeLoader):
    """SafeLoader that refuses a key given twice in one mapping."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            line = key_node.start_mark.line + 1
            if key in seen:
                raise _DuplicateKey(key, seen[key], line)
            seen[key] = line
        return super().construct_mapping(node, deep=deep)


class _DuplicateKey(Exception):
    def __init__(self, key: Any, first: int, again: int) -> None:
        super().__init__(key)
        self.key, self.first, self.again = key, first, again


def _key_near(lines: list[str], line: int) -> str | None:
    """The key on 0-based ``line``, else the nearest one above it."""
    for number in range(min(line, len(lines) - 1), -1, -1):
        match = _KEY_ON_LINE.match(lines[number])
        if match:
            return match.group(1).strip("'\"")
    return None


def load(path: Path, root: Path) -> dict[str, Any]:
    """The stack file's document, or a ConfigError naming the file, line and key."""
    name = shown(path, root)
    text = path.read_text()
    try:
        document = yaml.load(text, Loader=_UniqueKeyLoader) or {}
    except _DuplicateKey as dup:
        raise ConfigError(
            [
                f"{name}:{dup.again}: key {dup.key!r} is given twice in one mapping (first on line {dup.first}); "
                "YAML would silently keep the last one: delete the line you do not mean"
            ],
            source=f"stack file {name}",
        ) from None
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        line, column = (mark.line, mark.column) if mark else (0, 0)
        key = _key_near(text.splitlines(), line)
        what = "; ".join(p for p in (error.problem, error.context) if p)
        if error.context_mark is not None and error.problem_mark is not None and error.context_mark.line != line:
            what += f" (started on line {error.context_mark.line + 1})"
        near = f" near key {key!r}" if key else ""
        raise ConfigError(
            [
                f"{name}:{line + 1}:{column + 1}: YAML syntax error{near}: {what}. Check that line's indentation "
                "against the lines above it (spaces only, never tabs) and that every [ or { is closed"
            ],
            source=f"stack file {name}",
        ) from None
    if not isinstance(document, dict):
        raise ConfigError(
            [f"{name}: not a stack file (expected a mapping with a `config:` key)"], source=f"stack file {name}"
        )
    config = document.get("config") or {}
    bare = [key for key in config if ":" not in str(key)]
    if bare:
        lines = _key_lines(text)
        project = _project_of(path)
        raise ConfigError(
            [_bare_key_problem(name, lines, str(key), project) for key in bare], source=f"stack file {name}"
        )
    plain = [found for key, value in config.items() for found in _plain_secrets(key, value)]
    if plain:
        stack = path.name.removeprefix("Pulumi.").removesuffix(".yaml")
        lines = _key_lines(text)
        problems = []
        for key in plain:
            where = f"{name}:{lines[key]}" if key in lines else name
            if _in_tags(key):
                problems.append(
                    f"{where}: {key} looks like a credential, and tag values reach AWS in plain text on "
                    "every tagged resource (encrypting it in the stack file would not change that): delete "
                    "it, and keep credentials out of tags"
                )
                continue
            nested = " --path" if "." in key.split(":", 1)[-1] or "[" in key else ""
            command = f"pulumi config set --secret{nested} --stack {stack} '{key}'"
            if path.parent != root:
                command = f"cd {shown(path.parent, root)} && {command}"
            problems.append(
                f"{where}: {key} holds a secret in plain text, which would be committed with the file; "
                f"delete that line and store it encrypted with `{command}`, which prompts for the value "
                "(so it stays out of your shell history)"
            )
        raise ConfigError(problems, source=f"stack file {name}")
    return config


def _project_of(path: Path) -> str | None:
    """The project whose stack file this is: the ``name`` in the Pulumi.yaml beside it."""
    project_file = path.parent / "Pulumi.yaml"
    if not project_file.exists():
        return None
    return (yaml.safe_load(project_file.read_text()) or {}).get("name")


def _projects_reading(key: str) -> list[str]:
    """The projects of this repository with a top-level setting named ``key``."""
    from bootstrap.settings import PROJECT as BOOTSTRAP
    from bootstrap.settings import BootstrapConfig
    from infra.config.models import PROJECT as CLUSTER
    from infra.config.models import StackConfig
    from workloads.settings import PROJECT as WORKLOADS
    from workloads.settings import WorkloadsConfig

    models: dict[str, type[ConfigModel]] = {
        CLUSTER: StackConfig,
        WORKLOADS: WorkloadsConfig,
        BOOTSTRAP: BootstrapConfig,
    }
    return [
        project
        for project, model in models.items()
        if any((field.alias or field_name) == key for field_name, field in model.model_fields.items())
    ]


def _bare_key_problem(name: str, lines: dict[str, int], key: str, project: str | None) -> str:
    """An unprefixed key: the Pulumi CLI files it under the stack's own project
    (pulumi/pulumi sdk/go/common/workspace/loaders.go ``stackConfigNamespacedWithProject``,
    v3.259.0), which is rarely what a key copied from elsewhere means, so it is written out."""
    where = f"{name}:{lines[key]}" if key in lines else name
    readers = _projects_reading(key)
    if project and f"{project}:{key}" in lines:
        fix = f"`{project}:{key}` is set too, on line {lines[f'{project}:{key}']}: delete the one you do not mean"
    elif project and project in readers:
        fix = f"write it as `{project}:{key}`"
    elif readers:
        fix = "it is a setting of " + " and of ".join(
            f"{reader} (its stack file: {PROJECT_STACK_FILES[reader]}, as `{reader}:{key}`)" for reader in readers
        )
        if project:
            fix += f" (here, the CLI would file it as `{project}:{key}`, which nothing reads)"
    else:
        fix = f"no project here has a setting named {key!r}: check the spelling against docs/configuration.md"
    return f"{where}: {key} has no project prefix; {fix}"


def _in_tags(key: str) -> bool:
    """A key under a ``tags`` map (``trainium-eks:tags.x``): its value becomes an AWS tag."""
    head, _, rest = key.partition(":")
    parts = re.split(r"[.\[]", rest)
    return "tags" in parts[:-1]


def _key_lines(text: str) -> dict[str, int]:
    """1-based line of every key and list item under ``config:``, named as ``_plain_secrets`` names
    them (``ns:key``, ``ns:key.child``, ``ns:key[0]``)."""
    lines: dict[str, int] = {}

    def walk(node: yaml.Node, key: str) -> None:
        if isinstance(node, yaml.MappingNode):
            for k, v in node.value:
                walk_child(k, v, f"{key}.{k.value}")
        elif isinstance(node, yaml.SequenceNode):
            for i, v in enumerate(node.value):
                lines.setdefault(f"{key}[{i}]", v.start_mark.line + 1)
                walk(v, f"{key}[{i}]")

    def walk_child(k: yaml.Node, v: yaml.Node, name: str) -> None:
        lines[name] = k.start_mark.line + 1
        walk(v, name)

    root = yaml.compose(text, Loader=yaml.SafeLoader)
    if isinstance(root, yaml.MappingNode):
        for k, v in root.value:
            if k.value == "config" and isinstance(v, yaml.MappingNode):
                for ck, cv in v.value:
                    walk_child(ck, cv, ck.value)
    return lines


def _plain_secrets(key: str, value: Any) -> list[str]:
    """The credential-named keys under ``key`` (itself included) whose value is not `{secure: ...}`."""
    if isinstance(value, dict) and set(value) == {"secure"}:
        return [key] if _in_tags(key) else []  # encrypted here, but AWS shows a tag's value to anyone
    if SECRET_NAME.search(key.rsplit(":", 1)[-1].rsplit(".", 1)[-1]) and value not in (None, ""):
        return [key]
    if isinstance(value, str) and SECRET_VALUE.search(value):
        return [key]
    if isinstance(value, dict):
        return [found for k, v in value.items() for found in _plain_secrets(f"{key}.{k}", v)]
    if isinstance(value, list):
        return [found for i, v in enumerate(value) for found in _plain_secrets(f"{key}[{i}]", v)]
    return []
