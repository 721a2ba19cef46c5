"""Local model sources stay inside the project: `source.path` and a local `tensorrt.calibration_cache`.

The rule lives in model_build.source_paths, so `python -m model_build key` (which hashes the same
sources in the build, without the CDK) refuses exactly what this config loader refuses.
"""

from model_build.source_paths import MAX_SOURCE_ENTRIES, model_source_problems, source_path_problems

__all__ = ["MAX_SOURCE_ENTRIES", "model_source_problems", "source_path_problems"]
