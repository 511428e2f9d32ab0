"""What the tests of Hugging Face checkpoints share: random weights for a transformers model,
`tyr run --weights DIR` on an inputs file, transformers' own logits, a config.json edited,
a checkpoint's tokenizer."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

import torch
from safetensors.torch import save_file

from pytyr.cli import main


def _is_norm_gain(name: str) -> bool:
    return name.endswith("norm.weight")


def drawn(model: torch.nn.Module, seed: int, *, scale: float = 0.2,
          gain: Callable[[str], bool] = _is_norm_gain) -> torch.nn.Module:
    """Every parameter random, norm gains (the names `gain` picks) around 1, biases too, so
    no path of the model is trivially 1 or 0."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            base = 1.0 if gain(name) else 0.0
            p.copy_(base + torch.randn(p.shape, generator=gen) * scale)
    return model.eval()


def tyr_run(tmp_path: Path, weights: Path, *extra: str,
            out: str = "logits.safetensors") -> tuple[int, Path]:
    """`tyr run --weights weights --inputs tmp_path/ids.safetensors`: (its exit code, the
    outputs file)."""
    path = tmp_path / out
    rc = main(["run", "--weights", str(weights), "--inputs", str(tmp_path / "ids.safetensors"),
               "-o", str(path), *extra])
    return rc, path


def reference(model: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
    """transformers' logits of the ids `x`."""
    with torch.no_grad():
        return model(input_ids=x).logits


def edit_config(path: Path, **changes) -> None:
    """The checkpoint's config.json with `changes` (a value of `...` removes the key)."""
    f = path / "config.json"
    raw = {**json.loads(f.read_text()), **changes}
    f.write_text(json.dumps({k: v for k, v in raw.items() if v is not ...}))


def variant_checkpoint(path: Path, variants: dict[str, tuple], sizes: dict[str, Any],
                       variant: str, *, shard: str | None = None) -> torch.nn.Module:
    """`save_pretrained` of the random model of `variants[variant]` (config class, model
    class, config overrides, the Lean model tyr picks) at `sizes`, seeded by its name."""
    config_cls, model_cls, over, _ = variants[variant]
    model = drawn(model_cls(config_cls(**sizes, **over)), seed=len(variant))
    model.save_pretrained(path, **({"max_shard_size": shard} if shard else {}))
    return model


def input_ids(path: Path, vocab: int, b: int = 2, t: int = 9, seed: int = 3) -> torch.Tensor:
    """Random ids below `vocab`, written as the inputs file `path` (`input_ids`)."""
    x = torch.randint(0, vocab, (b, t), generator=torch.Generator().manual_seed(seed))
    save_file({"input_ids": x}, path)
    return x


def bpe_tokenizer(vocab: int) -> "tokenizers.Tokenizer":  # noqa: F821
    """A byte-level BPE of `vocab` tokens trained on a few sentences, as a checkpoint's
    tokenizer.json."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab, special_tokens=["<|endoftext|>"],
                                  initial_alphabet=list("abcdefghij ."), show_progress=False)
    tok.train_from_iterator(["a bad cab. ", "a big bee had a jab. ", "deaf ice. "] * 20,
                            trainer)
    return tok
