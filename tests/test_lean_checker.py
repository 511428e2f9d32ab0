"""Lean's rules, as the checker applies them: definitional equality on Nat, implicit arguments,
names, arity, syntax, and the edges of the subset. Each rejection is located and readable."""
from __future__ import annotations

import pytest

from tests.lean.helpers import check_src, one_error

# ---- definitional equality on Nat (../shared/reference.md) ------------------------------

ACCEPT = [
    ("closed arithmetic evaluates", "def f (x : T #[2 * 384]) : T #[768] := x"),
    ("n + 0 is n", "def f (n : Nat) (x : T #[n + 0]) : T #[n] := x"),
    ("offsets fold", "def f (n : Nat) (x : T #[n + 1 + 1]) : T #[n + 2] := x"),
    ("truncated subtraction", "def f (x : T #[3 - 5]) : T #[0] := x"),
    ("division by zero is zero", "def f (x : T #[7 / 0]) : T #[0] := x"),
    ("modulo", "def f (x : T #[17 % 5]) : T #[2] := x"),
    ("let unfolds", "def f (d : Nat) (x : T #[4 * d]) : T #[4 * d] :=\n  let y := x\n  y"),
    ("abbrev unfolds", "abbrev width : Nat := 8\ndef f (x : T #[width]) : T #[8] := x"),
    ("def unfolds", "def width (d : Nat) : Nat := d * 4\ndef f (d : Nat) (x : T #[width d]) : T #[d * 4] := x"),
    ("projection of a def'd structure",
     "structure C where\n  d : Nat\ndef f (c : C) (x : T #[c.d]) : T #[c.d] := relu x"),
    ("generalized field notation",
     "structure C where\n  h : Nat\n  k : Nat\ndef C.width (c : C) : Nat := c.h * c.k\n"
     "def f (c : C) (x : T #[c.width]) : T #[c.h * c.k] := x"),
    ("implicit solved through an offset",
     "def g {n : Nat} (x : T #[n + 1]) : T #[n] := sum x |> fun _ => sorry", ),
]
ACCEPT = ACCEPT[:-1] + [
    ("implicit solved through an offset",
     "def g {n : Nat} (x : T #[n + 1]) : T #[n + 1] := x\ndef f (x : T #[5]) : T #[5] := g x"),
    ("named implicit argument", "def f (x : T #[2, 3]) : T #[] := sum (s := #[2, 3]) x"),
    ("type ascription", "def f (x : T #[2]) : T #[2] := (relu x : T #[2])"),
    ("fun with typed binder",
     "def f (x : T #[2]) : T #[2] :=\n  let g := fun (y : T #[2]) => relu y\n  g x"),
    ("let chain at one column",
     "def f (x : T #[2]) (w : T #[3, 2]) : T #[2, 3] :=\n  let a := relu x\n  let b := tanh a\n"
     "  let c := reshape b #[1, 2]\n  reshape (linear c w) #[2, 3] (h := sorry)"),
]
ACCEPT = [c for c in ACCEPT if "sorry" not in c[1]]


@pytest.mark.parametrize("name,src", ACCEPT, ids=[c[0] for c in ACCEPT])
def test_accepted(tmp_path, name, src):
    assert check_src(tmp_path, src) == []


# (name, source, line, fragments)
REJECT = [
    ("T is a type family, not one handle type", "def f (x : T #[1]) : T #[2] := x", 3,
     ["T #[1]", "T #[2]"]),
    ("IT and T differ", "def f (x : IT #[3] 7) : T #[3] := x", 3, ["IT #[3] 7", "T #[3]"]),
    ("IT bounds differ", "def f (x : IT #[3] 7) : IT #[3] 8 := x", 3, ["IT #[3] 7", "IT #[3] 8"]),
    ("IT needs its bound", "def f (x : IT #[3]) : T #[3] := tanh x", 3,
     ["'IT' is missing its explicit argument 'n' : Nat"]),
    ("0 + n is not n", "def f (n : Nat) (x : T #[0 + n]) : T #[n] := x", 3, ["T #[0 + n]", "T #[n]"]),
    ("n + m is not m + n", "def f (n m : Nat) (x : T #[n + m]) : T #[m + n] := x", 3,
     ["T #[n + m]", "T #[m + n]"]),
    ("4 * d is not d * 4", "def f (d : Nat) (x : T #[4 * d]) : T #[d * 4] := x", 3,
     ["T #[4 * d]", "T #[d * 4]"]),
    ("n * 1 is not n", "def f (n : Nat) (x : T #[n * 1]) : T #[n] := x", 3, ["T #[n * 1]"]),
    ("offset cannot go below zero", "def g {n : Nat} (x : T #[n + 1]) : T #[n + 1] := x\n"
     "def f (x : T #[0]) : T #[0] := g x", 4, ["argument 'x' of 'g'", "T #[?n + 1]"]),
    ("closed arithmetic mismatch", "def f (x : T #[2 * 384]) : T #[767] := x", 3, ["T #[768]", "T #[767]"]),
    ("rank mismatch", "def f (x : T #[2, 3]) : T #[2, 3, 1] := x", 3, ["T #[2, 3, 1]"]),
    ("let-bound type mismatch", "def f (x : T #[2]) : T #[2] :=\n  let y : T #[3] := x\n  y", 4,
     ["T #[2]", "T #[3]"]),
    ("ascription mismatch", "def f (x : T #[2]) : T #[2] := (x : T #[3])", 3, ["T #[3]"]),
    ("implicit not inferable", "def f (n : Nat) : T #[] := sum zeros", 3,
     ["don't know how to synthesize implicit argument 's'"]),
    ("decide needs closed propositions",
     "def f (b : Nat) (x : T #[b, 4]) : T #[4, b] := reshape x #[4, b]", 3,
     ["`by decide` failed", "mentions variables"]),
    ("unknown identifier", "def f (x : T #[2]) : T #[2] := reluu x", 3, ["unknown identifier 'reluu'"]),
    ("unknown type", "def f (x : Tensor #[2]) : T #[2] := x", 3, ["unknown identifier 'Tensor'"]),
    ("too many arguments", "def f (x : T #[2]) : T #[2] := relu x x", 3,
     ["'relu' takes 1 explicit argument, but is given 2"]),
    ("missing argument", "def f (x : T #[2, 3]) (w : T #[4, 3]) : T #[2, 4] := linear x", 3,
     ["missing its explicit argument 'M'"]),
    ("unknown named argument", "def f (x : T #[2]) : T #[2] := relu (q := 1) x", 3,
     ["'relu' has no argument named 'q'"]),
    ("unknown field", "structure C where\n  d : Nat\ndef f (c : C) (x : T #[c.e]) : T #[2] := x", 5,
     ["invalid field 'e'"]),
    ("duplicate declaration", "def f (x : T #[2]) : T #[2] := x\ndef f (x : T #[2]) : T #[2] := x", 4,
     ["'f' has already been declared"]),
    ("duplicate field", "structure C where\n  d : Nat\n  d : Nat", 5, ["field 'd' has already"]),
    ("not a function", "def f (x : T #[2]) : T #[2] := x x", 3, ["'x' is not a function"]),
    ("type expected", "def f (x : 3) : T #[2] := x", 3, ["type expected"]),
    ("arithmetic on tensors", "def f (x : T #[2]) : T #[2] := x + x", 3, ["arithmetic '+' on T #[2]"]),
    ("fun binder needs a type", "def f (x : T #[2]) : T #[2] :=\n  let g := fun y => relu y\n  g x", 4,
     ["cannot infer the type of 'y'"]),
    ("missing binder type", "def f (x) : T #[2] := x", 3, ["requires binder types"]),
]


@pytest.mark.parametrize("name,src,line,frags", REJECT, ids=[c[0] for c in REJECT])
def test_rejected(tmp_path, name, src, line, frags):
    d = one_error(tmp_path, src)
    assert d.pos.line == line, str(d)
    for frag in frags:
        assert frag in d.message, (frag, d.message)


# ---- syntax and the edges of the subset -----------------------------------------------------

SUBSET_REJECT = [
    ("theorem", "theorem t : 1 = 1 := rfl", "theorems are not in the Tyr subset of Lean"),
    ("instance", "instance : Inhabited Nat := ⟨0⟩", "instance declarations are not in the Tyr subset"),
    ("match", "def f (n : Nat) : Nat := match n with\n  | _ => 0", "`match` is not in the Tyr subset"),
    ("if", "def f (n : Nat) : Nat := if n = 0 then 1 else 2", "`if` is not in the Tyr subset"),
    ("do", "def f (n : Nat) : Nat := do\n  n", "`do` notation is not in the Tyr subset"),
    ("structure instance", "def f : Nat := { }", "structure instances"),
    ("tactic other than decide",
     "def f (x : T #[2]) : T #[2] := reshape x #[2] (h := by simp)", "only `by decide`"),
    ("instance binder", "def f [inst : Inhabited Nat] : Nat := 0", "instance-implicit binders"),
    ("unknown attribute", "@[simp] def f : Nat := 0", "attribute '@[simp]' is not in the Tyr subset"),
    ("unknown deriving", "structure C where\n  d : Nat\n  deriving ToJson", "deriving 'ToJson'"),
    ("set_option", "set_option pp.all true", "`set_option` is not in the Tyr subset"),
    ("hash command", "#eval 1", "commands like '#eval'"),
    ("negative literal", "def f : Float := -1.0", "negation is not in the Tyr subset"),
    ("boolean equality", "def f (n : Nat) : Bool := n == 2",
     "the operator '==' is not in the Tyr subset"),
    ("pattern-matching def", "def f : Nat → Nat\n  | _ => 0", "pattern matching"),
]


@pytest.mark.parametrize("name,src,frag", SUBSET_REJECT, ids=[c[0] for c in SUBSET_REJECT])
def test_outside_the_subset_is_rejected_with_position(tmp_path, name, src, frag):
    d = one_error(tmp_path, src)
    assert frag in d.message, d.message
    assert d.pos.line >= 3


SYNTAX = [
    ("missing :=", "def f (x : T #[2]) : T #[2] x", "expected ':='"),
    ("unclosed paren", "def f (x : T #[2]) : T #[2] := relu (x", "expected ')'"),
    ("unclosed shape", "def f (x : T #[2) : T #[2] := x", "expected ']'"),
    ("unterminated comment", "/- never closed\ndef f := 1", "unterminated comment"),
    ("unterminated string", 'def f : String := "abc', "unterminated string"),
    ("stray character", "def f : Nat := 1 ¢ 2", "expected token: the character '¢' (U+00A2)"),
    ("let without newline", "def f (x : T #[2]) : T #[2] := let y := x y", "expected ';' or a line break"),
]


@pytest.mark.parametrize("name,src,frag", SYNTAX, ids=[c[0] for c in SYNTAX])
def test_syntax_errors_are_located(tmp_path, name, src, frag):
    d = one_error(tmp_path, src)
    assert frag in d.message, d.message
    assert d.pos.line >= 3


def test_application_arguments_stop_at_the_let_column(tmp_path):
    # As in Lean: the body line is not swallowed as arguments of the `let` value.
    src = "def f (x : T #[2]) : T #[2] :=\n  let y := relu x\n  tanh y"
    assert check_src(tmp_path, src) == []


def test_seed_example_is_rejected_at_the_application_line(tmp_path):
    src = ("def bad :=\n  let x : T #[32, 768] := zeros\n  let w : T #[768, 512] := zeros\n"
           "  linear x w\n")
    d = one_error(tmp_path, src)
    assert (d.pos.line, d.pos.col) == (6, 11)
    assert "T #[768, 512]" in d.message and "T #[?n, 768]" in d.message
    ok = src.replace("T #[768, 512]", "T #[512, 768]")
    assert check_src(tmp_path, ok) == []


def test_errors_in_several_declarations_are_all_reported(tmp_path):
    src = ("def a (x : T #[1]) : T #[2] := x\n"
           "def b (x : T #[2]) : T #[2] := relu x\n"
           "def c (x : T #[3]) : T #[4] := x\n")
    diags = check_src(tmp_path, src)
    assert [d.pos.line for d in diags] == [3, 5]


def test_unknown_import_and_lean_import(tmp_path):
    diags = check_src(tmp_path, "import Tyr\nimport Foo.Bar\nimport Lean\n", prelude=False)
    msgs = " | ".join(d.message for d in diags)
    assert "unknown module 'Foo.Bar'" in msgs and "importing 'Lean'" in msgs


@pytest.mark.parametrize("before", ["/-! A module doc. -/\n", "open torch\n", "def k : Nat := 1\n"])
def test_a_command_before_an_import_is_rejected_as_lean_does(tmp_path, before):
    # Lean's header is the imports alone; a `/-!` doc is a command like any other.
    d = one_error(tmp_path, before + "import Tyr\n", prelude=False)
    assert (d.pos.line, d.pos.col) == (2, 0)
    assert d.message == "invalid 'import' command, it must be used in the beginning of the file"


def test_comments_may_precede_the_imports_and_a_module_doc_follows_them(tmp_path):
    src = "-- a comment\n/- a block comment -/\nimport Tyr\n/-! The module doc. -/\nopen torch\n"
    assert check_src(tmp_path, src, prelude=False) == []


def test_an_import_resolves_against_the_lake_package_as_lake_build_does(tmp_path):
    # `examples/b/B.lean` imports `examples/a/A.lean` by its Lake name: the package's root is
    # the directory of the lakefile, not of the file checked.
    (tmp_path / "lakefile.lean").write_text("import Lake\n")
    for d in ("a", "b"):
        (tmp_path / "examples" / d).mkdir(parents=True)
    (tmp_path / "examples" / "a" / "A.lean").write_text(
        "import Tyr\nopen torch\ndef block {b : Nat} (x : T #[b, 4]) : T #[b, 4] := relu x\n")
    src = ("import examples.a.A\nopen torch\n"
           "def f (x : T #[3, 4]) : T #[3, 4] := block x\n")
    assert check_src(tmp_path / "examples" / "b", src, prelude=False) == []
    (tmp_path / "lakefile.lean").unlink()  # no package: the name resolves nowhere
    diags = check_src(tmp_path / "examples" / "b", src, prelude=False)
    assert "unknown module 'examples.a.A'" in diags[0].message


def test_local_imports_resolve_like_lake(tmp_path):
    (tmp_path / "Lib").mkdir()
    (tmp_path / "Lib" / "Blocks.lean").write_text(
        "import Tyr\nopen torch\nnamespace Lib\ndef block {b : Nat} (x : T #[b, 4]) : T #[b, 4] := relu x\nend Lib\n")
    src = "import Lib.Blocks\nopen torch\ndef f (x : T #[3, 4]) : T #[3, 4] := Lib.block x\n"
    assert check_src(tmp_path, src, prelude=False) == []
    bad = src.replace("T #[3, 4]) : T #[3, 4]", "T #[3, 5]) : T #[3, 4]")
    d = one_error(tmp_path, bad, prelude=False)
    assert "argument 'x' of 'Lib.block'" in d.message


def test_namespaces_and_sections(tmp_path):
    src = ("namespace A\nsection S\ndef w : Nat := 3\nend S\nend A\n"
           "def f (x : T #[A.w]) : T #[3] := x\nnamespace B\nend C\n")
    d = one_error(tmp_path, src)
    assert d.pos.line == 10 and d.message == ("invalid name after `end`: expected `B`, but "
                                              "found `C`")


def test_tabs_are_rejected(tmp_path):
    d = one_error(tmp_path, "def f : Nat :=\n\t1")
    assert "tabs" in d.message and d.pos.line == 4


def test_unknown_init_kind_is_rejected(tmp_path):
    d = one_error(tmp_path, "def xavier {s : Shape} (k : Float) : T s := param (.xavier k)")
    assert "'Init' has no constructor 'xavier'" in d.message and d.pos.line == 3


def test_an_op_name_has_one_signature(tmp_path):
    d = one_error(tmp_path, 'def relu2 {s : Shape} (x : T s) : T s := prim "relu" [x.node]')
    assert 'op name "relu" is already declared by \'torch.relu\'' in d.message


def test_literal_arithmetic_takes_the_binder_type(tmp_path):
    assert check_src(tmp_path, "def f (x : T #[2]) : T #[2] := scale x (2 * 3)") == []
    assert check_src(tmp_path, "def f (x : T #[2]) : T #[2] := scale x (1 / 3)") == []


def test_explicit_by_decide_argument(tmp_path):
    ok = "def f (x : T #[2, 3]) : T #[6] := reshape x #[6] (h := by decide)"
    assert check_src(tmp_path, ok) == []
    d = one_error(tmp_path, ok.replace("#[6]", "#[5]"))
    assert "numel #[2, 3] = numel #[5] is false" in d.message


def test_custom_initialiser_keys_follow_the_init_constructor(tmp_path):
    from pytyr.lean import instantiate_model, load
    f = tmp_path / "I.lean"
    f.write_text("import Tyr\nopen torch\n"
                 "def tiny {s : Shape} (sigma : Float) : T s := param (.normal sigma)\n"
                 "structure P where\n  w : T #[2] := tiny 0.25\n"
                 "@[model] def m (p : P) (x : T #[2]) : T #[2] := mul x p.w\n")
    g = instantiate_model(load(f), "m", {})
    assert g.params[0].init == {"kind": "normal", "std": 0.25}


def test_unreadable_sources_are_located_errors(tmp_path):
    from pytyr.lean import check_files
    f = tmp_path / "Bad.lean"
    f.write_bytes(b"def f := 1\n-- caf\xe9\n")
    (d,) = check_files(f)
    assert (d.pos.line, d.pos.col) == (2, 6) and "not UTF-8" in d.message
    (d,) = check_files(tmp_path)
    assert "is a directory" in d.message


def test_deeply_nested_source_is_an_error_not_a_crash(tmp_path):
    from pytyr.lean import check_files
    f = tmp_path / "Deep.lean"
    f.write_text("def f := " + "(" * 5000 + "1" + ")" * 5000 + "\n")
    (d,) = check_files(f)
    # Located at the parenthesis that goes one level too deep, not at 1:0.
    assert "nested more than 128 levels deep" in d.message and (d.pos.line, d.pos.col) == (1, 137)


def test_a_model_without_tensors_checks_as_in_lean_and_is_refused_when_run(tmp_path, capsys):
    # Lean's `model` attribute accepts any definition (`validate` in Tyr/Meta/Model.lean asks
    # only for a `def`), so `tyr check` accepts the file; running it is what cannot be done
    from pytyr.cli import main

    src = "@[model] def f (n : Nat) : Nat := n\n"
    assert check_src(tmp_path, src) == []
    path = tmp_path / "M.lean"
    assert main(["check", str(path)]) == 0
    capsys.readouterr()
    assert main(["graph", str(path), "--model", "f"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert f"{path.name}:3:" in err and "model 'f' returns Nat, no tensors" in err, err
