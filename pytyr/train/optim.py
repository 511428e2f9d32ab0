"""Optimizers of a run, from `TrainConfig`: fused AdamW (`adamw.FusedAdamW`, torch's kernel
with a lean step), or Muon for matrices with AdamW.

Every group carries its peak rate as `initial_lr`; `set_rate(optimizers, m)` sets each
group's rate to `initial_lr * m`, so one schedule (`settings.lr_multiplier`) drives any mix
of optimizers and per-group rates (Muon's matrices, embeddings, head, scalars).
"""
from __future__ import annotations

from typing import Any

import torch
from torch import nn

from pytyr.errors import ConfigError
from pytyr.train.adamw import FusedAdamW
from pytyr.train.muon import make_optimizers as make_muon
from pytyr.train.muon import path_matches
from pytyr.train.settings import TrainConfig


def param_groups(module: nn.Module, weight_decay: float) -> list[dict[str, Any]]:
    """AdamW groups: weight decay on parameters of rank >= 2 only (matrices, embeddings)."""
    decay, no_decay = [], []
    for p in module.parameters():
        if p.requires_grad:
            (decay if p.ndim >= 2 else no_decay).append(p)
    groups = [{"params": decay, "weight_decay": weight_decay}]
    if no_decay:
        groups.append({"params": no_decay, "weight_decay": 0.0})
    return [g for g in groups if g["params"]]


def fused_available(device: torch.device) -> bool:
    """Whether torch has a fused AdamW kernel for parameters on `device`."""
    from torch.utils._foreach_utils import _get_fused_kernels_supported_devices

    return device.type in _get_fused_kernels_supported_devices()


def check_names(cfg: TrainConfig, paths: list[str], where: str, model: str) -> None:
    """Every name of Muon's routing lists must match a parameter path: one that matches
    nothing would silently send that parameter (an embedding, a head) to the other
    optimizer."""
    if cfg.optimizer != "muon":
        return
    lists = [(f"train.muon.{key}", getattr(cfg.muon, key))
             for key in ("embedding_names", "head_names")]
    lists += [(f"train.muon.groups.{i}.names", g.names) for i, g in enumerate(cfg.muon.groups)]
    for key, names in lists:
        for name in names:
            if not any(path_matches(p, (name,)) for p in paths):
                shown = ", ".join(paths[:8]) + (", ..." if len(paths) > 8 else "")
                raise ConfigError(f"{where}: '{key}' names {name!r}, which matches no "
                                  f"parameter of model '{model}' (its parameters: {shown}); "
                                  f"give only names of its path segments, or []")


def make_optimizers(module: nn.Module, cfg: TrainConfig,
                    device: torch.device) -> list[torch.optim.Optimizer]:
    betas = (cfg.beta1, cfg.beta2)
    fused = cfg.fused if cfg.fused is not None else fused_available(device)
    if cfg.optimizer == "adamw":
        adamw = FusedAdamW if fused else torch.optim.AdamW
        opts: list[torch.optim.Optimizer] = [adamw(
            param_groups(module, cfg.weight_decay), lr=cfg.lr, betas=betas, eps=cfg.eps)]
    else:
        m = cfg.muon
        check_names(cfg, [n for n, p in module.named_parameters() if p.requires_grad],
                    "the train config", type(module).__name__)
        groups = [{"name": g.name, "names": g.names, "lr": g.lr, "weight_decay": g.weight_decay,
                   "betas": (cfg.beta1 if g.beta1 is None else g.beta1,
                             cfg.beta2 if g.beta2 is None else g.beta2)} for g in m.groups]
        opts = make_muon(module, embedding_names=m.embedding_names, head_names=m.head_names,
                         muon_lr=m.lr, momentum=m.momentum, nesterov=m.nesterov,
                         ns_steps=m.ns_steps, muon_weight_decay=m.weight_decay,
                         embedding_lr=m.embedding_lr, head_lr=m.head_lr, scalar_lr=m.scalar_lr,
                         betas=betas, eps=cfg.eps, adamw_groups=groups,
                         orthogonalizer=m.orthogonalizer, momentum_form=m.momentum_form,
                         normuon_beta2=m.normuon_beta2, equilibrate=m.equilibrate,
                         renormalize=m.renormalize,
                         cautious_weight_decay=m.cautious_weight_decay)
    for opt in opts:
        for group in opt.param_groups:
            group["initial_lr"] = group["lr"]
    return opts


def set_rate(optimizers: list[torch.optim.Optimizer], multiplier: float) -> None:
    for opt in optimizers:
        for group in opt.param_groups:
            group["lr"] = group["initial_lr"] * multiplier


def schedule_muon(optimizers: list[torch.optim.Optimizer], step: int, cfg: TrainConfig) -> None:
    """Muon's momentum and weight decay of 0-based `step` (`settings.muon_momentum`,
    `muon_weight_decay`), set on every Muon group; nothing for other optimizers."""
    from pytyr.train.muon import Muon
    from pytyr.train.settings import muon_momentum, muon_weight_decay

    for opt in optimizers:
        if isinstance(opt, Muon):
            for group in opt.param_groups:
                group["momentum"] = muon_momentum(step, cfg)
                group["weight_decay"] = muon_weight_decay(step, cfg)
