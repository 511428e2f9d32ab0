"""The executor's use of the kernels (pytyr/exec/kernels.py): which nodes are routed, why,
that a routed graph computes what the unrouted one does, and that it can be turned off."""
from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from graphs import GraphBuilder
from pytyr.errors import KernelError
from pytyr.exec import build_module
from pytyr.exec import kernels as routing
from pytyr.ir.validate import load_graph
from pytyr.pipeline import graph_from_lean

pytest.importorskip("triton")

GPT = "examples/gpt/GPT.lean"
# With a GPU the kernels run compiled on CUDA tensors; without, in Triton's interpreter on CPU.
DEV = "cuda" if torch.cuda.is_available() else "cpu"
MODE = "auto" if DEV == "cuda" else "interpret"


def _gpt(head_dim=16, dropout=0.0):
    values = {"c": {"vocab": 11, "block": 8, "n_layer": 2, "n_head": 2, "head_dim": head_dim,
                    "dropout": dropout}, "b": 3, "t": 8}
    return graph_from_lean(GPT, "gpt", values)


def _batch(seed=0, device="cpu"):
    g = torch.Generator().manual_seed(seed)
    return tuple(torch.randint(0, 11, (3, 8), generator=g).to(device) for _ in range(2))


def _loss_and_grads(module, batch):
    loss = module(*batch)[1]
    loss.backward()
    return loss.detach(), {k: p.grad.clone() for k, p in module.named_parameters()}


def test_explain_routes_the_gpt_ops_inside_their_contracts():
    choices = routing.explain(_gpt(), mode="auto", device="cuda")
    by_op = {}
    for c in choices:
        by_op.setdefault(c.node.op, set()).add(c.kernel)
    assert by_op == {"layer_norm3": {"layer_norm"}, "causal_attention": {"flash_attention"},
                     "cross_entropy2": {"cross_entropy"}}  # GELU: torch's op (no kernel)
    assert len(choices) == 2 * 2 + 1 + 2 + 1  # 2 norms a block + ln_f, 2 attentions, 1 loss
    line = next(c.line() for c in choices if c.node.op == "causal_attention")
    assert "GPT.lean:" in line and "kernel flash_attention" in line and "dropout" in line


def test_explain_names_the_contract_a_node_is_outside_of():
    choices = routing.explain(_gpt(head_dim=24), mode="auto", device="cuda")
    attn = [c for c in choices if c.node.op == "causal_attention"]
    assert attn and all(c.kernel is None for c in attn)
    assert "outside the flash_attention contract: d=24 is outside one of 16, 32, 64, 128" in \
        attn[0].line()
    assert all(c.kernel for c in choices if c.node.op not in ("causal_attention", "gelu"))


def test_explain_says_why_nothing_is_routed_when_kernels_are_off():
    choices = routing.explain(_gpt(), mode="off", device="cuda")
    assert choices and all(c.kernel is None and "kernels off" in c.reason for c in choices)
    text = routing.explain_text(_gpt(), mode="off", device="cuda")
    assert text.endswith(f"0 of {len(choices)} nodes with a kernel use it (mode off, "
                         f"device cuda)")


def test_on_a_cpu_machine_only_the_c_kernels_are_routed():
    choices = routing.explain(_gpt(), mode="auto", device="cpu")
    by_op = {c.node.op: c for c in choices}
    for op in ("layer_norm3", "cross_entropy2"):  # Triton only
        assert "kernels run on CUDA only, not on cpu" in by_op[op].reason
    assert by_op["causal_attention"].kernel is None  # t = 8: the C kernel wants multiples of 16
    assert "outside the attention_cpu contract: t=8 is not a multiple of 16 in 16..256" in \
        by_op["causal_attention"].line()
    assert "gelu" not in by_op  # torch's GELU is as fast as a C pass (docs/performance.md)


def test_the_environment_turns_kernels_off(monkeypatch):
    monkeypatch.setenv("TYR_KERNELS", "off")
    assert routing.kernel_mode() == "off"
    assert all(c.kernel is None for c in routing.explain(_gpt(), device="cuda"))
    monkeypatch.setenv("TYR_KERNELS", "0")
    assert routing.kernel_mode() == "off"
    assert routing.kernel_mode("auto") == "auto"  # the argument wins


@pytest.mark.parametrize("where", ["env", "arg"])
def test_a_bad_mode_is_one_clear_error(monkeypatch, where):
    if where == "env":
        monkeypatch.setenv("TYR_KERNELS", "fast")
    with pytest.raises(KernelError, match="'fast' .* is not one of auto, off, interpret"):
        build_module(_gpt(), kernels=None if where == "env" else "fast")


def test_routed_gpt_matches_the_torch_path():
    graph = _gpt()
    ref, ker = build_module(graph, kernels="off"), build_module(graph, kernels=MODE)
    assert "kernels_causal_attention" not in ref._fx.code
    assert "kernels_causal_attention" in ker._fx.code
    loss_r, grads_r = _loss_and_grads(ref.to(DEV), _batch(device=DEV))
    loss_k, grads_k = _loss_and_grads(ker.to(DEV), _batch(device=DEV))
    torch.testing.assert_close(loss_k, loss_r, rtol=1e-5, atol=1e-6)
    assert grads_k.keys() == grads_r.keys()
    for k in grads_r:
        torch.testing.assert_close(grads_k[k], grads_r[k], rtol=1e-4, atol=1e-6, msg=k)


def test_a_routed_graph_on_cpu_trains_bit_for_bit_like_the_unrouted_one(monkeypatch):
    # lowered as on a CUDA machine (nodes routed), run on CPU tensors: every Triton dispatch
    # takes its torch branch, which must be the op's own lowering exactly (the C kernels,
    # which do run on CPU, are left out: tests/test_*_cpu.py hold them to torch)
    monkeypatch.setattr(routing, "CPU_ROUTES", {})
    graph = _gpt()
    off = build_module(graph, seed=3, kernels="off")
    monkeypatch.setattr(routing, "_default_device", lambda: "cuda")
    routed = build_module(graph, seed=3, kernels="auto")
    assert "layer_norm" in routed._fx.code and routed._fx.code != off._fx.code
    opts = [torch.optim.AdamW(m.parameters(), lr=1e-2) for m in (off, routed)]
    for step in range(3):
        losses = []
        for m, opt in zip((off, routed), opts):
            loss = m(*_batch(step))[1]
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        assert losses[0] == losses[1]
    for (k, a), (_, b) in zip(off.named_parameters(), routed.named_parameters()):
        assert torch.equal(a, b), k


def test_nanochat_ops_are_routed_and_match(signatures):
    g = GraphBuilder("nano")
    x = g.input("x", [2, 6, 32])
    n = g.node("rms_norm3", [x], [2, 6, 32], eps=1e-6)
    h = g.node("split_heads", [n], [2, 2, 6, 16], implicit={"b": 2, "t": 6, "h": 2, "d": 16})
    r = g.node("rotary", [h], [2, 2, 6, 16], implicit={"b": 2, "h": 2, "t": 6, "k": 8, "n": 6},
               base=10000.0)
    q = g.node("rms_norm4", [r], [2, 2, 6, 16], eps=1e-6)
    a = g.node("causal_attention", [q, r, h], [2, 2, 6, 16], p=0.0)
    loss = g.node("sum", [a], [])
    g.output("loss", loss)
    graph = load_graph(g.build(), signatures)
    kinds = [c.kernel for c in routing.explain(graph, mode=MODE, device="cuda")]
    assert kinds == ["rms_norm", "rotary", "rms_norm", "flash_attention"]
    xs = torch.randn(2, 6, 32, generator=torch.Generator().manual_seed(0)).to(DEV)
    outs = []
    for mode in ("off", MODE):
        xi = xs.clone().requires_grad_(True)
        out = build_module(graph, kernels=mode).to(DEV)(xi)[0]
        out.backward()
        outs.append((out.detach(), xi.grad))
    torch.testing.assert_close(outs[1][0], outs[0][0], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(outs[1][1], outs[0][1], rtol=1e-4, atol=1e-5)


def test_attention_with_active_dropout_takes_the_torch_path():
    q, k, v = (torch.randn(1, 2, 8, 16, generator=torch.Generator().manual_seed(i)).to(DEV)
               for i in range(3))
    anywhere = MODE == "interpret"
    torch.manual_seed(7)
    routed = routing.causal_attention(q, k, v, 0.5, True, anywhere)
    torch.manual_seed(7)
    expected = F.scaled_dot_product_attention(q, k, v, dropout_p=0.5, is_causal=True)
    assert torch.equal(routed, expected)  # the same random mask: the torch call itself
    evaluated = routing.causal_attention(q, k, v, 0.5, False, anywhere)  # eval: the kernel
    torch.testing.assert_close(evaluated, F.scaled_dot_product_attention(q, k, v,
                                                                         is_causal=True))


@pytest.mark.parametrize("call,match", [
    (lambda: __import__("pytyr.kernels.attention", fromlist=["x"]).flash_attention(
        *(torch.zeros(1, 1, 4, 24) for _ in range(3))), "'flash_attention'.*d=24 is outside"),
    (lambda: __import__("pytyr.kernels.norms", fromlist=["x"]).layer_norm(
        torch.zeros(1, 16385), torch.ones(16385), torch.zeros(16385)),
     "'layer_norm'.*n=16385 is outside 1..16384"),
    (lambda: __import__("pytyr.kernels.cross_entropy", fromlist=["x"]).cross_entropy(
        torch.zeros(2, 4, dtype=torch.float64), torch.zeros(2, dtype=torch.long)),
     "'cross_entropy'.*dtype f64 is not one of f32, bf16"),
])
def test_a_kernel_called_outside_its_contract_says_so(call, match):
    with pytest.raises(KernelError, match=match):
        call()


def test_interpret_mode_needs_the_interpreter(monkeypatch):
    import pytyr.kernels.runtime as runtime
    monkeypatch.setattr(runtime, "INTERPRET", False)
    with pytest.raises(KernelError, match="TRITON_INTERPRET=1"):
        build_module(_gpt(), kernels="interpret")


def test_tables_of_the_contract_helper_match_the_executor():
    from pytyr.exec.ops import rotary_tables
    from pytyr.kernels.rotary import tables
    cos, sin = tables(8, 4)
    ecos, esin = rotary_tables(torch.zeros(1, 1, 8, 8, dtype=torch.float64), 10000.0)
    assert torch.equal(cos, ecos) and torch.equal(sin, esin)
    assert math.isclose(float(cos[3, 1]), math.cos(3 * 10000.0 ** (-1 / 4)))
