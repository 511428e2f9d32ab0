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
from .rope import rope_parameters


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
    kind: type  # int or float
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
    # what `tyr run --weights DIR` runs without a Lean file: the file (from the repository's
    # root) and its model for an untied and for a tied head (`tie_word_embeddings`)
    lean: str | None = None
    models: tuple[str, str] | None = None
    tied_default: bool = False
    # the config as the tables read it: both layouts of a key that moved between versions
    normalised: Callable[[dict[str, Any]], dict[str, Any]] | None = None

    def known_keys(self) -> set[str]:
        return ({f.hf.split(".")[0] for f in self.fields}
                | {f.hf.split(".")[0] for f in self.fixed} | set(self.inert)
                | set(COMMON_INERT))

    def model_for(self, raw: dict[str, Any]) -> str | None:
        """The Lean model for a config: by whether its head is tied to the embedding."""
        if self.models is None:
            return None
        tied = raw.get("tie_word_embeddings")
        return self.models[1 if (self.tied_default if tied is None else tied) else 0]


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


def _head_dim(raw: dict[str, Any]) -> Any:
    # transformers' `getattr(config, "head_dim", None) or hidden_size // num_attention_heads`
    heads = raw.get("num_attention_heads") or 32
    return (raw.get("hidden_size") or 4096) // heads if isinstance(heads, int) else heads


def _decoder_fields(*, vocab: int, max_position: int, intermediate: int, kv_heads: int | None,
                    eps: float, theta: float, head_dim: int | None = None) -> tuple[Field, ...]:
    """The fields of the Llama family's config (examples/llama/Llama.lean), with a family's
    defaults for keys a hand-written config may leave out."""
    kv = (Field("num_key_value_heads", "c.n_kv_head", kv_heads, int) if kv_heads is not None
          else Field("num_key_value_heads", "c.n_kv_head", None, int,
                     default_from="num_attention_heads"))
    hd = (Field("head_dim", "c.head_dim", head_dim, int) if head_dim is not None
          else Field("head_dim", "c.head_dim", _head_dim, int,
                     default_shown="hidden_size / num_attention_heads"))
    return (
        Field("vocab_size", "c.vocab", vocab, int),
        Field("max_position_embeddings", "c.max_position", max_position, int),
        Field("num_hidden_layers", "c.n_layer", 32, int),
        Field("hidden_size", "c.hidden", 4096, int),
        Field("intermediate_size", "c.intermediate", intermediate, int),
        Field("num_attention_heads", "c.n_head", 32, int),
        kv, hd,
        Field("rms_norm_eps", "c.eps", eps, float),
        Field("rope_parameters.rope_theta", "c.rope_theta", theta, float),
        Field("rope_parameters.factor", "c.rope_factor", 1.0, float, quiet=True),
        Field("rope_parameters.low_freq_factor", "c.rope_low", 1.0, float, quiet=True),
        Field("rope_parameters.high_freq_factor", "c.rope_high", 4.0, float, quiet=True),
        Field("rope_parameters.original_max_position_embeddings", "c.rope_original", 8192, int,
              quiet=True),
    )


def _all_full(raw: dict[str, Any]) -> Any:
    return ["full_attention"] * raw.get("num_hidden_layers", 32)


_DECODER_FIXED = (
    Fixed("hidden_act", ("silu",), "silu", "the MLP is SwiGLU, silu(gate) · up"),
    Fixed("rope_parameters.rope_type", ("default", "llama3"), "default",
          "rotary is the default one or Llama 3's scaling"),
    Fixed("rope_parameters.partial_rotary_factor", (1.0, 1), 1.0,
          "rotary turns the whole head"),
    Fixed("attention_dropout", (0.0, 0), 0.0, "attention has no dropout"),
)
_NO_BIAS = (Fixed("attention_bias", (False,), False, "the attention projections have no bias"),)
_NO_WINDOW = (
    Fixed("use_sliding_window", (False,), False, "every layer attends over the whole context"),
    Fixed("layer_types", (None,), None, "every layer attends over the whole context",
          also=_all_full, also_shown="[\"full_attention\", …]"),
)
_DECODER_UNUSED = (
    Unused("model.rotary_emb.inv_freq", "a buffer"),
    Unused("lm_head.weight", "the head, tied to the embedding"),
)
_LLAMA_LEAN = "examples/llama/Llama.lean"

LLAMA = Family(
    name="llama",
    model_types=("llama",),
    architecture_prefix="Llama",
    example=f"{_LLAMA_LEAN} (llama, llamaTied)",
    fields=_decoder_fields(vocab=32000, max_position=2048, intermediate=11008, kv_heads=None,
                           eps=1e-6, theta=10000.0),
    fixed=_DECODER_FIXED + _NO_BIAS + (
        Fixed("mlp_bias", (False,), False, "the MLP's projections have no bias"),),
    inert=("pretraining_tp",),  # transformers 5 no longer splits the projections by it
    unused=_DECODER_UNUSED,
    lean=_LLAMA_LEAN, models=("llama", "llamaTied"),
    normalised=rope_parameters,
)

MISTRAL = Family(
    name="mistral",
    model_types=("mistral",),
    architecture_prefix="Mistral",
    example=f"{_LLAMA_LEAN} (mistral, mistralTied)",
    fields=_decoder_fields(vocab=32000, max_position=4096 * 32, intermediate=14336, kv_heads=8,
                           eps=1e-6, theta=10000.0) + (
        Field("sliding_window", "c.window", None, int, default_from="max_position_embeddings",
              at_most="max_position_embeddings"),),
    fixed=_DECODER_FIXED,
    inert=(),
    unused=_DECODER_UNUSED,
    lean=_LLAMA_LEAN, models=("mistral", "mistralTied"),
    normalised=rope_parameters,
)

QWEN2 = Family(
    name="qwen2",
    model_types=("qwen2",),
    architecture_prefix="Qwen2",
    example=f"{_LLAMA_LEAN} (qwen2, qwen2Tied)",
    fields=_decoder_fields(vocab=151936, max_position=32768, intermediate=22016, kv_heads=None,
                           eps=1e-6, theta=10000.0),
    fixed=_DECODER_FIXED + _NO_WINDOW,
    # the window's length and the layers it would apply to, read only with use_sliding_window
    inert=("sliding_window", "max_window_layers"),
    unused=_DECODER_UNUSED,
    lean=_LLAMA_LEAN, models=("qwen2", "qwen2Tied"),
    normalised=rope_parameters,
)

QWEN3 = Family(
    name="qwen3",
    model_types=("qwen3",),
    architecture_prefix="Qwen3",
    example=f"{_LLAMA_LEAN} (qwen3, qwen3Tied)",
    fields=_decoder_fields(vocab=151936, max_position=32768, intermediate=22016, kv_heads=None,
                           eps=1e-6, theta=10000.0, head_dim=128),
    fixed=_DECODER_FIXED + _NO_BIAS + _NO_WINDOW,
    inert=("sliding_window", "max_window_layers"),
    unused=_DECODER_UNUSED,
    lean=_LLAMA_LEAN, models=("qwen3", "qwen3Tied"),
    normalised=rope_parameters,
)

FAMILIES = (BERT, GPT2, LLAMA, MISTRAL, QWEN2, QWEN3)


def family_named(model_type: str) -> Family | None:
    return next((f for f in FAMILIES if model_type in f.model_types), None)


def family_of_architectures(names: list[Any]) -> Family | None:
    for fam in FAMILIES:
        if any(isinstance(n, str) and n.startswith(fam.architecture_prefix) for n in names):
            return fam
    return None


def mapping_help() -> str:
    """The tables, for `tyr run --help`."""
    lines = ["a Hugging Face checkpoint: config.json in the --weights directory (or beside the "
             "file, or --hf-config FILE)", "fills the model's config by name, over the config "
             "beside FILE.lean and under --config/--set;", "keys that are no parameter of the "
             "model are left out and named in the output. Without FILE.lean, the family's Lean "
             "file and model", "(by tie_word_embeddings) are run:"]
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
