"""Lower a validated graph IR to a PyTorch module.

`build_module(graph)` returns a `TyrModule`: an `nn.Module` whose parameters sit at exactly
the graph's parameter paths (`state_dict()` keys are `blocks.0.attn.w_q`, ...) and whose
`forward(*inputs)` runs a `torch.fx.GraphModule` generated from the nodes. The fx graph is a
pure function of (inputs..., parameters...): parameters are passed to it as arguments rather
than fetched with `get_attr`, so that any path segment a Lean structure can have (`to`,
`eval`, `forward`) is a valid parameter name and the module tree is exactly the path tree.

Input types are checked at the call boundary, the bound of an integer input's type included
(`IT s n`: every value in `[0, n)`, one `aminmax` per integer input), so an id outside its
table is an error naming the input before it reaches an embedding. A node that fails at run
time is located by re-running the graph node by node (only on that error path, so a normal
step pays nothing) and reported as an `ExecError` naming the node, its op and its Lean source
position.
"""
from __future__ import annotations

import hashlib
import math
from typing import Any

import torch
from torch import fx, nn

from pytyr.errors import ExecError
from pytyr.exec.blocks import lower_block, spans
from pytyr.exec.kernels import KernelRouter
from pytyr.exec.ops import OPS, TORCH_DTYPES, Lower
from pytyr.exec.stacks import stacks_as_tensors
from pytyr.ir.graph import Graph, Input, Node, Param

# Attributes a plain nn.Module keeps in its own __dict__ and reassigns later (`training`
# on .train()); a child or parameter of the same name would break those assignments.
_RESERVED = frozenset(vars(nn.Module()))


def describe(node: Node) -> str:
    """`node %3 (linear at MLP.lean:12:5)`: how errors name a node."""
    where = f"{node.op} at {node.loc}" if node.loc else node.op
    return f"node {node.name} ({where})"


def _shape(shape: Any) -> str:
    return str(list(shape))


def init_tensor(param: Param, seed: int) -> torch.Tensor:
    """A fresh tensor for `param`, drawn from its init spec.

    Each parameter gets its own generator, seeded from (seed, path), so its initial value
    depends only on those two: adding a parameter to a model leaves the others unchanged.
    """
    kind = param.init.get("kind")
    shape = tuple(param.shape)
    dtype = TORCH_DTYPES[param.dtype]
    if kind == "checkpoint":
        return _from_checkpoint(param, shape, dtype)
    if kind == "zeros":
        return torch.zeros(shape, dtype=dtype)
    if kind == "ones":
        return torch.ones(shape, dtype=dtype)
    if kind == "fill":
        return torch.full(shape, float(param.init["value"]), dtype=dtype)
    if kind == "ramp":  # first + (last - first) · i / max(n - 1, 1), in float64, row-major
        n = math.prod(shape)
        first, last = float(param.init["first"]), float(param.init["last"])
        i = torch.arange(n, dtype=torch.float64)
        return (first + (last - first) * i / max(n - 1, 1)).to(dtype).reshape(shape)
    digest = hashlib.blake2b(f"{seed}\0{param.path}".encode(), digest_size=8).digest()
    gen = torch.Generator().manual_seed(int.from_bytes(digest, "little") >> 1)
    out = torch.empty(shape, dtype=dtype)
    if kind == "normal":
        return out.normal_(0.0, float(param.init["std"]), generator=gen)
    if kind == "uniform":
        bound = float(param.init["bound"])
        return out.uniform_(-bound, bound, generator=gen)
    if kind == "interval":
        return out.uniform_(float(param.init["lo"]), float(param.init["hi"]), generator=gen)
    raise ExecError(f"parameter {param.path!r}: unknown init kind {kind!r}")


def _from_checkpoint(param: Param, shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
    """The tensor `key` of the safetensors checkpoint `file` (a type provider's parameter)."""
    from pytyr.errors import SafeTensorsError
    from pytyr.safetensors import open_checkpoint

    file, key = param.init["file"], param.init["key"]
    if file.endswith(".schema.json"):
        raise ExecError(f"parameter {param.path!r} comes from the schema snapshot {file}, which "
                        f"holds shapes but no weights; point the type provider at the "
                        f"checkpoint itself to run the model")
    try:
        with open_checkpoint(file) as ck:
            if key not in ck:
                raise ExecError(f"parameter {param.path!r}: {file} has no tensor {key!r}")
            t = ck.tensor(key).to(dtype).clone()
    except SafeTensorsError as err:
        raise ExecError(f"parameter {param.path!r}: {err}") from None
    if tuple(t.shape) != shape:
        raise ExecError(f"parameter {param.path!r}: {file} holds {key!r} with shape "
                        f"{list(t.shape)}, but the model was checked against {list(shape)}; "
                        f"the checkpoint changed since it was checked")
    return t


class _Locator(fx.Interpreter):
    """Runs the fx graph node by node to find which IR node raises."""

    def run_node(self, n: fx.Node) -> Any:
        try:
            return super().run_node(n)
        except Exception as e:
            ir_node = n.meta.get("tyr_node")
            if ir_node is None:
                raise
            raise ExecError(f"{describe(ir_node)} failed: {e}") from e


def _check_bound(spec: Input, x: torch.Tensor) -> None:
    """Every value of the integer input `x` lies in `[0, bound)`; else an ExecError naming the
    input, the first value outside and its index. One reduction (and one device sync) when it
    holds: a few microseconds on CPU for a batch of ids."""
    lo, hi = torch.aminmax(x)
    if int(lo) >= 0 and int(hi) < spec.bound:
        return
    at = ((x < 0) | (x >= spec.bound)).nonzero()[0]
    raise ExecError(f"input {spec.name!r} : {spec.type} holds {int(x[tuple(at)])} at "
                    f"{at.tolist()}, outside [0, {spec.bound}), the values its type allows")


class TyrModule(nn.Module):
    """A graph IR model as a module: parameters at their paths, `forward(*inputs)` returning
    the tuple of the graph's outputs in order."""

    def __init__(self, graph: Graph, seed: int = 0, kernels: str | None = None,
                 checkpoint_blocks: bool = False, empty: bool = False):
        super().__init__()
        # Own attributes bypass nn.Module.__setattr__, which would refuse them if a
        # parameter of the same name (say `_slots`) were registered.
        object.__setattr__(self, "ir", graph)
        # (owning module's parameter dict, leaf name) per parameter, in graph order: reading
        # through the dicts picks up parameters replaced by load_state_dict(assign=True).
        slots: list[tuple[dict[str, Any], str]] = []
        for p in graph.params:
            owner = self
            *parents, leaf = p.path.split(".")
            for seg in (*parents, leaf):
                if seg in _RESERVED:
                    raise ExecError(
                        f"parameter {p.path!r}: the path segment {seg!r} is reserved by "
                        f"torch.nn.Module; rename that field"
                    )
            for seg in parents:
                # Direct insertion, not setattr: a segment may shadow a Module method.
                child = owner._modules.get(seg)
                if child is None:
                    child = owner._modules[seg] = nn.Module()
                owner = child
            owner._parameters[leaf] = nn.Parameter(
                torch.empty(tuple(p.shape), dtype=TORCH_DTYPES[p.dtype], device="meta")
                if empty else init_tensor(p, seed))
            slots.append((owner._parameters, leaf))
        object.__setattr__(self, "_slots", slots)
        # Kept out of _modules: it holds no state, and the module tree must be the path tree.
        object.__setattr__(self, "_fx", _lower(graph, kernels, checkpoint_blocks))

    @property
    def input_names(self) -> list[str]:
        return [i.name for i in self.ir.inputs]

    def _check_inputs(self, inputs: tuple[Any, ...]) -> None:
        expected = self.ir.inputs
        if len(inputs) != len(expected):
            names = ", ".join(self.input_names)
            raise ExecError(
                f"model {self.ir.model!r} takes {len(expected)} inputs ({names}) "
                f"but was given {len(inputs)}"
            )
        for spec, x in zip(expected, inputs):
            if not isinstance(x, torch.Tensor):
                raise ExecError(f"input {spec.name!r} is a {type(x).__name__}, not a tensor")
            if tuple(x.shape) != tuple(spec.shape):
                raise ExecError(
                    f"input {spec.name!r} has shape {_shape(x.shape)} but the graph expects "
                    f"{_shape(spec.shape)}"
                )
            if x.dtype != TORCH_DTYPES[spec.dtype]:
                raise ExecError(
                    f"input {spec.name!r} has dtype {x.dtype} but the graph expects "
                    f"{spec.dtype} ({TORCH_DTYPES[spec.dtype]})"
                )
            if spec.bound is not None and x.numel():
                _check_bound(spec, x)

    def forward(self, *inputs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        self._check_inputs(inputs)
        args = (*inputs, *[d[name] for d, name in self._slots], self.training)
        try:
            return self._fx(*args)
        except Exception as e:
            _Locator(self._fx).run(*args)  # raises ExecError naming the node, if it recurs
            raise ExecError(f"model {self.ir.model!r} failed: {e}") from e


def _lower(graph: Graph, kernels: str | None = None, checkpoint_blocks: bool = False
           ) -> fx.GraphModule:
    """The fx graph `(inputs..., params..., training) -> (outputs...)` of `graph`; nodes
    inside a Triton kernel's contract call it on CUDA (`kernels` mode: exec/kernels.py); with
    `checkpoint_blocks` each block of the model's block stacks is a checkpointed sub-graph
    (exec/blocks.py)."""
    g = fx.Graph()
    types_of = graph.types()
    env: dict[str, fx.Node] = {}
    for k, i in enumerate(graph.inputs):
        env[i.name] = g.placeholder(f"in{k}")
    for k, p in enumerate(graph.params):
        env[p.path] = g.placeholder(f"p{k}")
    cx = Lower(g, g.placeholder("training"))
    router = KernelRouter(kernels)
    root = nn.Module()  # holds the blocks' sub-graphs, if any

    def lower_node(cx: Lower, node: Node, env: dict[str, fx.Node]) -> None:
        lowering = OPS.get(node.op)
        if lowering is None:
            raise ExecError(f"{describe(node)}: op {node.op!r} has no PyTorch lowering")
        try:
            args = [env[ref] for ref in node.inputs]
            types = [types_of[ref] for ref in node.inputs]
        except KeyError as e:
            raise ExecError(f"{describe(node)}: input {e.args[0]!r} is not defined") from None
        lowering = router.lowering(node, types) or lowering  # a kernel, where one applies
        try:
            value = lowering(cx, args, node.attrs, types, node.type)
        except (KeyError, TypeError, ValueError) as e:
            raise ExecError(f"{describe(node)}: cannot lower its attrs {node.attrs}: {e!r}") from e
        if value.meta.get("tyr_node") is None:  # a lowering may return its input (a no-op)
            value.meta["tyr_node"] = node
        env[node.name] = value

    blocks = spans(graph) if checkpoint_blocks else {}
    i = 0
    while i < len(graph.nodes):
        if i in blocks:
            lower_block(graph, i, blocks[i], env, cx, root, lower_node)
            i = blocks[i] + 1
        else:
            lower_node(cx, graph.nodes[i], env)
            i += 1
    try:
        results = tuple(env[o.ref] for o in graph.outputs)
    except KeyError as e:
        raise ExecError(f"an output refers to {e.args[0]!r}, which is not defined") from None
    g.output(results)
    stacks_as_tensors(g)
    g.lint()
    router.log_summary(graph.model)
    return fx.GraphModule(root, g)


def build_module(graph: Graph, *, seed: int = 0, kernels: str | None = None,
                 checkpoint_blocks: bool = False, empty: bool = False) -> TyrModule:
    """Instantiate a validated graph: parameters initialised from their init specs with
    generators seeded by `seed` (deterministic), forward lowered with torch.fx. `kernels`
    ("auto", "off", "interpret"; default `$TYR_KERNELS` or auto) routes ops to Triton;
    `checkpoint_blocks` recomputes each block of the block stacks in the backward. `empty`:
    parameters on the meta device, no memory, for weights assigned next
    (`load_state_dict(assign=True)`: a checkpoint's tensors become the parameters)."""
    return TyrModule(graph, seed=seed, kernels=kernels, checkpoint_blocks=checkpoint_blocks,
                     empty=empty)
