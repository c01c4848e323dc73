"""Reading a Pulumi stack file (``Pulumi.<stack>.yaml``) the way a newcomer can act on.

Every offline tool (``make plan``, ``make plan BASE=``, ``make docs``, the workload preflight)
reads stack files through ``offline/runner.py``, which calls ``load`` here. Three refusals, each
a ``ConfigError`` (exit code 2) that names the file, the line and the key:

- a YAML syntax error (PyYAML's own message, with the file name it cannot know: it reads a
  string, so its marks say ``"<unicode string>"``; yaml/error.py ``Mark``);
- a key given twice in one mapping (PyYAML keeps the last one without a word:
  yaml/constructor.py ``BaseConstructor.construct_mapping`` assigns ``mapping[key] = value``);
- a secret in plain text: a key named like a token or password holds a plain value instead of
  the ``{secure: v1:...}`` that ``pulumi config set --secret`` writes.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from infra.config.errors import ConfigError

# Keys whose values are credentials: hfToken, hf_token, githubToken, adminPassword, apiSecret...
SECRET_NAME = re.compile(r"(token|password|passwd|secret)$", re.I)
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
            [f"{name}:{dup.again}: key {dup.key!r} is given twice in one mapping (first on line {dup.first}); "
             "YAML would silently keep the last one: delete the line you do not mean"],
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
            [f"{name}:{line + 1}:{column + 1}: YAML syntax error{near}: {what}. Check that line's indentation "
             "against the lines above it (spaces only, never tabs) and that every [ or { is closed"],
            source=f"stack file {name}",
        ) from None
    if not isinstance(document, dict):
        raise ConfigError([f"{name}: not a stack file (expected a mapping with a `config:` key)"],
                          source=f"stack file {name}")
    config = document.get("config") or {}
    plain = [found for key, value in config.items() for found in _plain_secrets(key, value)]
    if plain:
        stack = path.name.removeprefix("Pulumi.").removesuffix(".yaml")
        problems = []
        for key in plain:
            nested = " --path" if "." in key.split(":", 1)[-1] or "[" in key else ""
            command = f"pulumi config set --secret{nested} --stack {stack} '{key}' '<value>'"
            if path.parent != root:
                command = f"cd {shown(path.parent, root)} && {command}"
            problems.append(f"{name}: {key} holds a secret in plain text, which would be committed with the file; "
                            f"delete it there and store it encrypted: {command}")
        raise ConfigError(problems, source=f"stack file {name}")
    return config


def _plain_secrets(key: str, value: Any) -> list[str]:
    """The credential-named keys under ``key`` (itself included) whose value is not `{secure: ...}`."""
    if isinstance(value, dict) and set(value) == {"secure"}:
        return []
    if SECRET_NAME.search(key.rsplit(":", 1)[-1].rsplit(".", 1)[-1]) and value not in (None, ""):
        return [key]
    if isinstance(value, dict):
        return [found for k, v in value.items() for found in _plain_secrets(f"{key}.{k}", v)]
    if isinstance(value, list):
        return [found for i, v in enumerate(value) for found in _plain_secrets(f"{key}[{i}]", v)]
    return []
