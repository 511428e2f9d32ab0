"""Rectified flow: the `image_flow` task (`task.py`), its maths (`rectified.py`: times, the
straight path, the velocity target, Euler sampling with guidance) and its image grid
(`image_grid.py`)."""
