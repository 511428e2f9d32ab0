"""The validation split of `tyr data prepare`: a fraction or a count of the corpus's tokens.

The first tokens of the corpus are held out (the FineWeb layout: documents run on across the
boundary). The split is checked twice: its arguments before any work (`ValSplit.__post_init__`)
and, once the corpus is tokenized and its total known, the number of tokens it takes
(`ValSplit.tokens`): it may hold out at most half of the tokens, so training always keeps the
larger part, and a split asked for takes at least one token. Whether each part holds a whole
step of rows depends on the training run's batch and context, so `tyr train` checks that
(exactly, with the numbers) before it starts.
"""
from __future__ import annotations

import dataclasses
import math

from pytyr.errors import ConfigError

DEFAULT_VAL_FRACTION = 0.1
MAX_VAL_SHARE = 0.5  # of the corpus's tokens


@dataclasses.dataclass(frozen=True)
class ValSplit:
    """`fraction` of the tokens, or `count` tokens; neither: `DEFAULT_VAL_FRACTION`."""

    fraction: float | None = None
    count: int | None = None

    def __post_init__(self) -> None:
        f, n = self.fraction, self.count
        if f is not None and n is not None:
            raise ConfigError("give the validation split as a fraction (--val) "
                              "or as a number of tokens (--val-tokens), not both")
        if f is not None and not (isinstance(f, (int, float)) and not isinstance(f, bool)
                                  and 0 <= f <= MAX_VAL_SHARE):
            raise ConfigError(f"--val {f!r} must be a fraction of the tokens from "
                              f"0 to {MAX_VAL_SHARE} (e.g. 0.1); at most half the corpus can "
                              f"be held out for validation")
        if n is not None and not (isinstance(n, int) and not isinstance(n, bool) and n >= 0):
            raise ConfigError(f"--val-tokens {n!r} must be a non-negative integer")

    def show(self) -> str:
        if self.count is not None:
            return f"--val-tokens {self.count}"
        return f"--val {DEFAULT_VAL_FRACTION if self.fraction is None else self.fraction:g}"

    def tokens(self, total: int) -> int:
        """The tokens held out of a corpus of `total`; a ConfigError, naming the numbers and
        the fix, when that would leave training the smaller part."""
        if self.count is not None:
            n = self.count
        else:
            f = DEFAULT_VAL_FRACTION if self.fraction is None else self.fraction
            n = max(1, math.floor(total * f)) if f > 0 else 0  # floor: f <= 1/2 fits
        if 2 * n <= total:
            return n
        if total < 2:
            raise ConfigError(f"the corpus holds {total} token{'s' * (total != 1)}"
                              f", too few to split into training and validation ({self.show()})")
        raise ConfigError(f"{self.show()} would hold out {n:,} of the corpus's "
                          f"{total:,} tokens ({n / total:.0%}) for validation and leave "
                          f"{max(0, total - n):,} for training; at most half can be held out: "
                          f"give --val-tokens {total // 2} or fewer, or a fraction such as "
                          f"--val {DEFAULT_VAL_FRACTION}")
