"""A run's tokenizer and sampling defaults as Hugging Face files, for `AutoTokenizer` and
`generate`.

    tokenizer.json           the `tokenizers` library's file: the run's own for a BPE run; for
                             a character run a BPE over the characters with no merges (one id
                             per character, the run's ids) and a decoder that joins them
    tokenizer_config.json    `PreTrainedTokenizerFast`, the BOS by name, no clean-up of spaces
    special_tokens_map.json  the BOS by name (empty without one)
    generation_config.json   the BOS id and the run's `sample` table: greedy at temperature
                             0, else sampling with its temperature and top-k; for a model
                             with a table of learned positions (GPT-2's), `max_length` its
                             context, where `generate` must stop

The text a run samples from starts with the BOS when the run's task puts one before every
prompt (`shard_lm`, `bpb_lm`): the exported `tokenizer.json` then has a post-processor that
does the same, so `tokenizer(prompt)` gives the ids `tyr sample` feeds. No end-of-text id is
written: Tyr's tokenizers declare none and `tyr sample` never stops early, so neither does
`generate`. A character outside a character run's vocabulary, which Tyr refuses, is dropped
by the exported tokenizer.
"""
from __future__ import annotations

import json
from typing import Any

from pytyr.errors import ConfigError


def _character_bpe(tok: Any) -> Any:
    """A `tokenizers.Tokenizer` giving each character of `tok` (a `CharTokenizer`) its id."""
    from tokenizers import AddedToken, Tokenizer, decoders, models

    hf = Tokenizer(models.BPE(vocab={c: i for i, c in enumerate(tok.itos)}, merges=[]))
    hf.decoder = decoders.Fuse()  # characters join without separators
    for name, i in sorted(tok.special_tokens.items(), key=lambda kv: kv[1]):
        hf.add_special_tokens([AddedToken(name, special=True)])
        if hf.token_to_id(name) != i:
            raise ConfigError(f"{tok.source}: special token {name!r} would get id "
                              f"{hf.token_to_id(name)} instead of {i}")
    return hf


def hf_tokenizer(tok: Any, prefix: int | None) -> Any:
    """The run's tokenizer (`pytyr.data.tokenizer`) as a `tokenizers.Tokenizer` that also
    puts `prefix` (the BOS id, or None) before every text when asked for special tokens."""
    from tokenizers import Tokenizer, processors

    from pytyr.data.tokenizer import CharTokenizer

    hf = (_character_bpe(tok) if isinstance(tok, CharTokenizer)
          else Tokenizer.from_str(tok.tokenizer.to_str()))
    if prefix is not None:
        name = hf.id_to_token(prefix)
        if name is None:
            raise ConfigError(f"{tok.source}: the BOS id {prefix} is not in the tokenizer")
        hf.post_processor = processors.TemplateProcessing(
            single=f"{name} $A", pair=f"{name} $A {name} $B", special_tokens=[(name, prefix)])
    return hf


def write_tokenizer_files(out: Any, tok: Any, prefix: int | None, sample: Any,
                          max_length: int, *, stop_at: int | None = None
                          ) -> dict[str, int | None]:
    """Write the four files into `out` (an `output.Stage`; module doc); return the special
    ids for the model's config (`bos_token_id`, `eos_token_id`, `pad_token_id`). `stop_at`:
    the tokens, prompt included, past which the model cannot go (`generate`'s max_length)."""
    hf = hf_tokenizer(tok, prefix)
    bos = hf.id_to_token(prefix) if prefix is not None else None
    out.write_text("tokenizer.json", hf.to_str(pretty=True))
    config = {"tokenizer_class": "PreTrainedTokenizerFast", "model_max_length": max_length,
              "clean_up_tokenization_spaces": False, "bos_token": bos, "eos_token": None,
              "pad_token": None, "unk_token": None}
    out.write_text("tokenizer_config.json", json.dumps(config, indent=2) + "\n")
    specials = {"bos_token": bos} if bos is not None else {}
    out.write_text("special_tokens_map.json", json.dumps(specials, indent=2) + "\n")
    ids = {"bos_token_id": prefix, "eos_token_id": None, "pad_token_id": None}
    gen: dict[str, Any] = {k: v for k, v in ids.items() if v is not None}
    if stop_at is not None:
        gen["max_length"] = stop_at
    if sample is not None:
        gen["do_sample"] = sample.temperature > 0
        if sample.temperature > 0:
            gen["temperature"] = sample.temperature
            gen["top_k"] = sample.top_k if sample.top_k is not None else 0
    out.write_text("generation_config.json", json.dumps(gen, indent=2) + "\n")
    return ids
