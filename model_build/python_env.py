"""Pack a Python-backend model's execution environment: locked requirements -> `python_env.tar.gz`.

The one code path that packs environments: `model_build package --environment-python PY` (locally and
in the CodeBuild build, where PY is the serving image's own python3) calls `packed_environment`.

What the python backend needs (triton-inference-server/python_backend):
- README, "Creating Custom Execution Environments": `EXECUTION_ENV_PATH` names a tar archive (or a
  folder) of an environment whose Python version is the stub's; NVIDIA documents conda-pack for it.
- `src/pb_env.cc`: the archive is unpacked with libarchive (gzip filter); newer releases refuse `..`,
  absolute paths and paths through symlinks (ARCHIVE_EXTRACT_SECURE_*), r24.09 passes ARCHIVE_EXTRACT_TIME
  only. Our archives hold none of those either way, and modes (bin/python3's execute bit) come from them.
- `src/stub_launcher.cc`: the environment must hold `bin/activate`. Up to 25.08 the launcher runs
  `bash -c "source <env>/bin/activate && exec env LD_LIBRARY_PATH=<env>/lib:$LD_LIBRARY_PATH <stub> ..."`;
  from 25.09 it no longer runs the script but sets VIRTUAL_ENV=<env>, PATH=<env>/bin:$PATH and
  LD_LIBRARY_PATH=<env>/lib:... itself (`ParseActivationScript`, src/pb_utils.cc). Either way the stub's
  embedded interpreter finds `python3` first on PATH in `<env>/bin`, and from the `pyvenv.cfg` beside
  it (or a conda prefix) its site-packages.
- `src/resources/triton_python_backend_utils.py` imports numpy inside that interpreter: the environment
  must hold numpy (model_build.requirements_lock refuses a file without it).

Why not conda-pack: conda is not available here nor in the serving image, and the requirements are pip
pins. The closest faithful mechanism: a virtual environment created *by the target interpreter itself*
(`PY -m venv --copies --without-pip`, so the interpreter, ABI, glibc and platform are the stub's when PY
is the serving image's python3), filled by `PY -m pip --python <env>/bin/python install --no-deps
--only-binary=:all: --no-compile -r requirements` (the locked file is the whole dependency set; wheels
only, so nothing is compiled in the image) and verified with `pip check`. What conda-pack does to make
an environment relocatable is done here by hand:
- `bin/activate` is replaced by a script that derives the environment's place from its own path
  (`${BASH_SOURCE[0]}`), so it works wherever pb_env.cc unpacks the archive (venv's own script holds
  the absolute path of the folder it was created in);
- console scripts start with a `#!/bin/sh` trampoline that runs `python` from their own folder (pip
  writes the absolute interpreter path of the build folder), the other shells' activate scripts are
  dropped, and `pyvenv.cfg` keeps only `home`, `version` and `include-system-site-packages`;
- symlinks are materialised (their target's bytes are stored under the link's name), except venv's
  `lib64 -> lib` folder alias when the interpreter's `sys.platlibdir` is `lib` (nothing reads it, and
  copying it would store site-packages twice).
The venv keeps pointing at its base interpreter (`pyvenv.cfg` `home`): the environment runs with the
interpreter that packed it, i.e. only inside the image that packed it, which is the serving image in
the build. A conda-pack archive (`environment: {archive: ...}`) remains the way to ship an interpreter.

Deterministic: entries sorted, fixed mtime and owner (model_build.archive), no `__pycache__`, no
paths of the build machine inside. Cached: `<cache>/<sha256>.tar.gz` where the digest covers the
requirements bytes and the interpreter's version, implementation, platform, ABI and glibc, so the same
pins on the same interpreter are packed once.

The wheels come from pip's index (PyPI unless pip's configuration says otherwise) or `--find-links` folders.
An index pip cannot reach ends in `IndexUnreachableError`, naming the requirements file, pip's reason and
the offline way (`--find-links DIR --no-index`), not in pip's whole output.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from model_build.archive import atomic_write_archive
from model_build.errors import InvalidModelError, MissingToolError, ModelBuildError
from model_build.model_tree import SKIPPED_DIRS, Entry
from model_build.requirements_lock import read_locked_file

# Bump when the packing changes what lands in the archive: it is part of the cache key.
PACKER_VERSION = 2
DEFAULT_CACHE = Path("build") / "python-envs"
# pip installs of a few hundred MB take minutes; a hung index must not hold the build for its 8 h.
PIP_TIMEOUT_S = 1_800
DROPPED_SCRIPTS = frozenset({"activate.csh", "activate.fish", "Activate.ps1", "activate.nu", "activate.bat"})
MAX_ENTRIES = 200_000

_FACTS = (
    "import json, platform, sys, sysconfig; print(json.dumps({"
    "'version': platform.python_version(), 'implementation': sys.implementation.name, "
    "'platform': sysconfig.get_platform(), 'soabi': sysconfig.get_config_var('SOABI'), "
    "'libc': list(platform.libc_ver()), 'platlibdir': getattr(sys, 'platlibdir', 'lib'), "
    "'maxsize': sys.maxsize}))"
)

# bash, sourced (python_backend up to 25.08) or only present (25.09+, which sets the same variables itself).
ACTIVATE_SCRIPT = """\
# Relocatable activate script written by model_build.python_env: the environment is wherever this file is.
# Sourced by the python backend's stub launcher (python_backend src/stub_launcher.cc) before the stub starts.
_model_build_env="$(cd "$(dirname "${BASH_SOURCE[0]:-$0}")/.." && pwd)"
export VIRTUAL_ENV="$_model_build_env"
export PATH="$VIRTUAL_ENV/bin:$PATH"
unset PYTHONHOME
unset _model_build_env
deactivate () { :; }
"""

# distlib's trick for scripts whose interpreter path is not fixed: sh runs the line, Python sees a string.
TRAMPOLINE = '#!/bin/sh\n\'\'\'exec\' "$(dirname -- "$(readlink -f -- "$0")")/python" "$0" "$@"\n\' \'\'\'\n'


@dataclass(frozen=True)
class Interpreter:
    """The Python that creates (and later runs) the environment."""

    command: str
    facts: dict

    @property
    def version(self) -> str:
        return self.facts["version"]


_FACT_KEYS = ("version", "implementation", "platform", "soabi", "libc", "platlibdir", "maxsize")


def interpreter(python: str) -> Interpreter:
    """Ask `python` about itself; refuse one that cannot run or does not answer as a Python 3 interpreter."""
    try:
        result = subprocess.run([python, "-I", "-c", _FACTS], capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired, ValueError) as error:
        raise MissingToolError(
            f"--environment-python {python}: cannot run it ({error}); give a Python 3 interpreter"
        ) from None
    if result.returncode != 0:
        raise MissingToolError(f"--environment-python {python}: failed ({result.stderr.strip()[-500:]})")
    try:
        facts = json.loads(result.stdout)
    except ValueError:
        facts = None
    if not isinstance(facts, dict) or any(key not in facts for key in _FACT_KEYS):
        said = " ".join(result.stdout.split())[:200]
        raise MissingToolError(
            f"--environment-python {python}: did not answer as a Python 3 interpreter (asked for its version and "
            f"platform as JSON, it printed {said!r}); give a Python 3 interpreter, in the build the serving image's "
            "python3"
        )
    return Interpreter(python, facts)


def refuse_cache_inside(cache_dir: Path, repository: Path) -> None:
    """The environment cache must not lie inside the repository being packaged: its archives (and the work
    folders of a pack in progress) would be taken for model files and shipped, or for a model folder."""
    cache, repo = Path(cache_dir).resolve(), Path(repository).resolve()
    if cache == repo or cache.is_relative_to(repo):
        raise ModelBuildError(
            f"--environment-cache {cache_dir}: lies inside the repository being packaged ({repository}), whose "
            "folders are shipped; give a cache folder outside it (default: build/python-envs of the current folder)"
        )


def _cache_entry_problem(archive: Path) -> str | None:
    """Why a cache entry cannot be used as it is (None: it can): not a regular file, or not a whole environment
    archive (a truncated or emptied file, a file some other tool put there)."""
    from model_build.check.environment import archive_problems

    try:
        info = os.lstat(archive)
    except OSError as error:
        return f"cannot be read ({error.strerror or error})"
    if not stat.S_ISREG(info.st_mode):
        return "is not a regular file"
    problems = archive_problems(archive, archive.name)
    return problems[0] if problems else None


def _discard(archive: Path) -> None:
    if archive.is_dir() and not archive.is_symlink():
        shutil.rmtree(archive)
    else:
        archive.unlink(missing_ok=True)


def cache_key(requirements: bytes, python: Interpreter) -> str:
    """sha256 of the requirements bytes, the interpreter's facts and the packer's version."""
    facts = json.dumps({"packer": PACKER_VERSION, **python.facts}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(requirements + b"\0" + facts.encode()).hexdigest()


def packed_environment(
    requirements: Path,
    python: str,
    *,
    cache_dir: Path = DEFAULT_CACHE,
    find_links: Sequence[Path] = (),
    no_index: bool = False,
    shown: str | None = None,
) -> Path:
    """The `python_env.tar.gz` for `requirements` created with `python`, from the cache or packed now.

    `find_links` / `no_index`: where pip looks for wheels (pip's own options), e.g. a local folder of
    wheels for an offline build. They do not change what is installed (the pins do), so they are not
    part of the cache key. `shown`: how messages name the requirements file (default: its path).
    """
    requirements = Path(requirements)
    shown = shown or str(requirements)
    # Read once: the bytes checked are the bytes hashed into the cache key and the bytes pip installs from (its
    # private copy below), whatever happens to the file meanwhile.
    data, _ = read_locked_file(requirements, shown=shown)
    target = interpreter(python)
    archive = Path(cache_dir) / f"{cache_key(data, target)}.tar.gz"
    if os.path.lexists(archive):
        problem = _cache_entry_problem(archive)
        if problem is None:
            return archive
        print(f"note: {archive}: damaged cache entry ({problem}); discarded, packing it again", file=sys.stderr)
        try:
            _discard(archive)
        except OSError as error:
            raise ModelBuildError(
                f"{archive}: damaged cache entry ({problem}) that cannot be removed ({error.strerror or error}); "
                "remove it by hand"
            ) from None
    archive.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="python-env-", dir=archive.parent) as work:
        env = Path(work) / "env"
        locked = Path(work) / "requirements.txt"
        locked.write_bytes(data)
        _create(target, env, locked, find_links, no_index, shown=shown)
        _make_relocatable(env)
        entries = environment_entries(env, platlibdir=target.facts.get("platlibdir", "lib"))
        atomic_write_archive(entries, archive, None)
    return archive


# What pip prints when it cannot reach an index (urllib3 / requests errors, pip's own "Could not fetch URL").
_UNREACHABLE = re.compile(
    r"NewConnectionError|Failed to establish a new connection|Temporary failure in name resolution|"
    r"Name or service not known|ConnectTimeoutError|ProxyError|SSLError|Could not fetch URL|Network is unreachable"
)
_RETRY_PREFIX = re.compile(r"^WARNING: Retrying \(Retry\([^)]*\)\) after ")
# pip's verdict on a pin it found no file for at all, e.g. because no index answered.
_NOT_FOUND = re.compile(r"No matching distribution found for \S+")
_NO_VERSION_AT_ALL = "(from versions: none)"
_WHERE_WHEELS_COME_FROM = (
    "Packing downloads wheels from the index: PyPI, or the index-url of pip's configuration or PIP_INDEX_URL; "
    "offline, give a folder holding every wheel of the file with --find-links DIR --no-index"
)


class IndexUnreachableError(MissingToolError):
    """pip could not reach the package index to download an environment's wheels."""


def index_problem(output: str) -> str | None:
    """What pip's output says about reaching the index (None: it failed for another reason)."""
    verdict = _NOT_FOUND.search(output)
    said = f"; pip: {verdict.group(0)}" if verdict else ""
    for line in output.splitlines():
        if _UNREACHABLE.search(line):
            reason = _RETRY_PREFIX.sub("", " ".join(line.split()))[:400]
            return f"pip could not reach the package index ({reason}{said})"
    if verdict and _NO_VERSION_AT_ALL in output:
        return (
            f"no index offered any version ({verdict.group(0)} {_NO_VERSION_AT_ALL}): the index could not be "
            "reached, or has no package of that name"
        )
    return None


def _kill_group(process: subprocess.Popen) -> None:
    """End `process` and everything it started (pip runs pip again under the target interpreter, which runs
    build helpers): they share the process group `_run` gave them. Then reap the leader."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


def _run(argv: list[str], doing: str, requirements: str | None = None) -> None:
    """Run one step of the packing in its own process group (start_new_session), so that an interruption
    (Ctrl-C, SIGTERM: model_build.cli turns both into exceptions) or the timeout ends the whole tree, never
    leaving a pip behind writing into a work folder that is being removed."""
    environment = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    # python_backend README: export PYTHONNOUSERSITE so nothing from the user's site leaks into the pack.
    environment.update(PYTHONNOUSERSITE="1", PYTHONDONTWRITEBYTECODE="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
    try:
        process = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=environment,
            start_new_session=True,
        )
    except (OSError, ValueError) as error:
        raise ModelBuildError(f"{doing} failed: {error}") from None
    try:
        stdout, stderr = process.communicate(timeout=PIP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        _kill_group(process)
        raise ModelBuildError(f"{doing} failed: no result within {PIP_TIMEOUT_S} s; stopped it") from None
    except BaseException:
        _kill_group(process)
        raise
    result = subprocess.CompletedProcess(argv, process.returncode, stdout, stderr)
    if result.returncode != 0:
        output = (result.stdout + result.stderr).strip()
        problem = index_problem(output) if requirements is not None else None
        if problem is not None:
            raise IndexUnreachableError(
                f"{requirements}: cannot download the wheels this environment is packed from: {problem}. "
                f"{_WHERE_WHEELS_COME_FROM}"
            )
        raise ModelBuildError(f"{doing} failed (exit {result.returncode}):\n{output[-2000:]}")


def _create(
    python: Interpreter, env: Path, requirements: Path, find_links: Sequence[Path], no_index: bool, *, shown: str
) -> None:
    """`shown`: the requirements file as the user named it (`requirements` is its copy in the work folder)."""
    _run([python.command, "-m", "venv", "--copies", "--without-pip", str(env)], f"{python.command} -m venv")
    pip = [python.command, "-m", "pip", "--python", str(env / "bin" / "python")]
    options = ["--no-index"] if no_index else []
    for folder in find_links:
        options += ["--find-links", str(folder)]
    install = [
        *pip,
        "install",
        "--no-deps",
        "--only-binary=:all:",
        "--no-compile",
        "--no-input",
        "--no-warn-script-location",
        *options,
        "-r",
        str(requirements),
    ]
    _run(install, f"pip install -r {shown} (needs pip >= 22.3 for --python)", requirements=shown)
    # --no-deps installs exactly the pins; pip check then finds a dependency the file forgot.
    _run([*pip, "check"], "pip check (a requirement's dependency is missing from the locked file?)")


def _make_relocatable(env: Path) -> None:
    """Remove every absolute path of the build folder from the environment (see the module docstring)."""
    bin_dir = env / "bin"
    for name in DROPPED_SCRIPTS:
        (bin_dir / name).unlink(missing_ok=True)
    activate = bin_dir / "activate"
    activate.write_text(ACTIVATE_SCRIPT)
    activate.chmod(0o644)
    prefix = str(env).encode()
    rewritten: set[Path] = set()
    for script in sorted(bin_dir.iterdir()):
        if script.is_symlink() or not script.is_file() or script.name == "activate":
            continue
        with script.open("rb") as file:
            head = file.read(2)
            if head != b"#!":
                continue
            first = b"#!" + file.readline()
            rest = file.read()
        if prefix in first:
            script.write_bytes(TRAMPOLINE.encode() + rest)
            rewritten.add(script.resolve())
    _update_records(env, rewritten)
    config = env / "pyvenv.cfg"
    kept = [
        line
        for line in config.read_text().splitlines()
        if line.split("=", 1)[0].strip() in ("home", "version", "version_info", "include-system-site-packages")
    ]
    config.write_text("\n".join(sorted(kept)) + "\n")
    leftover = [path for path in _files(env) if prefix in path.read_bytes()]
    if leftover:
        shown = ", ".join(str(path.relative_to(env)) for path in leftover[:5])
        raise ModelBuildError(
            f"the packed environment still names its build folder in {shown}; it would break once unpacked "
            "elsewhere. Report this with the requirements file"
        )


def _update_records(env: Path, rewritten: set[Path]) -> None:
    """Installed-files records (PEP 376/627 RECORD: path,sha256=<urlsafe b64>,size) of the rewritten scripts
    get their new hash and size, so the archive does not carry the build folder's script digests."""
    if not rewritten:
        return
    for record in sorted(env.glob("lib/*/site-packages/*.dist-info/RECORD")):
        site_packages = record.parent.parent
        lines = record.read_text(encoding="utf-8").splitlines()
        changed = False
        for index, line in enumerate(lines):
            path, _, rest = line.partition(",")
            if not rest:
                continue
            target = (site_packages / path).resolve()
            if target in rewritten:
                data = target.read_bytes()
                digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
                lines[index] = f"{path},sha256={digest},{len(data)}"
                changed = True
        if changed:
            record.write_text("\n".join(lines) + "\n", encoding="utf-8")


def _files(env: Path) -> list[Path]:
    return [
        Path(root, name)
        for root, folders, names in os.walk(env)
        for name in names
        if not Path(root, name).is_symlink() and not SKIPPED_DIRS.intersection(Path(root).parts)
    ]


def environment_entries(env: Path, *, platlibdir: str = "lib") -> list[Entry]:
    """Archive entries of the folder `env` at the archive root, sorted, links materialised."""
    entries: list[Entry] = []
    _walk(env.resolve(), env, "", entries, platlibdir, depth=0)
    return entries


def _walk(root: Path, folder: Path, prefix: str, entries: list[Entry], platlibdir: str, depth: int) -> None:
    if depth > 64:
        raise InvalidModelError(f"{folder}: folders nest more than 64 deep (a symlink loop?)")
    with os.scandir(folder) as listing:
        children = sorted(listing, key=lambda item: item.name)
    for child in children:
        arcname = f"{prefix}{child.name}"
        path = Path(child.path)
        info = os.lstat(path)
        if stat.S_ISLNK(info.st_mode):
            resolved = path.resolve()
            if child.name == "lib64" and depth == 0 and platlibdir == "lib" and resolved == (root / "lib"):
                continue  # venv's alias of lib/ (venv.EnvBuilder.ensure_directories); nothing reads it
            if not resolved.exists():
                raise InvalidModelError(f"{path}: symbolic link to {os.readlink(path)}, which does not exist")
            info = os.stat(resolved)
            path = resolved
        if stat.S_ISDIR(info.st_mode):
            if child.name in SKIPPED_DIRS:
                continue
            entries.append(Entry(arcname, path, True, 0o755, 0, info.st_dev, info.st_ino))
            _walk(root, path, arcname + "/", entries, platlibdir, depth + 1)
        elif stat.S_ISREG(info.st_mode):
            if child.name.endswith((".pyc", ".pyo")):
                continue
            mode = 0o755 if info.st_mode & 0o111 else 0o644
            entries.append(Entry(arcname, path, False, mode, info.st_size, info.st_dev, info.st_ino))
        else:
            raise InvalidModelError(f"{path}: not a regular file or folder; cannot be packed")
        if len(entries) > MAX_ENTRIES:
            raise InvalidModelError(f"{folder}: more than {MAX_ENTRIES} files; too large an environment to pack")
