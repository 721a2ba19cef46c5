"""CloudFormation's default rules (aws-cdk-lib's `CloudFormationValidatePlugin`, default settings), evaluated in a
Node.js process of their own that starts before the app's constructs are built.

aws-cdk-lib runs these rules on every synth (`@aws-cdk/core:validateAgainstDefaultRules`, set in cdk.json). Its
engine is a WebAssembly build of CloudFormation's rules whose start-up alone takes 1.7-3.6 s of one core, on the
synth's one thread (the jsii kernel), after every template is written. `CloudFormationDefaultRules` starts the same
plugin of the same aws-cdk-lib version, from a `node_modules` folder (the project's package.json pins it beside
the CDK CLI), in a process of its own as soon as it is created; the engine starts while Python builds the
constructs, and by the time aws-cdk-lib calls the plugin only the templates are left to check (bench/README.md).

Same plugin, same settings, same report: the background process creates `new CloudFormationValidatePlugin()` and
calls its `validate` with the context aws-cdk-lib gave this plugin (the stacks' templates, accounts and regions),
and the report comes back as the plugin returned it (tests/contract/test_cfn_default_rules.py compares it with
the in-process plugin's). The plugin keeps aws-cdk-lib's name, so its acknowledgements
(`CloudFormation-Validate::<rule>`) and aws-cdk-lib's handling of its findings (warnings unless
`@aws-cdk/core:validateAgainstDefaultRules` is set) are unchanged. Create the app without aws-cdk-lib's own copy
(`cdk.App(builtin_cloud_formation_validation=False)`), or the rules run twice.

Never fewer checks: where the background process cannot run (no `node_modules` given, aws-cdk-lib missing there
or of another version than Python's, the process failing), the plugin runs in this process as aws-cdk-lib would,
and says why on stderr.
"""

from __future__ import annotations

import atexit
import importlib.metadata
import json
import sys
from pathlib import Path

import aws_cdk as cdk
import jsii

from triton_cdk.node_script import NodeScript, NodeScriptError

# aws-cdk-lib's CloudFormationValidatePlugin.PLUGIN_NAME (tests/contract/test_cfn_default_rules.py checks it).
PLUGIN_NAME = "CloudFormation Validate"
RUN_TIMEOUT_SECONDS = 600  # far above the dev stage's few seconds: a hung run falls back, never passes unchecked

# argv[1]: the node_modules folder. Creates the plugin (the engine's slow start) at once, then reads one JSON
# context from stdin and writes {"version", "ruleIds", "report"} to stdout. Empty stdin (the app never reached
# validation): exits quietly.
ENGINE = """
const { CloudFormationValidatePlugin } = require(require('path').join(process.argv[1], 'aws-cdk-lib'));
const plugin = new CloudFormationValidatePlugin();
const chunks = [];
process.stdin.on('data', (c) => chunks.push(c));
process.stdin.on('end', () => {
  if (chunks.length === 0) process.exit(0);
  const context = JSON.parse(Buffer.concat(chunks).toString('utf-8'));
  const report = plugin.validate(context);
  process.stdout.write(JSON.stringify({ version: plugin.version, ruleIds: plugin.ruleIds, report }));
});
"""


def _note(message: str) -> None:
    print(f"[{PLUGIN_NAME}] {message}; running it in the synth's own process instead (slower)", file=sys.stderr)


def engine_package_version(node_modules: Path) -> str | None:
    """The version of aws-cdk-lib installed in `node_modules`, None when there is none."""
    try:
        return json.loads((node_modules / "aws-cdk-lib" / "package.json").read_text())["version"]
    except (OSError, ValueError, KeyError, TypeError):
        return None


@jsii.implements(cdk.IPolicyValidationPlugin)
class CloudFormationDefaultRules:
    """aws-cdk-lib's `CloudFormationValidatePlugin()`, its engine started in the background on creation.

    `node_modules`: a folder holding aws-cdk-lib of the version this Python process uses (and its dependencies).
    Default: none, so the plugin runs in this process when aws-cdk-lib calls it.
    `node`: the Node.js executable. Default: `node` on PATH, as the jsii kernel finds its own.
    """

    def __init__(self, *, node_modules: Path | None = None, node: str = "node") -> None:
        self._in_process: cdk.CloudFormationValidatePlugin | None = None
        self._version: str | None = None
        self._rule_ids: list[str] | None = None
        self._engine: NodeScript | None = None
        if node_modules is None:
            return
        wanted, found = importlib.metadata.version("aws-cdk-lib"), engine_package_version(node_modules)
        if found != wanted:
            _note(f"{node_modules}/aws-cdk-lib is {found or 'missing'}, this app's aws-cdk-lib is {wanted} (npm ci)")
            return
        try:
            self._engine = NodeScript(node, ENGINE, str(node_modules))
        except OSError as error:
            _note(f"cannot start {node}: {error}")
            return
        atexit.register(self.close)  # an app never validated (its synth failed first) leaves no engine running

    def close(self) -> None:
        """Stops the background engine if it has not been used."""
        if self._engine is not None:
            self._engine.stop()
            self._engine = None

    @property
    def name(self) -> str:
        return PLUGIN_NAME

    @property
    def version(self) -> str | None:
        return self._in_process.version if self._in_process is not None else self._version

    @property
    def rule_ids(self) -> list[str] | None:
        return self._in_process.rule_ids if self._in_process is not None else self._rule_ids

    def validate(self, context: cdk.IPolicyValidationContext) -> cdk.PolicyValidationPluginReport:
        if self._engine is not None:
            report = self._background_report(context)
            if report is not None:
                return report
        if self._in_process is None:
            self._in_process = cdk.CloudFormationValidatePlugin()
        return self._in_process.validate(context)

    def _background_report(self, context: cdk.IPolicyValidationContext) -> cdk.PolicyValidationPluginReport | None:
        engine, self._engine = self._engine, None
        request = {
            "templatePaths": list(context.template_paths),
            "stackTemplates": [
                {
                    "stackConstructPath": info.stack_construct_path,
                    "templatePath": info.template_path,
                    "accountId": info.account_id,
                    "region": info.region,
                }
                for info in context.stack_templates
            ],
        }
        try:
            result = engine.result(RUN_TIMEOUT_SECONDS, request)
            self._version, self._rule_ids = result["version"], result["ruleIds"]
            return plugin_report(result["report"])
        except NodeScriptError as error:
            _note(f"the background engine {error}")
        except (KeyError, TypeError) as error:
            _note(f"the background engine wrote an unexpected result ({error!r})")
        return None


def plugin_report(report: dict) -> cdk.PolicyValidationPluginReport:
    """The JSON of a `PolicyValidationPluginReport` as the jsii type aws-cdk-lib expects back from a plugin."""
    return cdk.PolicyValidationPluginReport(
        success=report["success"],
        violations=[
            cdk.PolicyViolation(
                rule_name=v["ruleName"],
                description=v["description"],
                fix=v.get("fix"),
                severity=v.get("severity"),
                rule_metadata=v.get("ruleMetadata"),
                violating_resources=[
                    cdk.PolicyViolatingResource(
                        resource_logical_id=r.get("resourceLogicalId"),
                        construct_path=r.get("constructPath"),
                        template_path=r.get("templatePath"),
                        locations=r.get("locations"),
                    )
                    for r in v["violatingResources"]
                ],
            )
            for v in report["violations"]
        ],
        plugin_version=report.get("pluginVersion"),
        metadata=report.get("metadata"),
    )
