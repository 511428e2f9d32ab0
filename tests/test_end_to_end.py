"""The MLP written in Lean, run by the executor, agrees with the same MLP written in torch."""
from __future__ import annotations

import torch
import torch.nn.functional as F

from pytyr.pipeline import graph_from_lean, module_from_graph

VALUES = {"c": {"inputs": 2, "hidden": 16, "classes": 3}, "b": 8}


def _hand_written(p: dict[str, torch.Tensor], x: torch.Tensor, y: torch.Tensor):
    h = torch.relu(x @ p["w1"].T + p["b1"])
    h = torch.relu(h @ p["w2"].T + p["b2"])
    z = h @ p["w3"].T + p["b3"]
    return z, F.cross_entropy(z, y)


def test_lean_mlp_matches_hand_written_torch_forward_and_backward():
    graph = graph_from_lean("examples/mlp/MLP.lean", "mlp", VALUES)
    module = module_from_graph(graph, seed=3)
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(8, 2, generator=gen)
    y = torch.randint(0, 3, (8,), generator=gen)
    ref = {k: v.detach().clone().requires_grad_(True) for k, v in module.state_dict().items()}
    assert set(ref) == {"w1", "b1", "w2", "b2", "w3", "b3"}

    z, loss = module(x, y)
    z_ref, loss_ref = _hand_written(ref, x, y)
    torch.testing.assert_close(z, z_ref, atol=1e-6, rtol=0)
    torch.testing.assert_close(loss, loss_ref, atol=1e-6, rtol=0)

    loss.backward()
    loss_ref.backward()
    for name, param in module.named_parameters():
        torch.testing.assert_close(param.grad, ref[name].grad, atol=1e-6, rtol=0)
