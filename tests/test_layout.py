"""docs/architecture.md's layout is read from the code: every package and module is on it."""

from __future__ import annotations

import pytest

from offline.docs import layout
from offline.plan.runner import REPO_ROOT

TOP_LEVEL = ("infra", "offline", "workloads", "bootstrap", "policy", "tools")


def test_every_package_of_the_repository_is_listed():
    packages = {
        str(init.parent.relative_to(REPO_ROOT))
        for top in TOP_LEVEL
        for init in (REPO_ROOT / top).rglob("__init__.py")
        if "__pycache__" not in init.parts
    }
    assert packages == set(layout.PACKAGES)


def test_every_module_is_named_with_its_first_sentence(tmp_path, monkeypatch):
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text('"""What the package is for.\n\nMore detail."""\n')
    (package / "alpha.py").write_text('"""Reads the table: one row\nper type. Then more."""\n')
    (package / "beta.py").write_text("x = 1\n")
    for path in layout.OTHER_PATHS:
        (tmp_path / path).mkdir(parents=True, exist_ok=True)
    monkeypatch.setattr(layout, "PACKAGES", ("pkg",))
    text = layout.layout_markdown(tmp_path)
    assert "### `pkg/`\n\nWhat the package is for.\n" in text
    assert "- `alpha.py`: Reads the table: one row per type." in text
    assert "- `beta.py`: (no docstring)" in text


def test_a_listed_folder_that_is_gone_is_an_error(tmp_path, monkeypatch):
    monkeypatch.setattr(layout, "PACKAGES", ("gone",))
    with pytest.raises(FileNotFoundError, match="PACKAGES names gone"):
        layout.layout_markdown(tmp_path)
