"""The convolutions of `Tyr/Conv.lean` over random sizes, strides, paddings, dilations and
groups: the graph validated against the Lean signature (its output size is the type's
formula), the lowering's forward and backward against the written-out oracle
(`conv_oracles.conv_nd`) and against torch's own `F.conv2d` / `F.conv1d`; an output size
other than the formula's is refused by the validator."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from conv_oracles import conv_nd
from graphs import GraphBuilder
from pytyr.errors import TyrError
from pytyr.exec.lower import build_module
from pytyr.ir.validate import load_graph

TOL = dict(rtol=1e-5, atol=1e-5)


@st.composite
def convs(draw, axes: int):
    """(input shape, weight shape, stride, padding, dilation, groups) whose kernel fits."""
    groups = draw(st.integers(1, 3)) if axes == 2 else 1
    cin, cout = draw(st.integers(1, 3)), groups * draw(st.integers(1, 3))
    stride, padding, dilation = (draw(st.integers(1, 3)), draw(st.integers(0, 2)),
                                 draw(st.integers(1, 2)))
    kernel = [draw(st.integers(1, 4)) for _ in range(axes)]
    size = [draw(st.integers(max(1, dilation * (k - 1) + 1 - 2 * padding), 9)) for k in kernel]
    return ([draw(st.integers(1, 2)), groups * cin, *size], [cout, cin, *kernel], stride,
            padding, dilation, groups)


def _out(shape, weight, stride, padding, dilation):
    return [shape[0], weight[0]] + [(n + 2 * padding - dilation * (k - 1) - 1) // stride + 1
                                    for n, k in zip(shape[2:], weight[2:])]


def _module(signatures, op, shape, weight, out, **attrs):
    g = GraphBuilder(op)
    names = [g.input("x", shape), g.input("w", weight), g.input("b", [weight[0]])]
    g.output("y", g.node(op, names, out, **attrs))
    return build_module(load_graph(g.build(), signatures))


def _same_as_oracle_and_torch(module, shape, weight, torch_fn, **conv):
    gen = torch.Generator().manual_seed(0)
    x, w, b = (torch.randn(s, generator=gen).requires_grad_() for s in (shape, weight,
                                                                        [weight[0]]))
    (got,) = module(x, w, b)
    cot = torch.randn(got.shape, generator=gen)
    grads = torch.autograd.grad((got * cot).sum(), (x, w, b))
    for want in (conv_nd(x, w, b, **conv), torch_fn(x, w, b, conv["stride"], conv["padding"],
                                                    conv["dilation"], conv.get("groups", 1))):
        torch.testing.assert_close(got, want, **TOL)
        for a, e in zip(grads, torch.autograd.grad((want * cot).sum(), (x, w, b))):
            torch.testing.assert_close(a, e, **TOL)


@settings(max_examples=25, deadline=None)
@given(case=convs(2))
def test_conv2d_in_groups_is_torchs(signatures, case):
    shape, weight, stride, padding, dilation, groups = case
    out = _out(shape, weight, stride, padding, dilation)
    module = _module(signatures, "conv2d_groups", shape, weight, out, stride=stride,
                     padding=padding, dilation=dilation, groups=groups)
    _same_as_oracle_and_torch(module, shape, weight, F.conv2d, stride=stride, padding=padding,
                              dilation=dilation, groups=groups)


@settings(max_examples=15, deadline=None)
@given(case=convs(1))
def test_conv1d_is_torchs(signatures, case):
    shape, weight, stride, padding, dilation, _ = case
    out = _out(shape, weight, stride, padding, dilation)
    module = _module(signatures, "conv1d", shape, weight, out, stride=stride, padding=padding,
                     dilation=dilation)
    _same_as_oracle_and_torch(module, shape, weight, F.conv1d, stride=stride, padding=padding,
                              dilation=dilation)


@pytest.mark.parametrize("change", [1, -1])
def test_an_output_size_other_than_the_formulas_is_refused(signatures, change):
    # 8 through 3 at stride 2, padding 1: 4, not 4 ± 1
    with pytest.raises(TyrError, match="conv2d"):
        _module(signatures, "conv2d", [1, 2, 8, 8], [3, 2, 3, 3], [1, 3, 4 + change, 4],
                stride=2, padding=1, dilation=1)
