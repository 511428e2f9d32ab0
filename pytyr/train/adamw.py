"""`FusedAdamW`: torch's fused AdamW with a lean step for the common case.

`torch.optim.AdamW(fused=True)` spends, per step, as long in Python (options checked again,
tensors regrouped by device and dtype, one `step` counter bumped per parameter) as its CPU
kernel spends on a model of a million parameters. `FusedAdamW` is that optimizer: the same
state (`step`, `exp_avg`, `exp_avg_sq` per parameter), `state_dict` and kernel
(`torch._fused_adamw_`), so its steps are bit for bit torch's and a checkpoint of either
resumes the other. Its `step` calls the kernel directly, once per group, when nothing needs
torch's general path: plain tensors of one device and dtype per group, every state made,
no amsgrad, maximize, capturable or differentiable option, a float rate and no gradient
scaler's `grad_scale`/`found_inf`. Anything else takes torch's own step.

(Flat parameter buffers, one kernel call over all parameters, were measured too: the
gradients autograd makes are separate tensors, and gathering them each step cost more than
the per-tensor work the flat call saves on CPU.)
"""
from __future__ import annotations

from typing import Any

import torch

_OFF = ("amsgrad", "maximize", "capturable", "differentiable")


class FusedAdamW(torch.optim.AdamW):
    def __init__(self, params: Any, **options: Any):
        options.pop("fused", None)
        options.pop("foreach", None)
        super().__init__(params, fused=True, **options)

    @torch.no_grad()
    def step(self, closure: Any = None) -> Any:
        work = None if closure is not None else self._lean_work()
        if work is None:
            return super().step(closure)
        for group, (params, grads, avgs, sqs, steps) in zip(self.param_groups, work):
            if not params:
                continue
            beta1, beta2 = group["betas"]
            torch._foreach_add_(steps, 1)
            torch._fused_adamw_(params, grads, avgs, sqs, [], steps, amsgrad=False,
                                lr=group["lr"], beta1=beta1, beta2=beta2,
                                weight_decay=group["weight_decay"], eps=group["eps"],
                                maximize=False, grad_scale=None, found_inf=None)
        return None

    def _lean_work(self) -> list[tuple[list[torch.Tensor], ...]] | None:
        """Per group (params, grads, exp_avgs, exp_avg_sqs, steps) of the parameters with a
        gradient, or None when torch's general step must run."""
        if getattr(self, "grad_scale", None) is not None or \
                getattr(self, "found_inf", None) is not None:
            return None
        work = []
        for group in self.param_groups:
            if any(group.get(k) for k in _OFF) or isinstance(group["lr"], torch.Tensor):
                return None
            lists: tuple[list[torch.Tensor], ...] = ([], [], [], [], [])
            kind = None
            for p in group["params"]:
                g = p.grad
                if g is None:
                    continue
                state = self.state.get(p)
                if not state or type(p) is not torch.nn.Parameter or g.is_sparse:
                    return None  # first step (torch makes the state), subclasses, sparse
                if kind is None:
                    kind = (p.device, p.dtype)
                elif (p.device, p.dtype) != kind:
                    return None
                for out, t in zip(lists, (p, g, state["exp_avg"], state["exp_avg_sq"],
                                          state["step"])):
                    out.append(t)
            work.append(lists)
        return work
