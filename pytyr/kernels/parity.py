"""Parity of a kernel with its reference at one `Case` of its contract, forward and backward.

Three runs on the same seeded inputs and the same seeded output gradients: the kernel, the
reference in the kernel's dtype (`naive`) and the reference in higher precision (`ref`: f64
for f32 cases, f32 for bf16 ones). Each output and each input gradient must satisfy the
contract's tolerance for the dtype (`Tolerance.bound`, FlashAttention's rule). The tensors of
a run are kept on request, for the GPU suite's safetensors fixtures.
"""
from __future__ import annotations

import inspect
import math
from dataclasses import dataclass, field
from typing import Any

import torch

from pytyr.kernels.contract import Case, Contract


@dataclass(frozen=True)
class Check:
    """One compared tensor: its name, the kernel's and the naive run's max error against the
    reference, and the bound the contract allows."""

    what: str
    err: float
    naive_err: float
    bound: float

    @property
    def ok(self) -> bool:
        return math.isfinite(self.err) and self.err <= self.bound


@dataclass
class Report:
    contract: str
    case: Case
    checks: list[Check]
    tensors: dict[str, torch.Tensor] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks)

    def lines(self) -> list[str]:
        """One line per failed check (all of them when `verbose`), naming case and tensor."""
        return [f"{self.contract} [{self.case.id}] {c.what}: max error {c.err:.3g} > bound "
                f"{c.bound:.3g} (reference in the same dtype: {c.naive_err:.3g})"
                for c in self.checks if not c.ok]


def arg_names(contract: Contract) -> list[str]:
    return list(inspect.signature(contract.kernel).parameters)


def _higher(dtype: torch.dtype) -> torch.dtype:
    return torch.float64 if dtype == torch.float32 else torch.float32


def _as_tuple(out: Any) -> tuple[torch.Tensor, ...]:
    return out if isinstance(out, tuple) else (out,)


def _run(fn, args: list[Any], diff: list[int], douts: list[torch.Tensor], dtype=None):
    """Outputs and input gradients of `fn(*args)`, with the float args cast to `dtype`."""
    live = []
    for a in args:
        if isinstance(a, torch.Tensor) and a.is_floating_point():
            a = a.detach().to(dtype or a.dtype)
        live.append(a)
    wrt = [i for i in diff if isinstance(live[i], torch.Tensor)]
    for i in wrt:
        live[i].requires_grad_(True)
    outs = _as_tuple(fn(*live))
    grads: tuple = ()
    if wrt:
        gs = [g.to(o.dtype) for g, o in zip(douts, outs)]
        grads = torch.autograd.grad(outs, [live[i] for i in wrt], gs, allow_unused=True)
    return [o.detach() for o in outs], dict(zip(wrt, grads))


def _max_abs(a: torch.Tensor) -> float:
    return a.abs().max().item() if a.numel() else 0.0


def run_case(contract: Contract, case: Case, device: str | torch.device = "cpu",
             keep: bool = False) -> Report:
    """Run `case` of `contract` and judge it; `keep` also returns every tensor involved."""
    device = torch.device(device)
    gen = torch.Generator().manual_seed(case.seed)
    args = contract.inputs(case, gen, device)
    diff = list(contract.differentiable)
    with torch.no_grad():
        shapes = [(o.shape, o.dtype) for o in _as_tuple(contract.reference(*args))]
    gen_d = torch.Generator().manual_seed(case.seed + 1)
    # in the outputs' own dtype, so that the higher-precision run sees the same values
    douts = [torch.randn(s, generator=gen_d).to(device, dt) for s, dt in shapes]
    k_out, k_grad = _run(contract.kernel, args, diff, douts)
    n_out, n_grad = _run(contract.reference, args, diff, douts)
    r_out, r_grad = _run(contract.reference, args, diff, douts, _higher(case.dtype))
    tol = contract.tolerance[case.dtype]
    names = arg_names(contract)
    pairs = [(f"output {i}", k_out[i], n_out[i], r_out[i]) for i in range(len(r_out))]
    pairs += [(f"grad {names[i]}", k_grad.get(i), n_grad.get(i), r_grad[i]) for i in r_grad
              if r_grad[i] is not None]
    checks = []
    for what, k, n, r in pairs:
        r64 = r.double()
        k = torch.zeros_like(r64) if k is None else k
        n = torch.zeros_like(r64) if n is None else n
        if k.shape != r.shape:
            checks.append(Check(what + f" (shape {list(k.shape)} != {list(r.shape)})",
                                math.inf, 0.0, 0.0))
            continue
        err, naive_err = _max_abs(k.double() - r64), _max_abs(n.double() - r64)
        checks.append(Check(what, err, naive_err, tol.bound(naive_err, _max_abs(r64),
                                                            case.dtype)))
    report = Report(contract.name, case, checks)
    if keep:
        t = report.tensors
        for i, a in enumerate(args):
            if isinstance(a, torch.Tensor):
                t[f"input.{names[i]}"] = a
        for i, (k, r) in enumerate(zip(k_out, r_out)):
            t[f"output.{i}.kernel"], t[f"output.{i}.reference"], t[f"dout.{i}"] = k, r, douts[i]
        for i, r in r_grad.items():
            if r is not None and k_grad.get(i) is not None:
                t[f"grad.{names[i]}.kernel"], t[f"grad.{names[i]}.reference"] = k_grad[i], r
    return report
