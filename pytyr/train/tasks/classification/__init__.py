"""Classification: the `classification` task over a table or the spirals (`task.py`), and the
spirals data set (`spirals.py`)."""
