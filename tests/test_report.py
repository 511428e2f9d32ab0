"""The loss plot: its legend sits outside the axes, so no curve is ever under it."""
from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from matplotlib.backends.backend_agg import FigureCanvasAgg

from pytyr.train.report import plot_history


def _history(n: int, extra: bool, rising: bool):
    steps = [{"step": s, "loss": (2.0 + s / n) if rising else 4.0 / (1 + s)}
             for s in range(1, n + 1)]
    evals = [{"step": s, "train": 3.0 - s / n, "val": 3.1 - s / n,
              **({"val_acc": s / n, "train_acc": s / (n + 1)} if extra else {})}
             for s in range(0, n + 1, max(1, n // 5))]
    return {"steps": steps, "evals": evals}


@settings(max_examples=8, deadline=None)
@given(n=st.integers(2, 300), extra=st.booleans(), rising=st.booleans())
def test_the_legend_never_overlaps_the_axes(tmp_path_factory, n, extra, rising):
    path = tmp_path_factory.mktemp("plot") / "loss.png"
    fig = plot_history(_history(n, extra, rising), path, "gpt on char_lm")
    FigureCanvasAgg(fig).draw()  # the closed figure drawn again, as it was saved
    renderer = fig.canvas.get_renderer()
    legend = fig.legends[0].get_window_extent(renderer)
    for ax in fig.axes:
        assert not legend.overlaps(ax.get_window_extent(renderer))
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert labels[:3] == ["train (batch)", "train (eval)", "val (eval)"]
    assert ("val_acc" in labels) == extra  # the second axis's curves are in the one legend
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_an_empty_history_still_plots(tmp_path):
    fig = plot_history({"steps": [], "evals": []}, tmp_path / "loss.png", "empty")
    assert fig.legends and (tmp_path / "loss.png").stat().st_size > 0
