"""What `model_build build` finds on a real GPU host, plus ResNet-50 reference timings.

Run on a GPU machine from the repository root (the results in bench/GPU.md came from one run on
the lent H100):

    python bench/gpu_build.py --simple-onnx PATH/simple/1/model.onnx --out OUT_DIR

Steps, each recorded in OUT_DIR/gpu_build.json whatever happens to the others:
1. `nvidia-smi` and model_build's own GPU detection (trt.detect_gpus).
2. Is TensorRT here? trtexec at the default path or on PATH, the `tensorrt` Python module.
3. `model_build build` of Triton's `simple` example model: a real engine when TensorRT is
   present, else the clear MissingToolError that `build` gives.
4. ResNet-50 (torchvision, random weights, nothing downloaded) exported to ONNX with a dynamic
   batch axis; model_build inspects it and generates its config.pbtxt and trtexec command.
5. Median latency at batch 1 and 16: ONNX Runtime (best execution provider present) and PyTorch
   CUDA (fp32 and fp16), with outputs compared so a fast-but-wrong run shows.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

RESULTS: dict = {}


def step(name):
    def wrap(function):
        def run(*args, **kwargs):
            started = time.monotonic()
            try:
                RESULTS[name] = {"ok": True, **(function(*args, **kwargs) or {})}
            except Exception as error:  # a failed step is a result too; keep going
                RESULTS[name] = {
                    "ok": False,
                    "error": f"{type(error).__name__}: {error}",
                    "trace": traceback.format_exc(),
                }
            RESULTS[name]["seconds"] = round(time.monotonic() - started, 2)
            print(
                f"== {name}: {json.dumps({k: v for k, v in RESULTS[name].items() if k != 'trace'})[:1500]}", flush=True
            )

        return run

    return wrap


@step("environment")
def environment():
    smi = subprocess.run(["nvidia-smi"], capture_output=True, text=True, check=False)
    from model_build.trt import detect_gpus

    gpus = detect_gpus()
    versions = {}
    for module in (
        "torch",
        "torchvision",
        "onnx",
        "onnxruntime",
        "numpy",
        "google.protobuf",
        "pydantic",
        "tritonclient",
    ):
        try:
            versions[module] = __import__(module, fromlist=["__version__"]).__version__
        except Exception as error:
            versions[module] = f"missing ({error})"
    return {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "nvidia_smi_head": smi.stdout.splitlines()[:12],
        "detected_gpus": [g.__dict__ for g in gpus],
        "versions": versions,
    }


@step("tensorrt_presence")
def tensorrt_presence():
    from model_build.trt import DEFAULT_TRTEXEC

    found = {
        "default_trtexec_exists": Path(DEFAULT_TRTEXEC).exists(),
        "trtexec_on_path": shutil.which("trtexec"),
        "libnvinfer": subprocess.run(
            "ldconfig -p | grep -i nvinfer | head -3", shell=True, capture_output=True, text=True, check=False
        ).stdout.strip(),
    }
    try:
        import tensorrt

        found["tensorrt_module"] = tensorrt.__version__
    except Exception as error:
        found["tensorrt_module"] = f"not importable ({error})"
    return found


def run_command(module_name: str, argv: list[str]) -> tuple[int, str]:
    """Run one model_build command the way cli.main does (parse, run, print ERROR on ModelBuildError)."""
    import importlib

    from model_build.errors import ModelBuildError

    command = importlib.import_module(f"model_build.commands.{module_name}")
    parser = argparse.ArgumentParser(prog=f"python -m model_build {command.NAME}")
    command.add_arguments(parser)
    try:
        return int(command.run(parser.parse_args(argv))), ""
    except ModelBuildError as error:
        return 1, f"ERROR: {error}"


@step("build_simple")
def build_simple(simple_onnx: Path, out: Path):
    repository = out / "repo"
    code, message = run_command(
        "build",
        [
            "--onnx",
            str(simple_onnx),
            "--name",
            "simple",
            "--max-batch-size",
            "8",
            "--repository",
            str(repository),
            "--timing-cache",
            str(out / "simple.timing.cache"),
        ],
    )
    made = sorted(str(p.relative_to(out)) for p in repository.rglob("*")) if repository.exists() else []
    return {"exit_code": code, "message": message, "files_written": made}


@step("resnet50_export_and_config")
def resnet50_export(out: Path):
    import torch
    import torchvision

    torch.manual_seed(0)
    model = torchvision.models.resnet50(weights=None).eval()
    torch.save(model.state_dict(), out / "resnet50.pt")  # the timing step runs these same weights
    path = out / "resnet50.onnx"
    sample = torch.randn(1, 3, 224, 224)
    try:
        torch.onnx.export(
            model,
            sample,
            str(path),
            input_names=["input"],
            output_names=["logits"],
            dynamic_axes={"input": {0: "batch"}, "logits": {0: "batch"}},
            opset_version=17,
            dynamo=False,
        )
        exporter = "torchscript (dynamo=False)"
    except Exception:
        batch = torch.export.Dim("batch", min=1, max=64)
        torch.onnx.export(
            model,
            (sample,),
            str(path),
            input_names=["input"],
            output_names=["logits"],
            dynamic_shapes={"x": {0: batch}},
            dynamo=True,
        )
        exporter = "dynamo"
    from model_build import pbtxt
    from model_build.onnx_inspect import inspect_model
    from model_build.trt import trtexec_argv
    from serving_facts.settings import ModelSettings

    signature = inspect_model(path)
    settings = ModelSettings(
        name="resnet50",
        source={"export": "resnet50"},
        max_batch_size=32,
        dynamic_batching={"preferred_batch_sizes": [8, 16, 32]},
        warmup=True,
    )
    config_text = pbtxt.render(pbtxt.build_model_config(signature, settings), source=path)
    (out / "resnet50.config.pbtxt").write_text(config_text)
    argv = trtexec_argv(
        signature, settings, engine_path=Path("repo/resnet50/1/model.plan"), timing_cache=Path("resnet50.timing.cache")
    )
    return {
        "exporter": exporter,
        "onnx_bytes": path.stat().st_size,
        "inputs": [s.__dict__ for s in signature.inputs],
        "outputs": [s.__dict__ for s in signature.outputs],
        "trtexec_argv": argv,
    }


def median_ms(function, warmup: int, repeat: int) -> float:
    for _ in range(warmup):
        function()
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        function()
        times.append((time.perf_counter() - started) * 1000)
    return round(statistics.median(times), 3)


@step("resnet50_timings")
def resnet50_timings(out: Path):
    import numpy as np
    import onnxruntime as ort
    import torch
    import torchvision

    available = ort.get_available_providers()
    providers = [p for p in ("TensorrtExecutionProvider", "CUDAExecutionProvider") if p in available]
    providers.append("CPUExecutionProvider")
    session_options = ort.SessionOptions()
    session_options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    session = ort.InferenceSession(str(out / "resnet50.onnx"), session_options, providers=providers)

    model = torchvision.models.resnet50(weights=None).eval()
    model.load_state_dict(torch.load(out / "resnet50.pt"))  # the weights that were exported to ONNX
    gpu_model = model.cuda()
    half_model = torchvision.models.resnet50(weights=None).eval().cuda().half()
    half_model.load_state_dict({k: v.half() if v.is_floating_point() else v for k, v in gpu_model.state_dict().items()})

    def graph_ms(module, static_input, repeat=50):
        """Median GPU time of one CUDA-graph replay (launch overhead removed), timed with CUDA events."""
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for _ in range(3):
                module(static_input)
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            module(static_input)
        for _ in range(5):
            graph.replay()
        times = []
        for _ in range(repeat):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            graph.replay()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
        return round(statistics.median(times), 3)

    with torch.inference_mode():  # bring the GPU to its working clocks before any figure is taken
        warm = torch.randn(16, 3, 224, 224, device="cuda")
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline:
            gpu_model(warm)
        torch.cuda.synchronize()

    rows = []
    for batch in (1, 16, 64):
        x = np.random.default_rng(batch).standard_normal((batch, 3, 224, 224), dtype=np.float32)
        row = {"batch": batch}
        if batch <= 16:
            row["onnxruntime_cpu_ms"] = median_ms(lambda x=x: session.run(None, {"input": x}), warmup=3, repeat=20)
            ort_out = session.run(None, {"input": x})[0].astype(np.float64)
        xt = torch.from_numpy(x).cuda()
        with torch.inference_mode():
            xh = xt.half()

            def fp32(xt=xt):
                gpu_model(xt)
                torch.cuda.synchronize()

            def fp16(xh=xh):
                half_model(xh)
                torch.cuda.synchronize()

            for attempt in (1, 2):  # twice: the spread between the two is the noise floor
                row[f"torch_eager_fp32_ms_run{attempt}"] = median_ms(fp32, warmup=10, repeat=50)
                row[f"torch_eager_fp16_ms_run{attempt}"] = median_ms(fp16, warmup=10, repeat=50)
                row[f"torch_graph_fp32_ms_run{attempt}"] = graph_ms(gpu_model, xt)
                row[f"torch_graph_fp16_ms_run{attempt}"] = graph_ms(half_model, xh)
            ref = gpu_model(xt).double()
            row["fp16_vs_fp32_rel_error"] = round(float((half_model(xh).double() - ref).norm() / ref.norm()), 6)
            if batch <= 16:
                rel = float(np.linalg.norm(ort_out - ref.cpu().numpy()) / ref.norm().item())
                row["onnxruntime_vs_torch_fp32_rel_error"] = round(rel, 6)
        row["images_per_s_graph_fp16"] = round(batch * 1000 / row["torch_graph_fp16_ms_run2"], 1)
        rows.append(row)
    return {
        "onnxruntime_providers_available": available,
        "onnxruntime_providers_used": session.get_providers(),
        "torch_cudnn_allow_tf32": torch.backends.cudnn.allow_tf32,
        "torch_matmul_allow_tf32": torch.backends.cuda.matmul.allow_tf32,
        "timing_note": "onnxruntime_cpu: median host wall time of session.run (CPU EP, 16 cores); torch_eager: "
        "median host wall time incl. torch.cuda.synchronize(), input already on the GPU; torch_graph: median "
        "CUDA-event time of one CUDA-graph replay. 'fp32' convolutions run as TF32 (cudnn.allow_tf32).",
        "rows": rows,
    }


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--simple-onnx", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    environment()
    tensorrt_presence()
    build_simple(args.simple_onnx, args.out)
    resnet50_export(args.out)
    resnet50_timings(args.out)
    RESULTS["wall_s_total"] = round(time.monotonic() - START, 1)
    (args.out / "gpu_build.json").write_text(json.dumps(RESULTS, indent=2, default=str))
    print(
        json.dumps(
            {
                k: {kk: vv for kk, vv in v.items() if kk != "trace"} if isinstance(v, dict) else v
                for k, v in RESULTS.items()
            },
            indent=1,
            default=str,
        )[-6000:]
    )
    return 0


START = time.monotonic()
if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
