"""Packing a python model's environment (`package --environment-python/--environment-cache`): the interpreter,
the cache folder and its damaged entries, the bytes pip installs, and SIGTERM while pip or the archive writer runs."""

from __future__ import annotations

import shutil
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cli_runner import assert_one_error, run_cli
from ensemble_fixtures import write_pipeline
from synth_helpers import PROJECT_ROOT

from model_build import cli
from model_build.check.environment import (
    archive_problems,
)
from model_build.errors import MissingToolError, ModelBuildError
from model_build.execution_env import parameter_block
from model_build.package import EnvironmentOptions, package_repository
from model_build.python_env import cache_key, interpreter, packed_environment


def fake_python(folder: Path, pip: str) -> Path:
    """An interpreter stand-in: the real Python for everything but `-m pip`, which runs the shell `pip` given
    ($1... are pip's arguments; MARKS is a folder for what it records)."""
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "python"
    script.write_text(
        "#!/bin/bash\n"
        f'MARKS="{folder}"\n'
        'if [ "$1" = "-m" ] && [ "$2" = "pip" ]; then\n'
        "  shift 2\n"
        f"{pip}\n"
        "  exit $?\n"
        "fi\n"
        f'exec "{sys.executable}" "$@"\n'
    )
    script.chmod(0o755)
    return script


def python_env_repository(tmp_path: Path) -> Path:
    """REPO/pre: a python model whose EXECUTION_ENV_PATH names the environment `package` packs."""
    write_pipeline(tmp_path)
    repo = tmp_path / "repo"
    shutil.copytree(tmp_path / "models" / "pre", repo / "pre")
    config = repo / "pre" / "config.pbtxt"
    config.write_text(config.read_text() + parameter_block("$$TRITON_MODEL_DIRECTORY/python_env.tar.gz"))
    (repo / "pre" / "requirements.txt").write_text("numpy==1.26.4\n")
    return repo


def test_the_fake_interpreter_is_a_real_python_to_the_packer(tmp_path):
    python = fake_python(tmp_path / "py", "  exit 0")
    assert interpreter(str(python)).facts == interpreter(sys.executable).facts
    assert stat.S_IMODE(python.stat().st_mode) & 0o100


def test_pip_installs_the_bytes_that_were_checked(tmp_path):
    """The file was read twice (the check, then the bytes for pip): changed in between, pip got unchecked pins.
    Here the interpreter, asked about itself after the check, rewrites the file; pip still gets the checked bytes."""
    requirements = tmp_path / "requirements.txt"
    checked = b"numpy==1.26.4\n"
    requirements.write_bytes(checked)
    marks = tmp_path / "py"
    python = fake_python(
        marks,
        'for a in "$@"; do if [ "$prev" = "-r" ]; then cp "$a" "$MARKS/seen.txt"; fi; prev="$a"; done\n'
        "  echo 'ERROR: stop here' >&2; exit 1",
    )
    # The facts query (`-I -c ...`) comes after the check: make it change the file first.
    text = python.read_text().replace(
        f'exec "{sys.executable}"', f'echo "evil==6.6.6" >> "{requirements}"\nexec "{sys.executable}"'
    )
    python.write_text(text)
    with pytest.raises(ModelBuildError, match="pip install"):
        packed_environment(requirements, str(python), cache_dir=tmp_path / "cache")
    assert requirements.read_bytes() != checked  # the file did change meanwhile
    assert (marks / "seen.txt").read_bytes() == checked


def test_an_interpreter_that_is_not_python_is_a_clear_error():
    with pytest.raises(MissingToolError, match=r"/bin/echo: did not answer as a Python 3 interpreter"):
        interpreter("/bin/echo")


def test_an_interpreter_that_is_not_python_is_one_error_line_of_package(tmp_path):
    repo = python_env_repository(tmp_path)
    result = run_cli("package", str(repo), "--out", str(tmp_path / "out"), "--environment-python", "/bin/echo",
                     "--environment-cache", str(tmp_path / "cache"))  # fmt: skip
    assert_one_error(result, "did not answer as a Python 3 interpreter")
    assert len(result.stderr.splitlines()) == 1


def test_a_cache_inside_the_repository_is_refused(tmp_path):
    repo = python_env_repository(tmp_path)
    options = EnvironmentOptions(python=sys.executable, cache_dir=repo / "pre" / "cache")
    with pytest.raises(ModelBuildError, match="lies inside the repository being packaged"):
        package_repository(repo, tmp_path / "out", environments=options)
    assert not (repo / "pre" / "cache").exists() and not (tmp_path / "out").exists()


@pytest.mark.parametrize("damage", ["empty", "garbage", "symlink", "folder"])
def test_a_damaged_cache_entry_is_named_discarded_and_rebuilt(tmp_path, capsys, damage):
    requirements = tmp_path / "requirements.txt"
    requirements.write_text("numpy==1.26.4\n")
    python = fake_python(tmp_path / "py", "  exit 0")  # pip installs nothing: a valid (empty) environment
    cache = tmp_path / "cache"
    cache.mkdir()
    entry = cache / f"{cache_key(requirements.read_bytes(), interpreter(str(python)))}.tar.gz"
    victim = tmp_path / "victim.tar.gz"
    victim.write_bytes(b"do not touch")
    if damage == "empty":
        entry.write_bytes(b"")
    elif damage == "garbage":
        entry.write_bytes(b"\x1f\x8bnot really gzip")
    elif damage == "symlink":
        entry.symlink_to(victim)
    else:
        entry.mkdir()
    archive = packed_environment(requirements, str(python), cache_dir=cache)
    assert archive == entry and entry.is_file() and not entry.is_symlink()
    assert archive_problems(entry, entry.name) == []
    note = capsys.readouterr().err
    assert f"note: {entry}: damaged cache entry" in note and "discarded, packing it again" in note
    assert victim.read_bytes() == b"do not touch"
    assert packed_environment(requirements, str(python), cache_dir=cache) == entry  # now used as it is
    assert capsys.readouterr().err == ""


# --- SIGTERM during package ------------------------------------------------------------------------------------


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError, ProcessLookupError):
        return False
    return state != "Z"


def wait_for(predicate, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.01)


def start_package(repo: Path, out: Path, python: Path, cache: Path) -> subprocess.Popen:
    """`package` in a process of its own, not cli.main in this one (tests/model_build/cli_runner.py): the tests
    send it SIGTERM/SIGSTOP, which would stop pytest itself, and check that pip's process group ends with it."""
    argv = [sys.executable, "-m", "model_build", "package", str(repo), "--out", str(out),
            "--environment-python", str(python), "--environment-cache", str(cache)]  # fmt: skip
    return subprocess.Popen(argv, cwd=PROJECT_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_sigterm_during_pip_ends_pip_and_leaves_nothing(tmp_path):
    """SIGTERM used to end the CLI on the spot: pip (and what pip started) kept running, the `python-env-*` work
    folder stayed in the cache. Now it is handled like Ctrl-C: pip's process group is killed and every `finally`
    runs. pip here sleeps in a child of its own, as pip's `--python` re-execution does."""
    repo = python_env_repository(tmp_path)
    marks = tmp_path / "py"
    python = fake_python(marks, '  echo $$ > "$MARKS/pip.pid"\n  sleep 600 &\n  echo $! > "$MARKS/child.pid"\n  wait')
    cache, out = tmp_path / "cache", tmp_path / "out"
    process = start_package(repo, out, python, cache)
    try:
        wait_for(lambda: (marks / "child.pid").is_file() and (marks / "child.pid").read_text().strip())
        pip, child = (int((marks / name).read_text()) for name in ("pip.pid", "child.pid"))
        assert list(cache.glob("python-env-*"))  # the work folder exists while pip runs
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 128 + signal.SIGTERM, stderr
    assert stderr.startswith("ERROR: terminated (SIGTERM)") and "Traceback" not in stderr, stderr
    wait_for(lambda: not alive(pip) and not alive(child), 10)
    assert list(cache.iterdir()) == []
    assert not out.exists() or list(out.iterdir()) == []


def test_sigterm_while_an_archive_is_written_removes_the_temporary_file(tmp_path):
    """The environment archive (and the package) are written to `.<name>.<random>.tmp` beside the target
    (model_build.atomic): interrupted, the temporary file is removed, the target never appears.

    The packer is stopped (SIGSTOP) as soon as the temporary file appears and signalled only while the file is
    still there, so a loaded machine cannot let the write finish first; if it did anyway, the run is repeated."""
    for attempt in range(3):
        work = tmp_path / str(attempt)
        repo = python_env_repository(work)
        # pip "installs" 192 MiB of random bytes (stored, not deflated): writing the archive takes a while.
        # Its arguments: --python <env>/bin/python install|check ...
        python = fake_python(
            work / "py",
            '  env="$(dirname "$(dirname "$2")")"\n'
            '  if [ "$3" = install ]; then head -c 201326592 /dev/urandom > "$env/lib/big.bin"; fi\n'
            "  exit 0",
        )
        cache, out = work / "cache", work / "out"
        process = start_package(repo, out, python, cache)
        try:
            wait_for(lambda: list(cache.glob(".*.tar.gz.*.tmp")), 120)  # noqa: B023 (called in this iteration)
            process.send_signal(signal.SIGSTOP)
            mid_write = bool(list(cache.glob(".*.tar.gz.*.tmp")))
            process.send_signal(signal.SIGTERM)
            process.send_signal(signal.SIGCONT)
            _, stderr = process.communicate(timeout=60)
        finally:
            if process.poll() is None:
                process.kill()
        if mid_write:
            break
    assert mid_write, "the archive was written before the signal in every attempt"
    assert process.returncode == 128 + signal.SIGTERM, stderr
    assert "Traceback" not in stderr, stderr
    assert list(cache.iterdir()) == []  # no temporary archive, no work folder, no half entry
    assert not out.exists() or list(out.iterdir()) == []


def test_the_handler_is_the_cli_s_only_while_a_command_runs():
    before = signal.getsignal(signal.SIGTERM)
    assert cli.main(["check", str(PROJECT_ROOT / "examples" / "models"), "--configs-only"]) == 0
    assert signal.getsignal(signal.SIGTERM) == before
