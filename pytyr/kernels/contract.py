"""Kernel contracts: where a kernel may be used, and how its parity with PyTorch is judged.

Every kernel module declares one `Contract` beside its kernel: the shape domain (named dims,
each a `Dim`), the dtypes, the options (flags such as `causal`), how to build inputs for a
point of the domain, the plain-PyTorch reference with the kernel's own signature, and the
tolerance per dtype. The executor asks `Contract.refusal` before it routes an op to the
kernel; the parity tests and the GPU suite are generated from the same object
(`pytyr.kernels.parity`), so a domain edge that the contract declares is also tested.
"""
from __future__ import annotations

import math
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

from pytyr.errors import KernelError

DTYPE_NAMES: dict[torch.dtype, str] = {torch.float32: "f32", torch.bfloat16: "bf16",
                                       torch.float64: "f64", torch.int64: "i64"}


@dataclass(frozen=True)
class Dim:
    """The admitted values of one dimension: `lo..hi` in steps of `multiple`, or exactly
    `values` when given. `block` is the kernel's tile along this dim, around which the
    generated fixtures take their edge values (a mask bug shows at block ± 1)."""

    lo: int = 1
    hi: int = 2**31 - 1
    multiple: int = 1
    values: tuple[int, ...] = ()
    block: int | None = None

    def admits(self, n: int) -> bool:
        if self.values:
            return n in self.values
        return self.lo <= n <= self.hi and n % self.multiple == 0

    def describe(self) -> str:
        if self.values:
            return "one of " + ", ".join(map(str, self.values))
        text = f"{self.lo}..{self.hi}"
        return text + (f" (a multiple of {self.multiple})" if self.multiple > 1 else "")

    def edges(self, base: int) -> list[int]:
        """Values worth a fixture, none above max(base, lo, 2·block + 1): the smallest admitted,
        each side of the block boundaries, the base itself; for an enumerated dim, every
        value."""
        if self.values:
            return list(self.values)
        cap = max(base, self.lo, 2 * self.block + 1 if self.block else 0)
        picks = {self.lo, base}
        if self.block:
            for b in (self.block, 2 * self.block):
                picks.update({b - self.multiple, b, b + self.multiple})
        return sorted(v for v in picks if v <= cap and self.admits(v))

    def draw(self, rng: random.Random, base: int) -> int:
        """A random admitted value up to 2·base (log-uniform, so small sizes are common)."""
        if self.values:
            return rng.choice(self.values)
        m = self.multiple
        first = -(-self.lo // m) * m  # the smallest admitted value
        lo = max(first, 1)
        top = max(lo, min(self.hi, 2 * base))
        n = int(round(math.exp(rng.uniform(math.log(lo), math.log(top)))))
        n = max(first, n - n % m)
        return n if self.admits(n) else first


@dataclass(frozen=True)
class Tolerance:
    """FlashAttention's rule: with `ref` computed in higher precision and `naive` the
    reference run in the kernel's own dtype, require
    `max|kernel − ref| ≤ mult · max|naive − ref| + ulps · eps(dtype) · max|ref|`,
    for each output and each gradient. `ulps` is the rounding noise allowed on top."""

    mult: float = 2.0
    ulps: float = 4.0

    def bound(self, naive_err: float, ref_max: float, dtype: torch.dtype) -> float:
        eps = torch.finfo(dtype).eps if dtype.is_floating_point else 0.0
        return self.mult * naive_err + self.ulps * eps * ref_max


@dataclass(frozen=True)
class Case:
    """One point of a contract's domain: dims, dtype, options and the seed of its inputs."""

    dims: Mapping[str, int]
    dtype: torch.dtype
    options: Mapping[str, Any]
    seed: int
    kind: str = "edge"  # "edge" (a fixture) or "random" (a randomized trial)

    @property
    def id(self) -> str:
        dims = ",".join(f"{k}={v}" for k, v in self.dims.items())
        opts = "".join(f",{k}={v}" for k, v in self.options.items())
        return f"{dims},{DTYPE_NAMES[self.dtype]}{opts},seed={self.seed}"


Inputs = Callable[[Case, torch.Generator, torch.device], list[Any]]


@dataclass(frozen=True)
class Contract:
    """A kernel's contract. `kernel(*args)` and `reference(*args)` take the same arguments,
    built by `inputs(case, generator, device)`; the args at `differentiable` are the float
    tensors gradients are checked for. `options` are the values of the kernel's flags that
    the fixtures cover (every value is admitted: the domain is the dims and dtypes).
    `sizes` gives the base value of each dim at the interpreter's scale (`"small"`) and at
    a GPU's (`"real"`)."""

    name: str
    kernel: Callable[..., Any]
    reference: Callable[..., Any]
    dims: Mapping[str, Dim]
    dtypes: tuple[torch.dtype, ...]
    inputs: Inputs
    sizes: Mapping[str, Mapping[str, int]]
    tolerance: Mapping[torch.dtype, Tolerance]
    options: Mapping[str, tuple[Any, ...]] = field(default_factory=dict)
    differentiable: tuple[int, ...] = ()
    doc: str = ""

    def refusal(self, dims: Mapping[str, int], dtype: torch.dtype) -> str | None:
        """None inside the contract, else the reason, naming the dim or dtype and what is
        admitted (shown by `explain` and raised by the kernels as a `KernelError`)."""
        if dtype not in self.dtypes:
            names = ", ".join(DTYPE_NAMES[d] for d in self.dtypes)
            return f"dtype {DTYPE_NAMES.get(dtype, dtype)} is not one of {names}"
        for name, n in dims.items():
            if not self.dims[name].admits(n):
                return f"{name}={n} is outside {self.dims[name].describe()}"
        return None

    def require(self, dims: Mapping[str, int], dtype: torch.dtype) -> None:
        reason = self.refusal(dims, dtype)
        if reason is not None:
            raise KernelError(f"kernel {self.name!r} called outside its contract: {reason}")

    def _option_sets(self) -> list[dict[str, Any]]:
        sets: list[dict[str, Any]] = [{}]
        for name, values in self.options.items():
            sets = [{**s, name: v} for s in sets for v in values]
        return sets

    def fixtures(self, scale: str, seed: int = 0) -> list[Case]:
        """The deterministic cases: the base point in every dtype and option set, then each
        dim moved alone to each of its edges, in every option set, the dtypes taken in turn
        so that each option meets each dtype across the edges."""
        base = dict(self.sizes[scale])
        opts = self._option_sets()
        cases = [Case(base, dt, o, seed) for dt in self.dtypes for o in opts]
        edges = [(name, v) for name, dim in self.dims.items() for v in dim.edges(base[name])
                 if v != base[name]]
        for j, (name, v) in enumerate(edges):
            for i, o in enumerate(opts):
                dt = self.dtypes[(i + j) % len(self.dtypes)]
                cases.append(Case({**base, name: v}, dt, o, seed + len(cases)))
        return cases

    def trials(self, scale: str, n: int, seed: int = 0) -> list[Case]:
        """`n` randomized cases drawn from the domain up to twice the base sizes, seeded."""
        rng = random.Random(f"{self.name}:{seed}")
        base = self.sizes[scale]
        opts = self._option_sets()
        return [Case({k: d.draw(rng, base[k]) for k, d in self.dims.items()},
                     rng.choice(self.dtypes), rng.choice(opts), 10**6 + 1000 * seed + i,
                     "random") for i in range(n)]
