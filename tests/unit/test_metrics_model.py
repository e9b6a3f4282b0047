"""Series built from cgroup samples (pure): rates, buckets, segments and gaps."""
from __future__ import annotations

import pytest

from session_supervisor.domain.model import metrics as m

S = 1_000_000_000


def sample(t, generation=1, cpu=0, memory=100, tx=0):
    return m.Sample(t * S, generation, cpu, memory, memory, 1000, 3, tx, 0, 0, 0, 4096, 2)


def test_cpu_usage_is_the_rate_of_cpu_time_between_samples():
    samples = [sample(t, cpu=t * S // 2) for t in range(5)]  # half a core
    [series], gaps = m.build_series(samples, "sandbox.cpu.usage", 0, 4 * S, 1, "auto", 2.0, 1.0)
    assert [p["value"] for p in series["segments"][0]["points"]] == [0.5] * 4 and gaps == []
    [util], _ = m.build_series(samples, "sandbox.cpu.utilization", 0, 4 * S, 1, "auto", 2.0, 1.0)
    assert util["segments"][0]["points"][0]["value"] == 0.25


def test_a_counter_defaults_to_its_rate_per_second_with_a_per_second_unit():
    samples = [sample(t, tx=t * 1000) for t in range(4)]
    series, _ = m.build_series(samples, "sandbox.network.io", 0, 3 * S, 1, "auto", 1.0, 1.0)
    transmit = next(s for s in series if s["dimensions"] == {"direction": "transmit"})
    assert transmit["unit"] == "bytes_per_second" and transmit["statistic"] == "rate"
    assert {p["value"] for p in transmit["segments"][0]["points"]} == {1000.0}


@pytest.mark.parametrize("statistic, expected", [("average", 150.0), ("maximum", 200.0), ("minimum", 100.0),
                                                  ("last", 200.0)])
def test_buckets_apply_the_statistic(statistic, expected):
    samples = [sample(0, memory=100), sample(1, memory=150), sample(2, memory=200)]
    [series], _ = m.build_series(samples, "sandbox.memory.usage", 0, 2 * S, 10, statistic, 1.0, 1.0)
    assert series["segments"][0]["points"] == [{"time_ns": 0, "value": expected}]


def test_a_new_generation_starts_a_segment_and_missing_samples_are_a_gap():
    samples = [sample(0), sample(1), sample(2, generation=2), sample(3, generation=2), sample(10, generation=2)]
    [series], gaps = m.build_series(samples, "sandbox.memory.usage", 0, 10 * S, 1, "auto", 1.0, 1.0)
    assert len(series["segments"]) == 3
    assert [g["reason"] for g in gaps] == ["series_reset", "no_data"]
    assert (gaps[1]["start_ns"], gaps[1]["end_ns"]) == (3 * S, 10 * S)


def test_no_samples_is_a_gap_never_a_zero():
    series, gaps = m.build_series([], "sandbox.memory.usage", 0, 60 * S, 15, "auto", 1.0, 15.0)
    assert series == [] and gaps == [{"metric": "sandbox.memory.usage", "start_ns": 0, "end_ns": 60 * S,
                                      "reason": "no_data"}]


def test_the_step_is_at_least_the_interval_and_fits_max_points():
    assert m.effective_step(0, 3600 * S, None, 240, 15.0) == 15
    assert m.effective_step(0, 86400 * S, 1, 240, 15.0) == 360
    assert m.effective_step(0, 60 * S, 5, 240, 1.0) == 5


def test_freshness_follows_the_newest_sample():
    assert m.freshness([], 0, 15.0) == {"status": "missing"}
    assert m.freshness([sample(0)], 10 * S, 15.0)["status"] == "fresh"
    assert m.freshness([sample(0)], 100 * S, 15.0)["status"] == "stale"
