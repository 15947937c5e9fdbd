"""FOL: Federated Oriented Learning for satellite and drone swarms.

One-shot, peer-to-peer personalization: a node pretrains on its own imagery,
collects a few neighbour models during contact windows, aligns and prunes them,
ensembles the best and distills the ensemble into its own model.
"""

from fol.errors import CheckpointError, ConfigError, DataError, FOLError

__version__ = "0.1.0"

__all__ = ["FOLError", "CheckpointError", "ConfigError", "DataError", "__version__"]
