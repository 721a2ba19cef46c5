"""Scheduled scaling time zones are IANA names, as Application Auto Scaling's PutScheduledAction requires
("Timezone: ... Valid values are the canonical names of the IANA time zones")."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from synth_helpers import shipped_path

from stage_config.loader import ConfigError, load_config

ROOT = Path(__file__).resolve().parents[2]


def with_schedule(tmp_path: Path, time_zone: str) -> Path:
    document = yaml.safe_load(shipped_path("config/dev.yaml").read_text())
    document["endpoints"][0]["autoscaling"]["scheduled"] = [
        {"name": "night", "schedule": "cron(0 20 * * ? *)", "min_capacity": 1, "time_zone": time_zone}
    ]
    path = tmp_path / "dev.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


def test_an_iana_name_is_accepted(tmp_path):
    config = load_config(with_schedule(tmp_path, "Europe/Berlin"))
    assert config.endpoints[0].autoscaling.scheduled[0].time_zone == "Europe/Berlin"


@pytest.mark.parametrize("bad", ["Europe/Berlinn", "CEST", "UTC+2", "../etc/passwd"])
def test_anything_else_is_refused_naming_the_field(tmp_path, bad):
    with pytest.raises(ConfigError) as refused:
        load_config(with_schedule(tmp_path, bad))
    assert "endpoints[0].autoscaling.scheduled[0]" in str(refused.value)
    assert "is not an IANA time zone name" in str(refused.value)


def test_a_near_miss_gets_a_suggestion(tmp_path):
    with pytest.raises(ConfigError, match="did you mean Europe/Berlin"):
        load_config(with_schedule(tmp_path, "Europe/Berlinn"))
