"""The one error the checker and the instantiator raise internally: a message and a place."""
from __future__ import annotations

from ..errors import Diagnostic, LeanError, Pos


class Fail(Exception):
    """One located error; the declaration being checked (or the model being instantiated)
    is abandoned."""

    def __init__(self, pos: Pos, msg: str):
        super().__init__(msg)
        self.pos, self.msg = pos, msg


def located(err: Fail) -> LeanError:
    return LeanError([Diagnostic(err.pos, err.msg)])


def short(name: str) -> str:
    """A name as the user wrote it: `torch.linear` is `linear` after `open torch`."""
    return name[len("torch."):] if name.startswith("torch.") else name
