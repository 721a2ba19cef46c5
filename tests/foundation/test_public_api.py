"""The construct library's public API is explicit (issue #23 item 1; docs/architecture.md, the `triton_cdk/` row):
every module of `triton_cdk` (its Lambda handlers aside) lists its public names in `__all__`, every public class and
function it defines is listed there (or is named with a leading `_`), a package's `__all__` also names each of its
modules, and the app (`stacks/`, `stage_config/`, `app.py`) imports from the library nothing but those names.
Read with `ast`: nothing is imported, except by the probe of the last test."""

from __future__ import annotations

import ast
import functools
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from synth_helpers import PROJECT_ROOT

LIBRARY = "triton_cdk"


def _library_files() -> dict[str, Path]:
    """Module name -> file, for every module and package of the library but the Lambda handlers' code."""
    found = {}
    for path in sorted((PROJECT_ROOT / LIBRARY).rglob("*.py")):
        relative = path.relative_to(PROJECT_ROOT).with_suffix("")
        if "handlers" in relative.parts:
            continue
        parts = relative.parts[:-1] if relative.name == "__init__" else relative.parts
        found[".".join(parts)] = path
    return found


LIBRARY_FILES = _library_files()


@functools.cache  # each test reads a module's tree several times
def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def _declared_all(path: Path) -> list[str] | None:
    """The module's `__all__`, which must be a literal list or tuple of strings; None where it has none."""
    for node in _tree(path).body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            value = ast.literal_eval(node.value)
            assert isinstance(value, (list, tuple)) and all(isinstance(n, str) for n in value), path
            return list(value)
    return None


def _bound_names(body: list[ast.stmt]) -> set[str]:
    """The names a module's top-level statements bind when it runs (`if TYPE_CHECKING:` blocks left out)."""
    names: set[str] = set()
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))
        elif isinstance(node, ast.Import):
            names.update(alias.asname or alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            names.update(alias.asname or alias.name for alias in node.names)
        elif isinstance(node, ast.If) and "TYPE_CHECKING" not in ast.unparse(node.test):
            names |= _bound_names(node.body) | _bound_names(node.orelse)
        elif isinstance(node, ast.Try):
            names |= _bound_names(node.body) | _bound_names(node.orelse) | _bound_names(node.finalbody)
            for handler in node.handlers:
                names |= _bound_names(handler.body)
    return names


def _submodules(module: str) -> set[str]:
    """A package's modules and subpackages (`from package import module` works for them without an attribute)."""
    return {name.rpartition(".")[2] for name in LIBRARY_FILES if name.rpartition(".")[0] == module}


def _defined_public(path: Path) -> set[str]:
    """The public classes and functions a module defines itself (what a user of it would call)."""
    return {
        node.name
        for node in _tree(path).body
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and not node.name.startswith("_")
    }


def _app_imports() -> dict[tuple[str, str], set[str]]:
    """(library module, name) -> the app's files that import that name from that module (`from M import N`, also
    inside functions); `import triton_cdk.x` records the name "". Source: the app's stacks/, its config schema
    stage_config/ and app.py."""
    found: dict[tuple[str, str], set[str]] = {}
    app_files = [p for folder in ("stacks", "stage_config") for p in sorted((PROJECT_ROOT / folder).rglob("*.py"))]
    for path in [*app_files, PROJECT_ROOT / "app.py"]:
        for node in ast.walk(_tree(path)):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                pairs = [(node.module, alias.name) for alias in node.names]
            elif isinstance(node, ast.Import):
                pairs = [(alias.name, "") for alias in node.names]
            else:
                continue
            for module, name in pairs:
                if module.split(".")[0] == LIBRARY:
                    found.setdefault((module, name), set()).add(str(path.relative_to(PROJECT_ROOT)))
    return found


APP_IMPORTS = _app_imports()


def test_the_modules_and_the_app_imports_are_found_not_written():
    assert {"triton_cdk", "triton_cdk.serving", "triton_cdk.artifact_build.requests", "triton_cdk.roles"} <= set(
        LIBRARY_FILES
    )
    assert not [name for name in LIBRARY_FILES if "handlers" in name.split(".")]
    assert {
        ("triton_cdk.serving", "TritonEndpoint"),
        ("triton_cdk.roles", "SageMakerExecutionRole"),
        ("triton_cdk.serving", "component_sizing"),  # stage_config/endpoint.py
    } <= set(APP_IMPORTS)


@pytest.mark.parametrize("module", sorted(LIBRARY_FILES))
def test_every_library_module_states_its_public_api(module):
    """`__all__` is there, names only public names (no leading `_`), each once, each bound by the module (or, in a
    package, one of its modules), and lists every public class and function the module defines: a new one is
    exported, or named with a leading `_` if it is internal. A package's `__all__` names each of its modules."""
    path = LIBRARY_FILES[module]
    exported = _declared_all(path)
    assert exported is not None, f"{path.relative_to(PROJECT_ROOT)} has no __all__"
    assert [n for n in exported if n.startswith("_")] == [], "__all__ lists private names"
    assert len(exported) == len(set(exported)), "__all__ lists a name twice"
    missing = set(exported) - _bound_names(_tree(path).body) - _submodules(module)
    assert missing == set(), f"{path.relative_to(PROJECT_ROOT)}: __all__ names what the module does not bind"
    unlisted = (_defined_public(path) | _submodules(module)) - set(exported)
    assert unlisted == set(), (
        f"{path.relative_to(PROJECT_ROOT)}: add these to __all__, or prefix them with _ if they are internal"
    )


def test_the_app_imports_only_the_library_public_api():
    """What stacks/, stage_config/ and app.py take from triton_cdk is in the `__all__` of the module they take it
    from: the app composes the library as a CDK user would."""
    problems = []
    for (module, name), files in sorted(APP_IMPORTS.items()):
        where = ", ".join(sorted(files))
        if module not in LIBRARY_FILES:
            problems.append(f"{where}: {module} is no module of the library")
        elif name:
            exported = _declared_all(LIBRARY_FILES[module]) or []
            if name not in exported:
                problems.append(f"{where}: {name} is not in {module}.__all__")
    assert problems == []


# The packages whose __init__ re-exports nothing: importing one must stay as cheap as it was (the config schema
# imports triton_cdk.artifact_build.requests without the CDK), so their __all__ names modules, never imports them.
PACKAGE_PROBE = """
import json, sys
import triton_cdk, triton_cdk.artifact_build, triton_cdk.pipeline
print(json.dumps(sorted(n for n in sys.modules if n.split(".")[0] in ("aws_cdk", "jsii", "constructs")
    or (n.startswith("triton_cdk.") and n not in ("triton_cdk.artifact_build", "triton_cdk.pipeline")))))
"""


def test_importing_the_library_or_an_area_package_imports_no_construct():
    env = {**os.environ, "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20"}
    result = subprocess.run(
        [sys.executable, "-c", PACKAGE_PROBE], cwd=PROJECT_ROOT, capture_output=True, text=True, env=env
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert json.loads(result.stdout.strip().splitlines()[-1]) == []
