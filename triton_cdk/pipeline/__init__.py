"""The promotion pipeline: its stages, the build-once check, the smoke tests and the approval.

Kept free of imports: the smoke test (triton_cdk.pipeline.smoke) runs in CodeBuild with only the
invocation client's packages installed.
"""
