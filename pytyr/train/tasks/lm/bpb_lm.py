"""`bpb_lm`: `shard_lm`, evaluated in bits per byte too (nanochat's metric).

    {"task": {"name": "bpb_lm", "data": "data/news-shards", "seq": 256}}

Bits per byte do not depend on the tokenizer, so runs with different vocabularies compare:
the summed cross entropy (nats) of the predicted tokens over ln 2 times the UTF-8 bytes those
tokens stand for (`token_byte_lengths` of the shards' `tokenizer.json`). As in nanochat,
special tokens (the BOS that starts each document) count 0 bytes and their loss is left out.
Each evaluation batch reports its summed nats and bytes; the engine averages them over the
batches and the ranks (equal counts, so the ratio of the means is the ratio of the sums)
and `summarize_metrics` turns them into `val_bpb` and `train_bpb`.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from pytyr.errors import DataError
from pytyr.train.task import Batch
from pytyr.train.tasks import register
from pytyr.train.tasks.lm.shard_lm import ShardLM


@register
class BitsPerByteLM(ShardLM):
    name = "bpb_lm"

    def prepare(self) -> str:
        from pytyr.data.tokenizer import token_byte_lengths

        about = super().prepare()
        if self.tokenizer is None:
            raise DataError(f"{self.options.data}: no tokenizer.json beside the shards, so the "
                            f"bytes per token are unknown; re-run `tyr data prepare`")
        self.token_bytes = torch.from_numpy(token_byte_lengths(self.tokenizer))
        return about

    def eval_metrics(self, batch: Batch, outputs: tuple[torch.Tensor, ...]) -> dict[str, float]:
        logits, targets = outputs[0], batch["targets"].to(outputs[0].device)
        flat = targets.reshape(-1)
        nats = F.cross_entropy(logits.float().reshape(flat.numel(), -1), flat, reduction="none")
        nbytes = self.token_bytes.to(flat.device)[flat]
        return {"loss": float(outputs[-1]), "nats": float((nats * (nbytes > 0)).sum()),
                "bytes": float(nbytes.sum())}

    def summarize_metrics(self, record: dict[str, float]) -> dict[str, float]:
        out = dict(record)
        for split in self.splits:
            nats, nbytes = out.pop(f"{split}_nats", None), out.pop(f"{split}_bytes", None)
            if nats is not None and nbytes:
                out[f"{split}_bpb"] = nats / (math.log(2) * nbytes)
        return out
