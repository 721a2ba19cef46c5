"""The SageMaker multi-model API's model loading, done through Triton's repository API on loopback.

What the SageMaker platform does on an MME instance (triton-inference-server/server
`src/sagemaker_server.cc`, `SageMakerMMELoadModel`): POST /models {"model_name", "url"} where `url` is
the folder it extracted the TargetModel's archive into; Triton picks the archive's model folder (the
only one, or the ensemble among several), serves it under the TargetModel's name, and loads it; DELETE
/models/<name> unloads it with its dependents.

Locally Triton polls the served repository (`--model-control-mode=poll`, triton_backend.py: no model can
be loaded through Triton's ports, issue 22 C1). The chosen folder is copied to a private folder beside the
repository as `<name>/` (its config's name set to <name>), the archive's other folders (an ensemble's
steps) beside it under their own names; then each is moved into the repository in one rename, the steps
first and `<name>` last, and the front waits until the repository index says `<name>` is READY (or
UNAVAILABLE, with Triton's reason). Triton's docs (`docs/user_guide/model_management.md`, "Model Control
Mode POLL") warn that polling "could observe partial and incomplete changes": a rename makes a complete
folder appear at once. Unloading renames the folders out of the repository and waits until Triton has
unloaded the model. The repository and the staging folders are the endpoint's own (mode 0700): no other
user can put a model there. Unlike Triton's
`--model-namespacing`, two loaded archives cannot both hold a step of the same name: the second load
is refused with 409.

Refused (issue 12: a remote `url` loaded any folder and ran its model.py): a name that is not a plain
file name, a `url` that does not resolve (links included) to a folder under the staging folder where
the local endpoint extracts archives, an archive with several model folders and no ensemble, and a load
beyond MAX_LOADED_MODELS (507, review finding 10).
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2

from endpoint_client.limits import MAX_LOADED_MODELS, MME_LOAD_TIMEOUT_SECONDS, MME_UNLOAD_TIMEOUT_SECONDS
from endpoint_client.request_check import RequestRefused
from endpoint_client.triton_backend import REPOSITORY_POLL_SECONDS, TritonHTTP

# A TargetModel is an S3 key relative to the endpoint's prefix (sagemaker-runtime TargetModelHeader:
# 1..1024 printable characters); locally it names a folder and a Triton model, so plain names only.
MODEL_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,254}")
_ENSEMBLE = re.compile(r"platform:\s*\"ensemble\"")  # Triton's own test (platform_ensemble_regex_)
# Triton's SageMaker service answers a failed load with 507 when the error reads like this (its list).
_OUT_OF_MEMORY = ("out of memory", "Out of memory", "Out Of Memory", "OutOfMemory", "MemoryError", "OOM")
_POLL_WAIT_SECONDS = 0.2  # between looks at the repository index while Triton polls (every second)
_STALE_STATE_SECONDS = 3 * REPOSITORY_POLL_SECONDS + 1.0  # by then Triton's poll has reached a new folder


@dataclass(frozen=True)
class LoadedModel:
    name: str
    url: str
    folders: tuple[str, ...]  # what the load put into the served repository


class ModelRegistry:
    def __init__(self, triton: TritonHTTP, *, repository: Path, staging: Path, incoming: Path | None = None) -> None:
        """`incoming`: where loads are assembled before their rename into `repository` (same file system);
        default: `<repository>-incoming` beside it."""
        self.triton = triton
        self.repository = repository
        self.staging = staging
        self.incoming = incoming if incoming is not None else repository.with_name(f"{repository.name}-incoming")
        self.models: dict[str, LoadedModel] = {}
        self._failures: dict[str, str] = {}  # name -> Triton's reason for its last failed load
        self._lock = threading.Lock()  # one load or unload at a time

    def get(self, name: str) -> LoadedModel | None:
        return self.models.get(name)

    def listing(self) -> list[LoadedModel]:
        return sorted(self.models.values(), key=lambda model: model.name)

    def load(self, name: object, url: object) -> LoadedModel:
        if not isinstance(name, str) or not MODEL_NAME.fullmatch(name):
            raise RequestRefused(
                400,
                f"model_name {str(name)[:100]!r} must be 1-255 letters, digits, '.', '_' or '-' (e.g. add_sub.tar.gz)",
            )
        folder = self._staged_folder(url)
        with self._lock:
            if name in self.models:
                raise RequestRefused(409, f"model {name!r} is already loaded; unload it first (DELETE /models/{name})")
            if len(self.models) >= MAX_LOADED_MODELS:  # 507: what SageMaker's MME answers when it cannot load more
                raise RequestRefused(
                    507, f"{len(self.models)} models are loaded, the local endpoint's most; unload one first"
                )
            primary, steps = _model_folders(folder)
            _check_name_is_free_in_archive(name, primary, steps)
            targets = [(primary, name), *((step, step.name) for step in steps)]
            taken = [target for _, target in targets if (self.repository / target).exists()]
            if taken:
                raise RequestRefused(
                    409, f"model folder(s) {', '.join(taken)} of {name!r} are already served by another loaded model"
                )
            self.incoming.mkdir(mode=0o700, parents=True, exist_ok=True)
            batch = Path(tempfile.mkdtemp(dir=self.incoming))  # mode 0700
            moved: list[str] = []
            try:
                for source, target in targets:  # none is there yet (checked above) and no two are alike
                    shutil.copytree(source, batch / target)
                _rename_config(batch / name, name)
                for _, target in targets:
                    _block_bytecode(batch / target)
                for _, target in [*targets[1:], targets[0]]:  # the steps first: the ensemble finds them
                    os.rename(batch / target, self.repository / target)  # appears whole to Triton's poll
                    moved.append(target)
                self._wait_until_loaded(name)
            except BaseException:
                self._take_out(moved)
                raise
            finally:
                shutil.rmtree(batch, ignore_errors=True)
            model = LoadedModel(name, str(folder), tuple(target for _, target in targets))
            self.models[name] = model
            return model

    def unload(self, name: str) -> None:
        with self._lock:
            model = self.models.get(name)
            if model is None:
                raise RequestRefused(404, f"model {name!r} is not loaded")
            self._take_out(list(model.folders))  # Triton unloads what left the repository at its next poll
            deadline = time.monotonic() + MME_UNLOAD_TIMEOUT_SECONDS
            while self.triton.model_ready(name) and time.monotonic() < deadline:
                time.sleep(_POLL_WAIT_SECONDS)
            del self.models[name]

    def _wait_until_loaded(self, name: str) -> None:
        """Until the repository index says READY; UNAVAILABLE with a reason (but 'unloaded', a former load's
        record) is the load's failure, answered like Triton's SageMaker service (507 for out of memory).

        The index shows a folder's former state until Triton's next poll reaches it, so the reason of this
        name's previous failed load counts only once Triton has moved on (another state seen) or after a few
        polls: otherwise a fixed archive loaded again under the same name got the old failure at once."""
        started = time.monotonic()
        deadline = started + MME_LOAD_TIMEOUT_SECONDS
        previous_failure = self._failures.get(name)
        moved_on = False
        while time.monotonic() < deadline:
            found = self.triton.model_state(name)
            state, reason = found if found is not None else ("", "")
            if state == "READY" and self.triton.model_ready(name):
                self._failures.pop(name, None)
                return
            if state == "UNAVAILABLE" and reason and reason != "unloaded":
                stale = reason == previous_failure and not moved_on
                if not stale or time.monotonic() - started > _STALE_STATE_SECONDS:
                    self._failures[name] = reason
                    raise RequestRefused(507 if any(s in reason for s in _OUT_OF_MEMORY) else 400, reason)
            elif state not in ("", "UNAVAILABLE"):
                moved_on = True
            time.sleep(_POLL_WAIT_SECONDS)
        raise RequestRefused(
            504, f"model {name!r} was not loaded within {MME_LOAD_TIMEOUT_SECONDS:.0f} s; Triton's log says why"
        )

    def _take_out(self, targets: list[str]) -> None:
        """Rename each folder out of the repository at once, then delete it."""
        if not targets:
            return
        self.incoming.mkdir(mode=0o700, parents=True, exist_ok=True)
        trash = Path(tempfile.mkdtemp(dir=self.incoming, prefix="unloaded-"))
        for target in targets:
            try:
                os.rename(self.repository / target, trash / target)
            except FileNotFoundError:
                continue
        shutil.rmtree(trash, ignore_errors=True)

    def _staged_folder(self, url: object) -> Path:
        staging = Path(os.path.realpath(self.staging))
        refusal = f"url must be a folder under {staging}, where the local endpoint extracts model archives"
        if not isinstance(url, str) or not url or "\x00" in url or not os.path.isabs(url):
            raise RequestRefused(400, f"{refusal}; got {str(url)[:200]!r}")
        folder = Path(os.path.realpath(url))  # links resolved: a link out of the staging folder is refused
        if folder == staging or not folder.is_relative_to(staging) or not folder.is_dir():
            raise RequestRefused(400, f"{refusal}; got {url[:200]!r}")
        return folder


def _block_bytecode(folder: Path) -> None:
    """An empty *file* named __pycache__ beside every .py file of `folder` (an existing __pycache__ folder,
    a cache, replaced), so that importing model.py writes nothing into the model's folder: Python skips
    bytecode it cannot write (importlib's SourceFileLoader.set_data ignores the OSError). Triton's POLL
    mode reloads a model when any file or folder time in its folder grows (core model_repository_manager.cc
    `ModelTimestamp`: max of st_mtime and st_ctime), so the stub's 1/__pycache__ made Triton reload every model
    a second after loading it, and an unload during that reload left the model served for minutes.
    (PYTHONDONTWRITEBYTECODE does not reach it: the stub's embedded Python ignores the environment.)"""
    for directory in [folder, *(p for p in folder.rglob("*") if p.is_dir() and not p.is_symlink())]:
        if directory.name == "__pycache__" or not any(directory.glob("*.py")):
            continue
        cache = directory / "__pycache__"
        if cache.is_dir() and not cache.is_symlink():
            shutil.rmtree(cache)
        if not cache.exists() and not cache.is_symlink():
            cache.touch()


def _model_folders(folder: Path) -> tuple[Path, list[Path]]:
    """(the folder to serve under the TargetModel's name, the other model folders), as Triton chooses."""
    if (folder / "config.pbtxt").is_file():  # the archive is one model's folder
        return folder, []
    folders = sorted(p for p in folder.iterdir() if p.is_dir() and not p.is_symlink())
    if not folders:
        raise RequestRefused(400, f"{folder} holds no model folder")
    if len(folders) == 1:
        return folders[0], []
    ensembles = [p for p in folders if _is_ensemble(p)]
    if len(ensembles) != 1:
        names = ", ".join(p.name for p in folders)
        raise RequestRefused(400, f"{folder} holds several model folders ({names}) and not exactly one ensemble")
    return ensembles[0], [p for p in folders if p != ensembles[0]]


def _check_name_is_free_in_archive(name: str, primary: Path, steps: list[Path]) -> None:
    """Refuses (409) a TargetModel named like one of the archive's other model folders or one of its
    ensemble's steps: the ensemble served under a step's name would take that step's folder (the copy
    failed with FileExistsError and the connection dropped, review M7) and run itself as a step."""
    clashes = sorted({step.name for step in steps} | set(_ensemble_step_names(primary)))
    if name in clashes:
        raise RequestRefused(
            409,
            f"model_name {name!r} is also the name of a step of the archive's ensemble {primary.name!r} (its "
            f"steps: {', '.join(clashes)}, served under their own names beside it); the ensemble cannot be "
            f"served under a step's name: load the archive under another name (e.g. {primary.name}.tar.gz)",
        )


def _ensemble_step_names(folder: Path) -> list[str]:
    """The models an ensemble folder's config runs ([] for any other model or an unreadable config)."""
    if not _is_ensemble(folder):
        return []
    config = model_config_pb2.ModelConfig()
    try:
        text_format.Parse((folder / "config.pbtxt").read_text(), config)
    except (OSError, text_format.ParseError, UnicodeDecodeError):
        return []  # _rename_config refuses it with the parser's message
    return [step.model_name for step in config.ensemble_scheduling.step]


def _is_ensemble(folder: Path) -> bool:
    try:
        return bool(_ENSEMBLE.search((folder / "config.pbtxt").read_text(errors="replace")))
    except OSError:
        return False


def _rename_config(folder: Path, name: str) -> None:
    """Triton requires a config's name to equal its folder's (or be empty): set it to the served name."""
    config_path = folder / "config.pbtxt"
    if not config_path.is_file():
        return  # Triton fills the name in from the folder
    config = model_config_pb2.ModelConfig()
    try:
        text_format.Parse(config_path.read_text(), config)
    except (text_format.ParseError, UnicodeDecodeError) as error:
        raise RequestRefused(400, f"{config_path.name} of {name!r} cannot be read: {error}") from None
    config.name = name
    config_path.write_text(text_format.MessageToString(config))
