"""The benchmark at the settings users get (bench/defaults.py, bench/side.py): each side in a
process of its own with the environment of its setting, stepped in turn; peak RSS and the
activation memory of a step measured the same way on both sides."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # `bench` is a top-level package of the repository
    sys.path.insert(0, str(ROOT))

from bench import defaults, side  # noqa: E402


@pytest.mark.parametrize("setting,want", [("defaults", None), ("one", "1")])
def test_a_setting_is_the_environment_of_its_process(setting, want):
    base = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "PATH": "/bin"}  # bench's own
    for name in ("tyr", "plain"):
        env = side.child_env(name, setting, base)
        assert env.get("OMP_NUM_THREADS") == want and env.get("MKL_NUM_THREADS") == want
        assert env["PATH"] == "/bin" and "OMP_WAIT_POLICY" not in env
    assert side.child_env("tyr", "one", {"OMP_WAIT_POLICY": "ACTIVE"})["OMP_WAIT_POLICY"] == \
        "ACTIVE"  # a user's choice is kept


def test_activation_bytes_count_saved_storages_once_and_not_parameters():
    lin = torch.nn.Linear(64, 32)

    class TwoUses(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = lin

        def forward(self, x):
            h = self.lin(x)  # saves x (input) and the weight (a parameter: not counted)
            return (h * h).sum(), (h.relu() * x[:, :32]).sum()  # h saved (once), x again

    x = torch.randn(16, 64)
    got = side.activation_bytes(TwoUses(), (x,))
    # x (16·64) and h (16·32) and relu(h) (16·32) and x[:, :32]'s storage (x, counted once)
    assert got == 4 * (16 * 64 + 16 * 32 + 16 * 32)
    assert lin.weight.grad is None  # the measuring step leaves no gradient behind


def test_peak_rss_is_read_from_proc():
    kb = side.status_kb("VmHWM")
    if kb is None:
        pytest.skip("no /proc here")
    assert kb >= side.status_kb("VmRSS") > 10_000  # a Python with torch loaded: > 10 MB


def test_a_side_alone_reports_its_steps_and_memory():
    # the recipe's GPT at smoke size (the benchmark's, 4 layers, b 12, t 64, width 128, saves
    # ~25 MB for its backward)
    out = subprocess.run([sys.executable, "-m", "bench.side", "gpt_tiny", "plain", "--steps",
                          "2"], cwd=ROOT, env=side.child_env("plain", "one"),
                         capture_output=True, text=True, check=True, timeout=300)
    rec = json.loads(out.stdout.strip().splitlines()[-1])
    assert rec["threads"] == 1 and rec["reason"] == "the environment"
    assert len(rec["wall_s"]) == 2 and all(t > 0 for t in rec["wall_s"])
    assert rec["peak_rss_kb"] >= rec["rss_before_kb"] > 0
    module, _, data = side.build("gpt_tiny", "plain", n_batches=1)
    assert rec["params"] == sum(p.numel() for p in module.parameters())
    assert rec["activation_bytes"] == side.activation_bytes(module.train(), data[0]) > 0
    assert data[0][0].shape == (2, 16)  # b 2, t 16 (side.GPT_TINY)


@pytest.mark.parametrize("example", ["gpt", "diffusion", "flux", "nanochat"])
def test_both_sides_build_the_same_model(example):
    """The plain side is the model of the Tyr side's config (the nanochat config of
    today's layout once made the plain side fail to build), and both step on real numbers
    (the plain nanochat's empty tensors once made every loss NaN)."""
    import math

    counts = {}
    for name in ("tyr", "plain"):
        module, opts, data = side.build(example, name, n_batches=1)
        counts[name] = sorted(p.numel() for p in module.parameters())
        assert opts and data
        assert math.isfinite(side.step(module, opts, data[0])), (example, name)
    assert counts["tyr"] == counts["plain"]


def test_an_unknown_side_or_example_is_refused_in_one_line():
    done = subprocess.run([sys.executable, "-m", "bench.side", "nanochat", "plain_fused"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "nanochat has no plain_fused side" in done.stderr
    done = subprocess.run([sys.executable, "-m", "bench.defaults", "bert"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "unknown example(s) bert" in done.stderr


def test_the_sides_take_turns_and_the_memory_is_compared(monkeypatch):
    # the GPT at smoke size; `python -m bench.defaults gpt` runs the recipe's
    monkeypatch.setitem(defaults.PLAN, "gpt_tiny", (("tyr", "plain"), (2, 1)))
    r = defaults.run(steps=2, only=("gpt_tiny",))
    res = r["examples"]["gpt_tiny"]
    assert set(res["records"]) == {"defaults/tyr", "defaults/plain", "one/tyr", "one/plain"}
    assert all(len(ts) == 2 for ts in res["times"].values())
    one = res["records"]["one/tyr"]
    assert one["threads"] == 1 and "OMP_NUM_THREADS=1" in one["reason"]
    assert one["wait_policy"] == res["records"]["one/plain"]["wait_policy"] == ""
    assert "auto" in res["records"]["defaults/tyr"]["reason"] or \
        "one usable core" in res["records"]["defaults/tyr"]["reason"]
    for setting in defaults.SETTINGS:
        ratios = res["ratios"][f"{setting}/plain"]
        assert ratios["time"] > 0 and ratios["cpu_time"] > 0
    # the same model at the same batch saves the same tensors, give or take a few
    assert 0.9 < res["memory"]["activation"] < 1.1
    assert 0.8 < res["memory"]["peak_rss"] < 1.25
    # a memory-only process a side beside the two stepped ones; the ratio is over all three
    peaks = res["peak_rss_kb"]
    assert [len(peaks[s]) for s in ("tyr", "plain")] == [3, 3]
    assert all(kb > 100_000 for kb in peaks["tyr"] + peaks["plain"])  # torch alone is more
    assert res["memory"]["peak_rss"] == pytest.approx(
        sorted(peaks["tyr"])[1] / sorted(peaks["plain"])[1])
    lines = defaults.rows(r)
    judged = [row for row in lines if row.verdict]
    assert len(judged) == 2 + 2  # time per setting; peak RSS and activations
    assert [row.what.strip() for row in judged[-2:]] == ["gpt_tiny peak RSS tyr/plain",
                                                         "gpt_tiny activations tyr/plain"]
    json.dumps(r)
