"""Which graph nodes run on a kernel: the executor's side of `pytyr.kernels`.

A node whose op has a kernel (`ROUTES`) and whose shapes and dtype lie inside that kernel's
contract is lowered to a call of a dispatch function below instead of the op's own lowering
in `ops.py`. The dispatch checks at each call what the graph cannot know, the device: a
Triton kernel runs on CUDA; anywhere else the dispatch runs the same torch calls as the op's
lowering, so a CPU run computes bit for bit what it did without Triton kernels. The C
kernel (`CPU_ROUTES`: causal attention, `pytyr/kernels/attention_cpu.py`) is the
other way round: it runs on CPU tensors (values within float rounding of torch's) and leave
CUDA tensors to torch. Other nodes are untouched.

Mode (`build_module(graph, kernels=...)`, else the environment variable `TYR_KERNELS`):
  auto       Triton kernels on CUDA inside their contracts, the C kernel on CPU (the
             default; on a machine without CUDA Triton is not even imported)
  off        never: every node keeps its torch lowering
  interpret  also on CPU tensors, through Triton's interpreter (`TRITON_INTERPRET=1`, set
             before the first kernel is imported): how the tests run the routed graph on CPU

`explain(graph)` lists the choice made for each node that has a kernel, with the reason.
"""
from __future__ import annotations

import logging
import math
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import fx

from pytyr.errors import KernelError
from pytyr.exec.ops import Lower, Lowering, rotary_tables
from pytyr.ir.graph import Graph, Node, TensorType

log = logging.getLogger("pytyr.kernels")

MODES = ("auto", "off", "interpret")
ENV = "TYR_KERNELS"
_DTYPES = (torch.float32, torch.bfloat16)  # every routed kernel's contract admits these
_IR_DTYPES = {"f32": torch.float32}


def kernel_mode(value: str | None = None) -> str:
    """The mode asked for: `value`, else `$TYR_KERNELS`, else "auto"."""
    mode = (value if value is not None else os.environ.get(ENV) or "auto").strip().lower()
    mode = {"0": "off", "1": "auto", "false": "off", "true": "auto"}.get(mode, mode)
    if mode not in MODES:
        raise KernelError(f"kernel mode {mode!r} (from {'the argument' if value else ENV}) "
                          f"is not one of {', '.join(MODES)}")
    return mode


# --- dispatch: called by the generated forward; the torch branch is the op's own lowering ---

def _here(t: torch.Tensor, anywhere: bool) -> bool:
    return (t.is_cuda or anywhere) and t.dtype in _DTYPES


def layer_norm(x, w, b, eps: float, anywhere: bool):
    # x: [..., n], w, b: [n] -> [..., n]
    if _here(x, anywhere):
        from pytyr.kernels.norms import layer_norm as kernel
        return kernel(x, w, b, eps)
    return F.layer_norm(x, (x.shape[-1],), w, b, eps)


def rms_norm(x, eps: float, anywhere: bool):
    # x: [..., n] -> [..., n], no gain
    if _here(x, anywhere):
        from pytyr.kernels.norms import rms_norm as kernel
        return kernel(x, None, eps)
    return F.rms_norm(x, (x.shape[-1],), eps=eps)


def rotary(x, base: float, anywhere: bool):
    # x: [b, h, t, 2k] -> [b, h, t, 2k]; the arithmetic of ops._rotary, op for op
    cos, sin = rotary_tables(x, base)
    if _here(x, anywhere):
        from pytyr.kernels.rotary import rotary as kernel
        return kernel(x, cos, sin)
    x1, x2 = torch.split(x, x.shape[-1] // 2, -1)
    return torch.cat([x1 * cos + x2 * sin, x2 * cos - x1 * sin], -1)


def causal_attention(q, k, v, p: float, training: bool, anywhere: bool):
    # q, k, v: [b, h, t, d] -> [b, h, t, d]; the kernel has no dropout: only when inactive
    drop = p * training
    if drop == 0.0 and _here(q, anywhere):
        from pytyr.kernels.attention import flash_attention as kernel
        return kernel(q, k, v, causal=True)
    return F.scaled_dot_product_attention(q, k, v, dropout_p=drop, is_causal=True)


def causal_attention_cpu(q, k, v, p: float, training: bool, anywhere: bool):
    # q, k, v: [b, h, t, d] -> [b, h, t, d]; the C kernel has no dropout: only when inactive
    drop = p * training
    if drop == 0.0:
        from pytyr.kernels.attention_cpu import attention as kernel
        return kernel(q, k, v)
    return F.scaled_dot_product_attention(q, k, v, dropout_p=drop, is_causal=True)


def cross_entropy(logits, target, anywhere: bool):
    # logits: [n, v] (or [b, t, v]), target: i64[n] (or [b, t]) -> [] mean over positions
    if logits.dim() == 3:
        logits, target = logits.reshape(-1, logits.shape[-1]), target.reshape(-1)
    if _here(logits, anywhere):
        from pytyr.kernels.cross_entropy import cross_entropy as kernel
        return kernel(logits, target)
    return F.cross_entropy(logits, target)


# --- routes: op -> (contract, the contract's dims read from the node, the dispatch call) ---

def _emit(fn: Callable[..., Any], attr_names: tuple[str, ...], training: bool = False):
    def lower(cx: Lower, args: list[fx.Node], attrs: dict, anywhere: bool) -> fx.Node:
        extra = [float(attrs[a]) for a in attr_names] + ([cx.training] if training else [])
        return cx.g.call_function(fn, (*args, *extra, anywhere))
    return lower


def _rows_n(ts: list[TensorType]) -> dict[str, int]:
    *lead, n = ts[0].shape
    return {"rows": math.prod(lead), "n": n}


def _bhtd(ts: list[TensorType]) -> dict[str, int]:
    b, h, t, d = ts[0].shape
    return {"b": b, "h": h, "t": t, "d": d}


def _rotary_dims(ts: list[TensorType]) -> dict[str, int]:
    b, h, t, d = ts[0].shape
    return {"b": b, "h": h, "t": t, "half": d // 2}


def _ce_dims(ts: list[TensorType]) -> dict[str, int]:
    *lead, v = ts[0].shape
    return {"rows": math.prod(lead), "vocab": v}


@dataclass(frozen=True)
class Route:
    contract: str
    dims: Callable[[list[TensorType]], dict[str, int]]
    emit: Callable[[Lower, list[fx.Node], dict, bool], fx.Node]
    condition: str = ""  # a run-time condition explain mentions
    refusal: Callable[[list[TensorType]], str | None] | None = None  # a C kernel's shape rule


_LN = Route("layer_norm", _rows_n, _emit(layer_norm, ("eps",)))
_RMS = Route("rms_norm", _rows_n, _emit(rms_norm, ("eps",)))
_CE = Route("cross_entropy", _ce_dims, _emit(cross_entropy, ()))
ROUTES: dict[str, Route] = {
    "layer_norm": _LN, "layer_norm3": _LN, "rms_norm3": _RMS, "rms_norm4": _RMS,
    "rotary": Route("rotary", _rotary_dims, _emit(rotary, ("base",))),
    "causal_attention": Route("flash_attention", _bhtd, _emit(causal_attention, ("p",), True),
                              "while dropout is inactive"),
    "cross_entropy": _CE, "cross_entropy2": _CE,
}


def _attention_refusal(ts: list[TensorType]) -> str | None:
    from pytyr.kernels.attention_cpu import static_refusal
    _, _, t, d = ts[0].shape
    return static_refusal(t, d)


_ON_TORCHS_THREADS = ("on float32 CPU tensors, on torch's threads (at one thread or a small "
                      "problem where torch runs another OpenMP)")
# C kernels for the CPU (pytyr/kernels/native.py): used where no Triton route is taken
CPU_ROUTES: dict[str, Route] = {
    "causal_attention": Route("attention_cpu", _bhtd,
                              _emit(causal_attention_cpu, ("p",), True),
                              _ON_TORCHS_THREADS + ", while dropout is inactive",
                              _attention_refusal),
}


@dataclass(frozen=True)
class Choice:
    """The decision for one node: the kernel it may run (None: its torch lowering) and why."""

    node: Node
    kernel: str | None
    reason: str
    route: Route | None = None  # how the node is lowered when `kernel` is set

    def line(self) -> str:
        where = f" at {self.node.loc}" if self.node.loc else ""
        head = f"{self.node.name} {self.node.op}{where}"
        if self.kernel:
            return f"{head}: kernel {self.kernel} ({self.reason})"
        return f"{head}: torch ({self.reason})"


def _refusal(route: Route, node: Node, types: list[TensorType]) -> str | None:
    from pytyr.kernels import contracts

    dtype = _IR_DTYPES.get(types[0].dtype)
    if dtype is None:
        return f"dtype {types[0].dtype} has no kernel"
    return contracts()[route.contract].refusal(route.dims(types), dtype)


def _cpu_choice(route: Route, node: Node, types: list[TensorType]) -> Choice:
    """A C kernel's choice: the graph settles dtype and shapes; the device and torch's threads
    (`route.condition`) are checked at each call. Nothing is built here: the first call
    builds or loads the library (a failed build then runs torch's op)."""
    from pytyr.kernels.native import static_refusal

    if types[0].dtype != "f32":
        return Choice(node, None, f"dtype {types[0].dtype} has no kernel")
    refused = route.refusal(types) if route.refusal else None
    if refused:
        return Choice(node, None, f"outside the {route.contract} contract: {refused}")
    missing = static_refusal()
    if missing:
        return Choice(node, None, missing)
    return Choice(node, route.contract, route.condition, route)


def choose(node: Node, types: list[TensorType], mode: str, device: str) -> Choice | None:
    """The choice for `node` in `mode` for a module run on `device` ("cuda" or "cpu"), or
    None if its op has no kernel. A Triton route is taken on CUDA (or interpreted); a C
    route elsewhere."""
    route, cpu = ROUTES.get(node.op), CPU_ROUTES.get(node.op)
    if route is None and cpu is None:
        return None
    if mode == "off":
        return Choice(node, None, f"kernels off ({ENV}=off or kernels='off')")
    if route is not None and (mode == "interpret" or device == "cuda"):
        return _triton_choice(route, node, types)
    if cpu is not None:
        return _cpu_choice(cpu, node, types)
    return Choice(node, None, f"kernels run on CUDA only, not on {device}")


def _triton_choice(route: Route, node: Node, types: list[TensorType]) -> Choice:
    from pytyr.kernels import unavailable

    missing = unavailable()
    if missing:
        return Choice(node, None, missing)
    reason = _refusal(route, node, types)
    if reason:
        return Choice(node, None, f"outside the {route.contract} contract: {reason}")
    cond = f", {route.condition}" if route.condition else ""
    return Choice(node, route.contract, f"inside its contract{cond}", route)


class KernelRouter:
    """Used by the lowering: routes each node in its turn, then logs one summary line."""

    def __init__(self, mode: str | None = None):
        self.mode = kernel_mode(mode)
        self.device = _default_device()
        if self.mode == "interpret":
            from pytyr.kernels import unavailable
            missing = unavailable()
            if missing:
                raise KernelError(f"kernel mode 'interpret': {missing}")
            from pytyr.kernels.runtime import INTERPRET
            if not INTERPRET:
                raise KernelError("kernel mode 'interpret' needs TRITON_INTERPRET=1 in the "
                                  "environment before pytyr's kernels are first imported")
        self.choices: list[Choice] = []

    def lowering(self, node: Node, types: list[TensorType]) -> Lowering | None:
        """A lowering that calls the node's kernel dispatch, or None to keep the op's own."""
        choice = choose(node, types, self.mode, self.device)
        if choice is None:
            return None
        self.choices.append(choice)
        log.debug("%s", choice.line())
        if choice.kernel is None:
            return None
        assert choice.route is not None
        emit, anywhere = choice.route.emit, self.mode == "interpret"
        return lambda cx, args, attrs, types, out: emit(cx, args, attrs, anywhere)

    def log_summary(self, model: str) -> None:
        if not self.choices:
            return
        routed = [c for c in self.choices if c.kernel]
        names = sorted({c.kernel for c in routed})
        log.info("model %r: %d of %d nodes with a kernel routed to it (mode %s%s)", model,
                 len(routed), len(self.choices), self.mode,
                 f": {', '.join(names)}" if names else f"; {self.choices[0].reason}")


def explain(graph: Graph, mode: str | None = None, device: str | None = None) -> list[Choice]:
    """The choice for each node of `graph` whose op has a kernel, as the lowering would make
    it in `mode` (default: `$TYR_KERNELS` or auto) for `device` (default: cuda if present)."""
    mode = kernel_mode(mode)
    device = device or _default_device()
    types = graph.types()
    out = []
    for node in graph.nodes:
        choice = choose(node, [types[r] for r in node.inputs], mode, device)
        if choice is not None:
            out.append(choice)
    return out


def explain_text(graph: Graph, mode: str | None = None, device: str | None = None) -> str:
    """`explain` as the lines `tyr graph --explain` prints, with a closing count."""
    choices = explain(graph, mode, device)
    routed = sum(1 for c in choices if c.kernel)
    lines = [c.line() for c in choices]
    lines.append(f"{routed} of {len(choices)} nodes with a kernel use it "
                 f"(mode {kernel_mode(mode)}, device {device or _default_device()})")
    return "\n".join(lines)


def _default_device() -> str:
    return "cuda" if torch.cuda.is_available() else "cpu"
