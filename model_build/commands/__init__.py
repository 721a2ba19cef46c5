"""Subcommands of `python -m model_build`, one module each.

Each module defines NAME, HELP, add_arguments(parser) and run(args) -> int. COMMANDS maps each NAME to its module,
so that the CLI imports only the module of the command it runs (model_build/cli.py).
"""

COMMANDS = {
    "init": "init",
    "export": "export",
    "config": "config",
    "check": "check",
    "trt-command": "trt_command",
    "build": "build",
    "package": "package",
    "key": "key",
    "upload": "upload",
    "report": "report",
}
