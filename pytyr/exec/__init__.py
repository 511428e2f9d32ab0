"""Executor: a validated graph IR lowered to a torch.fx GraphModule inside an nn.Module."""
from .lower import TyrModule as TyrModule
from .lower import build_module as build_module
