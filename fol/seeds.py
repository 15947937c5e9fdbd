"""Per-node and per-round seeds derived from a run's seed.

Every node of a swarm draws from its own seed: node ``k`` of a run with seed
``s`` splits its shard 70/15/15 and pretrains with :func:`node_seed` (node ``k``
of a ``--data`` spec with ``seed=s`` splits with it too, :func:`fol.nodedata.split_seed`), and a
server baseline's local training of node ``k`` in round ``r`` shuffles with
:func:`round_seed`. For the swarms every figure of the docs was measured on
both are plain arithmetic, so a node's draws can be re-created by hand:

* ``node_seed(s, k) = s * 1000 + k`` for ``k < 1000``;
* ``round_seed(s, r, k, salt) = s * 7919 + r * 1009 + k + salt`` for
  ``k + salt < 1009`` (and, for a salted draw of a swarm of ``n`` nodes,
  ``salt >= n``).

Past those bounds the arithmetic repeats itself (node 1,000 of seed ``s``
would split as node 0 of seed ``s + 1``; node 1,009 of round ``r`` would
shuffle as node 0 of round ``r + 1``; a salted draw of node ``k`` would be
node ``k + salt``'s unsalted one when the swarm has that node), so a larger
index, and a salt smaller than the swarm, draws from a seed
hashed from all its parts by numpy's ``SeedSequence``, placed at or above
``2**48``, above every value the arithmetic can reach (seeds are at most
``MAX_SEED`` = ``2**32 - 1``), and below ``2**64`` (torch's generators take 64
bits). Two different nodes of a run therefore never share a stream, at any
swarm size, and the figures measured on smaller swarms are unchanged.

>>> node_seed(3, 7), round_seed(3, 2, 7)
(3007, 25782)
>>> node_seed(0, 1000) == node_seed(1, 0), node_seed(0, 1000) >= 2**48
(False, True)
"""

from __future__ import annotations

import numpy as np

NODES_PER_SEED = 1000  # node_seed's arithmetic holds for node indices below this
SLOTS_PER_ROUND = 1009  # round_seed's arithmetic holds for node index + salt below this
_HASHED_FLOOR = 2**48  # above every arithmetic seed: 4294967295 * 7919 + rounds * 1009 < 2**48
_NODE, _ROUND = 0x6E6F6465, 0x726F756E  # tags that keep the two hashed families apart


def _hashed(*parts: int) -> int:
    """A seed in ``[2**48, 2**64)`` from non-negative integer parts (SeedSequence's hash)."""
    word = int(np.random.SeedSequence([int(p) for p in parts]).generate_state(1, np.uint64)[0])
    return _HASHED_FLOOR + word % (2**64 - _HASHED_FLOOR)


def node_seed(seed: int, k: int) -> int:
    """The seed of node ``k``'s split and pretraining in a run with seed ``seed``."""
    if k < 0:
        raise ValueError(f"node index must be >= 0, got {k}")
    return seed * NODES_PER_SEED + k if k < NODES_PER_SEED else _hashed(_NODE, seed, k)


def round_seed(seed: int, round_index: int, k: int, salt: int = 0, nodes: int = 0) -> int:
    """The seed of node ``k``'s local training in server round ``round_index``
    (``salt`` tells apart two draws of one node in one round; ``nodes``, the
    swarm's size, keeps a salted draw off every other node's unsalted one).

    >>> round_seed(0, 1, 5, salt=81, nodes=24) == round_seed(0, 1, 86)  # no node 86 in 24
    True
    >>> round_seed(0, 1, 5, salt=81, nodes=100) == round_seed(0, 1, 86)
    False
    """
    if min(round_index, k, salt, nodes) < 0:
        raise ValueError(f"round, node index, salt and swarm size must be >= 0, got "
                         f"{round_index}, {k}, {salt}, {nodes}")
    if k + salt < SLOTS_PER_ROUND and (salt == 0 or salt >= nodes):
        return seed * 7919 + round_index * SLOTS_PER_ROUND + k + salt
    return _hashed(_ROUND, seed, round_index, k, salt)


__all__ = ["node_seed", "round_seed", "NODES_PER_SEED", "SLOTS_PER_ROUND"]
