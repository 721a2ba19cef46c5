"""Load and validate config/<stage>.yaml; every problem is reported with file, field path and line.

Nothing here raises anything but ConfigError for bad input: the file is read by the bounded YAML
reader (model_build.config_yaml: duplicate keys, encodings, alias bombs, tags, depth, size), the
schema is strict and bounded (serving_facts.settings.StrictModel), and the rules that join several
parts of the file, the local source paths and CloudFormation's per-stack limit come after.
"""

from __future__ import annotations

import re
from pathlib import Path

from pydantic import ValidationError

from model_build.app_config import MAX_PROBLEMS, format_validation_error
from model_build.config_yaml import ConfigDocument, ConfigFileError, clip, read_config_document
from model_build.preflight import ensemble_preflight_problems, preflight_problems
from model_build.report_budget import budget_problem, samples_problem
from stage_config.app import STAGE_PATTERN, AppConfig, cross_field_problems
from stage_config.build_concurrency import concurrency_problems
from stage_config.source_paths import source_path_problems
from triton_cdk.errors import TritonCdkError

PROJECT_ROOT = Path(__file__).resolve().parents[1]
CONFIG_DIR = PROJECT_ROOT / "config"
# One problem line may quote a user's value; keep each readable and the whole message bounded.
MAX_LINE_CHARS = 1_000
STAGE_NAME = re.compile(STAGE_PATTERN)


class ConfigError(TritonCdkError):
    """The configuration cannot be deployed; the message has one line per problem."""


def config_path(stage: str, config_dir: Path = CONFIG_DIR) -> Path:
    return config_dir / f"{stage}.yaml"


def load_config(path: Path, *, source_roots: tuple[Path, ...] = (PROJECT_ROOT,)) -> AppConfig:
    """Parse and validate one stage file. Raises ConfigError naming the file and each field.

    `source_roots`: folders a local model source may resolve into (the project root; tests add
    the shared test-data folder beside it).
    """
    document = read_document(path)
    shown = shown_path(path)
    try:
        config = AppConfig.model_validate(document.data)
    except ValidationError as error:
        raise ConfigError(format_validation_error(str(shown), error, document=document)) from None
    problems = cross_field_problems(config)
    problems += promotion_chain_problems(config, path.parent)
    problems += promotion_bucket_problems(config, path.parent)
    problems += _source_problems(config, source_roots)
    if config.stage != path.stem:
        problems.append(("stage", f"is {config.stage!r} but the file is for stage {clip(path.stem)!r}"))
    if not problems:
        # Only a config that is valid on its own can be built: then find what the build would refuse.
        problems = build_preflight_problems(config, source_roots[0])
    if not problems:
        problems = concurrency_problems(config)
    if not problems:
        problems = report_budget_problems(config, source_roots[0])
    if problems:
        raise ConfigError(format_problems(shown, problems, document))
    return config


def shown_path(path: Path) -> Path:
    """Paths in messages are relative to the project root (where the README's commands run) when inside it."""
    try:
        return Path(path).resolve().relative_to(PROJECT_ROOT)
    except (ValueError, OSError):
        return Path(path)


def build_preflight_problems(config: AppConfig, base_dir: Path) -> list[tuple[str, str]]:
    """What the GPU build would refuse for each model on each instance type serving it (model_build.preflight),
    an ensemble's composing models included, and what Triton would refuse in each ensemble."""
    index = {model.name: i for i, model in enumerate(config.models)}
    problems: list[tuple[str, str]] = []
    seen: set[tuple[str, str]] = set()
    for e, endpoint in enumerate(config.endpoints):
        for model in config.served_models(endpoint.models):
            name = model.name
            if (name, endpoint.instance_type) in seen:
                continue
            seen.add((name, endpoint.instance_type))
            found = preflight_problems(
                model,
                instance_type_name=endpoint.instance_type,
                triton_release=config.triton_release,
                base_dir=base_dir,
                fleet=config.build.fleet,
            )
            if model.is_ensemble:
                found += ensemble_preflight_problems(
                    model,
                    {m.name: m for m in config.models if m.name in model.composing_models},
                    instance_type_name=endpoint.instance_type,
                    triton_release=config.triton_release,
                    base_dir=base_dir,
                    fleet=config.build.fleet,
                )
            served = f" (model {name!r} served by endpoints[{e}] on {endpoint.instance_type})"
            problems += [(f"models[{index[name]}].{field}", message + served) for field, message in found]
    return problems


def report_budget_problems(config: AppConfig, base_dir: Path) -> list[tuple[str, str]]:
    """A TensorRT model whose build report (check + tuning) cannot fit build.timeout_minutes
    (model_build.report_budget), or whose tensorrt.accuracy.samples file is not in the project (the build stack
    ships it as an asset). A promoting stage builds nothing."""
    if config.promote_from is not None:
        return []
    problems = []
    for index, model in enumerate(config.models):
        message = budget_problem(model, config.build.timeout_minutes)
        if message is not None:
            problems.append((f"models[{index}].tune" if model.tune is not None else "build.timeout_minutes", message))
        message = samples_problem(model, base_dir)
        if message is not None:
            problems.append((f"models[{index}].tensorrt.accuracy.samples", message))
    return problems


def load_stage(stage: str, config_dir: Path = CONFIG_DIR) -> AppConfig:
    return load_config(config_path(stage, config_dir))


def format_problems(path: Path, problems: list[tuple[str, str]], document: ConfigDocument | None = None) -> str:
    """`<file>: <field>: <message> (line N)`, each line clipped, at most MAX_PROBLEMS of them."""
    lines = []
    for field, message in problems[:MAX_PROBLEMS]:
        line = document.line_of(field_loc(field)) if document is not None else None
        at = f" (line {line})" if line is not None else ""
        lines.append(clip(f"{path}: {field}: {message}", MAX_LINE_CHARS) + at)
    if len(problems) > MAX_PROBLEMS:
        lines.append(f"{path}: ... and {len(problems) - MAX_PROBLEMS} more problems")
    return "\n".join(lines)


def field_loc(field: str) -> tuple:
    """'endpoints[0].autoscaling' -> ('endpoints', 0, 'autoscaling')."""
    return tuple(int(part) if part.isdigit() else part for part in re.findall(r"[^.\[\]]+", field))


def read_document(path: Path) -> ConfigDocument:
    """The file's data (model_build.config_yaml's bounded reader), with every string that no AWS API, path or
    process environment can carry refused before the schema sees it (text_problems)."""
    document = _read(path)
    problems = text_problems(document.data)
    if problems:
        shown = shown_path(path)
        lines = []
        for loc, message in problems[:MAX_PROBLEMS]:
            line = document.line_of(loc)
            at = f" (line {line})" if line is not None else ""
            lines.append(clip(f"{shown}: {shown_loc(loc) or '<root>'}: {message}", MAX_LINE_CHARS) + at)
        if len(problems) > MAX_PROBLEMS:
            lines.append(f"{shown}: ... and {len(problems) - MAX_PROBLEMS} more problems")
        raise ConfigError("\n".join(lines))
    return document


def text_problems(data: object, loc: tuple = ()) -> list[tuple[tuple, str]]:
    """(field path, message) for each key or string value holding a NUL, a lone surrogate or `{{`, anywhere.

    A YAML escape ("\\0", "\\ud800") puts them in a string. A NUL ends a C string: no file path (os.stat
    raises "embedded null byte"), process environment (execve) or AWS name carries it. A lone surrogate is
    not a character and cannot be encoded as UTF-8 (str.encode raises), which every AWS API and the
    CloudFormation template (JSON in UTF-8) need. The reader's node budget bounds this walk.
    """
    problems: list[tuple[tuple, str]] = []
    if isinstance(data, dict):
        for key, value in data.items():
            if isinstance(key, str) and (why := _bad_text(key)):
                problems.append(((*loc, key), f"the key {why}"))
            problems += text_problems(value, (*loc, key))
    elif isinstance(data, list):
        for index, value in enumerate(data):
            problems += text_problems(value, (*loc, index))
    elif isinstance(data, str) and (why := _bad_text(data)):
        problems.append((loc, f"the value {why}"))
    return problems


def _bad_text(text: str) -> str | None:
    if "{{" in text:
        # CloudFormation resolves `{{resolve:ssm:...}}`, `{{resolve:secretsmanager:...}}` in any string property
        # of a template (CloudFormation User Guide, "Using dynamic references"): a config string that reaches
        # a template would be replaced, or break the deploy. No config value needs `{{`.
        return "holds '{{', which CloudFormation reads as the start of a dynamic reference ({{resolve:...}}); remove it"
    if "\x00" in text:
        return "holds a NUL character (\\x00), which no file path, container variable or AWS name can carry"
    surrogate = next((c for c in text if "\ud800" <= c <= "\udfff"), None)
    if surrogate is not None:
        return (
            f"holds a lone surrogate ({ascii(surrogate)[1:-1]}), which is not a character and cannot be written "
            "as UTF-8; use the character itself"
        )
    return None


def shown_loc(loc: tuple) -> str:
    """('endpoints', 0, 'container') -> 'endpoints[0].container'; a key that is not a plain word is quoted."""
    text = ""
    for part in loc:
        if isinstance(part, int):
            text += f"[{part}]"
            continue
        key = str(part)
        if not re.fullmatch(r"[A-Za-z0-9_-]+", key):
            key = repr(clip(key, 40)).replace("\\x00", "\\0")
        text += f".{key}" if text else key
    return text


# A chain of promotions longer than this is a mistake: a pipeline has at most 20 stages (pipeline.py).
MAX_PROMOTION_CHAIN = 20


def promotion_chain_problems(config: AppConfig, config_dir: Path) -> list[tuple[str, str]]:
    """`promote_from` must lead, stage by stage, to a stage that builds: a stage that promotes from itself, or a
    cycle (dev from prod, prod from dev), copies artifacts nobody ever builds. The other stages' files are read
    from the same folder for their `promote_from` only; a missing or broken one ends the walk here (it is
    reported when that stage is loaded, as app.py and the pipeline do)."""
    if config.promote_from is None:
        return []
    if config.promote_from == config.stage:
        return [
            (
                "promote_from",
                f"stage {config.stage!r} promotes from itself; name the stage that builds the artifacts (e.g. dev "
                "for prod), or leave promote_from out so this stage builds them",
            )
        ]
    chain = [config.stage]
    current: str | None = config.promote_from
    while current is not None and len(chain) <= MAX_PROMOTION_CHAIN:
        if current in chain:
            cycle = " -> ".join([*chain[chain.index(current) :], current])
            return [
                (
                    "promote_from",
                    f"promotion cycle {cycle} (each copies artifacts from the next): no stage of it builds; the "
                    "first stage of a promotion chain must leave promote_from out",
                )
            ]
        chain.append(current)
        current = _promote_from_of(config_dir / f"{current}.yaml")
    return []


def _promote_from_of(path: Path) -> str | None:
    try:
        value = read_config_document(path).data.get("promote_from")
    except (ConfigFileError, OSError):
        return None
    return value if isinstance(value, str) and STAGE_NAME.fullmatch(value) else None


def promotion_bucket_problems(config: AppConfig, config_dir: Path) -> list[tuple[str, str]]:
    """A promoting stage cannot name its source stage's artifact bucket: S3 bucket names are unique within a
    partition (S3 User Guide, "Bucket naming rules"), so one of the two artifact stacks would fail to create it.
    The source's file is read for its bucket name only; a broken one is reported when that stage is loaded."""
    name = config.artifacts.bucket_name
    if config.promote_from is None or name is None or config.promote_from == config.stage:
        return []
    try:
        artifacts = read_config_document(config_dir / f"{config.promote_from}.yaml").data.get("artifacts")
    except (ConfigFileError, OSError):
        return []
    if isinstance(artifacts, dict) and artifacts.get("bucket_name") == name:
        return [
            (
                "artifacts.bucket_name",
                f"{name!r} is also the bucket_name of stage {config.promote_from!r} (promote_from), whose "
                f"artifacts this stage copies; S3 bucket names are unique per partition: give each stage its own",
            )
        ]
    return []


def _read(path: Path) -> ConfigDocument:
    try:
        return read_config_document(path)
    except ConfigFileError as error:
        hint = ""
        if "no such config file" in str(error):
            try:
                available = sorted(p.stem for p in path.parent.glob("*.yaml")) if path.parent.is_dir() else []
            except OSError:
                available = []
            hint = f" (stages in {path.parent}: {', '.join(available)})" if available else ""
        raise ConfigError(f"{error}{hint}") from None


def _source_problems(config: AppConfig, roots: tuple[Path, ...]) -> list[tuple[str, str]]:
    """A source passes when it resolves inside any root; report against the first (the project)."""
    results = [dict(source_path_problems(config.models, root)) for root in roots]
    failing = set.intersection(*(set(r) for r in results)) if results else set()
    return [(field, message) for field, message in results[0].items() if field in failing]
