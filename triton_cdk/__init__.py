"""The construct library: Triton on SageMaker as CDK constructs.

Not named `constructs`: a top-level package of that name would shadow the `constructs` library
that aws-cdk-lib imports (see README, "Layout").
"""
