"""Smoke test of the benchmarks (`python -m bench`): they run with tiny iteration counts and
return well-formed results. No timing is asserted: the numbers only have to be positive."""
from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # `bench` is a top-level package of the repository, not installed
    sys.path.insert(0, str(ROOT))

from bench import Row, checker, executor, gpt, judge, percentile, summarize  # noqa: E402
from bench.__main__ import main, table, verdicts  # noqa: E402

STAT_KEYS = {"n", "median_ms", "p90_ms", "min_ms", "mean_ms"}


def _positive(x: object) -> bool:
    return isinstance(x, (int, float)) and math.isfinite(x) and x > 0


def _stats_ok(s: dict, n: int) -> None:
    assert STAT_KEYS <= set(s)
    assert s["n"] == n
    for k in STAT_KEYS - {"n"}:
        assert _positive(s[k]), (k, s[k])
    assert s["min_ms"] <= s["median_ms"] <= s["p90_ms"]


def test_stats_helpers():
    assert percentile([3.0, 1.0, 2.0], 50) == 2.0
    assert percentile([1.0, 2.0], 90) == pytest.approx(1.9)
    s = summarize([0.001, 0.003, 0.002])
    assert s["median_ms"] == pytest.approx(2.0) and s["n"] == 3


# the checker benchmark at smoke size: two example files, one iteration, GPTs of 1-3 layers
# (every example file, 100 iterations and 4, 12, 32 layers: `python -m bench --only checker`)
TINY_CHECKER = {"iters": 1, "cold_runs": 0, "files": [checker.MLP_FILE, checker.GPT_FILE],
                "layers": (1, 2, 3)}


def test_checker_results_well_formed():
    r = checker.run(**TINY_CHECKER)
    assert r["benchmark"] == "checker" and r["goal_ms"] == 100.0
    files = {c["file"] for c in r["check"]}
    assert files == {"examples/mlp/MLP.lean", "examples/gpt/GPT.lean"}
    for c in r["check"]:
        _stats_ok(c, 1)
    _stats_ok(r["library"], 1)
    g = r["mlp_graph"]
    assert g["model"] == "mlp" and g["nodes"] > 0 and g["params"] > 0
    _stats_ok(g["instantiate"], 1)
    _stats_ok(g["validate"], 1)
    assert r["scale"]["ratio"] > 0 and [b["layers"] for b in r["model_build"]] == [1, 2, 3]
    assert r["model_build"][1]["nodes"] > r["model_build"][0]["nodes"]
    assert r["model_build_cold"]["layers"] == 2 and r["model_build_cold"]["cold"]
    rows = checker.rows(r)
    _rows_ok(rows)
    assert "  per layer (1->2, 2->3)" in [row.what for row in rows]
    json.dumps(r)


def test_executor_results_well_formed():
    # The wide size takes seconds even for 2 steps (first touches of 1M-parameter buffers);
    # its configuration is checked here, its run only by `python -m bench`.
    sizes = {s["name"]: s["values"] for s in executor.sizes()}
    assert sizes["example"]["c"]["hidden"] == 64 and sizes["example"]["b"] == 128
    assert sizes["wide"]["c"]["hidden"] == 1024 and sizes["wide"]["b"] == 512
    r = executor.run(steps=2, warmup=1, breakdown_iters=2, only_sizes=["example"])
    assert r["benchmark"] == "executor" and r["goal_ratio"] == 0.97
    assert set(r["sizes"]) == {"example"}
    for s in r["sizes"].values():
        _stats_ok(s["tyr"], 2)
        _stats_ok(s["plain"], 2)
        assert _positive(s["ratio"]) and _positive(s["pair_ratio_median"]) and _positive(s["params"])
        # the two sides compute the same thing
        assert s["max_loss_diff"] <= 1e-5 and s["max_param_diff"] <= 1e-5
        bd = s["breakdown"]
        assert _positive(bd["forward_tyr_ms"]) and _positive(bd["forward_plain_ms"])
    _rows_ok(executor.rows(r))
    json.dumps(r)


def test_gpt_results_well_formed():
    # the recipe config is checked here; a tiny GPT is run (the recipe takes ~30 ms a step)
    v = gpt.gpt_values()
    assert v["c"] == {"vocab": 75, "block": 64, "n_layer": 4, "n_head": 4, "head_dim": 32,
                      "dropout": 0.0} and (v["b"], v["t"]) == (12, 64)
    tiny = gpt.gpt_values(block=8, n_layer=1, n_head=2, head_dim=4, b=2, t=8)
    r = gpt.run(steps=2, warmup=1, breakdown_iters=2, values=tiny)
    assert r["benchmark"] == "gpt" and r["goal_ratio"] == 1.10 and set(r["modes"]) == {"eager"}
    s = r["modes"]["eager"]
    for rec in (s, s["fused"], s["lean_adamw"], s["cpu_kernels"], s["cpu"]):
        _stats_ok(rec["tyr"], 2)
        _stats_ok(rec["plain"], 2)
        assert _positive(rec["ratio"]) and _positive(rec["pair_ratio_median"])
    # the same math on every side: default vs fused AdamW differ by float rounding only
    assert s["max_loss_diff"] <= 1e-6 and s["max_param_diff"] <= 1e-6
    assert s["lean_adamw"]["max_loss_diff"] == 0 and s["lean_adamw"]["max_param_diff"] == 0
    # the C attention kernel (if built here) changes values by float rounding only
    assert s["cpu_kernels"]["max_loss_diff"] <= 1e-6 and s["cpu_kernels"]["max_param_diff"] <= 1e-5
    fr = s["fraction"]
    # 1 layer, b 2, t 8, width 8, vocab 75: 6 x (3·8·8 + 8·8 + 2·32·8 + 75·8) x 16 tokens,
    # plus attention 12·b·h·t²·d
    assert fr["step_gflop"] * 1e9 == pytest.approx(6 * 1368 * 16 + 12 * 2 * 2 * 64 * 4)
    assert _positive(fr["wall"]["fraction"]) and _positive(fr["cpu"]["matmul_gflops"])
    _rows_ok(gpt.rows(r), goals=3)
    json.dumps(r)


def _rows_ok(rows: list, goals: int | None = None) -> None:
    assert rows and all(isinstance(r, Row) and r.what for r in rows)
    judged = [r for r in rows if r.verdict]
    assert all(r.goal and r.ratio and r.verdict in ("ok", "MISSED") for r in judged)
    if goals is not None:
        assert len(judged) == goals


def test_judge_and_the_closing_line():
    assert judge(1.12, 1.1) == {"ratio": "1.12", "goal": ">= 1.1", "verdict": "ok"}
    assert judge(0.5, 0.6)["verdict"] == "MISSED"
    assert judge(120.0, 100.0, at_most=True, digits=0) == {"ratio": "120", "goal": "<= 100",
                                                            "verdict": "MISSED"}
    rows = [(Row("a", "1.0", **judge(1.2, 1.0)), "1.5-1.7"), (Row("b", note="no goal"), "1.5"),
            (Row("c", **judge(0.8, 0.95)), "2.0")]
    text = table(rows)
    assert text.splitlines()[0].split()[:3] == ["benchmark", "median", "ms"]
    assert "1.5-1.7" in text and "MISSED" in text
    assert verdicts(rows) == "goals: 1 of 2 met; MISSED: c"


def test_plain_mlp_matches_tyr_module():
    tyr, plain = executor.build_pair({"c": {"inputs": 2, "hidden": 8, "classes": 3}, "b": 4})
    import torch

    x = torch.randn(4, 2)
    y = torch.tensor([0, 1, 2, 0])
    zt, lt = tyr(x, y)
    zp, lp = plain(x, y)
    assert torch.equal(zt, zp) and torch.equal(lt, lp)


def test_main_writes_json(tmp_path, monkeypatch, capsys):
    real_run = checker.run
    monkeypatch.setattr(checker, "run", lambda quick=False: real_run(**TINY_CHECKER))
    out = tmp_path / "results.json"
    assert main(["--quick", "--only", "checker", "--out", str(out)]) == 0
    data = json.loads(out.read_text())
    assert {"meta", "checker"} <= set(data) and "executor" not in data
    assert data["meta"]["quick"] is True and data["meta"]["torch_threads"] == 1
    assert len(data["checker"]["load"]) == 2
    out = capsys.readouterr().out
    assert "tyr check" in out and "goals: " in out


def test_kernel_rows_judge_each_kernel_and_the_gpt_step():
    # a record of the shape bench.kernels.run makes on a GPU (none here): every kernel phase
    # and the GPT step get a verdict against their goal
    from bench import kernels

    stats = {"n": 3, "median_ms": 1.0, "p90_ms": 1.2, "min_ms": 0.9, "mean_ms": 1.0}
    phase = {"kernel": stats, "torch": stats, "ratio": 0.8, "pair_ratio_median": 0.8,
             "kernel_tflops": 1.5, "torch_tflops": 1.2, "kernel_gbs": None, "torch_gbs": None}
    r = {"kernels": [{"name": "attention", "goal": 0.7, "fwd": phase, "fwd+bwd": phase}],
         "gpt": {"name": "gpt train step", "kernel": stats, "torch": stats, "ratio": 1.1,
                 "goal": 1.0, "max_loss_diff": 1e-6}}
    rows = kernels.rows(r)
    _rows_ok(rows, goals=3)
    assert [row.verdict for row in rows if row.verdict] == ["ok", "ok", "ok"]
    assert kernels.rows({"skipped": "no CUDA"})[0].note == "skipped: no CUDA"


def test_cpu_kernel_rows_judge_each_kernel_against_torch():
    from bench import cpu_kernels
    from pytyr.kernels import native

    r = cpu_kernels.run(quick=True, iters=2, warmup=1)
    if native.unavailable() is not None:
        assert r["skipped"] == native.unavailable()
        assert "skipped" in cpu_kernels.rows(r)[0].note
        return
    assert [c["case"] for c in r["cases"]] == ["causal attention b 12 h 4 t 64 d 32"]
    for c in r["cases"]:
        _stats_ok(c["kernel"], 2)
        _stats_ok(c["torch"], 2)
        assert _positive(c["pair_ratio_median"]) and c["max_abs_diff"] < 1e-4
    _rows_ok(cpu_kernels.rows(r), goals=1)
    json.dumps(r)


def test_sampling_decodes_the_same_tokens_as_plain_pytorch_over_its_caches():
    # tyr sample's decoding and the plain KV-cache loop of the same weights, through the
    # 64-position context twice (its prefill again at 64): the same greedy tokens
    from bench import sampling

    d = sampling.bench_decode(max_new=80, rounds=1)
    assert d["same_tokens"], d
    assert all(_positive(v) for v in d["tokens_per_s"].values())
    rows = sampling.rows({"goal_ratio": 1.0, "threads": 1, "decode": d})
    assert rows[0].verdict in ("ok", "MISSED") and rows[1].verdict == ""
