"""The offline plan's process loads each SDK resource module the first time a program names it.

A generated SDK package (``pulumi_aws.ec2``, ``pulumi_kubernetes.core.v1``, ...) star-imports
every module in it from its ``__init__``: importing ``pulumi_aws.ec2`` for a VPC executes
the 180 modules of every EC2 resource and data source. The programs name a few dozen classes,
so most of that work (about a quarter of a second) went to classes nothing uses.

``install()`` puts a finder on ``sys.meta_path`` that loads such a package with its
``from .<module> import *`` lines removed, knowing which names each of those modules exports
(its ``__all__``, read from the file's head, or for a hand-written module without one, its
public top-level names). The package's class then loads a module when one of its names is
first asked for, and binds all of that module's names the moment it loads, as its star-import
would (``_DeferredPackage``). The package's other lines run as written, ``_enums`` and
``_inputs`` still load with the package (every resource module imports them anyway), and a
package whose layout is not exactly that (names that cannot be read off a module, a name two
modules export, a name the kept lines define too) loads as it always did. A name resolves to the object the
star-import would have bound, so the programs, and what the plan prints and writes, are the
same; ``tests/test_lazy_sdk.py`` checks that against the eager packages.

Every SDK module this finder loads is also compiled as if it began with ``from __future__
import annotations`` (PEP 563), and its ``class FooArgsDict(TypedDict)`` classes, which only
type checkers read, as plain classes. Building the ``typing`` objects of every annotation in a
module (``Optional[pulumi.Input[Sequence[...]]]``, thousands in ``core.v1._inputs``) was about
half of its import time; pulumi reads a class's hints only when it (de)serializes that class,
through ``typing.get_type_hints`` (pulumi/_types.py ``_raw_return_hints``,
``_types_from_annotations``), which evaluates a postponed annotation to the same object. The
compiled code is cached beside the package's own bytecode (``code_cache_path``): compiling the
SDK's large modules takes longer than running them.

Only ``python -m offline.plan`` installs it; ``pulumi up`` and the tests load the SDKs as
shipped (``tests/test_plan_cli.py`` compares the plan both ways, byte for byte).
"""

from __future__ import annotations

import __future__

import _imp
import ast
import hashlib
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import marshal
import os
import re
import sys
from pathlib import Path
from types import ModuleType
from typing import Any, Optional, Sequence

SDK_PREFIXES = ("pulumi_aws.", "pulumi_kubernetes.", "pulumi_eks.", "pulumi_random.")
GENERATED_MARKER = "# Export this package's modules as members:"
STAR_IMPORT = re.compile(r"^from \.(\w+) import \*$", re.MULTILINE)
EAGER_MODULES = frozenset({"_enums", "_inputs"})
DUNDER_ALL = re.compile(r"^__all__ = \[(.*?)\]", re.MULTILINE | re.DOTALL)
QUOTED_NAME = re.compile(r"""['"](\w+)['"]""")
HEAD_BYTES = 8192
TYPED_DICT_CLASS = re.compile(r"^class (\w+)\(TypedDict\):$", re.MULTILINE)
# Part of each cached file's key: this file's text, so any change to the compilation below
# (or anything else here) compiles afresh.
OFFLINE_COMPILATION = hashlib.sha256(Path(__file__).read_bytes()).hexdigest()
CODE_CACHE_TAG = "offlineplan"
# The SDK packages the three programs declare resources from. Loading one early is an
# optimisation only (the tests' workers load them before freezing the collector): a package missing here
# still loads when a program first names it.
PROGRAM_SDK_PACKAGES = (
    "pulumi_aws.autoscaling", "pulumi_aws.cloudwatch", "pulumi_aws.ec2", "pulumi_aws.ecr", "pulumi_aws.eks",
    "pulumi_aws.fsx", "pulumi_aws.iam", "pulumi_aws.kms", "pulumi_aws.s3", "pulumi_aws.vpc",
    "pulumi_kubernetes.apiextensions", "pulumi_kubernetes.apps.v1", "pulumi_kubernetes.batch.v1",
    "pulumi_kubernetes.core.v1", "pulumi_kubernetes.helm.v3", "pulumi_kubernetes.meta.v1",
    "pulumi_kubernetes.networking.v1", "pulumi_kubernetes.storage.v1", "pulumi_kubernetes.yaml.v2",
    "pulumi_eks", "pulumi_random",
)  # fmt: skip


def exported_names(module_file: Path) -> Optional[list[str]]:
    """The names ``from <module> import *`` binds: the file's literal ``__all__`` near its top
    (every generated resource and data-source module has one), else its public top-level
    bindings when they can be read off the syntax (``public_bindings``); else None."""
    with module_file.open(encoding="utf-8") as handle:
        head = handle.read(HEAD_BYTES)
    match = DUNDER_ALL.search(head)
    if match is None:
        return public_bindings(module_file.read_text(encoding="utf-8"))
    return QUOTED_NAME.findall(match.group(1))


def public_bindings(source: str) -> Optional[list[str]]:
    """What a star-import of a module without ``__all__`` binds: every top-level name not starting
    with an underscore (the import system's rule). Only for a module whose top level is imports,
    classes, functions and plain assignments (pulumi_kubernetes.helm.v3's hand-written ``helm.py``,
    whose Chart pulls in ``requests``); anything that could bind a name conditionally, a nested
    star-import or an ``__all__`` of another form gives None."""
    names: list[str] = []
    for node in ast.parse(source).body:
        if isinstance(node, ast.Import):
            names += [alias.asname or alias.name.split(".")[0] for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and all(alias.name != "*" for alias in node.names):
            names += [alias.asname or alias.name for alias in node.names]
        elif isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            names.append(node.name)
        elif isinstance(node, ast.Assign) and all(isinstance(target, ast.Name) for target in node.targets):
            names += [target.id for target in node.targets]  # type: ignore[attr-defined]
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names += [node.target.id] if node.value is not None else []  # a bare annotation binds nothing
        elif not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)):  # a docstring is fine
            return None
    if "__all__" in names:
        return None
    return list(dict.fromkeys(name for name in names if not name.startswith("_")))


def deferred_exports(init_source: str, package_dir: Path) -> Optional[tuple[str, dict[str, str]]]:
    """``init_source`` without its deferrable star-imports, and which module each name they
    bound comes from; None when any of them cannot be deferred exactly."""
    owner: dict[str, str] = {}
    for module in STAR_IMPORT.findall(init_source):
        if module in EAGER_MODULES:
            continue
        module_file = package_dir / f"{module}.py"
        names = exported_names(module_file) if module_file.is_file() else None
        if names is None or any(name in owner for name in names):
            return None
        owner.update(dict.fromkeys(names, module))
    kept = STAR_IMPORT.sub(lambda m: m.group(0) if m.group(1) in EAGER_MODULES else "", init_source)
    return kept, owner


def offline_source(source: str) -> str:
    """The module as the offline plan compiles it: ``ArgsDict`` TypedDicts as plain classes."""
    return TYPED_DICT_CLASS.sub(r"class \1:", source)


def offline_compile(source: str, path: str) -> Any:
    return compile(offline_source(source), path, "exec", flags=__future__.annotations.compiler_flag, dont_inherit=True)


def code_cache_path(source_path: Path) -> Path:
    """``__pycache__/<module>.cpython-3XX.opt-offlineplan.pyc``: an interpreter never reads it."""
    return Path(importlib.util.cache_from_source(str(source_path), optimization=CODE_CACHE_TAG))


def cached_code(source_path: Path) -> Any:
    """The offline compilation of ``source_path``, from its cache file while that matches the
    source's size and modification time; else compiled now and cached (written whole, then
    renamed, so the plan's two processes may both write it). It is written whatever
    PYTHONDONTWRITEBYTECODE says: that setting is about the interpreter's own ``.pyc`` files,
    and without this cache every plan would compile a few megabytes of SDK source. A cache
    that cannot be read or written only costs the compilation."""
    stat = source_path.stat()
    # The optimisation level too: compile() under -O strips asserts, as CPython's opt-1 files do.
    key = (OFFLINE_COMPILATION, importlib.util.MAGIC_NUMBER, sys.flags.optimize, stat.st_mtime_ns, stat.st_size)
    cache = code_cache_path(source_path)
    try:
        cached_key, code = marshal.loads(cache.read_bytes())
        if cached_key == key:
            _imp._fix_co_filename(code, str(source_path))  # as the interpreter's loader does: a moved venv
            return code
    except (OSError, ValueError, EOFError, TypeError):
        pass
    code = offline_compile(source_path.read_text(encoding="utf-8"), str(source_path))
    partial = cache.with_name(f"{cache.name}.{os.getpid()}")
    try:
        cache.parent.mkdir(parents=True, exist_ok=True)  # parents: under PYTHONPYCACHEPREFIX
        partial.write_bytes(marshal.dumps((key, code)))
        os.replace(partial, cache)
    except OSError:
        try:
            partial.unlink(missing_ok=True)
        except OSError:  # a read-only file system refuses even a missing file's unlink (EROFS)
            pass
    return code


class _OfflineModuleLoader(importlib.machinery.SourceFileLoader):
    def get_code(self, fullname: str) -> Any:
        return cached_code(Path(self.path))


class _LazyPackageLoader(_OfflineModuleLoader):
    def exec_module(self, module: ModuleType) -> None:
        source = self.get_source(module.__name__) or ""
        split = deferred_exports(source, Path(self.path).parent) if GENERATED_MARKER in source else None
        if split is None:
            super().exec_module(module)
            return
        kept, owner = split
        exec(offline_compile(kept, self.path), module.__dict__)
        if owner.keys() & module.__dict__.keys():
            super().exec_module(module)  # a kept line binds an exported name too: the order decides
            return
        _OWNERS[module.__name__] = owner
        _EXPORTS[module.__name__] = _exports_by_module(owner)
        module.__class__ = _DeferredPackage


# Per deferred package: each exported name's module, and each star-imported module's names.
_OWNERS: dict[str, dict[str, str]] = {}
_EXPORTS: dict[str, dict[str, list[str]]] = {}


def _exports_by_module(owner: dict[str, str]) -> dict[str, list[str]]:
    exports: dict[str, list[str]] = {}
    for name, module in owner.items():
        exports.setdefault(module, []).append(name)
    return exports


class _DeferredPackage(ModuleType):
    """A package whose ``from .<module> import *`` lines run when one of their names is first
    asked for. The moment a star-imported module has loaded (by a name resolved here, or imported
    by anything else), the package binds every name that module exports, as its star-import
    would. The import system then setting the package's attribute for the module itself must not
    win over an exported name of the same spelling (``helm.v3.Release`` the class, not the module
    ``Release.py``; ``eks.get_addon_version`` the function): with the eager star-import the name
    is bound after the module attribute."""

    def __getattr__(self, name: str) -> Any:
        exports = _EXPORTS[self.__name__]
        module = _OWNERS[self.__name__].get(name)
        if module is None and name not in exports:
            raise AttributeError(f"module {self.__name__!r} has no attribute {name!r}")
        loaded = importlib.import_module(f"{self.__name__}.{module or name}")
        # Bound here too: a module imported before the package ran (pulumi's lazy module restores
        # such attributes without __setattr__) is in sys.modules, and importing it sets nothing.
        for exported in exports[module or name]:
            super().__setattr__(exported, getattr(loaded, exported))
        if module is None:  # the module itself, unless it exports a name spelled like it
            self.__dict__.setdefault(name, loaded)
        return self.__dict__[name]

    def __setattr__(self, name: str, value: Any) -> None:
        super().__setattr__(name, value)
        exports = _EXPORTS.get(self.__name__, {}).get(name)
        if exports is not None and isinstance(value, ModuleType) and value.__name__ == f"{self.__name__}.{name}":
            for exported in exports:
                super().__setattr__(exported, getattr(value, exported))

    def __dir__(self) -> list[str]:
        exports = _EXPORTS[self.__name__]
        return sorted(self.__dict__.keys() | exports.keys() | {n for names in exports.values() for n in names})


class _LazyPackageFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname: str, path: Optional[Sequence[str]], target: Optional[ModuleType] = None) -> Any:
        if not fullname.startswith(SDK_PREFIXES):
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.origin is None or not spec.origin.endswith(".py"):
            return spec
        loader = _LazyPackageLoader if spec.origin.endswith("__init__.py") else _OfflineModuleLoader
        spec.loader = loader(fullname, spec.origin)
        return spec


def load(modules: Sequence[str]) -> None:
    """Import ``modules`` now, executing the SDKs' lazily imported packages too."""
    for name in modules:
        # Any attribute but the introspection ones (pulumi/_utils.py _LazyModule) runs a lazy module.
        getattr(importlib.import_module(name), "__all__", None)


def install() -> None:
    """Defer the SDK packages' resource modules, and compile SDK modules for the offline plan, in this
    process (idempotent)."""
    if not any(isinstance(finder, _LazyPackageFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, _LazyPackageFinder())
