"""`shard_lm`: token shards written by `tyr data prepare`, read in order.

    {"task": {"name": "shard_lm", "data": "data/mine", "seq": 256}}

`data` is the directory `tyr data prepare` wrote: `meta.json` lists the train and val shards
with their token counts and SHA-256, the shard format, the vocabulary and the tokenizer (a
copy, `tokenizer.json`, sits beside the shards, with its SHA-256 in meta.json). Before any
training meta.json is verified against its own checksum, every shard's and the tokenizer's
SHA-256 against meta.json, and every token against the vocabulary. Rows are packed: the train
shards are one stream of BOS-delimited documents, cut into rows of `seq + 1` tokens end to end,
wrapping around at the end, so every epoch reads every token (nanoGPT's layout);
`bos_aligned` starts every row at a document's BOS instead and reads only each document's
first `seq + 1` tokens and what fits after them (nanochat's layout). Batch k is the k-th step
of the `SequentialBatchIterator` over the train shards; evaluation takes the first batches of
the val shards and of the train shards. Each split must hold one step's rows: the check says
how many tokens (or BOS-aligned rows) that takes and how many there are.
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
from pytyr.train.tasks.lm.task import LanguageModelTask


@dataclasses.dataclass(frozen=True)
class ShardLMOptions:
    data: str = setting(doc="directory written by `tyr data prepare` (with meta.json)")
    seq: int = setting(64, gt=0, le=1 << 20, doc="tokens per row (the context length)")
    bos_aligned: bool = setting(False, doc="start every row at a document's BOS (nanochat); "
                                "false: pack documents end to end, every token read each epoch")


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
            hint = " (prepare with --val FRACTION or --val-tokens N)" if split == "val" else ""
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

    def _meta(self) -> tuple[Path, dict[str, Any]]:
        """The shard directory and its meta.json, checked against its own checksum."""
        root = input_dir(self.options.data, "shard directory")
        meta = read_json(root / "meta.json", "shard metadata")
        problem = stamp_problem(meta)
        if problem:
            raise DataError(f"{root}/meta.json: {problem}; re-run `tyr data prepare`")
        if not isinstance(meta.get("vocab_size"), int) \
                or meta.get("format") not in ("fineweb", "nanogpt"):
            raise DataError(f"{root}/meta.json: needs an integer vocab_size and the shard "
                            f"format; re-run `tyr data prepare`")
        return root, meta

    def peek_sizes(self) -> dict[str, int]:
        """The vocabulary meta.json names (the shards are not read)."""
        return {"vocab": int(self._meta()[1]["vocab_size"])}

    def prepare(self) -> str:
        from pytyr.data.iterators import SequentialBatchIterator
        from pytyr.data.tokenizer import load_tokenizer

        root, self.meta = self._meta()
        vocab, fmt = self.meta["vocab_size"], self.meta["format"]
        bos = self.meta.get("bos_id") if self.options.bos_aligned else None
        if self.options.bos_aligned and bos is None:
            raise DataError(f"{root}: the tokenizer has no BOS, so rows cannot be BOS-aligned; "
                            f"set task.bos_aligned=false")
        c = self.ctx

        def stream(split: str) -> SequentialBatchIterator:
            shards = self._shards(root, split)
            try:
                return SequentialBatchIterator(shards, c.micro_batch, self.options.seq,
                                               rank=c.rank, world=c.world, accum=c.accum,
                                               bos_id=bos,
                                               loop=True, vocab_size=vocab, fmt=fmt)
            except DataError as err:
                if "too few" not in str(err):
                    raise
                fix = ("; lower train.batch or task.seq, or give more data"
                       + ("; or pack the documents (task.bos_aligned=false)" if bos is not None
                          else ""))
                raise DataError(f"the {split} split of {root}: {err}{fix}") from None

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
        epoch = (f"{self.train.optimizer_steps_per_epoch:.1f} "
                 f"{'' if bos is None else 'BOS-aligned '}optimizer steps per epoch")
        return (f"shards {root}: {self.train.tokens:,} train and {self.val.tokens:,} val "
                f"tokens, vocab {vocab}, {epoch}")

    def data_sizes(self) -> dict[str, int]:
        return {"vocab": int(self.meta["vocab_size"])}

    def batch(self, k: int) -> Batch:
        x, y = self.train.batch_at(k)
        return {"idx": x, "targets": y}

    def eval_batches(self, split: str, iters: int) -> Iterator[Batch]:
        source = self.val if split == "val" else self.train
        for j in self.ctx.eval_micro_batches(iters):
            x, y = source.batch_at(j)
            yield {"idx": x, "targets": y}

    def eval_batch_limit(self, split: str) -> int | None:
        """A pass over the split: further batches wrap around to its start."""
        return max(1, len(self.val if split == "val" else self.train) // self.ctx.accum)

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

    def text_tokenizer(self) -> tuple[Any, int | None]:
        bos = self.meta.get("bos_id")
        return self._tokenizer(), bos if isinstance(bos, int) else None
