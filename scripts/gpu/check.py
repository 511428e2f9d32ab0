"""GPU readiness in one run, sized for 10 minutes on one H100/H200:

    python scripts/gpu/check.py [--dry-run] [--only STEP] [--out DIR] [--peak-flops F]

  suite     the kernel parity suite at real sizes: every contract's cases and 4 randomized
            trials each (python -m pytyr.kernels.suite), limit 200 s
  gpt       the train step of examples/gpt/GPT.lean at GPT-2 small's size (12 layers of 768,
            b 16 x t 1024) against plain nanoGPT (bench/nanogpt.py) with the same weights:
            bf16 autocast, torch.compile on both sides, fused AdamW; limit 180 s
  nanochat  the same for examples/nanochat/NanoChat.lean at examples/nanochat/gpu.json's
            size (depth 12) against bench/plain_nanochat.py, Muon + AdamW; limit 180 s

Each model step prints ms per step, tokens/s and the model FLOPs utilisation (MFU) of both
sides against --peak-flops (default 989e12, dense bf16 of an H100/H200 SXM), plain/tyr, and
the first step's loss on both sides. Each step runs in a process of its own under its limit;
the run goes on after a failed step and exits 1 if any failed. Results: DIR/check.json and a
log per step (DIR: --out, else $OUT, else runs/gpu).

--dry-run runs the same code on the CPU at tiny sizes (the `copy` contract in Triton's
interpreter; models of two small layers; torch.compile with the aot_eager backend, which
traces as inductor would but generates no code): what CI runs (tests/test_gpu_check.py), so
that the real run's code is known to work before a GPU is had. Nothing here has run on a GPU.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
PEAK_FLOPS = 989e12
LIMITS_S = {"suite": 200, "gpt": 180, "nanochat": 180}
STEPS, WARMUP = 20, 5  # timed steps after the compiling ones, per side


def gpt_sizes(dry: bool) -> dict[str, Any]:
    if dry:
        c = {"vocab": 64, "block": 32, "n_layer": 2, "n_head": 2, "head_dim": 16}
        return {"c": {**c, "dropout": 0.0}, "b": 2, "t": 32}
    c = {"vocab": 50304, "block": 1024, "n_layer": 12, "n_head": 12, "head_dim": 64}
    return {"c": {**c, "dropout": 0.0}, "b": 16, "t": 1024}


def nanochat_sizes(dry: bool) -> dict[str, Any]:
    """January's layout (the one bench/plain_nanochat.py writes plainly) at gpu.json's sizes,
    with January's optimizer (examples/nanochat/january.json)."""
    cfg = json.loads((ROOT / "examples" / "nanochat" / "gpu.json").read_text())
    train = json.loads((ROOT / "examples" / "nanochat" / "january.json").read_text())["train"]
    if dry:
        c = {"vocab": 256, "pad_vocab_to": 64, "block": 32, "depth": 2, "aspect_ratio": 16,
             "head_dim": 16, "n_kv_head": 1, "rope_base": 10000.0, "softcap": 15.0}
        b, t = 2, 32
    else:
        c, b, t = dict(cfg["model"]["c"]), cfg["train"]["micro_batch"], cfg["task"]["seq"]
    c.update(window=c["block"], qk_scale=1.0, extras=0)  # January's: no window, no extras
    return {"c": c, "b": b, "t": t, "train": train}


def gpt_flops_per_token(c: dict[str, Any], t: int) -> float:
    """Training FLOPs per token as PaLM counts them: 6 per weight a token flows through (the
    position table is a lookup; the tied head counts once) plus 12 · layers · width · t."""
    w = c["n_head"] * c["head_dim"]
    return 6.0 * (c["n_layer"] * 12 * w * w + c["vocab"] * w) + 12.0 * c["n_layer"] * w * t


def _build(step: str, dry: bool) -> tuple[Any, Any, dict[str, Any], float]:
    """(tyr module, plain module, sizes, FLOPs per token), on the CPU, the same weights."""
    if step == "gpt":
        from bench.gpt import build_pair
        v = gpt_sizes(dry)
        tyr, plain = build_pair(v)
        return tyr, plain, v, gpt_flops_per_token(v["c"], v["t"])
    from bench.nanochat import build_pair, flops_per_token
    v = nanochat_sizes(dry)
    tyr, plain = build_pair(v["c"], v["b"], v["t"])
    return tyr, plain, v, flops_per_token(v["c"], v["t"])


def _optimizers(step: str, module: Any, side: str, v: dict[str, Any], device: Any) -> list:
    import torch

    from pytyr.config import load_dataclass
    from pytyr.train.optim import make_optimizers, param_groups
    from pytyr.train.settings import TrainConfig

    if step == "gpt" and side == "plain":  # nanoGPT: AdamW, fused where torch has it
        fused = device.type == "cuda"
        return [torch.optim.AdamW(param_groups(module, 0.1), lr=6e-4, betas=(0.9, 0.95),
                                  fused=fused)]
    table = v.get("train", {"lr": 6e-4, "beta1": 0.9, "beta2": 0.95, "weight_decay": 0.1})
    table = {k: x for k, x in table.items() if k not in ("device", "precision")}
    return make_optimizers(module, load_dataclass(TrainConfig, table, "check"), device)


def model_step(step: str, dry: bool, peak: float) -> dict[str, Any]:
    """Both sides compiled, stepping in turn: ms per step, tokens/s, MFU, first losses."""
    import torch

    device = torch.device("cpu" if dry else "cuda")
    tyr, plain, v, fpt = _build(step, dry)
    mods = {"tyr": tyr.to(device), "plain": plain.to(device)}
    opts = {s: _optimizers(step, m, s, v, device) for s, m in mods.items()}
    backend = "aot_eager" if dry else "inductor"
    fwd = {s: torch.compile(m, backend=backend) for s, m in mods.items()}
    gen = torch.Generator().manual_seed(0)
    vocab, b, t = v["c"]["vocab"], v["b"], v["t"]
    data = [tuple(torch.randint(0, vocab, (b, t), generator=gen).to(device) for _ in range(2))
            for _ in range(4)]

    def one(side: str, i: int) -> tuple[float, float]:
        x, y = data[i % len(data)]
        if device.type == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        with torch.autocast(device.type, dtype=torch.bfloat16):
            loss = fwd[side](x, y)[1]
        for o in opts[side]:
            o.zero_grad(set_to_none=True)
        loss.backward()
        for o in opts[side]:
            o.step()
        if device.type == "cuda":
            torch.cuda.synchronize()
        return time.perf_counter() - t0, float(loss.detach())

    times: dict[str, list[float]] = {"tyr": [], "plain": []}
    first: dict[str, float] = {}
    compile_s: dict[str, float] = {}
    steps, warmup = (3, 1) if dry else (STEPS, WARMUP)
    for i in range(warmup + steps):
        for side in (("tyr", "plain") if i % 2 == 0 else ("plain", "tyr")):
            dt, loss = one(side, i)
            if i == 0:
                first[side], compile_s[side] = loss, dt
            elif i >= warmup:
                times[side].append(dt)
    tokens = b * t
    out: dict[str, Any] = {"sizes": {k: v[k] for k in ("c", "b", "t")}, "device": str(device),
                           "backend": backend, "flops_per_token": fpt, "peak_flops": peak,
                           "first_loss": first, "first_step_s": compile_s}
    for side, ts in times.items():
        sec = statistics.median(ts)
        out[side] = {"ms": sec * 1e3, "tokens_per_s": tokens / sec,
                     "mfu": tokens * fpt / sec / peak}
    out["ratio"] = statistics.median(p / q for p, q in zip(times["plain"], times["tyr"]))
    return out


def suite_step(dry: bool) -> dict[str, Any]:
    """The parity suite, one process per contract; a failed contract fails the step."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    if dry:
        env["TRITON_INTERPRET"] = "1"
    names = ["copy"] if dry else subprocess.run(
        [sys.executable, "-m", "pytyr.kernels.suite", "--list"], env=env, cwd=ROOT,
        capture_output=True, text=True, check=True).stdout.split()
    results = {}
    for name in names:
        done = subprocess.run([sys.executable, "-m", "pytyr.kernels.suite", "--suite", name,
                               "--scale", "small" if dry else "real", "--trials",
                               "0" if dry else "4"], env=env, cwd=ROOT, capture_output=True,
                              text=True)
        print(done.stdout, end="", flush=True)
        results[name] = {"ok": done.returncode == 0,
                         "summary": (done.stdout.strip().splitlines() or [""])[-1]}
    return {"suites": results, "ok": all(r["ok"] for r in results.values())}


def _print_model(name: str, r: dict[str, Any]) -> None:
    c = r["sizes"]
    print(f"{name} on {r['device']} ({r['backend']}), b {c['b']} x t {c['t']}, "
          f"{r['flops_per_token']:.3g} FLOPs/token; first losses tyr "
          f"{r['first_loss']['tyr']:.4f}, plain {r['first_loss']['plain']:.4f}")
    for side in ("tyr", "plain"):
        s = r[side]
        print(f"  {side:5s} {s['ms']:8.2f} ms/step  {s['tokens_per_s']:>12,.0f} tokens/s  "
              f"MFU {s['mfu']:.1%} of {r['peak_flops']:.3g} FLOP/s")
    print(f"  plain/tyr {r['ratio']:.3f}")


def run_step(name: str, dry: bool, peak: float, out: Path) -> None:
    """One step in this process: its result to out/NAME.json."""
    if name == "suite":
        result = suite_step(dry)
    else:
        result = model_step(name, dry, peak)
        _print_model(name, result)
        first = result["first_loss"]
        # the same weights and batch: the first losses agree to bf16 autocast's rounding
        result["ok"] = abs(first["tyr"] - first["plain"]) <= 0.05 * abs(first["plain"])
    (out / f"{name}.json").write_text(json.dumps(result, indent=1) + "\n")
    if not result["ok"]:
        sys.exit(1)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="scripts/gpu/check.py", description=__doc__.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=__doc__.split("\n", 2)[2])
    p.add_argument("--dry-run", action="store_true", help="tiny sizes on the CPU (CI)")
    p.add_argument("--only", action="append", choices=list(LIMITS_S), metavar="STEP")
    p.add_argument("--out", type=Path, default=Path(os.environ.get("OUT") or ROOT / "runs/gpu"))
    p.add_argument("--peak-flops", type=float, default=PEAK_FLOPS)
    p.add_argument("--step", choices=list(LIMITS_S), help=argparse.SUPPRESS)  # a child
    args = p.parse_args(argv)
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    args.out.mkdir(parents=True, exist_ok=True)
    if args.step:
        run_step(args.step, args.dry_run, args.peak_flops, args.out)
        return 0
    if not args.dry_run:
        import torch
        if not torch.cuda.is_available():
            print("check.py: no CUDA device here; this run is for a GPU (--dry-run: the CPU)",
                  file=sys.stderr)
            return 2
    status = {}
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}
    for name in args.only or list(LIMITS_S):
        limit = LIMITS_S[name]
        print(f"=== {name} (limit {limit} s)", flush=True)
        t0 = time.perf_counter()
        cmd = [sys.executable, str(Path(__file__).resolve()), "--step", name, "--out",
               str(args.out), "--peak-flops", str(args.peak_flops)]
        with open(args.out / f"{name}.log", "w") as log:
            try:
                done = subprocess.run(cmd + (["--dry-run"] if args.dry_run else []), env=env,
                                      cwd=ROOT, stdout=subprocess.PIPE, stderr=log, text=True,
                                      timeout=limit)
                rc = done.returncode
                print(done.stdout, end="")
                log.write(done.stdout)
            except subprocess.TimeoutExpired:
                rc = 124
        status[name] = rc
        print(f"=== {name}: exit {rc} after {time.perf_counter() - t0:.0f} s", flush=True)
    summary = {"dry_run": args.dry_run, "status": status}
    for name in status:
        f = args.out / f"{name}.json"
        if f.is_file():
            summary[name] = json.loads(f.read_text())
    (args.out / "check.json").write_text(json.dumps(summary, indent=1) + "\n")
    print("steps: " + " ".join(f"{k}={v}" for k, v in status.items()))
    return 0 if all(v == 0 for v in status.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
