"""Environment variables the build projects (triton_cdk.artifact_build) set on a build and model_build reads
(model_build/buildspec.yml documents them all)."""

# An INT8 model's calibration cache as shipped with the build (s3://...): model_build.calibration fetches it.
CALIBRATION_URI = "CALIBRATION_URI"
# A TensorRT model's accuracy samples (.npz) as shipped with the build (s3://...): the build check reads them.
SAMPLES_URI = "SAMPLES_URI"
