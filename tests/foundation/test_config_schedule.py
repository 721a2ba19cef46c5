"""Scheduled scaling: schedule expressions Application Auto Scaling would refuse at deploy are refused at load.

Sources: Application Auto Scaling API Reference, PutScheduledAction `Schedule` (at(yyyy-mm-ddThh:mm:ss),
rate(value unit) with a positive integer and minute(s)/hour(s)/day(s), cron(fields) with six fields); the
Application Auto Scaling User Guide's "Schedule recurring scaling actions using cron expressions", which points
to the Amazon EventBridge User Guide's "Cron expressions reference" (values and wildcards per field; one of
Day-of-month and Day-of-week is ?).
"""

from __future__ import annotations

import pytest
from config_edits import refusal, set_path, shipped, write

from stage_config.schedule import schedule_problem

VALID = [
    "at(2026-12-24T18:00:00)",
    "at(2028-02-29T00:00:00)",
    "rate(1 minute)",
    "rate(5 minutes)",
    "rate(2 hours)",
    "rate(7 days)",
    "cron(0 18 ? * MON-FRI *)",
    "cron(30 6 ? * MON *)",
    "cron(0 8 1 * ? *)",
    "cron(0/15 * ? * * *)",
    "cron(0 12 * * ? *)",
    "cron(15 10 ? * 6L 2026-2030)",
    "cron(0 0 L * ? *)",
    "cron(0 0 LW * ? *)",
    "cron(0 0 3W * ? *)",
    "cron(0 9 ? * 3#2 *)",
    "cron(0 9 ? JAN,jul,DEC SAT *)",
    "cron(5,10,59 0-23/2 ? 1-12 1-7 *)",
    "cron(0 9 ? * FRI-MON *)",
]

INVALID = [
    ("cron(garbage)", "six fields"),
    ("cron(0 18 * * MON *)", "one of them must be ?"),
    ("cron(0 18 * * *)", "six fields"),
    ("cron(60 18 ? * * *)", "Minutes '60': 60 is out of range"),
    ("cron(0 24 ? * * *)", "Hours '24': 24 is out of range"),
    ("cron(0 0 32 * ? *)", "Day-of-month '32'"),
    ("cron(0 0 ? 13 * *)", "Month '13'"),
    ("cron(0 0 ? FOO * *)", "Month 'FOO'"),
    ("cron(0 0 ? * 8 *)", "Day-of-week '8'"),
    ("cron(0 0 ? * 0 *)", "Day-of-week '0'"),
    ("cron(0 0 ? * * 1969)", "Year '1969'"),
    ("cron(0 0 ? * * 2200)", "Year '2200'"),
    ("cron(? 0 ? * * *)", "Minutes '?': ? is allowed in Day-of-month and Day-of-week only"),
    ("cron(0 0 ? * 3#6 *)", "# takes the week of the month"),
    ("cron(0 0 ? * 3#2,4#1 *)", "cannot be part of a list"),
    ("cron(0 0 ? * MON/2 *)", "/ is not allowed"),
    ("cron(0/0 0 ? * * *)", "positive increment"),
    ("cron(0 0 L-2 * ? *)", "Day-of-month"),
    ("cron(0 0 ? * * *)\n", "six fields"),
    ("rate(0 minutes)", "positive integer"),
    ("rate(5 weeks)", "unit one of"),
    ("rate(five minutes)", "rate(<positive integer> <unit>)"),
    ("rate(-1 day)", "rate(<positive integer> <unit>)"),
    ("at(2026-02-30T00:00:00)", "no such date and time"),
    ("at(2026-01-01T24:00:00)", "no such date and time"),
    ("at(2026-01-01 00:00:00)", "at(yyyy-mm-ddThh:mm:ss)"),
    ("at(2026-01-01T00:00:00Z)", "at(yyyy-mm-ddThh:mm:ss)"),
    ("every day", "must be at("),
    ("CRON(0 0 ? * * *)", "must be at("),
]


@pytest.mark.parametrize("expression", VALID)
def test_valid_schedules_pass(expression):
    assert schedule_problem(expression) is None


@pytest.mark.parametrize(("expression", "expected"), INVALID)
def test_invalid_schedules_are_named(expression, expected):
    problem = schedule_problem(expression)
    assert problem is not None and expected in problem, problem


def _scheduled(actions: list[dict]) -> dict:
    return set_path(shipped(), "endpoints.0.autoscaling.scheduled", actions)


def test_an_invalid_schedule_is_refused_with_its_field(tmp_path):
    document = _scheduled([{"name": "night", "schedule": "cron(0 22 * * * *)", "min_capacity": 1}])
    message = refusal(write(tmp_path, document, "dev"))
    assert "dev.yaml: endpoints[0].autoscaling.scheduled[0].schedule: cron(): Day-of-month '*' and Day-of-week" in (
        message
    )


def test_scheduled_action_names_are_unique_and_botocore_long(tmp_path):
    """A scalable target holds each ScheduledActionName once; botocore application-autoscaling
    ScheduledActionName: at most 256 characters."""
    action = {"name": "night", "schedule": "cron(0 22 ? * * *)", "min_capacity": 1}
    message = refusal(write(tmp_path, _scheduled([action, action]), "dev"))
    assert "endpoints[0].autoscaling: scheduled action names ['night'] are used twice" in message
    message = refusal(write(tmp_path, _scheduled([{**action, "name": "n" * 257}]), "dev"))
    assert "endpoints[0].autoscaling.scheduled[0].name: String should have at most 256 characters" in message
