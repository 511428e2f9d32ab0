"""The prepared GPU run (scripts/gpu/check.py): its dry run on the CPU runs every step's code
at tiny sizes and reports what the real run reports; without a GPU the real run refuses."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "gpu" / "check.py"


def test_the_dry_run_runs_every_step_and_reports_mfu(tmp_path):
    done = subprocess.run([sys.executable, str(SCRIPT), "--dry-run", "--out", str(tmp_path)],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "steps: suite=0 gpt=0 nanochat=0" in done.stdout
    summary = json.loads((tmp_path / "check.json").read_text())
    assert summary["dry_run"] and summary["suite"]["suites"]["copy"]["ok"]
    for step in ("gpt", "nanochat"):
        r = summary[step]
        assert r["backend"] == "aot_eager" and r["device"] == "cpu"
        for side in ("tyr", "plain"):
            assert r[side]["ms"] > 0 and 0 < r[side]["mfu"] < 1
        # the same weights and batch on both sides: the same first loss, to bf16 rounding
        assert r["first_loss"]["tyr"] == pytest.approx(r["first_loss"]["plain"], rel=0.05)
        assert r["ratio"] > 0
        assert (tmp_path / f"{step}.log").is_file()
    assert done.stdout.count("MFU") == 4


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is here: the real run would run")
def test_the_real_run_refuses_a_machine_without_a_gpu(tmp_path):
    done = subprocess.run([sys.executable, str(SCRIPT), "--out", str(tmp_path)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert "no CUDA device here" in done.stderr


def test_flops_per_token_count_the_weights_and_attention():
    sys.path.insert(0, str(SCRIPT.parent))
    try:
        import check
    finally:
        sys.path.remove(str(SCRIPT.parent))
    c = {"vocab": 50304, "n_layer": 12, "n_head": 12, "head_dim": 64}
    # GPT-2 small: 85M weights in the blocks, 38.6M in the tied table; attention 12·L·w·t
    want = 6 * (12 * 12 * 768**2 + 50304 * 768) + 12 * 12 * 768 * 1024
    assert check.gpt_flops_per_token(c, 1024) == want
    assert 0.7e9 < want < 0.9e9  # ~6 x 124M + attention, nanoGPT's figure per token
