"""One error hierarchy for the synth side (issue #23 item 9), as model_build has for the build's CLI.

Every refusal raised while an app is built derives from `TritonCdkError`: app.py catches it and prints
`ERROR: ...` without a traceback. The app's own refusals (its config schema's `ConfigError`, the promotion
check's `PromotionError`) derive from it too; a construct refuses its props with `InvalidPropsError`, which is
also a `ValueError`, as aws-cdk-lib's constructs raise from their constructors.
"""

from __future__ import annotations

__all__ = ["InvalidPropsError", "TritonCdkError"]


class TritonCdkError(Exception):
    """A refusal on the synth side: the message says what is wrong and what is allowed."""


class InvalidPropsError(TritonCdkError, ValueError):
    """A construct's props refused (all problems of one construct in one message)."""
