"""The nanochat launch scripts refuse bad settings with one line before any work; the
scaling benchmark's arithmetic; the FLOPs estimate behind the GPU script's MFU."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # `bench` is a top-level package of the repository
    sys.path.insert(0, str(ROOT))

from bench import (
    nanochat,  # noqa: E402
    scaling,  # noqa: E402
)
from bench.nanochat import flops_per_token  # noqa: E402

SCRIPTS = ROOT / "scripts" / "nanochat"


def _run(script: str, *args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(SCRIPTS / script), *args], cwd=ROOT, capture_output=True,
                          text=True, env={**os.environ, **env}, timeout=120)


def test_scripts_are_executable():
    for name in ("run_train_torchrun.sh", "bench_distributed.sh", "prepare_data.sh",
                 "gpu_run.sh"):
        assert os.access(SCRIPTS / name, os.X_OK), name


@pytest.mark.parametrize("script,args,env,message", [
    ("run_train_torchrun.sh", ["--bogus"], {}, "unknown argument '--bogus'"),
    ("run_train_torchrun.sh", [], {"NPROC_PER_NODE": "0"},
     "NPROC_PER_NODE must be a positive integer, got '0'"),
    ("run_train_torchrun.sh", ["--config", "missing.json"], {}, "no config file 'missing.json'"),
    ("run_train_torchrun.sh", ["--config"], {}, "--config needs a file"),
    ("bench_distributed.sh", ["extra"], {}, "no arguments"),
    ("prepare_data.sh", ["--fast"], {}, "unknown argument '--fast'"),
    ("gpu_run.sh", ["--bogus"], {}, "unknown argument '--bogus'"),
])
def test_bad_settings_are_one_line(script, args, env, message):
    res = _run(script, *args, **env)
    assert res.returncode == 2 and message in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1 and not res.stdout


@pytest.mark.parametrize("script", ["run_train_torchrun.sh", "bench_distributed.sh",
                                    "prepare_data.sh", "gpu_run.sh"])
def test_help(script):
    res = _run(script, "--help")
    assert res.returncode == 0 and res.stdout.strip() and "set -e" not in res.stdout


def test_scaling_rows_are_relative_to_the_first_size(monkeypatch, tmp_path):
    speeds = {1: iter([1000.0, 1100.0, 1050.0]), 2: iter([1800.0, 1700.0, 1900.0])}
    order = []

    def fake(n, steps, config, out, torchrun, threads):
        order.append(n)
        return next(speeds[n])

    monkeypatch.setattr(scaling, "run_size", fake)
    rows = scaling.measure([1, 2], 5, 3, "c.json", tmp_path, "torchrun", 1)
    assert order == [1, 2, 2, 1, 1, 2]  # alternating, the order reversed every repeat
    assert [r["tokens_per_s"] for r in rows] == [1050.0, 1800.0]
    assert rows[0]["speedup"] == 1.0 and rows[1]["speedup"] == pytest.approx(1800 / 1050)
    assert rows[1]["efficiency"] == pytest.approx(1800 / 1050 / 2)
    table = scaling.table(rows)
    assert "1.71x" in table and "86%" in table
    scaling.save(rows, tmp_path, "t")
    csv = (tmp_path / "scaling.csv").read_text().splitlines()
    assert csv[0] == "processes,tokens_per_s,speedup,efficiency,runs" and len(csv) == 3
    assert (tmp_path / "scaling.png").read_bytes()[:4] == b"\x89PNG"


def test_flops_per_token_counts_the_matrices_and_attention():
    c = {"vocab": 100, "block": 16, "depth": 2, "aspect_ratio": 32, "head_dim": 32,
         "n_kv_head": 1, "rope_base": 1e4, "softcap": 15.0}
    w, kv = 64, 32  # 2 heads of 32, 1 key/value head
    per_layer = w * w * 2 + kv * w * 2 + 8 * w * w  # q, proj; k, v; the 4x MLP
    assert flops_per_token(c, 16) == 6 * (2 * per_layer + 100 * w) + 12 * 2 * w * 16


def test_the_benchmark_compares_the_same_math():
    r = nanochat.bench_train(steps=1, warmup=0, b=1)
    assert r["max_loss_diff"] == 0.0 and r["max_param_diff"] == 0.0  # bit-identical sides
    d = nanochat.bench_decode(max_new=2, rounds=1)
    assert d["same_tokens"] and d["tokens_per_s"]["cached"] > 0
    rows = nanochat.rows({"goal_ratio": 0.97, "train": r, "decode": d})
    from bench import Row

    assert rows and all(isinstance(row, Row) and row.what for row in rows)


def test_the_benchmark_batches_are_the_bpb_lm_task_s(tmp_path, monkeypatch):
    """The batches come from the January config's task over a data set written for the run
    (BOS-aligned rows of ids below the vocab, targets the next ids), reproducible from the
    seed, every row a different document, and the data set removed afterwards."""
    import tempfile

    import torch

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    vocab = nanochat.recipe()["model"]["c"]["vocab"]
    c = {"vocab": vocab}
    data = nanochat.batches(c, 3, 16, 4, 1)
    assert list(tmp_path.iterdir()) == []
    assert len(data) == 4 and all(len(b) == 2 for b in data)
    rows = set()
    for idx, targets in data:
        assert idx.shape == targets.shape == (3, 16) and idx.dtype == torch.int64
        assert torch.equal(idx[:, 1:], targets[:, :-1])
        assert (idx[:, 0] == vocab - 1).all() and int(idx.max()) < vocab  # the BOS is last
        rows |= {tuple(r) for r in idx.tolist()}
    assert len(rows) == 12
    again, other = nanochat.batches(c, 3, 16, 4, 1), nanochat.batches(c, 3, 16, 4, 2)
    assert all(torch.equal(a, b) for x, y in zip(data, again) for a, b in zip(x, y))
    assert not torch.equal(data[0][0], other[0][0])


def test_the_configs_carry_nanochat_s_optimizer_settings(tmp_path):
    configs = [str(ROOT / "examples" / "nanochat" / f) for f in
               ("config.json", "debug.json", "gpu.json")]
    hparams = [sys.executable, str(SCRIPTS / "hparams.py")]
    res = subprocess.run([*hparams, "--check", *configs], capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr
    # a rate that is not nanochat's is found, and the script writes it back
    import json

    bad = tmp_path / "c.json"
    cfg = json.loads(Path(configs[0]).read_text())
    cfg["train"]["muon"]["groups"][0]["lr"] = 0.004
    del cfg["train"]["warmup_form"]  # nanoGPT's warmup, not nanochat's
    bad.write_text(json.dumps(cfg))
    res = subprocess.run([*hparams, "--check", str(bad)], capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 1 and "train.muon differs from nanochat's" in res.stdout
    assert "train.warmup_form is not 'nanochat'" in res.stdout
    assert subprocess.run([*hparams, str(bad)], capture_output=True, timeout=120).returncode == 0
    assert bad.read_text() == Path(configs[0]).read_text()
