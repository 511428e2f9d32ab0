"""Layout bugs that numbers alone accept are type errors, written into the real examples.

Rotary embeddings rotate over the sequence axis of the heads layout `[b, h, t, d]`: `rotary`
asks for the model's hypothesis `t ≤ n` about its context and `rotaryAt` for positions
`IT #[t] n`, so rotating in the `[b, t, h, d]` layout (positions over the heads) or rotating a
decoding step's new tokens as if they were a context from position 0 does not type-check; and
Flux's grid rotary is typed by its `rows * cols` order. Each bug is caught on the line where it
is written, and the message says what the op wanted.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from pytyr.lean import check_files

ROOT = Path(__file__).resolve().parents[1]
NANOCHAT = "examples/nanochat/NanoChat.lean"
FLUX = "examples/flux/Flux.lean"

# (file, text in it, the bug written instead, fragments of the error, [the text of the line
# where it is caught, when that is not the edit's first line])
BUGS = [
    # nanochat's Python views q as [B, T, H, D] and rotates there; written so in Tyr, the
    # positions would run over the heads
    (NANOCHAT, "let q := rmsNorm4 (rotary (queries c p x) hT c.rope_base)",
     "let q := rmsNorm4 (splitHeads (mergeLast4 (rotary (splitLast3 (linear3 x p.c_q)) hT "
     "c.rope_base)))",
     # the heads, `c.n_head` unfolded
     ["argument 'hT' of 'rotary' has type t ≤ c.block but is expected to have type "
      "(c.depth * c.aspect_ratio + c.head_dim - 1) / c.head_dim ≤ ?n"]),
    # a decoding step that rotates its new tokens as the training model does (0 … t-1)
    (NANOCHAT, "let q := rmsNorm4 (rotaryAt (queries c p.attn h) pos c.rope_base)",
     "let q := rmsNorm4 (rotary (queries c p.attn h) c.rope_base)",
     ["argument 'hT' of 'rotary' has type Float but is expected to have type t ≤ ?n"]),
    # ... with the training model's hypothesis: the step has none
    (NANOCHAT, "let k := rmsNorm4 (rotaryAt (keys c p.attn h) pos c.rope_base)",
     "let k := rmsNorm4 (rotary (keys c p.attn h) hT c.rope_base)",
     ["unknown identifier 'hT'"]),
    # positions of the step for the wrong axis
    (NANOCHAT, "let q := rmsNorm4 (rotaryAt (queries c p.attn h) pos c.rope_base)",
     "let q := rmsNorm4 (splitHeads (mergeLast4 (rotaryAt (splitLast3 (linear3 h p.attn.c_q)) "
     "pos c.rope_base)))",
     ["argument 'pos' of 'rotaryAt' has type IT #[t] c.block but is expected to have type "
      "IT #[(c.depth * c.aspect_ratio + c.head_dim - 1) / c.head_dim] ?n"]),
    # Flux's grid given as (cols, rows): image token r · gw + c is not at (c, r)
    (FLUX, "ropeGrid c.txt_len c.grid_h c.grid_w c.rope_idx",
     "ropeGrid c.txt_len c.grid_w c.grid_h c.rope_idx",
     ["argument 'x' of 'ropeGrid'", "c.txt_len + c.grid_w * c.grid_h"]),
    # Flux's rotary in the [b, t, h, d] layout
    (FLUX, "def FluxConfig.rope (c : FluxConfig) {b : Nat} (x : T #[b, c.num_heads, c.seq, "
           "c.head_dim]) :\n    T #[b, c.num_heads, c.seq, c.head_dim] :=",
     "def FluxConfig.rope (c : FluxConfig) {b : Nat} (x : T #[b, c.seq, c.num_heads, "
     "c.head_dim]) :\n    T #[b, c.seq, c.num_heads, c.head_dim] :=",
     ["argument 'x' of 'ropeGrid'", "c.txt_len + c.grid_h * c.grid_w"],
     "ropeGrid c.txt_len"),  # caught where the rotation is applied
]


def _plant(tmp_path: Path, path: str, old: str, new: str, at: str) -> tuple[Path, int]:
    """The example with the bug, and the line where the error belongs: the line of `at`
    after the edit (by default, the edit's own line)."""
    src = (ROOT / path).read_text(encoding="utf-8")
    assert src.count(old) == 1, old
    mutated = src.replace(old, new)
    start = src.index(old)
    line = mutated[:mutated.index(at, start)].count("\n") + 1
    f = tmp_path / Path(path).name
    f.write_text(mutated, encoding="utf-8")
    return f, line


@pytest.mark.parametrize("bug", BUGS, ids=[f"{Path(b[0]).stem}:{b[2][:40]}" for b in BUGS])
def test_a_layout_bug_is_a_type_error_at_its_line(tmp_path, bug):
    path, old, new, frags, *at = bug
    mutated, line = _plant(tmp_path, path, old, new, at[0] if at else new.split("\n")[0])
    diags = check_files(mutated)
    assert diags, "the bug still checks"
    first = min(diags, key=lambda d: (d.pos.line, d.pos.col))
    assert first.pos.line == line, (first, line)
    for frag in frags:
        assert frag in first.message, (frag, first.message)


@pytest.mark.parametrize("path", [NANOCHAT, FLUX])
def test_the_examples_as_written_check(path):
    assert check_files(ROOT / path) == []
