"""The bottom layer every package may import: small, dependency-free helpers
(standard library only) that ``orbits``, ``contact_sim`` and ``fol`` share.

- :mod:`swarmbase.tomlcheck`: reading TOML files and checking their tables,
  with one message style (each package raises its own error type);
- :mod:`swarmbase.fileio`: the one crash-safe file writer;
- :mod:`swarmbase.manifest`: the record a command keeps of the outputs it
  wrote into a folder (size and sha256 of each), so that a later run removes
  only those it wrote and nobody changed;
- :mod:`swarmbase.units`: human-readable byte counts, durations and counts;
- :mod:`swarmbase.cli`: what every command-line entry point does on Ctrl-C,
  on a closed output pipe and on standard output it cannot write, its parser
  (a usage error in one bounded line) and the bound of local processes and
  threads per core;
- :mod:`swarmbase.xmlguard`: XML from users (OMM, GPX) refused when it
  declares a document type, so no entity is ever expanded.
- :mod:`swarmbase.safejson`: JSON from peers and users parsed with bounded
  depth and size, a key given twice refused.
- :mod:`swarmbase.jit`: numba's loops cached on disk where numba can write
  its cache, compiled in each process where it cannot (a read-only install),
  from the ``njit`` its caller passes in.

It imports nothing from the project and no third-party package, so it sits
below the layering rules (``orbits`` / ``contact_sim`` never import ``fol`` or
torch; the learning core never imports ``orbits`` / ``contact_sim``).
"""
