"""Property-based tests of the config loader (hypothesis): generated mutations of every shipped config.

Seeds: every config/*.yaml as shipped (tests/shipped_config/: the derandomized examples and the corpus do not
change with what a user puts in config/, which `test_every_shipped_config_is_a_seed_and_loads` loads too),
examples/config/*.yaml and tests/configs/*.yaml (config/pipeline.yaml through the pipeline loader, with the stage
files beside it). A mutation is a short list of edits of the parsed file (set a
value to a hostile one, delete a key, add one, copy a name with its case or separators changed, put raw YAML in
a value's place: tags, impossible dates, escapes); the oracle for each mutated file is

- a clean refusal: the loader's ConfigError, every line `<file>: <field or what>: ...`, bounded, in seconds; or
- an accepted config that the app's next steps accept: the stage plan (stacks/stage_plan.py), each endpoint's
  container environment, and for a promoting stage its source stage and the promotion check (a
  PromotionError is a clean refusal too: app.py prints it as an invalid configuration).

Anything else (a traceback) is a finding. Findings are kept in config_mutation_corpus.yaml and replayed by
`test_corpus_mutations_stay_fixed` on every run. Runs are derandomized (the same examples every run, so
`make test` never fails by chance); set CONFIG_FUZZ_RANDOM=1 to explore new ones, and CONFIG_FUZZ_EXAMPLES to
change how many per seed file.
"""

from __future__ import annotations

import copy
import json
import os
import re
import shutil
import time
from pathlib import Path

import pytest
import yaml
from aws_cdk import aws_s3 as s3
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from synth_helpers import CONFIG_DIR, SHIPPED_CONFIG_DIR, shipped_path

from stacks.container_environment import container_environment
from stacks.promotion import PromotionError, check_promotion
from stacks.stage_plan import plan_stage
from stage_config import AppConfig, ConfigError, load_config
from stage_config.api_limits import service_model  # botocore's model, loaded once per process
from stage_config.endpoint import component_name
from stage_config.loader import PROJECT_ROOT
from stage_config.pipeline import load_pipeline

ROOT = Path(__file__).resolve().parents[2]
SEED_FILES = sorted(
    [f"config/{path.name}" for path in SHIPPED_CONFIG_DIR.glob("*.yaml")]
    + [
        str(path.relative_to(ROOT))
        for pattern in ("examples/config/*.yaml", "tests/configs/*.yaml")
        for path in ROOT.glob(pattern)
    ]
)
CORPUS = Path(__file__).with_name("config_mutation_corpus.yaml")
EXAMPLES = int(os.environ.get("CONFIG_FUZZ_EXAMPLES", "30"))
RANDOM = os.environ.get("CONFIG_FUZZ_RANDOM") == "1"
# A mutated config that makes the loader or planner spin (a pathological pattern, a YAML expansion) is a finding.
# Judged on this process's CPU time, not the wall clock: on a loaded machine (2 xdist workers, Triton tests beside
# them) an ensemble seed's ordinary load took 6.5 s of wall time and failed the old 5 s wall bound. Its usual CPU
# cost is ~1 s; 30 s only catches what is really stuck (speed targets live in bench/, not in tests).
CPU_SECONDS_PER_LOAD = 30.0
MAX_MESSAGE_CHARS = 60_000
RAW = "__raw_yaml_{}__"

# Raw YAML put in a value's place: what yaml.safe_dump never writes but a person (or an attacker) can.
RAW_SNIPPETS = [
    "2024-02-30",
    "2026-13-01",
    "2024-01-01T25:00:00",
    "!!int abc",
    "!!int ''",
    "!!float x",
    "!!bool maybe",
    "!!null x",
    "!!timestamp soon",
    "!!binary aGVsbG8=",
    "!!set {a, b}",
    "!!omap [{a: 1}]",
    "!!pairs [{a: 1}]",
    "!!str",
    "!custom x",
    "0x_",
    "0b",
    "1_000",
    "0o777",
    ".inf",
    "-.inf",
    ".nan",
    "1e400",
    "~",
    "''",
    '"\\0"',
    '"a\\0b"',
    '"\\ud800"',
    '"x\\udfffy"',
    '"\\t"',
    '"\\u2028"',
    '"\\x7f"',
    '"line\\n"',
    "[]",
    "{}",
    "[[[[]]]]",
    "*undefined",
    "&a [*a]",
    "'" + "x" * 2000 + "'",
]

HOSTILE_STRINGS = [
    "",
    " ",
    "\n",
    "a\nb",
    "x" * 300,
    "\u0661\u0662\u0663",
    "123456789012\n",
    "../../etc/passwd",
    "/etc/passwd",
    "/dev/zero",
    ".",
    "xn--bucket",
    "bucket-s3alias",
    "192.168.0.1",
    "a..b",
    "a-.b",
    "cron(0 18 * * MON *)",
    "cron(0 18 ? * MON *)",
    "rate(0 minutes)",
    "rate(1 hour)",
    "at(2026-02-30T00:00:00)",
    "subnet-0123456789abcdef0",
    "sg-01234567",
    "bad id",
    "SAGEMAKER_MULTI_MODEL",
    "SAGEMAKER_TRITON_DEFAULT_MODEL_NAME",
    "ml.g5.xlarge",
    "ml.c5.xlarge",
    "ml.p3.2xlarge",
    "ml.unknown.xlarge",
    "24.09",
    "25.04",
    "dev",
    "prod",
    "HEAD",
    "-main",
    "main\t",
    "KIND_CPU",
    "KIND_GPU",
    "TYPE_FP32",
    "tensorrt_plan",
    "onnxruntime_onnx",
    "python",
    "ensemble",
    "multi_model",
    "single_model",
    "inference_components",
    "rolling",
    "canary",
    "Europe/Berlin",
    "Mars/Olympus",
]
SCALARS = st.one_of(
    st.sampled_from(HOSTILE_STRINGS),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([0, 1, 2, 3, 8, 63, 64, 100, 101, 1000, 1001, 1024, 3600, 86400, 10**9]),
    st.floats(allow_nan=False, allow_infinity=False),
    st.booleans(),
    st.none(),
    st.text(max_size=12),
)
VALUES = st.one_of(
    SCALARS,
    st.lists(SCALARS, max_size=4),
    st.dictionaries(st.sampled_from(["name", "x", "enabled", "count", "zz_typo"]), SCALARS, max_size=3),
)
KEYS = st.sampled_from(
    [
        "zz_typo",
        "name",
        "models",
        "promote_from",
        "extra_environment",
        "scheduled",
        "vpc",
        "container",
        "inference_components",
        "components",
        "raw_inputs",
        "regions",
        "account",
        "region",
        "fleet",
        "bucket_name",
        "reader_accounts",
        "data_capture",
        "extra_variants",
        "warmup",
        "ensemble",
        "environment",
    ]
)


NAMES = st.sampled_from(["A", "OMP_NUM_THREADS", "_x", "1BAD", "MY-VAR", "SAGEMAKER_MULTI_MODEL", "x" * 1100])
# Settings grafted where the schema expects them (with hostile leaves): random edits alone rarely reach the
# rules behind a valid structure (container variables, VPC ids, schedules, bucket names, promotion, samples).
GRAFTS: dict[str, st.SearchStrategy] = {
    "container": st.fixed_dictionaries(
        {"extra_environment": st.dictionaries(NAMES, st.sampled_from(["1", "", "x" * 1100, *HOSTILE_STRINGS]))},
        optional={
            "thread_count": st.sampled_from([1, 0, 1024, 1025]),
            "additional_args": st.sampled_from(["", "é" * 600]),
        },
    ),
    "vpc": st.fixed_dictionaries(
        {
            "subnet_ids": st.lists(st.sampled_from(["subnet-0123456789abcdef0", "subnet-01234567", *HOSTILE_STRINGS])),
            "security_group_ids": st.lists(st.sampled_from(["sg-01234567", "sg-0123456789abcdef0", "sg-x"])),
        }
    ),
    "scheduled": st.lists(
        st.fixed_dictionaries(
            {
                "name": st.sampled_from(["night", "day", "n" * 300, "bad name"]),
                "schedule": st.sampled_from(HOSTILE_STRINGS),
            },
            optional={"min_capacity": st.sampled_from([1, 2, 0]), "max_capacity": st.sampled_from([1, 2, 5])},
        ),
        max_size=3,
    ),
    "bucket_name": st.sampled_from(
        ["xn--a-b", "a.b.c", "amzn-s3-demo-x", "bucket--x-s3", "192.168.0.1", *HOSTILE_STRINGS]
    ),
    "promote_from": st.sampled_from(["dev", "prod", "staging", "components", "ensemble", "reference", "ensemblemme"]),
    "raw_inputs": st.dictionaries(
        st.sampled_from(["resnet50", "image_classifier", "bert_base", "nope"]),
        st.dictionaries(
            st.sampled_from(["image", "input", "x"]), st.sampled_from(["config", "README.md", *HOSTILE_STRINGS])
        ),
        max_size=2,
    ),
    "branch": st.sampled_from(["main", "feat/x", "a..b", "HEAD", "-x", "x.lock", "é", *HOSTILE_STRINGS]),
}


def graft_paths(document: object) -> list[tuple[tuple, str]]:
    """(path, graft) pairs this document has a place for."""
    found: list[tuple[tuple, str]] = []
    if not isinstance(document, dict):
        return found
    for index, endpoint in enumerate(document.get("endpoints") or []):
        if isinstance(endpoint, dict):
            found += [(("endpoints", index, "container"), "container"), (("endpoints", index, "vpc"), "vpc")]
            if isinstance(endpoint.get("autoscaling"), dict):
                found.append((("endpoints", index, "autoscaling", "scheduled"), "scheduled"))
    if "models" in document:
        found += [(("artifacts", "bucket_name"), "bucket_name"), (("promote_from",), "promote_from")]
    if isinstance(document.get("smoke"), dict):
        found.append((("smoke", "raw_inputs"), "raw_inputs"))
    if isinstance(document.get("source"), dict):
        found.append((("source", "branch"), "branch"))
    return [(path, graft) for path, graft in found if _parent_exists(document, path)]


def _parent_exists(document: object, path: tuple) -> bool:
    try:
        return isinstance(_at(document, list(path[:-1])), dict)
    except (KeyError, IndexError, TypeError):
        return False


# --- edits -------------------------------------------------------------------------------------------------------


def leaves(node: object, path: tuple = ()) -> list[tuple]:
    if isinstance(node, dict):
        return [p for key, value in node.items() for p in leaves(value, (*path, key))] or [path]
    if isinstance(node, list):
        return [p for index, value in enumerate(node) for p in leaves(value, (*path, index))] or [path]
    return [path]


def containers(node: object, path: tuple = ()) -> list[tuple]:
    found = [path] if isinstance(node, dict | list) else []
    if isinstance(node, dict):
        found += [p for key, value in node.items() for p in containers(value, (*path, key))]
    elif isinstance(node, list):
        found += [p for index, value in enumerate(node) for p in containers(value, (*path, index))]
    return found


def strings(node: object) -> list[str]:
    if isinstance(node, dict):
        return [s for value in node.values() for s in strings(value)]
    if isinstance(node, list):
        return [s for value in node for s in strings(value)]
    return [node] if isinstance(node, str) else []


def _at(document: object, path: list) -> object:
    for part in path:
        document = document[part]
    return document


def edited(text: str, edits: list[dict]) -> tuple[object, list[str]]:
    """The parsed file with `edits` applied; a raw edit leaves a placeholder string (returned with its YAML)."""
    document = yaml.safe_load(text)
    raws: list[str] = []
    for edit in edits:
        path = list(edit["path"])
        if edit["op"] == "raw":
            raws.append(edit["yaml"])
            value: object = RAW.format(len(raws) - 1)
        else:
            value = copy.deepcopy(edit.get("value"))
        parent = _at(document, path[:-1])
        if edit["op"] == "delete":
            del parent[path[-1]]
        elif edit["op"] == "append":
            parent[path[-1]].append(value)
        else:
            parent[path[-1]] = value
    return document, raws


def apply(text: str, edits: list[dict]) -> str:
    """The mutated file's text: each edit applied to the parsed data, raw YAML written in last."""
    document, raws = edited(text, edits)
    dumped = yaml.safe_dump(document, sort_keys=False, allow_unicode=True, width=10_000)
    for index, snippet in enumerate(raws):
        dumped = dumped.replace(RAW.format(index), snippet)
    return dumped


@st.composite
def edit_lists(draw: st.DrawFn, text: str) -> list[dict]:
    """One to three edits, each drawn on the file as the previous ones left it."""
    edits: list[dict] = []
    for _ in range(draw(st.integers(min_value=1, max_value=3))):
        document, _ = edited(text, edits)
        paths = [p for p in leaves(document) if p]
        kind = draw(st.sampled_from(["set", "set", "raw", "delete", "add", "rename", "append", "graft", "graft"]))
        places = graft_paths(document)
        if kind == "graft" and places:
            path, graft = draw(st.sampled_from(places))
            edit = {"op": "set", "path": list(path), "value": draw(GRAFTS[graft])}
        elif kind == "graft":
            continue
        elif kind == "set":
            edit = {"op": "set", "path": list(draw(st.sampled_from(paths))), "value": draw(VALUES)}
        elif kind == "raw":
            snippet = draw(st.sampled_from(RAW_SNIPPETS))
            edit = {"op": "raw", "path": list(draw(st.sampled_from(paths))), "yaml": snippet}
        elif kind == "delete":
            edit = {"op": "delete", "path": list(draw(st.sampled_from(paths)))}
        elif kind == "add":
            mappings = [p for p in containers(document) if isinstance(_at(document, list(p)), dict)]
            edit = {"op": "set", "path": [*draw(st.sampled_from(mappings)), draw(KEYS)], "value": draw(VALUES)}
        elif kind == "append":
            lists = [p for p in containers(document) if isinstance(_at(document, list(p)), list)]
            if not lists:
                continue
            path = list(draw(st.sampled_from(lists)))
            items = _at(document, path)
            value = copy.deepcopy(draw(st.sampled_from(items))) if items else draw(SCALARS)
            edit = {"op": "append", "path": path, "value": value}
        else:  # rename: another string of the file, changed the way names collide
            name = draw(st.sampled_from(strings(document) or [""]))
            change = draw(st.sampled_from(["upper", "swap", "underscore", "dash", "same", "newline"]))
            changed = {
                "upper": name.upper(),
                "swap": name.swapcase(),
                "underscore": name.replace("-", "_"),
                "dash": name.replace("_", "-"),
                "same": name,
                "newline": name + "\n",
            }[change]
            edit = {"op": "set", "path": list(draw(st.sampled_from(paths))), "value": changed}
        edits.append(edit)
    return edits


# --- the oracle --------------------------------------------------------------------------------------------------


# After `<file>: `: a field path (`endpoints[0].container.extra_environment.A`, `'x\ud800'` keys quoted,
# `<root>`) and `: `, or a problem that only has a line (YAML syntax) ending in `(line N)`, or the count line.
FIELD = re.compile(r"(<root>|[A-Za-z_'][^:\s]*|'[^']*'[^:\s]*): ")
LINE = re.compile(r".*\(line [0-9]+\)$")


def _clean_refusal(message: str, files: list[Path]) -> str | None:
    """None when `message` is a clean refusal: bounded, each line naming one of `files` and a field (or, for
    YAML syntax, the line)."""
    if not message.strip():
        return "empty ConfigError"
    if len(message) > MAX_MESSAGE_CHARS:
        return f"ConfigError of {len(message)} characters"
    prefixes = (*(f"{f}: " for f in files), f"{files[0].parent}/")
    for line in message.splitlines():
        if not line.startswith(prefixes):
            return f"a line names no config file: {line[:200]!r}"
        rest = line.split(": ", 1)[1]
        whole_file = rest.startswith(("... and ", "no such config file"))  # the count line; a promote_from target
        if not (FIELD.match(rest) or LINE.fullmatch(rest) or whole_file):
            return f"a line names neither a field nor a line: {line[:200]!r}"
    return None


def judge(seed: str, text: str, folder: Path, source: Path | None = None) -> str | None:
    """None when the loader behaves on `text` (the mutated `seed`); otherwise what went wrong. The seed's file and
    its neighbours are the shipped ones (synth_helpers.shipped_path), or `source` and its neighbours."""
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    seed_path = source or shipped_path(seed)
    for sibling in seed_path.parent.glob("*.yaml"):  # promote_from and the pipeline read their neighbours
        shutil.copy(sibling, folder / sibling.name)
    path = folder / seed_path.name
    path.write_text(text)
    files = sorted(folder.glob("*.yaml"))
    started = time.process_time()
    try:
        if path.name == "pipeline.yaml":
            _, stages = load_pipeline(path, folder)
            configs = list(stages.values())
        else:
            configs = [load_config(path, source_roots=(PROJECT_ROOT, PROJECT_ROOT.parent / "shared"))]
        for config in configs:
            wrong = accepted_but_wrong(config)
            if wrong:
                return "accepted, but " + "; ".join(wrong)[:500]
            plan = plan_stage(config, PROJECT_ROOT)
            for endpoint in config.endpoints:
                container_environment(endpoint.container)
            if config.promote_from:
                source = load_config(folder / f"{config.promote_from}.yaml")
                check_promotion(
                    config, source, plan.stage_artifacts(), plan_stage(source, PROJECT_ROOT).stage_artifacts()
                )
    except ConfigError as error:
        problem = _clean_refusal(str(error), files)
        if problem:
            return problem
    except PromotionError:
        pass  # app.py prints it as an invalid configuration, like a ConfigError
    except Exception as error:  # any other exception is the finding
        return f"{type(error).__name__}: {str(error)[:500]}"
    elapsed = time.process_time() - started
    if elapsed > CPU_SECONDS_PER_LOAD:
        return f"took {elapsed:.1f} s of CPU"
    return None


def _api_shape_problem(service: str, shape: str, value: str) -> str | None:
    """What botocore's shape states (length, whole-value pattern) that `value` breaks; None when it fits."""
    metadata = service_model(service).shape_for(shape).metadata
    if not metadata.get("min", 0) <= len(value) <= metadata.get("max", len(value)):
        return f"{shape} {value[:80]!r}: length {len(value)} outside {metadata.get('min', 0)}..{metadata.get('max')}"
    pattern = metadata.get("pattern")
    if pattern and re.fullmatch(pattern, value, flags=re.ASCII) is None:
        return f"{shape} {value[:80]!r} does not match {pattern}"
    return None


def accepted_but_wrong(config: AppConfig) -> list[str]:
    """What an accepted config would still send to AWS that AWS (botocore's model) or CDK refuses: checked on the
    values the app derives (deployed names, the whole container environment), not on the config's fields."""
    problems: list[str] = []
    sagemaker = service_model("sagemaker")
    if config.artifacts.bucket_name:
        try:
            s3.Bucket.validate_bucket_name(config.artifacts.bucket_name)
        except Exception as error:  # jsii's error: the synth would stop with it
            problems.append(f"aws-cdk-lib refuses bucket name {config.artifacts.bucket_name!r}: {error}")
    deployed = [config.deployed_endpoint_name(e) for e in config.endpoints]
    if len({name.lower() for name in deployed}) != len(deployed):
        problems.append(f"endpoint names {deployed} repeat ignoring case (SageMaker's names do)")
    components: list[str] = []
    for endpoint, name in zip(config.endpoints, deployed, strict=True):
        problems += filter(None, [_api_shape_problem("sagemaker", "EndpointName", name)])
        environment = dict(container_environment(endpoint.container))
        if endpoint.mode != "multi_model":
            environment["SAGEMAKER_TRITON_DEFAULT_MODEL_NAME"] = max(endpoint.models, key=len)
        limit = sagemaker.shape_for("EnvironmentMap").metadata["max"]
        if len(environment) > limit:
            problems.append(f"{len(environment)} container variables; EnvironmentMap allows {limit}")
        for key, value in environment.items():
            problems += filter(None, [_api_shape_problem("sagemaker", "EnvironmentKey", key)])
            if len(value.encode()) > sagemaker.shape_for("EnvironmentValue").metadata["max"]:
                problems.append(f"container variable {key} is {len(value.encode())} bytes")
        if sum(len(k.encode()) + len(v.encode()) for k, v in environment.items()) > 32 * 1024:
            problems.append("container variables over 32 KB")
        if endpoint.vpc:
            for subnet in endpoint.vpc.subnet_ids:
                problems += filter(None, [_api_shape_problem("sagemaker", "SubnetId", subnet)])
            for group in endpoint.vpc.security_group_ids:
                problems += filter(None, [_api_shape_problem("sagemaker", "SecurityGroupId", group)])
        if endpoint.mode == "inference_components":
            components += [component_name(name, model) for model in endpoint.models]
        for action in endpoint.autoscaling.scheduled if endpoint.autoscaling else []:
            problems += filter(
                None, [_api_shape_problem("application-autoscaling", "ScheduledActionName", action.name)]
            )
    for component in components:
        problems += filter(None, [_api_shape_problem("sagemaker", "InferenceComponentName", component)])
    if len({c.lower() for c in components}) != len(components):
        problems.append(f"inference component names {components} repeat ignoring case")
    return problems


# --- the tests ---------------------------------------------------------------------------------------------------


def test_every_shipped_config_is_a_seed_and_loads(tmp_path):
    assert {"config/dev.yaml", "config/prod.yaml", "config/pipeline.yaml"} <= set(SEED_FILES)
    assert any(s.startswith("examples/config/") for s in SEED_FILES)
    assert any(s.startswith("tests/configs/") for s in SEED_FILES)
    for seed in SEED_FILES:
        assert judge(seed, shipped_path(seed).read_text(), tmp_path / seed.replace("/", "_")) is None
    for own in sorted(CONFIG_DIR.glob("*.yaml")):  # and the user's own config/: what `make deploy` reads
        assert judge(f"config/{own.name}", own.read_text(), tmp_path / f"own_{own.name}", source=own) is None


@pytest.mark.parametrize("seed", SEED_FILES)
def test_mutations_are_refused_cleanly_or_accepted_by_the_plan(seed, tmp_path_factory):
    text = shipped_path(seed).read_text()
    folder = tmp_path_factory.mktemp("mutated")

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        derandomize=not RANDOM,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
        print_blob=RANDOM,
    )
    @given(edit_lists(text))
    def mutated(edits: list[dict]) -> None:
        mutated_text = apply(text, edits)
        problem = judge(seed, mutated_text, folder / "case")
        entry = {"seed": seed, "edits": edits}
        assert problem is None, f"{problem}\ncorpus entry: {json.dumps(entry, ensure_ascii=True)}"

    mutated()


def _corpus() -> list[dict]:
    return yaml.safe_load(CORPUS.read_text()) or []


@pytest.mark.parametrize("entry", _corpus(), ids=lambda e: e["name"])
def test_corpus_mutations_stay_fixed(entry, tmp_path):
    """Each finding of these tests (and each item of issue #22), kept: a clean refusal holding `expect`."""
    folder = tmp_path / "case"
    assert judge(entry["seed"], apply(shipped_path(entry["seed"]).read_text(), entry["edits"]), folder) is None
    path = folder / Path(entry["seed"]).name
    with pytest.raises(ConfigError) as refused:
        if path.name == "pipeline.yaml":
            load_pipeline(path, folder)
        else:
            load_config(path)
    assert entry["expect"] in str(refused.value), str(refused.value)


def test_the_corpus_names_known_seeds_and_edits():
    names = [entry["name"] for entry in _corpus()]
    assert len(names) == len(set(names)) and len(names) >= 10
    for entry in _corpus():
        assert entry["seed"] in SEED_FILES, entry["name"]
        assert entry["edits"] and all(e["op"] in {"set", "raw", "delete", "append"} for e in entry["edits"])
        assert entry["expect"] and entry["found"], entry["name"]
        assert re.fullmatch(r"[a-z0-9-]+", entry["name"]), entry["name"]
