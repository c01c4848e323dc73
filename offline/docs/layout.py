"""The repository's layout, read from the code: each package's docstring and each module's first line.

Rendered into docs/architecture.md by `make docs`, so the page lists exactly the modules there are.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

# The Python packages in the order a newcomer meets them from the cluster program's __main__.py.
PACKAGES = (
    "infra",
    "infra/facts",
    "infra/config",
    "infra/specs",
    "infra/components",
    "workloads",
    "bootstrap",
    "policy",
    "policy/guardrails",
    "offline",
    "offline/plan",
    "offline/report",
    "offline/diff",
    "offline/docs",
    "tools",
)
# What is not a Python package has no docstring to read; each entry is checked to exist.
OTHER_PATHS = {
    "__main__.py": "The cluster program: validated config → look-ups → components → outputs.",
    "Pulumi.yaml": "The cluster project; `Pulumi.<stack>.yaml` are its stacks (dev, prod).",
    "docker": "The training images, one Dockerfile per ECR repository.",
    "docs": "This site; the blocks marked generated are written by `make docs`.",
    "security": "The accepted checkov findings (`checkov-justifications.yaml`).",
    ".github/workflows": "The pull-request, deploy and drift workflows.",
    "tests": "The test suite (`make test`).",
}


def summary(path: Path) -> str:
    """The first sentence of a module's docstring, or an empty string."""
    docstring = ast.get_docstring(ast.parse(path.read_text(), str(path)))
    if not docstring:
        return ""
    paragraph = " ".join(docstring.split("\n\n")[0].split())
    return re.split(r"(?<=[.?])\s(?=[A-Z`])", paragraph)[0]


def package_summary(package: Path) -> str:
    """A package's docstring as one paragraph (its first)."""
    init = package / "__init__.py"
    docstring = ast.get_docstring(ast.parse(init.read_text(), str(init))) if init.exists() else None
    return " ".join(docstring.split("\n\n")[0].split()) if docstring else ""


def layout_markdown(repo_root: Path) -> str:
    lines: list[str] = []
    for name in PACKAGES:
        package = repo_root / name
        if not package.is_dir():
            raise FileNotFoundError(f"offline/docs/layout.py PACKAGES names {name}, which is not a folder")
        lines.append(f"### `{name}/`\n")
        if about := package_summary(package):
            lines.append(about + "\n")
        for module in sorted(p for p in package.glob("*.py") if p.name != "__init__.py"):
            lines.append(f"- `{module.name}`: {summary(module) or '(no docstring)'}")
        lines.append("")
    lines.append("### Everything else\n")
    for path, about in OTHER_PATHS.items():
        if not (repo_root / path).exists():
            raise FileNotFoundError(f"offline/docs/layout.py OTHER_PATHS names {path}, which does not exist")
        lines.append(f"- `{path}`: {about}")
    return "\n".join(lines) + "\n"
