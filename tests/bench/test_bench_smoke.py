"""The benchmark suite in smoke mode: every benchmark runs end to end on tiny sizes and
reports every figure. No timing is asserted here; the full run is
``python -m tests.bench`` (see tests/bench/README.md)."""
from __future__ import annotations

import math

import pytest

from tests.bench.__main__ import BENCHMARKS, SMOKE, run


@pytest.mark.timeout(300)
@pytest.mark.parametrize("name", list(BENCHMARKS))
def test_the_benchmark_runs_in_smoke_mode_and_reports_its_figures(name, tmp_path):
    lines = []
    (report,) = run([name], SMOKE, tmp_path, echo=lines.append)
    measured = [f for f in report.figures if f.runs]
    assert measured, lines
    for figure in measured:
        assert all(math.isfinite(v) and v >= 0 for v in figure.runs), (figure.name, figure.runs)
    skipped = [f for f in report.figures if not f.runs]
    assert all(f.note for f in skipped), [f.name for f in skipped]  # a skip always says why
    assert any(report.ratios(f) for f in report.figures), lines
