"""Randomness that decides verdicts, drawn from the operating system's cryptographic generator only.

A candidate sees its inputs, and everything a seeded generator makes follows from its seed: torch's and NumPy's
default generators (MT19937, PCG64) are rebuilt from a few hundred of their outputs, which a kernel can read off
its inputs. So what a kernel must not predict (which calls are unseen instances, the order of the calls, the
blends, the positions poisoned or checked) comes from `secrets`/`os.urandom`, whose outputs tell nothing about
the next ones. Inputs themselves come from seeded generators keyed per instance (`judging.instances.case_seed`).
"""

from __future__ import annotations

import os
import secrets

import numpy as np
import torch

SYSTEM = secrets.SystemRandom()  # the `random.Random` interface (sample, choice, randrange) over os.urandom
WEIGHT_LEVELS = 1 << 16  # a weight's resolution: two bytes of the system's generator each


def positions(count: int, size: int) -> torch.Tensor:
    """`count` flat positions in [0, size), with repetition (int64; the bias of the modulus is under 2**-23)."""
    if size <= 0:
        return torch.zeros(0, dtype=torch.int64)
    words = np.frombuffer(os.urandom(8 * count), dtype=np.uint64)
    return torch.from_numpy((words % np.uint64(size)).astype(np.int64))


def uniform(count: int, low: float, high: float) -> torch.Tensor:
    """`count` float32 values in [low, high], on a grid of WEIGHT_LEVELS steps."""
    levels = np.frombuffer(os.urandom(2 * count), dtype=np.uint16)
    values = torch.from_numpy(levels.astype(np.float32))
    return values.mul_((high - low) / (WEIGHT_LEVELS - 1)).add_(low)
