"""`tyr sample` and `tyr chat`: generating from a trained run directory (or, `tyr sample
--weights DIR`, from a Hugging Face checkpoint through its family's step model).

Both read the run's record, its model source (`source_from_origin`: the Lean file or library
it names) and the `sample` table of `--set` under the command's own options, each text option
refused unless it is UTF-8.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Callable

from pytyr.config import parse_set, refuse_unread
from pytyr.errors import ConfigError
from pytyr.paths import input_file


def source_from_origin(origin: Any, where: str) -> Any:
    """The model source a run's record names: its Lean file or its compiled library."""
    if isinstance(origin, dict) and isinstance(origin.get("file"), str):
        from pytyr.pipeline import LeanModels

        input_file(origin["file"], "Lean file of the run")
        return LeanModels(origin["file"])
    if isinstance(origin, dict) and isinstance(origin.get("lib"), str):
        from pytyr.abi import LibraryModels

        input_file(origin["lib"], "model library of the run")
        return LibraryModels(origin["lib"])
    raise ConfigError(f"{where}: 'origin' names no Lean file or library")


def cmd_sample(args: argparse.Namespace) -> int:
    from pytyr.train.record import read_run
    from pytyr.train.run import sample
    from pytyr.train.tasks import named_task_module

    overrides = _sample_overrides(args, ("prompt", "max_new_tokens", "temperature", "top_k",
                                         "seed"), also=("model",) if args.weights else ("task",))
    if args.weights:  # a checkpoint, no run: its family's step model and tokenizer
        model_table = parse_set(args.set or []).get("model", {})
        print(sample_checkpoint(args.weights, args.hf_config, args.file, args.model, overrides,
                                model_table, say=lambda m: print(m, file=sys.stderr)))
        return 0
    if args.model is not None:
        overrides["model"] = args.model
    module = named_task_module(args.set, "sample")
    run_dir = Path(args.run)
    run = read_run(run_dir)
    source = source_from_origin(run["origin"], f"{run_dir}/run.json")
    made = sample(source, run_dir, overrides, args.checkpoint, module,
                  say=lambda m: print(m, file=sys.stderr))
    if made.text is not None:
        print(made.text)
    for path in made.files:
        print(f"wrote {path}", file=sys.stderr)
    return 0


def sample_checkpoint(weights: str, hf_config: str | None, file: str | None, model: str | None,
                      table: dict[str, Any], explicit: dict[str, Any],
                      say: Callable[[str], None] = print) -> str:
    """`tyr sample --weights DIR`: text from a checkpoint with no run, through its family's
    step model (`model` + `Step`) over the key/value caches, the prompt encoded and the
    tokens decoded by the checkpoint's own `tokenizer.json` (its special tokens as its
    post-processor adds them, as transformers' tokenizer does). `table`: the `sample` options;
    `explicit`: the model table of `--set` (a family's `c.cache`: the caches' positions, the
    context; GPT-2's are its position table's)."""
    from pytyr.config import load_dataclass
    from pytyr.data.tokenizer import load_tokenizer
    from pytyr.hf import UnusedKeys
    from pytyr.pipeline import LeanModels
    from pytyr.train.model import RunModel
    from pytyr.train.pretrained import checkpoint_model, checkpoint_tensors, model_from_checkpoint
    from pytyr.train.tasks.lm.kvcache import generate_cached, step_feeds
    from pytyr.train.tasks.lm.task import TextSampleOptions

    options = load_dataclass(TextSampleOptions, table, "the command line", prefix="sample.")
    hf, file, model = checkpoint_model(weights, hf_config, file, None, model, say=say)
    step = options.step_model or f"{model}Step"
    tokenizer = Path(weights) / "tokenizer.json"
    if not tokenizer.is_file():
        raise ConfigError(f"{tokenizer}: not found; sampling from a checkpoint reads its "
                          f"tokenizer.json (save it with the tokenizer's save_pretrained)")
    tok = load_tokenizer(tokenizer, bos=None).tokenizer
    prompt = tok.encode(options.prompt).ids
    if not prompt:
        raise ConfigError("--prompt encodes to no tokens; give some text")
    values = model_from_checkpoint({}, hf, file, explicit, say=lambda _: None)["model"]
    run = RunModel(LeanModels(file), model, values)
    feeds = step_feeds(run.declaration(step), step)
    graph = run.graph(feeds, {"batch": 1, "seq": 1}, "sampler", step)
    names = {p.path for p in graph.params}
    block = next(i.bound for i in graph.inputs if i.name == "pos")  # the caches' positions
    with checkpoint_tensors(weights) as tensors:
        unused = UnusedKeys(hf.family if hf is not None else None, [], tensors, weights)
        ids = generate_cached(run.with_weights(unused.select(tensors, names), weights), step,
                              prompt, options.max_new_tokens, options.temperature,
                              options.top_k, options.seed, block=block,
                              vocab=tok.get_vocab_size())
    for note in unused.notes:
        say(note)
    return tok.decode(ids)


def _sample_overrides(args: argparse.Namespace, keys: tuple[str, ...],
                      also: tuple[str, ...] = ()) -> dict[str, Any]:
    """The `sample` table of `--set` with the command's own options on top (`also`: other
    tables the command reads from `--set`)."""
    refuse_unread(args.set, args.command, ("sample", *also))
    overrides = parse_set(args.set or []).get("sample", {})
    for key in keys:
        value = getattr(args, key)
        if value is not None:
            overrides[key] = _utf8(value, f"--{key.replace('_', '-')}")
    return overrides


def _utf8(value: Any, option: str) -> Any:
    """A text argument, refused when the bytes given are not UTF-8 (Python carries them as
    lone surrogates, which no tokenizer takes)."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as err:
            raw = value.encode("utf-8", "surrogateescape")
            raise ConfigError(f"{option} is not UTF-8 text (byte 0x{raw[err.start]:02x} at "
                              f"offset {err.start})") from None
    return value


def cmd_chat(args: argparse.Namespace) -> int:
    from pytyr.train.record import describe_checkpoint, read_run, run_threads
    from pytyr.train.tasks import named_task_module
    from pytyr.train.tasks.lm.chat import converse, newest_chat_run, open_chat
    from pytyr.train.threads import threads_kept

    overrides = _sample_overrides(args, ("max_new_tokens", "temperature", "top_k", "seed"),
                                  also=("task",))
    module = named_task_module(args.set, "chat")
    if module is not None and not args.run:
        raise ConfigError("--set task.module names the module of one run: give that run "
                          "with --run DIR")
    run_dir = Path(args.run) if args.run else newest_chat_run(Path("runs"))
    run = read_run(run_dir)
    source = source_from_origin(run["origin"], f"{run_dir}/run.json")
    session = open_chat(source, run_dir, overrides, stop=_utf8(args.stop, "--stop"),
                        checkpoint=args.checkpoint, task_module=module)
    interactive = sys.stdin.isatty()
    if interactive or not args.run:
        print(f"chatting with {describe_checkpoint(run_dir, args.checkpoint)}"
              + ("" if args.run else ", the newest language model under runs/")
              + (" (the model continues your text; Ctrl-D ends)" if interactive else ""),
              file=sys.stderr)

    def write(text: str) -> None:
        sys.stdout.write(text)
        sys.stdout.flush()

    def warn(message: str) -> None:
        print(f"tyr chat: {message}", file=sys.stderr)

    lines = getattr(sys.stdin, "buffer", sys.stdin)  # bytes: a line that is not UTF-8 is named
    with threads_kept(run_threads(run_dir, args.checkpoint)):  # the count training chose
        converse(session, lines, write, warn, prompt="> " if interactive else "")
    return 0


_SET_HELP = ("a sampling option over the run's; task.module=PATH: the task module of your "
             "own the run was trained with (a run directory's code is never imported; "
             "checked by its SHA-256)")


def _add_sampling(p: argparse.ArgumentParser, tokens: str) -> None:
    """The sampling options `tyr sample` and `tyr chat` share; each defaults to the run's
    `sample` table (with --weights: the task's defaults)."""
    p.add_argument("--max-new-tokens", type=int, metavar="N", help=f"{tokens} (default: the "
                   f"run's sample.max_new_tokens)")
    p.add_argument("--temperature", type=float, metavar="T", help="divides the logits before "
                   "sampling; 0 is greedy (always the likeliest token); default: the run's "
                   "sample.temperature")
    p.add_argument("--top-k", type=int, metavar="K", help="sample among the K likeliest tokens "
                   "only (default: the run's sample.top_k)")
    p.add_argument("--seed", type=int, help="of the sampling's random draws: the same seed, "
                   "the same text (default: the run's sample.seed)")


def register_sampling(sub: Any, make_sub: Callable[..., argparse.ArgumentParser],
                      add_checkpoint: Callable[[argparse.ArgumentParser], None]) -> None:
    """`tyr sample` and `tyr chat` on the parser's subcommands (`make_sub`: cli's `_sub`)."""
    s = make_sub(sub, "sample", "generate from a trained run",
             "Generate from the trained weights of a run directory with its task's sampler; "
             "options default to the run's `sample` table.",
             "  tyr sample --run runs/gpt --prompt 'ROMEO:' --max-new-tokens 300\n"
             "  tyr sample --run runs/gpt --set sample.temperature=0.5\n"
             "  tyr sample --weights Qwen3-0.6B/ --prompt 'The capital of France is' "
             "--temperature 0")
    s.add_argument("--run", default="runs/gpt", metavar="DIR",
                   help="output directory of `tyr train` (default %(default)s)")
    s.add_argument("--weights", metavar="DIR", help="a Hugging Face checkpoint instead: its "
                   "family's step model, its tokenizer.json (--set model.c.cache=N: context)")
    s.add_argument("file", nargs="?", metavar="FILE.lean", help="with --weights: its Lean file")
    s.add_argument("--hf-config", metavar="FILE", help="as `tyr run --hf-config`")
    s.add_argument("--prompt", metavar="TEXT", help="the text the sample starts with (default: "
                   "the run's sample.prompt)")
    _add_sampling(s, "tokens to generate")
    s.add_argument("--model", help="the @[model] that gives logits (with --weights: whose "
                   "…Step decodes)")
    s.add_argument("--set", action="append", metavar="sample.KEY=VALUE", help=_SET_HELP)
    add_checkpoint(s)
    s.set_defaults(fn=cmd_sample)

    ch = make_sub(sub, "chat", "talk to a trained language model, a reply per line",
              "Read lines from stdin and answer each with the run's language model, streamed, "
              "over one transcript (key/value-cached where the run has a sample.step_model). "
              "A reply ends at max-new-tokens, at the end of a document, or at --stop. The "
              "models are pretrained on plain text: they continue your text, not follow it.",
              "  tyr chat --run runs/nanochat\n"
              "  echo 'The president said' | tyr chat --run runs/nanochat --temperature 0")
    ch.add_argument("--run", metavar="DIR",
                    help="output directory of `tyr train` of a language model (default: the "
                         "newest one under runs/)")
    _add_sampling(ch, "most tokens per reply")
    ch.add_argument("--stop", metavar="TEXT", help="end a reply where it writes TEXT")
    ch.add_argument("--set", action="append", metavar="sample.KEY=VALUE", help=_SET_HELP)
    add_checkpoint(ch)
    ch.set_defaults(fn=cmd_chat)
