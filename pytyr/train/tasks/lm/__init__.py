"""Language models: the task base (`task.py`), its tasks (`char_lm`, `shard_lm`, `bpb_lm`),
autoregressive sampling (`sample.py`), cached decoding through a step model's key/value caches
(`kvcache.py`) and `tyr chat` (`chat.py`)."""
