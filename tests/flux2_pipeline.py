"""A tiny random FLUX.2 [klein] pipeline as diffusers writes it (`save_pretrained`), made
offline: a small `Qwen3ForCausalLM` text encoder with a byte-level BPE tokenizer (made with
`tokenizers`, a chat template in Qwen3's form), `AutoencoderKLFlux2` and
`Flux2Transformer2DModel` of a few channels, every parameter drawn."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

# Qwen3's chat template in its essentials: the turns between <|im_start|> and <|im_end|>, and
# with `enable_thinking=False` an empty think block opening the assistant's turn.
CHAT_TEMPLATE = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}"
    "{%- if enable_thinking is defined and enable_thinking is false %}"
    "{{- '<think>\\n\\n</think>\\n\\n' }}{%- endif %}{%- endif %}")
SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>", "</think>"]
TEXT = ["the digit seven. ", "a red cat on a mat. ", "user assistant think. "] * 20


def tokenizer(vocab: int = 96):
    """A Qwen2 fast tokenizer over a byte-level BPE of `vocab` tokens, padded on the right
    with <|endoftext|>, as Qwen3's."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import Qwen2TokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab, special_tokens=SPECIAL,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(TEXT, trainer)
    fast = Qwen2TokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>",
                              pad_token="<|endoftext|>", unk_token=None, bos_token=None)
    fast.chat_template = CHAT_TEMPLATE
    return fast


# The sizes of the tests' pipeline: a text encoder of `width` and `layers`, the autoencoder's
# levels, the transformer's blocks, heads and head width.
TINY = dict(width=16, layers=3, levels=(8, 16, 24, 24), blocks=(1, 1), heads=2, head=8)


def build(out: Path, seed: int = 0, *, distilled: bool = False, **sizes: Any) -> Path:
    """Write the pipeline to `out` and return it (sizes: `TINY`'s keys, over them). The
    pipeline stacks three of the text encoder's hidden states (given as `--text-layers`)."""
    import diffusers
    import transformers as tf

    z = {**TINY, **sizes}
    width, head = z["width"], z["head"]
    torch.manual_seed(seed)
    tok = tokenizer()
    enc = tf.Qwen3ForCausalLM(tf.Qwen3Config(
        vocab_size=len(tok), hidden_size=width, intermediate_size=2 * width,
        num_hidden_layers=z["layers"], num_attention_heads=2, num_key_value_heads=1,
        head_dim=width // 2, max_position_embeddings=1024, tie_word_embeddings=True))
    vae = diffusers.AutoencoderKLFlux2(
        in_channels=3, out_channels=3, block_out_channels=z["levels"], layers_per_block=2,
        latent_channels=4, norm_num_groups=4, sample_size=32)
    transformer = diffusers.Flux2Transformer2DModel(
        in_channels=16, num_layers=z["blocks"][0], num_single_layers=z["blocks"][1],
        attention_head_dim=head, num_attention_heads=z["heads"], joint_attention_dim=3 * width,
        timestep_guidance_channels=16, mlp_ratio=2.0, axes_dims_rope=(head // 4,) * 4,
        guidance_embeds=False)
    gen = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for model in (enc, vae, transformer):
            for name, p in model.named_parameters():
                gain = "norm" in name and name.endswith("weight")
                p.copy_(gain + 0.3 * torch.randn(p.shape, generator=gen))
        vae.bn.running_mean.copy_(0.1 * torch.randn(vae.bn.running_mean.shape, generator=gen))
        vae.bn.running_var.copy_(torch.rand(vae.bn.running_var.shape, generator=gen) + 0.5)
    scheduler = diffusers.FlowMatchEulerDiscreteScheduler(
        num_train_timesteps=1000, shift=3.0, use_dynamic_shifting=True,
        base_shift=0.5, max_shift=1.15, base_image_seq_len=256, max_image_seq_len=4096,
        time_shift_type="exponential")
    pipe = diffusers.Flux2KleinPipeline(scheduler=scheduler, vae=vae, text_encoder=enc,
                                        tokenizer=tok, transformer=transformer,
                                        is_distilled=distilled)
    pipe.save_pretrained(out)
    return out
