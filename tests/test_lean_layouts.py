"""Layout bugs that numbers alone accept are type errors, written into the real examples.

Rotary embeddings rotate over the sequence axis of the heads layout `[b, h, t, d]`: `rotary`
asks for the model's hypothesis `t ≤ n` about its context and `rotaryAt` for positions
`IT #[t] n`, so rotating in the `[b, t, h, d]` layout (positions over the heads) or rotating a
decoding step's new tokens as if they were a context from position 0 does not type-check; and
Flux's grid rotary is typed by its `rows * cols` order. Each bug is caught on the line where it
is written, and the message says what the op wanted.

A `reshape` whose target is no merge or split of adjacent axes (a view without a transpose) is
rejected, naming the op that was likely meant; `regroup` is the escape hatch. The rule is
`reshape`'s obligation `mergesOrSplits s target = true`, so the checker decides it as a
`by decide`, in Lean's order; `tests/test_lean_fidelity.py` holds it against real Lean.
"""
from __future__ import annotations

import math
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytyr.lean import check_files, instantiate_model, load
from pytyr.lean.reshapes import merges_or_splits, misfit

ROOT = Path(__file__).resolve().parents[1]
NANOCHAT = "examples/nanochat/NanoChat.lean"
FLUX = "examples/flux/Flux.lean"

# (file, text in it, the bug written instead, fragments of the error, [the text of the line
# where it is caught, when that is not the edit's first line])
BUGS = [
    # nanochat's Python views q as [B, T, H, D] and rotates there; written so in Tyr, the
    # positions would run over the heads
    (NANOCHAT, "let q := sharpen c hT (splitHeads (project p.c_q x))",
     "let q := sharpen c hT (splitHeads (mergeLast4 (rotary (splitLast3 (project p.c_q x)) hT "
     "c.rope_base)))",
     # the heads, `c.heads` as the author wrote it
     ["argument 'hT' of 'rotary' has type t ≤ c.block but is expected to have type "
      "c.heads ≤ ?n"]),
    # a decoding step that rotates its new tokens as the training model does (0 … t-1)
    (NANOCHAT, "let q := sharpenAt c pos (queries c p.attn h)",
     "let q := scale (rmsNorm4 (rotary (queries c p.attn h) c.rope_base)) c.qk_scale",
     ["argument 'hT' of 'rotary' has type Float but is expected to have type t ≤ ?n"]),
    # ... with the training model's hypothesis: the step has none
    (NANOCHAT, "let k := sharpenAt c pos (keys c p.attn h)",
     "let k := sharpen c hT (keys c p.attn h)",
     ["unknown identifier 'hT'"]),
    # positions of the step for the wrong axis
    (NANOCHAT, "let q := sharpenAt c pos (queries c p.attn h)",
     "let q := scale (rmsNorm4 (splitHeads (mergeLast4 (rotaryAt (splitLast3 (linear3 h "
     "p.attn.c_q)) pos c.rope_base)))) c.qk_scale",
     ["argument 'pos' of 'rotaryAt' has type IT #[t] c.block but is expected to have type "
      "IT #[c.n_head] ?n"]),
    # a sliding window bounded by another length than the context the tokens are in
    (NANOCHAT, "(hkv : c.heads % c.n_kv_head = 0) (hw : c.window ≤ c.block) (p : Attention c)",
     "(hkv : c.heads % c.n_kv_head = 0) (hw : c.window ≤ c.block + 1) (p : Attention c)",
     ["argument 'hT' of 'windowAttention' has type t ≤ c.block but is expected to have type "
      "t ≤ c.block + 1"], "linear3 (mergeHeads (windowAttention"),
    # the value-embedding table read with the ids of another table (the padded rows)
    (NANOCHAT, "let ve := splitHeads (embedding2 idx (rows p.value_embed.weight c.vocab hpad))",
     "let ve := splitHeads (embedding2 idx p.value_embed.weight)",
     ["argument 'table' of 'embedding2' has type T #[c.rows, c.kv_dim] but is expected to have "
      "type T #[c.vocab, ?h * ?d]; ?v := c.vocab comes from argument 'idx'"]),
    # Flux's grid given as (cols, rows): image token r · gw + c is not at (c, r)
    (FLUX, "ropeGrid c.txt_len c.grid_h c.grid_w c.rope_idx",
     "ropeGrid c.txt_len c.grid_w c.grid_h c.rope_idx",
     ["argument 'x' of 'ropeGrid'", "c.txt_len + c.grid_w * c.grid_h"]),
    # Flux's rotary in the [b, t, h, d] layout
    (FLUX, "def FluxConfig.rope (c : FluxConfig) {b : Nat} (x : T #[b, c.num_heads, c.seq, "
           "c.head_dim]) :\n    T #[b, c.num_heads, c.seq, c.head_dim] :=",
     "def FluxConfig.rope (c : FluxConfig) {b : Nat} (x : T #[b, c.seq, c.num_heads, "
     "c.head_dim]) :\n    T #[b, c.seq, c.num_heads, c.head_dim] :=",
     # the expected length folds to the author's name for it, as the hover shows it
     ["argument 'x' of 'ropeGrid'", "T #[b, c.seq, c.num_heads, c.head_dim]",
      "T #[?b, ?h, c.seq, c.head_dim]"],
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


# ---- the reshape discipline -------------------------------------------------------------

@pytest.mark.parametrize("src,dst", [
    ([2, 6], [12]), ([12], [3, 4]), ([2, 6], [2, 2, 3]), ([2, 3, 4], [6, 4]),
    ([2, 1, 6], [2, 6, 1]), ([1, 6], [6]), ([2, 8, 8, 16], [2, 8, 128]), ([7], [7]), ([], [1]),
    ([0, 3], [3, 0]),
])
def test_a_merge_or_split_of_adjacent_axes_is_a_reshape(tmp_path, src, dst):
    f = tmp_path / "R.lean"
    f.write_text(f"import Tyr\nopen torch\ndef f (x : T #{src}) : T #{dst} := reshape x #{dst}\n")
    assert check_files(f) == []


@pytest.mark.parametrize("src,dst,meant", [
    ([2, 4, 8, 16], [2, 8, 64], "that is `mergeHeads` ([b, h, t, d] → [b, t, h * d])"),
    ([2, 8, 64], [2, 4, 8, 16], "that is `splitHeads` ([b, t, h * d] → [b, h, t, d])"),
    ([4, 6], [6, 4], "the axes are permuted: that is a transpose"),
    ([3, 4, 5], [3, 5, 4], "the axes are permuted: that is a transpose"),
    ([2, 6], [3, 4], "transpose the axes into place first"),
])
def test_any_other_regrouping_names_the_op_meant(tmp_path, src, dst, meant):
    f = tmp_path / "R.lean"
    f.write_text(f"import Tyr\nopen torch\ndef f (x : T #{src}) : T #{dst} := reshape x #{dst}\n"
                 f"def g (x : T #{src}) : T #{dst} := regroup x #{dst}\n")
    (d,) = check_files(f)  # `regroup` is the escape hatch: only `f` is an error
    assert (d.pos.line, d.pos.col) == (3, len(f"def f (x : T #{src}) : T #{dst} := "))
    assert d.message.startswith(f"`by decide` failed for argument 'h' of 'reshape': the "
                                f"proposition mergesOrSplits #{src} #{dst} = true is false (")
    assert meant in d.message
    assert d.message.endswith("if this regrouping is meant, use `regroup`)")


def test_the_rule_is_a_tactic_and_waits_for_the_declarations_mismatch(tmp_path):
    # `by decide` runs when the declaration's tactic blocks run, after the rest of it (Lean's
    # `synthesizeSyntheticMVarsNoPostponing`): the type mismatch of the next line is reported.
    f = tmp_path / "R.lean"
    f.write_text("import Tyr\nopen torch\ndef f (x : T #[2, 4, 8, 16]) : T #[2, 8, 63] :=\n"
                 "  let y := reshape x #[2, 8, 64]\n  y\n")
    (d,) = check_files(f)
    assert d.pos.line == 5 and d.message.startswith("type mismatch"), d


def test_a_chain_of_merges_and_splits_passes_where_their_sum_fails(tmp_path):
    # A type has no memory of how its shape was made: `[6, 4]` to `[2, 12]` in one reshape
    # fails (three of the six join the four), as two it passes, in Lean as here
    # (tests/test_lean_fidelity.py pins both with real Lean).
    f = tmp_path / "R.lean"
    f.write_text("import Tyr\nopen torch\n"
                 "def one (x : T #[6, 4]) : T #[2, 12] := reshape x #[2, 12]\n"
                 "def two (x : T #[6, 4]) : T #[2, 12] :=\n"
                 "  reshape (reshape x #[2, 3, 4]) #[2, 12]\n")
    (d,) = check_files(f)
    assert d.pos.line == 3 and "axes 0–1 [6, 4] would become [2, 12]" in d.message, d


@given(st.lists(st.integers(1, 5), min_size=0, max_size=5), st.data())
@settings(max_examples=200, deadline=None)
def test_the_discipline_accepts_exactly_merges_and_splits(dims, data):
    # Build a target by merging runs of adjacent axes and splitting single ones: accepted.
    # A target is rejected only if its elements really change places: some group of axes has
    # at least two non-unit axes on both sides.
    out, i = [], 0
    while i < len(dims):
        k = data.draw(st.integers(1, len(dims) - i))
        run = dims[i:i + k]
        if k == 1 and run[0] in (4, 6) and data.draw(st.booleans()):
            out += [2, run[0] // 2]
        else:
            out.append(math.prod(run))
        i += k
    assert misfit(dims, out) is None
    assert misfit(out, dims) is None
    assert merges_or_splits(dims, out) and merges_or_splits(out, dims)
    # a swap of two adjacent non-unit, unequal axes is a transpose, never a merge or a split
    swappable = [j for j in range(len(dims) - 1) if 1 < dims[j] != dims[j + 1] > 1]
    if swappable:
        j = data.draw(st.sampled_from(swappable))
        swapped = dims[:j] + [dims[j + 1], dims[j]] + dims[j + 2:]
        assert "transpose" in (misfit(dims, swapped) or "")
        assert not merges_or_splits(dims, swapped)


def _primes(n: int) -> list[int]:
    return [p for p in (2, 3, 5) for _ in range(30) if n % p ** (_ + 1) == 0]


@given(st.lists(st.integers(1, 6), max_size=4), st.randoms(use_true_random=False), st.data())
@settings(max_examples=300, deadline=None)
def test_the_rule_and_its_explanation_agree(s, rnd, data):
    # `merges_or_splits` is `mergesOrSplits` as Lean evaluates it; `misfit` is what the error
    # says. For any target of as many elements (the prime factors of `s` shuffled, grouped,
    # units put in), one rejects exactly when the other explains; another count is rejected.
    factors = [p for d in s for p in _primes(d)] + [1] * data.draw(st.integers(0, 2))
    rnd.shuffle(factors)
    cuts = sorted(data.draw(st.sets(st.integers(1, max(len(factors) - 1, 1)), max_size=3)))
    t = [math.prod(factors[a:b]) for a, b in zip([0, *cuts], [*cuts, len(factors)]) if a < b]
    assert merges_or_splits(s, t) == (misfit(s, t) is None), (s, t, misfit(s, t))
    assert not merges_or_splits(s, t + [2])


@pytest.mark.parametrize("path", ["Tyr/Ops.lean", "Tyr/Shape.lean", "Tyr/NN.lean",
                                  "Tyr/DiT.lean", "Tyr/Decode.lean", "Tyr/Core.lean"])
def test_the_library_has_no_generic_reshape_nor_regroup(path):
    # The measurement behind the rule: no library op reshapes or regroups generically;
    # `reshape`'s body, `regroup x target hn`, is the one use.
    text = (ROOT / path).read_text(encoding="utf-8")
    uses = re.findall(r"\b(?:reshape|regroup) (?:x|\()", text)
    assert uses == (["regroup x"] if path == "Tyr/Ops.lean" else [])


def test_no_example_reshapes_generically():
    for f in sorted((ROOT / "examples").rglob("*.lean")):
        code = re.sub(r"/-.*?-/|--[^\n]*", "", f.read_text(encoding="utf-8"), flags=re.S)
        assert not re.search(r"\b(?:reshape|regroup)\b", code), f


def test_regroup_instantiates_to_a_reshape_node(tmp_path):
    f = tmp_path / "R.lean"
    f.write_text("import Tyr\nopen torch\n"
                 "@[model] def m (x : T #[2, 6]) : T #[3, 4] := regroup x #[3, 4]\n")
    g = instantiate_model(load(f), "m", {})
    assert [(n.op, n.attrs) for n in g.nodes] == [("reshape", {"target": [3, 4]})]
