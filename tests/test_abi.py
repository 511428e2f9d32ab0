"""The C ABI loader (pytyr.abi) against small C libraries compiled here from cc/tyr.h.

No Lean toolchain is needed: `FAKE_LIB` implements the header and serves graphs that the
Python checker produced, embedded in its source when the test builds it. Variants of it
(macros) break one rule each: a wrong ABI version, a missing symbol, a bad model list.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
from pathlib import Path

import pytest
import torch

from pytyr.abi import loader
from pytyr.abi.loader import ModelLibrary, open_library
from pytyr.errors import AbiError

ROOT = Path(__file__).resolve().parents[1]
MLP = ROOT / "examples" / "mlp" / "MLP.lean"
CFG = {"c": {"inputs": 2, "hidden": 16, "classes": 3}, "b": 32}
CFG_WIDE = {"c": {"inputs": 2, "hidden": 64, "classes": 3}, "b": 128}

FAKE_LIB = r"""
/* A Tyr model library without Lean: it serves graphs embedded by tests/test_abi.py. */
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tyr.h"

#ifndef FAKE_VERSION
#define FAKE_VERSION TYR_ABI_VERSION
#endif

struct served { const char *model, *config, *graph; };
static const struct served SERVED[] = {
@SERVED@
};
static const char MODELS[] = @MODELS@;

static atomic_size_t live;
static _Thread_local char err[512];

static int32_t fail(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, sizeof err, fmt, ap);
    va_end(ap);
    return TYR_ERROR;
}

static int32_t give(const char *data, size_t len, uint8_t **out, size_t *out_len) {
    uint8_t *buf = malloc(len ? len : 1);
    if (buf == NULL)
        return fail("out of memory");
    memcpy(buf, data, len);
    atomic_fetch_add(&live, 1);
    *out = buf;
    *out_len = len;
    return TYR_OK;
}

#ifndef FAKE_NO_VERSION
uint32_t tyr_abi_version(void) { return FAKE_VERSION; }
#endif

int32_t tyr_list_models(uint8_t **out, size_t *out_len) {
    err[0] = '\0';
    *out = NULL;
    *out_len = 0;
#ifdef FAKE_BAD_LIST
    static const char bad[] = "{\"models\": 3}";
    return give(bad, sizeof bad - 1, out, out_len);
#else
    return give(MODELS, sizeof MODELS - 1, out, out_len);
#endif
}

int32_t tyr_model_graph(const char *name, const uint8_t *config, size_t config_len,
                        uint8_t **out, size_t *out_len) {
    err[0] = '\0';
    *out = NULL;
    *out_len = 0;
    if (strcmp(name, "garbage") == 0) {
        static const char junk[] = "\377\376{\"format\": tyr";
        return give(junk, sizeof junk - 1, out, out_len);
    }
    if (strcmp(name, "nothing") == 0)
        return TYR_OK; /* breaks the contract: success without a buffer */
    if (strcmp(name, "error_with_buffer") == 0) {
        give("stray", 5, out, out_len); /* breaks the contract: a buffer on failure */
        return fail("refused, but left a buffer behind");
    }
    if (strcmp(name, "echo_error") == 0) {
        /* The error text is this thread's config; yield so that threads interleave. */
        snprintf(err, sizeof err, "config was %.*s", (int)config_len, (const char *)config);
        sched_yield();
        return 7;
    }
    int known = 0;
    for (size_t i = 0; i < sizeof SERVED / sizeof SERVED[0]; i++) {
        if (strcmp(name, SERVED[i].model) != 0)
            continue;
        known = 1;
        if (strlen(SERVED[i].config) == config_len &&
            memcmp(SERVED[i].config, config, config_len) == 0)
            return give(SERVED[i].graph, strlen(SERVED[i].graph), out, out_len);
    }
    if (known)
        return fail("model '%s' has no graph for the config %.*s", name, (int)config_len,
                    (const char *)config);
    return fail("no model named '%s' (models: %s)", name, MODELS);
}

const char *tyr_last_error(void) { return err; }

#ifndef FAKE_NO_FREE
void tyr_free(uint8_t *buf) {
    if (buf == NULL)
        return;
    free(buf);
    atomic_fetch_sub(&live, 1);
}
#endif

size_t tyr_live_buffers(void) { return atomic_load(&live); }
"""

VARIANTS = {
    "good": [],
    "v2": ["-DFAKE_VERSION=2"],
    "no_free": ["-DFAKE_NO_FREE"],
    "no_version": ["-DFAKE_NO_VERSION"],
    "bad_list": ["-DFAKE_BAD_LIST"],
}


def _c_string(text: str) -> str:
    """A C string literal of `text`; octal escapes, which never run into the next character."""
    out = []
    for b in text.encode("utf-8"):
        ch = chr(b)
        out.append(ch if 32 <= b < 127 and ch not in '"\\?' else f"\\{b:03o}")
    return '"' + "".join(out) + '"'


def _canonical(config: dict) -> str:
    return json.dumps(config, sort_keys=True, separators=(",", ":"))


def _compiler() -> str | None:
    for cand in (os.environ.get("CC"), "cc", "gcc", "clang"):
        if cand and shutil.which(cand):
            return cand
    return None


@pytest.fixture(scope="session")
def checker_graphs() -> dict[str, dict]:
    """Graphs of the MLP example made by the Python checker, as the IR documents it emits."""
    from pytyr.pipeline import graph_from_lean

    return {name: graph_from_lean(MLP, "mlp", cfg).to_dict()
            for name, cfg in (("small", CFG), ("wide", CFG_WIDE))}


@pytest.fixture(scope="session")
def libs(tmp_path_factory, checker_graphs) -> dict[str, Path]:
    cc = _compiler()
    if cc is None:
        pytest.skip("no C compiler (cc, gcc or clang) on PATH: the ABI tests build their test "
                    "libraries from C")
    bad = json.loads(json.dumps(checker_graphs["small"]))
    bad["nodes"][-1]["shape"] = [1]  # the loss is a scalar: the validator must object
    served = [("mlp", _canonical(CFG), checker_graphs["small"]),
              ("mlp", _canonical(CFG_WIDE), checker_graphs["wide"]),
              ("badir", "{}", bad)]
    table = ",\n".join(f"    {{{_c_string(m)}, {_c_string(c)}, {_c_string(json.dumps(g))}}}"
                       for m, c, g in served)
    models = json.dumps(["mlp", "badir", "garbage", "nothing", "error_with_buffer", "echo_error"])
    src_text = FAKE_LIB.replace("@SERVED@", table).replace("@MODELS@", _c_string(models))
    out = tmp_path_factory.mktemp("abi")
    src = out / "fake_models.c"
    src.write_text(src_text, encoding="utf-8")
    built = {}
    for name, flags in VARIANTS.items():
        lib = out / f"libfake_{name}.so"
        cmd = [cc, "-std=c11", "-Wall", "-Wextra", "-Werror", "-shared", "-fPIC", "-pthread",
               f"-I{ROOT / 'cc'}", *flags, "-o", str(lib), str(src)]
        res = subprocess.run(cmd, capture_output=True, text=True)
        assert res.returncode == 0, f"{' '.join(cmd)}\n{res.stderr}"
        built[name] = lib
    return built


@pytest.fixture
def good(libs) -> ModelLibrary:
    lib = open_library(libs["good"])
    assert lib.live_buffers() == 0
    yield lib
    assert lib.live_buffers() == 0, "a buffer of the library was not freed"


# ---- the header is the one source of the ABI ------------------------------------------------

def test_cdef_and_version_come_from_the_header():
    text = loader.header_path().read_text(encoding="utf-8")
    cdef = loader.cdef_from_header(text)
    for sym in loader.SYMBOLS:
        assert f" {sym}(" in cdef or f"*{sym}(" in cdef, sym
    assert "#" not in cdef and "/*" not in cdef and "//" not in cdef
    assert loader.abi_version() == loader.abi_version_from_header(text) == 1


def test_cdef_without_markers_is_a_clear_error():
    with pytest.raises(AbiError, match="cdef markers"):
        loader.cdef_from_header("uint32_t tyr_abi_version(void);")


# ---- a good library -------------------------------------------------------------------------

def test_lists_models_and_serves_the_checkers_graphs(good, checker_graphs, signatures):
    assert good.abi_version == 1
    assert good.models()[:2] == ["mlp", "badir"]
    g = good.graph("mlp", CFG, signatures)
    assert g.to_dict() == checker_graphs["small"]
    wide = good.graph("mlp", CFG_WIDE)  # default signatures: the shipped Lean library
    assert wide.to_dict() == checker_graphs["wide"]
    assert open_library(str(good.path)) is good  # opened once per process


def test_an_error_returned_by_the_library_names_the_library_and_its_text(good, libs):
    with pytest.raises(AbiError) as err:
        good.graph("gpt9", CFG)
    msg = str(err.value)
    assert str(libs["good"]) in msg and "no model named 'gpt9'" in msg
    with pytest.raises(AbiError, match=r"has no graph for the config \{\"b\":7\}"):
        good.graph("mlp", {"b": 7})


@pytest.mark.parametrize("model, expected", [
    ("garbage", "fails validation"),
    ("badir", r"declared shape \[1\] but the signature gives \[\]"),
    ("nothing", "reported success but returned no buffer"),
    ("error_with_buffer", "refused, but left a buffer behind"),
])
def test_bad_results_are_errors_and_every_buffer_is_freed(good, libs, model, expected):
    with pytest.raises(AbiError, match=expected) as err:
        good.graph(model, {})
    assert str(err.value).startswith(f"{libs['good']}: ")


def test_config_must_be_json(good):
    with pytest.raises(AbiError, match="must be a JSON object"):
        good.graph_bytes("mlp", [1, 2])  # type: ignore[arg-type]
    with pytest.raises(AbiError, match="not JSON"):
        good.graph_bytes("mlp", {"x": float("nan")})
    with pytest.raises(AbiError, match="NUL"):
        good.graph_bytes("ml\0p", {})


def test_ten_thousand_loads_leave_no_buffer_behind(good):
    cfg = dict(CFG)
    for i in range(10_000):
        if i % 10 == 0:  # every tenth one validated too (0.6 ms each)
            assert good.graph("mlp", cfg).model == "mlp"
        else:
            assert good.graph_bytes("mlp", cfg)
        if i % 100 == 0:
            good.models()
            with pytest.raises(AbiError):
                good.graph_bytes("nothing" if i % 200 else "error_with_buffer", {})
    assert good.live_buffers() == 0


def test_last_error_is_per_thread(good):
    failures: list[str] = []

    def worker(k: int) -> None:
        for i in range(300):
            try:
                good.graph_bytes("echo_error", {"thread": k, "i": i})
            except AbiError as err:
                if f'config was {{"i":{i},"thread":{k}}}' not in str(err):
                    failures.append(str(err))
            else:
                failures.append("no error")

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures, failures[:3]


# ---- libraries that must be refused ---------------------------------------------------------

def test_wrong_abi_version_is_refused_before_any_other_call(libs):
    with pytest.raises(AbiError, match="speaks Tyr ABI version 2, but this pytyr speaks "
                                       "version 1") as err:
        open_library(libs["v2"])
    assert str(libs["v2"]) in str(err.value)


def test_missing_symbol(libs):
    with pytest.raises(AbiError, match="does not export tyr_free, which ABI version 1 requires"):
        open_library(libs["no_free"])
    with pytest.raises(AbiError, match="not a Tyr model library: it does not export "
                                       "tyr_abi_version"):
        open_library(libs["no_version"])


def test_bad_model_list(libs):
    lib = open_library(libs["bad_list"])
    with pytest.raises(AbiError, match="must return a JSON array of strings"):
        lib.models()
    assert lib.live_buffers() == 0


def test_missing_or_unloadable_files(tmp_path):
    with pytest.raises(AbiError, match=r"nope\.so: cannot load the model library: the file "
                                       "does not exist"):
        open_library(tmp_path / "nope.so")
    with pytest.raises(AbiError, match="is a directory"):
        open_library(tmp_path)
    text = tmp_path / "libtext.so"
    text.write_text("not a shared library\n")
    with pytest.raises(AbiError, match=r"libtext\.so: cannot load the model library: "):
        open_library(text)


# ---- tyr train --lib / tyr run --lib -------------------------------------------------------

def _tyr(argv: list[str]) -> int:
    from pytyr.cli import main

    return main(argv)


def test_tyr_train_trains_a_model_from_a_library(libs, tmp_path, capsys):
    cfg = tmp_path / "cfg.json"
    cfg.write_text(json.dumps({
        "model": CFG, "task": {"name": "classification", "train_size": 256, "test_size": 64},
        "train": {"lr": 0.01, "batch": CFG["b"], "max_iters": 5, "eval_interval": 5},
        "out": str(tmp_path / "run")}))
    assert _tyr(["train", "--lib", str(libs["good"]), "--model", "mlp", "--config", str(cfg),
                 "-q"]) == 0
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert metrics["steps"] == 5 and "val_accuracy" in metrics["final"]
    run = json.loads((tmp_path / "run" / "run.json").read_text())
    assert run["origin"] == {"lib": str(libs["good"])}


def test_tyr_run_runs_a_library_model_forward(libs, tmp_path, capsys):
    from pytyr.safetensors import load_file, write_file

    b = CFG["b"]
    write_file({"x": torch.randn(b, CFG["c"]["inputs"]), "y": torch.zeros(b, dtype=torch.int64)},
               tmp_path / "in.safetensors")
    args = ["run", "--lib", str(libs["good"]), "--model", "mlp", "--inputs",
            str(tmp_path / "in.safetensors"), "-o", str(tmp_path / "out.safetensors")]
    sets = [x for k, v in CFG["c"].items() for x in ("--set", f"model.c.{k}={v}")]
    assert _tyr(args + sets + ["--set", f"model.b={b}"]) == 0
    out = load_file(tmp_path / "out.safetensors")
    assert list(out["out0"].shape) == [b, CFG["c"]["classes"]] and out["out1"].ndim == 0


def test_library_problems_are_one_line(libs, tmp_path, capsys):
    cfg = ["--set", "task.name=classification", "--set", "model.b=32", "--set", "train.batch=32",
           "--set", f"out={tmp_path / 'run'}"]  # not runs/gpt, which `make train` may hold
    assert _tyr(["train", "--lib", str(libs["v2"]), "--model", "mlp", *cfg]) == 1
    assert "speaks Tyr ABI version 2" in capsys.readouterr().err
    assert _tyr(["train", "--lib", str(libs["good"]), "--model", "gpt", *cfg]) == 1
    assert "no model named 'gpt'" in capsys.readouterr().err
