"""How fast `tyr check` is once Python is up, and how fast a model becomes a validated graph.

* check: `pytyr.lean.check_files(FILE)` per example file, exactly what `tyr check FILE` runs
  after start-up. Every iteration builds a fresh `Program`; the checked Tyr library is kept
  per process (the first check of a process pays for it: see `library`), so this is the
  file itself. Goal of the issue: well under 100 ms.
* library: the same for `Tyr.lean` alone (what the first check of a process adds).
* scale: `tyr check` of a generated file of N and 2N small defs, alternating; the median of
  the per-pair time ratios (linear means ~2).
* model build: `pipeline.LeanModels(GPT).graph("gpt", values)` — check the file, instantiate,
  validate — at 4, 12 and 32 layers (issue 16: linear in layers, < 100 ms for 12); and the
  same at 12 layers with the library check included (a cold process).
* instantiate: `instantiate_model(prog, "mlp", values)` on an already checked program.
* validate: `load_graph(graph.to_json(), LeanSignatures(prog))`, the JSON round trip and
  validation that `pipeline.graph_from_lean` does after instantiating.
* cold CLI (optional, `cold_runs > 0`): wall time of a whole `python -m pytyr.cli check FILE`
  process, start-up and imports included, for context only.

The timed loops run with what the benchmark built before frozen out of the garbage collector
(`gc.freeze`): a `tyr check` process holds only the library, while this process also holds
every earlier file's program, and the collector's full passes over those made the p90 and the
scale ratio depend on the order of the measurements (p90 176 ms for a 103 ms median).
"""
from __future__ import annotations

import contextlib
import gc
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Iterator

from bench import ROOT, Row, judge, summarize

GOAL_MS = 100.0
BUILD_GOAL_MS = 100.0  # GPT, 12 layers: check + instantiate + validate
SCALE_GOAL = 2.2  # time(2N defs) / time(N defs): linear is 2
GPT_FILE = ROOT / "examples" / "gpt" / "GPT.lean"
GPT_CONFIG = ROOT / "examples" / "gpt" / "config.json"
MLP_FILE = ROOT / "examples" / "mlp" / "MLP.lean"
MLP_CONFIG = ROOT / "examples" / "mlp" / "config.json"


def example_files() -> list[Path]:
    return sorted((ROOT / "examples").rglob("*.lean"))


def mlp_values() -> dict[str, Any]:
    """The MLP example's argument values: its config's `model` table and the batch `b` that
    `tyr train` fills in from `train.batch` (the task's batch role)."""
    cfg = json.loads(MLP_CONFIG.read_text(encoding="utf-8"))
    return {**cfg["model"], "b": cfg["train"]["batch"]}


def _rel(p: Path) -> str:
    try:
        return str(p.relative_to(ROOT))
    except ValueError:
        return str(p)


@contextlib.contextmanager
def _own_heap() -> Iterator[None]:
    """Time as a fresh `tyr check` process would: the objects this benchmark made before
    (other files' programs, graphs) are frozen out of the garbage collector, whose full
    collections otherwise walk them and grow with the benchmark's history, not the checker's."""
    gc.collect()
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def _time(fn: Any, iters: int, warmup: int) -> list[float]:
    for _ in range(warmup):
        fn()
    out = []
    with _own_heap():
        for _ in range(iters):
            t0 = time.perf_counter()
            fn()
            out.append(time.perf_counter() - t0)
    return out


def time_check(path: Path, iters: int, warmup: int = 3) -> dict[str, Any]:
    from pytyr.lean import check_files

    diags = check_files(path)
    if diags:
        raise RuntimeError(f"{path} does not check:\n" + "\n".join(map(str, diags)))
    return {"file": _rel(path), **summarize(_time(lambda: check_files(path), iters, warmup))}


def time_instantiate_validate(iters: int, warmup: int = 3) -> dict[str, Any]:
    from pytyr.ir.validate import load_graph
    from pytyr.lean import LeanSignatures, instantiate_model, load

    values = mlp_values()
    prog = load(MLP_FILE)
    graph = instantiate_model(prog, "mlp", values)

    def validate() -> Any:
        return load_graph(graph.to_json(indent=None), LeanSignatures(prog), source="bench")

    checked = validate()
    assert len(checked.nodes) == len(graph.nodes) and len(checked.params) == len(graph.params)
    return {
        "model": "mlp",
        "values": values,
        "nodes": len(graph.nodes),
        "params": len(graph.params),
        "instantiate": summarize(_time(lambda: instantiate_model(prog, "mlp", values), iters, warmup)),
        "validate": summarize(_time(validate, iters, warmup)),
    }


def _defs(n: int) -> str:
    return "import Tyr\nopen torch\n" + "".join(
        f"def f{i} {{b : Nat}} (x : T #[b, 8]) (w : T #[8, 8]) : T #[b, 8] :=\n"
        f"  relu (linear x w)\n" for i in range(n))


def time_scale(n: int, iters: int, warmup: int) -> dict[str, Any]:
    """Check files of `n` and `2 n` defs, alternating, in one run."""
    import tempfile

    from pytyr.lean import check_files

    with tempfile.TemporaryDirectory() as tmp:
        small, big = Path(tmp) / "Small.lean", Path(tmp) / "Big.lean"
        small.write_text(_defs(n))
        big.write_text(_defs(2 * n))
        for f in (small, big):
            if check_files(f):
                raise RuntimeError(f"the generated {f.name} does not check")
        times: dict[str, list[float]] = {"small": [], "big": []}
        with _own_heap():
            for i in range(warmup + iters):
                for key, f in (("small", small), ("big", big)):
                    t0 = time.perf_counter()
                    check_files(f)
                    if i >= warmup:
                        times[key].append(time.perf_counter() - t0)
    s, b = summarize(times["small"]), summarize(times["big"])
    # the median of the per-pair ratios: drift in machine speed hits both files of a pair
    pairs = [big / small for small, big in zip(times["small"], times["big"])]
    return {"defs": n, "small": s, "big": b, "ratio": statistics.median(pairs),
            "goal": SCALE_GOAL}


def gpt_values(layers: int) -> dict[str, Any]:
    """The GPT recipe's values with `layers` blocks (`b`, `t` as `tyr train` fills them)."""
    cfg = json.loads(GPT_CONFIG.read_text(encoding="utf-8"))
    values = {**cfg["model"], "b": cfg["train"]["batch"], "t": cfg["task"]["seq"]}
    values["c"]["n_layer"] = layers
    return values


def time_model_build(layers: int, iters: int, warmup: int, cold: bool = False) -> dict[str, Any]:
    """`LeanModels(GPT).graph("gpt", values)`: check + instantiate + validate."""
    from pytyr.lean.program import clear_library_cache
    from pytyr.pipeline import LeanModels

    values = gpt_values(layers)

    def build() -> Any:
        if cold:
            clear_library_cache()
        return LeanModels(GPT_FILE).graph("gpt", values)

    nodes = len(build().nodes)
    return {"layers": layers, "nodes": nodes, "cold": cold,
            **summarize(_time(build, iters, warmup))}


def build_slopes(builds: list[dict[str, Any]]) -> dict[str, float]:
    """ms per layer between the sizes measured; linear when the later slope is not steeper."""
    (a, b, c) = sorted(builds, key=lambda r: r["layers"])[:3]
    s1 = (b["median_ms"] - a["median_ms"]) / (b["layers"] - a["layers"])
    s2 = (c["median_ms"] - b["median_ms"]) / (c["layers"] - b["layers"])
    return {"first": s1, "second": s2, "linear": s2 <= 1.5 * max(s1, 1e-3)}


def time_cold_cli(path: Path, runs: int) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "pytyr.cli", "check", str(path)]
    samples = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run(cmd, cwd=ROOT, check=True, capture_output=True)
        samples.append(time.perf_counter() - t0)
    return {"file": _rel(path), **summarize(samples)}


def run(*, quick: bool = False, iters: int | None = None, cold_runs: int | None = None,
        files: list[Path] | None = None, layers: tuple[int, int, int] = (4, 12, 32)
        ) -> dict[str, Any]:
    """Time the checker; `iters` overrides the iteration counts, `files` the example files
    and `layers` the GPT builds' depths (the smoke test: 1 iteration, two files, 1-3
    layers)."""
    n = iters if iters is not None else (30 if quick else 100)
    warmup = min(3, n)
    cold = cold_runs if cold_runs is not None else (0 if quick else 5)
    files = example_files() if files is None else files
    if not files:
        raise RuntimeError("no example .lean files under examples/")
    result: dict[str, Any] = {
        "benchmark": "checker",
        "goal_ms": GOAL_MS,
        "iters": n,
        "check": [time_check(f, n, warmup) for f in files],
        "library": time_check(ROOT / "Tyr.lean", n, warmup),
        "mlp_graph": time_instantiate_validate(n, warmup),
        "scale": time_scale(200 if n >= 100 else 100 if n >= 10 else 20, max(n // 4, 2), warmup),
        "model_build": [time_model_build(k, max(n // 4, 2), warmup) for k in layers],
        "model_build_cold": time_model_build(layers[1], max(n // 10, 2), min(warmup, 1),
                                             cold=True),
        "build_goal_ms": BUILD_GOAL_MS,
    }
    if cold > 0:
        result["cold_cli"] = time_cold_cli(files[0], cold)
    return result


def rows(result: dict[str, Any]) -> list[Row]:
    """The lines of the printed table; times in ms, goals on the p90 of a check and on the
    median of the 12-layer model build."""
    goal = result["goal_ms"]
    out = []
    for c in result["check"]:
        out.append(Row(f"tyr check {c['file']}", f"{c['median_ms']:.2f}", f"{c['p90_ms']:.2f}",
                       **judge(c["p90_ms"], goal, at_most=True, digits=1), note="p90 ms"))
    lib = result["library"]
    out.append(Row(f"tyr check {lib['file']} (library alone)", f"{lib['median_ms']:.2f}",
                   f"{lib['p90_ms']:.2f}"))
    g = result["mlp_graph"]
    out.append(Row("instantiate mlp (checked program)", f"{g['instantiate']['median_ms']:.3f}",
                   f"{g['instantiate']['p90_ms']:.3f}",
                   note=f"{g['nodes']} nodes, {g['params']} params"))
    out.append(Row("validate mlp (to_json + load_graph)", f"{g['validate']['median_ms']:.3f}",
                   f"{g['validate']['p90_ms']:.3f}"))
    sc = result["scale"]
    out.append(Row(f"tyr check {sc['defs']} defs", f"{sc['small']['median_ms']:.1f}",
                   f"{sc['small']['p90_ms']:.1f}"))
    out.append(Row(f"tyr check {2 * sc['defs']} defs", f"{sc['big']['median_ms']:.1f}",
                   f"{sc['big']['p90_ms']:.1f}", **judge(sc["ratio"], sc["goal"], at_most=True),
                   note="median pair ratio, 2x defs (linear: 2)"))
    goal = result["build_goal_ms"]
    for b in result["model_build"]:
        verdict = judge(b["median_ms"], goal, at_most=True, digits=1) if b["layers"] == 12 \
            else {}
        out.append(Row(f"model build gpt {b['layers']} layers (check+instantiate+validate)",
                       f"{b['median_ms']:.1f}", f"{b['p90_ms']:.1f}", **verdict,
                       note=f"{b['nodes']} nodes"))
    sl = build_slopes(result["model_build"])
    lo, mid, hi = sorted(x["layers"] for x in result["model_build"])[:3]
    out.append(Row(f"  per layer ({lo}->{mid}, {mid}->{hi})", f"{sl['first']:.2f}",
                   f"{sl['second']:.2f}",
                   **judge(sl["second"] / max(sl["first"], 1e-3), 1.5, at_most=True),
                   note=f"ms per layer before and after {mid} (linear: their ratio <= 1.5)"))
    c = result["model_build_cold"]
    out.append(Row(f"model build gpt {c['layers']} layers, library checked too",
                   f"{c['median_ms']:.1f}",
                   f"{c['p90_ms']:.1f}", note="a process's first build"))
    if "cold_cli" in result:
        c = result["cold_cli"]
        out.append(Row("cold `python -m pytyr.cli check` process", f"{c['median_ms']:.0f}",
                       f"{c['p90_ms']:.0f}", note=f"start-up included, n={c['n']}"))
    return out
