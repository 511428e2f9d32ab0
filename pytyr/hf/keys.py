"""Which keys of a checkpoint `tyr run` leaves out, each named in the output.

Only keys that are no parameter of the model are left out: those `--ignore-key PATTERN`
matches (a glob; one that matches no key of the checkpoint is an error, before any work), and,
where the checkpoint's family is known (its config.json), the family's known non-parameters
(buffers, the pooler, task heads: `families.Unused`). When no key of the checkpoint is a name
of the model as it is, a task-headed checkpoint's keys under the family's prefix (`bert.` of
`BertForMaskedLM`) are read without it, a bare model's with it (GPT-2's released `h.0.…`
into GPT2.lean's `transformer.h.0.…`), and only then by the family's rename where it has one
(GPT-2's names and transposed `Conv1D` weights into GPT.lean's layout). Every other key goes
on to the model's load, which lists every missing, unexpected and mis-shaped tensor at once.

`embeddings.position_ids` is checked: transformers never reads its values (positions are
0 … t-1), and neither does `tyr run`; a buffer that is not 0 … n-1 is still left out, and the
note says so.
"""
from __future__ import annotations

from fnmatch import fnmatchcase
from typing import Any, Iterable

from pytyr.errors import ConfigError

from .families import Family, Unused


class UnusedKeys:
    """Made from the checkpoint's names (the --ignore-key patterns are checked against them);
    `select(weights, model_names)` returns the weights to load and records `notes`."""

    def __init__(self, family: Family | None, ignore: Iterable[str], names: Iterable[str],
                 where: str):
        self.family, self.ignore = family, list(ignore)
        names = list(names)
        for p in self.ignore:
            if not any(fnmatchcase(n, p) for n in names):
                shown = ", ".join(names[:6]) + (f", … ({len(names)} keys)" if len(names) > 6
                                                else "")
                raise ConfigError(f"--ignore-key {p!r} matches no key of {where} (its keys: "
                                  f"{shown or 'none'})")
        self.notes: list[str] = []

    def select(self, weights: dict[str, Any], model_names: set[str]) -> dict[str, Any]:
        left_out: list[tuple[str, str]] = []
        kept = {}
        for k, t in weights.items():
            pattern = next((p for p in self.ignore if fnmatchcase(k, p)), None)
            if pattern is None:
                kept[k] = t
            else:
                left_out.append((k, f"--ignore-key {pattern}"))
        renaming = False
        if self.family is not None and not any(k in model_names for k in kept):
            kept, renaming = self._read_as(kept, model_names)
        if self.family is not None:
            for k in list(kept):
                if self._ours(k, renaming) in model_names:
                    continue
                known = next((u for u in self.family.unused if fnmatchcase(k, u.pattern)
                              or fnmatchcase(self._base(k), u.pattern)), None)
                if known is not None:
                    left_out.append((k, _what(known, kept.pop(k))))
        if left_out:
            n = len(left_out)
            self.notes.append(f"ignored {n} key{'s' * (n != 1)} the model does not use: "
                              f"{_grouped(left_out)}")
        return self._renamed(kept) if renaming else kept

    def _ours(self, key: str, renaming: bool) -> str:
        """The model's name for a checkpoint key (itself, unless the family renames)."""
        if not renaming or self.family is None or self.family.rename is None:
            return key
        renamed = self.family.rename(key)
        return renamed[0] if renamed is not None else key

    def _base(self, key: str) -> str:
        """The base model's key: without the family's prefix of a task-headed checkpoint."""
        pre = next((p for p in self.family.prefixes if key.startswith(p)), "")
        return key[len(pre):]

    def _read_as(self, kept: dict[str, Any], model_names: set[str]
                 ) -> tuple[dict[str, Any], bool]:
        """The checkpoint's keys as the model names them, where none is a name as it is: a
        task-headed checkpoint's under the family's prefix without it (`bert.` where the
        model is a `BertModel`), a bare model's with it (GPT-2's released `h.0.…` where the
        model is a `GPT2LMHeadModel`, `transformer.h.0.…`), and only then by the family's
        rename (GPT-2's layout into GPT.lean's), as they are or without the prefix. Returns
        the keys and whether the rename applies."""
        assert self.family is not None
        for pre in self.family.prefixes:
            stripped = {k[len(pre):] if k.startswith(pre) else k: k for k in kept}
            if len(stripped) == len(kept) and any(k in model_names for k in stripped):
                self.notes.append(f"read the keys under '{pre}' without it (a checkpoint of a "
                                  f"model with a task head)")
                return {k: kept[old] for k, old in stripped.items()}, False
            if any(pre + k in model_names for k in kept):
                added = {pre + k if pre + k in model_names else k: t for k, t in kept.items()}
                if len(added) == len(kept):
                    self.notes.append(f"read the keys as under '{pre}' (a checkpoint of the "
                                      f"bare model)")
                    return added, False
        if self.family.rename is None:
            return kept, False
        if any(self._ours(k, True) in model_names for k in kept):
            return kept, True
        for pre in self.family.prefixes:
            stripped = {k[len(pre):] if k.startswith(pre) else k: k for k in kept}
            if len(stripped) == len(kept) and any(self._ours(k, True) in model_names
                                                  for k in stripped):
                self.notes.append(f"read the keys under '{pre}' without it (a checkpoint of a "
                                  f"model with a task head)")
                return {k: kept[old] for k, old in stripped.items()}, True
        return kept, False

    def _renamed(self, kept: dict[str, Any]) -> dict[str, Any]:
        """The family's layout turned into the model's: names, and transposed matrices. A
        key it has no name for stays as it is (the load names it as unexpected)."""
        if self.family is None or self.family.rename is None:
            return kept
        out, n = {}, 0
        for k, t in kept.items():
            renamed = self.family.rename(k)
            if renamed is None or renamed[0] in out:
                out[k] = t
                continue
            name, transposed = renamed
            out[name] = t.t().contiguous() if transposed else t
            n += 1
        if n:
            self.notes.append(f"read {n} keys by {self.family.rename_note}")
        return out


def _what(known: Unused, tensor: Any) -> str:
    if known.pattern != "embeddings.position_ids":
        return known.what
    import torch

    flat = tensor.reshape(-1)
    if not flat.is_floating_point() and torch.equal(flat, torch.arange(flat.numel(),
                                                                      dtype=flat.dtype)):
        return f"{known.what}, 0 … {flat.numel() - 1}"
    return (f"{known.what}; its values are not 0 … {flat.numel() - 1}, and like transformers "
            f"the model uses positions 0 … t-1")


def _grouped(items: list[tuple[str, str]]) -> str:
    """`a, b (why1), c (why2)`: each reason once, after the last key of a run that shares it."""
    parts = []
    for i, (k, why) in enumerate(items):
        last = i + 1 == len(items) or items[i + 1][1] != why
        parts.append(f"{k} ({why})" if last else k)
    return ", ".join(parts)
