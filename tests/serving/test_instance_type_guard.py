"""The instance-type guard: SageMaker refuses to change or remove an autoscaled variant, so the update is refused
first, with the procedure (SageMaker "Update endpoints that use auto scaling")."""

from __future__ import annotations

import importlib.util
import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest
from synth_helpers import PROJECT_ROOT

HANDLER = PROJECT_ROOT / "triton_cdk/serving/handlers/instance_type_guard/index.py"
spec = importlib.util.spec_from_file_location("instance_type_guard_index", HANDLER)
guard = importlib.util.module_from_spec(spec)
spec.loader.exec_module(guard)

OLD = {"EndpointName": "prod-bert", "Variants": {"AllTraffic": "ml.g5.xlarge"}, "Autoscaled": ["AllTraffic"]}


@pytest.mark.parametrize(
    ("new", "refused"),
    [
        # "If the update would change the instance type for any model that is a target for auto scaling,
        # the update fails."
        ({**OLD, "Variants": {"AllTraffic": "ml.g5.2xlarge"}}, "AllTraffic (ml.g5.xlarge -> ml.g5.2xlarge)"),
        # Removing autoscaling in the same update does not help: the target is deregistered after the endpoint
        # update (CloudFormation's clean-up phase).
        ({**OLD, "Variants": {"AllTraffic": "ml.g5.2xlarge"}, "Autoscaled": []}, "ml.g5.xlarge -> ml.g5.2xlarge"),
        # "Steps 1 and 7 are only required when ... removing a production variant configured for auto scaling."
        ({**OLD, "Variants": {"Other": "ml.g5.xlarge"}}, "AllTraffic (ml.g5.xlarge -> removed)"),
        ({**OLD, "Variants": {"AllTraffic": "ml.g5.xlarge"}}, None),  # a new model is allowed (the exception)
    ],
)
def test_refusals_follow_sagemakers_rules(new, refused):
    reason = guard.refusal(OLD, new)
    if refused is None:
        assert reason is None
    else:
        assert refused in reason
        assert "deploy once without `autoscaling:`" in reason and "then with the new instance_type" in reason


def test_without_autoscaling_before_the_type_may_change():
    assert guard.refusal({**OLD, "Autoscaled": []}, {**OLD, "Variants": {"AllTraffic": "ml.g6.xlarge"}}) is None


class _Recorder(BaseHTTPRequestHandler):
    bodies: list[dict] = []

    def do_PUT(self):
        length = int(self.headers["Content-Length"])
        _Recorder.bodies.append(json.loads(self.rfile.read(length)))
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture
def response_url():
    server = HTTPServer(("127.0.0.1", 0), _Recorder)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    _Recorder.bodies.clear()
    try:
        yield f"http://127.0.0.1:{server.server_port}/response"
    finally:
        server.shutdown()
        server.server_close()


def _event(request_type: str, url: str, new: dict, old: dict | None = None) -> dict:
    event = {
        "RequestType": request_type,
        "ResponseURL": url,
        "StackId": "stack",
        "RequestId": "request",
        "LogicalResourceId": "Guard",
        "ResourceProperties": new,
    }
    if old is not None:
        event["OldResourceProperties"] = old
        event["PhysicalResourceId"] = f"Guard-{guard.digest(old)}"
    return event


def test_the_handler_answers_cloudformation(response_url):
    """CloudFormation custom resources: the handler PUTs Status/Reason/PhysicalResourceId to the ResponseURL."""
    guard.handler(_event("Create", response_url, OLD), None)
    guard.handler(_event("Update", response_url, {**OLD, "Variants": {"AllTraffic": "ml.g6.xlarge"}}, OLD), None)
    guard.handler(_event("Delete", response_url, OLD, OLD), None)
    created, updated, deleted = _Recorder.bodies
    assert created["Status"] == "SUCCESS" and created["PhysicalResourceId"] == f"Guard-{guard.digest(OLD)}"
    assert updated["Status"] == "FAILED" and "prod-bert" in updated["Reason"]
    assert deleted["Status"] == "SUCCESS"


def test_the_rollback_after_a_refusal_succeeds(response_url):
    """CloudFormation rolls a failed update back with another Update, old and new swapped (aws/aws-cdk#17040);
    refusing it too would leave the stack in UPDATE_ROLLBACK_FAILED."""
    attempted = {**OLD, "Variants": {"AllTraffic": "ml.g5.2xlarge"}}
    guard.handler(_event("Update", response_url, attempted, OLD), None)
    rollback = _event("Update", response_url, OLD, attempted)
    rollback["PhysicalResourceId"] = f"Guard-{guard.digest(OLD)}"  # a FAILED update keeps the old physical id
    guard.handler(rollback, None)
    refused, rolled_back = _Recorder.bodies
    assert refused["Status"] == "FAILED"
    assert rolled_back["Status"] == "SUCCESS"
    assert rolled_back["PhysicalResourceId"] == f"Guard-{guard.digest(OLD)}"


def test_the_endpoint_waits_for_the_guard(dev):
    for name, template in dev.raw.items():
        resources = template["Resources"]
        (guard_id,) = [k for k, v in resources.items() if v["Type"] == "Custom::TritonInstanceTypeGuard"]
        (endpoint,) = [v for v in resources.values() if v["Type"] == "AWS::SageMaker::Endpoint"]
        assert guard_id in endpoint["DependsOn"], name
        props = resources[guard_id]["Properties"]
        assert props["Variants"] == {"AllTraffic": "ml.g5.xlarge"} and props["Autoscaled"] == ["AllTraffic"]


def test_the_inline_handler_fits_cloudformation():
    """AWS::Lambda::Function Code.ZipFile: at most 4096 characters (CloudFormation template reference)."""
    assert len(HANDLER.read_text()) <= 4096


def test_the_construct_inlines_the_handler_the_app_names(tmp_path):
    """The library finds no file on its own: the handler comes from the `handler_dir` prop."""
    import aws_cdk as cdk
    from aws_cdk.assertions import Template
    from synth_helpers import new_app

    from triton_cdk.serving.instance_type_guard import InstanceTypeGuard

    (tmp_path / "index.py").write_text("def handler(event, context):\n    return None\n")
    stack = cdk.Stack(new_app(), "Guard")
    InstanceTypeGuard(
        stack, "Guard", endpoint_name="ep", variants={"AllTraffic": "ml.g5.xlarge"}, autoscaled=[], handler_dir=tmp_path
    )
    (function,) = Template.from_stack(stack).find_resources("AWS::Lambda::Function").values()
    assert function["Properties"]["Code"]["ZipFile"] == (tmp_path / "index.py").read_text()
