"""One error family for every boundary of pytyr.

Each error is a sentence that names the thing, the place and, where possible, the fix.
Errors that can gather several problems (a Lean file, an IR document) carry them all.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple


class TyrError(Exception):
    """Base class of every error pytyr raises on purpose."""


class Pos(NamedTuple):
    """A position in a source file: 1-based line, 0-based column (as Lean prints them). A
    named tuple, not a frozen dataclass: the lexer makes one per token, 5x faster so."""

    file: str
    line: int
    col: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"


@dataclass(frozen=True)
class Diagnostic:
    pos: Pos
    message: str
    severity: str = "error"

    def __str__(self) -> str:
        return f"{self.pos}: {self.severity}: {self.message}"


class LeanError(TyrError):
    """Problems found in Lean source: syntax, subset, names, types. Gathered, located."""

    def __init__(self, diagnostics: list[Diagnostic]):
        self.diagnostics = list(diagnostics)
        super().__init__("\n".join(str(d) for d in self.diagnostics))


class IRError(TyrError):
    """A graph IR document that is malformed or inconsistent; lists every problem found."""

    def __init__(self, problems: list[str], source: str = "<graph>"):
        self.problems = list(problems)
        self.source = source
        head = f"{source}: invalid graph IR ({len(self.problems)} problem"
        head += "s)" if len(self.problems) != 1 else ")"
        super().__init__(head + ":\n" + "\n".join(f"  - {p}" for p in self.problems))


class ExecError(TyrError):
    """A failure while running a node; names the node and its Lean source position."""


class ConfigError(TyrError):
    """A bad configuration value: names the key and what was expected."""


class Interrupted(TyrError):
    """A run stopped by a signal at a step boundary, after writing its checkpoint and outputs;
    `exit_code` is the shell's for that signal (130 for SIGINT, 143 for SIGTERM)."""

    def __init__(self, message: str, exit_code: int):
        super().__init__(message)
        self.exit_code = exit_code


class CheckpointError(TyrError):
    """A training checkpoint that is missing, incomplete or does not fit the run; lists every
    problem found."""


class DataError(TyrError):
    """A data file (token shard, corpus cache) that is malformed: names the file and the problem."""


class SafeTensorsError(TyrError):
    """A safetensors file, shard set, schema snapshot or model fit that breaks a rule.

    One type with one-line variants: `rule` is the short name of the broken rule
    (`header-too-large`, `duplicate-name`, `offsets-not-contiguous`, ...), `file` the file it
    was found in; the message is one sentence naming both. Checks that gather several problems
    (loading into a model) list every one of them in `problems`, one line each.
    """

    def __init__(self, file: object, rule: str, message: str, problems: list[str] | None = None):
        self.file = str(file)
        self.rule = rule
        self.message = message
        self.problems = list(problems or [])
        text = f"{self.file}: {message} (rule {rule})"
        if self.problems:
            text += ":\n" + "\n".join(f"  - {p}" for p in self.problems)
        super().__init__(text)

    def __reduce__(self):  # keep the error picklable despite the custom signature
        return (type(self), (self.file, self.rule, self.message, self.problems))


class AbiError(TyrError):
    """A compiled model library (C ABI, cc/tyr.h) that cannot be used: names the library and
    the problem (missing, wrong ABI version, missing symbol, an error it returned, bad bytes)."""


class KernelError(TyrError):
    """A Triton kernel called outside its contract (`pytyr.kernels`), or kernels requested
    where they cannot run: names the kernel, the dim or dtype, and what is admitted."""
