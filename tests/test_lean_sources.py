"""`Program.sources`: an editor's unsaved text is checked instead of the file (imports too),
and each program keeps its own modules when the checked library is reused."""
from __future__ import annotations

from pytyr.lean.program import Program

LIB = "def width : Nat := 8\n"
MAIN = "import Lib\n\ndef twice : Nat := width + width\n"


def _load(path, sources=None) -> Program:
    prog = Program()
    prog.sources = dict(sources or {})
    prog.load_file(path)
    return prog


def test_unsaved_text_is_checked_instead_of_the_file(tmp_path):
    main = tmp_path / "Main.lean"
    main.write_text("def x : Nat := 1\n")
    prog = _load(main, {str(main.resolve()): "def x : Nat := \"one\"\n"})
    assert [d.message.split(":")[0] for d in prog.diagnostics] == ["type mismatch"]
    assert _load(main).diagnostics == []


def test_an_import_reads_the_unsaved_text_even_of_a_missing_file(tmp_path):
    main = tmp_path / "Main.lean"
    main.write_text(MAIN)
    assert "unknown module 'Lib'" in str(_load(main).diagnostics)
    prog = _load(main, {str((tmp_path / "Lib.lean").resolve()): LIB})
    assert prog.diagnostics == [] and "twice" in prog.env
    bad = _load(main, {str((tmp_path / "Lib.lean").resolve()): "def width : Nat := \"w\"\n"})
    assert [d.pos.line for d in bad.diagnostics] == [1]


def test_a_file_open_only_in_the_editor_is_checked(tmp_path):
    ghost = tmp_path / "Ghost.lean"
    assert "file not found" in str(_load(ghost).diagnostics)
    assert _load(ghost, {str(ghost.resolve()): LIB}).diagnostics == []


def test_each_program_keeps_its_own_module_when_the_library_is_reused(tmp_path):
    main = tmp_path / "M.lean"
    main.write_text("import Tyr\n\ndef a : Nat := 1\n")
    first = _load(main)
    main.write_text("import Tyr\n\ndef a : Nat := 1\n\ndef b : Nat := 2\n")
    second = _load(main)  # the library comes from the first program's cache
    assert [c.name for c in first.modules[main].commands] == ["a"]
    assert [c.name for c in second.modules[main].commands] == ["a", "b"]
    assert second.modules[main] is not first.modules[main]
