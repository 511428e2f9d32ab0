"""A run's outputs besides the checkpoint: `metrics.json` and the loss curve `loss.png`."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pytyr.atomic import atomic_write, atomic_write_text


def plot_history(history: dict[str, list[dict[str, float]]], path: Path, title: str) -> Any:
    """Per-step training loss (thin), the evaluations' losses per split (markers), and any
    other evaluation metric (accuracy, ...) on a second axis. One legend for both axes,
    outside them (below), so it never covers a curve. Returns the closed figure."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.5, 4.2), dpi=120, layout="constrained")
    steps = history["steps"]
    ax.plot([s["step"] for s in steps], [s["loss"] for s in steps], lw=0.6, alpha=0.5,
            color="tab:blue", label="train (batch)")
    evals = history["evals"]
    keys = sorted({k for e in evals for k in e if k != "step"})
    losses = [k for k in keys if "_" not in k]
    others = [k for k in keys if "_" in k]
    colors = iter(["tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple"])
    for key in losses:
        ax.plot([e["step"] for e in evals if key in e], [e[key] for e in evals if key in e],
                "o-", ms=3, color=next(colors, None), label=f"{key} (eval)")
    handles, labels = ax.get_legend_handles_labels()
    if others:
        ax2 = ax.twinx()
        for key in others:
            ax2.plot([e["step"] for e in evals if key in e], [e[key] for e in evals if key in e],
                     "s--", ms=3, color=next(colors, None), label=key)
        ax2.set_ylabel(", ".join(others))
        more = ax2.get_legend_handles_labels()
        handles, labels = handles + more[0], labels + more[1]
    ax.set_xlabel("step")
    ax.set_ylabel("loss")
    ax.set_title(title)
    fig.legend(handles, labels, loc="outside lower center", ncols=min(len(labels), 4),
               frameon=False, fontsize="small")
    atomic_write(path, lambda f: fig.savefig(f, format="png"))
    plt.close(fig)
    return fig


def write_outputs(out_dir: Path, config: dict[str, Any], history: dict[str, list[dict[str, float]]],
                  tokens_per_s: float | None, title: str) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    plot_history(history, out_dir / "loss.png", f"{title} ({len(history['steps'])} steps)")
    last = history["evals"][-1] if history["evals"] else {}
    metrics = {
        "config": config,
        "steps": len(history["steps"]),
        "final": {k: v for k, v in last.items() if k != "step"},
        "final_train_loss": last.get("train"),
        "final_val_loss": last.get("val"),
        "best_val_loss": min((e["val"] for e in history["evals"] if "val" in e), default=None),
        "tokens_per_s": tokens_per_s,
        "history": history,
    }
    atomic_write_text(out_dir / "metrics.json", json.dumps(metrics, indent=1))
