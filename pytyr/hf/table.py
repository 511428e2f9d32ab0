"""The records of the family table (`families`): how a config.json key fills a Lean model's
config field (`Field`), a key that must have one value (`Fixed`), checkpoint keys that are no
parameter (`Unused`), a narrower model of a family's checkpoints (`Narrower`), and a family
(`Family`). Data only: the rows are `families`'.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable


@dataclass(frozen=True)
class Field:
    """`hf` (a key of config.json; `a.b` is key `b` of the table `a`) fills `ours` (a dotted
    path into the model's values); with `per`, the value is `hf / per` (an exact division), as
    HF's width is split in heads. Absent or null, it is `default`, or the value of the key
    `default_from` (`num_key_value_heads` of `num_attention_heads`), or `default(raw)`; with
    `at_most`, a value over that key's is read as that key's (a window as long as the context
    is no window)."""

    hf: str
    ours: str
    default: Any
    kind: type  # int, float, or bool (a flag: the model's field is 0 or 1)
    per: str | None = None
    default_from: str | None = None
    at_most: str | None = None
    default_shown: str = ""  # how a computed default reads in --help
    quiet: bool = False  # absent is the usual case (a scaling's keys without a scaling): no note

    def shown(self) -> str:
        src = f"{self.hf} / {self.per}" if self.per else self.hf
        return f"{src} → {self.ours}" + (f" (absent: {self.default_shown})"
                                         if self.default_shown else "")


@dataclass(frozen=True)
class Fixed:
    """A key whose value must be one of `allowed` (HF's default when absent is `default`)."""

    hf: str
    allowed: tuple[Any, ...]
    default: Any
    why: str
    also: Callable[[dict[str, Any]], Any] | None = None  # one more allowed, from the config
    also_shown: str = ""  # how `also` reads in --help

    def allowed_in(self, raw: dict[str, Any]) -> tuple[Any, ...]:
        return self.allowed + ((self.also(raw),) if self.also is not None else ())


@dataclass(frozen=True)
class Unused:
    """Checkpoint keys (a glob) that are no parameter of the Lean model, and what they are."""

    pattern: str
    what: str


# Keys of every HF config that do not change a forward pass in float32 (PretrainedConfig's
# bookkeeping, generation and training settings, labels, tokenizer and dtype hints).
COMMON_INERT = (
    "architectures", "model_type", "transformers_version", "_name_or_path", "torch_dtype",
    "dtype", "initializer_range", "pad_token_id", "bos_token_id", "eos_token_id",
    "sep_token_id", "decoder_start_token_id", "use_cache", "gradient_checkpointing",
    "classifier_dropout", "id2label", "label2id", "num_labels", "problem_type",
    "finetuning_task", "tokenizer_class", "prefix", "task_specific_params",
    "output_attentions", "output_hidden_states", "return_dict", "torchscript",
    "chunk_size_feed_forward", "tie_word_embeddings", "use_return_dict", "_attn_implementation",
    "attn_implementation",
    "_class_name", "_diffusers_version",  # a diffusers model's bookkeeping
)


@dataclass(frozen=True)
class Narrower:
    """Another Lean model that runs a family's checkpoints but computes less (the GPT example,
    `examples/gpt/GPT.lean`, of GPT-2's: exact GELU, an MLP of 4 × the width, LayerNorms of
    epsilon 1e-5). It is recognised by its config: the run's model config (the config beside
    FILE.lean, --config, a run's values) has every other field of the family's and none of
    `lacks`. Its values then leave `lacks` out, and the checkpoint must have `fixed`."""

    example: str
    lacks: tuple[str, ...]  # the model's dotted paths (`c.inner`) it has no field for
    fixed: tuple[Fixed, ...]


@dataclass(frozen=True)
class Family:
    name: str
    model_types: tuple[str, ...]
    architecture_prefix: str  # `architectures` entries of the family start with it
    example: str  # the Lean model it fills
    fields: tuple[Field, ...]
    fixed: tuple[Fixed, ...]
    inert: tuple[str, ...]
    unused: tuple[Unused, ...]
    prefixes: tuple[str, ...] = ()
    # a checkpoint key -> (the model's name, transposed), or None: for layouts that differ
    rename: Callable[[str], tuple[str, bool] | None] | None = None
    rename_note: str = ""
    # what `tyr run --weights DIR` runs without a Lean file: the file (from the repository's
    # root) and its model for an untied and for a tied head (`tie_word_embeddings`)
    lean: str | None = None
    models: tuple[str, str] | None = None
    tied_default: bool = False
    # or the model picked from the (normalised) config itself: GPT-2's by its activation
    pick: Callable[[dict[str, Any]], str] | None = None
    pick_note: str = ""  # how `pick` reads in --help
    # with `pick`: each model it picks and the config keys that pick it (what an export writes)
    picked: tuple[tuple[str, tuple[tuple[str, Any], ...]], ...] = ()
    # the class an export names in `architectures` ("": `{architecture_prefix}ForCausalLM`)
    architecture: str = ""
    narrower: Narrower | None = None
    # the config as the tables read it: both layouts of a key that moved between versions
    normalised: Callable[[dict[str, Any]], dict[str, Any]] | None = None

    def known_keys(self) -> set[str]:
        return ({f.hf.split(".")[0] for f in self.fields}
                | {f.hf.split(".")[0] for f in self.fixed} | set(self.inert)
                | set(COMMON_INERT))

    def models_written(self) -> dict[str, dict[str, Any]]:
        """Each Lean model the family runs, with the config keys that pick it: an export of
        a run of it writes them."""
        if self.models is not None:
            return {m: {"tie_word_embeddings": bool(i)} for i, m in enumerate(self.models)}
        return {m: dict(keys) for m, keys in self.picked}

    def model_for(self, raw: dict[str, Any]) -> str | None:
        """The Lean model for a config: `pick`'s, else by whether its head is tied to the
        embedding."""
        if self.pick is not None:
            return self.pick(raw)
        if self.models is None:
            return None
        tied = raw.get("tie_word_embeddings")
        return self.models[1 if (self.tied_default if tied is None else tied) else 0]
