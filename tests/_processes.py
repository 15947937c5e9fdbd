"""Child processes of the tests: a Python run as a subprocess (``fol`` by ``-m fol.cli``, a script, ``-c``)
imports this repository's packages, not another copy installed in the environment."""

from __future__ import annotations

import os
from pathlib import Path

#: The repository's root, the folder holding ``fol/``, ``orbits/``, ``contact_sim/`` and ``swarmbase/``.
REPO = Path(__file__).resolve().parents[1]


def repo_env(*first: str | os.PathLike[str], drop: tuple[str, ...] = (), **extra: str) -> dict[str, str]:
    """This process's environment for a child Python process: ``PYTHONPATH`` holds the folders ``first``
    (a test's own modules), then the repository, then the ``PYTHONPATH`` of this run, each once and none
    empty (an empty entry puts the child's working folder on its path); the variables named in ``drop``
    are left out and ``extra`` set (``OMP_NUM_THREADS="1"``)."""
    env = {key: value for key, value in os.environ.items() if key not in drop}
    paths = [*map(str, first), str(REPO), *os.environ.get("PYTHONPATH", "").split(os.pathsep)]
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(p for p in paths if p))
    env.update(extra)
    return env
