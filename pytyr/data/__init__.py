"""Data: token shards on disk, the Shakespeare corpus, LM batch iterators, parquet text
datasets, tokenizers and scikit-learn's handwritten digits.

Names are imported on first use (PEP 562), so `tyr check` and the CLI's start-up do not pay
for torch, pyarrow and tokenizers.
"""
from __future__ import annotations

from importlib import import_module
from typing import Any

_EXPORTS = {
    "RandomBatches": "batches",
    "SequentialBatchIterator": "iterators", "bos_aligned_starts": "iterators",
    "FORMATS": "shards", "read_shard": "shards", "write_shard": "shards",
    "BPETokenizer": "tokenizer", "CharTokenizer": "tokenizer", "encode_documents": "tokenizer",
    "load_tokenizer": "tokenizer", "train_bpe": "tokenizer",
    "Digits": "digits", "load_digits_split": "digits",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'pytyr.data' has no attribute {name!r}")
    return getattr(import_module(f"pytyr.data.{_EXPORTS[name]}"), name)
