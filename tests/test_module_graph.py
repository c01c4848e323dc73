"""The project's import graph: no cycles, packages that point one way, infra/ in layers.

Read from the source with ``ast`` (imports inside functions included, since a deferred
import is still a dependency), so the test sees what a reader of the code sees.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("infra", "offline", "policy", "workloads", "bootstrap", "tools")
# Lower layers never import higher ones; each can be read without the ones above it.
# node_agents: programs shipped into pods as text (infra/node_agents/efa_exporter.py), importing nothing of infra.
INFRA_LAYERS = ("node_agents", "facts", "config", "contract", "specs", "lookups", "validate", "components")
# Which top-level package may import which: the arrows point down this list.
PACKAGE_ORDER = ("infra", "policy", "workloads", "bootstrap", "offline", "tools", "__main__")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO_ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def project_modules() -> dict[str, Path]:
    files = [REPO_ROOT / "__main__.py"] + [f for p in PACKAGES for f in (REPO_ROOT / p).rglob("*.py")]
    return {module_name(f): f for f in files}


def imported_names(tree: ast.AST, importer: str, is_package: bool) -> Iterable[str]:
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = importer.split(".")[: len(importer.split(".")) - node.level + (1 if is_package else 0)]
                base = ".".join(anchor + ([base] if base else []))
            yield base
            yield from (f"{base}.{alias.name}" for alias in node.names)


def resolve(name: str, modules: dict[str, Path]) -> str | None:
    """The project module an import names, or None for a third-party one."""
    while name:
        if name in modules:
            return name
        name = name.rpartition(".")[0]
    return None


def import_graph() -> dict[str, set[str]]:
    modules = project_modules()
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(), str(path))
        targets = {resolve(n, modules) for n in imported_names(tree, name, path.name == "__init__.py")}
        graph[name] = {t for t in targets if t and t != name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one member (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def collapse(graph: dict[str, set[str]], group_of) -> dict[str, set[str]]:
    grouped: dict[str, set[str]] = {}
    for source, targets in graph.items():
        edges = grouped.setdefault(group_of(source), set())
        edges.update(group_of(t) for t in targets if group_of(t) != group_of(source))
    return grouped


def top_package(module: str) -> str:
    return module.split(".")[0]


def infra_layer(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if parts[0] == "infra" and len(parts) > 1 else None


def layer_violations(graph: dict[str, set[str]]) -> list[str]:
    rank = {layer: i for i, layer in enumerate(INFRA_LAYERS)}
    problems = []
    for source, targets in sorted(graph.items()):
        for target in sorted(targets):
            src, dst = infra_layer(source), infra_layer(target)
            if src in rank and dst in rank and rank[dst] > rank[src]:
                problems.append(f"{source} ({src}) imports {target} ({dst}), a higher layer")
    return problems


def package_order_violations(graph: dict[str, set[str]]) -> list[str]:
    rank = {p: i for i, p in enumerate(PACKAGE_ORDER)}
    packages = collapse(graph, top_package)
    return [
        f"{source} imports {target}"
        for source, targets in sorted(packages.items())
        for target in sorted(targets)
        if rank[target] > rank[source]
    ]


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    return import_graph()


def test_the_graph_sees_the_imports_that_matter(graph):
    # The test is only as good as its reading of imports: known edges of each form are found.
    assert "infra.config.models" in graph["infra.validate"]  # from infra.config.models import ...
    assert (
        "infra.components.launch_template" in graph["infra.components.cluster"]
    )  # from infra.components import x as y
    assert "infra.lookups" in graph["__main__"]  # from infra import lookups, validate
    assert "offline.plan.policy_run" in graph["offline.plan.command"]


def test_no_module_imports_itself_through_others(graph):
    assert cycles(graph) == []


def test_no_two_packages_import_each_other(graph):
    assert cycles(collapse(graph, top_package)) == []
    assert package_order_violations(graph) == []


def test_infra_layers_point_down(graph):
    assert {infra_layer(m) for m in graph if m.startswith("infra.")} <= set(INFRA_LAYERS)
    assert layer_violations(graph) == []
    assert cycles(collapse({m: t for m, t in graph.items() if infra_layer(m)}, lambda m: infra_layer(m) or m)) == []


def test_the_checks_catch_what_they_guard_against():
    circle = {
        "infra.config.rules": {"infra.specs.system_capacity"},
        "infra.specs.system_capacity": {"infra.config.rules"},
    }
    assert cycles(circle) == [["infra.config.rules", "infra.specs.system_capacity"]]
    assert layer_violations(circle) == [
        "infra.config.rules (config) imports infra.specs.system_capacity (specs), a higher layer"
    ]
    assert package_order_violations({"policy.x": {"offline.plan.mocks"}, "offline.plan.mocks": set()}) == [
        "policy imports offline"
    ]
