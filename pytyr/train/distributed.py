"""Data-parallel training under `torchrun`: the process group, DDP, and what only rank 0 does.

torchrun starts one process per rank and tells each who it is through environment variables
(`RANK`, `WORLD_SIZE`, `LOCAL_RANK`, `MASTER_ADDR`, `MASTER_PORT`); `DistEnv.from_env()` reads
them. A plain `python`/`tyr` process has none of them and is a world of one: every helper here
then does nothing, so single-process code paths stay exactly as they were.

`init()` joins the process group (gloo on CPU, NCCL when CUDA is available; `backend=` or the
`TYR_DIST_BACKEND` variable overrides). `wrap()` puts a module (a `TyrModule`) in
`DistributedDataParallel`, whose backward averages the gradients over the ranks; `shard()`
is the alternative for models that do not fit one device (FSDP2, `train.data_parallel=fsdp`),
with `full_state_dict`, `StateView` and `reshard_optimizer_state` keeping checkpoints whole. Each rank
feeds its own slice of the global batch (`RandomBatches(..., rank=, world=)`), so a step of W
ranks with batch b follows the gradient of the mean loss over one global batch of W*b windows,
the same step a single process with batch W*b takes. Only rank 0 writes files (`is_main()`).
"""
from __future__ import annotations

import contextlib
import dataclasses
import os
import sys
from collections.abc import Iterator, Mapping
from typing import Any

import torch
from torch import nn

from pytyr.errors import ConfigError, TyrError
from pytyr.process import end_if_peer_died, forget_peers, note_peers, watch_launcher

BACKEND_VAR = "TYR_DIST_BACKEND"  # forces a backend, e.g. gloo on a machine with GPUs


@dataclasses.dataclass(frozen=True)
class DistEnv:
    """Who this process is in a torchrun launch; a plain process is rank 0 of a world of 1."""

    rank: int = 0
    world: int = 1
    local_rank: int = 0
    master_addr: str | None = None
    master_port: int | None = None

    @property
    def distributed(self) -> bool:
        return self.world > 1

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> DistEnv:
        """Read torchrun's variables; a missing WORLD_SIZE means a single process."""
        env = os.environ if environ is None else environ

        def number(name: str, default: int | None) -> int | None:
            raw = env.get(name)
            if raw is None or raw == "":
                return default
            try:
                return int(raw)
            except ValueError:
                raise ConfigError(f"the environment variable {name} must be an integer, "
                                  f"got {raw!r}") from None

        world = number("WORLD_SIZE", 1)
        rank = number("RANK", 0)
        local = number("LOCAL_RANK", rank)
        port = number("MASTER_PORT", None)
        assert world is not None and rank is not None and local is not None
        if world < 1:
            raise ConfigError(f"WORLD_SIZE must be at least 1, got {world}")
        if not 0 <= rank < world:
            raise ConfigError(f"RANK must be in 0..{world - 1} for WORLD_SIZE {world}, got {rank}")
        if local < 0:
            raise ConfigError(f"LOCAL_RANK must be >= 0, got {local}")
        addr = env.get("MASTER_ADDR") or None
        if world > 1 and (addr is None or port is None):
            missing = [n for n, v in (("MASTER_ADDR", addr), ("MASTER_PORT", port)) if v is None]
            raise ConfigError(f"WORLD_SIZE is {world} but {' and '.join(missing)} "
                              f"{'is' if len(missing) == 1 else 'are'} not set; launch the "
                              "processes with torchrun (e.g. scripts/torchrun-gpt.sh)")
        return cls(rank=rank, world=world, local_rank=local, master_addr=addr, master_port=port)


def default_backend() -> str:
    """NCCL where CUDA is, gloo otherwise; `TYR_DIST_BACKEND` overrides."""
    forced = os.environ.get(BACKEND_VAR)
    if forced:
        return forced
    return "nccl" if torch.cuda.is_available() else "gloo"


def _check_backend(backend: str, env: DistEnv) -> None:
    if not torch.distributed.is_available():
        raise ConfigError("torch.distributed is not available in this torch build; "
                          "run in a single process (without torchrun)")
    if not torch.distributed.is_backend_available(backend):
        raise ConfigError(f"the torch.distributed backend {backend!r} is not available here "
                          f"(gloo: {torch.distributed.is_gloo_available()}, "
                          f"nccl: {torch.distributed.is_nccl_available()}); choose another "
                          f"with {BACKEND_VAR}")
    if backend == "nccl":
        gpus = torch.cuda.device_count()
        if env.local_rank >= gpus:
            raise ConfigError(f"backend nccl needs one CUDA device per local rank, but "
                              f"LOCAL_RANK is {env.local_rank} and there are {gpus} device(s); "
                              f"start fewer processes or set {BACKEND_VAR}=gloo")


def init(backend: str | None = None, env: DistEnv | None = None) -> DistEnv:
    """Join the process group described by torchrun's variables (no-op for a world of 1,
    and when a group is already initialised); return this process's `DistEnv`."""
    env = env or DistEnv.from_env()
    if not env.distributed or is_initialized():
        return env
    backend = backend or default_backend()
    _check_backend(backend, env)
    if backend == "nccl":
        torch.cuda.set_device(env.local_rank)  # before the group: NCCL binds to this device
    torch.distributed.init_process_group(backend, rank=env.rank, world_size=env.world)
    import socket

    note_peers(gather((socket.gethostname(), os.getpid())) or [], env.rank)
    return env


def is_initialized() -> bool:
    return torch.distributed.is_available() and torch.distributed.is_initialized()


def active() -> bool:
    """Whether this process trains together with others (an initialised group of > 1)."""
    return is_initialized() and torch.distributed.get_world_size() > 1


def rank() -> int:
    return torch.distributed.get_rank() if is_initialized() else 0


def world() -> int:
    return torch.distributed.get_world_size() if is_initialized() else 1


def is_main() -> bool:
    """Rank 0, the one process that writes checkpoints, plots, metrics and prints."""
    return rank() == 0


def device() -> torch.device:
    """Where this rank's module and batches belong: its GPU under NCCL (`init` selected it),
    else the CPU."""
    if is_initialized() and torch.distributed.get_backend() == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def wrap(module: nn.Module) -> nn.Module:
    """`module` in DistributedDataParallel when training with other ranks, else itself.
    DDP broadcasts rank 0's parameters at construction, so the ranks start equal."""
    if not active():
        return module
    from torch.nn.parallel import DistributedDataParallel

    first = next(module.parameters())
    ids = [first.device.index] if first.device.type == "cuda" else None  # CPU: no device_ids
    return DistributedDataParallel(module, device_ids=ids)


def shard(module: nn.Module) -> nn.Module:
    """FSDP2 (`torch.distributed.fsdp.fully_shard`) in place when training with other ranks:
    each rank then holds 1/W of every parameter, gradient and optimizer state (DTensors
    sharded along dim 0), gathered for each forward and backward. Call it before making the
    optimizers (their parameters are the sharded ones). The module as one unit: a TyrModule's
    parameters sit at their paths, not in per-block modules."""
    if not active():
        return module
    from torch.distributed.fsdp import fully_shard

    fully_shard(module)
    return module


def is_sharded(module: nn.Module) -> bool:
    # No module is sharded before FSDP is imported (by `shard`): a single-process run does
    # not pay the import (over 2 s on a loaded 2-core machine).
    if not torch.distributed.is_available() or "torch.distributed.fsdp" not in sys.modules:
        return False
    from torch.distributed.fsdp import FSDPModule

    return isinstance(module, FSDPModule)


def full(t: Any) -> Any:
    """A DTensor gathered whole (a collective: every rank must call it); others as they are."""
    return t.full_tensor() if hasattr(t, "full_tensor") else t


def full_state_dict(obj: Any) -> dict[str, Any]:
    """The state dict of a module or optimizer with every DTensor gathered whole, on every
    rank (a collective): what a checkpoint holds, whatever the sharding."""
    sd = obj.state_dict()
    if isinstance(obj, torch.optim.Optimizer):
        return {**sd, "state": {pid: {k: full(v) for k, v in entries.items()}
                                for pid, entries in sd["state"].items()}}
    return {k: full(v) for k, v in sd.items()}


class StateView:
    """A module or optimizer stand-in whose `state_dict()` is a given one (to save full
    tensors gathered from a sharded run)."""

    def __init__(self, state: dict[str, Any]):
        self.state = state

    def state_dict(self) -> dict[str, Any]:
        return self.state


def reshard_optimizer_state(opt: torch.optim.Optimizer) -> None:
    """After loading full tensors into an optimizer of sharded parameters: each state tensor
    shaped like its parameter becomes that parameter's shard (no communication: every rank
    read the same full tensor)."""
    from torch.distributed.tensor import DTensor, distribute_tensor

    for group in opt.param_groups:
        for p in group["params"]:
            if not isinstance(p, DTensor):
                continue
            for k, v in opt.state.get(p, {}).items():
                if isinstance(v, torch.Tensor) and not isinstance(v, DTensor) \
                        and tuple(v.shape) == tuple(p.shape):
                    opt.state[p][k] = distribute_tensor(v.to(p.device), p.device_mesh,
                                                        p.placements, src_data_rank=None)


def mean_over_ranks(values: Mapping[str, float]) -> dict[str, float]:
    """The mean of each value over the ranks (all-reduce; float64 so the sum adds no error
    beyond the values'); the values themselves when training alone."""
    if not active():
        return dict(values)
    keys = sorted(values)
    t = torch.tensor([float(values[k]) for k in keys], dtype=torch.float64, device=device())
    torch.distributed.all_reduce(t)
    t /= torch.distributed.get_world_size()
    return {k: float(v) for k, v in zip(keys, t.tolist())}


def gather(obj: Any) -> list[Any] | None:
    """Every rank's `obj` (picklable), in rank order, on every rank; None when alone."""
    if not active():
        return None
    out: list[Any] = [None] * torch.distributed.get_world_size()
    torch.distributed.all_gather_object(out, obj)
    return out


def barrier() -> None:
    if active():
        torch.distributed.barrier()


def parting() -> None:
    """Say that this rank's last collective is done: the others may end from here on (rank 0
    still samples after the rest have gone), and that is no peer's death."""
    forget_peers()


@contextlib.contextmanager
def main_first() -> Iterator[None]:
    """Run the body on rank 0 first, then on the others (e.g. building a shared cache once).
    Rank 0 reaches the barrier even when its body fails, so the others never wait forever."""
    if is_main():
        try:
            yield
        finally:
            barrier()
    else:
        barrier()
        yield


def cleanup() -> None:
    """Leave the process group, if this process joined one."""
    if is_initialized():
        torch.distributed.destroy_process_group()


@contextlib.contextmanager
def session(backend: str | None = None) -> Iterator[DistEnv]:
    """Join the group torchrun describes for the body, and leave it after (also on errors);
    a group the caller had already joined is used and left alone. Alone: does nothing.
    Under a launcher, the process ends when the launcher dies, and with one line naming the
    rank when a peer dies (`pytyr.process`)."""
    env = DistEnv.from_env()
    joined = env.distributed and not is_initialized()
    if env.distributed:
        watch_launcher()
    init(backend, env)
    try:
        yield env
    except TyrError:
        raise
    except Exception:  # a collective failed: when a peer died, say which, in one line
        if env.distributed:
            end_if_peer_died()
        raise
    finally:
        if joined:
            cleanup()
