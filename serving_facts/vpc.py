"""What a SageMaker model in a VPC needs from its execution role: one definition, read by the construct library
(`triton_cdk.serving.TritonModel.grant_vpc_access`) and by the Inference Recommender client
(endpoint_client/recommend.py, which prints them for a role it does not manage).
"""

from __future__ import annotations

# A model with a VpcConfig: SageMaker creates network interfaces in the VPC with the execution role, which then needs
# these EC2 actions. Source: aws-cdk-lib 2.275.0 aws-stepfunctions-tasks/lib/sagemaker/create-model.js (the policy
# SageMakerCreateModel grants its role when the model has a VPC; in the venv's aws_cdk jsii bundle), after SageMaker's
# "Give SageMaker Hosted Endpoints Access to Resources in Your Amazon VPC" (SageMaker creates ENIs and attaches them to
# the model containers). The Describe* actions have no resource-level scoping, so a policy grants them on "*".
# docs/performance.md lists them (<!-- recommend-role-policy-vpc -->).
VPC_NETWORK_INTERFACE_ACTIONS = (
    "ec2:CreateNetworkInterface",
    "ec2:CreateNetworkInterfacePermission",
    "ec2:DeleteNetworkInterface",
    "ec2:DeleteNetworkInterfacePermission",
    "ec2:DescribeNetworkInterfaces",
    "ec2:DescribeVpcs",
    "ec2:DescribeDhcpOptions",
    "ec2:DescribeSubnets",
    "ec2:DescribeSecurityGroups",
)
