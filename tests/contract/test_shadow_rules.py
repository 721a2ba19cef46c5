"""Shadow variants (issue #26 part 4), checked over every template of every shipped configuration.

Sources:
- SageMaker API reference / botocore sagemaker, CreateEndpointConfig `ShadowProductionVariants`: a list of
  ProductionVariant; "If you use this field, you can only specify one variant for ProductionVariants and one variant
  for ShadowProductionVariants".
- SageMaker "Create a shadow test": "a maximum of one shadow variant per endpoint ... a maximum of one production
  variant"; the shadow receives a percentage of the requests (at most all of them: its weight relative to the
  production variant's is at most 1); "Testing models with shadow variants": the shadow runs its own Model.
- SageMaker "Shadow tests" > "Exclusions": no shadow on asynchronous, multi-model or Inf1 endpoints.
- Nothing found says a shadow's alarm may roll production back: no rollback alarm watches the shadow variant.
"""

from __future__ import annotations

import json
import re

import botocore.session
from contract_helpers import resources_of


def _service():
    return botocore.session.get_session().get_service_model("sagemaker")


def _shadowed(shipped_templates):
    for shipped in shipped_templates:
        for logical_id, config in resources_of(shipped.template, "AWS::SageMaker::EndpointConfig").items():
            properties = config["Properties"]
            if "ShadowProductionVariants" in properties:
                yield shipped, f"{shipped.label}: {logical_id}", properties


def _model_id(variant: dict) -> str | None:
    name = variant.get("ModelName")
    return name["Fn::GetAtt"][0] if isinstance(name, dict) and "Fn::GetAtt" in name else None


def test_the_api_reference_allows_one_production_and_one_shadow_variant():
    shapes = _service().operation_model("CreateEndpointConfig").input_shape.members
    text = re.sub(r"<[^>]+>", "", shapes["ShadowProductionVariants"].documentation)
    assert "one variant for ProductionVariants and one variant for ShadowProductionVariants" in text
    assert shapes["ShadowProductionVariants"].member.name == "ProductionVariant"


def test_every_shadow_stands_beside_one_production_variant(shipped_templates):
    problems = []
    for _, where, properties in _shadowed(shipped_templates):
        shadows, production = properties["ShadowProductionVariants"], properties["ProductionVariants"]
        if len(shadows) != 1 or len(production) != 1:
            problems.append(f"{where}: {len(production)} production and {len(shadows)} shadow variants (1 and 1)")
    assert not problems, "\n".join(problems)


def test_every_shadow_variant_is_a_production_variant_sagemaker_accepts(shipped_templates):
    members = set(_service().shape_for("ProductionVariant").members)
    problems = []
    for _, where, properties in _shadowed(shipped_templates):
        (production,) = properties["ProductionVariants"]
        for shadow in properties["ShadowProductionVariants"]:
            if set(shadow) - members:
                problems.append(f"{where}: unknown members {sorted(set(shadow) - members)}")
            if shadow.get("VariantName") == production.get("VariantName"):
                problems.append(f"{where}: the shadow is named like the production variant")
            weight, base = shadow.get("InitialVariantWeight", 1.0), production.get("InitialVariantWeight", 1.0)
            if not 0 < weight <= base:
                problems.append(f"{where}: shadow weight {weight} copies outside 0-100 % of production's {base}")
            if str(shadow.get("InstanceType", "")).startswith("ml.inf1."):
                problems.append(f"{where}: a shadow on Inf1 (Shadow tests Exclusions)")
    assert not problems, "\n".join(problems)


def test_every_shadow_runs_its_own_single_model(shipped_templates):
    problems = []
    for shipped, where, properties in _shadowed(shipped_templates):
        (production,) = properties["ProductionVariants"]
        resources = shipped.template["Resources"]
        for shadow in properties["ShadowProductionVariants"]:
            model_id = _model_id(shadow)
            if model_id is None or model_id == _model_id(production):
                problems.append(f"{where}: the shadow's ModelName is no Model of its own: {shadow.get('ModelName')}")
                continue
            container = resources[model_id]["Properties"].get("PrimaryContainer", {})
            if container.get("Mode", "SingleModel") != "SingleModel":
                problems.append(f"{where}: the shadow's model is {container.get('Mode')} (Shadow tests Exclusions)")
        if "AsyncInferenceConfig" in properties:
            problems.append(f"{where}: a shadow on an asynchronous endpoint (Shadow tests Exclusions)")
    assert not problems, "\n".join(problems)


def test_no_rollback_alarm_watches_a_shadow_variant(shipped_templates):
    problems = []
    for shipped, where, properties in _shadowed(shipped_templates):
        shadow_names = {v["VariantName"] for v in properties["ShadowProductionVariants"]}
        alarms = resources_of(shipped.template, "AWS::CloudWatch::Alarm")
        watching = {
            logical_id
            for logical_id, alarm in alarms.items()
            for dimension in alarm["Properties"].get("Dimensions", [])
            if dimension.get("Name") == "VariantName" and dimension.get("Value") in shadow_names
        }
        for endpoint in resources_of(shipped.template, "AWS::SageMaker::Endpoint").values():
            rollback = json.dumps(endpoint["Properties"].get("DeploymentConfig", {}))
            for logical_id in watching:
                if f'"{logical_id}"' in rollback:
                    problems.append(f"{where}: rollback alarm {logical_id} watches the shadow")
    assert not problems, "\n".join(problems)


def test_the_fixture_holds_a_shadow(shipped_templates):
    """examples/config/shadow sets `shadow:`, so every gate (cdk-nag, Guard, API constraints, cfn-lint) sees one."""
    assert any(shipped.config == "examples/config/shadow" for shipped, _, _ in _shadowed(shipped_templates))
