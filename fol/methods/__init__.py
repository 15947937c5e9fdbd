"""Methods compared in the swarm report: FOL's variants and the baselines.

One module per method, each registering one :class:`~fol.methods.base.Method`
subclass; :func:`get_method` finds them by name.
"""

from fol.methods.base import Method, NodeResult, NodeSetup, SwarmContext, get_method, method_names, register

__all__ = ["Method", "NodeResult", "NodeSetup", "SwarmContext", "get_method", "method_names", "register"]
