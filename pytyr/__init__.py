"""pytyr: the Python harness of Tyr — check Lean models, validate and run their graphs.

The checker and the IR need no torch; the executor and trainer import it on first use.
"""
from .errors import ConfigError as ConfigError
from .errors import ExecError as ExecError
from .errors import IRError as IRError
from .errors import LeanError as LeanError
from .errors import TyrError as TyrError
from .ir.graph import Graph as Graph
from .lean import LeanSignatures as LeanSignatures
from .lean import check_files as check_files
from .lean import instantiate_model as instantiate_model
from .lean import load as load
from .pipeline import graph_from_lean as graph_from_lean
from .pipeline import module_from_graph as module_from_graph

__version__ = "0.1.0"
