"""`python -m model_build export MODEL --out FILE`: export a reference model to ONNX."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from model_build.errors import ModelBuildError
from serving_facts.settings import EXPORTABLE_MODELS

NAME = "export"
HELP = "Export a reference model (resnet50, yolov5s, bert_base) to ONNX with a dynamic batch axis."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("model", choices=EXPORTABLE_MODELS, help="which reference model")
    parser.add_argument(
        "--out", type=Path, metavar="FILE", help="ONNX file to write, e.g. model.onnx (required to export)"
    )
    parser.add_argument(
        "--print-requirements",
        action="store_true",
        help="print the pip requirements of this export (one per line) and exit, installing nothing",
    )


def run(args: argparse.Namespace) -> int:
    from model_build.export import EXPORT_REQUIREMENTS, export_model, recipe

    chosen = recipe(args.model)
    if args.print_requirements:
        print("\n".join(EXPORT_REQUIREMENTS[chosen.name]))
        return 0
    if args.out is None:
        raise ModelBuildError("--out FILE is required to export (or use --print-requirements)")
    if args.out.suffix != ".onnx":
        raise ModelBuildError(f"--out {args.out} must be an .onnx file")
    path = export_model(args.model, args.out)
    print(f"exported {args.model} to {path} (inputs: {', '.join(chosen.inputs)})", file=sys.stderr)
    return 0
