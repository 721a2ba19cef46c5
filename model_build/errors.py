"""One exception hierarchy: the command lines (`model_build`, `endpoint_client`, the pipeline's smoke test) print
a `ToolError` as `ERROR: <message>` and exit 1 (model_build.cli.run_cli).

Messages name the file or field and end with what to do about it. Errors that callers also know as
`ValueError` (an unknown instance type, a release, a build match) are both.
"""


class ToolError(Exception):
    """A problem with the user's input or environment, not a bug: the shared base of every command's errors."""


class ModelBuildError(ToolError):
    """A problem with a model, its build or its packaging (not a bug in model_build)."""


class InvalidModelError(ModelBuildError):
    """A model file or repository that cannot be used (corrupt ONNX, bad layout, bad config)."""


class MissingToolError(ModelBuildError):
    """A tool the command needs (TensorRT, a GPU, credentials) is not available here."""
