"""Data: token shards on disk, the Shakespeare corpus, LM batch iterators, parquet text
datasets and tokenizers."""
from pytyr.data.batches import RandomBatches
from pytyr.data.iterators import (BatchIterator, SequentialBatchIterator, bos_aligned_starts,
                                  check_against_graph)
from pytyr.data.shards import FORMATS, read_shard, write_shard
from pytyr.data.tokenizer import (BPETokenizer, CharTokenizer, encode_documents,
                                  load_tokenizer, train_bpe)

__all__ = ["FORMATS", "BPETokenizer", "BatchIterator", "CharTokenizer", "RandomBatches",
           "SequentialBatchIterator", "bos_aligned_starts", "check_against_graph",
           "encode_documents", "load_tokenizer", "read_shard", "train_bpe", "write_shard"]
