"""Facts the construct library (triton_cdk) and the model build (model_build) share: the instance catalogue, Triton
releases, host drivers, the build/serve matcher, the model settings and the artifacts' content addresses.

No CLI and no CDK: imported by the CDK app, by the constructs and by the build image (shipped to CodeBuild as a
source of its own). Its errors derive from `serving_facts.errors.ServingFactError` (a ValueError); the commands
that call it catch that base beside their own (model_build.cli.run_cli).
"""
