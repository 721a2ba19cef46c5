"""ONNX in, Triton model repository (and TensorRT engine) out: `python -m model_build --help`."""
