"""`python -m pytyr.torchrun …`: torch's own torchrun, ended by Ctrl-C with one line.

torchrun forwards a SIGINT or SIGTERM to its ranks, which stop at the end of their step and
write their checkpoint (`pytyr.train.engine`); torchrun itself then raises its
`SignalException` and prints its traceback. This entry point is torchrun with that last part
said in one line and the shell's exit code for the signal. Arguments are torchrun's.
"""
from __future__ import annotations

import signal
import sys


def main(argv: list[str] | None = None) -> int:
    from torch.distributed.elastic.multiprocessing.api import SignalException
    from torch.distributed.run import main as torchrun

    try:
        torchrun(argv)
    except SignalException as err:
        name = signal.Signals(err.sigval).name
        print(f"torchrun: stopped by {name}; the ranks stopped after their step (see above)",
              file=sys.stderr)
        return 128 + int(err.sigval)
    return 0


if __name__ == "__main__":
    sys.exit(main())
