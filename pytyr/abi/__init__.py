"""Compiled model libraries: graphs from a Lean model library through the C ABI (`cc/tyr.h`).

    lib = open_library("libmodels.so")      # version-checked, symbols checked
    lib.models()                            # ['mlp', ...]
    graph = lib.graph("mlp", {"c": {...}, "b": 128})   # validated like any IR document

See docs/abi.md. Every problem is an `AbiError` naming the library.
"""
from .loader import ModelLibrary as ModelLibrary
from .loader import abi_version as abi_version
from .loader import load_model_graph as load_model_graph
from .loader import open_library as open_library
from .source import LibraryModels as LibraryModels
