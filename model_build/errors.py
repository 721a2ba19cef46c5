"""One exception hierarchy: `cli.main` prints these as `ERROR: <message>` and exits 1.

Messages name the file or field and end with what to do about it.
"""


class ModelBuildError(Exception):
    """A problem with the user's input or environment (not a bug in model_build)."""


class InvalidModelError(ModelBuildError):
    """A model file or repository that cannot be used (corrupt ONNX, bad layout, bad config)."""


class MissingToolError(ModelBuildError):
    """A tool the command needs (TensorRT, a GPU, credentials) is not available here."""
