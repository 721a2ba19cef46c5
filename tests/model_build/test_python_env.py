"""Packed Python execution environments (model_build/python_env.py) and `package --environment-python`,
served by the real local Triton (python backend) to prove the environment is what the model runs in.

Sources: triton-inference-server/python_backend README "Creating Custom Execution Environments" (a tar
archive named by EXECUTION_ENV_PATH, unpacked per model), src/pb_env.cc (libarchive with
ARCHIVE_EXTRACT_SECURE_NODOTDOT / NOABSOLUTEPATHS / SYMLINKS), src/stub_launcher.cc (`<env>/bin/activate`
must exist; up to 25.08 it is sourced by bash before the stub starts), src/resources/
triton_python_backend_utils.py (imports numpy in the environment's interpreter).

numpy comes from pip's configured sources (the machine's index or wheel folders); the package only the
packed environment provides is a wheel built in the test, found through --find-links.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tarfile
import urllib.request
from pathlib import Path

import pytest
from ensemble_fixtures import pipeline_repository, tiny_wheel, write_pipeline
from synth_helpers import PROJECT_ROOT

from model_build import cli
from model_build.errors import InvalidModelError, ModelBuildError
from model_build.python_env import environment_entries, index_problem, packed_environment

TRITON_ENV = PROJECT_ROOT / ".venv-triton"
TRITON_PYTHON = TRITON_ENV / "bin" / "python"
# The numpy of the Triton venv (requirements-triton.txt): the stub's numpy<2 for Triton 2.51.
REQUIREMENTS = "numpy==1.26.4\nonlyenv==1.0\n"


@pytest.fixture(scope="module")
def wheels(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("wheels")
    tiny_wheel(folder)
    return folder


@pytest.fixture(scope="module")
def target_python() -> str:
    if not TRITON_PYTHON.is_file():
        pytest.skip("no .venv-triton: make .venv-triton/.stamp")
    return str(TRITON_PYTHON)


def pack(requirements: Path, python: str, cache: Path, wheels: Path) -> Path:
    try:
        return packed_environment(requirements, python, cache_dir=cache, find_links=[wheels])
    except ModelBuildError as error:
        if "No matching distribution found for numpy" in str(error):
            pytest.skip(f"pip finds no numpy wheel here: {error}")
        raise


@pytest.fixture(scope="module")
def packed(tmp_path_factory, wheels, target_python) -> Path:
    folder = tmp_path_factory.mktemp("env")
    requirements = folder / "requirements.txt"
    requirements.write_text(REQUIREMENTS)
    return pack(requirements, target_python, folder / "cache", wheels)


def test_packing_is_deterministic_and_cached(packed, tmp_path, wheels, target_python):
    """The same locked requirements on the same interpreter give a byte-identical archive (sorted entries,
    fixed mtimes and owners, no __pycache__), cached under the sha256 of requirements + interpreter."""
    requirements = tmp_path / "requirements.txt"
    requirements.write_text(REQUIREMENTS)
    again = pack(requirements, target_python, tmp_path / "other-cache", wheels)
    assert again.name == packed.name and again.read_bytes() == packed.read_bytes()
    assert packed_environment(requirements, target_python, cache_dir=tmp_path / "other-cache") == again
    with tarfile.open(packed) as tar:
        members = tar.getmembers()
    names = [m.name for m in members]
    assert "bin/activate" in names and "pyvenv.cfg" in names
    assert not any("__pycache__" in n or n.endswith(".pyc") for n in names)
    assert {m.mtime for m in members} == {315532800} and {m.uid for m in members} == {0}
    # pb_env.cc extracts with ARCHIVE_EXTRACT_SECURE_SYMLINKS: no links at all, nothing absolute or `..`.
    assert not any(m.issym() or m.islnk() for m in members)
    assert not any(n.startswith("/") or ".." in n.split("/") for n in names)


def test_the_environment_is_relocatable(packed, tmp_path):
    """stub_launcher.cc (<= 25.08): `bash -c "source <env>/bin/activate && exec ... stub"` wherever pb_env.cc
    unpacked the archive; the activate script must not name the folder the environment was built in."""
    where = tmp_path / "somewhere" / "else"
    where.mkdir(parents=True)
    with tarfile.open(packed) as tar:
        tar.extractall(where, filter="tar")
        for member in tar.getmembers():
            if member.isfile():
                assert b"python-env-" not in tar.extractfile(member).read(), member.name
    script = (
        f'source "{where}/bin/activate" && python3 -c "import sys, numpy, onlyenv; print(sys.prefix, onlyenv.MARK)"'
    )
    result = subprocess.run(["bash", "-c", script], capture_output=True, text=True, env={"PATH": "/usr/bin:/bin"})
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == [str(where), "from-packed-env"]


def test_unlocked_requirements_are_refused_before_anything_runs(tmp_path):
    requirements = tmp_path / "requirements.txt"
    requirements.write_text("numpy>=1.26\n")
    with pytest.raises(InvalidModelError, match=r"line 1: 'numpy>=1\.26' is not locked"):
        packed_environment(requirements, "/nonexistent/python", cache_dir=tmp_path / "cache")


def _closed_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]  # nothing listens there once the socket is closed


def test_an_index_pip_cannot_reach_is_a_clear_error_not_pip_s_output(tmp_path, target_python):
    """Packing downloads from the package index (PyPI in CI). With the index unreachable (here: a closed
    loopback port, pip's own configuration switched off) `package` exits 1 with one ERROR naming the
    requirements file as the stage config names it, pip's reason and the offline way; no traceback, nothing
    written."""
    stage = write_pipeline(tmp_path)
    environment = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    environment.update(
        PIP_CONFIG_FILE=os.devnull, PIP_INDEX_URL=f"http://127.0.0.1:{_closed_port()}/simple", PIP_RETRIES="1"
    )
    argv = [sys.executable, "-m", "model_build", "package", "--config", str(stage), "--model", "pipe",
            "--base-dir", str(tmp_path),
            "--environment-python", target_python, "--environment-cache", str(tmp_path / "cache"),
            "--out", str(tmp_path / "out")]  # fmt: skip
    result = subprocess.run(argv, capture_output=True, text=True, env=environment, cwd=PROJECT_ROOT, timeout=300)
    assert result.returncode == 1, result.stderr
    assert result.stderr.startswith("ERROR: models/pre/requirements.txt: cannot download the wheels"), result.stderr
    assert "pip could not reach the package index" in result.stderr and "Connection refused" in result.stderr
    assert "--find-links DIR --no-index" in result.stderr
    assert "Traceback" not in result.stderr and len(result.stderr.splitlines()) == 1
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("output", "expected"),
    [
        ("WARNING: Retrying (Retry(total=0, connect=None, read=None, redirect=None, status=None)) after connection "
         "broken by 'NewConnectionError(\"<...>: Failed to resolve 'pypi.org' ([Errno -3] Temporary failure in name "
         "resolution)\")': /simple/numpy/\nERROR: No matching distribution found for numpy==1.26.4",
         "pip could not reach the package index (connection broken by"),
        ("ERROR: Could not find a version that satisfies the requirement numpy==1.26.4 (from versions: none)\n"
         "ERROR: No matching distribution found for numpy==1.26.4",
         "no index offered any version (No matching distribution found for numpy==1.26.4 (from versions: none))"),
        ("ERROR: Could not find a version that satisfies the requirement pillow==12.0.0 (from versions: 11.3.0)\n"
         "ERROR: No matching distribution found for pillow==12.0.0", None),
    ],
)  # fmt: skip
def test_what_pip_says_about_its_index(output, expected):
    problem = index_problem(output)
    assert problem == expected if expected is None else problem.startswith(expected), problem


def test_symlinks_are_materialised(tmp_path):
    """pb_env.cc refuses entries through symlinks (ARCHIVE_EXTRACT_SECURE_SYMLINKS), and an absolute link names a
    file of the packing machine: links are stored as the files they point to. venv's `lib64 -> lib` alias is
    left out (sys.platlibdir 'lib' never reads it), so site-packages is not stored twice."""
    env = tmp_path / "env"
    (env / "lib" / "pkg").mkdir(parents=True)
    (env / "lib" / "pkg" / "data.txt").write_text("data")
    (env / "bin").mkdir()
    os.symlink("../lib/pkg/data.txt", env / "bin" / "link.txt")
    os.symlink("lib", env / "lib64")
    os.symlink("lib/pkg", env / "pkgdir")
    entries = {entry.arcname: entry for entry in environment_entries(env)}
    assert "lib64" not in entries
    assert not entries["bin/link.txt"].is_dir and entries["bin/link.txt"].size == 4
    assert entries["pkgdir"].is_dir and entries["pkgdir/data.txt"].size == 4
    with_lib64 = {entry.arcname for entry in environment_entries(env, platlibdir="lib64")}
    assert "lib64/pkg/data.txt" in with_lib64


@pytest.mark.triton
def test_packaged_ensemble_runs_on_triton_with_its_packed_environment(tmp_path, wheels, target_python):
    """End to end on the real CPU Triton: `model_build config` adds EXECUTION_ENV_PATH, `package --model
    <ensemble> --environment-python` packs pre's environment into the archive (not into its folder); the
    pre-processing step imports `onlyenv`, which only that environment provides (not the Triton venv)."""
    from endpoint_client.local_endpoint import LocalEndpoint

    assert subprocess.run([target_python, "-c", "import onlyenv"], capture_output=True).returncode != 0
    stage = write_pipeline(tmp_path, requirements=REQUIREMENTS)
    repo = pipeline_repository(tmp_path)
    for model in ("pre", "pipe"):
        assert cli.main(["config", "--config", str(stage), "--model", model, "--repository", str(repo)]) == 0
    argv = ["package", str(repo), "--model", "pipe", "--out", str(tmp_path / "out")]
    argv += ["--environment-python", target_python, "--environment-cache", str(tmp_path / "cache")]
    argv += ["--find-links", str(wheels)]
    assert cli.main(argv) == 0
    assert not (repo / "pre" / "python_env.tar.gz").exists()
    archive = tmp_path / "out" / "model.tar.gz"
    with tarfile.open(archive) as tar:
        assert "pre/python_env.tar.gz" in tar.getnames()
    endpoint = LocalEndpoint(
        archive,
        environment={"SAGEMAKER_TRITON_DEFAULT_MODEL_NAME": "pipe", "SAGEMAKER_TRITON_LOG_VERBOSE": "false"},
        triton_env=TRITON_ENV,
        workdir=tmp_path / "work",
        startup_timeout=120,
    )
    try:
        endpoint.start()
        body = {"inputs": [{"name": "image", "shape": [1], "datatype": "BYTES", "data": ["abcd"]}]}
        request = urllib.request.Request(
            endpoint.url + "/invocations", json.dumps(body).encode(), {"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=60) as response:
            reply = json.loads(response.read())
    except Exception:
        print(endpoint.log_tail(60))
        raise
    finally:
        endpoint.stop()
    (output,) = reply["outputs"]
    # pre: [len(b"abcd"), len("from-packed-env"), 1] -> cnn (identity) -> post joins them.
    assert output["name"] == "labels" and output["data"] == ["4,15,1"]


EMBED = """\
#include <Python.h>
/* As pybind11's scoped_interpreter starts the stub's interpreter (include/pybind11/embed.h:
   PyConfig_InitPythonConfig, no argv, no program name), then what a model's first lines need. */
int main(void) {
  PyConfig config;
  PyConfig_InitPythonConfig(&config);
  config.parse_argv = 0;
  PyStatus status = Py_InitializeFromConfig(&config);
  PyConfig_Clear(&config);
  if (PyStatus_Exception(status)) return 2;
  int rc = PyRun_SimpleString("import sys, numpy, onlyenv; print(sys.prefix, onlyenv.MARK)");
  Py_Finalize();
  return rc;
}
"""


def test_the_environment_works_without_its_activate_script(packed, tmp_path, target_python):
    """From 25.09 the stub launcher no longer runs bin/activate: it sets VIRTUAL_ENV=<env>,
    PATH=<env>/bin:$PATH and LD_LIBRARY_PATH=<env>/lib:... and execs the stub (python_backend
    src/stub_launcher.cc, src/pb_utils.cc ParseActivationScript). An interpreter embedded the way the stub
    embeds it then finds <env>/bin/python3 on PATH and, through pyvenv.cfg, the environment's packages."""
    import shutil

    if shutil.which("gcc") is None:
        pytest.skip("no C compiler to build the embedding stand-in")
    ask = "import sysconfig as s; v = s.get_config_var; print(s.get_paths()['include'], v('LIBDIR'), v('LDVERSION'))"
    facts = subprocess.run([target_python, "-c", ask], capture_output=True, text=True, check=True).stdout.split()
    include, libdir, version = facts
    (tmp_path / "stub.c").write_text(EMBED)
    built = subprocess.run(
        ["gcc", str(tmp_path / "stub.c"), "-o", str(tmp_path / "stub"), f"-I{include}", f"-L{libdir}",
         f"-lpython{version}", f"-Wl,-rpath,{libdir}"],
        capture_output=True, text=True,
    )  # fmt: skip
    if built.returncode != 0:
        pytest.skip(f"cannot build against libpython{version}: {built.stderr[-300:]}")
    env = tmp_path / "unpacked"
    env.mkdir()
    with tarfile.open(packed) as tar:
        tar.extractall(env, filter="tar")
    launched = {"PATH": f"{env}/bin:/usr/bin:/bin", "VIRTUAL_ENV": str(env), "LD_LIBRARY_PATH": f"{env}/lib"}
    result = subprocess.run([str(tmp_path / "stub")], capture_output=True, text=True, env=launched)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == [str(env), "from-packed-env"]
    without = subprocess.run([str(tmp_path / "stub")], capture_output=True, text=True, env={"PATH": "/usr/bin:/bin"})
    assert without.returncode != 0 and "No module named" in without.stderr
