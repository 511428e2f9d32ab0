"""Data: token shards on disk, the Shakespeare corpus, random LM batches."""
from pytyr.data.batches import RandomBatches
from pytyr.data.shards import FORMATS, read_shard, write_shard

__all__ = ["FORMATS", "RandomBatches", "read_shard", "write_shard"]
