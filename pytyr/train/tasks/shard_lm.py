"""`shard_lm`: token shards written by `tyr data prepare`, read in order.

    {"task": {"name": "shard_lm", "data": "data/mine", "seq": 256}}

`data` is the directory `tyr data prepare` wrote: `meta.json` lists the train and val shards
with their token counts and SHA-256, the shard format, the vocabulary and the tokenizer (a
copy, `tokenizer.json`, sits beside the shards, with its SHA-256 in meta.json). Before any
training meta.json is verified against its own checksum, every shard's and the tokenizer's
SHA-256 against meta.json, and every token against the vocabulary. Rows are BOS-aligned (each
starts at a document) unless `bos_aligned` is false; batch k is the k-th step of the
`SequentialBatchIterator` over the train shards (looping over epochs); evaluation takes the
first batches of the val shards and of the train shards.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pytyr.config import read_json, setting
from pytyr.digest import stamp_problem
from pytyr.errors import DataError
from pytyr.paths import input_dir
from pytyr.train.task import Batch, TaskContext
from pytyr.train.tasks import register
from pytyr.train.tasks.lm import LanguageModelTask


@dataclasses.dataclass(frozen=True)
class ShardLMOptions:
    data: str = setting(doc="directory written by `tyr data prepare` (with meta.json)")
    seq: int = setting(64, gt=0, le=1 << 20, doc="tokens per row (the context length)")
    bos_aligned: bool = setting(True, doc="start every row at a document's BOS")


@register
class ShardLM(LanguageModelTask):
    name = "shard_lm"
    Options = ShardLMOptions

    def __init__(self, options: ShardLMOptions, ctx: TaskContext):
        super().__init__(options, ctx)
        self.meta: dict[str, Any] = {}

    def _shards(self, root: Path, split: str) -> list[Path]:
        entries = self.meta.get(split) or []
        if not entries:
            hint = " (prepare with --val-tokens N)" if split == "val" else ""
            raise DataError(f"{root}/meta.json: no {split} shards{hint}")
        paths = []
        for e in entries:
            if not isinstance(e, dict) or "sha256" not in e or "file" not in e:
                raise DataError(f"{root}/meta.json: the {split} shards carry no checksums; "
                                f"re-run `tyr data prepare`")
            path = root / Path(e["file"]).name  # names only: never a path out of the directory
            if not path.is_file():
                raise DataError(f"{path}: shard listed in meta.json is missing")
            from pytyr.data.shards import verify_sha256

            verify_sha256(path, e["sha256"], "tyr data prepare")
            paths.append(path)
        return paths

    def prepare(self) -> str:
        from pytyr.data.iterators import SequentialBatchIterator
        from pytyr.data.tokenizer import load_tokenizer

        root = input_dir(self.options.data, "shard directory")
        self.meta = read_json(root / "meta.json", "shard metadata")
        problem = stamp_problem(self.meta)
        if problem:
            raise DataError(f"{root}/meta.json: {problem}; re-run `tyr data prepare`")
        vocab, fmt = self.meta.get("vocab_size"), self.meta.get("format")
        if not isinstance(vocab, int) or fmt not in ("fineweb", "nanogpt"):
            raise DataError(f"{root}/meta.json: needs an integer vocab_size and the shard "
                            f"format; re-run `tyr data prepare`")
        bos = self.meta.get("bos_id") if self.options.bos_aligned else None
        if self.options.bos_aligned and bos is None:
            raise DataError(f"{root}: the tokenizer has no BOS, so rows cannot be BOS-aligned; "
                            f"set task.bos_aligned=false")
        c = self.ctx

        def stream(split: str) -> SequentialBatchIterator:
            return SequentialBatchIterator(self._shards(root, split), c.micro_batch,
                                           self.options.seq, rank=c.rank, world=c.world,
                                           bos_id=bos, loop=True, vocab_size=vocab, fmt=fmt)

        self.train, self.val = stream("train"), stream("val")
        tok = root / "tokenizer.json"
        self.tokenizer = None
        if tok.is_file():
            from pytyr.data.shards import verify_sha256

            if not isinstance(self.meta.get("tokenizer_sha256"), str):
                raise DataError(f"{root}/meta.json: no checksum of tokenizer.json; re-run "
                                f"`tyr data prepare`")
            verify_sha256(tok, self.meta["tokenizer_sha256"], "tyr data prepare")
            self.tokenizer = load_tokenizer(tok, bos=None)  # the BOS is meta.json's bos_id
        return (f"shards {root}: {self.meta.get('tokens', 0):,} tokens, vocab {vocab}, "
                f"{len(self.train)} steps per epoch")

    def data_sizes(self) -> dict[str, int]:
        return {"vocab": int(self.meta["vocab_size"])}

    def batch(self, k: int) -> Batch:
        x, y = self.train.batch_at(k)
        return {"idx": x, "targets": y}

    def eval_batches(self, split: str, iters: int) -> Iterator[Batch]:
        source = self.val if split == "val" else self.train
        for j in range(iters):
            x, y = source.batch_at(j)
            yield {"idx": x, "targets": y}

    def _tokenizer(self) -> Any:
        if self.tokenizer is None:
            raise DataError(f"{self.options.data}: no tokenizer.json beside the shards, so text "
                            f"cannot be sampled; re-run `tyr data prepare`")
        return self.tokenizer

    def encode(self, text: str) -> list[int]:
        bos = self.meta.get("bos_id")  # the id prepare used, whatever the BOS is called
        return ([bos] if isinstance(bos, int) else []) + self._tokenizer().encode(text)

    def decode(self, ids: list[int]) -> str:
        return self._tokenizer().decode(ids, skip_special=True)
