"""Loading safetensors: pytyr's validating reader vs `safetensors.torch.load_file`, same run.

A GPT-like checkpoint (f32 matrices of 1024 x 1024 and their biases, `size_mb` in all: 512 by
default, 64 with `--quick`, or `TYR_BENCH_ST_MB`) is written into a temporary directory by the
`safetensors` library itself, so neither side reads its own output. Measured, alternating the
two sides with the order flipped every pair (machine drift hits both alike), after a warm-up
that puts the file in the page cache:

  open   every tensor as a torch tensor (both sides map the file and make views)
  touch  the same, then a sum over every tensor (reads every byte through the map)

`ratio` is safetensors' time over ours (the median of the per-pair ratios): 1.0 means as
fast, the goal is >= 1.0. Header introspection: a 1,000-tensor checkpoint in 4 shards with an
index, opened by `open_checkpoint` (index + 4 validated headers) vs `safe_open` + shapes per
shard, again and again as a process that opens a checkpoint more than once does (Tyr's
validated headers are kept per unchanged file: the goal is on this), and cold (Tyr's kept
headers forgotten before every open: timed, no goal).

Standalone: `python -m bench.safetensors_load [--quick] [--size-mb N]`.
"""
from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file

from bench import Row, judge, summarize
from bench.standalone import standalone
from pytyr.safetensors import load_file as tyr_load_file
from pytyr.safetensors import open_checkpoint, save_sharded
from pytyr.safetensors.header import clear_header_cache

GOAL_RATIO = 1.0
DIM = 1024


def make_checkpoint(path: Path, size_mb: int, seed: int = 0) -> int:
    """Write a checkpoint of about `size_mb` MB of f32 to `path`; returns its tensor count."""
    g = torch.Generator().manual_seed(seed)
    per_layer = 4 * DIM * DIM * 4  # four square matrices, f32
    layers = max(1, round(size_mb * 1e6 / per_layer))
    tensors = {"wte": torch.rand(512, DIM, generator=g)}
    for i in range(layers):
        for name in ("q", "k", "v", "o"):
            tensors[f"blocks.{i}.attn.{name}.weight"] = torch.rand(DIM, DIM, generator=g)
            tensors[f"blocks.{i}.attn.{name}.bias"] = torch.rand(DIM, generator=g)
        tensors[f"blocks.{i}.ln.weight"] = torch.ones(DIM)
    save_file(tensors, str(path), metadata={"format": "pt"})
    return len(tensors)


def _touch(tensors: dict[str, torch.Tensor]) -> float:
    return float(sum(t.sum(dtype=torch.float64) for t in tensors.values()))


def _alternate(a: Callable[[], Any], b: Callable[[], Any], iters: int) -> tuple[list[float], ...]:
    ta, tb = [], []
    for i in range(iters):
        for fn, out in ((a, ta), (b, tb)) if i % 2 == 0 else ((b, tb), (a, ta)):
            t0 = time.perf_counter()
            fn()
            out.append(time.perf_counter() - t0)
    return ta, tb


def _compare(tyr: Callable[[], Any], ref: Callable[[], Any], iters: int) -> dict[str, Any]:
    tyr(), ref()  # warm-up: page cache, lazy imports
    t, r = _alternate(tyr, ref, iters)
    out = {"tyr": summarize(t), "safetensors": summarize(r)}
    out["ratio"] = out["safetensors"]["median_ms"] / out["tyr"]["median_ms"]
    out["pair_ratio_median"] = statistics.median(b / a for a, b in zip(t, r))
    return out


def _headers(directory: Path, iters: int) -> dict[str, Any]:
    """Introspection of a 1,000-tensor, 4-shard indexed checkpoint (no data read)."""
    g = torch.Generator().manual_seed(1)
    tensors = {f"layers.{i // 10}.p{i % 10}.weight": torch.rand(16, generator=g)
               for i in range(1000)}
    save_sharded(tensors, directory, max_shard_size=16 * 4 * 250)

    def ref() -> int:
        index = json.loads((directory / "model.safetensors.index.json").read_text())
        shapes = {}
        for shard in sorted(set(index["weight_map"].values())):
            with safe_open(str(directory / shard), framework="pt") as f:
                for k in f.keys():
                    shapes[k] = f.get_slice(k).get_shape()
        return len(shapes)

    def tyr() -> int:
        return len(open_checkpoint(directory).tensors)

    def tyr_cold() -> int:
        clear_header_cache()
        return tyr()

    assert tyr() == ref() == 1000
    out = _compare(tyr, ref, iters)
    out["cold"] = _compare(tyr_cold, ref, iters)
    out["tensors"], out["shards"] = 1000, len(list(directory.glob("*.safetensors")))
    return out


def run(quick: bool = False, size_mb: int | None = None, iters: int | None = None
        ) -> dict[str, Any]:
    """Make the checkpoints, time both readers; JSON-serialisable results."""
    size_mb = size_mb or int(os.environ.get("TYR_BENCH_ST_MB", 64 if quick else 512))
    iters = iters or (5 if quick else 15)
    with tempfile.TemporaryDirectory(prefix="tyr-bench-st-") as tmp:
        path = Path(tmp) / "model.safetensors"
        count = make_checkpoint(path, size_mb)
        # the two sides must agree before their times mean anything
        a, b = tyr_load_file(path), load_file(str(path))
        assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
        del a, b
        result: dict[str, Any] = {
            "benchmark": "safetensors", "goal_ratio": GOAL_RATIO, "iters": iters,
            "file_mb": path.stat().st_size / 1e6, "tensors": count,
            "open": _compare(lambda: tyr_load_file(path), lambda: load_file(str(path)), iters),
            "touch": _compare(lambda: _touch(tyr_load_file(path)),
                              lambda: _touch(load_file(str(path))), iters),
        }
        result["headers"] = _headers(Path(tmp) / "sharded", iters * 4)
    return result


def rows(r: dict[str, Any]) -> list[Row]:
    """The lines of the printed table: each side's median ms, and safetensors/tyr (the median
    of the per-pair ratios) against the goal on the tyr line."""
    out = []
    h = r["headers"]
    for key, m, what, goal in (
            ("open", r["open"], f"{r['file_mb']:.0f} MB, {r['tensors']} tensors", True),
            ("touch", r["touch"], "load + sum of every tensor", True),
            ("headers", h, f"{h['tensors']} tensors, {h['shards']} shards + index", True),
            ("headers, cold", h["cold"], "kept headers forgotten before each open", False)):
        verdict = judge(m["pair_ratio_median"], GOAL_RATIO) if goal else \
            {"ratio": f"{m['pair_ratio_median']:.2f}"}
        out.append(Row(f"safetensors {key} (tyr)", f"{m['tyr']['median_ms']:.2f}",
                       f"{m['tyr']['p90_ms']:.2f}", **verdict,
                       note=f"{what}; ratio of medians {m['ratio']:.2f}"))
        out.append(Row(f"safetensors {key} (safetensors)", f"{m['safetensors']['median_ms']:.2f}",
                       f"{m['safetensors']['p90_ms']:.2f}"))
    return out


def main(argv: list[str] | None = None) -> int:
    """`python -m bench.safetensors_load [--quick] [--size-mb N]`: rows then JSON."""
    return standalone(sys.modules[__name__], argv, options=lambda p: p.add_argument(
        "--size-mb", type=int, help="checkpoint size in MB (default 512; 64 with --quick)"))


if __name__ == "__main__":
    raise SystemExit(main())
