"""What `tyr run` knows of each Hugging Face model family, as data: one `Family` per family.

A family says how its `config.json` fills the Lean model's config (`fields`: HF key → field,
with HF's default where the key is absent), which keys must have one value because another
would change the computation (`fixed`), which keys do not touch the forward pass (`inert`),
and which checkpoint keys are not parameters of the Lean model (`unused`: buffers, heads),
with the prefix its task-headed checkpoints put before the base model's keys (`prefixes`).
Any config key in none of these tables is named in the output as not read.
"""
from __future__ import annotations

import textwrap
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Field:
    """`hf` (a key of config.json) fills `ours` (a dotted path into the model's values);
    with `per`, the value is `hf / per` (an exact division), as HF's width is split in heads."""

    hf: str
    ours: str
    default: Any
    kind: type  # int or float
    per: str | None = None

    def shown(self) -> str:
        src = f"{self.hf} / {self.per}" if self.per else self.hf
        return f"{src} → {self.ours}"


@dataclass(frozen=True)
class Fixed:
    """A key whose value must be one of `allowed` (HF's default when absent is `default`)."""

    hf: str
    allowed: tuple[Any, ...]
    default: Any
    why: str


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
)


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

    def known_keys(self) -> set[str]:
        return ({f.hf for f in self.fields} | {f.hf for f in self.fixed} | set(self.inert)
                | set(COMMON_INERT))


BERT = Family(
    name="bert",
    model_types=("bert",),
    architecture_prefix="Bert",
    example="examples/bert/Bert.lean (bert, bertMeanPooled)",
    fields=(
        Field("vocab_size", "c.vocab", 30522, int),
        Field("max_position_embeddings", "c.max_position", 512, int),
        Field("type_vocab_size", "c.type_vocab", 2, int),
        Field("num_hidden_layers", "c.n_layer", 12, int),
        Field("num_attention_heads", "c.n_head", 12, int),
        Field("hidden_size", "c.head_dim", 768, int, per="num_attention_heads"),
        Field("intermediate_size", "c.intermediate", 3072, int),
        Field("layer_norm_eps", "c.eps", 1e-12, float),
        Field("hidden_dropout_prob", "c.hidden_dropout", 0.1, float),
        Field("attention_probs_dropout_prob", "c.attn_dropout", 0.1, float),
    ),
    fixed=(
        Fixed("hidden_act", ("gelu", "gelu_python"), "gelu",
              "the MLP's activation is exact (erf) GELU"),
        Fixed("position_embedding_type", ("absolute",), "absolute",
              "positions are a learned absolute table"),
        Fixed("is_decoder", (False,), False, "attention is bidirectional"),
        Fixed("add_cross_attention", (False,), False, "the layers have no cross-attention"),
        Fixed("pruned_heads", ({},), {}, "every layer has all its heads"),
    ),
    inert=(),
    unused=(
        Unused("embeddings.position_ids", "a buffer"),
        Unused("embeddings.token_type_ids", "a buffer"),
        Unused("pooler.dense.*", "the pooler"),
        Unused("cls.*", "the pretraining heads"),
        Unused("classifier.*", "a classification head"),
        Unused("qa_outputs.*", "a question-answering head"),
    ),
    prefixes=("bert.",),
)

FAMILIES = (BERT,)


def family_named(model_type: str) -> Family | None:
    return next((f for f in FAMILIES if model_type in f.model_types), None)


def family_of_architectures(names: list[Any]) -> Family | None:
    for fam in FAMILIES:
        if any(isinstance(n, str) and n.startswith(fam.architecture_prefix) for n in names):
            return fam
    return None


def mapping_help() -> str:
    """The tables, for `tyr run --help`."""
    lines = []
    for fam in FAMILIES:
        lines.append(f"  {fam.name} (model_type {', '.join(fam.model_types)}; "
                     f"fills {fam.example}):")
        for f in fam.fields:
            lines.append(f"    {f.shown()}")
        lines += _wrapped("must be: " + ", ".join(
            f"{x.hf}={'|'.join(map(_show, x.allowed))}" for x in fam.fixed))
        lines += _wrapped("not parameters (left out, named): " + ", ".join(
            f"{u.pattern} ({u.what})" for u in fam.unused))
        if fam.prefixes:
            lines.append("    keys under " + ", ".join(repr(p) for p in fam.prefixes)
                         + " (BertFor* checkpoints) are read without it")
    return "\n".join(lines)


def _wrapped(text: str) -> list[str]:
    return textwrap.wrap(text, 96, initial_indent="    ", subsequent_indent="      ")


def _show(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return "{}" if v == {} else str(v)
