"""AWS's Guard rules on every synth: the Control Tower rule files, run by aws-cdk-lib's own validation engine.

The rules are AWS Control Tower's proactive controls as `cdklabs-cdk-validator-cfnguard` bundles them (pinned in
requirements.txt). They run inside aws-cdk-lib's `CloudFormationValidatePlugin` (its documented `guard_rules`
prop): the engine CloudFormation's default rules already start on every synth (a WebAssembly build of
cfn-guard), so no second engine, no cfn-guard process and no Python conversion of each finding. Measured against
the cdklabs plugin's own cfn-guard 3.1.1 run, the findings are the same (tests/contract/test_guard_rules.py), and
the synth is faster (bench/README.md). Findings are errors (severity "error"), so an unacknowledged one fails synth
once `@aws-cdk/core:validateAgainstDefaultRules` is set explicitly (without it aws-cdk-lib downgrades this
plugin's errors to warnings, so `guard_rules_plugin` refuses to run then); acknowledge one with
`CloudFormation-Validate::<rule>` (triton_cdk/guard.py).

Only the rule files that report on a resource type the app holds are loaded: each Control Tower rule file names
its types ("Reports on:"), a rule over absent types finds nothing, and every loaded file adds to the engine's
start-up (28 of the 237 files for the dev stage). The types come from the construct tree when the checks are
enabled; `GuardCoverageCheck` fails synth if a template holds a type whose rules were not loaded (a resource
added afterwards).

The rule files are read out of the package's 12 MB jsii tarball once per package version and kept in a
private per-user cache (as jsii keeps its extracted packages): reading the tarball took 0.35 s of every synth.
The tarball is found through the package's metadata: importing the package would load its jsii assembly into
the jsii kernel, which nothing here uses.
"""

from __future__ import annotations

import functools
import importlib.metadata
import json
import os
import re
import shutil
import stat
import tarfile
import tempfile
from collections.abc import Iterable
from pathlib import Path

import aws_cdk as cdk
import jsii
from constructs import IConstruct

GUARD_PACKAGE = "cdklabs-cdk-validator-cfnguard"
RULES_IN_PACKAGE = "package/rules/control-tower/cfn-guard/"
REPORTS_ON = re.compile(r"#\s*Reports on:\s*\n((?:#[^\n]*AWS::[^\n]*\n)+)")  # one or more lines of types
# aws-cdk-lib keeps this plugin's errors errors only when the flag is set explicitly (synthesis-validation.js,
# `downgradeCfnValidateErrorsToWarnings`).
VALIDATE_FLAG = "@aws-cdk/core:validateAgainstDefaultRules"


CACHE_INDEX = "reports-on.json"  # rule file name -> the resource types it reports on


def _read_rules_from_package(archive: Path, folder: Path) -> dict[str, list[str]]:
    """Writes every Control Tower rule file of the package's tarball into `folder`; returns the index."""
    index: dict[str, list[str]] = {}
    with tarfile.open(archive) as tar:
        for member in tar.getmembers():
            if member.isfile() and member.name.startswith(RULES_IN_PACKAGE) and member.name.endswith(".guard"):
                text = tar.extractfile(member).read().decode()
                name = member.name.removeprefix(RULES_IN_PACKAGE).replace("/", "__")
                (folder / name).write_text(text)
                found = REPORTS_ON.search(text)
                index[name] = sorted(set(re.findall(r"AWS::[A-Za-z0-9:]+", found.group(1)))) if found else []
    return index


def _private_cache_root() -> Path | None:
    """The user's cache folder for the rules, created 0700; None when it is not private to this user
    (others could then plant weaker rules: the caller extracts into a fresh temp folder instead)."""
    root = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "triton-cdk" / "cfn-guard-rules"
    try:
        root.mkdir(mode=0o700, parents=True, exist_ok=True)
        info = root.stat()
    except OSError:
        return None
    private = info.st_uid == os.getuid() and not info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
    return root if private and stat.S_ISDIR(info.st_mode) else None


def _cached_rules(archive: Path) -> tuple[Path, dict[str, list[str]]]:
    """(folder of the rule files, index) for this exact tarball: from the cache, else extracted (atomically)."""
    info = archive.stat()
    root = _private_cache_root()
    if root is None:
        folder = Path(tempfile.mkdtemp(prefix="cfn-guard-rules-"))
        return folder, _read_rules_from_package(archive, folder)
    folder = root / f"{archive.name}-{info.st_size}-{info.st_mtime_ns}"
    try:
        index = json.loads((folder / CACHE_INDEX).read_text())
        if all((folder / name).is_file() for name in index):
            return folder, index
    except (OSError, ValueError):
        pass
    # Not model_build.atomic.atomic_directory: that replaces a folder another synth may be reading; here the
    # first complete copy wins and a later one is discarded (the rename fails on an existing folder).
    staging = Path(tempfile.mkdtemp(prefix=".partial-", dir=root))
    index = _read_rules_from_package(archive, staging)
    (staging / CACHE_INDEX).write_text(json.dumps(index))  # written last: its presence marks a whole copy
    shutil.rmtree(folder, ignore_errors=True)  # an incomplete earlier copy
    try:
        staging.rename(folder)
    except OSError:  # another synth finished the same copy first
        shutil.rmtree(staging, ignore_errors=True)
    return folder, index


@functools.cache
def control_tower_rules() -> dict[Path, frozenset[str]]:
    """Every bundled Control Tower rule file -> the resource types it reports on.

    A file whose types cannot be read maps to an empty set and always runs.
    """
    (archive,) = [f.locate() for f in importlib.metadata.files(GUARD_PACKAGE) or [] if f.name.endswith(".jsii.tgz")]
    folder, index = _cached_rules(Path(archive))
    return {folder / name: frozenset(types) for name, types in index.items()}


def rules_for(resource_types: Iterable[str]) -> list[Path]:
    """The rule files that report on any of `resource_types` (and those that name no type), sorted."""
    present = set(resource_types)
    return sorted(path for path, types in control_tower_rules().items() if not types or types & present)


def guard_rules_plugin(app: cdk.App, resource_types: Iterable[str]) -> cdk.CloudFormationValidatePlugin:
    """aws-cdk-lib's validation plugin with CloudFormation's default rules and the Control Tower rules for
    `resource_types`. Register it on the App (aws-cdk-lib allows one, at the App); it starts its engine now."""
    if app.node.try_get_context(VALIDATE_FLAG) not in (True, "true"):
        raise ValueError(
            f'the Guard rules need the context flag {VALIDATE_FLAG!r} set to true (cdk.json\'s "context"): '
            "without it aws-cdk-lib reports their findings as warnings and the synth passes"
        )
    return cdk.CloudFormationValidatePlugin(
        include_default_rules=True,
        guard_rules=[
            cdk.ValidationRuleSource(name=path.name, content=path.read_text()) for path in rules_for(resource_types)
        ],
    )


def resource_type(resource: cdk.CfnResource, known: dict[type, str]) -> str:
    """The CloudFormation type of `resource`: from its L1 class's constant (one jsii call per class), else
    from the resource itself (custom resources, plain CfnResource)."""
    cls = type(resource)
    if cls not in known:
        name = getattr(cls, "CFN_RESOURCE_TYPE_NAME", None)
        if not isinstance(name, str):
            return resource.cfn_resource_type
        known[cls] = name
    return known[cls]


def resource_types(constructs: Iterable[IConstruct]) -> set[str]:
    known: dict[type, str] = {}
    return {resource_type(c, known) for c in constructs if isinstance(c, cdk.CfnResource)}


def template_resources(template_paths: Iterable[str]) -> dict[str, list[tuple[str, str]]]:
    """Resource type -> [(template path, logical id)] over the templates."""
    found: dict[str, list[tuple[str, str]]] = {}
    for path in template_paths:
        for logical_id, resource in json.loads(Path(path).read_text()).get("Resources", {}).items():
            found.setdefault(resource.get("Type", ""), []).append((path, logical_id))
    return found


@jsii.implements(cdk.IPolicyValidationPluginBeta1)
class GuardCoverageCheck:
    """Fails synth when a template holds a resource type whose Control Tower rules were not loaded into the
    engine (`guard_rules_plugin`): a resource added after the checks were enabled would otherwise go unchecked."""

    def __init__(self, loaded_types: Iterable[str]) -> None:
        self._loaded = set(loaded_types)

    @property
    def name(self) -> str:
        return "guard-rule-coverage"

    @property
    def version(self) -> str:
        return "1"

    @property
    def rule_ids(self) -> list[str]:
        return ["rules-loaded-for-every-type"]

    def validate(self, context: cdk.IPolicyValidationContextBeta1) -> cdk.PolicyValidationPluginReportBeta1:
        present = template_resources(context.template_paths)
        checked = set().union(*control_tower_rules().values())
        violations = [
            cdk.PolicyViolationBeta1(
                rule_name="rules-loaded-for-every-type",
                description=f"the Guard rules for {kind} were not loaded: a resource of that type was added after "
                "enable_checks() ran (triton_cdk/nag.py); call it once every stack is built",
                violating_resources=[
                    cdk.PolicyViolatingResourceBeta1(resource_logical_id=logical_id, template_path=path, locations=[])
                    for path, logical_id in resources
                ],
                severity="error",
            )
            for kind, resources in sorted(present.items())
            if kind in checked and kind not in self._loaded
        ]
        return cdk.PolicyValidationPluginReportBeta1(success=not violations, violations=violations)
