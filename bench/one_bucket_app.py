"""Baseline for bench/synth.py: the smallest useful CDK app (one bucket), same Python and CDK."""

import aws_cdk as cdk
from aws_cdk import aws_s3 as s3

app = cdk.App()
stack = cdk.Stack(app, "OneBucket")
s3.Bucket(stack, "Bucket")
app.synth()
