"""The construct library: Triton on SageMaker as CDK constructs.

Not named `constructs`: a top-level package of that name would shadow the `constructs` library
that aws-cdk-lib imports (see README, "Layout").
"""

# The public modules and areas; each states its own public names in its `__all__`. Importing this package imports
# none of them (nor aws_cdk): a user imports the module a construct lives in, or an area's package (`serving`).
__all__ = [
    "api_constraints",
    "api_limits",
    "artifact_build",
    "artifact_keys",
    "artifacts",
    "errors",
    "grants",
    "guard",
    "guard_plugin",
    "images",
    "nag",
    "notifications",
    "pipeline",
    "roles",
    "serving",
]
