"""The GPU model build: CodeBuild projects and the ensure-artifact custom resources (docs/build.md)."""
