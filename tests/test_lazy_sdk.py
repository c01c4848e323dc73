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
# pulumi_kubernetes.helm.v3: its hand-written helm.py (no __all__) pulls in requests for Chart,
# which the programs never use (they install with helm.v3.Release).
DEFERRED_FOR_SPEED = {"pulumi_aws.ec2", "pulumi_kubernetes.core.v1", "pulumi_aws.s3", "pulumi_aws.iam", "pulumi_aws.cloudwatch",
                      "pulumi_kubernetes.helm.v3"}


def _package(name: str):
    package = importlib.import_module(name)
    getattr(package, "__all__", None)  # run a lazily imported package (conftest loads them all)
    return package


def test_exported_names_reads_one_line_and_many_line_dunder_all(tmp_path: Path):
    (tmp_path / "one.py").write_text("import x\n\n__all__ = ['VpcArgs', 'Vpc']\n")
    (tmp_path / "many.py").write_text("__all__ = [\n    'GetClusterResult',\n    \"get_cluster\",\n]\nX = 1\n")
    assert lazy_sdk.exported_names(tmp_path / "one.py") == ["VpcArgs", "Vpc"]
    assert lazy_sdk.exported_names(tmp_path / "many.py") == ["GetClusterResult", "get_cluster"]


def test_without_dunder_all_the_public_top_level_names_are_read_off_the_syntax(tmp_path: Path):
    """What `from m import *` binds when m has no __all__: every global not starting with an
    underscore, imported modules and names included (the language reference, the import statement)."""
    (tmp_path / "plain.py").write_text('"""Doc."""\nimport json\nimport pulumi.runtime\nfrom typing import Any, Optional as Opt\n'
                                       "from . import _utilities\nclass Chart: ...\ndef _parse(): ...\nasync def fetch(): ...\n"
                                       "TIMEOUT = LIMIT = 3\nNAME: str = 'x'\nDECLARED_ONLY: int\n")
    assert lazy_sdk.exported_names(tmp_path / "plain.py") == [
        "json", "pulumi", "Any", "Opt", "Chart", "fetch", "TIMEOUT", "LIMIT", "NAME"]
    unreadable = {"conditional.py": "import sys\nif sys.platform == 'linux':\n    Thing = 1\n",
                  "star.py": "from os import *\n", "tuple.py": "A, B = 1, 2\n", "computed_all.py": "__all__ = list('ab')\n"}
    for name, source in unreadable.items():
        (tmp_path / name).write_text(source)
        assert lazy_sdk.exported_names(tmp_path / name) is None, name


def test_a_package_that_cannot_be_deferred_exactly_loads_as_shipped(tmp_path: Path):
    (tmp_path / "a.py").write_text("__all__ = ['Thing']\n")
    (tmp_path / "b.py").write_text("__all__ = ['Thing', 'Other']\n")  # star-imported after a: b's Thing wins
    (tmp_path / "c.py").write_text("if True:\n    Thing = 3\n")
    init = "from ._enums import *\nfrom .a import *\n{}from ._inputs import *\nfrom . import outputs\n"
    kept, owner = lazy_sdk.deferred_exports(init.format(""), tmp_path)
    assert owner == {"Thing": "a"}
    assert kept == "from ._enums import *\n\nfrom ._inputs import *\nfrom . import outputs\n"
    assert lazy_sdk.deferred_exports(init.format("from .b import *\n"), tmp_path) is None  # a name twice
    assert lazy_sdk.deferred_exports(init.format("from .c import *\n"), tmp_path) is None  # names not readable
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
        # Loads whole, as shipped.
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


def test_offline_compilation_postpones_annotations_and_builds_argsdicts_as_plain_classes(tmp_path: Path):
    source = ("from typing import Optional, TypedDict\n__all__ = ['FooArgsDict', 'hint']\n"
              "class FooArgsDict(TypedDict):\n    name: Optional[int]\n"
              "def hint(x: 'Missing[int]') -> Optional[int]: ...\n")
    namespace: dict = {}
    exec(lazy_sdk.offline_compile(source, str(tmp_path / "m.py")), namespace)
    assert namespace["hint"].__annotations__ == {"x": "'Missing[int]'", "return": "Optional[int]"}
    assert type(namespace["FooArgsDict"]) is type and namespace["FooArgsDict"].__annotations__ == {"name": "Optional[int]"}
    assert namespace["__all__"] == ["FooArgsDict", "hint"]


def test_the_code_cache_is_reused_until_the_source_changes(tmp_path: Path, monkeypatch):
    module = tmp_path / "generated.py"
    module.write_text("VALUE = 1\n")
    first = lazy_sdk.cached_code(module)
    cache = lazy_sdk.code_cache_path(module)
    assert cache.is_file() and cache.parent.name == "__pycache__" and ".opt-offlineplan." in cache.name

    def no_compile(source: str, path: str):
        raise AssertionError("compiled although the cache matches")

    with monkeypatch.context() as patched:
        patched.setattr(lazy_sdk, "offline_compile", no_compile)
        assert lazy_sdk.cached_code(module) == first
    module.write_text("VALUE = 22\n")  # another size: compiled again
    namespace: dict = {}
    exec(lazy_sdk.cached_code(module), namespace)
    assert namespace["VALUE"] == 22
    cache.write_bytes(b"not marshal data")  # a damaged cache only costs the compilation
    exec(lazy_sdk.cached_code(module), namespace)
    assert namespace["VALUE"] == 22


# The types pulumi reads from a few resource, input and output classes the programs use.
TYPES_PROBE = """
import pulumi._types as types
import pulumi_aws as aws, pulumi_eks as eks, pulumi_kubernetes as k8s
resources = [aws.ec2.LaunchTemplate, aws.eks.NodeGroup, eks.Cluster, k8s.apps.v1.DaemonSet, k8s.helm.v3.Release]
inputs = [k8s.core.v1.PodSpecArgs, aws.ec2.LaunchTemplateNetworkInterfaceArgs, eks.ClusterNodeGroupOptionsArgs]
outputs = [k8s.core.v1.outputs.PodSpec, aws.eks.outputs.NodeGroupScalingConfig]
seen = {
    "resources": {c.__name__: repr(sorted(types.resource_types(c).items())) for c in resources},
    "inputs": {c.__name__: repr(sorted(types.input_type_types(c).items())) for c in inputs},
    "outputs": {c.__name__: repr(sorted(types.output_type_types(c).items())) for c in outputs},
}
"""


def test_postponed_annotations_resolve_to_the_types_pulumi_reads_from_the_shipped_modules():
    """pulumi reads a class's types through typing.get_type_hints (pulumi 3.272.0
    sdk/python/lib/pulumi/_types.py ``_raw_return_hints``, ``_types_from_annotations``), which
    evaluates a postponed annotation in the class's module: the types must be the ones the
    shipped modules' evaluated annotations give (this process), for resources, input types and
    output types."""
    offline_probe = f"from offline import lazy_sdk\nlazy_sdk.install()\n{TYPES_PROBE}\nimport json\nprint(json.dumps(seen))"
    run = subprocess.run([sys.executable, "-c", offline_probe], cwd=REPO_ROOT, capture_output=True, text=True, timeout=60, check=True)
    shipped: dict = {}
    exec(TYPES_PROBE, shipped)
    assert json.loads(run.stdout) == shipped["seen"]
    assert "ObjectMeta" in shipped["seen"]["resources"]["DaemonSet"]  # the nested output types resolved


def _described(value) -> str:
    return f"{type(value).__name__} {getattr(value, '__module__', '')}.{getattr(value, '__qualname__', getattr(value, '__name__', ''))}"


# Packages with modules named like what they export: helm.v3's Release.py (Release, ReleaseArgs),
# core.v1's Service.py (Service, ServiceInitArgs), eks's get_addon_version.py (get_addon_version,
# get_addon_version_output, GetAddonVersionResult).
SAME_NAME_PACKAGES = ("pulumi_kubernetes.helm.v3", "pulumi_kubernetes.core.v1", "pulumi_aws.eks")


def test_a_name_spelled_like_its_module_resolves_to_what_the_star_import_binds_in_any_order():
    """Importing a submodule sets the package's attribute of that name to the module; the eager
    star-import binds the exported name after it, so ``helm.v3.Release`` is the class. The lazy
    package must give the same whichever name is asked first (ReleaseArgs before Release)."""
    probe = f"""
import importlib, json
from offline import lazy_sdk
lazy_sdk.install()
seen = {{}}
for package_name in {SAME_NAME_PACKAGES!r}:
    package = importlib.import_module(package_name)
    getattr(package, "__all__", None)
    names = [n for module in lazy_sdk._EXPORTS[package_name].values() for n in reversed(module)]
    seen[package_name] = {{n: f"{{type(getattr(package, n)).__name__}} {{getattr(getattr(package, n), '__module__', '')}}."
                                f"{{getattr(getattr(package, n), '__qualname__', getattr(getattr(package, n), '__name__', ''))}}"
                           for n in names}}
print(json.dumps(seen))
"""
    run = subprocess.run([sys.executable, "-c", probe], cwd=REPO_ROOT, capture_output=True, text=True, timeout=60, check=True)
    seen = json.loads(run.stdout)
    for package_name in SAME_NAME_PACKAGES:
        package = _package(package_name)
        assert len(seen[package_name]) > 3
        assert seen[package_name] == {name: _described(getattr(package, name)) for name in seen[package_name]}, package_name
    assert seen["pulumi_kubernetes.helm.v3"]["Release"] == "type pulumi_kubernetes.helm.v3.Release.Release"


def test_the_code_cache_follows_a_pycache_prefix_and_leaves_no_partial_file(tmp_path: Path, monkeypatch):
    module = tmp_path / "pkg" / "generated.py"
    module.parent.mkdir()
    module.write_text("VALUE = 1\n")
    monkeypatch.setattr(sys, "pycache_prefix", str(tmp_path / "prefix"))  # PYTHONPYCACHEPREFIX
    lazy_sdk.cached_code(module)
    cache = lazy_sdk.code_cache_path(module)
    assert cache.is_file() and cache.is_relative_to(tmp_path / "prefix")
    cache.unlink()

    def refused(*_: object) -> None:
        raise OSError("read-only file system")

    monkeypatch.setattr(lazy_sdk.os, "replace", refused)
    namespace: dict = {}
    exec(lazy_sdk.cached_code(module), namespace)  # compiled all the same
    assert namespace["VALUE"] == 1
    assert list(cache.parent.iterdir()) == []


def test_a_module_imported_before_its_package_ran_still_gives_its_names():
    """pulumi_aws's subpackages are pulumi's lazy modules (pulumi/_utils.py _LazyModule): importing
    a submodule first sets the package's attribute for it before the package runs, and the lazy
    module restores it afterwards without setattr; the names must resolve all the same."""
    probe = """
import json
from offline import lazy_sdk
lazy_sdk.install()
import pulumi_aws
import pulumi_aws.eks.pod_identity_association
import pulumi_aws.eks as eks
print(json.dumps([eks.PodIdentityAssociationArgs.__qualname__, hasattr(eks, "PodIdentityAssociation"),
                  "cluster" in dir(eks), eks.cluster.__name__]))
"""
    run = subprocess.run([sys.executable, "-c", probe], cwd=REPO_ROOT, capture_output=True, text=True, timeout=60, check=True)
    assert json.loads(run.stdout) == ["PodIdentityAssociationArgs", True, True, "pulumi_aws.eks.cluster"]
