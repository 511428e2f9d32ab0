"""Smoke test of `python -m bench --only flux`: it runs with tiny counts and returns a
well-formed record in which both sides did the same arithmetic. No timing is asserted."""
from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # `bench` is a top-level package of the repository, not installed
    sys.path.insert(0, str(ROOT))

from bench import Row, flux  # noqa: E402
from bench.__main__ import BENCHMARKS  # noqa: E402


def test_flux_benchmark_is_registered_and_well_formed():
    assert BENCHMARKS["flux"] is flux
    r = flux.run(steps=2, warmup=1, values=flux.flux_values(b=4, depth=1, depth_single_blocks=1))
    assert r["benchmark"] == "flux" and r["goal_ratio"] == 0.97
    e = r["modes"]["eager"]
    assert e["steps"] == 2 and e["tyr"]["n"] == 2 and e["plain"]["n"] == 2
    assert e["tyr"]["median_ms"] > 0 and e["plain"]["median_ms"] > 0 and e["ratio"] > 0
    # the same state and batches: the losses agree to float rounding through 3 AdamW steps
    assert e["max_loss_diff"] < 1e-5 and e["max_param_diff"] < 1e-5
    assert e["breakdown"]["forward_tyr_ms"] > 0
    assert all(isinstance(row, Row) for row in flux.rows(r))
    json.dumps(r)


def test_the_example_values_are_the_config():
    v = flux.flux_values(b=2, depth=3)
    assert v["b"] == 2 and v["c"]["depth"] == 3 and v["c"]["patch"] == 2
