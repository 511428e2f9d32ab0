"""How fast `tyr check` is once Python is up, and how fast a model becomes a validated graph.

* check: `pytyr.lean.check_files(FILE)` per example file, exactly what `tyr check FILE` runs
  after start-up. Every iteration builds a fresh `Program`, so it lexes, parses and
  elaborates the file *and* the Tyr library it imports from scratch (nothing is cached
  between iterations). Goal of the issue: well under 100 ms.
* library: the same for `Tyr.lean` alone (the part of every check that is the library).
* instantiate: `instantiate_model(prog, "mlp", values)` on an already checked program.
* validate: `load_graph(graph.to_json(), LeanSignatures(prog))`, the JSON round trip and
  validation that `pipeline.graph_from_lean` does after instantiating.
* cold CLI (optional, `cold_runs > 0`): wall time of a whole `python -m pytyr.cli check FILE`
  process, start-up and imports included, for context only.
"""
from __future__ import annotations

import gc
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench import ROOT, summarize

GOAL_MS = 100.0
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


def _time(fn: Any, iters: int, warmup: int) -> list[float]:
    for _ in range(warmup):
        fn()
    gc.collect()
    out = []
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


def time_cold_cli(path: Path, runs: int) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "pytyr.cli", "check", str(path)]
    samples = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run(cmd, cwd=ROOT, check=True, capture_output=True)
        samples.append(time.perf_counter() - t0)
    return {"file": _rel(path), **summarize(samples)}


def run(*, quick: bool = False, iters: int | None = None, cold_runs: int | None = None) -> dict[str, Any]:
    """Time the checker; `iters` overrides the iteration counts (the smoke test uses 2)."""
    n = iters if iters is not None else (30 if quick else 200)
    warmup = min(3, n)
    cold = cold_runs if cold_runs is not None else (0 if quick else 5)
    files = example_files()
    if not files:
        raise RuntimeError("no example .lean files under examples/")
    result: dict[str, Any] = {
        "benchmark": "checker",
        "goal_ms": GOAL_MS,
        "iters": n,
        "check": [time_check(f, n, warmup) for f in files],
        "library": time_check(ROOT / "Tyr.lean", n, warmup),
        "mlp_graph": time_instantiate_validate(n, warmup),
    }
    if cold > 0:
        result["cold_cli"] = time_cold_cli(files[0], cold)
    return result


def rows(result: dict[str, Any]) -> list[tuple[str, str, str, str]]:
    """(what, median ms, p90 ms, note) lines for the printed table."""
    goal = result["goal_ms"]
    out = []
    for c in result["check"]:
        ok = "ok" if c["p90_ms"] < goal else "OVER GOAL"
        out.append((f"tyr check {c['file']}", f"{c['median_ms']:.2f}", f"{c['p90_ms']:.2f}",
                    f"goal < {goal:.0f} ms: {ok}"))
    lib = result["library"]
    out.append((f"tyr check {lib['file']} (library alone)", f"{lib['median_ms']:.2f}",
                f"{lib['p90_ms']:.2f}", ""))
    g = result["mlp_graph"]
    note = f"{g['nodes']} nodes, {g['params']} params"
    out.append(("instantiate mlp (checked program)", f"{g['instantiate']['median_ms']:.3f}",
                f"{g['instantiate']['p90_ms']:.3f}", note))
    out.append(("validate mlp (to_json + load_graph)", f"{g['validate']['median_ms']:.3f}",
                f"{g['validate']['p90_ms']:.3f}", ""))
    if "cold_cli" in result:
        c = result["cold_cli"]
        out.append(("cold `python -m pytyr.cli check` process", f"{c['median_ms']:.0f}",
                    f"{c['p90_ms']:.0f}", f"start-up included, n={c['n']}"))
    return out
