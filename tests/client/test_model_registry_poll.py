"""Multi-model loads through Triton's polled repository (issue 22 C1), without a server: a stub plays the
repository index (`POST /v2/repository/index`: state and reason per model folder) and `/ready`.

What the real CPU Triton showed: the index lists the repository's folders with their *former* state until
the next poll reaches them (a folder renamed back in after an unload read UNLOADING, then LOADING, READY),
so a former failure's reason must not be taken for the new load's.
"""

from __future__ import annotations

import json
import shutil
import tarfile
from pathlib import Path

import pytest

from endpoint_client.errors import LocalEndpointError
from endpoint_client.front import SageMakerAPI
from endpoint_client.local_endpoint import LocalEndpoint
from endpoint_client.model_registry import ModelRegistry

REPO_ROOT = Path(__file__).resolve().parents[2]
JSON = {"content-type": "application/json"}


class ScriptedTriton:
    """model_state answers from `states` in turn (the last one repeats); READY is also /ready."""

    def __init__(self, states: list[tuple[str, str] | None]) -> None:
        self.states = list(states)
        self.asked = 0

    def model_state(self, model: str, *, timeout: float = 10.0) -> tuple[str, str] | None:
        self.asked += 1
        return self.states.pop(0) if len(self.states) > 1 else self.states[0]

    def model_ready(self, model: str, *, timeout: float = 10.0) -> bool:
        return bool(self.states) and self.states[0] is not None and self.states[0][0] == "READY"

    def healthy(self, mode: str, *, timeout: float = 5.0) -> bool:
        return True


def staged(tmp_path: Path) -> Path:
    folder = tmp_path / "mme" / "m" / "model" / "add_sub"
    shutil.copytree(REPO_ROOT / "examples" / "models" / "add_sub", folder)
    return folder.parent


def load(registry: ModelRegistry, url: Path) -> tuple[int, str]:
    api = SageMakerAPI(registry.triton, ping_mode="live", default_model=None, registry=registry)
    reply = api.handle("POST", "/models", JSON, json.dumps({"model_name": "m.tar.gz", "url": str(url)}).encode())
    return reply.status, json.loads(reply.body)["error"] if reply.body else ""


def registry_for(tmp_path: Path, triton: ScriptedTriton) -> ModelRegistry:
    registry = ModelRegistry(triton, repository=tmp_path / "repo", staging=tmp_path / "mme")
    registry.repository.mkdir()
    return registry


def test_a_failed_load_answers_tritons_reason_and_leaves_nothing_in_the_repository(tmp_path: Path) -> None:
    triton = ScriptedTriton([None, ("LOADING", ""), ("UNAVAILABLE", "boom: model.py raised")])
    registry = registry_for(tmp_path, triton)

    assert load(registry, staged(tmp_path)) == (400, "boom: model.py raised")
    assert list(registry.repository.iterdir()) == [] and registry.listing() == []


def test_out_of_memory_is_507(tmp_path: Path) -> None:
    registry = registry_for(tmp_path, ScriptedTriton([("UNAVAILABLE", "CUDA out of memory")]))

    assert load(registry, staged(tmp_path))[0] == 507


def test_the_former_failure_is_not_the_new_loads(tmp_path: Path) -> None:
    """A fixed archive loaded again under the same name: the index still reads the old reason until the
    poll reaches the new folder."""
    old = ("UNAVAILABLE", "boom: model.py raised")
    registry = registry_for(tmp_path, ScriptedTriton([old]))
    url = staged(tmp_path)
    assert load(registry, url) == (400, "boom: model.py raised")

    registry.triton = ScriptedTriton([old, old, ("LOADING", ""), ("READY", "")])

    assert load(registry, url) == (200, "")
    assert [m.name for m in registry.listing()] == ["m.tar.gz"]
    assert (registry.repository / "m.tar.gz" / "1" / "__pycache__").is_file()  # no bytecode written there


def test_the_same_failure_again_is_reported_once_triton_moved_on(tmp_path: Path) -> None:
    old = ("UNAVAILABLE", "boom: model.py raised")
    registry = registry_for(tmp_path, ScriptedTriton([old]))
    url = staged(tmp_path)
    load(registry, url)
    registry.triton = ScriptedTriton([old, ("LOADING", ""), old])

    assert load(registry, url) == (400, "boom: model.py raised")


@pytest.mark.parametrize("states", [[("UNAVAILABLE", "unloaded"), ("READY", "")], [None, ("READY", "")]])
def test_an_unloaded_record_or_no_record_yet_means_wait(tmp_path: Path, states: list) -> None:
    registry = registry_for(tmp_path, ScriptedTriton(states))

    assert load(registry, staged(tmp_path)) == (200, "")


@pytest.mark.triton
def test_on_real_triton_a_failed_load_then_a_fixed_archive_under_the_same_name(
    triton_env: Path, add_sub_archive: Path, tmp_path: Path
) -> None:
    broken = tmp_path / "broken" / "add_sub"
    (broken / "1").mkdir(parents=True)
    (broken / "config.pbtxt").write_text((REPO_ROOT / "examples/models/add_sub/config.pbtxt").read_text())
    (broken / "1" / "model.py").write_text("raise RuntimeError('this model cannot initialise')\n")
    archive = tmp_path / "broken.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(broken, arcname="add_sub")

    with LocalEndpoint(
        multi_model=True,
        environment={"SAGEMAKER_TRITON_LOG_VERBOSE": "false"},
        triton_env=triton_env,
        workdir=tmp_path / "work",
        startup_timeout=60,
    ) as endpoint:
        with pytest.raises(LocalEndpointError, match=r"HTTP 400: .*this model cannot initialise"):
            endpoint.load_model("m.tar.gz", archive)
        endpoint.load_model("m.tar.gz", add_sub_archive)

        assert endpoint.list_models() == ["m.tar.gz"]
