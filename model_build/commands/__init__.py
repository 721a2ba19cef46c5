"""Subcommands of `python -m model_build`, one module each.

Each module defines NAME, HELP, add_arguments(parser) and run(args) -> int.
"""

COMMAND_MODULES = (
    "init",
    "export",
    "config",
    "check",
    "trt_command",
    "build",
    "package",
    "key",
    "upload",
    "report",
)
