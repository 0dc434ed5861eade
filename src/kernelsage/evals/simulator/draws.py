"""Random streams kept apart by purpose, so that paired comparisons use common random numbers.

Every draw of the simulator comes from a stream named by its purpose and a key: the world, the stream's
order, the knowledge pack, a warm start's mined lessons, the stand-in's draws of one episode (keyed by the
episode's position in the stream, and by the item for per-item draws) and each policy's own choices (keyed
by the policy's name).
Nothing is drawn from a generator shared along the stream, so what one policy does in episode 10 cannot
shift the draws of episode 11: two policies meet the same world, the same operators, and in each episode
the same rounds' chances and the same per-item draws for an item both show. A difference in their
outcomes comes from their memories, not from where a shared generator happened to be.

Pure functions of their arguments.
"""

from __future__ import annotations

import zlib

import numpy as np

PURPOSES = ("world", "order", "pack", "standin", "policy", "mined")  # append only: an index seeds a stream
# Keys of the stand-in's per-episode streams (the second key after the episode's position).
DRAFT, REFINE, LESSON, ITEM = 0, 1, 2, 3
STAGE_KEYS = {"draft": 0, "refine": 1}
_U64 = np.uint64
_GOLDEN = _U64(0x9E3779B97F4A7C15)


def entropy(seed: int, purpose: str, *key: int) -> list[int]:
    """The SeedSequence entropy of one stream: the seed, the purpose's number, the key (all >= 0)."""
    if purpose not in PURPOSES:
        raise ValueError(f"unknown random stream {purpose!r}; use one of {', '.join(PURPOSES)}")
    return [seed, PURPOSES.index(purpose), *key]


def generator(seed: int, purpose: str, *key: int) -> np.random.Generator:
    """The generator of one stream: the same arguments always give the same draws."""
    return np.random.default_rng(np.random.SeedSequence(entropy(seed, purpose, *key)))


def integer(seed: int, purpose: str, *key: int) -> int:
    """One 63-bit integer of a stream (to seed a `random.Random` a policy draws from)."""
    return int(np.random.SeedSequence(entropy(seed, purpose, *key)).generate_state(1, np.uint64)[0] >> _U64(1))


def policy_key(name: str) -> int:
    """A policy's stable number (its choices get a stream of their own, the same in every process)."""
    return zlib.crc32(name.encode("utf-8"))


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser: a bijection on 64-bit integers that scatters nearby inputs."""
    x = x + _GOLDEN
    x = (x ^ (x >> _U64(30))) * _U64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> _U64(27))) * _U64(0x94D049BB133111EB)
    return x ^ (x >> _U64(31))


def item_uniforms(seed: int, purpose: str, key: tuple[int, ...], items: np.ndarray, count: int) -> np.ndarray:
    """`count` uniforms in [0, 1) for each item, [len(items), count]: a function of the stream and the
    item's own key only, not of which other items are listed or in what order (so two memories that show
    the same item in the same episode draw the same numbers for it). Hashing keeps it cheap: a generator
    per item would cost more than the memory's own work at tens of items per episode."""
    base = np.random.SeedSequence(entropy(seed, purpose, *key)).generate_state(1, np.uint64)[0]
    keys = np.asarray(items, dtype=_U64).reshape(-1, 1)
    column = np.arange(count, dtype=_U64).reshape(1, -1)
    with np.errstate(over="ignore"):  # the arithmetic is modulo 2^64 by design
        bits = _mix(_mix(keys ^ base) + column * _GOLDEN)
    return (bits >> _U64(11)).astype(np.float64) * 2.0**-53


def pack_key(index: int) -> int:
    """The stable key of the knowledge pack's `index`-th item (the same item in every policy's memory)."""
    return index


def mined_key(index: int) -> int:
    """The stable key of the `index`-th mined item of a warm start (the same item in every policy's memory)."""
    return (1 << 61) | index


def experience_key(position: int, transition: int) -> int:
    """The stable key of the experience that episode `position` produced for its `transition`-th kind
    (compile fix, wrong-result fix, faster kernel): the same key whichever memory stores it."""
    return (1 << 62) | (position << 2) | transition
