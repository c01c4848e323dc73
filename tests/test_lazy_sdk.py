"""The offline plan's lazily loaded SDK packages bind exactly what the shipped packages bind
(offline/lazy_sdk.py), checked against the eagerly loaded packages of this test process."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from offline import lazy_sdk
from offline.runner import REPO_ROOT


# Where the plan's import time went (issue 17): these must keep loading their modules lazily.
DEFERRED_FOR_SPEED = {"pulumi_aws.ec2", "pulumi_kubernetes.core.v1", "pulumi_aws.s3", "pulumi_aws.iam", "pulumi_aws.cloudwatch"}


def _package(name: str):
    package = importlib.import_module(name)
    getattr(package, "__all__", None)  # run a lazily imported package (conftest loads them all)
    return package


def test_exported_names_reads_one_line_and_many_line_dunder_all(tmp_path: Path):
    (tmp_path / "one.py").write_text("import x\n\n__all__ = ['VpcArgs', 'Vpc']\n")
    (tmp_path / "many.py").write_text("__all__ = [\n    'GetClusterResult',\n    \"get_cluster\",\n]\nX = 1\n")
    (tmp_path / "none.py").write_text("class Vpc: ...\n")
    assert lazy_sdk.exported_names(tmp_path / "one.py") == ["VpcArgs", "Vpc"]
    assert lazy_sdk.exported_names(tmp_path / "many.py") == ["GetClusterResult", "get_cluster"]
    assert lazy_sdk.exported_names(tmp_path / "none.py") is None


def test_a_package_that_cannot_be_deferred_exactly_loads_as_shipped(tmp_path: Path):
    (tmp_path / "a.py").write_text("__all__ = ['Thing']\n")
    (tmp_path / "b.py").write_text("__all__ = ['Thing', 'Other']\n")  # star-imported after a: b's Thing wins
    (tmp_path / "c.py").write_text("Thing = 3\n")
    init = "from ._enums import *\nfrom .a import *\n{}from ._inputs import *\nfrom . import outputs\n"
    kept, owner = lazy_sdk.deferred_exports(init.format(""), tmp_path)
    assert owner == {"Thing": "a"}
    assert kept == "from ._enums import *\n\nfrom ._inputs import *\nfrom . import outputs\n"
    assert lazy_sdk.deferred_exports(init.format("from .b import *\n"), tmp_path) is None  # a name twice
    assert lazy_sdk.deferred_exports(init.format("from .c import *\n"), tmp_path) is None  # no __all__
    assert lazy_sdk.deferred_exports(init.format("from .missing import *\n"), tmp_path) is None


@pytest.mark.parametrize("name", lazy_sdk.PROGRAM_SDK_PACKAGES)
def test_every_deferred_name_resolves_to_the_object_the_shipped_package_binds(name: str):
    package = _package(name)
    init = Path(package.__file__)
    source = init.read_text(encoding="utf-8")
    if lazy_sdk.GENERATED_MARKER not in source:
        pytest.skip(f"{name} is not a generated package: it loads as shipped")
    split = lazy_sdk.deferred_exports(source, init.parent)
    if split is None:
        # Loads whole, as shipped (pulumi_kubernetes.helm.v3: its helm.py has no literal __all__).
        assert name not in DEFERRED_FOR_SPEED, f"{name}'s layout changed: it would load whole (slower, still correct)"
        return
    _, owner = split
    assert owner, name
    for exported, module in owner.items():
        assert getattr(package, exported) is getattr(importlib.import_module(f"{name}.{module}"), exported), exported
    star_imported = set(lazy_sdk.STAR_IMPORT.findall(source)) - lazy_sdk.EAGER_MODULES
    assert set(owner.values()) == star_imported


def test_the_finder_defers_resource_modules_until_a_program_names_them():
    # A fresh interpreter: this one loaded the SDKs as shipped.
    probe = """
import json, sys
from offline import lazy_sdk
lazy_sdk.install()
import pulumi_aws.eks as eks
loaded_before = "pulumi_aws.eks.cluster" in sys.modules
cluster = eks.Cluster
print(json.dumps({
    "loaded_before": loaded_before,
    "loaded_after": "pulumi_aws.eks.cluster" in sys.modules,
    "cluster": [cluster.__module__, cluster.__qualname__],
    "get_cluster": eks.get_cluster.__module__,
    "module_attribute": eks.addon.__name__,
    "listed": "NodeGroup" in dir(eks),
    "unknown": hasattr(eks, "NoSuchThing"),
}))
"""
    run = subprocess.run([sys.executable, "-c", probe], cwd=REPO_ROOT, capture_output=True, text=True, timeout=60, check=True)
    assert json.loads(run.stdout) == {
        "loaded_before": False,
        "loaded_after": True,
        "cluster": ["pulumi_aws.eks.cluster", "Cluster"],
        "get_cluster": "pulumi_aws.eks.get_cluster",
        "module_attribute": "pulumi_aws.eks.addon",
        "listed": True,
        "unknown": False,
    }
