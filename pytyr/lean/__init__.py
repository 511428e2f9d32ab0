"""Front end: the checker for the Tyr subset of Lean 4 (lexer → parser → elaborator).

It reads `Tyr/*.lean` for the op signatures, checks model files with Lean's typing rules and
instantiates `@[model]` defs as graph IR.
"""
from .instantiate import instantiate_model as instantiate_model
from .program import Program as Program
from .program import check_files as check_files
from .program import library as library
from .program import load as load
from .program import tyr_root as tyr_root
from .signatures import LeanSignatures as LeanSignatures
