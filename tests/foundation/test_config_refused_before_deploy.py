"""Configs a later step (the stage's stacks, CloudFormation, an AWS API) would refuse are refused by the stage-config
loader (load_stage, load_pipeline) first, naming the file, field and line; each test names the rule's source. Found
by fuzzing the loader. The minimal YAML of each finding is also replayed
from config_mutation_corpus.yaml (test_config_properties.py)."""

from __future__ import annotations

import importlib.resources
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml
from synth_helpers import shipped_path

from model_build.config_yaml import read_config_document
from stacks.build_stack import BuildStack
from stacks.stage_plan import plan_stage
from stage_config import ConfigError, load_config
from stage_config.build_concurrency import builds_per_environment
from stage_config.endpoint import iana_time_zones
from stage_config.pipeline import load_pipeline
from triton_cdk.artifact_build.requests import artifact_requests
from triton_cdk.errors import TritonCdkError

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = [ROOT / "config" / "dev.yaml", *sorted((ROOT / "examples" / "config").glob("*.yaml"))]


def stage_folder(tmp_path: Path, seed: str = "config/dev.yaml") -> Path:
    """A copy of the seed's folder as shipped (promote_from and the pipeline read the neighbours; config/ is the
    shipped copy, tests/shipped_config/, whatever the user set)."""
    folder = tmp_path / "config"
    shutil.copytree(shipped_path(seed).parent, folder)
    return folder


def edited(tmp_path: Path, edit, seed: str = "config/dev.yaml") -> Path:
    folder = stage_folder(tmp_path, seed)
    path = folder / Path(seed).name
    document = yaml.safe_load(path.read_text())
    edit(document)
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


def refusal(path: Path) -> str:
    with pytest.raises(ConfigError) as refused:
        load_config(path)
    return str(refused.value)


# 1. build.concurrency


def test_a_project_limit_below_the_artifacts_is_refused_by_the_loader(tmp_path):
    """CodeBuild User Guide, "Builds in AWS CodeBuild": with a project concurrent build limit, StartBuild over it
    returns an error instead of queueing; every ensure-artifact resource may start its build at once."""
    path = edited(tmp_path, lambda d: d.update(build={"concurrency": 1}))
    message = refusal(path)
    assert "dev.yaml: build.concurrency: 1 is below the 3 artifacts the A10G build project" in message
    assert "(line " in message
    at_least = edited(tmp_path / "b", lambda d: d.update(build={"concurrency": 3}))
    assert load_config(at_least).build.concurrency == 3


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.stem)
def test_the_loader_counts_builds_as_the_build_stack_does(path):
    """The build stack's count (stacks/build_stack.py _check_concurrency): artifact_requests over the stage
    plan, one per artifact key, by build environment."""
    config = load_config(path, source_roots=(ROOT, ROOT.parent / "shared"))
    plan = plan_stage(config, ROOT)
    requests = artifact_requests(list(plan.endpoints.values()))
    counted: dict[str, int] = {}
    for request in requests:
        counted[request.environment] = counted.get(request.environment, 0) + 1
    assert builds_per_environment(config) == counted


def test_the_build_stacks_own_check_is_a_clean_refusal():
    """app.py prints a TritonCdkError as an error line, not a traceback (triton_cdk/errors.py)."""
    request = SimpleNamespace(environment="A10G")
    stack = SimpleNamespace(
        config=SimpleNamespace(stage="dev", build=SimpleNamespace(concurrency=1)),
        projects={"A10G": object()},
        requests=[request, request],
    )
    with pytest.raises(TritonCdkError, match=r"build\.concurrency: 1 is below the 2 artifacts"):
        BuildStack._check_concurrency(stack)  # type: ignore[arg-type]


# 2. initial_weight 0 on every variant


def test_the_only_variant_at_weight_zero_is_refused_naming_the_field(tmp_path):
    """CreateEndpointConfig InitialVariantWeight: with every weight 0 no variant receives traffic; the endpoint
    construct refuses it ("at least one variant needs an initial_weight above 0", triton_cdk/serving/endpoint.py)."""
    message = refusal(edited(tmp_path, lambda d: d["endpoints"][1].update(initial_weight=0)))
    assert "dev.yaml: endpoints[1].initial_weight: is 0: no variant would receive traffic" in message


def test_every_variant_at_weight_zero_is_refused_and_one_above_zero_is_enough(tmp_path):
    """As above: at least one variant needs a weight above 0."""
    extra = {"name": "canary", "instance_type": "ml.g5.xlarge", "initial_weight": 0}
    message = refusal(edited(tmp_path, lambda d: d["endpoints"][1].update(initial_weight=0, extra_variants=[extra])))
    assert "endpoints[1].initial_weight: is 0 and every extra_variants[].initial_weight is 0 too" in message
    path = edited(
        tmp_path / "b",
        lambda d: d["endpoints"][1].update(initial_weight=0, extra_variants=[{**extra, "initial_weight": 1}]),
    )
    assert load_config(path).endpoints[1].initial_weight == 0


# 3. data capture without request or response


def test_enabled_data_capture_must_capture_something(tmp_path):
    """botocore sagemaker model: DataCaptureConfig.CaptureOptions is a CaptureOptionList of min 1."""
    capture = {"enabled": True, "capture_request": False, "capture_response": False}
    message = refusal(edited(tmp_path, lambda d: d["endpoints"][1].update(data_capture=capture)))
    assert "endpoints[1].data_capture: capture_request and capture_response are both false" in message
    off = edited(tmp_path / "b", lambda d: d["endpoints"][1].update(data_capture={**capture, "enabled": False}))
    assert not load_config(off).endpoints[1].data_capture.enabled


def test_the_capture_list_minimum_is_botocores():
    """The source of the rule above."""
    import botocore.session

    shape = botocore.session.get_session().get_service_model("sagemaker").shape_for("CaptureOptionList")
    assert shape.metadata["min"] == 1


# 4. CloudFormation dynamic references


@pytest.mark.parametrize(
    ("edit", "field"),
    [
        (lambda d: d["models"][3]["ensemble"].update(outputs=["{{resolve:ssm:x}}"]), "models[3].ensemble.outputs[0]"),
        (lambda d: d["endpoints"][0].update(name="a{{resolve:ssm:x}}"), "endpoints[0].name"),
        (lambda d: d["models"][3]["ensemble"]["steps"][0]["input_map"].update({"{{x": "image"}), "input_map.'{{x'"),
    ],
)
def test_a_dynamic_reference_is_refused_in_any_string(tmp_path, edit, field):
    """CloudFormation User Guide, "Using dynamic references": `{{resolve:service:reference}}` is resolved in
    any string property of a template, so a config string holding it would be replaced or break the deploy."""
    message = refusal(edited(tmp_path, edit, "examples/config/ensemble.yaml"))
    assert field in message and "holds '{{'" in message


def test_the_pipeline_file_refuses_a_dynamic_reference(tmp_path):
    """As above, for config/pipeline.yaml (the same reader, stage_config.loader.read_document)."""
    path = edited(tmp_path, lambda d: d.update(name="p{{resolve:ssm:x}}"), "config/pipeline.yaml")
    with pytest.raises(ConfigError, match=r"pipeline.yaml: name: the value holds '\{\{'"):
        load_pipeline(path, path.parent)


# 5. artifact bucket names


def test_two_pipeline_stages_with_one_bucket_name_are_refused(tmp_path):
    """S3 User Guide, "Bucket naming rules": bucket names are unique within a partition, so the second stage's
    artifact stack cannot create the bucket."""
    folder = stage_folder(tmp_path)
    prod = yaml.safe_load((folder / "prod.yaml").read_text())
    prod["artifacts"]["bucket_name"] = "triton-models-dev-replace-me"
    (folder / "prod.yaml").write_text(yaml.safe_dump(prod, sort_keys=False))
    with pytest.raises(ConfigError) as refused:
        load_pipeline(folder / "pipeline.yaml", folder)
    message = str(refused.value)
    assert "'triton-models-dev-replace-me'" in message and "dev" in message


def test_pipeline_problems_name_both_stages():
    """As above, for stages that do not promote from one another (pipeline_problems); the shipped configs."""
    from stage_config.pipeline import load_pipeline_config, pipeline_problems

    pipeline = load_pipeline_config(shipped_path("config/pipeline.yaml"))
    dev = load_config(shipped_path("config/dev.yaml"))
    prod = load_config(shipped_path("config/prod.yaml"))
    same = prod.model_copy(update={"artifacts": dev.artifacts})
    problems = pipeline_problems(pipeline, {"dev": dev, "prod": same})
    assert any(
        "config/prod.yaml artifacts.bucket_name 'triton-models-dev-replace-me' is also config/dev.yaml" in message
        for _, message in problems
    ), problems


def test_a_promoting_stage_cannot_reuse_its_source_bucket(tmp_path):
    """As above: a single-stage app (`cdk synth -c stage=prod`) reads the promote_from stage beside it."""
    path = edited(
        tmp_path, lambda d: d["artifacts"].update(bucket_name="triton-models-dev-replace-me"), "config/prod.yaml"
    )
    assert (
        "prod.yaml: artifacts.bucket_name: 'triton-models-dev-replace-me' is also the bucket_name of stage 'dev'"
        in (refusal(path))
    )


# 6. time zones


@pytest.mark.parametrize("zone", ["localtime", "Factory", "posixrules"])
def test_a_time_zone_outside_tzdatas_list_is_refused_naming_the_field(tmp_path, zone):
    """Application Auto Scaling PutScheduledAction Timezone: canonical IANA names (Joda-Time); the set is the
    pinned tzdata package's `zones` list (minus tz's `Factory` placeholder), not the machine's zoneinfo folder."""
    scheduled = [{"name": "night", "schedule": "cron(0 20 * * ? *)", "min_capacity": 1, "time_zone": zone}]
    message = refusal(edited(tmp_path, lambda d: d["endpoints"][0]["autoscaling"].update(scheduled=scheduled)))
    assert f"endpoints[0].autoscaling.scheduled[0].time_zone: time_zone {zone!r} is not an IANA time zone" in message


def test_the_time_zones_are_tzdatas_own_list():
    """As above: every machine agrees because the list comes from the pinned package."""
    listed = set(importlib.resources.files("tzdata").joinpath("zones").read_text().split())
    assert iana_time_zones() == listed - {"Factory"}
    assert {"Europe/Berlin", "UTC", "Etc/GMT+9", "Pacific/Tahiti"} <= iana_time_zones()


# 7. YAML 1.1 number forms


@pytest.mark.parametrize("raw", ["017", "1:30", "0x1F", "0b101", "-017", "1:30.5"])
def test_yaml_1_1_number_forms_are_refused_by_a_number_field(tmp_path, raw):
    """YAML 1.1 int/float types (yaml.org/type/int.html, float.html) read `017` as octal 15, `1:30` as base-60
    90, `0x1F` and `0b101` as hex and binary; YAML 1.2's core schema does not. The reader keeps them as text
    (model_build/config_yaml.py), so the strict number field refuses them with its name."""
    folder = stage_folder(tmp_path)
    path = folder / "dev.yaml"
    text = path.read_text()
    assert "    initial_instance_count: 1\n" in text
    path.write_text(text.replace("    initial_instance_count: 1\n", f"    initial_instance_count: {raw}\n", 1))
    assert f"endpoints[0].initial_instance_count: Input should be a valid integer (got '{raw}')" in refusal(path)


def test_plain_numbers_still_read_as_numbers(tmp_path):
    """The same reader serves model_build's own settings: decimal ints, floats, 0 and signed values are
    unchanged; a text field gets `017` as the text written (as YAML 1.2 reads it)."""
    path = tmp_path / "x.yaml"
    path.write_text("a: 0\nb: 17\nc: -3\nd: 1.5\ne: 0.25\nf: 1e3\ng: '017'\nh: 017\ni: 2024-01-01\n")
    data = read_config_document(path).data
    assert data["a"] == 0 and data["b"] == 17 and data["c"] == -3 and data["d"] == 1.5 and data["e"] == 0.25
    assert data["g"] == "017" and data["h"] == "017"
    for shipped in SHIPPED:
        assert load_config(shipped, source_roots=(ROOT, ROOT.parent / "shared"))


# 8. component headroom at copy scaling's maximum


def test_component_headroom_uses_copy_scalings_maximum(tmp_path):
    """stacks/endpoint_stack.py _check_update_headroom (component_sizing.update_headroom_problem): every
    component at copy scaling's maximum (max_copies, else copy_count x max_instances) plus one rolling batch
    must fit max_instances (InferenceComponentRollingUpdatePolicy provisions before it terminates)."""

    def edit(document: dict) -> None:
        ic = document["endpoints"][0]["inference_components"]
        ic["max_instances"] = 2
        ic["components"] = {
            "resnet50": {"accelerators": 1, "cpu_cores": 8, "min_memory_mb": 4096, "copy_count": 3},
            "yolov5s": {"accelerators": 1, "copy_count": 1},
        }

    message = refusal(edited(tmp_path, edit, "examples/config/components.yaml"))
    assert "endpoints[0]: inference_components.max_instances: at their most copies (resnet50 x 6, yolov5s x 2)" in (
        message
    )
    assert "9 needed, 2 x ml.g5.12xlarge offer 8" in message


def test_without_copy_scaling_the_most_copies_are_copy_count(tmp_path):
    """As above: without copy scaling the stack's components keep copy_count copies."""

    def edit(document: dict) -> None:
        ic = document["endpoints"][0]["inference_components"]
        ic.update(max_instances=2, min_instances=1)
        del ic["copy_scaling"]
        ic["components"] = {
            "resnet50": {"accelerators": 1, "cpu_cores": 8, "min_memory_mb": 4096, "copy_count": 3},
            "yolov5s": {"accelerators": 1, "copy_count": 1},
        }

    config = load_config(edited(tmp_path, edit, "examples/config/components.yaml"))
    assert config.endpoints[0].inference_components.copy_scaling is None


# Contradicted, ignored fields


@pytest.mark.parametrize(
    ("deployment", "field"),
    [
        ({"strategy": "blue_green", "traffic": "all_at_once", "canary_percent": 10}, "canary_percent"),
        ({"strategy": "blue_green", "traffic": "canary", "linear_step_percent": 20}, "linear_step_percent"),
        ({"strategy": "rolling", "canary_percent": 10}, "canary_percent"),
    ],
)
def test_a_step_size_the_traffic_shifting_ignores_is_refused(tmp_path, deployment, field):
    """stacks/endpoint_stack.py: canary_percent reaches only canary routing, linear_step_percent only linear
    routing (SageMaker BlueGreenUpdatePolicy TrafficRoutingConfiguration: CanarySize / LinearStepSize)."""
    message = refusal(edited(tmp_path, lambda d: d["endpoints"][1].update(deployment=deployment)))
    assert f"endpoints[1].deployment: {field} is for strategy 'blue_green' with traffic" in message
