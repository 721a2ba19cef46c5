"""Constructs that serve Triton models on SageMaker: model, endpoint, autoscaling, monitoring.

They take plain props (image URI, S3 locations, instance facts) and know nothing about
config/<stage>.yaml; stacks/endpoint_stack.py maps the configuration onto them.

The patterns `TritonServingEndpoint` (variant endpoints: single-model, multi-model, shadow, asynchronous) and
`TritonServingComponents` (inference components) compose the others into one endpoint with its scaling, monitoring,
deployment policy, instance-type guard and role grants; the other constructs are the building blocks for a stack
that wants a different composition.
"""

from triton_cdk.serving.autoscaling import TritonEndpointScaling
from triton_cdk.serving.component_monitoring import TritonComponentMonitoring
from triton_cdk.serving.component_scaling import CopyScaling, TritonComponentScaling
from triton_cdk.serving.deployment import DeploymentPolicy, TrafficRouting
from triton_cdk.serving.endpoint import DataCapture, ProductionVariant, TritonEndpoint
from triton_cdk.serving.inference_components import TritonComponentEndpoint, TritonInferenceComponent
from triton_cdk.serving.model_data import TritonModelData
from triton_cdk.serving.monitoring import AlarmThresholds, TritonEndpointMonitoring
from triton_cdk.serving.role_policy import RolePolicy
from triton_cdk.serving.serving_components import ServedComponent, TritonServingComponents
from triton_cdk.serving.serving_endpoint import AsyncServing, ServingContainer, ShadowModel, TritonServingEndpoint
from triton_cdk.serving.shadow import ShadowComparison, ShadowVariant
from triton_cdk.serving.triton_model import TritonModel

# What the package re-exports, then its modules (each lists its own public names in its `__all__`).
__all__ = [
    "AlarmThresholds",
    "AsyncServing",
    "CopyScaling",
    "DataCapture",
    "DeploymentPolicy",
    "ProductionVariant",
    "RolePolicy",
    "ServedComponent",
    "ServingContainer",
    "ShadowComparison",
    "ShadowModel",
    "ShadowVariant",
    "TrafficRouting",
    "TritonComponentEndpoint",
    "TritonComponentMonitoring",
    "TritonComponentScaling",
    "TritonEndpoint",
    "TritonEndpointMonitoring",
    "TritonEndpointScaling",
    "TritonInferenceComponent",
    "TritonModel",
    "TritonModelData",
    "TritonServingComponents",
    "TritonServingEndpoint",
    "async_inference",
    "autoscaling",
    "component_monitoring",
    "component_scaling",
    "component_sizing",
    "deployment",
    "endpoint",
    "environment",
    "inference_components",
    "instance_type_guard",
    "metrics",
    "model_data",
    "monitoring",
    "pattern_props",
    "role_policy",
    "serving_components",
    "serving_endpoint",
    "shadow",
    "triton_model",
]
