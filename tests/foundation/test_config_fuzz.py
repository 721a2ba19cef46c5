"""A seeded, bounded config fuzzer: mutations of the shipped configs through the loader app.py uses.

Issue #12 measured 365 mutated configs: 16 ended in a traceback or ran over 90 s and 8 invalid ones
were accepted. Here every mutation of config/dev.yaml, config/prod.yaml and config/pipeline.yaml
must end in the loader's ConfigError or a valid config, within a few seconds; and every mutation
that is invalid by construction (a wrong type, a number out of every range, an unknown key, a bad
name, a duplicate key, a source outside the project...) must be refused. The seed is fixed, so a
failure names its mutation and reproduces.
"""

from __future__ import annotations

import copy
import random
import re
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from synth_helpers import shipped_path

from stage_config import ConfigError, load_config
from stage_config.pipeline import load_pipeline

ROOT = Path(__file__).resolve().parents[2]
SEED = 20261124
MUTATIONS_PER_STAGE = 120
PIPELINE_MUTATIONS = 60
SECONDS_PER_LOAD = 3.0

# Fields whose values are free-form maps: an added key there is data, not an unknown key.
FREE_FORM = ("extra_environment", "endpoint_max_latency_ms")


@dataclass
class Mutation:
    name: str
    text: str
    invalid: bool  # invalid by construction: the loader must refuse it


def _leaves(node, path=()) -> list[tuple[tuple, object]]:
    if isinstance(node, dict):
        return [leaf for key, value in node.items() for leaf in _leaves(value, (*path, key))]
    if isinstance(node, list):
        return [leaf for index, value in enumerate(node) for leaf in _leaves(value, (*path, index))]
    return [(path, node)]


def _mappings(node, path=()) -> list[tuple]:
    found = []
    if isinstance(node, dict):
        if not any(part in FREE_FORM for part in path):
            found.append(path)
        for key, value in node.items():
            found += _mappings(value, (*path, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            found += _mappings(value, (*path, index))
    return found


def _set(document: dict, path: tuple, value) -> dict:
    document = copy.deepcopy(document)
    node = document
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = value
    return document


def _dump(document: dict) -> str:
    return yaml.safe_dump(document, sort_keys=False, allow_unicode=True)


def _shown(path: tuple) -> str:
    return ".".join(map(str, path))


# --- mutations invalid by construction ------------------------------------------------------------


def wrong_type(rng: random.Random, document: dict, text: str) -> Mutation:
    path, value = rng.choice(_leaves(document))
    if isinstance(value, bool):
        choices = [1, "yes", [True], {"on": True}]
    elif isinstance(value, int | float):
        choices = [True, False, "5", [1], {"n": 1}, "1e3"]
    else:
        choices = [12345, True, 1.5, ["x"], {"k": "v"}]
    new = rng.choice(choices)
    return Mutation(f"wrong type: {_shown(path)} = {new!r}", _dump(_set(document, path, new)), True)


def out_of_range(rng: random.Random, document: dict, text: str) -> Mutation:
    numbers = [(p, v) for p, v in _leaves(document) if isinstance(v, int | float) and not isinstance(v, bool)]
    path, _ = rng.choice(numbers)
    new = rng.choice([-1, -(10**9), 10**12, 10**66, 1.0e300])
    return Mutation(f"out of range: {_shown(path)} = {new!r}", _dump(_set(document, path, new)), True)


def unknown_key(rng: random.Random, document: dict, text: str) -> Mutation:
    path = rng.choice(_mappings(document))
    key = rng.choice(["zz_typo", "tritonrelease", "max_capacty", "Models", "extra"])
    node = copy.deepcopy(document)
    target = node
    for part in path:
        target = target[part]
    if key in target:
        key += "_x"
    target[key] = rng.choice([1, "x", True, {}])
    return Mutation(f"unknown key: {_shown((*path, key))}", _dump(node), True)


def bad_name(rng: random.Random, document: dict, text: str) -> Mutation:
    names = [p for p, v in _leaves(document) if p and p[-1] in ("name", "stage", "variant_name") and isinstance(v, str)]
    path = rng.choice(names)
    invalid = ["bad name!", "-leading-dash", "", "naïve", "a/b", "A" * 300, " x"]
    if path == ("name",):
        invalid.remove("-leading-dash")  # CodePipeline's pipeline names allow it ([A-Za-z0-9.@_-]+)
    if path[0] == "models":
        invalid += ["model", "x" * 64]  # reserved by Triton's repository layout; longer than a model name may be
    new = rng.choice(invalid)
    return Mutation(f"bad name: {_shown(path)} = {new!r}", _dump(_set(document, path, new)), True)


def bad_literal(rng: random.Random, document: dict, text: str) -> Mutation:
    literals = [
        p
        for p, v in _leaves(document)
        if p and p[-1] in ("mode", "platform", "strategy", "traffic", "precision", "kind", "triton_release", "export")
    ]
    if not literals:
        return bad_name(rng, document, text)
    path = rng.choice(literals)
    new = rng.choice(["triple_model", "TENSORRT", "24.10", "resnet", "KIND_TPU", " canary"])
    return Mutation(f"bad literal: {_shown(path)} = {new!r}", _dump(_set(document, path, new)), True)


def duplicate_key(rng: random.Random, document: dict, text: str) -> Mutation:
    lines = text.splitlines()
    keyed = [i for i, line in enumerate(lines) if re.match(r"^\s*[a-z_]+:", line) and not line.lstrip().startswith("#")]
    index = rng.choice(keyed)
    lines.insert(index + 1, lines[index].split(":", 1)[0] + ": " + rng.choice(["1", "x", "true", "{}"]))
    return Mutation(f"duplicate key: line {index + 1} {lines[index].strip()!r}", "\n".join(lines) + "\n", True)


def hostile_source(rng: random.Random, document: dict, text: str) -> Mutation:
    if "models" not in document:
        return wrong_type(rng, document, text)
    index = rng.randrange(len(document["models"]))
    path = rng.choice(["/etc/passwd", "/root", "../../etc/shadow", "missing/model.onnx", ".", "/dev/zero"])
    node = _set(document, ("models", index, "source"), {"path": path})
    return Mutation(f"hostile source: models[{index}].source.path = {path!r}", _dump(node), True)


def _scalar_lines(text: str) -> list[int]:
    lines = text.splitlines()
    return [i for i, line in enumerate(lines) if re.match(r"^\s*[a-z_]+: [^\s{\[#&*|>]", line)]


def alias_bomb(rng: random.Random, document: dict, text: str) -> Mutation:
    """The review's 2.7 KB "billion laughs", aimed at a real field so its value is echoed."""
    width = rng.choice([8, 9, 10])
    bomb = ['z0: &z0 ["lol"]'] + [f"z{i}: &z{i} [{', '.join([f'*z{i - 1}'] * width)}]" for i in range(1, 10)]
    lines = text.splitlines()
    index = rng.choice(_scalar_lines(text))
    lines[index] = lines[index].split(":", 1)[0] + ": *z9"
    return Mutation(f"alias bomb (width {width}) at line {index + 1}", "\n".join(bomb + lines) + "\n", True)


def deep_nesting(rng: random.Random, document: dict, text: str) -> Mutation:
    depth = rng.choice([100, 2_000, 20_000])
    lines = text.splitlines()
    index = rng.choice(_scalar_lines(text))
    lines[index] = lines[index].split(":", 1)[0] + ": " + "[" * depth + "]" * depth
    return Mutation(f"nesting {depth} deep at line {index + 1}", "\n".join(lines) + "\n", True)


INVALID: list[Callable[[random.Random, dict, str], Mutation]] = [
    wrong_type,
    out_of_range,
    unknown_key,
    bad_name,
    bad_literal,
    duplicate_key,
    hostile_source,
    alias_bomb,
    deep_nesting,
]

# --- mutations of unknown validity: only "ConfigError or a config, quickly" ---------------------


def delete_key(rng: random.Random, document: dict, text: str) -> Mutation:
    path = rng.choice([p for p in _mappings(document) if p] or [()])
    node = copy.deepcopy(document)
    target = node
    for part in path:
        target = target[part]
    if target:
        del target[rng.choice(list(target))]
    return Mutation(f"delete a key under {_shown(path)}", _dump(node), False)


def truncate(rng: random.Random, document: dict, text: str) -> Mutation:
    cut = rng.randrange(len(text))
    return Mutation(f"truncate at {cut}", text[:cut], False)


def flip_bytes(rng: random.Random, document: dict, text: str) -> Mutation:
    chars = list(text)
    for _ in range(rng.randint(1, 5)):
        chars[rng.randrange(len(chars))] = rng.choice(["\t", "[", "{", "&a", "*a", ":", "!", "%", "\x00", "'", "\n- "])
    return Mutation("flip characters", "".join(chars), False)


def swap_values(rng: random.Random, document: dict, text: str) -> Mutation:
    leaves = _leaves(document)
    (first, a), (second, b) = rng.sample(leaves, 2)
    node = _set(_set(document, first, b), second, a)
    return Mutation(f"swap {_shown(first)} and {_shown(second)}", _dump(node), False)


UNKNOWN = [delete_key, truncate, flip_bytes, swap_values]


def _mutations(text: str, count: int, rng: random.Random) -> list[Mutation]:
    document = yaml.safe_load(text)
    kinds = INVALID * 2 + UNKNOWN  # two of every invalid kind for each unknown one
    return [rng.choice(kinds)(rng, document, text) for _ in range(count)]


def _check(mutation: Mutation, load: Callable[[], object]) -> str | None:
    """None when the loader behaved; otherwise what went wrong."""
    # This process's CPU time, not the wall clock: other work on a shared machine must not fail the bound.
    started = time.process_time()
    try:
        load()
        outcome = "accepted"
    except ConfigError as error:
        outcome = "refused"
        if len(str(error)) > 50_000:
            return f"{mutation.name}: error message of {len(str(error))} characters"
    except Exception as error:  # any other exception is the finding
        return f"{mutation.name}: {type(error).__name__}: {str(error)[:300]}"
    elapsed = time.process_time() - started
    if elapsed > SECONDS_PER_LOAD:
        return f"{mutation.name}: took {elapsed:.1f} s"
    if mutation.invalid and outcome == "accepted":
        return f"{mutation.name}: invalid config accepted"
    return None


@pytest.mark.parametrize("stage", ["dev", "prod"])
def test_mutated_stage_configs_are_refused_cleanly(stage: str, tmp_path: Path) -> None:
    rng = random.Random(f"{SEED}-{stage}")
    text = shipped_path(f"config/{stage}.yaml").read_text()
    path = tmp_path / f"{stage}.yaml"
    findings = []
    counts = {"invalid": 0, "unknown": 0}
    for mutation in _mutations(text, MUTATIONS_PER_STAGE, rng):
        path.write_text(mutation.text)
        counts["invalid" if mutation.invalid else "unknown"] += 1
        finding = _check(mutation, lambda: load_config(path))
        if finding:
            findings.append(finding)
    assert counts["invalid"] >= MUTATIONS_PER_STAGE // 2
    assert not findings, "\n".join(findings)


def test_mutated_pipeline_configs_are_refused_cleanly(tmp_path: Path) -> None:
    rng = random.Random(f"{SEED}-pipeline")
    for stage in ("dev", "prod"):
        shutil.copy(shipped_path(f"config/{stage}.yaml"), tmp_path / f"{stage}.yaml")
    text = shipped_path("config/pipeline.yaml").read_text()
    path = tmp_path / "pipeline.yaml"
    findings = []
    for mutation in _mutations(text, PIPELINE_MUTATIONS, rng):
        path.write_text(mutation.text)
        finding = _check(mutation, lambda: load_pipeline(path, tmp_path))
        if finding:
            findings.append(finding)
    assert not findings, "\n".join(findings)


def test_the_unmutated_configs_load() -> None:
    """The fuzzer's baseline: the shipped files themselves are valid."""
    assert load_config(shipped_path("config/dev.yaml")).stage == "dev"
    assert load_pipeline(shipped_path("config/pipeline.yaml"))[0].stages
