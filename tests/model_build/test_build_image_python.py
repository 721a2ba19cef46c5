"""The CodeBuild GPU build runs our code on the serving image's own Python, which is older than ours.

model_build/buildspec.yml runs `python3 -m model_build ...` and `python3 -m endpoint_client.build_check_cli` INSIDE
`sagemaker-tritonserver:<release>-py3`. The shipped configs use `triton_release: "24.09"`, whose image is Ubuntu 22.04
with its apt `python3`, Python 3.10 (triton-inference-server/server, tag v2.50.0 = r24.09, build.py: the production
image is FROM the `nvcr.io/nvidia/tritonserver:<ver>-py3-min` image, CUDA apt repository `ubuntu2204`, CPU-only base
`ubuntu:22.04`, and the python backend's `apt-get install python3 libpython3-dev`; Ubuntu 22.04's python3 is 3.10).
Our venv is 3.11+, so a 3.11 name such as `datetime.UTC` or `enum.StrEnum` passes every other test here and fails the
first TensorRT build at import.

Every project module the build can import is found at test time: the modules that each buildspec entry really
imports (`python -m <entry> --help` run by runpy, which builds every subcommand's parser, then sys.modules),
closed over every `import` statement in them, including the deferred ones inside functions. Each must
(a) parse with `ast.parse(feature_version=(3, 10))` (Python docs, ast.parse: "feature_version ... best-effort"),
(b) use no standard-library name added in 3.11 or later (NEW_IN_311_PLUS, from the "What's New in Python 3.11 / 3.12
/ 3.13" pages and each name's "Added in version 3.x" note in the library reference), and
(c) where a Python 3.10 interpreter is here, compile under it; where that interpreter can also import the buildspec's
pinned packages (BUILD_IMAGE_PYTHON=<python3.10 with them>), import every module and run each entry's --help under it;
(d) where vermin (netromdk/vermin) is installed, pass `vermin -t=3.10-` (it found `zlib.compress(wbits=)`, 3.11).
Checked on 2026-11-27 with a pyenv 3.10.13 venv built from the wheels below (BUILD_IMAGE_PYTHON): (c) and the imports
pass, and tests/model_build/test_package.py, test_check_cli.py, test_build_report.py and
tests/client/test_client_codec.py pass under it except where the test itself needs a 3.11 venv (aws_cdk, moto,
contextlib.chdir in cli_runner.py) or an ONNX fixture has IR version 14 (onnx 1.23.2's default), which ONNX Runtime
1.23.2 refuses (max IR 11).

The buildspec's pins install on Python 3.10: checked with `pip download --only-binary=:all: --python-version 3.10
--implementation cp --abi cp310 --platform manylinux2014_x86_64 ... manylinux_2_35_x86_64` on 2026-11-27, every
pin below resolved to a cp310 (or pure-Python / abi3) manylinux x86_64 wheel, with its dependencies (numpy resolved to
2.2.6, the newest with cp310 wheels; requirements.txt's numpy 2.4.6 is 3.11+ but the buildspec does not pin numpy):
pydantic 2.14.3 (pure; pydantic_core 2.50.4 cp310 manylinux2014), PyYAML 6.0.3 (cp310 manylinux2014), boto3 1.44.5
(pure), onnx 1.23.2 (cp310 manylinux_2_27), onnxruntime 1.23.2 (cp310 manylinux_2_27; 1.32.0 has none, hence the
buildspec's marker), tritonclient[grpc,http] 2.73.0 (pure; grpcio 1.85.3 cp310, geventhttpclient 2.4.0 cp310),
aiohttp 3.14.5 (cp310 manylinux2014; on 3.10 it also installs async-timeout), pip 24.3.1 (pure).
BUILDSPEC_PINS_CHECKED_FOR_CP310 holds them: a changed pin fails test_buildspec_pins_were_checked_for_python_310 until
it is checked again the same way.
"""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
BUILDSPEC = ROOT / "model_build" / "buildspec.yml"
PACKAGES = ("model_build", "endpoint_client")
IMAGE_PYTHON = (3, 10)

# name -> the version that added it. Sources: docs.python.org/3/whatsnew/3.11.html, 3.12.html, 3.13.html and the
# library reference's "Added in version 3.11/3.12/3.13" notes of each entry.
NEW_IN_311_PLUS: dict[str, str] = {
    "datetime.UTC": "3.11",
    "enum.StrEnum": "3.11",
    "enum.ReprEnum": "3.11",
    "enum.EnumCheck": "3.11",
    "enum.FlagBoundary": "3.11",
    "enum.verify": "3.11",
    "enum.member": "3.11",
    "enum.nonmember": "3.11",
    "enum.global_enum": "3.11",
    "enum.show_flag_values": "3.11",
    "enum.property": "3.11",
    "typing.Self": "3.11",
    "typing.LiteralString": "3.11",
    "typing.Never": "3.11",
    "typing.assert_never": "3.11",
    "typing.assert_type": "3.11",
    "typing.reveal_type": "3.11",
    "typing.Required": "3.11",
    "typing.NotRequired": "3.11",
    "typing.TypeVarTuple": "3.11",
    "typing.Unpack": "3.11",
    "typing.dataclass_transform": "3.11",
    "typing.get_overloads": "3.11",
    "typing.clear_overloads": "3.11",
    "typing.override": "3.12",
    "typing.TypeAliasType": "3.12",
    "typing.get_protocol_members": "3.13",
    "typing.is_protocol": "3.13",
    "typing.ReadOnly": "3.13",
    "typing.TypeIs": "3.13",
    "typing.NoDefault": "3.13",
    "asyncio.TaskGroup": "3.11",
    "asyncio.timeout": "3.11",
    "asyncio.timeout_at": "3.11",
    "asyncio.Timeout": "3.11",
    "asyncio.Runner": "3.11",
    "asyncio.Barrier": "3.11",
    "asyncio.BrokenBarrierError": "3.11",
    "asyncio.eager_task_factory": "3.12",
    "asyncio.QueueShutDown": "3.13",
    "hashlib.file_digest": "3.11",
    "operator.call": "3.11",
    "contextlib.chdir": "3.11",
    "itertools.batched": "3.12",
    "math.cbrt": "3.11",
    "math.exp2": "3.11",
    "math.sumprod": "3.12",
    "math.fma": "3.13",
    "logging.getLevelNamesMapping": "3.11",
    "logging.getHandlerByName": "3.12",
    "logging.getHandlerNames": "3.12",
    "inspect.getmembers_static": "3.11",
    "inspect.markcoroutinefunction": "3.12",
    "locale.getencoding": "3.11",
    "re.NOFLAG": "3.11",
    "re.PatternError": "3.13",
    "string.Template.get_identifiers": "3.11",
    "sys.exception": "3.11",
    "sys.activate_stack_trampoline": "3.12",
    "sys.monitoring": "3.12",
    "sys.getunicodeinternedsize": "3.12",
    "sys._is_gil_enabled": "3.13",
    "time.sleep_until": "3.13",
    "tempfile.TemporaryDirectory.delete": "3.12",
    "os.process_cpu_count": "3.13",
    "os.path.isjunction": "3.12",
    "os.path.splitroot": "3.12",
    "shutil.rmtree.onexc": "3.12",
    "warnings.deprecated": "3.13",
    "copy.replace": "3.13",
    "base64.z85encode": "3.13",
    "base64.z85decode": "3.13",
    "types.get_original_bases": "3.12",
    "pathlib.Path.walk": "3.12",
    "pathlib.Path.from_uri": "3.13",
    "pathlib.UnsupportedOperation": "3.13",
    "queue.ShutDown": "3.13",
    "builtins.ExceptionGroup": "3.11",
    "builtins.BaseExceptionGroup": "3.11",
    "builtins.PythonFinalizationError": "3.13",
}
NEW_MODULES_311_PLUS: dict[str, str] = {"tomllib": "3.11", "wsgiref.types": "3.11"}
# Methods added in 3.11+ on built-in types, looked for by attribute name (no type information here): a false hit is
# a method of ours with the same name, to be renamed or listed with its reason in ALLOWED_METHOD_NAMES.
NEW_METHODS_311_PLUS: dict[str, str] = {
    "add_note": "3.11 (BaseException.add_note)",
    "full_match": "3.13 (pathlib.PurePath.full_match)",
    "walk": "3.12 (pathlib.Path.walk; os.walk is older and allowed)",
    "from_uri": "3.13 (pathlib.Path.from_uri)",
    "splitroot": "3.12 (os.path.splitroot)",
    "isjunction": "3.12 (os.path.isjunction)",
}
# Parameters added in 3.11+ to older functions: (function, keyword, its position or None) -> version.
# zlib.compress(wbits) found by vermin 1.9.2 in model_build/archive.py (`package` failed on 3.10 with a TypeError).
NEW_PARAMETERS_311_PLUS: dict[tuple[str, str, int | None], str] = {
    ("zlib.compress", "wbits", 2): "3.11",
    ("dataclasses.dataclass", "weakref_slot", None): "3.11",
    ("shutil.rmtree", "onexc", None): "3.12",
    ("tempfile.TemporaryDirectory", "delete", None): "3.12",
    ("tempfile.NamedTemporaryFile", "delete_on_close", None): "3.12",
}
ALLOWED_METHOD_CALLS = {("os", "walk"), ("ast", "walk")}  # older functions of the same name

# The buildspec's pip pins, each checked for a cp310 manylinux x86_64 wheel (module docstring).
BUILDSPEC_PINS_CHECKED_FOR_CP310 = {
    "pydantic==2.14.3",
    "PyYAML==6.0.3",
    "boto3==1.44.5",
    "onnx==1.23.2",
    "tritonclient[grpc]==2.73.0",
    "tritonclient[http]==2.73.0",
    "onnxruntime==1.23.2",  # the `python_version < '3.11'` branch; 1.32.0 is for 3.11+
    "onnxruntime==1.32.0",  # the `python_version >= '3.11'` branch: never installed on 3.10
    "aiohttp==3.14.5",
    "pip==24.3.1",
}


def buildspec_commands() -> str:
    """Every command of every phase, as the shell gets it (YAML block indentation removed)."""
    spec = yaml.safe_load(BUILDSPEC.read_text(encoding="utf-8"))
    return "\n".join(command for phase in spec["phases"].values() for command in phase.get("commands", []))


def buildspec_entries() -> list[str]:
    """The modules the buildspec runs with `python3 -m` (project packages only; `-m pip`, `-m zipfile` are not ours)."""
    text = buildspec_commands()
    found = sorted(set(re.findall(r"python3 -m ((?:model_build|endpoint_client)(?:\.\w+)*)", text)))
    assert found, f"{BUILDSPEC}: no `python3 -m model_build|endpoint_client` command found"
    return found


def buildspec_inline_snippets() -> list[str]:
    """The `python3 -c '...'` programs of the buildspec (single-quoted, may span lines)."""
    snippets = re.findall(r"python3 -c '([^']*)'", buildspec_commands())
    assert snippets, f"{BUILDSPEC}: no `python3 -c '...'` found (the fetch helper)"
    return snippets


_RUN_ENTRY = """
import runpy, sys
entry = sys.argv[1]
sys.argv = [entry, "--help"]
try:
    runpy.run_module(entry, run_name="__main__", alter_sys=True)
except SystemExit as exit:
    if exit.code not in (0, None):
        raise
sys.stdout.flush()
print("\\nMODULES", *sorted(sys.modules), file=sys.stderr)
"""


def _imported_at_run_time(python: str, entry: str) -> set[str]:
    """Project modules `python -m <entry> --help` imports (its parser has every subcommand's), from sys.modules."""
    result = subprocess.run(
        [python, "-c", _RUN_ENTRY, entry],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, f"python -m {entry} --help failed:\n{result.stderr[-4000:]}"
    listed = result.stderr.rsplit("\nMODULES ", 1)[1].split()
    return {name for name in listed if name.split(".")[0] in PACKAGES} | {entry}


def module_file(name: str) -> Path | None:
    base = ROOT.joinpath(*name.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _imports_in(name: str, tree: ast.AST) -> set[str]:
    """Every project module an `import` anywhere in the module names (top level, functions, try blocks)."""
    package_parts = name.split(".") if module_file(name).name == "__init__.py" else name.split(".")[:-1]
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = ".".join(package_parts[: len(package_parts) - node.level + 1])
                module = f"{base}.{node.module}" if node.module else base
            else:
                module = node.module or ""
            names.add(module)
            names.update(f"{module}.{alias.name}" for alias in node.names)  # `from pkg import submodule`
    closure = set()
    for imported in names:
        parts = imported.split(".")
        if parts[0] not in PACKAGES:
            continue
        for i in range(1, len(parts) + 1):  # importing a.b.c imports a and a.b
            if module_file(".".join(parts[:i])) is not None:
                closure.add(".".join(parts[:i]))
    return closure


def build_modules(python: str = sys.executable) -> dict[str, Path]:
    """Every project module the build can import: run-time imports of each entry, closed over deferred imports."""
    pending: set[str] = set()
    for entry in buildspec_entries():
        pending |= _imported_at_run_time(python, entry)
        if module_file(f"{entry}.__main__"):
            pending.add(f"{entry}.__main__")
    seen: dict[str, Path] = {}
    while pending:
        name = pending.pop()
        if name in seen:
            continue
        path = module_file(name)
        assert path is not None, f"{name}: imported by the build but no file under {ROOT}"
        seen[name] = path
        pending |= _imports_in(name, ast.parse(path.read_text(encoding="utf-8"), str(path))) - seen.keys()
    return seen


@pytest.fixture(scope="module")
def modules() -> dict[str, Path]:
    found = build_modules()
    # The build's own commands and the check must be among them, or the discovery is broken.
    for expected in ("model_build.commands.build", "model_build.trt", "endpoint_client.build_check", "model_build.cli"):
        assert expected in found, f"{expected} not found among the build's modules: {sorted(found)}"
    return found


class _NewNames(ast.NodeVisitor):
    """Uses of NEW_IN_311_PLUS / NEW_MODULES_311_PLUS / NEW_METHODS_311_PLUS in one module."""

    def __init__(self) -> None:
        self.aliases: dict[str, str] = {}  # local name -> module (`import datetime as dt`)
        self.problems: list[str] = []

    def _hit(self, node: ast.AST, what: str, version: str) -> None:
        self.problems.append(f"line {node.lineno}: {what} is new in Python {version}")

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if alias.name in NEW_MODULES_311_PLUS:
                self._hit(node, f"module {alias.name}", NEW_MODULES_311_PLUS[alias.name])
            if alias.asname:
                self.aliases[alias.asname] = alias.name
            else:  # `import os.path` binds `os`
                self.aliases[alias.name.split(".")[0]] = alias.name.split(".")[0]

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = node.module or ""
        if module in NEW_MODULES_311_PLUS:
            self._hit(node, f"module {module}", NEW_MODULES_311_PLUS[module])
        for alias in node.names:
            full = f"{module}.{alias.name}"
            if full in NEW_IN_311_PLUS:
                self._hit(node, full, NEW_IN_311_PLUS[full])
            elif full in NEW_MODULES_311_PLUS:
                self._hit(node, f"module {full}", NEW_MODULES_311_PLUS[full])
            self.aliases[alias.asname or alias.name] = full

    def _dotted(self, node: ast.AST) -> str | None:
        if isinstance(node, ast.Name):
            return self.aliases.get(node.id, f"builtins.{node.id}")
        if isinstance(node, ast.Attribute):
            base = self._dotted(node.value)
            return f"{base}.{node.attr}" if base else None
        return None

    def visit_Name(self, node: ast.Name) -> None:
        dotted = self._dotted(node)
        if dotted in NEW_IN_311_PLUS and dotted.startswith("builtins."):
            self._hit(node, dotted.removeprefix("builtins."), NEW_IN_311_PLUS[dotted])

    def visit_Attribute(self, node: ast.Attribute) -> None:
        dotted = self._dotted(node)
        if dotted in NEW_IN_311_PLUS:
            self._hit(node, dotted, NEW_IN_311_PLUS[dotted])
        elif node.attr in NEW_METHODS_311_PLUS and not (
            isinstance(node.value, ast.Name) and (self.aliases.get(node.value.id), node.attr) in ALLOWED_METHOD_CALLS
        ):
            self._hit(node, f".{node.attr}", NEW_METHODS_311_PLUS[node.attr])
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        dotted = self._dotted(node.func)
        for (function, keyword, position), version in NEW_PARAMETERS_311_PLUS.items():
            if dotted == function and (
                any(k.arg == keyword for k in node.keywords) or (position is not None and len(node.args) > position)
            ):
                self._hit(node, f"{function}({keyword}=)", version)
        self.generic_visit(node)

    def visit_TryStar(self, node: ast.AST) -> None:  # ast.TryStar exists from 3.11
        self._hit(node, "except*", "3.11")
        self.generic_visit(node)


def new_name_problems(source: str, filename: str) -> list[str]:
    visitor = _NewNames()
    visitor.visit(ast.parse(source, filename))
    return visitor.problems


def test_the_build_modules_parse_as_python_310(modules: dict[str, Path]) -> None:
    """ast.parse(feature_version=(3, 10)) rejects 3.11+ syntax (except*, PEP 695 `type`, ...) (module docstring)."""
    problems = []
    for path in modules.values():
        try:
            ast.parse(path.read_text(encoding="utf-8"), str(path), feature_version=IMAGE_PYTHON)
        except SyntaxError as error:
            problems.append(f"{path.relative_to(ROOT)}:{error.lineno}: {error.msg}")
    for snippet in buildspec_inline_snippets():
        try:
            ast.parse(snippet, "buildspec python3 -c", feature_version=IMAGE_PYTHON)
        except SyntaxError as error:
            problems.append(f"{BUILDSPEC.name} python3 -c: {error.msg}")
    assert not problems, "not Python 3.10 syntax, but the build runs on the image's 3.10:\n" + "\n".join(problems)


def test_the_build_modules_use_no_standard_library_name_newer_than_310(modules: dict[str, Path]) -> None:
    """NEW_IN_311_PLUS (What's New 3.11/3.12/3.13; "Added in version" notes): none in the build's modules."""
    problems = []
    for path in modules.values():
        problems += [f"{path.relative_to(ROOT)}: {p}" for p in new_name_problems(path.read_text("utf-8"), str(path))]
    for snippet in buildspec_inline_snippets():
        problems += [f"{BUILDSPEC.name} python3 -c: {p}" for p in new_name_problems(snippet, "buildspec")]
    assert not problems, (
        "these run in the CodeBuild GPU build on the Triton image's Python 3.10 (model_build/buildspec.yml):\n"
        + "\n".join(problems)
    )


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("from datetime import UTC", "datetime.UTC"),
        ("import datetime as dt\nx = dt.UTC", "datetime.UTC"),
        ("import datetime\nx = datetime.UTC", "datetime.UTC"),
        ("import enum\nclass E(enum.StrEnum): pass", "enum.StrEnum"),
        ("import tomllib", "module tomllib"),
        ("from typing import Self", "typing.Self"),
        ("import asyncio\nasync def f():\n async with asyncio.TaskGroup(): pass", "asyncio.TaskGroup"),
        ("import hashlib\nhashlib.file_digest", "hashlib.file_digest"),
        ("try:\n pass\nexcept* ValueError:\n pass", "except*"),
        ("raise ExceptionGroup('x', [])", "ExceptionGroup"),
        ("e = ValueError()\ne.add_note('x')", ".add_note"),
        ("import zlib\nzlib.compress(b'', 1, wbits=-15)", "zlib.compress(wbits=)"),
        ("import zlib\nzlib.compress(b'', 1, -15)", "zlib.compress(wbits=)"),
        ("import shutil\nshutil.rmtree('x', onexc=print)", "shutil.rmtree(onexc=)"),
    ],
)
def test_the_checker_finds_each_kind_of_new_name(source: str, expected: str) -> None:
    """The checker itself: each kind of 3.11+ use is reported (a silent checker would pass everything)."""
    assert any(expected in problem for problem in new_name_problems(source, "sample")), new_name_problems(source, "s")


def test_the_checker_accepts_the_python_310_spellings() -> None:
    source = (
        "import datetime as dt, enum, os\nfrom datetime import timezone\nx = dt.datetime.now(timezone.utc)\n"
        "class E(str, enum.Enum):\n    A = 'a'\nfor _ in os.walk('.'): pass\n"
    )
    assert new_name_problems(source, "sample") == []


def test_vermin_finds_nothing_newer_than_310(modules: dict[str, Path]) -> None:
    """vermin (netromdk/vermin, a maintained minimum-version detector with a far larger table than ours, e.g. it
    found zlib.compress(wbits=)) over the same modules, where it is installed (not pinned here: the lead decides)."""
    if shutil.which("vermin") is None and not Path(sys.executable).with_name("vermin").exists():
        pytest.skip("vermin is not installed (pip install vermin==1.9.2)")
    vermin = shutil.which("vermin") or str(Path(sys.executable).with_name("vermin"))
    result = subprocess.run(
        [vermin, "-t=3.10-", "--no-tips", "--violations", "--no-parse-comments", *map(str, modules.values())],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]


def _python_310() -> str | None:
    """A Python 3.10 here: BUILD_IMAGE_PYTHON, python3.10 on PATH, or pyenv's."""
    candidates = [os.environ.get("BUILD_IMAGE_PYTHON"), shutil.which("python3.10")]
    pyenv = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    if pyenv.is_dir():
        candidates += [str(p / "bin" / "python3.10") for p in sorted(pyenv.glob("3.10*"))]
    for candidate in candidates:
        if candidate and Path(candidate).is_file() and os.access(candidate, os.X_OK):
            probe = [candidate, "-c", "import sys; assert sys.version_info[:2] == (3, 10)"]
            if subprocess.run(probe, capture_output=True, timeout=60, check=False).returncode == 0:  # not a shim
                return candidate
    return None


def test_the_build_modules_compile_under_python_310(modules: dict[str, Path]) -> None:
    """The real 3.10 compiler on every build module (ast's feature_version is best-effort)."""
    python = _python_310()
    if python is None:
        pytest.skip("no Python 3.10 interpreter here (set BUILD_IMAGE_PYTHON or put python3.10 on PATH)")
    program = "import sys\nfor p in sys.argv[1:]:\n    compile(open(p, encoding='utf-8').read(), p, 'exec')\n"
    result = subprocess.run(
        [python, "-c", program, *map(str, modules.values())], capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr[-4000:]


def test_the_build_entries_import_and_run_under_python_310(modules: dict[str, Path]) -> None:
    """Where a Python 3.10 with the buildspec's pins is given (BUILD_IMAGE_PYTHON), import every build module and
    run each entry's --help under it: what CodeBuild does first on a 24.09 image."""
    python = os.environ.get("BUILD_IMAGE_PYTHON") or _python_310()
    if python is None:
        pytest.skip("no Python 3.10 interpreter here")
    probe = subprocess.run(
        [python, "-c", "import sys, pydantic, yaml, boto3, onnx, onnxruntime, tritonclient.grpc, aiohttp; "
         "assert sys.version_info[:2] == (3, 10)"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    if probe.returncode != 0:
        pytest.skip(f"{python} lacks the buildspec's packages (BUILD_IMAGE_PYTHON=<a 3.10 venv with them>)")
    for entry in buildspec_entries():
        assert _imported_at_run_time(python, entry)
    names = sorted(n for n in modules if not n.endswith(".__main__"))
    result = subprocess.run(
        [python, "-c", "import importlib, sys\nfor n in sys.argv[1:]: importlib.import_module(n)", *names],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-4000:]


def test_buildspec_pins_were_checked_for_python_310() -> None:
    """Each `pkg==version` the buildspec installs was checked for a cp310 manylinux x86_64 wheel (module docstring)."""
    text = BUILDSPEC.read_text(encoding="utf-8")
    pins = set()
    for requirement in re.findall(r"pip install [^\n]*", text):
        for name, extras, version in re.findall(r"([A-Za-z][\w.-]*)(\[[\w,]+\])?==([\w.]+)", requirement):
            for extra in extras.strip("[]").split(",") if extras else [""]:
                pins.add(f"{name}[{extra}]=={version}" if extra else f"{name}=={version}")
    assert pins, f"{BUILDSPEC}: no pinned pip install found"
    unchecked = pins - BUILDSPEC_PINS_CHECKED_FOR_CP310
    assert not unchecked, (
        f"{BUILDSPEC}: {sorted(unchecked)} not checked for a cp310 manylinux x86_64 wheel: run pip download "
        "--only-binary=:all: --python-version 3.10 --platform manylinux2014_x86_64 ... and add them here"
    )
