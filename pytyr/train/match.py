"""A model fits a task by its types: dims filled from the task's roles, then checked.

`fill_dims` runs before instantiation: for every input the task feeds, each dim of the
model's declared type that is one of the model's own `Nat` binders (`b`, `t` in
`idx : IT #[b, t] v`), and the bound `v` of an index type, takes the size of the task's role
(`batch`, `seq`, `vocab`), so configs never repeat what the task already knows.
`fill_config_fields` does the same for config fields (`c.vocab` of the logits
`T #[b, t, c.vocab]` the task reads, or of the bound of `idx : IT #[b, t] c.vocab`), which
may wait for the data. `check_graph` runs on the instantiated graph: every input's dtype,
dims and bound, the scalar loss, and the outputs the task reads, against the role sizes (the
data's `vocab` included; a role the task lists in `roles_at_least` may be exceeded: a language
model's vocabulary padded past its tokenizer). Each mismatch is one error naming the model argument, what the task
feeds and where the model is declared.
"""
from __future__ import annotations

from typing import Any

from pytyr.config import flatten, show
from pytyr.errors import ConfigError
from pytyr.ir.graph import Graph, TensorType
from pytyr.pipeline import ModelDecl
from pytyr.train.task import Expect, Feed


def _feeds_text(feeds: dict[str, Feed], sizes: dict[str, int]) -> str:
    return ", ".join(f"{n} : {f.show(sizes)}" for n, f in feeds.items())


def fill_dims(decl: ModelDecl | None, values: dict[str, Any], feeds: dict[str, Feed],
              sizes: dict[str, int], task: str, *, partial: bool = False) -> dict[str, Any]:
    """`values` plus the model's dim binders that the task's feeds determine. A compiled
    library's model (no declaration) gets `values` unchanged: its graph is checked after.
    `partial` (for `tyr graph`) uses the feeds the model has and requires nothing."""
    if decl is None:
        return dict(values)
    head = f"{decl.where}: model '{decl.name}'"
    inputs = {i.name: i for i in decl.inputs}
    if partial:
        feeds = {n: f for n, f in feeds.items() if n in inputs}
        inputs = {n: i for n, i in inputs.items() if n in feeds}
        decl = ModelDecl(decl.name, decl.where, tuple(inputs.values()), decl.dim_binders)
    for i in decl.inputs:
        if i.name not in feeds:
            raise ConfigError(f"{head} takes input '{i.name}' : {i.text}, which task '{task}' "
                              f"does not feed (it feeds {_feeds_text(feeds, sizes)})")
    for name, f in feeds.items():
        if name not in inputs:
            raise ConfigError(f"{head} has no input '{name}', which task '{task}' feeds as "
                              f"{f.show(sizes)} (the model's inputs: "
                              f"{', '.join(f'{i.name} : {i.text}' for i in decl.inputs)})")
    out = dict(values)
    for name, f in feeds.items():
        i = inputs[name]
        if i.dtype != f.dtype or len(i.dims) != len(f.dims):
            raise ConfigError(f"{head}: argument '{name}' : {i.text} but task '{task}' feeds "
                              f"{name} : {f.show(sizes)}")
        pairs = list(zip(i.dims, f.dims)) + ([(i.bound, f.bound)] if f.bound else [])
        for dim, role in pairs:
            if not isinstance(dim, str) or role not in sizes:
                continue
            given = out.setdefault(dim, sizes[role])
            if given != sizes[role]:
                raise ConfigError(f"{head}: argument '{name}' : {i.text} with {dim} = "
                                  f"{show(given)} (model.{dim}) but task '{task}' feeds {name} : "
                                  f"{f.show(sizes)}; leave model.{dim} out, the task sets it")
    return out


def fill_config_fields(decl: ModelDecl | None, values: dict[str, Any], feeds: dict[str, Feed],
                       expects: list[Expect], sizes: dict[str, int]
                       ) -> tuple[dict[str, Any], list[str]]:
    """`values` with the config fields that the outputs the task reads are typed by (`c.vocab`
    of `T #[b, t, c.vocab]`), and the bounds of the inputs it feeds (`c.vocab` of
    `IT #[b, t] c.vocab`, or a `Nat` binder `v` of `IT #[b, t] v`), filled from the task's
    roles where the config leaves them out; and what is still open because its role is known
    only once the data is."""
    if decl is None:
        return dict(values), []
    out = {k: dict(v) if isinstance(v, dict) else v for k, v in values.items()}
    pairs: list[tuple[Any, str]] = []
    for e in expects:
        dims = decl.outputs[e.index] if e.index < len(decl.outputs) else None
        pairs += [(d, r) for d, r in zip(dims or (), e.dims) if isinstance(d, tuple)]
    inputs = {i.name: i for i in decl.inputs}
    pairs += [(inputs[n].bound, f.bound) for n, f in feeds.items() if f.bound and n in inputs]
    open_fields = []
    for dim, role in pairs:
        if isinstance(dim, str) and dim not in out:  # a binder bound (not a dim: not `b`, `t`)
            if role in sizes:
                out[dim] = sizes[role]
            else:
                open_fields.append(dim)
        if not isinstance(dim, tuple):
            continue
        table = out.get(dim[0])
        if not isinstance(table, dict) or dim[1] in table:
            continue
        if role in sizes:
            table[dim[1]] = sizes[role]
        else:
            open_fields.append(f"{dim[0]}.{dim[1]}")
    return out, open_fields


def _hint(values: dict[str, Any], dims: tuple[int, ...], want: tuple[int | None, ...]) -> str:
    """Which config values gave the wrong dims (`model.c.vocab is 65`), when that is clear."""
    bad = {d for d, w in zip(dims, want) if w is not None and d != w}
    keys = [f"{k} is {v}" for k, v in flatten(values, "model").items()
            if isinstance(v, int) and not isinstance(v, bool) and v in bad]
    return f" ({', '.join(keys)})" if keys else ""


def _zero_hint(values: dict[str, Any]) -> str:
    zeros = [k for k, v in flatten(values, "model").items() if v == 0 and not isinstance(v, bool)
             and isinstance(v, int)]
    return f" ({', '.join(f'{k} is 0' for k in zeros)})" if zeros else ""


def _size_fits(role: str, dim: int | None, sizes: dict[str, int], at_least: tuple[str, ...]
               ) -> bool:
    if role not in sizes:
        return True
    return dim == sizes[role] or (role in at_least and dim is not None and dim >= sizes[role])


def _fits(t: TensorType, dtype: str, roles: tuple[str, ...], sizes: dict[str, int],
          at_least: tuple[str, ...] = ()) -> bool:
    return (t.dtype == dtype and len(t.shape) == len(roles)
            and all(_size_fits(r, d, sizes, at_least) for r, d in zip(roles, t.shape)))


def check_graph(graph: Graph, where: str, feeds: dict[str, Feed], expects: list[Expect],
                sizes: dict[str, int], task: str, values: dict[str, Any],
                at_least: tuple[str, ...] = ()) -> None:
    """Raise a ConfigError for the first way `graph` does not fit the task (see module doc);
    a dim of a role in `at_least` may exceed the role's size (`Task.roles_at_least`)."""
    head = f"{where}: model '{graph.model}'"
    have = {i.name: i for i in graph.inputs}
    for name, f in feeds.items():
        if name not in have:
            raise ConfigError(f"{head} has no input '{name}', which task '{task}' feeds "
                              f"as {f.show(sizes)}")
        t = have[name].type
        if not _fits(t, f.dtype, f.dims, sizes, at_least):
            want = tuple(sizes.get(r) for r in f.dims)
            raise ConfigError(f"{head}: argument '{name}' is {t} but task '{task}' feeds "
                              f"{name} : {f.show(sizes)}{_hint(values, t.shape, want)}")
    unfed = [i.name for i in graph.inputs if i.name not in feeds]
    if unfed:
        raise ConfigError(f"{head} takes input '{unfed[0]}', which task '{task}' does not feed "
                          f"(it feeds {_feeds_text(feeds, sizes)})")
    empty = [(f"parameter '{p.path}'", p.shape) for p in graph.params if 0 in p.shape]
    empty += [(f"the {n.op} at {n.loc or n.name}", n.shape) for n in graph.nodes if 0 in n.shape]
    if empty:
        what, shape = empty[0]
        raise ConfigError(f"{head}: {what} has shape {list(shape)}: a dimension of 0 cannot "
                          f"be trained{_zero_hint(values)}")
    types = graph.types()
    outs = [types[o.ref] for o in graph.outputs]
    if not outs or outs[-1] != TensorType((), "f32"):
        shown = " × ".join(map(str, outs)) or "nothing"
        raise ConfigError(f"{head} returns {shown}; to be trained its last output must be the "
                          f"loss, a scalar T #[]")
    for e in expects:
        if e.index >= len(outs) - 1:
            raise ConfigError(f"{head} returns {len(outs)} outputs; task '{task}' reads output "
                              f"{e.index} ({e.what}) before the loss")
        t = outs[e.index]
        if not _fits(t, "f32", e.dims, sizes, at_least):
            want = tuple(sizes.get(r) for r in e.dims)
            shown = ", ".join(f"{r}={sizes[r]}" if r in sizes else r for r in e.dims)
            raise ConfigError(f"{head}: output {e.index} ({e.what}) is {t} but task '{task}' "
                              f"expects T [{shown}]{_hint(values, t.shape, want)}")
    # Bounds last: a wrong vocabulary is clearer in the logits' shape, when it shows there.
    for name, f in feeds.items():
        t = have[name].type
        if f.bound and not _size_fits(f.bound, t.bound, sizes, at_least):
            hint = _hint(values, (t.bound,), (sizes[f.bound],))  # type: ignore[arg-type]
            raise ConfigError(f"{head}: argument '{name}' is {t} but task '{task}' feeds "
                              f"{name} : {f.show(sizes)}{hint}")
