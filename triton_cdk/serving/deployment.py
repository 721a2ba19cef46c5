"""How an endpoint update shifts traffic: blue/green (all at once, canary, linear) or rolling.

Ranges are SageMaker's (API reference: TrafficRoutingConfig, BlueGreenUpdatePolicy,
RollingUpdatePolicy); `validate` returns every problem so the endpoint can raise them at once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from aws_cdk import aws_sagemaker as sagemaker

from triton_cdk.api_limits import (
    CANARY_PERCENT,
    LINEAR_STEP_PERCENT,
    MAXIMUM_EXECUTION_TIMEOUT_SECONDS,
    ROLLING_BATCH_PERCENT,
    TERMINATION_WAIT_SECONDS,
    WAIT_INTERVAL_SECONDS,
)

__all__ = [
    "DEFAULT_BAKE_SECONDS",
    "DEFAULT_MAXIMUM_EXECUTION_TIMEOUT_SECONDS",
    "DeploymentPolicy",
    "TrafficRouting",
    "TrafficType",
]

TrafficType = Literal["ALL_AT_ONCE", "CANARY", "LINEAR"]

# MaximumExecutionTimeoutInSeconds of a deployment when none is given (blue/green, rolling, component updates).
DEFAULT_MAXIMUM_EXECUTION_TIMEOUT_SECONDS = 3600
# Bake time (WaitIntervalInSeconds) of a component's rolling update when none is given: the default alarms
# (AlarmThresholds: 2 datapoints of 300 s, plus the period CloudWatch needs to see the last one) reach ALARM
# within it, so they can roll a step back.
DEFAULT_BAKE_SECONDS = 900


@dataclass(frozen=True)
class TrafficRouting:
    type: TrafficType
    wait_seconds: int
    step_percent: float | None = None  # canary size or linear step, share of the new fleet's capacity

    @classmethod
    def all_at_once(cls, *, wait_seconds: int = 0) -> TrafficRouting:
        return cls("ALL_AT_ONCE", wait_seconds)

    @classmethod
    def canary(cls, *, percent: float, wait_seconds: int) -> TrafficRouting:
        return cls("CANARY", wait_seconds, percent)

    @classmethod
    def linear(cls, *, step_percent: float, wait_seconds: int) -> TrafficRouting:
        return cls("LINEAR", wait_seconds, step_percent)

    @property
    def needs_rollback_alarms(self) -> bool:
        """Canary and linear shifting only stop a bad fleet if an alarm tells them to."""
        return self.type != "ALL_AT_ONCE"

    def render(self) -> sagemaker.CfnEndpoint.TrafficRoutingConfigProperty:
        size = (
            sagemaker.CfnEndpoint.CapacitySizeProperty(type="CAPACITY_PERCENT", value=int(self.step_percent))
            if self.step_percent is not None
            else None
        )
        return sagemaker.CfnEndpoint.TrafficRoutingConfigProperty(
            type=self.type,
            wait_interval_in_seconds=self.wait_seconds,
            canary_size=size if self.type == "CANARY" else None,
            linear_step_size=size if self.type == "LINEAR" else None,
        )


@dataclass(frozen=True)
class DeploymentPolicy:
    strategy: Literal["BLUE_GREEN", "ROLLING"]
    maximum_execution_timeout_seconds: int
    traffic: TrafficRouting | None = None
    termination_wait_seconds: int | None = None
    batch_percent: float | None = None
    wait_seconds: int | None = None

    @classmethod
    def blue_green(
        cls,
        traffic: TrafficRouting,
        *,
        termination_wait_seconds: int = 0,
        maximum_execution_timeout_seconds: int = DEFAULT_MAXIMUM_EXECUTION_TIMEOUT_SECONDS,
    ) -> DeploymentPolicy:
        return cls(
            "BLUE_GREEN",
            maximum_execution_timeout_seconds,
            traffic=traffic,
            termination_wait_seconds=termination_wait_seconds,
        )

    @classmethod
    def rolling(
        cls,
        *,
        batch_percent: float,
        wait_seconds: int,
        maximum_execution_timeout_seconds: int = DEFAULT_MAXIMUM_EXECUTION_TIMEOUT_SECONDS,
    ) -> DeploymentPolicy:
        return cls("ROLLING", maximum_execution_timeout_seconds, batch_percent=batch_percent, wait_seconds=wait_seconds)

    @property
    def needs_rollback_alarms(self) -> bool:
        return bool(self.traffic and self.traffic.needs_rollback_alarms)

    @property
    def bake_seconds(self) -> int:
        """How long SageMaker watches the rollback alarms after each traffic step or rolling batch
        (WaitIntervalInSeconds): an alarm must be able to reach ALARM within it."""
        return (self.traffic.wait_seconds if self.traffic else self.wait_seconds) or 0

    def validate(self, *, variant_count: int) -> list[str]:
        problems = []
        if self.strategy == "ROLLING":
            if variant_count > 1:
                problems.append(
                    f"a rolling deployment needs a single-variant endpoint, this one has {variant_count} variants "
                    "(SageMaker deployment guardrails exclusions); use a blue/green policy"
                )
            _in_range(problems, "rolling batch_percent", self.batch_percent, *ROLLING_BATCH_PERCENT, "%", whole=True)
            _in_range(problems, "rolling wait_seconds", self.wait_seconds, *WAIT_INTERVAL_SECONDS, " s")
        else:
            assert self.traffic is not None
            _in_range(problems, "traffic wait_seconds", self.traffic.wait_seconds, *WAIT_INTERVAL_SECONDS, " s")
            if self.traffic.type == "CANARY":
                _in_range(problems, "canary percent", self.traffic.step_percent, *CANARY_PERCENT, "%", whole=True)
            elif self.traffic.type == "LINEAR":
                _in_range(
                    problems, "linear step_percent", self.traffic.step_percent, *LINEAR_STEP_PERCENT, "%", whole=True
                )
            _in_range(
                problems, "termination_wait_seconds", self.termination_wait_seconds, *TERMINATION_WAIT_SECONDS, " s"
            )
        timeout = self.maximum_execution_timeout_seconds
        _in_range(problems, "maximum_execution_timeout_seconds", timeout, *MAXIMUM_EXECUTION_TIMEOUT_SECONDS)
        return problems

    def render(self, alarm_names: list[str]) -> sagemaker.CfnEndpoint.DeploymentConfigProperty:
        rollback = (
            sagemaker.CfnEndpoint.AutoRollbackConfigProperty(
                alarms=[sagemaker.CfnEndpoint.AlarmProperty(alarm_name=name) for name in alarm_names]
            )
            if alarm_names
            else None
        )
        if self.strategy == "ROLLING":
            return sagemaker.CfnEndpoint.DeploymentConfigProperty(
                rolling_update_policy=sagemaker.CfnEndpoint.RollingUpdatePolicyProperty(
                    maximum_batch_size=sagemaker.CfnEndpoint.CapacitySizeProperty(
                        type="CAPACITY_PERCENT", value=int(self.batch_percent or 0)
                    ),
                    wait_interval_in_seconds=self.wait_seconds,
                    maximum_execution_timeout_in_seconds=self.maximum_execution_timeout_seconds,
                ),
                auto_rollback_configuration=rollback,
            )
        assert self.traffic is not None
        return sagemaker.CfnEndpoint.DeploymentConfigProperty(
            blue_green_update_policy=sagemaker.CfnEndpoint.BlueGreenUpdatePolicyProperty(
                traffic_routing_configuration=self.traffic.render(),
                termination_wait_in_seconds=self.termination_wait_seconds,
                maximum_execution_timeout_in_seconds=self.maximum_execution_timeout_seconds,
            ),
            auto_rollback_configuration=rollback,
        )


def _in_range(
    problems: list[str], name: str, value: float | None, low: float, high: float, unit: str = " s", *, whole=False
) -> None:
    if value is None:
        problems.append(f"{name} is required")
    elif not low <= value <= high or (whole and value != int(value)):
        kind = "a whole number " if whole else ""
        problems.append(f"{name} must be {kind}between {low:g} and {high:g}{unit}, got {value:g}")
