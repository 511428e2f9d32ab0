"""Training: the one engine (`engine.py`) driven by tasks (`task.py`, `tasks/`), with its
config (`settings.py`), optimizers, checkpoints, distributed helpers and sampling."""
