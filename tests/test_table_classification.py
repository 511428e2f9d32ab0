"""Task `classification` on a user's table (the README's `--set task.data=flowers.csv`): the
features standardised by the training split's statistics, recorded in the run; scikit-learn's
wine table (13 features from 0.1 to 1,680) driven through the CLI with the MLP example."""
from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.csv as pcsv
import pytest
import torch

from pytyr.cli import main
from pytyr.errors import ConfigError
from pytyr.train.task import TaskContext
from pytyr.train.tasks import make_task
from pytyr.train.tasks.classification.task import FeatureScaling, read_table

MLP = ["train", "examples/mlp/MLP.lean", "--model", "mlp"]


@pytest.fixture(scope="module")
def wine(tmp_path_factory):
    from sklearn.datasets import load_wine

    d = load_wine()
    cols = {n.replace("/", "_"): d.data[:, i] for i, n in enumerate(d.feature_names)}
    cols["constant"] = [7.0] * len(d.target)  # a column that says nothing
    cols["cultivar"] = [str(d.target_names[t]) for t in d.target]
    path = tmp_path_factory.mktemp("wine") / "wine.csv"
    pcsv.write_csv(pa.table(cols), path)
    return path


def _task(path, **options):
    table = {"name": "classification", "data": str(path), "label": "cultivar", **options}
    task = make_task(table, TaskContext(16, 0), "test")
    task.prepare()
    return task


def test_features_are_standardised_by_the_training_split(wine):
    task = _task(wine)
    s = task.scaling
    assert s is not None and s.features[-1] == "constant" and len(s.features) == 14
    assert torch.allclose(task.x.mean(0), torch.zeros(14), atol=1e-5)
    assert torch.allclose(task.x.std(0, unbiased=False)[:13], torch.ones(13), atol=1e-4)
    assert s.std[-1] == 1.0 and (task.x[:, -1] == 0).all()  # centred, not divided by 0
    # the held-out rows are scaled by the training split's statistics, not their own
    raw = _task(wine, scale=False)
    assert task.scaling is not None and raw.scaling is None
    mean, std = torch.tensor(s.mean), torch.tensor(s.std)
    assert torch.allclose(task.xt, ((raw.xt.double() - mean) / std).float(), atol=1e-5)
    assert torch.equal(task.y, raw.y) and torch.equal(task.yt, raw.yt)  # the same split
    mean64 = torch.tensor(s.mean, dtype=torch.float64)
    assert torch.allclose(mean64, raw.x.double().mean(0))  # the training rows' statistics
    x_all, _, _, _ = read_table(str(wine), "cultivar", None)
    assert not torch.allclose(mean64, x_all.double().mean(0))  # not every row's


def test_the_run_records_the_scaling_and_the_first_loss_is_sane(wine, tmp_path, capsys):
    common = [*MLP, "--set", f"task.data={wine}", "--set", "task.label=cultivar",
              "--set", "model.c.inputs=14", "--set", "train.batch=16", "--set",
              "train.max_iters=40", "--set", "train.eval_interval=20", "--set",
              "train.warmup_iters=2", "-q"]
    assert main([*common, "--set", f"out={tmp_path / 'scaled'}"]) == 0
    assert "standardised" in capsys.readouterr().out
    assert main([*common, "--set", "task.scale=false", "--set", f"out={tmp_path / 'raw'}"]) == 0

    def history(run):
        return json.loads((tmp_path / run / "metrics.json").read_text())["history"]

    scaled, raw = history("scaled"), history("raw")
    # unscaled, proline (~750) swamps the logits: a first loss in the hundreds
    assert scaled["steps"][0]["loss"] < 5 < 50 < raw["steps"][0]["loss"]
    assert scaled["evals"][-1]["val_accuracy"] >= 0.9
    fitted = json.loads((tmp_path / "scaled" / "run.json").read_text())["task"]["fitted"]
    task = _task(wine)
    assert fitted == {"feature_scaling": {"features": task.scaling.features,
                                          "mean": task.scaling.mean, "std": task.scaling.std}}
    assert "fitted" not in json.loads((tmp_path / "raw" / "run.json").read_text())["task"]


def test_fitted_is_a_record_not_an_option(wine, tmp_path, capsys):
    with pytest.raises(ConfigError, match="'task.fitted' is not an option"):
        make_task({"name": "classification", "data": str(wine), "label": "cultivar",
                   "fitted": {}}, TaskContext(16, 0), "cfg.json")
    # `tyr train` refuses it too, before any work (it would be silently ignored otherwise)
    assert main(["train", "examples/mlp/MLP.lean", "--model", "mlp", "--set", "task.fitted=1",
                 "--set", f"out={tmp_path}"]) == 1
    assert "'task.fitted' is not an option" in capsys.readouterr().err
    assert not (tmp_path / "ckpt").exists()


def test_scaling_fit_and_apply():
    x = torch.tensor([[1.0, 5.0, -2.0], [3.0, 5.0, 2.0], [5.0, 5.0, 0.0]])
    s = FeatureScaling.fit(x, ["a", "b", "c"])
    assert s.mean == pytest.approx([3.0, 5.0, 0.0])
    assert s.std == pytest.approx([(8 / 3) ** 0.5, 1.0, (8 / 3) ** 0.5])
    y = s.apply(torch.tensor([[3.0, 6.0, 0.0]]))
    assert y.dtype == torch.float32 and y[0].tolist() == pytest.approx([0.0, 1.0, 0.0])
