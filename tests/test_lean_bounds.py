"""Index tensors carry their bound (`IT s n`, Tyr/Core.lean): token ids and targets are typed
by the size of what they index. The bugs that shapes alone cannot see (an embedding of the
wrong table of the same width, a loss over logits that are not the vocabulary's, the
`[MASK]` id as a target) are type errors where they are written, in the library's ops and in
the examples themselves; and the bound travels into the graph IR (an i64 input's `bound`)."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from pytyr.errors import LeanError, TyrError
from pytyr.ir.graph import TensorType
from pytyr.lean import LeanSignatures, check_files, instantiate_model, load
from tests.lean.helpers import check_src, one_error

ROOT = Path(__file__).resolve().parents[1]

# (op, accepted source, source whose only fault is a bound, fragments of the error)
BOUND_CASES = [
    ("paddedCausalAttention",
     "def f (q : T #[2, 4, 8, 6]) (k v : T #[2, 2, 8, 6]) (m : IT #[2, 8] 2) : "
     "T #[2, 4, 8, 6] := paddedCausalAttention q k v m (by decide)",
     "def f (q : T #[2, 4, 8, 6]) (k v : T #[2, 2, 8, 6]) (m : IT #[2, 8] 3) : "
     "T #[2, 4, 8, 6] := paddedCausalAttention q k v m (by decide)",
     ["argument 'keep' of 'paddedCausalAttention'", "IT #[2, 8] 3", "IT #[2, 8] 2"]),
    ("paddedWindowAttention",
     "def f (q : T #[2, 4, 8, 6]) (k v : T #[2, 2, 8, 6]) (m : IT #[2, 8] 2) (hw : 3 ≤ 8) "
     "(hT : 8 ≤ 8) : T #[2, 4, 8, 6] := paddedWindowAttention q k v m 3 hw hT (by decide)",
     "def f (q : T #[2, 4, 8, 6]) (k v : T #[2, 2, 8, 6]) (m : IT #[2, 8] 8) (hw : 3 ≤ 8) "
     "(hT : 8 ≤ 8) : T #[2, 4, 8, 6] := paddedWindowAttention q k v m 3 hw hT (by decide)",
     ["argument 'keep' of 'paddedWindowAttention'", "IT #[2, 8] 8", "IT #[2, 8] 2"]),
    ("embedding",
     "def f (i : IT #[8] 100) (e : T #[100, 16]) : T #[8, 16] := embedding i e",
     "def f (i : IT #[8] 99) (e : T #[100, 16]) : T #[8, 16] := embedding i e",
     ["argument 'table' of 'embedding'", "T #[100, 16]", "T #[99, 16]"]),
    ("embedding2",
     "def f (i : IT #[2, 8] 65) (e : T #[65, 16]) : T #[2, 8, 16] := embedding2 i e",
     "def f (i : IT #[2, 8] 64) (e : T #[65, 16]) : T #[2, 8, 16] := embedding2 i e",
     ["argument 'table' of 'embedding2'", "T #[65, 16]", "T #[64, 16]"]),
    ("crossEntropy",
     "def f (z : T #[4, 10]) (y : IT #[4] 10) : T #[] := crossEntropy z y",
     "def f (z : T #[4, 10]) (y : IT #[4] 9) : T #[] := crossEntropy z y",
     ["argument 'target' of 'crossEntropy'", "IT #[4] 9", "IT #[4] 10"]),
    ("crossEntropy2",
     "def f (z : T #[2, 8, 65]) (y : IT #[2, 8] 65) : T #[] := crossEntropy2 z y",
     "def f (z : T #[2, 8, 65]) (y : IT #[2, 8] 66) : T #[] := crossEntropy2 z y",
     ["argument 'target' of 'crossEntropy2'", "IT #[2, 8] 66", "IT #[2, 8] 65"]),
    ("weightedCrossEntropy2",
     "def f (z : T #[2, 8, 5]) (y : IT #[2, 8] 5) (w : T #[2, 8]) : T #[] := "
     "weightedCrossEntropy2 z y w",
     "def f (z : T #[2, 8, 5]) (y : IT #[2, 8] 6) (w : T #[2, 8]) : T #[] := "
     "weightedCrossEntropy2 z y w",
     ["argument 'target' of 'weightedCrossEntropy2'", "IT #[2, 8] 6", "IT #[2, 8] 5"]),
    ("paddedAttention",
     "def f (q k v : T #[2, 4, 8, 6]) (m : IT #[2, 8] 2) : T #[2, 4, 8, 6] := "
     "paddedAttention q k v m",
     "def f (q k v : T #[2, 4, 8, 6]) (m : IT #[2, 8] 3) : T #[2, 4, 8, 6] := "
     "paddedAttention q k v m",
     ["argument 'keep' of 'paddedAttention'", "IT #[2, 8] 3", "IT #[2, 8] 2"]),
    ("maskedMeanSeq3",
     "def f (x : T #[2, 8, 6]) (m : IT #[2, 8] 2) : T #[2, 6] := maskedMeanSeq3 x m",
     "def f (x : T #[2, 8, 6]) (ids : IT #[2, 8] 65) : T #[2, 6] := maskedMeanSeq3 x ids",
     ["argument 'keep' of 'maskedMeanSeq3'", "IT #[2, 8] 65", "IT #[2, 8] 2"]),
    ("cacheWrite",
     "def f (c : T #[1, 2, 64, 16]) (x : T #[1, 2, 3, 16]) (p : IT #[3] 64) : "
     "T #[1, 2, 64, 16] := cacheWrite c x p",
     "def f (c : T #[1, 2, 64, 16]) (x : T #[1, 2, 3, 16]) (p : IT #[3] 65) : "
     "T #[1, 2, 64, 16] := cacheWrite c x p",
     ["argument 'pos' of 'cacheWrite'", "IT #[3] 65", "IT #[3] 64"]),
    ("cachedAttention",
     "def f (q : T #[1, 4, 3, 16]) (k v : T #[1, 2, 64, 16]) (p : IT #[3] 64) : "
     "T #[1, 4, 3, 16] := cachedAttention q k v p (by decide)",
     "def f (q : T #[1, 4, 3, 16]) (k v : T #[1, 2, 64, 16]) (p : IT #[3] 32) : "
     "T #[1, 4, 3, 16] := cachedAttention q k v p (by decide)",
     ["argument 'pos' of 'cachedAttention'", "IT #[3] 32", "IT #[3] 64"]),
    ("cachedWindowAttention",
     "def f (q : T #[1, 4, 3, 16]) (k v : T #[1, 2, 64, 16]) (p : IT #[3] 64) (hw : 8 ≤ 64) : "
     "T #[1, 4, 3, 16] := cachedWindowAttention q k v p 8 hw (by decide)",
     "def f (q : T #[1, 4, 3, 16]) (k v : T #[1, 2, 64, 16]) (p : IT #[3] 128) (hw : 8 ≤ 64) : "
     "T #[1, 4, 3, 16] := cachedWindowAttention q k v p 8 hw (by decide)",
     ["argument 'pos' of 'cachedWindowAttention'", "IT #[3] 128", "IT #[3] 64"]),
    # a bound is a `Nat` term like a dim, with Lean's definitional equality: `n + 1` is not
    # `1 + n`
    ("symbolic bound",
     "def f {b d n : Nat} (i : IT #[b] (n + 1)) (e : T #[n + 1, d]) : T #[b, d] := embedding i e",
     "def f {b d n : Nat} (i : IT #[b] (n + 1)) (e : T #[1 + n, d]) : T #[b, d] := embedding i e",
     ["argument 'table' of 'embedding'", "T #[1 + n, d]", "T #[n + 1, d]"]),
    # targets typed by the vocabulary against logits over the model width: same shape class
    ("loss over hidden states",
     "def f {b t v d : Nat} (i : IT #[b, t] v) (z : T #[b, t, v]) : T #[] := crossEntropy2 z i",
     "def f {b t v d : Nat} (i : IT #[b, t] v) (z : T #[b, t, d]) : T #[] := crossEntropy2 z i",
     ["argument 'target' of 'crossEntropy2'", "IT #[b, t] v", "IT #[b, t] d"]),
    # a router's ids index its experts (Tyr/MoE.lean)
    ("routerWeights",
     "def f (z : T #[2, 5, 4]) (i : IT #[2, 5, 2] 4) : T #[2, 5, 2] := "
     "routerWeights z i 0 (by decide)",
     "def f (z : T #[2, 5, 4]) (i : IT #[2, 5, 2] 5) : T #[2, 5, 2] := "
     "routerWeights z i 0 (by decide)",
     ["argument 'ids' of 'routerWeights'", "IT #[2, 5, 2] 5", "IT #[2, 5, 2] 4"]),
    ("routerLoad",
     "def f (l : T #[2, 4]) (z : T #[2, 5, 4]) (i : IT #[2, 5, 2] 4) : T #[2, 4] := "
     "routerLoad l z i",
     "def f (l : T #[2, 4]) (z : T #[2, 5, 4]) (i : IT #[2, 5, 2] 3) : T #[2, 4] := "
     "routerLoad l z i",
     ["argument 'ids' of 'routerLoad'", "IT #[2, 5, 2] 3", "IT #[2, 5, ?k] 4"]),
    ("rotateIds",
     "def f (i : IT #[2, 5, 2] 4) : IT #[2, 5, 2] 4 := rotateIds i",
     "def f (i : IT #[2, 5, 2] 3) : IT #[2, 5, 2] 4 := rotateIds i",
     ["argument 'ids' of 'rotateIds'", "IT #[2, 5, 2] 3", "IT #[2, 5, 2] 4"]),
]


def _ids(cases):
    return [c[0] for c in cases]


@pytest.mark.parametrize("name,good,bad,frags", BOUND_CASES, ids=_ids(BOUND_CASES))
def test_the_right_bound_is_accepted(tmp_path, name, good, bad, frags):
    assert check_src(tmp_path, good) == []


@pytest.mark.parametrize("name,good,bad,frags", BOUND_CASES, ids=_ids(BOUND_CASES))
def test_a_wrong_bound_is_a_type_error_at_its_argument(tmp_path, name, good, bad, frags):
    d = one_error(tmp_path, bad)
    assert d.pos.line == 3, d
    for frag in frags:
        assert frag in d.message, (frag, d.message)


def test_rotary_positions_take_any_bound(tmp_path):
    # a rotation indexes no table: positions of any cache length are fine
    for n in (7, 64, 100000):
        for op in ("rotaryAt (k := 8) x p", "ropeAt (k := 8) x p 10000.0"):
            src = f"def f (x : T #[2, 4, 8, 16]) (p : IT #[8] {n}) : T #[2, 4, 8, 16] := {op}"
            assert check_src(tmp_path, src) == []


def test_every_library_op_taking_an_index_tensor_has_a_bound_case():
    from pytyr.lean import library

    takes_ids = {info.name.removeprefix("torch.") for info in library().ops().values()
                 if any("torch.IT" in repr(p.type) for p in info.params)}
    # rotaryAt's and ropeAt's positions and expertAdd's ids index no table (the experts'
    # table is routeExperts's, below)
    assert takes_ids == ({c[0] for c in BOUND_CASES if " " not in c[0]}
                         | {"rotaryAt", "ropeAt", "expertAdd"})


def test_an_experts_ids_take_any_bound_and_its_table_the_routers(tmp_path):
    # expertAdd runs the expert of id 0 whatever the count; routeExperts ties the count to
    # the table of experts it folds over
    add = ("def f {{e : Nat}} (a x : T #[2, 5, 8]) (i : IT #[2, 5, 2] {n}) (w : T #[2, 5, 2]) "
           "(g u : T #[3, 8]) (d : T #[8, 3]) : T #[2, 5, 8] := expertAdd a x i w g u d")
    for n in ("e", "4", "100000"):
        assert check_src(tmp_path, add.format(n=n)) == []
    route = ("def f (es : Vector (SwiGLU 3 8) 4) (x : T #[2, 5, 8]) (i : IT #[2, 5, 2] {n}) "
             "(w : T #[2, 5, 2]) : T #[2, 5, 8] := routeExperts es (fun e => e) x x i w")
    assert check_src(tmp_path, route.format(n=4)) == []
    d = one_error(tmp_path, route.format(n=5))
    assert "argument 'ids' of 'routeExperts'" in d.message and "IT #[2, 5, ?k] 4" in d.message


# Bugs written into the examples that their shapes alone accept: each is now a type error,
# whose message says the types in the author's words (`c.n_embd`, `c.mask + 1`, `c.rows`).
MUTATIONS = [
    # the position table has the width of the token table: ids index the wrong one
    ("examples/gpt/GPT.lean", "let tok := embedding2 idx p.wte", "let tok := embedding2 idx p.wpe",
     ["argument 'table' of 'embedding2'", "T #[c.block, c.n_embd]", "T #[c.vocab, ?d]"]),
    # the loss over the final hidden states, not over the logits
    ("examples/gpt/GPT.lean", "(z, crossEntropy2 z targets)",
     "(z, crossEntropy2 (embedding2 idx p.wte) targets)",
     ["argument 'target' of 'crossEntropy2'", "IT #[b, t] c.vocab", "IT #[b, t] c.n_embd"]),
    # masked diffusion: the [MASK] id can be fed but never predicted
    ("examples/diffusion/Diffusion.lean", "(z, weightedCrossEntropy2 z targets weights)",
     "(z, weightedCrossEntropy2 z ids weights)",
     ["argument 'target' of 'weightedCrossEntropy2'", "IT #[b, t] (c.mask + 1)",
      "IT #[b, t] c.vocab"]),
    # ... and the clean characters do not index the embedding of characters and [MASK]
    ("examples/diffusion/Diffusion.lean", "(ids : IT #[b, t] (c.mask + 1)) : T #[b, t, c.vocab] :=",
     "(ids : IT #[b, t] c.vocab) : T #[b, t, c.vocab] :=",
     ["argument 'table' of 'embedding2'", "T #[c.mask + 1, c.n_embd]", "T #[c.vocab, ?d]"]),
    # the MLP's labels typed by its input features, not its classes
    ("examples/mlp/MLP.lean", "(y : IT #[b] c.classes)", "(y : IT #[b] c.inputs)",
     ["argument 'target' of 'crossEntropy'", "IT #[b] c.inputs", "IT #[b] c.classes"]),
    # nanochat's decoding positions typed for a cache of another length
    ("examples/nanochat/NanoChat.lean",
     "(hl : 0 < c.depth) (pos : IT #[t] c.block) (p : JanBlock c)",
     "(hl : 0 < c.depth) (pos : IT #[t] (c.block + 1)) (p : JanBlock c)",
     ["argument 'pos' of 'sharpenAt'", "IT #[t] (c.block + 1)", "IT #[?t] c.block"]),
    # ... and today's, whose value embedding is typed by the vocabulary too
    ("examples/nanochat/NanoChat.lean",
     "(hw : c.window ≤ c.block) (hl : 0 < c.depth) (pos : IT #[t] c.block) (p : Block c)",
     "(hw : c.window ≤ c.block) (hl : 0 < c.depth) (pos : IT #[t] (c.block + 1)) (p : Block c)",
     ["argument 'pos' of 'sharpenAt'", "IT #[t] (c.block + 1)", "IT #[?t] c.block"]),
    ("examples/nanochat/NanoChat.lean",
     "(hg : 24 ≤ c.dim) (hl : 0 < c.depth)\n    (idx : IT #[b, t] c.vocab) (pos : IT #[t] "
     "c.block) (p : VEBlock c) (s : StepFlow c b t) :\n    StepFlow c b t :=\n  let x := enter c "
     "hl s.fst\n  let a := veToCaches c hpad hg hl idx pos p (rmsNorm3 x) s\n  let y := "
     "cachedWindowAttention",
     "(hg : 24 ≤ c.dim) (hl : 0 < c.depth)\n    (idx : IT #[b, t] c.rows) (pos : IT #[t] "
     "c.block) (p : VEBlock c) (s : StepFlow c b t) :\n    StepFlow c b t :=\n  let x := enter c "
     "hl s.fst\n  let a := veToCaches c hpad hg hl idx pos p (rmsNorm3 x) s\n  let y := "
     "cachedWindowAttention",
     ["argument 'idx' of 'veToCaches'", "IT #[b, t] c.rows", "IT #[?b, ?t] c.vocab"]),
]


@pytest.mark.parametrize("path,old,new,frags", MUTATIONS,
                         ids=[f"{Path(m[0]).stem}:{m[2][:30]}" for m in MUTATIONS])
def test_a_shape_consistent_bug_in_an_example_is_a_type_error(tmp_path, path, old, new, frags):
    src = (ROOT / path).read_text(encoding="utf-8")
    assert src.count(old) == 1, old
    mutated = tmp_path / Path(path).name
    mutated.write_text(src.replace(old, new), encoding="utf-8")
    diags = check_files(mutated)
    assert diags, "the mutated example still checks"
    message = diags[0].message
    assert all(frag in message for frag in frags), message
    line = src[:src.index(old)].count("\n") + 1
    assert diags[0].pos.line >= line  # at the use, never before the edit


def _graph(path: str, model: str, values: dict):
    return instantiate_model(load(ROOT / path), model, values)


def test_the_graph_inputs_carry_their_bounds():
    gpt = {"c": {"vocab": 65, "block": 8, "n_layer": 1, "n_head": 2, "head_dim": 4,
                 "dropout": 0.0}, "b": 2, "t": 4}
    g = _graph("examples/gpt/GPT.lean", "gpt", gpt)
    assert [(i.name, i.type) for i in g.inputs] == [
        ("idx", TensorType((2, 4), "i64", 65)), ("targets", TensorType((2, 4), "i64", 65))]
    diff = {"c": {"vocab": 65, "block": 8, "n_layer": 1, "n_head": 2, "head_dim": 4,
                  "dropout": 0.0}, "b": 2, "t": 4}
    g = _graph("examples/diffusion/Diffusion.lean", "diffusion", diff)
    assert [i.bound for i in g.inputs] == [66, 65, None]  # ids include [MASK], targets do not


@pytest.mark.parametrize("bound,ok", [(2**63, True), (2**63 + 1, False)])
def test_a_bound_too_large_for_the_graph_is_an_instantiation_error(tmp_path, bound, ok):
    # every int64 id is below 2**63: the largest bound the graph IR holds
    f = tmp_path / "M.lean"
    f.write_text(f"import Tyr\nopen torch\n@[model]\ndef m (x : IT #[2] {bound}) (y : T #[2]) : "
                 f"T #[2] := y\n", encoding="utf-8")
    prog = load(f)
    if ok:
        assert instantiate_model(prog, "m", {}).inputs[0].bound == bound
        return
    with pytest.raises(LeanError, match=re.escape(f"has the bound {bound}, over the graph IR's")):
        instantiate_model(prog, "m", {})


def test_signatures_need_the_bound_of_an_integer_value():
    sigs = LeanSignatures()
    ids, table = TensorType((2, 3), "i64", 7), TensorType((7, 4))
    assert sigs.infer("embedding2", [ids, table], {}) == TensorType((2, 3, 4))
    with pytest.raises(TyrError, match=r"input 'table' .* T #\[7, \?d\] is expected"):
        sigs.infer("embedding2", [ids, TensorType((8, 4))], {})
    with pytest.raises(TyrError, match="has no bound"):
        sigs.infer("embedding2", [TensorType((2, 3), "i64"), table], {})
