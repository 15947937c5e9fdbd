"""The node agent: model exchange over ZeroMQ (CURVE) and on-board FOL personalization.

Modules, each with one job:

* :mod:`fol.agent.protocol` - the wire protocol ``FOL/1`` (documented there);
* :mod:`fol.agent.keys` - CURVE key pairs and the trust store;
* :mod:`fol.agent.config` - the ``node.toml`` configuration;
* :mod:`fol.agent.inbox` - persisted state, verified inbox, partial transfers;
* :mod:`fol.agent.transfer` - chunked, resumable transfers with credit-based flow control;
* :mod:`fol.agent.node` - the agent's poll loop, triggers and personalization;
* :mod:`fol.agent.loopback` - N agents on 127.0.0.1 (tests, examples, simulation);
* :mod:`fol.agent.cli` - ``fol agent`` and ``fol keys``.

Importing this package does not import torch.
"""
