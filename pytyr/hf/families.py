"""What `tyr run` knows of each Hugging Face model family, as data: one `Family` per family.

A family says how its `config.json` fills the Lean model's config (`fields`: HF key → field,
with HF's default where the key is absent), which keys must have one value because another
would change the computation (`fixed`), which keys do not touch the forward pass (`inert`),
and which checkpoint keys are not parameters of the Lean model (`unused`: buffers, heads),
with the prefix its task-headed checkpoints put before the base model's keys (`prefixes`).
Any config key in none of these tables is named in the output as not read. The records
(`Field`, `Fixed`, `Unused`, `Family`) are `table`'s; the rows are here.
"""
from __future__ import annotations

from typing import Any, Callable

from . import gpt2
from .flux2 import DIFFUSERS_FAMILIES
from .rope import rope_parameters
from .table import Family, Field, Fixed, Narrower, Unused

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
    example="examples/gpt2/GPT2.lean (gpt2, gpt2Exact; also examples/gpt/GPT.lean, gptLogits)",
    fields=(
        Field("vocab_size", "c.vocab", 50257, int),
        Field("n_positions", "c.block", 1024, int),
        Field("n_layer", "c.n_layer", 12, int),
        Field("n_head", "c.n_head", 12, int),
        Field("n_embd", "c.head_dim", 768, int, per="n_head"),
        Field("resid_pdrop", "c.dropout", 0.1, float),
        Field("n_inner", "c.inner", gpt2.width, int, default_shown="4 * n_embd"),
        Field("layer_norm_epsilon", "c.eps", 1e-5, float),
    ),
    fixed=(
        Fixed("activation_function", ("gelu_new", "gelu_pytorch_tanh") + gpt2.EXACT,
              "gelu_new", "the MLP's activation is GELU's tanh approximation (model gpt2) or "
              "exact GELU (gpt2Exact)"),
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
    lean="examples/gpt2/GPT2.lean", pick=gpt2.model_for,
    pick_note="by activation_function: gelu_new, gelu_pytorch_tanh → gpt2; gelu, "
              "gelu_python → gpt2Exact",
    picked=(("gpt2", (("activation_function", "gelu_new"),)),
            ("gpt2Exact", (("activation_function", "gelu"),))),
    architecture="GPT2LMHeadModel",
    # the GPT example reads the same checkpoints into its own layout, where it computes them
    narrower=Narrower(
        example="examples/gpt/GPT.lean",
        lacks=("c.inner", "c.eps"),
        fixed=(
            Fixed("activation_function", gpt2.EXACT, "gelu_new",
                  "GPT.lean's GELU is exact; examples/gpt2/GPT2.lean computes gelu_new: run "
                  "without a Lean file"),
            Fixed("n_inner", (None,), None, "GPT.lean's MLP is 4 times the width",
                  also=gpt2.width, also_shown="4*n_embd"),
            Fixed("layer_norm_epsilon", (1e-5,), 1e-5, "GPT.lean's LayerNorms' epsilon is 1e-5"),
        )),
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

_MOE_LEAN = "examples/moe/MoE.lean"


def _experts_as(key: str, other: str) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """The config with its number of experts under `key`: transformers 5 writes
    `num_local_experts` for both families (`attribute_map`), the Hub's Qwen3-MoE
    `num_experts`; both, disagreeing, is refused. Then the rotary settings in one layout."""

    def normalised(raw: dict[str, Any]) -> dict[str, Any]:
        out = rope_parameters(raw)
        theirs = out.pop(other, None)
        if theirs is not None and out.get(key) not in (None, theirs):
            raise ValueError(f"'{key}' ({out[key]!r}) and '{other}' ({theirs!r}) disagree on "
                             f"the number of experts")
        if theirs is not None:
            out[key] = theirs
        return out

    return normalised


def _moe_fields(*, expert_width: str, intermediate: int, experts_key: str, experts: int,
                top_k: int, **decoder: Any) -> tuple[Field, ...]:
    """A MoE decoder's fields (examples/moe/MoE.lean): Llama's, an expert's width
    (`expert_width`) as c.intermediate, and the router's."""
    return tuple(f for f in _decoder_fields(intermediate=intermediate, **decoder)
                 if f.hf != "intermediate_size") + (
        Field(expert_width, "c.intermediate", intermediate, int),
        Field(experts_key, "c.n_experts", experts, int),
        Field("num_experts_per_tok", "c.top_k", top_k, int),
        Field("router_aux_loss_coef", "c.aux_coef", 0.001, float),
    )


# what the forward pass does not read: whether transformers returns the router logits, and
# computes the aux loss (the …Aux and …Train models always do)
_MOE_INERT = ("output_router_logits",)

MIXTRAL = Family(
    name="mixtral",
    model_types=("mixtral",),
    architecture_prefix="Mixtral",
    example=f"{_MOE_LEAN} (mixtral, mixtralTied)",
    fields=_moe_fields(expert_width="intermediate_size", intermediate=14336,
                       experts_key="num_local_experts", experts=8, top_k=2, vocab=32000,
                       max_position=4096 * 32, kv_heads=8, eps=1e-5, theta=1e6) + (
        Field("sliding_window", "c.window", None, int, default_from="max_position_embeddings",
              at_most="max_position_embeddings"),),
    fixed=_DECODER_FIXED + (
        Fixed("router_jitter_noise", (0.0, 0), 0.0,
              "the router's input is not jittered (transformers' noise while training)"),),
    inert=_MOE_INERT,
    unused=_DECODER_UNUSED,
    lean=_MOE_LEAN, models=("mixtral", "mixtralTied"),
    normalised=_experts_as("num_local_experts", "num_experts"),
)

QWEN3_MOE = Family(
    name="qwen3_moe",
    model_types=("qwen3_moe",),
    architecture_prefix="Qwen3Moe",
    example=f"{_MOE_LEAN} (qwen3Moe, qwen3MoeTied)",
    fields=_moe_fields(expert_width="moe_intermediate_size", intermediate=768,
                       experts_key="num_experts", experts=128, top_k=8, vocab=151936,
                       max_position=32768, kv_heads=4, eps=1e-6, theta=10000.0) + (
        Field("norm_topk_prob", "c.norm_topk", False, bool),),
    fixed=_DECODER_FIXED + _NO_BIAS + _NO_WINDOW + (
        Fixed("decoder_sparse_step", (1,), 1, "every layer is sparse (a MoE block)"),
        Fixed("mlp_only_layers", ([],), [], "no layer has a dense MLP"),),
    # the dense MLP's width, of the layers that would have one (none: see mlp_only_layers)
    inert=_MOE_INERT + ("intermediate_size", "sliding_window", "max_window_layers"),
    unused=_DECODER_UNUSED,
    lean=_MOE_LEAN, models=("qwen3Moe", "qwen3MoeTied"),
    normalised=_experts_as("num_experts", "num_local_experts"),
)

FAMILIES = (BERT, GPT2, LLAMA, MISTRAL, QWEN2, QWEN3, MIXTRAL, QWEN3_MOE, *DIFFUSERS_FAMILIES)


def family_named(model_type: str) -> Family | None:
    return next((f for f in FAMILIES if model_type in f.model_types), None)


def family_of_architectures(names: list[Any]) -> Family | None:
    """The family whose prefix the architectures start with, the longest one (Qwen3Moe's of
    `Qwen3MoeForCausalLM`, not Qwen3's)."""
    fits = [fam for fam in FAMILIES if any(isinstance(n, str) and
                                           n.startswith(fam.architecture_prefix) for n in names)]
    return max(fits, key=lambda fam: len(fam.architecture_prefix), default=None)
