"""Our endpoints are aws-cdk-lib SageMaker endpoints: `cdk.Resource`s implementing `aws_sagemaker.IEndpoint`.

Source: aws-cdk-lib API reference, `aws_sagemaker.IEndpoint` (endpointArn, endpointName, grantInvoke; an
`IResource` and `IEndpointRef`) and `aws_apigateway.SagemakerIntegration(endpoint: IEndpoint)`, which calls the
endpoint's `invocations` action through API Gateway's SageMaker runtime integration (issue #23 item 6).
"""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_apigateway as apigateway
from aws_cdk.assertions import Template
from test_constructs import endpoint, stack  # noqa: F401  (the fixture and builder of the construct tests)

from triton_cdk.serving import TritonEndpoint


def test_an_endpoint_is_a_resource_with_an_endpoint_ref(stack) -> None:  # noqa: F811
    served = endpoint(stack)
    assert isinstance(served, cdk.Resource)
    assert served.endpoint_ref.endpoint_arn == served.endpoint_arn
    assert cdk.Stack.of(served) is stack


def test_api_gateway_integrates_our_endpoint(stack) -> None:  # noqa: F811
    served = endpoint(stack)
    api = apigateway.RestApi(stack, "Api")
    api.root.add_method("POST", apigateway.SagemakerIntegration(served))
    template = Template.from_stack(stack)
    (method,) = template.find_resources("AWS::ApiGateway::Method").values()
    uri = cdk.Stack.of(stack).resolve(method["Properties"]["Integration"]["Uri"])
    assert "runtime.sagemaker:path/endpoints/dev-bert/invocations" in str(uri)
    (role,) = template.find_resources("AWS::IAM::Policy").values()
    statement = role["Properties"]["PolicyDocument"]["Statement"][0]
    assert statement["Action"] == "sagemaker:InvokeEndpoint"
    assert "endpoint/dev-bert" in str(statement["Resource"])


def test_an_imported_endpoint_integrates_too(stack) -> None:  # noqa: F811
    imported = TritonEndpoint.from_endpoint_name(stack, "Imported", "prod-bert")
    api = apigateway.RestApi(stack, "Api")
    api.root.add_method("POST", apigateway.SagemakerIntegration(imported))
    assert "endpoints/prod-bert/invocations" in str(Template.from_stack(stack).to_json())
