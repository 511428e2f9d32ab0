"""The masked diffusion model of examples/diffusion/Diffusion.lean: it checks, its mistakes are
type errors, its graph has the inputs the `mdlm` task makes, it computes the plain-PyTorch
model's arithmetic (`bench/diffusion_plain.py`), and it samples through `unmask`."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch

from pytyr.errors import ConfigError, ExecError
from pytyr.lean import check_files, instantiate_model, load
from pytyr.pipeline import LeanModels, module_from_graph
from pytyr.train.task import TaskContext
from pytyr.train.tasks import make_task
from pytyr.train.tasks.mdlm.unmask import prompt_template, unmask

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # `bench` is a top-level package of the repository, not installed
    sys.path.insert(0, str(ROOT))

from bench import diffusion as bench_diffusion  # noqa: E402
from bench.diffusion import build_pair, recipe_values  # noqa: E402

LEAN = ROOT / "examples" / "diffusion" / "Diffusion.lean"
C = {"vocab": 75, "block": 8, "n_layer": 2, "n_head": 2, "head_dim": 4, "dropout": 0.0}
TINY = {"c": C, "b": 3, "t": 8}


@pytest.fixture(scope="module")
def models() -> LeanModels:
    return LeanModels(LEAN)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> str:
    return str(tmp_path_factory.mktemp("corpus"))


def _batch(values: dict, seed: int, corpus: str) -> tuple[torch.Tensor, ...]:
    """(ids, targets, weights): a training batch of the `mdlm` task (Shakespeare, 75
    characters) for `values`' b rows of t characters, made as `tyr train` makes it."""
    table = {"name": "mdlm", "seq": values["t"], "cache_dir": corpus}
    task = make_task(table, TaskContext(values["b"], seed), "test")
    task.prepare()
    batch = task.training_batch(0)
    return batch["ids"], batch["targets"], batch["weights"]


def test_diffusion_checks():
    assert check_files(LEAN) == []
    src = LEAN.read_text(encoding="utf-8")
    assert src.startswith("import Tyr\n\n/-!")  # imports first, then the module doc


def test_training_graph_takes_the_mdlm_batch(models):
    g = models.graph("diffusion", TINY)
    assert tuple(i.name for i in g.inputs) == ("ids", "targets", "weights")
    assert [(i.dtype, i.shape) for i in g.inputs] == [("i64", (3, 8)), ("i64", (3, 8)),
                                                      ("f32", (3, 8))]
    nodes = {n.name: n for n in g.nodes}
    outs = [nodes[o.ref] for o in g.outputs]
    assert [o.shape for o in outs] == [(3, 8, 75), ()]
    assert outs[1].op == "weighted_cross_entropy2"
    ops = {n.op for n in g.nodes}
    assert "bidirectional_attention" in ops and "causal_attention" not in ops


def test_mask_is_one_past_the_characters(models):
    # the embedding has a [MASK] row at id vocab; the head predicts characters only
    shapes = {p.path: p.shape for p in models.graph("diffusionLogits", TINY).params}
    assert shapes["wte"] == (76, 8) and shapes["head"] == (75, 8)


def test_a_sequence_longer_than_the_block_is_rejected_before_training():
    with pytest.raises(ConfigError) as e:
        instantiate_model(load(LEAN), "diffusion", {**TINY, "t": 9})
    assert "'h : t ≤ c.block'" in str(e.value) and "9 ≤ 8 is false" in str(e.value)


def _line_of(src: str, needle: str) -> int:
    return next(i for i, line in enumerate(src.splitlines(), 1) if needle in line)


# (bug, text replaced, replacement, line to blame, message fragments)
BUGS = [
    ("head tied to the embedding: it would predict [MASK]",
     "linear3 (layerNorm3 x p.ln_f p.ln_f_bias) p.head",
     "linear3 (layerNorm3 x p.ln_f p.ln_f_bias) p.wte",
     "linear3 (layerNorm3 x p.ln_f p.ln_f_bias) p.wte",
     ["argument 'M' of 'linear3' has type T #[c.mask + 1, ",
      "expected to have type T #[c.vocab, "]),
    ("causal attention where the model must see both sides, with a padding mask misplaced",
     "bidirectionalAttention q k v c.dropout",
     "paddedAttention q k v c.dropout",
     "paddedAttention q k v c.dropout",
     ["argument 'keep' of 'paddedAttention'", "Float"]),
    ("loss weights per sequence instead of per position",
     "(weights : T #[b, t])",
     "(weights : T #[b])",
     "(z, weightedCrossEntropy2 z targets weights)",
     ["argument 'weight' of 'weightedCrossEntropy2'", "T #[b]", "T #[b, t]"]),
]


@pytest.mark.parametrize("bug,old,new,blame,frags", BUGS, ids=[b[0] for b in BUGS])
def test_mistakes_are_type_errors(tmp_path, bug, old, new, blame, frags):
    src = LEAN.read_text(encoding="utf-8")
    assert old in src
    bad = src.replace(old, new, 1)
    f = tmp_path / "Diffusion.lean"
    f.write_text(bad, encoding="utf-8")
    diags = check_files(f)
    assert len(diags) == 1, "\n".join(map(str, diags))
    assert diags[0].pos.line == _line_of(bad, blame), str(diags[0])
    for frag in frags:
        assert frag in diags[0].message, (frag, diags[0].message)


def test_an_embedding_without_the_mask_row_is_a_type_error(tmp_path):
    # the ids are typed `IT #[b, t] (c.mask + 1)`: they index a table of c.vocab + 1 rows
    src = LEAN.read_text(encoding="utf-8").replace("wte : T #[c.mask + 1,", "wte : T #[c.vocab,")
    f = tmp_path / "Diffusion.lean"
    f.write_text(src, encoding="utf-8")
    diags = check_files(f)
    assert len(diags) == 1, diags
    use = src.index("let tok := embedding2 ids p.wte")
    assert diags[0].pos.line == src[:use].count("\n") + 1
    assert "argument 'table' of 'embedding2' has type T #[c.vocab, c.n_embd] but " \
           "is expected to have type T #[c.mask + 1, ?d]" in diags[0].message


def test_a_mask_id_fed_to_a_model_without_it_is_refused_at_the_call(tmp_path, corpus):
    # typed consistently without [MASK] (ids below c.vocab): the masked batches of the task
    # cannot be fed, and the first masked id is named before any node runs
    src = LEAN.read_text(encoding="utf-8").replace("wte : T #[c.mask + 1,", "wte : T #[c.vocab,")
    src = src.replace("IT #[b, t] (c.mask + 1)", "IT #[b, t] c.vocab")
    f = tmp_path / "Diffusion.lean"
    f.write_text(src, encoding="utf-8")
    module = module_from_graph(LeanModels(f).graph("diffusion", TINY))
    ids, targets, weights = _batch(TINY, 0, corpus)
    with pytest.raises(ExecError, match=r"^input 'ids' : IT #\[3, 8\] 75 holds 75 at \[\d+, \d+\]"):
        module(ids, targets, weights)


def _close(a: torch.Tensor, b: torch.Tensor, what: str, atol: float = 1e-6) -> None:
    assert a.shape == b.shape, what
    err = float((a - b).detach().abs().max()) if a.numel() else 0.0
    assert err <= atol, f"{what}: max |diff| {err:.2e}"


@pytest.mark.parametrize("t", [8, 5], ids=["t=block", "t<block"])
def test_forward_and_backward_match_plain_pytorch(t, corpus):
    values = {**TINY, "t": t}
    tyr, plain = build_pair(values, seed=3)
    assert sorted(tyr.state_dict()) == sorted(plain.state_dict())  # the same keys
    ids, targets, weights = _batch(values, 4, corpus)
    assert bool((ids == C["vocab"]).any())  # some positions are masked
    zt, lt = tyr(ids, targets, weights)
    zp, lp = plain(ids, targets, weights)
    assert zt.shape == (3, t, 75) and lt.shape == ()
    _close(zt, zp, "logits")
    _close(lt, lp, "loss")
    lt.backward()
    lp.backward()
    grads = dict(plain.named_parameters())
    for path, p in tyr.named_parameters():
        assert p.grad is not None and grads[path].grad is not None, path
        _close(p.grad, grads[path].grad, f"grad of {path}")
    # the [MASK] row of the embedding is trained; no row past t of the positions is
    wte, wpe = (dict(tyr.named_parameters())[k].grad for k in ("wte", "wpe"))
    assert torch.count_nonzero(wte[C["vocab"]]) > 0
    assert torch.count_nonzero(wpe[t:]) == 0


def test_plain_model_is_bidirectional_and_dropout_only_in_training(corpus):
    values = {**TINY, "c": {**C, "dropout": 0.5}}
    tyr, plain = build_pair(values, seed=0)
    ids, targets, weights = _batch(values, 1, corpus)
    for m in (tyr, plain):
        m.train()
        assert not torch.equal(m(ids, targets, weights)[0], m(ids, targets, weights)[0])
        m.eval()
        with torch.no_grad():
            z = m(ids, targets, weights)[0]
            ids2 = ids.clone()
            ids2[:, -1] = (ids2[:, -1] + 1) % C["vocab"]  # change the last token only
            assert not torch.allclose(z[:, 0], m(ids2, targets, weights)[0][:, 0])
    with torch.no_grad():
        _close(tyr(ids, targets, weights)[0], plain(ids, targets, weights)[0], "eval logits")


def test_sampling_model_shares_the_weights_and_feeds_unmask(models, corpus):
    train = module_from_graph(models.graph("diffusion", TINY), seed=5)
    sample = module_from_graph(models.graph("diffusionLogits", {**TINY, "b": 1})).eval()
    sample.load_state_dict(train.state_dict())
    ids, targets, weights = _batch(TINY, 2, corpus)
    with torch.no_grad():
        _close(sample(ids[:1])[0], train.eval()(ids, targets, weights)[0][:1], "logits")
    template = prompt_template(8, C["vocab"], [1, 2], [3])
    out = unmask(sample, template, C["vocab"], 3, temperature=0.8, seed=1)
    assert out[:2].tolist() == [1, 2] and out[-1] == 3
    assert bool((out >= 0).all() and (out < C["vocab"]).all())


def test_recipe_config_instantiates(models):
    cfg = json.loads((ROOT / "examples" / "diffusion" / "config.json").read_text())
    assert cfg["model"]["c"]["vocab"] == 75  # the Shakespeare characters; [MASK] is 75
    assert cfg["sample"]["model"] == "diffusionLogits"
    values = recipe_values()
    assert values["c"] == cfg["model"]["c"] and values["t"] == cfg["model"]["c"]["block"]
    g = models.graph("diffusion", values)
    assert {p.path: p.shape for p in g.params}["wte"] == (76, 128)


def test_benchmark_runs_and_both_sides_agree():
    tiny = recipe_values(block=8, n_layer=1, n_head=2, head_dim=4, b=2, t=8)  # 75 characters
    r = bench_diffusion.run(steps=2, warmup=1, breakdown_iters=2, values=tiny)
    s = r["result"]
    assert r["benchmark"] == "diffusion" and r["goal_ratio"] == 0.97
    assert s["tyr"]["n"] == s["plain"]["n"] == 2 and s["ratio"] > 0
    assert s["max_loss_diff"] <= 1e-6 and s["max_param_diff"] <= 1e-6
    rows = bench_diffusion.rows(r)
    assert [row.goal for row in rows if row.verdict] == [">= 0.97"]
    json.dumps(r)
