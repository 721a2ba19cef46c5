"""Baseline for bench/synth.py: the smallest useful CDK app (one bucket), same Python and CDK, with validation
registered the documented way as the stage app registers it (issue #23): cdk-nag's AwsSolutions pack, AWS's Guard
rules (the cdklabs plugin) and aws-cdk-lib's built-in CloudFormation default rules. The bare bucket has findings,
so its synth ends in ValidationFailed after every plugin ran: bench/synth.py times it all the same."""

import aws_cdk as cdk
from aws_cdk import aws_s3 as s3
from cdk_nag import AwsSolutionsChecks
from cdklabs.cdk_validator_cfnguard import CfnGuardValidator

app = cdk.App(policy_validation_beta1=[CfnGuardValidator()])
cdk.Validations.of(app).add_plugins(AwsSolutionsChecks())
stack = cdk.Stack(app, "OneBucket")
s3.Bucket(stack, "Bucket")
app.synth()
