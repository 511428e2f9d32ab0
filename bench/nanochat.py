"""The nanochat model of `examples/nanochat/NanoChat.lean` through Tyr's executor vs the same
model written directly in PyTorch (`bench/plain_nanochat.py`), and cached vs uncached decoding.

Training step: the config of `examples/nanochat/january.json` (January 2026's layout, the
models `nanochatJan…`; depth 4, width 128 in 4 heads of 32 sharing 2 key/value heads, vocab
4096, block 128) at batch 8 × 128 tokens. The plain
model gets copies of the Tyr module's weights and both sides step with the optimizers
`tyr train` builds from that config's `train` table (Muon for the hidden matrices, AdamW for
the embedding and the head): forward, backward, both optimizers. Steps ALTERNATE between the
sides (order swapped every round) after a warm-up; the losses and final parameters are
compared as evidence of the same math. Both sides see the same batches, made as `tyr train`
makes them (`batches`): the `training_batch(k)` of that config's `bpb_lm` task at the
benchmark's batch and sequence sizes, reading a small data set written into a temporary
directory at the start (`write_data`: seeded random documents of ids below `c.vocab` through
`tyr data prepare`'s code, as the real shards are not in a checkout). Goal: plain/tyr >= 0.97.

Decoding: `max_new` tokens after a short prompt at temperature 0, uncached (the
`nanochatJanLogits` graph of each context length, the whole context every token) and cached
(`nanochatJanStep`: prefill, then one token over the key/value caches), both through the
`RunModel` of `tyr sample` with their graphs built in a first, untimed round; they must
pick the same tokens. Reported in tokens per second.
"""
from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from bench import ROOT, Row, alternate_steps, pair_rows, summarize, task_batches
from bench.plain_nanochat import Config, NanoChat
from bench.standalone import standalone

GOAL_RATIO = 0.97
LEAN = ROOT / "examples" / "nanochat" / "NanoChat.lean"
CONFIG = ROOT / "examples" / "nanochat" / "january.json"
N_BATCHES = 8


def recipe() -> dict[str, Any]:
    return json.loads(CONFIG.read_text(encoding="utf-8"))


def build_pair(c: dict[str, Any], b: int, t: int, seed: int = 0) -> tuple[Any, NanoChat]:
    from pytyr.pipeline import graph_from_lean, module_from_graph

    tyr = module_from_graph(graph_from_lean(LEAN, "nanochatJan", {"c": c, "b": b, "t": t}),
                            seed=seed)
    plain = NanoChat(Config.from_lean(c))
    plain.load_state_dict(tyr.state_dict())
    return tyr, plain


def write_data(root: Path, vocab: int, t: int, docs: int, val_docs: int, seed: int) -> Path:
    """A `tyr data prepare` data set in `root/shards`: `docs` train and `val_docs` val
    documents of t..2t seeded random ids below `vocab - 1`, BOS (`vocab - 1`) before each, so
    every document starts one BOS-aligned row; the tokenizer is `vocab - 1` characters + BOS."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    from pytyr.data.prepare import prepare_parquet
    from pytyr.data.tokenizer import BOS, CharTokenizer

    chars = [chr(0x4E00 + i) for i in range(vocab - 1)]  # CJK ideographs: vocab <= 20,993
    rng = np.random.default_rng(seed)
    texts = ["".join(chars[i] for i in rng.integers(0, vocab - 1, rng.integers(t, 2 * t + 1)))
             for _ in range(val_docs + docs)]
    pq.write_table(pa.table({"text": texts}), root / "docs.parquet")
    prepare_parquet(root / "docs.parquet", CharTokenizer(chars, BOS), root / "shards",
                    val_tokens=sum(len(x) + 1 for x in texts[:val_docs]), progress=False)
    return root / "shards"


def batches(c: dict[str, Any], b: int, t: int, n: int, seed: int
            ) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """`n` (idx, targets) batches of `b` x `t` tokens as `tyr train` makes them: the
    `training_batch(k)` of the January config's `bpb_lm` task over `write_data`'s data set
    of ids below `c.vocab` (`n * b` train documents, one step of val: a row each)."""
    with tempfile.TemporaryDirectory(prefix="tyr-bench-nanochat-") as tmp:
        data = write_data(Path(tmp), c["vocab"], t, n * b + b, b, seed)
        return task_batches({**recipe()["task"], "data": str(data), "seq": t}, b, n, seed)


def _optimizers(module: torch.nn.Module, train: dict[str, Any]) -> list[torch.optim.Optimizer]:
    from pytyr.config import load_dataclass
    from pytyr.train.optim import make_optimizers
    from pytyr.train.settings import TrainConfig

    return make_optimizers(module, load_dataclass(TrainConfig, train, "bench"),
                           torch.device("cpu"))


def bench_train(*, steps: int, warmup: int, b: int = 8) -> dict[str, Any]:
    cfg = recipe()
    c, t = cfg["model"]["c"], cfg["task"]["seq"]
    tyr, plain = build_pair(c, b, t)
    mods = {"tyr": tyr, "plain": plain}
    opts = {side: _optimizers(m, cfg["train"]) for side, m in mods.items()}
    data = batches(c, b, t, N_BATCHES, 1)
    return alternate_steps({"c": c, "b": b, "t": t}, mods, opts, data, steps=steps,
                           warmup=warmup)


def bench_decode(*, max_new: int, rounds: int = 2) -> dict[str, Any]:
    from pytyr.pipeline import LeanModels
    from pytyr.train.model import RunModel
    from pytyr.train.task import Feed
    from pytyr.train.tasks.lm.kvcache import generate_cached
    from pytyr.train.tasks.lm.sample import generate

    cfg = recipe()
    c, block = cfg["model"]["c"], cfg["task"]["seq"]
    source = LeanModels(LEAN)
    tyr, _ = build_pair(c, 1, block)
    factory = RunModel(source, "nanochatJan", {"c": c}, tyr.state_dict())
    feeds = {"idx": Feed("i64", ("batch", "seq"))}
    prompt = [0, 17, 230, 5, 99, 1024, 7, 300]

    def uncached() -> list[int]:
        def logits(idx: torch.Tensor) -> torch.Tensor:
            fwd = factory("nanochatJanLogits", feeds, {"batch": 1, "seq": idx.shape[1]})
            return fwd({"idx": idx})[0]
        return generate(logits, prompt, max_new, 0.0, block_size=block)[0].tolist()

    def cached() -> list[int]:
        return generate_cached(factory, "nanochatJanStep", prompt, max_new, 0.0, block=block)

    times: dict[str, list[float]] = {"uncached": [], "cached": []}
    tokens = {}
    for r in range(rounds + 1):  # round 0 builds every graph
        for side, fn in (("uncached", uncached), ("cached", cached))[::1 if r % 2 else -1]:
            t0 = time.perf_counter()
            tokens[side] = fn()
            if r:
                times[side].append(time.perf_counter() - t0)
    speed = {side: max_new / summarize(ts)["median_ms"] * 1e3 for side, ts in times.items()}
    return {"max_new": max_new, "prompt": len(prompt), "block": block,
            "tokens_per_s": speed, "speedup": speed["cached"] / speed["uncached"],
            "same_tokens": tokens["cached"] == tokens["uncached"]}


def flops_per_token(c: dict[str, Any], t: int) -> float:
    """Training FLOPs per token (forward + backward) of the nanochat model of config table
    `c` at context `t`, as nanochat's `estimate_flops` counts them: 6 per matrix parameter
    the tokens flow through (the embedding is a lookup), plus 12 · layers · width · t for the
    attention scores and their weighting."""
    cfg = Config.from_lean(c)
    w, kv = cfg.width, cfg.n_kv_head * cfg.head_dim
    matrices = cfg.depth * (2 * w * w + 2 * kv * w + 8 * w * w) + cfg.vocab * w
    return 6.0 * matrices + 12.0 * cfg.depth * w * t


def run(*, quick: bool = False) -> dict[str, Any]:
    steps, warmup = (10, 3) if quick else (40, 5)
    return {"benchmark": "nanochat", "goal_ratio": GOAL_RATIO, "torch": torch.__version__,
            "threads": torch.get_num_threads(),
            "train": bench_train(steps=steps, warmup=warmup),
            "decode": bench_decode(max_new=30 if quick else 100)}


def rows(result: dict[str, Any]) -> list[Row]:
    r = result["train"]
    c = r["values"]["c"]
    label = (f"depth {c['depth']}, width {c['depth'] * c['aspect_ratio']}, "
             f"b {r['values']['b']} t {r['values']['t']}, Muon+AdamW")
    out = pair_rows(label, r, result["goal_ratio"], 1, prefix="nanochat ")
    toks = r["values"]["b"] * r["values"]["t"]
    out.append(Row("  nanochat train tokens/s",
                   note=f"tyr {toks / r['tyr']['median_ms'] * 1e3:,.0f}, "
                        f"plain {toks / r['plain']['median_ms'] * 1e3:,.0f}"))
    d = result["decode"]
    out.append(Row(f"nanochat decode [{d['max_new']} tokens, greedy]",
                   note=f"cached {d['tokens_per_s']['cached']:,.1f} tok/s, uncached "
                        f"{d['tokens_per_s']['uncached']:,.1f} tok/s: {d['speedup']:.1f}x; "
                        f"same tokens: {d['same_tokens']}"))
    return out


def main(argv: list[str] | None = None) -> int:
    """`python -m bench.nanochat [--quick]`: this benchmark alone, rows then JSON."""
    return standalone(sys.modules[__name__], argv)


if __name__ == "__main__":
    sys.exit(main())
