"""The graph IR: the versioned contract between front ends and the harness (docs/ir.md)."""
from .graph import FORMAT as FORMAT
from .graph import VERSION as VERSION
from .graph import Graph as Graph
from .graph import Input as Input
from .graph import Node as Node
from .graph import Output as Output
from .graph import Param as Param
from .graph import TensorType as TensorType
