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
from typing import Any, Callable

from . import gpt2


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
    # a checkpoint key -> (the model's name, transposed), or None: for layouts that differ
    rename: Callable[[str], tuple[str, bool] | None] | None = None
    rename_note: str = ""

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

GPT2 = Family(
    name="gpt2",
    model_types=("gpt2",),
    architecture_prefix="GPT2",
    example="examples/gpt/GPT.lean (gptLogits)",
    fields=(
        Field("vocab_size", "c.vocab", 50257, int),
        Field("n_positions", "c.block", 1024, int),
        Field("n_layer", "c.n_layer", 12, int),
        Field("n_head", "c.n_head", 12, int),
        Field("n_embd", "c.head_dim", 768, int, per="n_head"),
        Field("resid_pdrop", "c.dropout", 0.1, float),
    ),
    fixed=(
        Fixed("activation_function", ("gelu", "gelu_python"), "gelu_new",
              "the MLP's activation is exact (erf) GELU; GPT-2's own is gelu_new, the tanh "
              "approximation"),
        Fixed("layer_norm_epsilon", (1e-5,), 1e-5, "the LayerNorms' epsilon is 1e-5"),
        Fixed("n_inner", (None,), None, "the MLP is 4 times the width",
              also=lambda raw: 4 * raw.get("n_embd", 768), also_shown="4*n_embd"),
        Fixed("scale_attn_weights", (True,), True, "attention scores are scaled by 1/√d"),
        Fixed("scale_attn_by_inverse_layer_idx", (False,), False,
              "no layer scales its scores by 1/layer"),
        Fixed("add_cross_attention", (False,), False, "the blocks have no cross-attention"),
        Fixed("tie_word_embeddings", (True,), True, "the head is the token embedding, wte"),
    ),
    # dropout only while training; reordering and upcasting change nothing in float32
    inert=("embd_pdrop", "attn_pdrop", "reorder_and_upcast_attn", "n_ctx", "summary_type",
           "summary_use_proj", "summary_activation", "summary_proj_to_labels",
           "summary_first_dropout"),
    unused=(
        Unused("h.*.attn.bias", "a causal-mask buffer"),
        Unused("h.*.attn.masked_bias", "a buffer"),
        Unused("lm_head.weight", "the head, tied to wte"),
    ),
    prefixes=("transformer.",),
    rename=gpt2.ours,
    rename_note="GPT-2's names (h.N.attn.c_attn.weight → blocks.N.attn.c_attn), its Conv1D "
                "weights transposed",
)

FAMILIES = (BERT, GPT2)


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
            f"{x.hf}={'|'.join([*map(_show, x.allowed)] + [x.also_shown] * bool(x.also_shown))}"
            for x in fam.fixed))
        lines += _wrapped("not parameters (left out, named): " + ", ".join(
            f"{u.pattern} ({u.what})" for u in fam.unused))
        if fam.prefixes:
            lines.append("    keys under " + ", ".join(repr(p) for p in fam.prefixes)
                         + " (a model with a task head) are read without it")
        if fam.rename_note:
            lines += _wrapped(f"read by {fam.rename_note}")
    return "\n".join(lines)


def _wrapped(text: str) -> list[str]:
    return textwrap.wrap(text, 96, initial_indent="    ", subsequent_indent="      ")


def _show(v: Any) -> str:
    if isinstance(v, bool) or v is None:
        return {True: "true", False: "false", None: "null"}[v]
    return "{}" if v == {} else str(v)
