"""Average capacity bounds over a week with an endpoint's scheduled scaling actions applied.

Application Auto Scaling scheduled actions (PutScheduledAction) set a new MinCapacity and/or MaxCapacity when
they fire; the bound holds until another action changes it. Cron expressions follow EventBridge's syntax
(six fields: Minutes Hours Day-of-month Month Day-of-week Year; Day-of-week 1-7 = SUN-SAT) in the action's
time zone (UTC by default) -- see stage_config/schedule.py for the sources.

Only schedules that repeat every week are averaged: cron() with Month and Year `*`, Day-of-month `*` or `?`,
and Minutes, Hours and Day-of-week made of values, ranges, lists and steps. at() fires once, rate() counts from
the action's creation time, and L / W / # or a date-bound cron have no weekly pattern: for those the weekly
figure is not computed and the reason is given (never an estimate).

Method: the bounds start at the autoscaling settings, one whole week (the warm-up) is played so each action has
fired at least once, and the next week is measured minute by minute. The weeks start on Monday 2025-01-06 00:00
UTC, a fortnight without daylight-saving changes in any time zone, so a local schedule keeps its shape.

What AWS does not document is not invented: Application Auto Scaling documents no order for actions that fire in
the same minute, and its scheduled scaling guide says an action that changes one bound must leave the new minimum at
or below the maximum (include both sizes otherwise). So two actions that fire in the same minute and set a bound to
different values, or a minimum that ends up above the maximum, give no weekly figure, with the reason (NotWeekly).
"""

from __future__ import annotations

import datetime
import re
import zoneinfo
from collections.abc import Sequence
from dataclasses import dataclass

from stage_config.schedule import DAYS

WEEK_START = datetime.datetime(2025, 1, 6, tzinfo=datetime.UTC)  # a Monday
MINUTES_PER_WEEK = 7 * 24 * 60
_CRON = re.compile(r"cron\((.*)\)", re.DOTALL)


@dataclass(frozen=True)
class Action:
    """One scheduled action as the weekly math needs it."""

    name: str
    schedule: str
    min_capacity: int | None = None
    max_capacity: int | None = None
    time_zone: str | None = None


@dataclass(frozen=True)
class WeeklyCapacity:
    """Average instance counts over a week: at the minimum bound and at the maximum bound."""

    average_min: float
    average_max: float


class NotWeekly(ValueError):
    """The schedule has no weekly pattern; the message says why."""


def weekly_capacity(min_capacity: int, max_capacity: int, actions: Sequence[Action]) -> WeeklyCapacity:
    """Average min and max bounds over the measured week. Raises NotWeekly naming the first action without
    a weekly pattern, two actions that set a bound to different values in the same minute (AWS documents no
    order between them), or a minimum left above the maximum (AWS: an action must not leave the minimum above the
    maximum; its outcome is not documented, so no figure is given)."""
    events: list[tuple[int, int, Action]] = []  # (minute from warm-up start, config order, action)
    for order, action in enumerate(actions):
        events += [(minute, order, action) for minute in _firing_minutes(action)]
    events.sort(key=lambda event: (event[0], event[1]))
    low, high = min_capacity, max_capacity
    low_sum = high_sum = 0
    index = 0
    for minute in range(2 * MINUTES_PER_WEEK):
        fired: list[Action] = []
        while index < len(events) and events[index][0] == minute:
            fired.append(events[index][2])
            index += 1
        if fired:
            _same_minute(fired, minute)
            for action in fired:
                low = action.min_capacity if action.min_capacity is not None else low
                high = action.max_capacity if action.max_capacity is not None else high
            if low > high:
                names = ", ".join(repr(a.name) for a in fired)
                raise NotWeekly(
                    f"scheduled action {names}: at {_when(minute)} the minimum {low} is above the maximum {high}; "
                    "Application Auto Scaling requires a scheduled action to keep the new minimum at or below the "
                    "maximum (give both min_capacity and max_capacity), so no weekly figure is computed"
                )
        if minute >= MINUTES_PER_WEEK:
            low_sum += low
            high_sum += high
    return WeeklyCapacity(low_sum / MINUTES_PER_WEEK, high_sum / MINUTES_PER_WEEK)


def _same_minute(fired: list[Action], minute: int) -> None:
    """Two actions in one minute that set a bound to different values: AWS documents no order between them."""
    for bound in ("min_capacity", "max_capacity"):
        values = {getattr(a, bound) for a in fired if getattr(a, bound) is not None}
        if len(values) > 1:
            names = ", ".join(repr(a.name) for a in fired if getattr(a, bound) is not None)
            raise NotWeekly(
                f"scheduled actions {names} fire in the same minute ({_when(minute)}) and set {bound} to "
                f"{sorted(values)}; Application Auto Scaling documents no order between them, so no weekly figure "
                "is computed"
            )


def _when(minute: int) -> str:
    moment = WEEK_START + datetime.timedelta(minutes=minute % MINUTES_PER_WEEK)
    return moment.strftime("%a %H:%M UTC")


def _firing_minutes(action: Action) -> list[int]:
    """Minutes (from WEEK_START, over two weeks) at which `action` fires."""
    match = _CRON.fullmatch(action.schedule)
    if match is None:
        kind = action.schedule.split("(", 1)[0]
        why = "fires once" if kind == "at" else "counts from the action's creation time"
        raise NotWeekly(f"scheduled action {action.name!r}: {kind}() {why}, so it has no weekly pattern")
    fields = match.group(1).split()
    if len(fields) != 6:
        raise NotWeekly(f"scheduled action {action.name!r}: a cron() expression has six fields")
    minutes_f, hours_f, dom, month, dow, year = fields
    if month != "*" or year != "*" or dom not in ("*", "?"):
        raise NotWeekly(
            f"scheduled action {action.name!r}: {action.schedule} depends on the date (Day-of-month, Month or "
            "Year), so it has no weekly pattern"
        )
    name = action.name
    minutes = _values(minutes_f, 0, 59, (), name)
    hours = _values(hours_f, 0, 23, (), name)
    days = _values(dow, 1, 7, DAYS, name) if dow not in ("*", "?") else set(range(1, 8))
    zone = zoneinfo.ZoneInfo(action.time_zone or "UTC")
    local_start = WEEK_START.astimezone(zone).replace(hour=0, minute=0, second=0, microsecond=0)
    fired: list[int] = []
    for day in range(-1, 16):  # a day either side: a local day may straddle the UTC window's edges
        date = (local_start + datetime.timedelta(days=day)).date()
        if (date.isoweekday() % 7) + 1 not in days:  # isoweekday: Mon=1..Sun=7; cron: SUN=1..SAT=7
            continue
        for hour in sorted(hours):
            for minute in sorted(minutes):
                local = datetime.datetime(date.year, date.month, date.day, hour, minute, tzinfo=zone)
                offset = int((local.astimezone(datetime.UTC) - WEEK_START).total_seconds() // 60)
                if 0 <= offset < 2 * MINUTES_PER_WEEK:
                    fired.append(offset)
    return fired


def _values(text: str, low: int, high: int, names: tuple[str, ...], action: str) -> set[int]:
    values: set[int] = set()
    for item in text.split(","):
        base, slash, step_text = item.partition("/")
        # L / W / # / ? are special characters; a day name (WED) is not: strip the names before looking for them
        # (EventBridge cron: W is a Day-of-month wildcard, L and # Day-of-month / Day-of-week ones).
        letters = re.sub("|".join(names), "", base.upper()) if names else base.upper()
        if any(c in letters for c in "LW#?"):
            raise NotWeekly(f"scheduled action {action!r}: {text!r} (L, W, # or ?) has no weekly pattern")
        step = int(step_text) if slash and step_text.isdigit() else 1
        if slash and (not step_text.isdigit() or step < 1):
            raise NotWeekly(f"scheduled action {action!r}: {text!r} is not a cron step")
        if base == "*":
            start, end = low, high
        else:
            first, dash, last = base.partition("-")
            start = _number(first, low, high, names, action)
            end = _number(last, low, high, names, action) if dash else (high if slash else start)
        # a wrapping range (FRI-MON) runs to the end of the field and on from its start
        span = list(range(start, high + 1)) + list(range(low, end + 1)) if end < start else list(range(start, end + 1))
        values.update(span[::step])
    return values


def _number(text: str, low: int, high: int, names: tuple[str, ...], action: str) -> int:
    upper = text.upper()
    if names and upper in names:
        return low + names.index(upper)
    if not text.isdigit() or not low <= int(text) <= high:
        raise NotWeekly(f"scheduled action {action!r}: {text!r} is not a value from {low} to {high}")
    return int(text)
