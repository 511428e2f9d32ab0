"""SafeTensors for Tyr: a validating reader, sharded checkpoints, typed schemas, model I/O.

Headers are untrusted input: `read_header` checks every rule of `RULES` (and the shard rules
of `SHARD_RULES`) and raises `SafeTensorsError` naming the file and the rule. Data is
memory-mapped and handed out without copying where dtype and alignment allow.

    w = open_weights("ckpt/")                 # file, shard directory or .schema.json
    w.model.layers[0].self_attn.q_proj.weight.load()
    load_model(module, "ckpt/")               # every mismatch listed before anything is copied
    save_model(module, "ckpt/", max_shard_size="2GB")

Modules, in data-flow order: `dtypes` (DType), `header` (one file's header, validated and
kept while the file is unchanged), `reader` (one file's data), `sharded` (directories and
indexes), `schema` (specs, tree, snapshots), `loaders` (Weights, model fit), `writer` (atomic
saves), `provide` (generated typed modules), `commands` (`tyr safetensors ...`).
"""
from pytyr.errors import SafeTensorsError as SafeTensorsError

from .dtypes import DType as DType
from .loaders import Weights as Weights
from .loaders import check_fit as check_fit
from .loaders import expected_specs as expected_specs
from .loaders import fit_problems as fit_problems
from .loaders import load_model as load_model
from .loaders import open_weights as open_weights
from .loaders import specs_of as specs_of
from .reader import RULES as RULES
from .reader import Header as Header
from .reader import SafeTensorsFile as SafeTensorsFile
from .reader import TensorInfo as TensorInfo
from .reader import load_file as load_file
from .reader import parse_bytes as parse_bytes
from .reader import read_header as read_header
from .schema import Node as Node
from .schema import NodeList as NodeList
from .schema import TensorRef as TensorRef
from .schema import TensorSpec as TensorSpec
from .schema import build_tree as build_tree
from .schema import read_schema as read_schema
from .schema import write_schema as write_schema
from .sharded import INDEX_NAME as INDEX_NAME
from .sharded import SHARD_RULES as SHARD_RULES
from .sharded import Checkpoint as Checkpoint
from .sharded import open_checkpoint as open_checkpoint
from .writer import save_model as save_model
from .writer import save_sharded as save_sharded
from .writer import write_file as write_file
