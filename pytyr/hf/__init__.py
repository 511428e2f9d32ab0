"""Hugging Face checkpoints for `tyr run`: their config.json and the keys that are no parameter.

`families` holds, per family, the table from config.json keys to the Lean model's config
fields and the checkpoint keys that are not parameters; `config` reads a config.json by it;
`keys` leaves those keys out of a load, naming each; `help` prints the tables for
`tyr run --help`. Nothing here imports torch at import.
"""
from .config import HFConfig as HFConfig
from .config import checkpoint_config as checkpoint_config
from .config import family_model as family_model
from .config import find_hf_config as find_hf_config
from .config import model_values as model_values
from .config import read_hf_config as read_hf_config
from .families import FAMILIES as FAMILIES
from .help import mapping_help as mapping_help
from .keys import UnusedKeys as UnusedKeys
