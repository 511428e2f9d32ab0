"""The ops of masked diffusion beyond their oracle cases in `test_exec.py`: what makes
attention bidirectional, what the padding mask does and does not do (in attention and in the
masked mean), and how the weighted cross entropy treats its weights; plus the typing of the mask and the weights."""
from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from graphs import GraphBuilder
from pytyr.errors import ExecError
from pytyr.exec.lower import build_module
from pytyr.ir.validate import load_graph
from tests.lean.helpers import check_src, one_error

B, H, T, D, V = 2, 2, 5, 4, 7


def _op_module(signatures, op: str, specs: list[tuple], out: list[int], **attrs):
    """A module of one `op` node; `specs` are (shape, dtype[, bound of an i64 input])."""
    g = GraphBuilder(op)
    names = [g.input(f"a{k}", *spec) for k, spec in enumerate(specs)]
    g.output("out", g.node(op, names, out, **attrs))
    return build_module(load_graph(g.build(), signatures))


def _qkv(seed: int = 0) -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    return [torch.randn(B, H, T, D, generator=gen) for _ in range(3)]


@pytest.fixture
def full(signatures):
    return _op_module(signatures, "bidirectional_attention", [([B, H, T, D], "f32")] * 3,
                      [B, H, T, D], p=0.0).eval()


@pytest.fixture
def padded(signatures):
    return _op_module(signatures, "padded_attention",
                      [([B, H, T, D], "f32")] * 3 + [([B, T], "i64", 2)], [B, H, T, D],
                      p=0.0).eval()


def test_bidirectional_attention_sees_later_positions(full, signatures):
    q, k, v = _qkv()
    (before,) = full(q, k, v)
    v2 = v.clone()
    v2[:, :, -1] += 1.0  # only the last position changes...
    (after,) = full(q, k, v2)
    assert not torch.allclose(before[:, :, 0], after[:, :, 0])  # ...and the first one sees it
    causal = _op_module(signatures, "causal_attention", [([B, H, T, D], "f32")] * 3,
                        [B, H, T, D], p=0.0).eval()
    assert torch.equal(causal(q, k, v)[0][:, :, 0], causal(q, k, v2)[0][:, :, 0])


def test_bidirectional_attention_is_permutation_equivariant(full):
    q, k, v = _qkv(1)
    perm = torch.tensor([3, 0, 4, 1, 2])
    (y,) = full(q, k, v)
    (yp,) = full(q[:, :, perm], k[:, :, perm], v[:, :, perm])
    torch.testing.assert_close(yp, y[:, :, perm], rtol=1e-6, atol=1e-6)


def test_attention_dropout_only_while_training(signatures):
    m = _op_module(signatures, "bidirectional_attention", [([B, H, T, D], "f32")] * 3,
                   [B, H, T, D], p=0.5)
    q, k, v = _qkv(2)
    m.train()
    torch.manual_seed(0)
    assert not torch.equal(m(q, k, v)[0], m(q, k, v)[0])
    m.eval()
    assert torch.equal(m(q, k, v)[0], m(q, k, v)[0])


def test_padding_keys_are_never_attended(padded):
    q, k, v = _qkv(3)
    keep = torch.tensor([[1, 1, 1, 0, 0], [1, 0, 1, 1, 1]])
    (y,) = padded(q, k, v, keep)
    k2, v2 = k.clone(), v.clone()
    for row, col in (keep == 0).nonzero().tolist():  # anything at the padding keys
        k2[row, :, col] = 100.0
        v2[row, :, col] = -100.0
    (y2,) = padded(q, k2, v2, keep)
    torch.testing.assert_close(y, y2, rtol=0, atol=0)


def test_keep_everywhere_is_bidirectional_and_the_mask_is_zero_or_one(full, padded):
    q, k, v = _qkv(4)
    ones = torch.ones(B, T, dtype=torch.int64)
    torch.testing.assert_close(padded(q, k, v, ones)[0], full(q, k, v)[0], rtol=1e-6, atol=1e-6)
    # the mask is `IT #[b, t] 2`: any other value is refused at the call, naming the input
    keep = torch.tensor([[1, 0, 1, 1, 0], [0, 1, 1, 0, 1]])
    with pytest.raises(ExecError, match=r"input 'a3' : IT #\[2, 5\] 2 holds 7 at \[0, 0\]"):
        padded(q, k, v, keep * 7)


def test_masked_mean_of_no_real_token_is_zero_with_a_finite_gradient(signatures):
    m = _op_module(signatures, "masked_mean_seq3", [([2, 3, 4], "f32"), ([2, 3], "i64", 2)],
                   [2, 4])
    x = torch.randn(2, 3, 4, requires_grad=True)
    (y,) = m(x, torch.tensor([[0, 0, 0], [1, 0, 1]]))
    assert torch.equal(y[0], torch.zeros(4))
    torch.testing.assert_close(y[1], (x[1, 0] + x[1, 2]) / 2)
    y.sum().backward()
    assert torch.isfinite(x.grad).all() and torch.equal(x.grad[0], torch.zeros(3, 4))
    assert torch.equal(x.grad[1, 1], torch.zeros(4))  # a padded token gets no gradient


def test_a_sequence_without_real_keys_gets_zeros_not_nan(padded):
    q, k, v = (x.requires_grad_() for x in _qkv(5))
    keep = torch.tensor([[0, 0, 0, 0, 0], [1, 1, 0, 1, 1]])
    (y,) = padded(q, k, v, keep)
    assert torch.equal(y[0], torch.zeros_like(y[0]))
    assert torch.isfinite(y).all()
    y.sum().backward()
    assert all(torch.isfinite(x.grad).all() for x in (q, k, v))


@pytest.fixture
def wce(signatures):
    return _op_module(signatures, "weighted_cross_entropy2",
                      [([B, T, V], "f32"), ([B, T], "i64", V), ([B, T], "f32")], [])


@pytest.fixture
def ce(signatures):
    return _op_module(signatures, "cross_entropy2", [([B, T, V], "f32"), ([B, T], "i64", V)], [])


def _logits_targets(seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(B, T, V, generator=gen), torch.randint(0, V, (B, T), generator=gen)


def test_unit_weights_give_the_plain_mean_cross_entropy(wce, ce):
    z, y = _logits_targets(0)
    torch.testing.assert_close(wce(z, y, torch.ones(B, T))[0], ce(z, y)[0], rtol=1e-6, atol=1e-6)


def test_zero_weight_positions_add_nothing_and_get_no_gradient(wce):
    z, y = _logits_targets(1)
    w = torch.tensor([[2.0, 0.0, 1.0, 0.0, 4.0], [0.0, 0.0, 1.5, 1.0, 0.0]])
    z = z.requires_grad_()
    (loss,) = wce(z, y, w)
    loss.backward()
    zero = w == 0
    assert torch.count_nonzero(z.grad[zero]) == 0 and torch.count_nonzero(z.grad[~zero]) > 0
    z2, y2 = z.detach().clone(), y.clone()
    z2[zero] = 50.0 * torch.randn(int(zero.sum()), V)  # other logits and targets there
    y2[zero] = (y2[zero] + 3) % V
    torch.testing.assert_close(wce(z2, y2, w)[0], loss.detach(), rtol=0, atol=0)
    # the divisor is every position, not the weighted ones: one weight of 1 alone is CE / (B·T)
    one = torch.zeros(B, T)
    one[0, 0] = 1.0
    ce00 = torch.nn.functional.cross_entropy(z.detach()[0, 0], y[0, 0])
    torch.testing.assert_close(wce(z.detach(), y, one)[0], ce00 / (B * T), rtol=1e-6, atol=1e-7)


@settings(max_examples=25, deadline=None)
@given(st.lists(st.floats(0.0, 1000.0, allow_nan=False), min_size=B * T, max_size=B * T),
       st.floats(0.0, 10.0, allow_nan=False), st.integers(0, 2**16))
def test_weighted_cross_entropy_is_linear_in_the_weights(signatures, weights, alpha, seed):
    m = _op_module(signatures, "weighted_cross_entropy2",
                   [([B, T, V], "f32"), ([B, T], "i64", V), ([B, T], "f32")], [])
    z, y = _logits_targets(seed)
    w = torch.tensor(weights).view(B, T)
    (a,) = m(z, y, alpha * w)
    (b,) = m(z, y, w)
    torch.testing.assert_close(a, alpha * b, rtol=1e-5, atol=1e-5)
    assert float(b) >= 0.0  # non-negative weights, non-negative losses


@pytest.mark.parametrize("src,frags", [
    # the padding mask is a 0/1 index tensor, not floats, with one entry per key of each sequence
    ("def f (q k v : T #[2, 4, 8, 16]) (m : IT #[2, 9] 2) : T #[2, 4, 8, 16] :=\n"
     "  paddedAttention q k v m", ["argument 'keep' of 'paddedAttention'", "IT #[2, 9] 2",
                                   "IT #[2, 8] 2"]),
    ("def f (q k v : T #[2, 4, 8, 16]) (m : IT #[8] 2) : T #[2, 4, 8, 16] :=\n"
     "  paddedAttention q k v m", ["argument 'keep' of 'paddedAttention'", "IT #[8] 2"]),
    ("def f (q k v : T #[2, 4, 8, 16]) (m : IT #[2, 8] 65) : T #[2, 4, 8, 16] :=\n"
     "  paddedAttention q k v m", ["argument 'keep' of 'paddedAttention'", "IT #[2, 8] 65",
                                   "IT #[2, 8] 2"]),
    # the weights are floats, one per position
    ("def f (z : T #[2, 8, 65]) (y : IT #[2, 8] 65) (w : IT #[2, 8] 65) : T #[] :=\n"
     "  weightedCrossEntropy2 z y w", ["argument 'weight' of 'weightedCrossEntropy2'",
                                       "IT #[2, 8] 65", "T #[2, 8]"]),
    ("def f (z : T #[2, 8, 65]) (y : IT #[2, 8] 65) (w : T #[8, 2]) : T #[] :=\n"
     "  weightedCrossEntropy2 z y w", ["argument 'weight' of 'weightedCrossEntropy2'",
                                       "T #[8, 2]"]),
    # bidirectional attention is per head: [b, h, t, d], not the merged width
    ("def f (x : T #[2, 8, 64]) : T #[2, 8, 64] :=\n  bidirectionalAttention x x x",
     ["argument 'q' of 'bidirectionalAttention'", "T #[2, 8, 64]"]),
])
def test_masks_and_weights_are_typed(tmp_path, src, frags):
    d = one_error(tmp_path, src)
    assert d.pos.line == 4, d
    for frag in frags:
        assert frag in d.message, (frag, d.message)


def test_masks_and_weights_accept_config_shapes(tmp_path):
    src = ("def f (b t h d v : Nat) (q k w : T #[b, h, t, d]) (m : IT #[b, t] 2)\n"
           "    (z : T #[b, t, v]) (y : IT #[b, t] v) (ws : T #[b, t]) :\n"
           "    T #[b, h, t, d] × T #[] :=\n"
           "  (paddedAttention q k w m 0.1, weightedCrossEntropy2 z y ws)")
    assert check_src(tmp_path, src) == []
