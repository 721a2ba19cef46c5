"""The Triton container's environment variable names the library sets itself.

Mapping the app's `container:` settings to the rest of the environment is the app's job
(stacks/container_environment.py): the library takes a plain `environment` mapping.
"""

__all__ = ["DEFAULT_MODEL_NAME"]

DEFAULT_MODEL_NAME = "SAGEMAKER_TRITON_DEFAULT_MODEL_NAME"
