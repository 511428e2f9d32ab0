"""The checker at scale: work linear in the size of the file, long `let` chains that are not
nesting, a bounded unrolling of vectors, nesting errors located at the nesting, and
instantiations that may run concurrently on one checked program."""
from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from pytyr.errors import ConfigError, LeanError
from pytyr.lean import defeq, instantiate_model, load
from pytyr.lean.parser import MAX_NESTING
from tests.lean.helpers import check_src


def _defs(n: int) -> str:
    return "".join(f"def f{i} {{b : Nat}} (x : T #[b, 8]) (w : T #[8, 8]) : T #[b, 8] :=\n"
                   f"  relu (linear x w)\n" for i in range(n))


def test_checking_work_is_linear_in_the_declarations(tmp_path, monkeypatch):
    calls = {"n": 0}
    real = defeq.Normalizer.__call__

    def counting(self, t):
        calls["n"] += 1
        return real(self, t)

    monkeypatch.setattr(defeq.Normalizer, "__call__", counting)
    counts = []
    for n in (100, 200):
        calls["n"] = 0
        assert check_src(tmp_path, _defs(n)) == []
        counts.append(calls["n"])
    assert counts[1] <= 2.05 * counts[0], counts


def test_a_long_let_chain_is_not_nesting(tmp_path):
    n = 3000
    lets = "".join(f"  let x{i + 1} := relu x{i}\n" for i in range(n))
    src = f"@[model] def deep (x0 : T #[4]) : T #[4] :=\n{lets}  x{n}\n"
    assert check_src(tmp_path, src) == []
    (tmp_path / "L.lean").write_text("import Tyr\nopen torch\n" + src)
    g = instantiate_model(load(tmp_path / "L.lean"), "deep", {})
    assert len(g.nodes) == n and g.outputs[0].ref == f"%{n - 1}"


@pytest.mark.parametrize("make,per_level", [
    (lambda k: "def f (x : T #[2]) : T #[2] := " + "relu (" * k + "x" + ")" * k, 2),
    (lambda k: "def f : Nat := " + " + ".join(["1"] * (k + 1)), 1),
    (lambda k: "def f : Nat := " + "(" * k + "1" + ")" * k, 1),
])
def test_nesting_is_an_error_at_the_nesting(tmp_path, make, per_level):
    assert check_src(tmp_path, make((MAX_NESTING - 4) // per_level)) == []
    src = make(MAX_NESTING + 50)
    (d,) = check_src(tmp_path, src)
    assert d.message.startswith(f"this term is nested more than {MAX_NESTING} levels deep")
    assert d.pos.line == 3 and d.pos.col > 20  # inside the term, not at the declaration


VEC = ("structure C where\n  d : Nat\n  n : Nat\n"
       "structure Blk (c : C) where\n  w : T #[c.d, c.d] := normal 0.02\n  deriving TensorStruct\n"
       "structure Net (c : C) where\n  blocks : Vector (Blk c) c.n\n  deriving TensorStruct\n"
       "@[model] def net (c : C) {b : Nat} (p : Net c) (x : T #[b, c.d]) : T #[b, c.d] :=\n"
       "  p.blocks.foldl (fun h blk => linear h blk.w) x\n")


@pytest.fixture(scope="module")
def vec(tmp_path_factory):
    f = tmp_path_factory.mktemp("vec") / "V.lean"
    f.write_text("import Tyr\nopen torch\n" + VEC)
    return load(f)


def test_unrolling_a_vector_has_a_cap_with_a_clear_error(vec, monkeypatch):
    values = {"c": {"d": 2, "n": 10**9}, "b": 1}
    with pytest.raises(LeanError, match=r"'blocks' is a vector of 1000000000 elements, over the "
                                        r"limit of 4096 a model may unroll"):
        instantiate_model(vec, "net", values)
    values["c"]["n"] = 5
    assert len(instantiate_model(vec, "net", values).nodes) == 5
    with pytest.raises(LeanError, match="over the limit of 4"):
        instantiate_model(vec, "net", values, max_unroll=4)
    monkeypatch.setenv("TYR_MAX_UNROLL", "3")
    with pytest.raises(LeanError, match="over the limit of 3"):
        instantiate_model(vec, "net", values)
    monkeypatch.setenv("TYR_MAX_UNROLL", "lots")
    with pytest.raises(ConfigError, match="TYR_MAX_UNROLL must be a natural number"):
        instantiate_model(vec, "net", values)


def test_instantiations_may_run_concurrently():
    from pytyr.ir.validate import load_graph
    from pytyr.lean import LeanSignatures
    run = json.loads(Path("examples/gpt/config.json").read_text())
    cfg = {**run["model"], "b": run["train"]["batch"], "t": run["task"]["seq"]}
    cfg["c"]["n_layer"] = 2
    prog = load("examples/gpt/GPT.lean")
    serial = instantiate_model(prog, "gpt", cfg).to_json()
    sigs = LeanSignatures(prog)
    out: list[str] = []

    def work() -> None:
        for _ in range(3):
            g = instantiate_model(prog, "gpt", cfg)
            out.append(load_graph(g.to_json(), sigs).to_json())

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(out) == 12 and all(o == serial for o in out)


def test_programs_may_be_loaded_concurrently(tmp_path):
    from pytyr.lean.program import clear_library_cache
    clear_library_cache()
    bad = tmp_path / "Bad.lean"
    bad.write_text("import Tyr\nopen torch\ndef f (x : T #[1]) : T #[2] := x\n")
    results: list[tuple] = []

    def work() -> None:
        for _ in range(3):
            from pytyr.lean import check_files
            results.append((tuple(str(d) for d in check_files("examples/gpt/GPT.lean")),
                            tuple(d.message for d in check_files(bad))))

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 12 and set(results) == {((), ("type mismatch: 'x' has type T #[1] "
                                                         "but is expected to have type T #[2]",))}


def test_a_model_is_found_with_its_name_position_and_binders():
    # The training engine reads these: name, pos (a pytyr.errors.Pos), params (name, kind, type).
    from pytyr.errors import Pos
    m = load("examples/gpt/GPT.lean").find_model("gpt")
    assert m.name == "gpt" and isinstance(m.pos, Pos) and m.pos.line > 1
    assert [(p.name, p.kind) for p in m.params] == [
        ("c", "explicit"), ("b", "implicit"), ("t", "implicit"), ("h", "explicit"),
        ("p", "explicit"), ("idx", "explicit"), ("targets", "explicit")]
    assert all(p.type is not None for p in m.params)
