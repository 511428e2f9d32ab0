"""`tyr`: check Lean model files, build their graphs, train, run, sample and export them.

Every command that takes a model reads one config (a JSON object with tables `model`, `task`,
`train`, `sample`, `out`: the `config.json` beside the model, or `--config FILE`) and the same
`--set TABLE.KEY=VALUE` overrides, checked before any work. Errors are one line:
`tyr <command>: <what is wrong, and where>` (Lean errors: `file:line:col: error: ...`).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any, NoReturn

from .config import merge, parse_set, read_json, refuse_unread
from .errors import ConfigError, Interrupted, LeanError, TyrError
from .export.commands import register as register_export
from .generate.commands import register as register_generate
from .paths import input_file
from .sampling import register_sampling


class Parser(argparse.ArgumentParser):
    """argparse with one-line errors (`tyr train: error: ...`) instead of usage dumps."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see `{self.prog} --help`)\n")


def _sub(sub: Any, name: str, help: str, description: str, examples: str) -> argparse.ArgumentParser:
    return sub.add_parser(name, help=help, description=description,
                          epilog="examples:\n" + examples,
                          formatter_class=argparse.RawDescriptionHelpFormatter)


# -- model sources and configs --------------------------------------------------------------

def _source(args: argparse.Namespace) -> Any:
    if getattr(args, "lib", None):
        from .abi import LibraryModels

        input_file(args.lib, "model library")
        return LibraryModels(args.lib)
    if not getattr(args, "file", None):
        raise ConfigError("give a Lean file (FILE.lean) or a model library (--lib LIB)")
    from .pipeline import LeanModels

    input_file(args.file, "Lean file")
    return LeanModels(args.file)


def _config(args: argparse.Namespace, *, required: bool) -> tuple[dict[str, Any], str]:
    """The merged config (file, then --set) and where it came from."""
    path = Path(args.config) if args.config else None
    if path is None and getattr(args, "file", None):
        beside = Path(args.file).parent / "config.json"
        path = beside if required or beside.is_file() else None
    cfg: dict[str, Any] = read_json(path, "config") if path is not None else {}
    cfg = merge(cfg, parse_set(args.set or []))
    return cfg, str(path) if path is not None else "the command line"


def _explicit(args: argparse.Namespace) -> dict[str, Any]:
    """What the command line says: --config's file, then --set."""
    return merge(read_json(Path(args.config), "config") if args.config else {},
                 parse_set(args.set or []))


def _add_source(p: argparse.ArgumentParser, *, file_required: bool = False,
                model_help: str = "the @[model] to use") -> None:
    p.add_argument("file", nargs=None if file_required else "?", metavar="FILE.lean",
                   help="the Lean file that defines the model")
    if not file_required:
        p.add_argument("--lib", metavar="LIB", help="a compiled model library instead (C ABI)")
    p.add_argument("--model", required=model_help == "the @[model] to use", help=model_help)


def _add_config(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", metavar="FILE", help="the run config (default: config.json "
                   "beside FILE.lean)")
    p.add_argument("--set", action="append", metavar="TABLE.KEY=VALUE",
                   help="override a config value, e.g. train.lr=3e-4 or model.c.n_layer=2")


def _add_checkpoint(p: argparse.ArgumentParser) -> None:
    p.add_argument("--checkpoint", choices=["best", "last"], default="best",
                   help="a run's weights: best (the lowest validation loss; the default, where "
                        "the run has one) or last (the last step's)")


# -- commands -------------------------------------------------------------------------------

def cmd_check(args: argparse.Namespace) -> int:
    from .lean import check_files

    for f in args.files:
        input_file(f, "Lean file")
    t0 = time.perf_counter()
    diags = check_files(*args.files)
    for d in diags:
        print(d, file=sys.stderr)
    ms = (time.perf_counter() - t0) * 1e3
    if diags:
        print(f"{len(diags)} error{'s' if len(diags) != 1 else ''} in {len(args.files)} file(s)",
              file=sys.stderr)
        return 1
    print(f"ok: {len(args.files)} file(s) checked in {ms:.0f} ms")
    return 0


def cmd_graph(args: argparse.Namespace) -> int:
    from .train.run import graph_values

    refuse_unread(args.set, "graph", ("model", "task", "train"))
    source = _source(args)
    cfg, where = _config(args, required=False)
    graph = source.graph(args.model, graph_values(source, args.model, cfg, where, data=True))
    if args.explain:
        from .exec.kernels import explain_text

        print(explain_text(graph, mode=args.kernels, device=args.device))
        return 0
    text = graph.to_json(indent=1)
    if args.output:
        from .atomic import atomic_write_text
        from .paths import output_file

        atomic_write_text(output_file(args.output, "graph file"), text + "\n")
        print(f"wrote {args.output}: {len(graph.nodes)} nodes, {len(graph.params)} parameters")
    else:
        print(text)
    return 0


def cmd_validate(args: argparse.Namespace) -> int:
    from .ir.validate import load_graph
    from .lean import LeanSignatures

    path = input_file(args.graph, "graph IR file")
    graph = load_graph(path.read_bytes(), LeanSignatures(), source=str(path))
    print(f"ok: {path}: model '{graph.model}', {len(graph.nodes)} nodes, "
          f"{len(graph.params)} parameters")
    return 0


def cmd_train(args: argparse.Namespace) -> int:
    from .train.pretrained import checkpoint_model, model_from_checkpoint
    from .train.run import train

    family_pick = args.weights is not None and not (args.file or args.lib or args.model)
    hf, args.file, args.model = checkpoint_model(args.weights, args.hf_config, args.file,
                                                 args.lib, args.model, suffix="Train")
    source = _source(args)
    cfg, where = _config(args, required=bool(args.file) and not args.config)
    if args.device:
        cfg = merge(cfg, {"train": {"device": args.device}})
    if family_pick:  # the family's samples decode over its step model's caches, unless set
        step = args.model.removesuffix("Train") + "Step"
        cfg = merge({"sample": {"step_model": step}}, cfg)
    cfg = model_from_checkpoint(cfg, hf, args.file, _explicit(args).get("model", {}))
    return train(source, args.model, cfg, where, resume=args.resume, overwrite=args.overwrite,
                 progress=not args.quiet, init=(args.weights, hf) if args.weights else None)


def cmd_run(args: argparse.Namespace) -> int:
    from .hf import model_values
    from .train.forward import forward_with_weights
    from .train.model import RunModel
    from .train.pretrained import checkpoint_model
    from .train.record import read_run

    refuse_unread(args.set, "run", ("model",))
    # a Hugging Face config.json goes over the example's values, under the command line's;
    # without a Lean file, the checkpoint's family names the file and the model
    hf, args.file, args.model = checkpoint_model(args.weights, args.hf_config, args.file,
                                                 args.lib, args.model, inputs=args.inputs)
    source = _source(args)
    explicit = _explicit(args)
    trained = None
    if args.run:  # the run's values, with --config/--set on top (not the file beside FILE)
        run = read_run(Path(args.run))
        base, base_where = run["values"], f"{args.run}/run.json"
        trained = RunModel.trained(source, run, Path(args.run), args.checkpoint)
    else:
        beside = Path(args.file).parent / "config.json" if args.file and not args.config else None
        on_disk = beside is not None and beside.is_file()
        base = read_json(beside, "config").get("model", {}) if on_disk else {}
        base_where = str(beside)
    over = explicit.get("model", {})
    for table, where in ((base, base_where), (over, args.config or "the command line")):
        if not isinstance(table, dict):
            raise ConfigError(f"{where}: 'model' must be a table")
    for line in hf.describe(over) if hf is not None else []:
        print(line)
    out = Path(args.output)
    model = RunModel(source, args.model, model_values(base, hf, over))
    if trained is not None:
        model = model.with_weights(trained.weights, trained.weights_from)
    outputs = forward_with_weights(model, Path(args.inputs), out, weights_path=args.weights,
                                   hf=hf, ignore=args.ignore_key or [], seed=args.seed)
    shapes = ", ".join(f"{k} {list(v.shape)}" for k, v in outputs.items())
    fresh = trained is None and not args.weights
    print(f"wrote {out}: {shapes}" + (" (freshly initialised weights: give --weights or --run)"
                                      if fresh else ""))
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    from .export.from_nanochat import import_nanochat
    from .pipeline import LeanModels

    input_file(args.lean, "Lean file of the nanochat model")
    out = import_nanochat(LeanModels(args.lean), Path(args.checkpoint), args.out, args.step,
                          args.overwrite)
    model = json.loads((out / "config.json").read_text())
    logits = "nanochatLogits" if model["model"]["c"]["extras"] else "nanochatJanLogits"
    print(f"wrote {out / 'model.safetensors'} and {out / 'config.json'}; run it with\n"
          f"  tyr run {args.lean} --model {logits} --config {out / 'config.json'} "
          f"--weights {out / 'model.safetensors'} --inputs IDX.safetensors")
    return 0


def build_parser() -> argparse.ArgumentParser:
    from .hf import mapping_help  # no torch: the tables are data
    p = Parser(prog="tyr", description="Shape-typed models in Lean 4, run on PyTorch.",
               epilog="`tyr COMMAND --help` shows each command's options and examples.")
    sub = p.add_subparsers(dest="command", required=True, parser_class=Parser)
    c = _sub(sub, "check", "type-check Lean files of the Tyr subset",
             "Type-check Lean files with the Tyr checker; errors are located (file:line:col).",
             "  tyr check examples/gpt/GPT.lean\n  tyr check Tyr.lean Tyr/*.lean")
    c.add_argument("files", nargs="+", metavar="FILE.lean", help="the Lean files to check")
    c.set_defaults(fn=cmd_check)

    g = _sub(sub, "graph", "instantiate a model and print its graph IR",
             "Instantiate a @[model] with the config's values (dims the config's task feeds are "
             "filled in, and fields only its data decides, c.vocab from the corpus, read from "
             "the data as tyr train does when the config leaves them out) and print or write "
             "its validated graph IR.",
             "  tyr graph examples/mlp/MLP.lean --model mlp\n"
             "  tyr graph examples/gpt/GPT.lean --model gpt --set model.c.n_layer=2 -o g.json\n"
             "  tyr graph examples/gpt/GPT.lean --model gpt --explain --device cuda")
    _add_source(g)
    _add_config(g)
    g.add_argument("-o", "--output", metavar="FILE", help="write the IR here instead of stdout")
    g.add_argument("--explain", action="store_true",
                   help="instead of the IR, say which nodes would run a Triton kernel and why")
    g.add_argument("--kernels", choices=["auto", "off", "interpret"], help="for --explain "
                   "(default $TYR_KERNELS or auto)")
    g.add_argument("--device", choices=["cpu", "cuda"], help="for --explain (default: cuda "
                   "where available)")
    g.set_defaults(fn=cmd_graph)

    v = _sub(sub, "validate", "validate a graph IR JSON document",
             "Validate a graph IR document (docs/ir.md) against the Lean op signatures.",
             "  tyr validate graph.json")
    v.add_argument("graph", metavar="GRAPH.json", help="a graph IR document (`tyr graph -o`)")
    v.set_defaults(fn=cmd_validate)

    t = _sub(sub, "train", "train a model on a task (config.json beside the model)",
             "Train a @[model] on the task of its config: the task's inputs are matched to the "
             "model's arguments by type, every config value is checked, then the one engine "
             "trains, evaluates, checkpoints (resumable) and samples.",
             "  tyr train examples/gpt/GPT.lean --model gpt\n"
             "  tyr train examples/gpt/GPT.lean --model gpt --set train.max_iters=4000 --resume\n"
             "  tyr train my/LM.lean --model lm --config lm.json --set task.data=data/mine\n"
             "  tyr train examples/gpt/GPT.lean --model gpt --overwrite   (start runs/gpt over)\n"
             "  tyr train --weights Qwen3-0.6B/ --config tune.json   (fine-tune: qwen3TiedTrain)\n"
             "  torchrun --nproc_per_node=2 -m pytyr.cli train examples/gpt/GPT.lean --model gpt")
    _add_source(t, model_help="the @[model] to train (default, with --weights DIR of a Hugging "
                              "Face checkpoint and no FILE: its family's training model)")
    _add_config(t)
    t.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    again = t.add_mutually_exclusive_group()
    again.add_argument("--resume", action="store_true",
                       help="continue exactly from the checkpoint in the run directory")
    again.add_argument("--overwrite", action="store_true",
                       help="replace the run already in the run directory (without it, a "
                            "fresh run there is refused)")
    t.add_argument("--device", choices=["cpu", "cuda", "auto"],
                   help="where to train (same as --set train.device=…; default auto)")
    t.add_argument("--weights", metavar="PATH", help="start from a checkpoint (as `tyr run`'s)")
    t.add_argument("--hf-config", metavar="FILE", help="as `tyr run --hf-config`")
    t.set_defaults(fn=cmd_train)

    r = _sub(sub, "run", "run a model forward on inputs from a safetensors file",
             "Run a @[model] forward: its inputs are the tensors of a safetensors file, keyed by "
             "argument name (the model's dims follow from their shapes); the outputs are "
             "written as safetensors (out0, out1, ...). Weights come from --weights (a file or "
             "checkpoint directory) or --run (a `tyr train` run directory, whose config values "
             "are used too).",
             "  tyr run examples/gpt/GPT.lean --model gptLogits --run runs/gpt "
             "--inputs idx.safetensors -o logits.safetensors\n"
             "  tyr run --lib build/lib/libTyrModels.so --model mlp --set model.c.inputs=2 "
             "--set model.c.hidden=64 --set model.c.classes=3 --inputs xy.safetensors\n"
             "  tyr run examples/bert/Bert.lean --model bert --weights bert-base-uncased/ "
             "--inputs x.safetensors\n  tyr run --weights Qwen3-0.6B/ --inputs x.safetensors  "
             "(the family's Lean file and model)\n\n" + mapping_help())
    _add_source(r, model_help="the @[model] to use (default, with --weights DIR of a Hugging "
                              "Face checkpoint and no FILE: its family's)")
    _add_config(r)
    r.add_argument("--inputs", required=True, metavar="FILE",
                   help="safetensors file of the model's inputs")
    r.add_argument("--weights", metavar="PATH",
                   help="safetensors file or directory (shards with or without "
                        "model.safetensors.index.json); pickles (pytorch_model.bin) are refused")
    r.add_argument("--hf-config", metavar="FILE",
                   help="a Hugging Face config.json (default: config.json in the --weights "
                        "directory or beside the file); --config and --set win over it")
    r.add_argument("--ignore-key", action="append", metavar="PATTERN",
                   help="leave out the weights' keys this glob matches (repeatable; each must "
                        "match a key); named in the output")
    r.add_argument("--run", metavar="DIR", help="a `tyr train` run directory")
    _add_checkpoint(r)
    r.add_argument("-o", "--output", default="outputs.safetensors", metavar="FILE",
                   help="where to write the outputs (default %(default)s)")
    r.add_argument("--seed", type=int, default=0, help="of fresh weights (without --weights)")
    r.set_defaults(fn=cmd_run)

    register_sampling(sub, _sub, _add_checkpoint)

    register_export(sub, _sub, _add_checkpoint)
    register_generate(sub, _sub)

    im = _sub(sub, "import", "import another framework's checkpoint",
              "Read a checkpoint of nanochat's own (`model_NNNNNN.pt` and `meta_NNNNNN.json` "
              "of its base_train; a directory takes its last step) by nanochat's key names "
              "into the weights of examples/nanochat/NanoChat.lean (today's layout or "
              "January's): OUT/model.safetensors and OUT/config.json. Every missing, "
              "unexpected or mis-shaped key is listed before any tensor is read.",
              "  tyr import nanochat ~/.cache/nanochat/base_checkpoints/d20 out/d20")
    im.add_argument("format", choices=["nanochat"], help="whose checkpoint: nanochat's")
    im.add_argument("checkpoint", metavar="CHECKPOINT", help="a model_NNNNNN.pt or its directory")
    im.add_argument("out", metavar="OUT_DIR", help="the directory to write (new, or an "
                    "earlier output of Tyr's, which is replaced whole)")
    im.add_argument("--overwrite", action="store_true",
                    help="replace OUT_DIR even where it holds files that Tyr did not write")
    im.add_argument("--step", type=int, help="the checkpoint's step (default: the last)")
    im.add_argument("--lean", default="examples/nanochat/NanoChat.lean", metavar="FILE.lean",
                    help="the Lean model (default: %(default)s)")
    im.set_defaults(fn=cmd_import)

    from .data.commands import register as register_data
    from .lsp.commands import register as register_lsp
    from .safetensors.commands import register as register_safetensors

    register_data(sub)
    register_safetensors(sub)
    register_lsp(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    """`tyr`: `argv` None is the process's own command line (`tyr …`, a torchrun rank), its
    Ctrl-C and SIGTERM tyr's; a list, a call from a program (a test) that keeps its Ctrl-C."""
    from .process import launched, own_signals, watch_launcher

    if program := argv is None:
        own_signals()
    if launched():  # a rank of torchrun: gone when the launcher is, even while starting up
        watch_launcher()
    parser = build_parser()
    args = parser.parse_args(argv)
    sub = getattr(args, f"{args.command}_command", None)  # `tyr data prepare`, ...
    name = f"tyr {args.command}" + (f" {sub}" if sub else "")
    if launched():
        from .process import set_command

        set_command(name)
    try:
        return int(args.fn(args) or 0)
    except LeanError as err:
        print(err, file=sys.stderr)  # already `file:line:col: error: ...` lines
        return 1
    except Interrupted as err:  # a run that stopped cleanly: the shell's code for the signal
        if os.environ.get("RANK", "0") == "0":  # said once, by rank 0, under torchrun
            print(f"{name}: {err}", file=sys.stderr)
        return err.exit_code
    except TyrError as err:
        print(f"{name}: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        if not program:
            raise  # the calling program's Ctrl-C (pytest's: the session stops)
        print(f"{name}: interrupted", file=sys.stderr)
        return 130
    except Exception as err:  # a bug of tyr's, not the user's: still one line, no traceback
        if os.environ.get("TYR_DEBUG"):
            raise
        text = " ".join(str(err).split())[:300]
        print(f"{name}: internal error: {type(err).__name__}: {text} (a bug in tyr; "
              "TYR_DEBUG=1 shows the traceback)", file=sys.stderr)
        return 70  # EX_SOFTWARE


if __name__ == "__main__":
    sys.exit(main())
