"""AWS's Guard rules on every synth: `cdklabs-cdk-validator-cfnguard`, strict, limited to the types present, and
run beside the rest of the validation instead of after it.

The rules are AWS Control Tower's proactive controls as the cdklabs plugin bundles them (pinned in
requirements.txt), evaluated by the plugin's own code with the cfn-guard binary it bundles. Three departures from
registering the plain `CfnGuardValidator`, each measured (bench/README.md):
- Every violation is an error. The plugin gives its violations no severity, and aws-cdk-lib (2.275) re-judges a
  report once any of its findings is acknowledged: success unless a violation left has severity "error" or
  "fatal". So after the first acknowledgement, further findings would pass.
- Only the rule files that check a resource type the templates hold are run. A Control Tower rule file selects
  the resources it checks by type (`Resources.*[ Type == %X_TYPE ]`, with `let X_TYPE = "AWS::..."`; the header
  lists them under "Reports on:"), so a file that selects none of the types present finds nothing: tested over
  a template with a resource of every type any file names. The types a file selects are those of its header and
  of its `Type ==` selectors, compared ignoring case (two headers spell `AWS::AutoScaling::AutoscalingGroup`);
  a selector whose type cannot be read makes every type the file names count. Types a file names only as the
  target of a reference (a trail's `AWS::KMS::Key`) do not select it. On the dev stage this runs 28 of the 237
  files (cfn-guard's CPU time: 10.2 s for all of them, 0.6 s for these).
- The run overlaps the other checks. aws-cdk-lib invokes the validation plugins one after another, in the order
  they were added. `GuardRun.starter` (added first) starts the plugin, in a Node.js process of its own, on the
  templates it is given and returns at once; cdk-nag, and on a stage app CloudFormation's default rules
  (triton_cdk/cfn_rules.py; aws-cdk-lib adds its built-in copy after every plugin of the app), then run while
  cfn-guard runs; `GuardRun.checker` (added last) waits for the report and returns
  it. Running the plugin in the jsii kernel instead blocks it for the whole cfn-guard run (0.6-0.7 s on the dev
  stage), and its findings come back as objects whose every field is one more round trip from Python.
  aws-cdk-lib's own engine can run Guard rules too (`CloudFormationValidatePlugin(guard_rules=...)`), but took
  1.4 s for the same rules and templates, on the synth's one thread.

A plugin failure (Node.js missing, the run crashing, no report) fails the synth: it never passes unchecked.

The plugin's files (its lib/, its cfn-guard for this platform, the rule files) are read out of the package's
12 MB jsii tarball once per package version and kept in a private per-user cache, as jsii keeps its extracted
packages: reading the tarball took 0.35 s of every synth. The tarball is found through the package's metadata:
importing the package would load its jsii assembly into the kernel, which nothing here needs.
"""

from __future__ import annotations

import atexit
import functools
import importlib.metadata
import json
import os
import platform
import re
import shutil
import stat
import tarfile
import tempfile
from collections.abc import Iterable
from pathlib import Path

import aws_cdk as cdk
import jsii

from triton_cdk.node_script import NodeScript, NodeScriptError

GUARD_PACKAGE = "cdklabs-cdk-validator-cfnguard"
# The cdklabs plugin's own name: findings are acknowledged as "cdk-validator-cfnguard::<rule>".
GUARD_PLUGIN = "cdk-validator-cfnguard"
RULES_IN_PACKAGE = "package/rules/control-tower/cfn-guard/"
RESOURCE_TYPE = re.compile(r"AWS::[A-Za-z0-9]+::[A-Za-z0-9:]+")
REPORTS_ON = re.compile(r"#\s*Reports on:\s*\n((?:#[^\n]*AWS::[^\n]*\n)+)")  # one or more lines of types
TYPE_CONSTANT = re.compile(r'let\s+(\w+)\s*=\s*"(AWS::[A-Za-z0-9:]+)"')
TYPE_SELECTOR = re.compile(r'Type\s*==\s*(?:%(\w+)|"(AWS::[A-Za-z0-9:]+)")')
CACHE_INDEX = "reports-on.json"  # rule file name -> the resource types it reports on
CACHE_LAYOUT = "v5"  # rules/ and package/ (the plugin's code and binary); bump when the layout changes
# The plugin's platform names (its lib/plugin.js getPlatform / getArchitecture).
GUARD_PLATFORM = {"Linux": "ubuntu", "Darwin": "macos"}.get(platform.system())
GUARD_ARCHITECTURE = {"x86_64": "x86_64", "AMD64": "x86_64", "aarch64": "aarch64", "arm64": "aarch64"}.get(
    platform.machine()
)
RUN_TIMEOUT_SECONDS = 600  # far above the dev stage's 0.7 s: a hung run fails the synth, never passes it

# Runs in its own Node.js process: the cdklabs plugin's validate() over the templates with the given rule files;
# the report goes to stdout as JSON. argv[1]: the plugin's lib/plugin.js; stdin: {"templates": [...], "rules": [...]}.
RUNNER = """
const chunks = [];
process.stdin.on('data', (c) => chunks.push(c));
process.stdin.on('end', () => {
  const { CfnGuardValidator } = require(process.argv[1]);
  const { templates, rules } = JSON.parse(Buffer.concat(chunks).toString('utf-8'));
  const validator = new CfnGuardValidator({ controlTowerRulesEnabled: false, rules });
  process.stdout.write(JSON.stringify(validator.validate({ templatePaths: templates })));
});
"""


def _package_member(name: str) -> bool:
    """What the runner needs of the package besides the rules: its code and this platform's cfn-guard."""
    if name.startswith("/") or ".." in name.split("/"):
        return False
    return (
        name == "package/package.json"
        or (name.startswith("package/lib/") and name.endswith(".js"))
        or name == f"package/bin/{GUARD_PLATFORM}/{GUARD_ARCHITECTURE}/cfn-guard"
    )


def selected_types(rule_text: str) -> set[str]:
    """The resource types a rule file checks: those of its "Reports on:" header and its `Type ==` selectors;
    every type it names when a selector's constant is not a resource type this can read."""
    header = REPORTS_ON.search(rule_text)
    types = set(RESOURCE_TYPE.findall(header.group(1))) if header else set()
    constants = dict(TYPE_CONSTANT.findall(rule_text))
    for constant, literal in TYPE_SELECTOR.findall(rule_text):
        if literal:
            types.add(literal)
        elif constant in constants:
            types.add(constants[constant])
        elif not constant.islower():  # lower case: a helper's parameter (`check_local_references`), no selector
            return set(RESOURCE_TYPE.findall(rule_text))
    return types


def _read_package(archive: Path, folder: Path) -> dict[str, list[str]]:
    """Writes the rule files (rules/) and the plugin's code and binary (package/) into `folder`; returns the index."""
    index: dict[str, list[str]] = {}
    (folder / "rules").mkdir()
    with tarfile.open(archive) as tar:
        for member in tar.getmembers():
            if not member.isfile():
                continue
            if member.name.startswith(RULES_IN_PACKAGE) and member.name.endswith(".guard") and ".." not in member.name:
                text = tar.extractfile(member).read().decode()
                name = member.name.removeprefix(RULES_IN_PACKAGE).replace("/", "__")
                (folder / "rules" / name).write_text(text)
                index[name] = sorted(selected_types(text))
            elif _package_member(member.name):
                target = folder / member.name
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(tar.extractfile(member).read())
                target.chmod(0o700 if member.name.endswith("/cfn-guard") else 0o600)
    return index


def _only_owner_can_change(folder: Path) -> bool:
    """Whether no other user can replace `folder` or anything in it: it and every folder above it belong to this
    user or root and are not writable by others, except sticky folders (/tmp), where others cannot rename or
    delete what is not theirs."""
    for path in (folder, *folder.parents):
        info = path.lstat()
        if not stat.S_ISDIR(info.st_mode) or info.st_uid not in (os.getuid(), 0):
            return False
        others_write = info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
        if others_write and (path == folder or not info.st_mode & stat.S_ISVTX):
            return False
    return True


def _private_cache_root() -> Path | None:
    """The user's cache folder for the plugin's files (its real path), created 0700; None when others could
    change it (they could then plant weaker rules, other code or another binary, which every synth runs: the
    caller extracts into a fresh temp folder instead)."""
    root = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "triton-cdk" / "cfn-guard-rules"
    try:
        root.mkdir(mode=0o700, parents=True, exist_ok=True)
        root = root.resolve(strict=True)
        return root if _only_owner_can_change(root) else None
    except OSError:
        return None


def _cached_package(archive: Path) -> tuple[Path, dict[str, list[str]]]:
    """(folder of the extracted files, rule index) for this exact tarball: from the cache, else extracted."""
    info = archive.stat()
    root = _private_cache_root()
    if root is None:
        folder = Path(tempfile.mkdtemp(prefix="cfn-guard-rules-"))
        atexit.register(shutil.rmtree, folder, ignore_errors=True)
        return folder, _read_package(archive, folder)
    folder = root / f"{archive.name}-{info.st_size}-{info.st_mtime_ns}-{CACHE_LAYOUT}"
    try:
        index = json.loads((folder / CACHE_INDEX).read_text())
        if all((folder / "rules" / name).is_file() for name in index):
            return folder, index
    except (OSError, ValueError):
        pass
    # Not model_build.atomic.atomic_directory: that replaces a folder another synth may be reading; here the
    # first complete copy wins and a later one is discarded (the rename fails on an existing folder).
    staging = Path(tempfile.mkdtemp(prefix=".partial-", dir=root))
    index = _read_package(archive, staging)
    (staging / CACHE_INDEX).write_text(json.dumps(index))  # written last: its presence marks a whole copy
    shutil.rmtree(folder, ignore_errors=True)  # an incomplete earlier copy
    try:
        staging.rename(folder)
    except OSError:  # another synth finished the same copy first
        shutil.rmtree(staging, ignore_errors=True)
    return folder, index


@functools.cache
def _extracted() -> tuple[Path, dict[str, list[str]]]:
    (archive,) = [f.locate() for f in importlib.metadata.files(GUARD_PACKAGE) or [] if f.name.endswith(".jsii.tgz")]
    return _cached_package(Path(archive))


def control_tower_rules() -> dict[Path, frozenset[str]]:
    """Every bundled Control Tower rule file -> the resource types it names, as written.

    A file that names no type maps to an empty set and always runs.
    """
    folder, index = _extracted()
    return {folder / "rules" / name: frozenset(types) for name, types in index.items()}


def plugin_code() -> Path:
    """The cdklabs plugin's lib/plugin.js, beside the cfn-guard binary it runs (bin/<platform>/<arch>/)."""
    return _extracted()[0] / "package" / "lib" / "plugin.js"


def rules_for(resource_types: Iterable[str]) -> list[Path]:
    """The rule files that name any of `resource_types`, ignoring case (and those that name no type), sorted."""
    present = {t.lower() for t in resource_types}
    return sorted(
        path for path, types in control_tower_rules().items() if not types or {t.lower() for t in types} & present
    )


def template_resource_types(template_paths: Iterable[str]) -> set[str]:
    types = set()
    for path in template_paths:
        for resource in json.loads(Path(path).read_text()).get("Resources", {}).values():
            types.add(resource.get("Type", ""))
    return types


class GuardRunError(RuntimeError):
    """The Guard rules could not be run: the synth fails (aws-cdk-lib reports the plugin as failed)."""


class GuardRun:
    """One run of the cdklabs plugin over an app's templates, in a Node.js process beside the synth.

    Add `starter` first and `checker` last to the app's validation plugins (triton_cdk/nag.py `enable_checks`).
    `node`: the Node.js executable to run it with. Default: `node` on PATH, as the jsii kernel finds its own.
    """

    def __init__(self, *, node: str = "node") -> None:
        self._node = node
        self._script: NodeScript | None = None
        self._templates: tuple[str, ...] = ()
        self.starter = _GuardStart(self)
        self.checker = GuardRulesCheck(self)

    def start(self, template_paths: Iterable[str]) -> None:
        self.stop()
        self._templates = tuple(template_paths)
        rules = [str(path) for path in rules_for(template_resource_types(self._templates))]
        if not rules:  # no rule names a type present (cfn-guard refuses to run without rules): nothing to find
            return
        try:
            self._script = NodeScript(self._node, RUNNER, str(plugin_code()))
            self._script.send({"templates": list(self._templates), "rules": rules})
        except OSError as error:
            self.stop()
            raise GuardRunError(f"cannot start the Guard rules' Node.js process ({self._node}): {error}") from error

    def report(self, template_paths: Iterable[str]) -> dict:
        """The plugin's report ({"success", "violations"}) for `template_paths`, started now if not yet."""
        if self._script is None or tuple(template_paths) != self._templates:
            self.start(template_paths)
        if self._script is None:
            return {"success": True, "violations": []}
        script, self._script = self._script, None
        try:
            return script.result(RUN_TIMEOUT_SECONDS)
        except NodeScriptError as error:
            raise GuardRunError(f"the Guard rules' run {error}") from error

    def stop(self) -> None:
        if self._script is not None:
            self._script.stop()
            self._script = None


@jsii.implements(cdk.IPolicyValidationPluginBeta1)
class _GuardStart:
    """Starts the run; reports nothing (aws-cdk-lib leaves a plugin with nothing to report out of the report)."""

    def __init__(self, run: GuardRun) -> None:
        self._run = run

    @property
    def name(self) -> str:
        return f"{GUARD_PLUGIN}-start"

    @property
    def version(self) -> str:
        return "1"

    @property
    def rule_ids(self) -> list[str]:
        return []

    def validate(self, context: cdk.IPolicyValidationContextBeta1) -> cdk.PolicyValidationPluginReportBeta1:
        self._run.start(context.template_paths)
        return cdk.PolicyValidationPluginReportBeta1(success=True, violations=[])


@jsii.implements(cdk.IPolicyValidationPluginBeta1)
class GuardRulesCheck:
    """The run's findings, each an error, under the cdklabs plugin's name (see the module doc)."""

    def __init__(self, run: GuardRun) -> None:
        self._run = run

    @property
    def name(self) -> str:
        return GUARD_PLUGIN

    @property
    def version(self) -> str:
        return importlib.metadata.version(GUARD_PACKAGE)

    @property
    def rule_ids(self) -> list[str] | None:
        return None

    def validate(self, context: cdk.IPolicyValidationContextBeta1) -> cdk.PolicyValidationPluginReportBeta1:
        report = self._run.report(context.template_paths)
        violations = [
            cdk.PolicyViolationBeta1(
                rule_name=v["ruleName"],
                description=v.get("description") or v["ruleName"],
                fix=v.get("fix"),
                rule_metadata=v.get("ruleMetadata"),
                severity="error",
                violating_resources=[
                    cdk.PolicyViolatingResourceBeta1(
                        resource_logical_id=r["resourceLogicalId"],
                        template_path=r["templatePath"],
                        locations=list(r.get("locations") or []),
                    )
                    for r in v.get("violatingResources", [])
                ],
            )
            for v in report.get("violations", [])
        ]
        return cdk.PolicyValidationPluginReportBeta1(
            success=bool(report.get("success")) and not violations, violations=violations, plugin_version=self.version
        )
