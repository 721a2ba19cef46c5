"""Schedule expressions of Application Auto Scaling scheduled actions, checked before CloudFormation sees them.

Sources:
- Application Auto Scaling API Reference, PutScheduledAction `Schedule`: "at(yyyy-mm-ddThh:mm:ss)",
  "rate(value unit)" where "value is a positive integer and unit is minute | minutes | hour | hours | day |
  days", and "cron(fields)" with "six fields separated by white spaces: [Minutes] [Hours] [Day_of_Month]
  [Month] [Day_of_Week] [Year]" (also in botocore's application-autoscaling model, member documentation).
- Application Auto Scaling User Guide, "Schedule recurring scaling actions using cron expressions", which refers
  the cron syntax to the Amazon EventBridge User Guide, "Cron expressions reference": the values and wildcards
  of each field (FIELDS below), and "If you use [`*` or a value] in one [of Day-of-month and Day-of-week], you
  must use ? in the other"; `#` allows one expression only in Day-of-week.
Without this check a typo deploys halfway: CloudFormation fails the scalable target at deploy time.
"""

from __future__ import annotations

import datetime
import re
from dataclasses import dataclass

MONTHS = ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC")
DAYS = ("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT")
RATE_UNITS = ("minute", "minutes", "hour", "hours", "day", "days")


@dataclass(frozen=True)
class CronField:
    name: str
    low: int
    high: int
    names: tuple[str, ...] = ()  # JAN.. or SUN.., numbered from `low`
    wildcards: str = ",-*/"

    @property
    def allowed(self) -> str:
        values = f"{self.low}-{self.high}" + (f" or {self.names[0]}-{self.names[-1]}" if self.names else "")
        return f"{values}, wildcards {' '.join(self.wildcards)}"


# EventBridge "Cron expressions reference", table "Field / Values / Wildcards".
FIELDS = (
    CronField("Minutes", 0, 59),
    CronField("Hours", 0, 23),
    CronField("Day-of-month", 1, 31, wildcards=",-*?/LW"),
    CronField("Month", 1, 12, MONTHS),
    CronField("Day-of-week", 1, 7, DAYS, wildcards=",-*?L#"),
    CronField("Year", 1970, 2199),
)

_AT = re.compile(r"at\(([0-9]{4})-([0-9]{2})-([0-9]{2})T([0-9]{2}):([0-9]{2}):([0-9]{2})\)")
_RATE = re.compile(r"rate\(([0-9]+) ([a-z]+)\)")
_CRON = re.compile(r"cron\((.*)\)", re.DOTALL)
_NUMBER = re.compile(r"[0-9]{1,4}")


def schedule_problem(expression: str) -> str | None:
    """Why Application Auto Scaling would refuse `expression`, or None when it is a valid schedule."""
    if expression.startswith("at("):
        return _at_problem(expression)
    if expression.startswith("rate("):
        return _rate_problem(expression)
    if expression.startswith("cron("):
        return _cron_problem(expression)
    return "must be at(yyyy-mm-ddThh:mm:ss), rate(<value> <unit>) or cron(<6 fields>)"


def _at_problem(expression: str) -> str | None:
    match = _AT.fullmatch(expression)
    if match is None:
        return "an at() expression is at(yyyy-mm-ddThh:mm:ss), e.g. at(2026-12-24T18:00:00)"
    try:
        datetime.datetime(*(int(part) for part in match.groups()))
    except ValueError as error:
        return f"at(): no such date and time ({error})"
    return None


def _rate_problem(expression: str) -> str | None:
    match = _RATE.fullmatch(expression)
    if match is None or match.group(2) not in RATE_UNITS:
        return f"a rate() expression is rate(<positive integer> <unit>) with unit one of {', '.join(RATE_UNITS)}"
    if int(match.group(1)) < 1:
        return "rate(): the value must be a positive integer"
    return None


def _cron_problem(expression: str) -> str | None:
    match = _CRON.fullmatch(expression)
    fields = match.group(1).split() if match else []
    if match is None or len(fields) != len(FIELDS):
        names = " ".join(f"[{f.name}]" for f in FIELDS)
        return f"a cron() expression has six fields separated by spaces, {names}, e.g. cron(0 18 ? * MON-FRI *)"
    for spec, text in zip(FIELDS, fields, strict=True):
        problem = _field_problem(spec, text)
        if problem:
            return f"cron() field {spec.name} {text[:40]!r}: {problem} (allowed: {spec.allowed})"
    day_of_month, day_of_week = fields[2], fields[4]
    if day_of_month != "?" and day_of_week != "?":
        return (
            f"cron(): Day-of-month {day_of_month[:20]!r} and Day-of-week {day_of_week[:20]!r}: one of them must be ? "
            "(e.g. cron(0 8 ? * MON *) or cron(0 8 1 * ? *))"
        )
    return None


def _field_problem(spec: CronField, text: str) -> str | None:
    if text == "?":
        return None if "?" in spec.wildcards else "? is allowed in Day-of-month and Day-of-week only"
    items = text.split(",")
    day_field = spec.name in ("Day-of-month", "Day-of-week")
    special = [item for item in items if item in ("*", "?") or (day_field and ("#" in item or "L" in item.upper()))]
    if len(items) > 1 and special:
        return "*, ?, L and # cannot be part of a list"
    for item in items:
        problem = _item_problem(spec, item)
        if problem:
            return problem
    return None


def _item_problem(spec: CronField, item: str) -> str | None:
    upper = item.upper()
    if spec.name == "Day-of-month" and (upper in ("L", "LW") or re.fullmatch(r"[0-9]{1,2}W", upper)):
        return None if upper in ("L", "LW") else _value_problem(spec, upper[:-1])
    if spec.name == "Day-of-week":
        if upper == "L":
            return None
        if re.fullmatch(r"[0-9A-Z]{1,3}L", upper):
            return _value_problem(spec, upper[:-1])
        if "#" in upper:
            day, _, nth = upper.partition("#")
            if not re.fullmatch(r"[1-5]", nth):
                return "# takes the week of the month, 1-5 (e.g. 3#2, the second Tuesday)"
            return _value_problem(spec, day)
    base, slash, step = item.partition("/")
    if slash:
        if "/" not in spec.wildcards:
            return "/ is not allowed in this field"
        if not re.fullmatch(r"[0-9]{1,4}", step) or int(step) < 1:
            return "/ takes a positive increment (e.g. 0/15)"
    if base == "*":
        return None
    start, dash, end = base.partition("-")
    problem = _value_problem(spec, start)
    if problem or not dash:
        return problem
    return _value_problem(spec, end)


def _value_problem(spec: CronField, value: str) -> str | None:
    upper = value.upper()
    if spec.names and upper in spec.names:
        return None
    if not _NUMBER.fullmatch(value):
        return f"{value[:20]!r} is not a value of this field"
    if not spec.low <= int(value) <= spec.high:
        return f"{value} is out of range"
    return None
