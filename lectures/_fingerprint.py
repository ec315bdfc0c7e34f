"""The fingerprint of the code a lecture runs: what decides whether its notebook is stale.

A lecture's run executes its script, the lectures' helpers it imports (`_common`) and the
project modules those import, followed import by import (`files_run_by`). The fingerprint
holds one digest per such file, taken of what the file *does*, not of how it is written:

- the file is parsed and its syntax tree dumped without line numbers, so comments,
  blank lines, line breaks and quoting do not count;
- statements that do nothing are dropped: docstrings and any other bare string (the
  markdown cells of a lecture script), `pass`, `...`;
- an import of a project module is written without the module's path, and the digest
  of the imported module's own code is added in its place, so moving or renaming a
  module (and changing the imports that name it) leaves every digest as it was, while
  importing a name from a different module changes the importer's digest;
- a file left with no statements (an empty `__init__.py`, a docstring alone) runs
  nothing and has no digest.

Two fingerprints match when they hold the same digests, whatever paths they stand under:
a notebook is fresh when the code its run executed still exists, statement for
statement, somewhere in the project. Any other change (a constant, a default, a line of
a function the lecture imports) makes it stale. The rule is deliberately coarse in one
direction: a change to a function that the lecture imports but never calls also counts.
"""

from __future__ import annotations

import ast
import functools
import hashlib
from collections import Counter
from pathlib import Path

PROJECT_PACKAGES = ("ppo", "envs", "experiments")  # the library a lecture runs; third-party code is not tracked


def module_file(module: str, root: Path) -> Path | None:
    """The project file that `import module` runs (a package's __init__.py), None outside the project."""
    parts = module.split(".")
    helper = root / "lectures" / f"{parts[0]}.py"
    if len(parts) == 1 and parts[0].startswith("_") and helper.is_file():  # a helper the lectures share (_common)
        return helper
    if parts[0] not in PROJECT_PACKAGES:
        return None
    base = root.joinpath(*parts)
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def own_package(path: Path, root: Path) -> str:
    """The dotted package a relative import in this file starts from."""
    own = ".".join(path.relative_to(root).with_suffix("").parts)
    return own.removesuffix(".__init__") if path.name == "__init__.py" else own.rpartition(".")[0]


def absolute_module(node: ast.ImportFrom, package: str) -> str:
    """`from ..x import y` in package a.b.c names module a.b.x."""
    if not node.level:
        return node.module or ""
    anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
    return ".".join(anchor + ([node.module] if node.module else []))


def imported_modules(path: Path, root: Path) -> frozenset[str]:
    """Every module an `import` or `from … import` in the file names (in functions too), relative
    imports resolved; for `from package import name` both `package` and `package.name`, since
    the name may be a submodule."""
    return _imported_modules(_source(path), own_package(path, root))


@functools.lru_cache(maxsize=4096)
def _imported_modules(source: bytes, package: str) -> frozenset[str]:
    modules = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            modules.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = absolute_module(node, package)
            modules.add(base)
            modules.update(f"{base}.{alias.name}" for alias in node.names)
    return frozenset(modules)


def files_run_by(script: Path, root: Path) -> list[Path]:
    """The script and every project file its imports run, transitively (parent packages'
    __init__.py included: importing ppo.lm.model runs ppo/__init__.py and ppo/lm/__init__.py)."""
    found, pending = {script}, [script]
    while pending:
        for module in imported_modules(pending.pop(), root):
            parts = module.split(".")
            for depth in range(1, len(parts) + 1):
                path = module_file(".".join(parts[:depth]), root)
                if path is not None and path not in found:
                    found.add(path)
                    pending.append(path)
    return sorted(found)


class _WithoutDocstringsOrImportPaths(ast.NodeTransformer):
    """Drops the statements that do nothing (docstrings and other bare constants, `pass`);
    writes each import of a project module as `from ? import names`, noting the module's
    file (in order) so that its code can stand in for its path."""

    def __init__(self, package: str, root: Path):
        self.package, self.root, self.targets = package, root, []

    def visit_Expr(self, node: ast.Expr):
        return None if isinstance(node.value, ast.Constant) else self.generic_visit(node)

    def visit_Pass(self, node: ast.Pass):
        return None

    def _project_file(self, module: str) -> Path | None:
        return module_file(module, self.root) if module else None

    def visit_Import(self, node: ast.Import):
        for alias in node.names:
            target = self._project_file(alias.name)
            if target is not None and alias.asname:  # `import ppo.losses as losses`: the path is not used below
                self.targets.append(target)
                alias.name = "?"
        return node

    def visit_ImportFrom(self, node: ast.ImportFrom):
        module = absolute_module(node, self.package)
        if self._project_file(module) is None:
            return node
        for alias in node.names:  # each name may be a submodule (`from ppo import losses`) or a name in the module
            self.targets.append(self._project_file(f"{module}.{alias.name}") or self._project_file(module))
        return ast.ImportFrom(module="?", names=node.names, level=0)


@functools.lru_cache(maxsize=4096)
def normalised_code(source: str | bytes, package: str, root: Path) -> tuple[str, tuple[Path, ...]]:
    """The code as text, without what does not run (comments, layout, docstrings) and without
    the paths of the project modules it imports; and those modules' files, in order."""
    transformer = _WithoutDocstringsOrImportPaths(package, root)
    tree = transformer.visit(ast.parse(source))
    return ast.dump(tree, annotate_fields=False, include_attributes=False), tuple(transformer.targets)


def _source(path: Path) -> bytes:
    """The file's bytes, line endings normalised (a checkout with CRLF is the same code)."""
    return path.read_bytes().replace(b"\r\n", b"\n")


def _normalised(path: Path, root: Path) -> tuple[str, tuple[Path, ...]]:
    return normalised_code(_source(path), own_package(path, root), root)


EMPTY_MODULE = ast.dump(ast.Module(body=[], type_ignores=[]), annotate_fields=False, include_attributes=False)


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def code_digests(paths: list[Path], root: Path) -> dict[Path, dict[str, str] | None]:
    """{path: {"code": SHA-256 of what the file does, "imports": SHA-256 of the code of the project
    modules it imports}} (see the module docstring); None for a file that runs nothing."""
    normalised = {path: _normalised(path, root) for path in paths}

    def own_code(path: Path) -> str:
        return (normalised[path] if path in normalised else _normalised(path, root))[0]

    return {path: None if code == EMPTY_MODULE else
            {"code": _sha(code), "imports": _sha("\n".join(_sha(own_code(target)) for target in targets))}
            for path, (code, targets) in normalised.items()}


def fingerprint(script: Path, root: Path) -> dict[str, dict[str, str]]:
    """{path relative to the repository: its digests} for every project file a run of the script executes."""
    digests = code_digests(files_run_by(script, root), root)
    return {path.relative_to(root).as_posix(): digest for path, digest in digests.items() if digest is not None}


def _pair(digests: dict[str, str]) -> tuple[str, str]:
    return digests["code"], digests["imports"]


def differences(recorded: dict[str, dict[str, str]], current: dict[str, dict[str, str]]) -> list[str]:
    """[] when both fingerprints hold the same code (paths aside), else what changed, as phrases."""
    if Counter(map(_pair, recorded.values())) == Counter(map(_pair, current.values())):
        return []
    recorded_code = {digest["code"] for digest in recorded.values()}
    current_code = {digest["code"] for digest in current.values()}
    both = recorded.keys() & current.keys()
    changed = sorted(name for name in both if recorded[name]["code"] != current[name]["code"])
    added = sorted(name for name in current.keys() - recorded.keys() if current[name]["code"] not in recorded_code)
    removed = sorted(name for name in recorded.keys() - current.keys() if recorded[name]["code"] not in current_code)
    rewired = sorted(name for name in both if recorded[name]["imports"] != current[name]["imports"])
    return ([f"changed: {', '.join(changed)}"] if changed else []) + \
           ([f"now imported: {', '.join(added)}"] if added else []) + \
           ([f"no longer imported: {', '.join(removed)}"] if removed else []) or \
           [f"imports now name other code: {', '.join(rewired) or 'in moved files'}"]
