"""The promotion pipeline's building blocks: the source, the scoping of its roles, its logs and cdk-nag findings.

The smoke program each stage's post-deploy step runs is a client of the stage's endpoints and lives with the
client (endpoint_client.smoke, endpoint_client.smoke_plan): it runs in CodeBuild with only the invocation
client's packages installed.
"""

# The area's public modules, each with its own `__all__`. Importing the package imports none of them (nor aws_cdk).
__all__ = [
    "logs",
    "nag",
    "scoping",
    "source",
]
