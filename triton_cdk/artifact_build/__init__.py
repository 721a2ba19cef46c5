"""The GPU model build: CodeBuild projects and the ensure-artifact custom resources (docs/build.md)."""

# The area's public modules, each with its own `__all__`. Importing the package imports none of them (nor aws_cdk):
# the app's config schema imports `gpu_regions` and `requests` without the CDK constructs.
__all__ = [
    "build_project",
    "ensure_artifact",
    "gpu_regions",
    "requests",
]
