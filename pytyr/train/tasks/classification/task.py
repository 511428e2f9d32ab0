"""`classification`: rows of features and a class label, from spirals or the user's table.

    {"task": {"name": "classification", "data": "spirals"}}             2-D spirals, 3 classes
    {"task": {"name": "classification", "data": "flowers.csv", "label": "species"}}
    {"task": {"name": "classification", "data": "t.parquet", "features": ["a", "b"]}}

A table (CSV or parquet) gives the features (every numeric column but the label, unless
`features` names them) and the label column (integers, or strings mapped to ids in sorted
order); a seeded split holds out `test_fraction` of the rows as the `val` split. With `scale`
(the default) every feature is standardised by the training split's mean and standard deviation
(a constant column is centred only), so columns of any unit start on an equal footing; the
statistics are recorded in the run (`run.json`, task.fitted.feature_scaling) for whatever
later feeds the trained model new rows. The model is
fed `x : T [batch, features]` and `y : IT [batch] classes` (the labels are checked below the
classes when loaded) and returns `(logits : T [batch, classes], loss)`; evaluation reports the
loss and the accuracy. Training batches are shuffled epochs:
batch k is a pure function of (seed, k).
"""
from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

from pytyr.config import setting
from pytyr.errors import DataError
from pytyr.paths import input_file
from pytyr.train.task import (
    Batch,
    Expect,
    Feed,
    Task,
    TaskContext,
    check_ids,
    check_rows,
    epoch_rows,
)
from pytyr.train.tasks import register


@dataclasses.dataclass(frozen=True)
class ClassificationOptions:
    data: str = setting("spirals", doc="'spirals' or a CSV/parquet table")
    label: str = setting("label", doc="the label column of a table")
    features: tuple[str, ...] | None = setting(None, doc="feature columns (default: all "
                                               "numeric columns but the label)")
    test_fraction: float = setting(0.2, gt=0, lt=1, doc="rows held out for evaluation")
    train_size: int = setting(4096, gt=0, le=10_000_000, doc="spirals: training points")
    test_size: int = setting(2048, gt=0, le=10_000_000, doc="spirals: test points")
    classes: int = setting(3, ge=2, le=1000, doc="spirals: arms")
    seed: int = setting(0, ge=0, lt=2**63, doc="of the data (spirals, split, shuffles)")
    scale: bool = setting(True, doc="a table: standardise each feature by the training "
                          "split's mean and std")


@dataclasses.dataclass(frozen=True)
class FeatureScaling:
    """Per-feature standardisation fitted on training rows: (x - mean) / std."""

    features: list[str]
    mean: list[float]
    std: list[float]  # 1 where a column is constant: it is centred, not blown up

    @classmethod
    def fit(cls, x: torch.Tensor, features: list[str]) -> FeatureScaling:
        x64 = x.double()
        std = x64.std(dim=0, unbiased=False)
        std = torch.where(std > 0, std, torch.ones_like(std))
        return cls(list(features), x64.mean(dim=0).tolist(), std.tolist())

    def apply(self, x: torch.Tensor) -> torch.Tensor:
        mean = torch.tensor(self.mean, dtype=torch.float64)
        std = torch.tensor(self.std, dtype=torch.float64)
        return ((x.double() - mean) / std).float()


def read_table(path: str, label: str, features: tuple[str, ...] | None
               ) -> tuple[torch.Tensor, torch.Tensor, int, list[str]]:
    """(x f32[n, f], y i64[n], classes, feature names) from a CSV or parquet file."""
    import numpy as np
    import pyarrow as pa

    file = input_file(path, "table")
    try:
        if file.suffix == ".parquet":
            import pyarrow.parquet as pq

            table = pq.read_table(file)
        else:
            import pyarrow.csv as pcsv

            table = pcsv.read_csv(file)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OSError) as err:
        raise DataError(f"{file}: cannot read the table: {str(err).splitlines()[0]}") from None
    names = table.column_names
    if label not in names:
        raise DataError(f"{file}: no label column '{label}' (columns: {', '.join(names)}); "
                        f"set task.label")
    numeric = [n for n in names if n != label and (pa.types.is_integer(table[n].type)
                                                   or pa.types.is_floating(table[n].type))]
    chosen = list(features) if features is not None else numeric
    for n in chosen:
        if n not in names:
            raise DataError(f"{file}: no feature column '{n}' (columns: {', '.join(names)})")
        if n not in numeric:
            raise DataError(f"{file}: feature column '{n}' is {table[n].type}, not numeric")
        if table[n].null_count:
            raise DataError(f"{file}: feature column '{n}' has {table[n].null_count} empty "
                            f"value(s)")
    if not chosen:
        raise DataError(f"{file}: no numeric feature columns besides the label '{label}'")
    col = table[label]
    if col.null_count:
        raise DataError(f"{file}: the label column '{label}' has {col.null_count} empty value(s)")
    x = np.stack([table[n].to_numpy().astype(np.float32) for n in chosen], axis=1)
    if not np.isfinite(x).all():
        raise DataError(f"{file}: the features hold NaN or infinite values")
    raw = col.to_pylist()
    if all(isinstance(v, int) and not isinstance(v, bool) for v in raw):
        if min(raw) < 0:
            raise DataError(f"{file}: label {min(raw)} is negative; labels are class ids >= 0")
        y, classes = np.asarray(raw, dtype=np.int64), max(raw) + 1
    else:
        vocab = sorted({str(v) for v in raw})
        ids = {v: i for i, v in enumerate(vocab)}
        y, classes = np.asarray([ids[str(v)] for v in raw], dtype=np.int64), len(vocab)
    return torch.from_numpy(x), torch.from_numpy(y), int(classes), chosen


@register
class Classification(Task):
    name = "classification"
    Options = ClassificationOptions

    def __init__(self, options: ClassificationOptions, ctx: TaskContext):
        super().__init__(options, ctx)
        self.n_features = 2 if options.data == "spirals" else None
        self.scaling: FeatureScaling | None = None

    def feeds(self) -> dict[str, Feed]:
        return {"x": Feed("f32", ("batch", "features")),
                "y": Feed("i64", ("batch",), bound="classes")}

    def expects(self) -> list[Expect]:
        return [Expect(0, "logits", ("batch", "classes"))]

    def sizes(self) -> dict[str, int]:
        return {"batch": self.ctx.micro_batch,
                **({"features": self.n_features} if self.n_features else {})}

    def prepare(self) -> str:
        o, c = self.options, self.ctx
        if o.data == "spirals":
            from pytyr.train.tasks.classification.spirals import make_dataset

            x, y = make_dataset(o.train_size + o.test_size, o.seed, classes=o.classes)
            self.classes, what = o.classes, f"spirals, {o.classes} classes"
            n_test = o.test_size
        else:
            x, y, self.classes, cols = read_table(o.data, o.label, o.features)
            self.n_features = len(cols)
            perm = torch.randperm(len(y), generator=torch.Generator().manual_seed(o.seed))
            x, y = x[perm], y[perm]
            n_test = max(1, round(len(y) * o.test_fraction))
            what = f"{Path(o.data).name}: {len(cols)} features, {self.classes} classes"
        check_ids(y, self.classes, f"{o.data}: the labels")  # fed as IT [batch] classes
        self.x, self.y = x[n_test:], y[n_test:]
        self.xt, self.yt = x[:n_test], y[:n_test]
        if o.data != "spirals" and o.scale:
            self.scaling = FeatureScaling.fit(self.x, cols)
            self.x, self.xt = self.scaling.apply(self.x), self.scaling.apply(self.xt)
            what += ", standardised"
        rows = c.global_batch
        check_rows(self.name, rows, len(self.y), "the training split", c.source)
        check_rows(self.name, rows, len(self.yt), "the held-out split", c.source)
        return f"{what}; {len(self.y)} training and {len(self.yt)} held-out rows"

    def data_sizes(self) -> dict[str, int]:
        return {"classes": self.classes, "features": int(self.x.shape[1])}

    def batch(self, k: int) -> Batch:
        idx = epoch_rows(len(self.y), k, self.ctx, self.options.seed)
        return {"x": self.x[idx], "y": self.y[idx]}

    def eval_batches(self, split: str, iters: int) -> Iterator[Batch]:
        """Every full global batch of the split (not `iters`): accuracy over the held-out set
        but the rows of a last, partial global batch (the same rows for any world size)."""
        c = self.ctx
        x, y = (self.x, self.y) if split == "train" else (self.xt, self.yt)
        for j in c.eval_micro_batches(len(y) // c.global_batch):
            start = c.first_row(j)
            yield {"x": x[start:start + c.micro_batch], "y": y[start:start + c.micro_batch]}

    def eval_metrics(self, batch: Batch, outputs: tuple[torch.Tensor, ...]) -> dict[str, float]:
        hits = (outputs[0].argmax(dim=-1) == batch["y"]).float().mean()
        return {"loss": float(outputs[-1]), "accuracy": float(hits)}

    def describe_for_run(self) -> dict[str, Any]:
        out = super().describe_for_run()
        if self.scaling is not None:
            out["fitted"] = {"feature_scaling": dataclasses.asdict(self.scaling)}
        return out
