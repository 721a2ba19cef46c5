"""Is a stage's cloud assembly current? `make deploy|diff|destroy` re-synthesize only when it is not (#27 item 3).

`make synth-stage` records, beside the assembly it wrote (`<assembly>/.inputs-fingerprint`), a hash of what the
synth read: the content of every project file git lists (tracked and untracked, `.gitignore` honoured:
`git ls-files -co --exclude-standard`) except the assemblies, build outputs, virtual environments,
node_modules and what the app never reads (tests/, docs/, bench/, .ci/, Markdown); every file under the config
folder; every file a config value names under the project that git does not list (an ignored
`models/big.onnx`); the stage, the config folder and the Python version. The deploy targets compare it with the
inputs now and synthesize again only when they differ (a synth takes one to three minutes). Outside a git work
tree nothing is recorded, so every target synthesizes as before.

    python -m stacks.assembly_fingerprint check --app cdk.out --stage dev --config-dir config   # 0: current
    python -m stacks.assembly_fingerprint begin --app cdk.out --stage dev --config-dir config    # before a synth
    python -m stacks.assembly_fingerprint record --app cdk.out --stage dev --config-dir config   # after it
"""

from __future__ import annotations

import argparse
import hashlib
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

from stacks.deploy_preflight import read_document, stage_files
from stage_config.placeholders import string_values

FINGERPRINT_FILE = ".inputs-fingerprint"
# Never inputs of a synth: the assemblies themselves, build outputs, virtual environments, npm's folder; and
# what the app never reads (tests, documentation, benchmarks, CI), so that editing them keeps the assembly.
# Files under the config folder and files a config value names count whatever their folder.
EXCLUDED_PREFIXES = ("cdk.out", "build/", ".venv", "node_modules/", "tests/", "docs/", "bench/", ".ci/")
EXCLUDED_SUFFIXES = (".md",)
FORMAT = "triton-assembly-fingerprint/1"


def input_files(root: Path, config_dir: Path = Path("config")) -> list[str] | None:
    """The project files git lists that a synth may read (relative paths, sorted), or None outside a git work
    tree."""
    try:
        result = subprocess.run(
            ["git", "ls-files", "-z", "-co", "--exclude-standard"],
            cwd=root, capture_output=True, check=True, timeout=60,
        )  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return None
    names = {name for name in result.stdout.decode("utf-8", "surrogateescape").split("\0") if name}
    config_prefix = f"{Path(config_dir).as_posix().rstrip('/')}/"
    return sorted(
        name
        for name in names
        if name.startswith(config_prefix)
        or not (name.startswith(EXCLUDED_PREFIXES) or name.endswith(EXCLUDED_SUFFIXES))
    )


def referenced_paths(root: Path, stage: str, config_dir: Path) -> list[str]:
    """Relative paths under `root` that a string value of the stage's config files names and that exist
    (model sources, environments): git may ignore them, the synth reads them."""
    found = set()
    for config in stage_files(stage, root / config_dir):
        document = read_document(config)
        for _, value in string_values(document.data if document is not None else {}):
            if "://" in value or "\0" in value or len(value) > 1024:
                continue
            candidate = root / value
            try:
                if candidate.exists() and candidate.resolve().is_relative_to(root.resolve()):
                    found.update(_files_under(root, candidate))
            except (OSError, ValueError):
                continue
    return sorted(found)


def _files_under(root: Path, path: Path) -> list[str]:
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    return [str(f.relative_to(root)) for f in files]


def _digest(path: Path) -> str:
    digest = hashlib.sha256()
    try:
        with path.open("rb") as stream:
            for block in iter(lambda: stream.read(1 << 20), b""):
                digest.update(block)
    except OSError as error:  # listed by git but deleted, or unreadable: that state is the input
        return f"<{type(error).__name__}>"
    return digest.hexdigest()


def fingerprint(root: Path, stage: str, config_dir: Path) -> str | None:
    """The hash of the stage's synth inputs (module docstring); None outside a git work tree."""
    listed = input_files(root, config_dir)
    if listed is None:
        return None
    digest = hashlib.sha256()
    header = [FORMAT, f"stage={stage}", f"config_dir={Path(config_dir)}", f"python={sys.version.split()[0]}"]
    digest.update("\n".join(header).encode())
    # The stage files themselves, wherever the config folder is (CONFIG_DIR may lie outside the project).
    configs = {str(path) for path in stage_files(stage, root / config_dir)}
    for name in sorted(set(listed) | set(referenced_paths(root, stage, Path(config_dir))) | configs):
        digest.update(f"\n{name}\0{_digest(root / name)}".encode("utf-8", "surrogateescape"))
    return digest.hexdigest()


def recorded(app: Path) -> str | None:
    """The fingerprint `record` wrote for the assembly at `app`, if it is there with its manifest."""
    try:
        if not (app / "manifest.json").is_file():
            return None
        return (app / FINGERPRINT_FILE).read_text().strip() or None
    except OSError:
        return None


def assembly_digest(app: Path) -> str:
    """The hash of the assembly's manifest: another synth into the same folder (a manual `cdk synth -c
    stage=prod`) rewrites it, so the fingerprint recorded for the earlier synth no longer vouches for it."""
    return _digest(app / "manifest.json")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m stacks.assembly_fingerprint", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "action",
        choices=("check", "begin", "record"),
        help="check: exit 0 when current; begin: before a synth (hash the inputs it reads); record: after it",
    )
    parser.add_argument("--app", type=Path, required=True, help="the stage's cloud assembly (e.g. cdk.out)")
    parser.add_argument("--stage", required=True)
    parser.add_argument("--config-dir", type=Path, default=Path("config"), help="default: config")
    parser.add_argument("--root", type=Path, default=Path("."), help="Default: - the current folder")
    return parser


def main(argv: Iterable[str] | None = None) -> int:
    args = _parser().parse_args(list(argv) if argv is not None else None)
    final, pending = args.app / FINGERPRINT_FILE, args.app / f"{FINGERPRINT_FILE}.pending"
    if args.action == "record":
        # The inputs as `begin` saw them before the synth read them: an edit during the synth is not masked;
        # with the digest of the assembly this synth wrote.
        if pending.is_file():
            final.write_text(f"{pending.read_text().strip()} {assembly_digest(args.app)}\n")
            pending.unlink()
        return 0
    current = fingerprint(args.root, args.stage, args.config_dir)
    if args.action == "begin":
        final.unlink(missing_ok=True)  # a failed synth leaves no fingerprint: the next target synthesizes
        pending.unlink(missing_ok=True)
        if current is not None:
            args.app.mkdir(parents=True, exist_ok=True)
            pending.write_text(current + "\n")
        return 0
    previous = recorded(args.app)
    if current is not None and previous == f"{current} {assembly_digest(args.app)}":
        print(f"{args.app}: current (no input changed since its synth): not synthesized again")
        return 0
    why = (
        "no recorded synth"
        if previous is None or current is None
        else "inputs changed since its synth"
        if previous.split()[0] != current
        else "written by another synth since"
    )
    print(f"{args.app}: {why}: synthesizing")
    return 1


if __name__ == "__main__":
    sys.exit(main())
