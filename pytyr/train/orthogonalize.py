"""What Muon does to a momentum matrix before it steps: the orthogonalisations and the
rescalings around them, each a pure function of tensors (a matrix or a batch of them).

- `newton_schulz`: Keller Jordan's quintic Newton-Schulz iteration with the fixed
  coefficients `(3.4445, -4.7750, 2.0315)`: singular values pushed into about `[0.68, 1.21]`.
- `polar_express`: the Polar Express sign method (Amsel, Persson, Musco, Gower 2025,
  arXiv:2505.16932), a different quintic per step whose coefficients were fitted for 5 steps
  (safety factor 2e-2, cushion 2), the input scaled to a Frobenius norm of just under 1; it
  converges closer to the polar factor `U Vᵀ` in as many steps (nanochat's choice today).
- `equilibrate_rows` (MuonEq, arXiv:2603.28254): every row rescaled to the mean row norm before
  the orthogonalisation, so its spectrum is better conditioned.
- `renormalize` (Muon+, arXiv:2602.21545): the result's Frobenius norm set to `√min(m, n)`,
  that of an exactly semi-orthogonal matrix.
- `normuon` (NorMuon, arXiv:2510.05491): a second moment per neuron (per row of a tall or
  square matrix, per column of a wide one), an exponential average of the mean squared update
  along the other axis; the update is divided by its root and rescaled to keep its Frobenius
  norm, so neurons whose updates run large step less.

Each works on the wide orientation (`rows <= cols`, transposed otherwise), so that the Gram
matrix is the smaller one; a tall matrix's result is transposed back.
"""
from __future__ import annotations

import torch

NS_COEFFS = (3.4445, -4.7750, 2.0315)
# Polar Express's (a, b, c) of each step, for 5 steps (arXiv:2505.16932, as nanochat uses them).
POLAR_EXPRESS_COEFFS = (
    (8.156554524902461, -22.48329292557795, 15.878769915207462),
    (4.042929935166739, -2.808917465908714, 0.5000178451051316),
    (3.8916678022926607, -2.772484153217685, 0.5060648178503393),
    (3.285753657755655, -2.3681294933425376, 0.46449024233003106),
    (2.3465413258596377, -1.7097828382687081, 0.42323551169305323),
)


def _check(g: torch.Tensor, steps: int, what: str) -> None:
    if g.ndim < 2:
        raise ValueError(f"{what}: expected a matrix, got shape {list(g.shape)}")
    if not (isinstance(steps, int) and steps >= 1):
        raise ValueError(f"{what}: steps must be a positive integer, got {steps!r}")


def _quintic(x: torch.Tensor, coeffs: list[tuple[float, float, float]]) -> torch.Tensor:
    """`x ← a x + (b A + c A²) x`, `A = x xᵀ`, for each (a, b, c), on the wide orientation."""
    tall = x.size(-2) > x.size(-1)
    if tall:
        x = x.mT
    for a, b, c in coeffs:
        gram = x @ x.mT
        x = a * x + (b * gram + c * (gram @ gram)) @ x
    return x.mT if tall else x


def newton_schulz(g: torch.Tensor, steps: int = 5, eps: float = 1e-7,
                  dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """An approximate orthogonal polar factor of the matrix (or batch of matrices) `g`:
    `U S' Vᵀ` for `g = U S Vᵀ`, with the singular values `S'` in about `[0.68, 1.21]` after
    5 steps (those of `g` below ~1e-2 of its Frobenius norm may need more steps).
    Returned in `g`'s dtype."""
    _check(g, steps, "newton_schulz")
    x = g.to(dtype)
    x = x / (x.norm(dim=(-2, -1), keepdim=True) + eps)
    return _quintic(x, [NS_COEFFS] * steps).to(g.dtype)


def polar_express(g: torch.Tensor, steps: int = 5, dtype: torch.dtype = torch.float32
                  ) -> torch.Tensor:
    """The Polar Express approximation of `g`'s polar factor after `steps` (at most 5) steps:
    `g` is scaled by `1 / (1.01 ‖g‖_F + 1e-6)`, then step `i` applies the quintic of
    coefficients `POLAR_EXPRESS_COEFFS[i]`. Returned in `g`'s dtype."""
    _check(g, steps, "polar_express")
    if steps > len(POLAR_EXPRESS_COEFFS):
        raise ValueError(f"polar_express: its coefficients are for at most "
                         f"{len(POLAR_EXPRESS_COEFFS)} steps, got {steps}")
    x = g.to(dtype)
    x = x / (x.norm(dim=(-2, -1), keepdim=True) * 1.01 + 1e-6)
    return _quintic(x, list(POLAR_EXPRESS_COEFFS[:steps])).to(g.dtype)


def equilibrate_rows(g: torch.Tensor) -> torch.Tensor:
    """Every row scaled to the root mean square row norm, `‖g‖_F / √rows` (MuonEq)."""
    target = g.norm(dim=(-2, -1), keepdim=True) / g.size(-2) ** 0.5
    return g * (target / g.norm(dim=-1, keepdim=True).clamp_min(1e-6))


def renormalize(g: torch.Tensor) -> torch.Tensor:
    """`g` scaled to the Frobenius norm `√min(rows, cols)` (Muon+)."""
    target = min(g.size(-2), g.size(-1)) ** 0.5
    return g * (target / g.norm(dim=(-2, -1), keepdim=True).clamp_min(1e-6))


def normuon_axis(shape: torch.Size | tuple[int, ...]) -> int:
    """The axis NorMuon averages over: the columns (-1) of a tall or square matrix (a second
    moment per row), the rows (-2) of a wide one (one per column)."""
    return -1 if shape[-2] >= shape[-1] else -2


def normuon(g: torch.Tensor, second: torch.Tensor, beta2: float) -> torch.Tensor:
    """`g` rescaled per neuron by NorMuon; `second` (the mean square per neuron, shaped as
    `g` with its `normuon_axis` of size 1) is updated in place: `second ← lerp(second,
    mean(g², axis), 1 - beta2)`. The result is `g / √second`, scaled back to `g`'s Frobenius
    norm."""
    axis = normuon_axis(g.shape)
    n = g.size(axis)
    mean_sq = g.square().mean(dim=axis, keepdim=True)
    norm = (mean_sq.sum(dim=(-2, -1), keepdim=True) * n).sqrt()
    second.lerp_(mean_sq.to(second.dtype), 1 - beta2)
    step = second.clamp_min(1e-10).rsqrt()
    new_norm = ((mean_sq * n) * step.square()).sum(dim=(-2, -1), keepdim=True).sqrt()
    return g * (step * (norm / new_norm.clamp_min(1e-10))).to(g.dtype)
