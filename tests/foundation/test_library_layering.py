"""The construct library does not reach back into the app: importing its modules loads neither `stacks/`
nor the app's config schema (`stage_config`), nor any module of the build (`model_build`, its CLI least of all):
the facts the constructs share with the build come from `serving_facts`, which imports nothing else of ours.
The app maps its config to the constructs' props."""

from __future__ import annotations

import ast
import json
import os
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest
from synth_helpers import PROJECT_ROOT

CONFIG_PACKAGE = "stage_config"  # the app's config schema (issue #23: moved out of the library's folder)


def _is_app_module(name: str) -> bool:
    return name in ("stacks", CONFIG_PACKAGE) or name.startswith(("stacks.", f"{CONFIG_PACKAGE}."))


def _library_modules() -> list[str]:
    """Every module and package under triton_cdk/ (found on disk, nothing imported) but the config package."""
    found = ["triton_cdk"]

    def walk(folder: Path, package: str) -> None:
        for info in pkgutil.iter_modules([str(folder)], prefix=f"{package}."):
            if _is_app_module(info.name):
                continue
            found.append(info.name)
            if info.ispkg:
                walk(folder / info.name.rpartition(".")[2], info.name)

    walk(PROJECT_ROOT / "triton_cdk", "triton_cdk")
    return found


LIBRARY_MODULES = _library_modules()

# One interpreter imports each module in turn; before each import it forgets every module of this project
# (third-party ones such as aws_cdk stay loaded), so each import loads its project imports afresh, as a
# process of its own would, at a fraction of the start-up cost.
PROBE = """
import importlib, json, sys
from pathlib import Path

root, prefix = Path(sys.argv[1]), Path(sys.prefix).resolve()
# The app (stacks, its config schema) and the build (issue #23: the constructs take the facts they share with the
# build from serving_facts, so importing them loads no model_build module, its CLI least of all).
is_app = lambda name: name in ("stacks", "stage_config", "model_build") or (
    name.startswith(("stacks.", "stage_config.", "model_build."))
)

def ours(module):
    file = getattr(module, "__file__", None)
    path = Path(file).resolve() if file else None
    return path is not None and path.is_relative_to(root) and not path.is_relative_to(prefix)

loaded = {}
for name in json.loads(sys.stdin.read()):
    for cached in [n for n, module in list(sys.modules.items()) if ours(module)]:
        del sys.modules[cached]
    try:
        importlib.import_module(name)
    except Exception as error:
        loaded[name] = [f"import failed: {type(error).__name__}: {error}"]
        continue
    loaded[name] = sorted(n for n in sys.modules if is_app(n))
print(json.dumps(loaded))
"""


@pytest.fixture(scope="module")
def app_modules_loaded() -> dict[str, list[str]]:
    """Library module -> the app modules (`stacks*`, `stage_config*`) importing it loaded."""
    env = {**os.environ, "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20"}
    result = subprocess.run(
        [sys.executable, "-c", PROBE, str(PROJECT_ROOT.resolve())],
        cwd=PROJECT_ROOT,
        input=json.dumps(LIBRARY_MODULES),
        capture_output=True,
        text=True,
        env=env,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_the_module_list_is_found_not_written():
    assert {"triton_cdk.serving", "triton_cdk.artifact_build.requests", "triton_cdk.artifact_keys"} <= set(
        LIBRARY_MODULES
    )
    assert not [m for m in LIBRARY_MODULES if _is_app_module(m)]


@pytest.mark.parametrize("module", LIBRARY_MODULES)
def test_library_module_loads_no_app_module(module, app_modules_loaded):
    assert app_modules_loaded[module] == []


def _imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def test_nothing_in_the_library_imports_the_app():
    """The only arrow goes from the app (`stacks/`, the config schema `stage_config/`) to the library
    (`triton_cdk/`), never back, also in imports a probe would not load (inside functions, under TYPE_CHECKING)."""
    offenders = {
        str(path.relative_to(PROJECT_ROOT)): sorted(m for m in _imported_modules(path) if _is_app_module(m))
        for path in sorted((PROJECT_ROOT / "triton_cdk").rglob("*.py"))
    }
    assert {path: modules for path, modules in offenders.items() if modules} == {}


def test_the_config_schema_never_imports_the_stacks():
    offenders = {
        str(path.relative_to(PROJECT_ROOT)): sorted(
            m for m in _imported_modules(path) if m == "stacks" or m.startswith("stacks.")
        )
        for path in sorted((PROJECT_ROOT / CONFIG_PACKAGE).rglob("*.py"))
    }
    assert {path: modules for path, modules in offenders.items() if modules} == {}


def _probe(code: str) -> str:
    """What `code` prints, run in a fresh interpreter from the project root (nothing imported yet)."""
    env = {**os.environ, "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20"}
    result = subprocess.run([sys.executable, "-c", code], cwd=PROJECT_ROOT, capture_output=True, text=True, env=env)
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout.strip()


def test_every_command_error_is_a_tool_error():
    """One hierarchy: `run_cli` prints a ToolError, or a shared fact's ServingFactError, as one line (no traceback);
    model_build's value-style errors are ModelBuildErrors, the facts' errors ServingFactErrors (also ValueErrors),
    and endpoint_client's share the neutral base, not model_build's."""
    probe = (
        "import inspect, pkgutil, importlib, model_build, serving_facts, endpoint_client.errors as e\n"
        "import model_build.errors as m, serving_facts.errors as f, model_build.key, model_build.onnx_external\n"
        "facts = [importlib.import_module(i.name) for i in pkgutil.iter_modules(serving_facts.__path__, "
        "'serving_facts.')]\n"
        "def bad(mods, base):\n"
        "    return [c.__name__ for mod in mods for _, c in inspect.getmembers(mod, inspect.isclass) "
        "if c.__module__ == mod.__name__ and issubclass(c, Exception) and not issubclass(c, base)]\n"
        "client = e.EndpointClientError\n"
        "print(bad([model_build.key, model_build.onnx_external], m.ModelBuildError), bad(facts, f.ServingFactError), "
        "issubclass(f.ServingFactError, ValueError), issubclass(client, m.ToolError), "
        "issubclass(client, m.ModelBuildError))"
    )
    assert _probe(probe) == "[] [] True True False"


def _ours_imported_by(folder: str) -> dict[str, set[str]]:
    """File -> the top-level packages of this project it imports (anywhere in the file)."""
    ours = {"triton_cdk", "stacks", "stage_config", "model_build", "endpoint_client", "serving_facts"}
    found = {}
    for path in sorted((PROJECT_ROOT / folder).rglob("*.py")):
        if "handlers" in path.parts:
            continue
        modules = {m.split(".")[0] for m in _imported_modules(path)} & (ours - {folder})
        if modules:
            found[str(path.relative_to(PROJECT_ROOT))] = modules
    return found


def test_the_package_table_of_docs_architecture_holds():
    """docs/architecture.md "Packages and what each may import": model_build imports nothing of ours but in its `key`
    command (inside the function: test below), the stacks take from the client only the smoke plan they write, the
    config schema only the client's payload limit."""
    beyond_facts = {path: mods - {"serving_facts"} for path, mods in _ours_imported_by("model_build").items()}
    assert {path: mods for path, mods in beyond_facts.items() if mods} == {
        "model_build/commands/key.py": {"stacks", "stage_config"}
    }
    stacks_to_client = {
        m
        for path in sorted((PROJECT_ROOT / "stacks").rglob("*.py"))
        for m in _imported_modules(path)
        if m.split(".")[0] == "endpoint_client"
    }
    assert stacks_to_client <= {"endpoint_client.smoke_plan"}
    config_to_client = {
        m
        for path in sorted((PROJECT_ROOT / CONFIG_PACKAGE).rglob("*.py"))
        for m in _imported_modules(path)
        if m.split(".")[0] == "endpoint_client"
    }
    assert config_to_client <= {"endpoint_client.limits"}
    # The constructs take the shared facts from serving_facts, nothing from model_build (issue #23 item 1).
    assert {m for modules in _ours_imported_by("triton_cdk").values() for m in modules} <= {"serving_facts"}
    assert _ours_imported_by("serving_facts") == {}


def _module_level_imports(path: Path) -> set[str]:
    """What a file imports when it is imported: module-level statements, TYPE_CHECKING blocks left out."""
    names: set[str] = set()
    for node in ast.parse(path.read_text(encoding="utf-8"), filename=str(path)).body:
        if isinstance(node, ast.If) and ast.unparse(node.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING"):
            continue
        for inner in ast.walk(node):
            if isinstance(inner, (ast.FunctionDef, ast.AsyncFunctionDef)):
                break
            if isinstance(inner, ast.Import):
                names.update(alias.name for alias in inner.names)
            elif isinstance(inner, ast.ImportFrom) and inner.module and inner.level == 0:
                names.add(inner.module)
    return names


def test_model_build_key_imports_the_app_only_when_it_runs():
    """`python -m model_build key` prints the key the app deploys by asking the app's artifact plan (issue #23 item
    5), which it imports inside its function: importing the command (the CLI does, in the build image without the
    CDK) loads nothing of the app."""
    key = PROJECT_ROOT / "model_build" / "commands" / "key.py"
    assert {m.split(".")[0] for m in _module_level_imports(key)} & {"stacks", "stage_config", "triton_cdk"} == set()
    assert {"stacks.artifact_plan", "stage_config.loader"} <= _imported_modules(key)


def test_importing_model_build_loads_no_cdk():
    """Every module of model_build (its CLI and commands included) imports without aws_cdk, the app or the
    constructs: the CodeBuild build imports it from the serving image, where none of them is installed."""
    probe = (
        "import importlib, pkgutil, sys, model_build\n"
        "for info in pkgutil.walk_packages(model_build.__path__, 'model_build.'):\n"
        "    if info.name != 'model_build.__main__':\n"
        "        importlib.import_module(info.name)\n"
        "print(sorted({n.split('.')[0] for n in sys.modules} & {'aws_cdk', 'jsii', 'stacks', 'stage_config', "
        "'triton_cdk', 'endpoint_client'}))"
    )
    assert _probe(probe) == "[]"


def test_the_shared_facts_load_no_cli_no_cdk_and_nothing_else_of_ours():
    """serving_facts (issue #23 item 1): every module imports with nothing of this project but itself and no aws_cdk,
    so the constructs, the app and the build image (without the CDK) all import the same facts."""
    probe = (
        "import importlib, pkgutil, sys, serving_facts\n"
        "for info in pkgutil.iter_modules(serving_facts.__path__, 'serving_facts.'):\n"
        "    importlib.import_module(info.name)\n"
        "print(sorted({n.split('.')[0] for n in sys.modules} & {'aws_cdk', 'jsii', 'constructs', 'model_build', "
        "'triton_cdk', 'stacks', 'stage_config', 'endpoint_client'}))"
    )
    assert _probe(probe) == "[]"


def test_the_client_commands_invoke_and_local_load_no_cdk():
    """docs/architecture.md, the `endpoint_client/` row: `python -m endpoint_client invoke` / `local` never import
    aws_cdk (`smoke`: tests/pipeline/test_smoke_imports.py). The probe loads what those commands load: the CLI
    module, its parser with every command registered (`build_parser`, which imports the commands registered
    inside it), and what `run_local` imports when it runs; none of it loads the CDK, the constructs or the app."""
    probe = (
        "import sys, endpoint_client.cli as cli\n"
        "cli.build_parser()\n"
        "import endpoint_client.local_endpoint, endpoint_client.onnx_standin\n"
        "print(sorted({n.split('.')[0] for n in sys.modules} & {'aws_cdk', 'jsii', 'constructs', 'cdk_nag', "
        "'triton_cdk', 'stacks', 'stage_config'}))"
    )
    assert _probe(probe) == "[]"
