"""How fast the data path is next to the plain code it replaces (ratios measured in one run).

* sequential: one pass of `SequentialBatchIterator` over a fineweb shard of random tokens vs
  the plain loop over a numpy memmap (`mm[i:i + B*T + 1]` → int64 tensor → x, y views).
  Goal: tyr / plain throughput ≥ 0.95.
* parquet: parquet text → token array with a BOS per document, `iter_tokens` over a
  `ParquetTextStream` vs a plain loop (`ParquetFile.read_row_group` + the same `tokenizers`
  batch encode + a list of ids → uint16 array). Goal ≥ 0.9. The BPE (vocab 4096) is trained
  on the synthetic corpus first, outside the timing.

Trials alternate tyr / plain so that drift in the machine's load hits both sides; the ratio is
the median plain time over the median tyr time (`pair_ratio_median`: the median of the
per-trial ratios, less exposed to drift). Both sides' outputs are compared.
"""
from __future__ import annotations

import gc
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

from bench import Row, judge

SEQ_GOAL, PARQUET_GOAL = 0.95, 0.9
BATCH, SEQ = 16, 1024


def _alternate(tyr: Callable[[], Any], plain: Callable[[], Any], trials: int
               ) -> tuple[list[float], list[float], Any, Any]:
    out_t, out_p = tyr(), plain()  # warm-up: page cache, allocator, tokenizer threads
    ts, ps = [], []
    for _ in range(trials):
        for fn, acc in ((tyr, ts), (plain, ps)):
            gc.collect()
            t0 = time.perf_counter()
            fn()
            acc.append(time.perf_counter() - t0)
    return ts, ps, out_t, out_p


def _summary(ts: list[float], ps: list[float], tokens: int, goal: float) -> dict[str, Any]:
    t, p = statistics.median(ts), statistics.median(ps)
    # each trial's pair ran back to back: their ratio is the least exposed to load drift
    pairs = statistics.median(b / a for a, b in zip(ts, ps))
    return {"tokens": tokens, "tyr_s": t, "plain_s": p, "tyr_tokens_per_s": tokens / t,
            "plain_tokens_per_s": tokens / p, "ratio": p / t, "pair_ratio_median": pairs,
            "goal_ratio": goal, "trials": len(ts)}


def bench_sequential(tmp: Path, n_tokens: int, trials: int) -> dict[str, Any]:
    import torch

    from pytyr.data.iterators import SequentialBatchIterator
    from pytyr.data.shards import HEADER_BYTES, write_shard

    path = write_shard(tmp / "tokens.bin",
                       np.random.default_rng(0).integers(0, 50257, n_tokens, dtype=np.uint16),
                       "fineweb")
    step = BATCH * SEQ

    def tyr() -> tuple[Any, int]:
        it = SequentialBatchIterator(path, BATCH, SEQ)
        first, n = None, 0
        for x, y in it:
            first = first if n else (x, y)
            n += 1
        return first, n

    def plain() -> tuple[Any, int]:
        mm = np.memmap(path, dtype=np.uint16, mode="r", offset=HEADER_BYTES, shape=(n_tokens,))
        first, n = None, 0
        for i in range(0, n_tokens - step, step):
            buf = torch.from_numpy(mm[i:i + step + 1].astype(np.int64))
            x, y = buf[:-1].view(BATCH, SEQ), buf[1:].view(BATCH, SEQ)
            first = first if n else (x, y)
            n += 1
        return first, n

    ts, ps, (ft, nt), (fp, np_) = _alternate(tyr, plain, trials)
    same = nt == np_ and all(torch.equal(a, b) for a, b in zip(ft, fp))
    return {**_summary(ts, ps, nt * step, SEQ_GOAL), "batch": BATCH, "seq": SEQ,
            "steps": nt, "same_output": bool(same)}


def _corpus(n_docs: int) -> list[str]:
    """Synthetic documents: Zipf-distributed made-up words, 20..400 words each."""
    rng = np.random.default_rng(1)
    letters = np.array(list("etaoinshrdlucmfwypvbgkjqxz"))
    words = ["".join(rng.choice(letters, size=int(rng.integers(2, 10)))) for _ in range(3000)]
    p = 1.0 / np.arange(1, len(words) + 1)
    p /= p.sum()
    return [" ".join(np.asarray(words)[rng.choice(len(words), size=int(rng.integers(20, 400)),
                                                  p=p)]) + "." for _ in range(n_docs)]


def bench_parquet(tmp: Path, n_docs: int, trials: int) -> dict[str, Any]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from pytyr.data.parquet import ParquetTextStream, iter_tokens
    from pytyr.data.tokenizer import train_bpe

    texts = _corpus(n_docs)
    path = tmp / "docs.parquet"
    pq.write_table(pa.table({"text": texts}), path, row_group_size=max(1, n_docs // 16))
    tok = train_bpe(texts[:2000], 4096)
    hf, bos = tok.tokenizer, tok.bos_id

    def tyr() -> np.ndarray:
        return np.concatenate([t for _, t in iter_tokens(ParquetTextStream(path), tok)])

    def plain() -> np.ndarray:
        pf, parts = pq.ParquetFile(path), []
        for g in range(pf.num_row_groups):
            docs = pf.read_row_group(g, columns=["text"]).column("text").to_pylist()
            ids: list[int] = []
            for e in hf.encode_batch_fast(docs, add_special_tokens=False):
                ids.append(bos)
                ids.extend(e.ids)
            parts.append(np.array(ids, dtype=np.uint16))
        return np.concatenate(parts)

    ts, ps, out_t, out_p = _alternate(tyr, plain, trials)
    return {**_summary(ts, ps, len(out_t), PARQUET_GOAL), "documents": n_docs,
            "vocab_size": tok.vocab_size, "row_groups": pq.ParquetFile(path).num_row_groups,
            "same_output": bool(np.array_equal(out_t, out_p))}


def run(*, quick: bool = False, scale: float = 1.0) -> dict[str, Any]:
    """Both comparisons; `scale` shrinks the data (the smoke test uses a few percent)."""
    trials = 3 if quick else 9
    n_tokens = int((8_000_000 if quick else 64_000_000) * scale) + BATCH * SEQ + 1
    n_docs = max(64, int((2_000 if quick else 8_000) * scale))
    with tempfile.TemporaryDirectory(prefix="tyr-bench-data-") as d:
        return {"benchmark": "data", "sequential": bench_sequential(Path(d), n_tokens, trials),
                "parquet": bench_parquet(Path(d), n_docs, trials)}


def rows(result: dict[str, Any]) -> list[Row]:
    """The lines of the printed table: a pass's median ms, throughput, and tyr/plain (the
    median of the per-trial ratios) against the goal."""
    out = []
    for key, what in (("sequential", "SequentialBatchIterator pass vs memmap slicing"),
                      ("parquet", "parquet -> tokens vs pyarrow + tokenizers loop")):
        s = result[key]
        out.append(Row(f"data: {what}", f"{s['tyr_s'] * 1e3:.1f}",
                       **judge(s["pair_ratio_median"], s["goal_ratio"], digits=3),
                       note=f"{s['tyr_tokens_per_s'] / 1e6:.1f} vs "
                            f"{s['plain_tokens_per_s'] / 1e6:.1f} Mtok/s; ratio of medians "
                            f"{s['ratio']:.3f}; same output: {s['same_output']}"))
    return out
