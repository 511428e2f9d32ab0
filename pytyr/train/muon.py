"""Muon for hidden matrices, AdamW for the rest (the nanochat / modded-nanogpt split).

Muon ("MomentUm Orthogonalized by Newton-Schulz") is SGD with momentum whose update for
each weight matrix is replaced by an approximation of its orthogonal polar factor: for an
update `G = U S Vᵀ` (reduced SVD) it steps along roughly `U Vᵀ`, so every direction of the
matrix moves by about the same amount however skewed the gradient's spectrum is.

Choices made here (each documented where it is implemented):

- Momentum is classic heavy ball, `buf ← μ·buf + g`; with `nesterov` (the default) the
  update is `g + μ·buf`, else `buf`. (The exponential-average form `buf ← lerp(buf, g, 1-μ)`
  seen elsewhere differs from this one by the constant factor `1 - μ` only, which the
  orthogonalisation removes.)
- The orthogonalisation runs `ns_steps` (5) iterations of the quintic Newton-Schulz map
  `X ← a X + (b A + c A²) X`, `A = X Xᵀ`, with the published coefficients
  `(a, b, c) = (3.4445, -4.7750, 2.0315)`, after scaling `X` by its Frobenius norm (which
  bounds the spectral norm by 1). These coefficients trade exactness for speed: they do not
  converge to 1 but push every singular value that is not tiny into a band of about
  `[0.68, 1.21]` (the polynomial's attracting interval), which is all Muon needs. The
  iteration works on the wide orientation (`rows <= cols`, transposing if needed) so that
  `A` is the smaller Gram matrix. It runs in float32 by default; `ns_dtype="bfloat16"` is the
  usual faster choice on GPUs.
- The orthogonalised update of a `rows × cols` matrix is scaled by `max(1, rows/cols)^0.5`
  (as in the common implementation), so tall matrices (e.g. an MLP's up projection,
  `[4d, d]`) take proportionally larger steps. Rank > 2 tensors are treated as
  `[shape[0], prod(rest)]`.
- Weight decay is decoupled (`p ← p·(1 - lr·wd)`), applied before the update, default 0.

Today's nanochat (and modded-nanogpt) changed most of these; each change is a setting, off by
default, so the classic Muon above stays what `optimizer=muon` means unless a config selects:

- `momentum_form="ema"`: `buf ← lerp(buf, g, 1-μ)`, Nesterov `lerp(g, buf, μ)` (with a
  momentum that changes over the run, the two forms differ by more than a constant factor);
- `orthogonalizer="polar_express"` and `equilibrate`, `renormalize`, `normuon_beta2`
  (`orthogonalize.py`: Polar Express, MuonEq, Muon+, NorMuon);
- `cautious_weight_decay`: decay only where the update and the weight agree in sign
  (`p ← p - lr'·(o + wd·p·[o·p ≥ 0])`, `lr'` the rate scaled for the shape, as nanochat);
- the momentum and weight decay schedules are applied by `optim.schedule_muon` per step.

Muon is for hidden matrices only: embeddings, the output head, and 1-D or scalar
parameters (gains, biases) go to AdamW. `hybrid_param_groups` does that routing by
parameter path and `make_optimizers` builds the two optimizers. Everything is deterministic:
no randomness, and the same operations in the same order on every step.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import torch
from torch import nn

from pytyr.train.orthogonalize import (
    NS_COEFFS,
    equilibrate_rows,
    newton_schulz,
    normuon,
    normuon_axis,
    polar_express,
    renormalize,
)

NS_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float64": torch.float64}
ORTHOGONALIZERS = ("newton_schulz", "polar_express")
MOMENTUM_FORMS = ("heavy_ball", "ema")
# Parameter path segments that name the embeddings and the output head (AdamW, not Muon).
DEFAULT_EMBEDDING_NAMES = ("wte", "wpe")
DEFAULT_HEAD_NAMES = ("lm_head",)
__all__ = ["Muon", "NS_COEFFS", "hybrid_param_groups", "make_optimizers", "newton_schulz"]


class Muon(torch.optim.Optimizer):
    """Momentum SGD with orthogonalised updates, for parameters of rank >= 2.

    Per step and parameter `p` with gradient `g` (see the module doc for the choices):
    the momentum `u` (heavy ball or EMA, Nesterov or not); `o` = `u` row-equilibrated
    (`equilibrate`), orthogonalised (`orthogonalizer`), renormalised (`renormalize`) and
    rescaled per neuron (`normuon_beta2`); with `lr' = lr · max(1, rows/cols)^0.5`,
    `p ← p - lr'·(o + wd·p·[o·p ≥ 0])` (`cautious_weight_decay`) or
    `p ← p (1 - lr wd) - lr' · o`.
    State per parameter: `momentum_buffer`, and with NorMuon `second_momentum_buffer`.
    """

    def __init__(self, params: Iterable[Any], lr: float = 0.02, momentum: float = 0.95,
                 nesterov: bool = True, ns_steps: int = 5, weight_decay: float = 0.0,
                 ns_dtype: str = "float32", orthogonalizer: str = "newton_schulz",
                 momentum_form: str = "heavy_ball", normuon_beta2: float | None = None,
                 equilibrate: bool = False, renormalize: bool = False,
                 cautious_weight_decay: bool = False):
        if not (isinstance(lr, (int, float)) and lr > 0):
            raise ValueError(f"Muon: lr must be positive, got {lr!r}")
        if not (0.0 <= momentum < 1.0):
            raise ValueError(f"Muon: momentum must be in [0, 1), got {momentum!r}")
        if not (isinstance(ns_steps, int) and ns_steps >= 1):
            raise ValueError(f"Muon: ns_steps must be a positive integer, got {ns_steps!r}")
        if not weight_decay >= 0.0:
            raise ValueError(f"Muon: weight_decay must be >= 0, got {weight_decay!r}")
        if ns_dtype not in NS_DTYPES:
            raise ValueError(f"Muon: ns_dtype must be one of {', '.join(NS_DTYPES)}, got {ns_dtype!r}")
        if orthogonalizer not in ORTHOGONALIZERS:
            raise ValueError(f"Muon: orthogonalizer must be one of {', '.join(ORTHOGONALIZERS)}, "
                             f"got {orthogonalizer!r}")
        if orthogonalizer == "polar_express" and ns_steps > 5:
            raise ValueError(f"Muon: polar_express has coefficients for at most 5 steps, "
                             f"got ns_steps {ns_steps}")
        if momentum_form not in MOMENTUM_FORMS:
            raise ValueError(f"Muon: momentum_form must be one of {', '.join(MOMENTUM_FORMS)}, "
                             f"got {momentum_form!r}")
        if normuon_beta2 is not None and not 0.0 <= normuon_beta2 < 1.0:
            raise ValueError(f"Muon: normuon_beta2 must be in [0, 1), got {normuon_beta2!r}")
        defaults = dict(lr=lr, momentum=momentum, nesterov=nesterov, ns_steps=ns_steps,
                        weight_decay=weight_decay, ns_dtype=ns_dtype,
                        orthogonalizer=orthogonalizer, momentum_form=momentum_form,
                        normuon_beta2=normuon_beta2, equilibrate=equilibrate,
                        renormalize=renormalize, cautious_weight_decay=cautious_weight_decay)
        super().__init__(params, defaults)
        for group in self.param_groups:
            for p in group["params"]:
                if p.ndim < 2:
                    raise ValueError(f"Muon: parameters must have rank >= 2 (matrices); got shape "
                                     f"{list(p.shape)}: give vectors and scalars to AdamW")

    def _momentum(self, group: dict[str, Any], p: torch.Tensor) -> torch.Tensor:
        """The update direction before orthogonalisation; updates the momentum buffer."""
        g, mu = p.grad, group["momentum"]
        state = self.state[p]
        if "momentum_buffer" not in state:
            state["momentum_buffer"] = torch.zeros_like(p)
        buf = state["momentum_buffer"]
        if group["momentum_form"] == "ema":
            buf.lerp_(g, 1 - mu)
            return g.lerp(buf, mu) if group["nesterov"] else buf.clone()
        buf.mul_(mu).add_(g)
        return g.add(buf, alpha=mu) if group["nesterov"] else buf

    def _direction(self, group: dict[str, Any], p: torch.Tensor,
                   matrix: torch.Tensor) -> torch.Tensor:
        """The orthogonalised, rescaled update of the momentum `matrix` (the whole matrix)."""
        dtype = NS_DTYPES[group["ns_dtype"]]
        x = equilibrate_rows(matrix.float()).to(matrix.dtype) if group["equilibrate"] \
            else matrix
        ortho = (polar_express if group["orthogonalizer"] == "polar_express"
                 else newton_schulz)
        o = ortho(x, group["ns_steps"], dtype=dtype)
        if group["renormalize"]:
            o = renormalize(o.float()).to(o.dtype)
        beta2 = group["normuon_beta2"]
        if beta2 is not None:
            state = self.state[p]
            if "second_momentum_buffer" not in state:
                shape = list(o.shape)
                shape[normuon_axis(o.shape)] = 1
                state["second_momentum_buffer"] = torch.zeros(shape, dtype=o.dtype,
                                                              device=o.device)
            second = state["second_momentum_buffer"]
            if hasattr(second, "full_tensor"):  # resharded on a resume: it is the whole
                second = state["second_momentum_buffer"] = second.full_tensor()  # matrix's
            o = normuon(o, second, beta2)
        return o

    @torch.no_grad()
    def step(self, closure=None):  # type: ignore[override]
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            lr, wd = group["lr"], group["weight_decay"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                update = self._momentum(group, p)
                # A parameter sharded by FSDP2 (a DTensor): orthogonalise the whole matrix,
                # the same on every rank, and keep this rank's shard.
                whole = update.full_tensor() if hasattr(update, "full_tensor") else update
                matrix = whole.reshape(whole.size(0), -1)
                ortho = self._direction(group, p, matrix).view_as(whole)
                if whole is not update:
                    from torch.distributed.tensor import distribute_tensor

                    ortho = distribute_tensor(ortho, p.device_mesh, p.placements,
                                              src_data_rank=None)
                rows, cols = matrix.shape
                scaled = lr * max(1.0, rows / cols) ** 0.5
                if group["cautious_weight_decay"]:
                    agree = (ortho * p) >= 0
                    p.sub_(scaled * ortho + (scaled * wd) * p * agree)
                    continue
                if wd:
                    p.mul_(1.0 - lr * wd)
                p.add_(ortho, alpha=-scaled)
        return loss


def path_matches(path: str, names: Sequence[str]) -> bool:
    """True if one of the dot-separated segments of `path` is in `names`
    (`wte`, `transformer.wte.weight`; not `wte_gain`)."""
    return any(seg in names for seg in path.split("."))


def hybrid_param_groups(module: nn.Module, *, embedding_names: Sequence[str] = DEFAULT_EMBEDDING_NAMES,
                        head_names: Sequence[str] = DEFAULT_HEAD_NAMES, muon_lr: float = 0.02,
                        embedding_lr: float = 0.2, head_lr: float = 0.004, scalar_lr: float = 0.02,
                        muon_weight_decay: float = 0.0, embedding_weight_decay: float = 0.0,
                        head_weight_decay: float = 0.0, scalar_weight_decay: float = 0.0,
                        adamw_groups: Sequence[Mapping[str, Any]] = (),
                        ) -> dict[str, list[dict[str, Any]]]:
    """Route `module`'s trainable parameters by path: `{"muon": [...], "adamw": [...]}`.

    - `adamw`, each of `adamw_groups` first, in order: a mapping with `name`, `names` (path
      segments), `lr`, `weight_decay` and optionally `betas`; a parameter with a segment in
      its `names` goes there whatever its rank (nanochat's groups: head, embedding, value
      embeddings, residual scalars, x0 scalars, smear and backout).
    - `muon`: parameters of rank >= 2 whose path has no segment in `embedding_names` or
      `head_names`.
    - `adamw`, group `embeddings`: parameters whose path has a segment in `embedding_names`
      (token and position embeddings), whatever their rank.
    - `adamw`, group `head`: the same for `head_names` (the untied output head), which nanochat
      trains with a much smaller rate than the embeddings.
    - `adamw`, group `scalars`: the other parameters of rank < 2 (gains, biases, scalars).

    A path segment is a dot-separated part (`wte` matches `wte` and `transformer.wte.weight`,
    not `wte_gain`); `embedding_names` is tried before `head_names`.

    Each group dict carries `name` and `paths` (the parameter paths, in the module's order)
    beside `params`, `lr` and `weight_decay` (and `betas` where given); empty groups are left
    out. A parameter shared under two paths appears once (under its first path, as
    `named_parameters` gives it).
    """
    embeds, heads = tuple(embedding_names), tuple(head_names)
    own = [dict(g) for g in adamw_groups]
    routed: dict[str, list[tuple[str, nn.Parameter]]] = {
        "matrices": [], "embeddings": [], "head": [], "scalars": [],
        **{f"own:{i}": [] for i in range(len(own))}}
    for path, p in module.named_parameters():
        if not p.requires_grad:
            continue
        mine = next((i for i, g in enumerate(own) if path_matches(path, tuple(g["names"]))),
                    None)
        if mine is not None:
            routed[f"own:{mine}"].append((path, p))
        elif path_matches(path, embeds):
            routed["embeddings"].append((path, p))
        elif path_matches(path, heads):
            routed["head"].append((path, p))
        elif p.ndim >= 2:
            routed["matrices"].append((path, p))
        else:
            routed["scalars"].append((path, p))

    def group(key: str, name: str, lr: float, wd: float, **extra: Any) -> list[dict[str, Any]]:
        items = routed[key]
        if not items:
            return []
        return [{"name": name, "paths": [n for n, _ in items], "params": [p for _, p in items],
                 "lr": lr, "weight_decay": wd, **extra}]

    mine = [g for i, o in enumerate(own) for g in group(
        f"own:{i}", o["name"], o["lr"], o["weight_decay"],
        **({"betas": tuple(o["betas"])} if o.get("betas") is not None else {}))]
    return {
        "muon": group("matrices", "matrices", muon_lr, muon_weight_decay),
        "adamw": mine + group("embeddings", "embeddings", embedding_lr, embedding_weight_decay)
        + group("head", "head", head_lr, head_weight_decay)
        + group("scalars", "scalars", scalar_lr, scalar_weight_decay),
    }


def make_optimizers(module: nn.Module, *, embedding_names: Sequence[str] = DEFAULT_EMBEDDING_NAMES,
                    head_names: Sequence[str] = DEFAULT_HEAD_NAMES, muon_lr: float = 0.02,
                    momentum: float = 0.95, nesterov: bool = True, ns_steps: int = 5,
                    ns_dtype: str = "float32", muon_weight_decay: float = 0.0,
                    embedding_lr: float = 0.2, head_lr: float = 0.004, scalar_lr: float = 0.02,
                    embedding_weight_decay: float = 0.0, head_weight_decay: float = 0.0,
                    scalar_weight_decay: float = 0.0, betas: tuple[float, float] = (0.8, 0.95),
                    eps: float = 1e-10, adamw_groups: Sequence[Mapping[str, Any]] = (),
                    **variant: Any) -> list[torch.optim.Optimizer]:
    """`[Muon, AdamW]` over `hybrid_param_groups(module, ...)` (an optimizer whose groups
    would be empty is left out). Defaults follow nanochat (Muon lr 0.02, momentum 0.95;
    AdamW betas (0.8, 0.95), embeddings 0.2, head 0.004); the rates are per group, so an lr
    schedule scales each optimizer's groups (e.g. one `LambdaLR` per optimizer). `variant`:
    `Muon`'s choices of today's Muon (`orthogonalizer`, `momentum_form`, `normuon_beta2`,
    `equilibrate`, `renormalize`, `cautious_weight_decay`). Step all of them every step."""
    groups = hybrid_param_groups(
        module, embedding_names=embedding_names, head_names=head_names, muon_lr=muon_lr,
        embedding_lr=embedding_lr, head_lr=head_lr, scalar_lr=scalar_lr,
        muon_weight_decay=muon_weight_decay, embedding_weight_decay=embedding_weight_decay,
        head_weight_decay=head_weight_decay, scalar_weight_decay=scalar_weight_decay,
        adamw_groups=adamw_groups)
    opts: list[torch.optim.Optimizer] = []
    if groups["muon"]:
        opts.append(Muon(groups["muon"], lr=muon_lr, momentum=momentum, nesterov=nesterov,
                         ns_steps=ns_steps, ns_dtype=ns_dtype, **variant))
    if groups["adamw"]:
        opts.append(torch.optim.AdamW(groups["adamw"], lr=embedding_lr, betas=betas, eps=eps))
    return opts
