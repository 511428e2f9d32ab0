"""Masked diffusion (MDLM): the `mdlm` task (`task.py`), its forward process (`masking.py`:
rates, masks, ELBO weights) and its samplers (`ancestral.py`, `unmask.py`) with their live
view (`unmask_view.py`)."""
