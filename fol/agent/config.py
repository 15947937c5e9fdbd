"""The node agent's TOML configuration (``fol agent --config node.toml``).

Relative paths are resolved against the folder of the TOML file. Every
mistake raises :class:`fol.errors.ConfigError` naming the file, the table and
the field. A complete example (``examples/drone_swarm/node.toml.template``
has the same layout)::

    [node]
    id = "drone-1"                          # this node's peer id (= its key name)
    listen = "tcp://127.0.0.1:5601"         # ROUTER for inbound transfers ("tcp://host:*" = any free port)
    control = "tcp://127.0.0.1:*"           # control socket for 'fol agent ctl' (CURVE, own key only)
    secret_key = "keys/drone-1.key_secret"  # from 'fol keys gen drone-1'
    trust_dir = "trusted"                   # peer public keys, from 'fol keys trust'
    state_dir = "state"                     # inbox, models, reports, state.json
    model = "drone-1.safetensors"           # the pretrained model (safe format)
    data = "dataset=synthetic-hurricane,nodes=3,node=0,psi=0.5,per_node=200"  # with trigger.on_board only
    # data_root = "datasets"                # where real datasets are unpacked (with trigger.on_board only)
    variant = "fol"                         # fol | fol-a | fol-n | fol-an | local (with trigger.on_board only)

    [[peers]]
    id = "drone-2"
    address = "tcp://127.0.0.1:5602"
    # public_key = "trusted/drone-2.key"    # default: <trust_dir>/<id>.key

    [limits]
    max_payload_bytes = 200000000           # bytes; larger offers are refused unread
    max_concurrent_transfers = 4            # inbound transfers at once; more get BUSY
    max_transfers_per_peer = 2              # ... of which one peer may hold at most this many; more get BUSY
    chunk_bytes = 262144                    # bytes per CHUNK (at least 4096: smaller offers get REJECT)
    window_chunks = 8                       # outstanding FETCH credits per transfer
    chunk_timeout_s = 5.0                   # no CHUNK for this long: the link is stalled
    transfer_timeout_s = 60.0               # stalled this long: give up the slot (resumable)
    min_transfer_rate_bytes_s = 10000       # slower than this over a period of transfer_timeout_s: give it up too
    offer_retry_s = 2.0                     # repeat an unanswered OFFER after this long
    sync_bytes = 4194304                    # fsync + record the confirmed offset every this many bytes
    partial_max_bytes = 1000000000          # partial/ folder cap; oldest abandoned transfers go first
    max_inbox_bytes = 10000000000           # received models kept at most (inbox/); over it, offers get REJECT
    partial_max_age_s = 86400.0             # abandoned partial transfers older than this are deleted
    reject_memory_s = 3600.0                # a rejected model (id or bytes) from a peer is refused unread this long
    round_retry_s = 30.0                    # a failed round is retried after this long, doubling each time ...
    round_retry_max_s = 1800.0              # ... up to this (at least round_retry_s)
    # every number > 0 and at most its bound in LIMITS_MAXIMA (e.g. window_chunks <= 1024)

    [trigger]
    models = 2          # personalize when Q models of the round arrived (default: min(#peers, fol.max_neighbours))
    deadline_s = 600.0  # ... or this long after the round started (0 = no deadline)
    # models at most 1024, deadline_s at most 604800 (a week): TRIGGER_MAXIMA
    auto_send = true    # offer the current model to every peer when a round starts
    on_board = true     # run FOL on the node (false: exchange only, the inbox is for someone else;
                        # node.data, node.data_root and node.variant, which nothing then reads, are refused)

    [fol]               # FOL hyperparameters, see fol.config.FOLConfig
    rounds = 1

    [position]          # optional: the drone's position from its autopilot or GPS (fol.agent.position)
    source = "mavlink"
    connection = "udpin:127.0.0.1:14550"
"""

from __future__ import annotations

import dataclasses
import os
import re
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from fol.agent.position import PositionConfig
from fol.agent.protocol import MIN_CHUNK_BYTES, ProtocolError, check_name
from fol.defaults import DEFAULT_MAX_BYTES, MAX_MODEL_BYTES, MAX_NEIGHBOURS
from fol.errors import ConfigError
from swarmbase.cli import printable
from swarmbase.tomlcheck import Table, brief, is_decimal, read_toml, shown

__all__ = ["AgentConfig", "PeerConfig", "Limits", "LIMITS_MAXIMA", "Trigger", "TRIGGER_MAXIMA", "check_address"]

VARIANT_NAMES = ("local", "fol", "fol-a", "fol-n", "fol-an")
#: Default payload limit (bytes): :data:`fol.checkpoint.DEFAULT_MAX_BYTES`, taken from :mod:`fol.defaults` so
#: that reading a config (e.g. for ``fol agent ctl``) does not import torch.
DEFAULT_MAX_PAYLOAD_BYTES = DEFAULT_MAX_BYTES
#: A CURVE public key written as text: 40 characters of Z85's alphabet (which holds '/', so a key can look like a path).
_Z85_KEY_RE = re.compile(r"^[0-9a-zA-Z.\-:+=^!/*?&<>()\[\]{}@%$#]{40}$")


def check_address(value: Any, where: str, bind: bool = False, base: Path | None = None) -> str:
    """A ZeroMQ endpoint ``tcp://host:port`` (``port`` may be ``*`` or 0 when binding) or ``ipc://path``;
    a relative ``ipc://`` path is resolved against ``base`` (the config file's folder), like every path
    of the config, not against the folder the agent was started from.

    >>> check_address("ipc://state/ctl.sock", "node.control", base=Path("/etc/fol"))
    'ipc:///etc/fol/state/ctl.sock'
    """
    if not isinstance(value, str):
        raise ConfigError(f"{where} must be a string like 'tcp://127.0.0.1:5601', got {shown(value)}")
    if value.startswith("ipc://") and len(value) > 6:
        path = value[len("ipc://"):]
        if base is not None and not path.startswith(("/", "@")):  # '@': a Linux abstract socket, no file
            return f"ipc://{Path(base) / path}"
        return value
    if value.startswith("tcp://"):
        host, sep, port = value[6:].rpartition(":")
        if sep and host:
            if bind and port in ("*", "0"):
                return f"tcp://{host}:*"
            if is_decimal(port, 5) and 0 < int(port) < 65536:  # ZeroMQ reads leading zeros: 005555 is 5555
                return value
    kind = "tcp://host:port (port may be '*' for any free port)" if bind else "tcp://host:port"
    raise ConfigError(f"{where} is {shown(value)}; expected {kind} or ipc://path")


@dataclass(frozen=True)
class PeerConfig:
    """A peer this node sends its model to: id, ROUTER address, public key file or Z85 text."""

    id: str
    address: str
    public_key: str


#: Upper bounds of ``[limits]`` fields, generous but safe (the defaults are far below): what each
#: drives, sized or counted by it. A received model is read whole into memory to be checked
#: (``max_payload_bytes``); each inbound transfer (``max_concurrent_transfers``, of which one peer holds
#: at most ``max_transfers_per_peer``: a share above the total is the total) holds an open file and
#: ``window_chunks`` FETCH credits of ``chunk_bytes`` each (one receive buffer per message;
#: ``chunk_bytes`` is at least 4,096, the smallest an OFFER may ask for); a stalled transfer keeps its
#: slot for ``transfer_timeout_s``, a slow one (``min_transfer_rate_bytes_s``, at most 1 GB/s: a minimum
#: above any link would end every transfer) for one such period; an unanswered offer or a failed round waits ``offer_retry_s`` /
#: ``round_retry_*`` before the next try. The disk caps stop where a cap would cap nothing: the
#: ``partial/`` folder never needs more than the largest number of transfers at once, each of the
#: largest payload (``partial_max_bytes``), the inbox (``max_inbox_bytes``) is capped at 10 TB, and
#: a sync interval (``sync_bytes``) beyond the largest payload syncs once, at the end, all the same.
#: An abandoned partial transfer is kept at most a week (``partial_max_age_s``), a rejected offer
#: remembered at most a day (``reject_memory_s``).
LIMITS_MAXIMA: dict[str, float] = {
    "max_payload_bytes": MAX_MODEL_BYTES,  # 4 GB, 20x the default; fol personalize --max-bytes' bound too
    "max_concurrent_transfers": 256,
    "max_transfers_per_peer": 256,
    "chunk_bytes": 16 * 1024 * 1024,  # 16 MiB
    "window_chunks": 1024,
    "chunk_timeout_s": 3600.0,
    "transfer_timeout_s": 86400.0,
    "min_transfer_rate_bytes_s": 1000 * 1000 * 1000,  # 1 GB/s
    "offer_retry_s": 3600.0,
    "sync_bytes": MAX_MODEL_BYTES,  # = max_payload_bytes' bound
    "partial_max_bytes": 256 * 4 * 1000 * 1000 * 1000,  # 1.024 TB: 256 transfers of 4 GB at once
    "max_inbox_bytes": 10 * 1000 ** 4,  # 10 TB, 1000x the default
    "partial_max_age_s": 7 * 86400.0,  # a week
    "reject_memory_s": 86400.0,
    "round_retry_s": 86400.0,
    "round_retry_max_s": 86400.0,
}


@dataclass(frozen=True)
class Limits:
    """Transfer, storage and retry limits (bytes, seconds); see the module docstring."""

    max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES
    max_concurrent_transfers: int = 4
    max_transfers_per_peer: int = 2
    chunk_bytes: int = 256 * 1024
    window_chunks: int = 8
    chunk_timeout_s: float = 5.0
    transfer_timeout_s: float = 60.0
    min_transfer_rate_bytes_s: int = 10_000
    offer_retry_s: float = 2.0
    sync_bytes: int = 4 * 1024 * 1024
    partial_max_bytes: int = 1000 * 1000 * 1000
    max_inbox_bytes: int = 10 * 1000 * 1000 * 1000
    partial_max_age_s: float = 24 * 3600.0
    reject_memory_s: float = 3600.0
    round_retry_s: float = 30.0
    round_retry_max_s: float = 1800.0

    def __post_init__(self) -> None:
        _check_numbers(self, "limits", LIMITS_MAXIMA, {"chunk_bytes": MIN_CHUNK_BYTES})
        if self.round_retry_max_s < self.round_retry_s:  # the back-off would start above its cap
            raise ConfigError(f"limits.round_retry_max_s: expected at least limits.round_retry_s "
                              f"({self.round_retry_s:g} s), got {self.round_retry_max_s:g}")


#: Upper bounds of ``[trigger]`` numbers, far above any use: a round waits for at most 1,024 models
#: (``models``; the inbox keeps one per trusted peer and round, and every model of the round is loaded
#: into memory for the personalization), the bound of ``fol.max_neighbours``, Q, which sets the count
#: when ``models`` is not given (:data:`fol.defaults.MAX_NEIGHBOURS`), and a deadline (``deadline_s``)
#: is at most a week (0 still means none): a larger number, like a mistyped unit, would leave the round
#: waiting for ever unseen.
TRIGGER_MAXIMA: dict[str, float] = {
    "models": MAX_NEIGHBOURS,  # 1,024
    "deadline_s": 7 * 86400.0,
}


@dataclass(frozen=True)
class Trigger:
    """When a round's personalization runs; see the module docstring."""

    models: int | None = None
    deadline_s: float = 0.0
    auto_send: bool = True
    on_board: bool = True

    def __post_init__(self) -> None:
        t = Table(dataclasses.asdict(self), "trigger", error=ConfigError)
        t.int("models", minimum=1, maximum=int(TRIGGER_MAXIMA["models"]))
        t.num("deadline_s", nonneg=True, maximum=TRIGGER_MAXIMA["deadline_s"])
        t.bool("auto_send")
        t.bool("on_board")


def _check_numbers(obj: Any, table: str, maxima: dict[str, float], minima: dict[str, int] | None = None) -> None:
    """Every field of ``obj`` is a positive integer (``int`` fields; at least ``minima[field]`` where
    given) or a positive number, at most ``maxima[field]`` where given."""
    t = Table(dataclasses.asdict(obj), table, error=ConfigError)
    for f in fields(obj):
        if f.type == "int":
            top = maxima.get(f.name)
            t.int(f.name, minimum=(minima or {}).get(f.name, 1), maximum=None if top is None else int(top))
        else:
            t.num(f.name, positive=True, maximum=maxima.get(f.name))


@dataclass
class AgentConfig:
    """A node agent's configuration (see the module docstring for every field)."""

    node_id: str
    listen: str
    secret_key: Path
    trust_dir: Path
    state_dir: Path
    model: Path
    control: str = "tcp://127.0.0.1:*"
    data: str | None = None
    data_root: str | None = None
    variant: str = "fol"
    peers: list[PeerConfig] = field(default_factory=list)
    limits: Limits = field(default_factory=Limits)
    trigger: Trigger = field(default_factory=Trigger)
    fol: dict[str, Any] = field(default_factory=dict)
    source: str = "<config>"  # the file, as brief() writes it: what every message names (from_dict sets it)
    position: PositionConfig | None = None

    # ------------------------------------------------------------------ derived

    def fol_config(self) -> Any:
        """The ``[fol]`` table as a validated :class:`fol.config.FOLConfig` (imports torch)."""
        from fol.config import FOLConfig

        return FOLConfig.from_dict(dict(self.fol), where=f"{self.source}: fol")

    def expected_models(self, max_neighbours: int) -> int:
        """Q: models per round that trigger personalization."""
        if self.trigger.models is not None:
            return self.trigger.models
        return max(1, min(len(self.peers), max_neighbours))

    # ------------------------------------------------------------------ loading

    @classmethod
    def from_toml(cls, path: str | os.PathLike[str]) -> "AgentConfig":
        path = Path(path)
        data, _ = read_toml(path, ConfigError, "agent config file")
        return cls.from_dict(data, base_dir=path.resolve().parent, source=str(path))

    @classmethod
    def from_dict(cls, data: dict[str, Any], base_dir: str | os.PathLike[str] = ".", source: str = "<config>") -> "AgentConfig":
        source = brief(source)  # the file as every message names it: once here, for the reader's and the agent's
        base = Path(base_dir)
        doc = Table(data, "", {"node", "peers", "limits", "trigger", "fol", "position"}, error=ConfigError,
                    source=source)
        if "node" not in doc:
            raise ConfigError(f"{source}: missing [node] table")
        node = doc.table("node", {"id", "listen", "control", "secret_key", "trust_dir", "state_dir", "model", "data",
                                  "data_root", "variant"})

        def path_field(key: str) -> Path:
            return node.path(key, base, required=True)  # type: ignore[return-value]

        try:
            node_id = check_name(node.raw("id", required=True), f"{source}: node.id")
        except ProtocolError as exc:
            raise ConfigError(str(exc)) from None
        listen = check_address(node.raw("listen", required=True), f"{source}: node.listen", bind=True, base=base)
        control = check_address(node.get("control", "tcp://127.0.0.1:*"), f"{source}: node.control", bind=True, base=base)
        data_spec = node.str("data", nonempty=True)
        if isinstance(data_spec, str) and "=" not in data_spec and not os.path.isabs(data_spec):
            data_spec = str(base / data_spec)  # a folder of class sub-folders, relative to the config
        data_root = node.path("data_root", base)
        variant = node.str("variant", "fol", choices=VARIANT_NAMES)
        trust_dir = path_field("trust_dir")

        peers_raw = data.get("peers", [])
        if not isinstance(peers_raw, list):
            raise ConfigError(f"{source}: peers: expected an array of tables ([[peers]])")
        peers: list[PeerConfig] = []
        seen: set[str] = set()
        for i, entry in enumerate(peers_raw):
            pt = Table(entry, f"peers[{i}]", {"id", "address", "public_key"}, error=ConfigError, source=source)
            try:
                pid = check_name(pt.get("id"), f"{source}: peers[{i}].id")
            except ProtocolError as exc:
                raise ConfigError(str(exc)) from None
            if pid == node_id:
                pt.fail("id", f"{pid!r} is this node's own id")
            if pid in seen:
                pt.fail("id", f"{pid!r} is listed twice")
            seen.add(pid)
            address = check_address(pt.get("address"), f"{source}: peers[{i}].address", base=base)
            key = pt.str("public_key", nonempty=True)
            if key is None:
                key = str(trust_dir / f"{pid}.key")
            elif not _Z85_KEY_RE.fullmatch(key) or key.endswith(".key") or (base / key).is_file():
                key = str(base / os.path.expanduser(key))  # a key file, not the key's 40 Z85 characters
            peers.append(PeerConfig(pid, address, key))

        limits = _table(Limits, doc.table("limits"), source)
        trigger = _table(Trigger, doc.table("trigger"), source)
        if trigger.on_board and data_spec is None:
            node.fail("data", "missing (needed for on-board personalization; or set trigger.on_board = false)")
        unread = [f"node.{key}" for key in ("data", "data_root", "variant") if node.get(key) is not None]
        if not trigger.on_board and unread:  # taken and ignored: the node would never personalize, unsaid
            named = " and ".join(unread) if len(unread) < 3 else f"{', '.join(unread[:-1])} and {unread[-1]}"
            raise ConfigError(f"{source}: {named}: not read with trigger.on_board = false (the node "
                              f"only exchanges models, it personalizes none); set trigger.on_board = true to "
                              f"personalize on board, or remove {named}")
        position = _table(PositionConfig, doc.table("position"), source) if "position" in doc else None
        if position is not None:
            position = _position_device(position, base, source)
        fol_table = doc.table("fol")
        return cls(
            node_id=node_id, listen=listen, control=control, secret_key=path_field("secret_key"),
            trust_dir=trust_dir, state_dir=path_field("state_dir"), model=path_field("model"), data=data_spec,
            data_root=None if data_root is None else str(data_root), variant=variant, peers=peers, limits=limits,
            trigger=trigger, fol=dict(fol_table.data), source=source, position=position,
        )


def _pyserial_installed() -> bool:
    import importlib.util

    return importlib.util.find_spec("serial") is not None


def _position_device(position: PositionConfig, base: Path, source: str) -> PositionConfig:
    """A ``[position]`` connection without ':' is a log file or a serial device: resolved against the config's
    folder like every path, and checked now (pymavlink would take a missing file for a serial port; a serial
    port is read only with pyserial, which neither pymavlink nor pynmeagps requires)."""
    if ":" in position.connection:  # udpin:/tcp:/... or host:port: a network connection, as written
        return position
    path = base / os.path.expanduser(position.connection)
    where = f"{source}: position.connection"
    try:
        exists, is_file = path.exists(), path.is_file()
    except OSError as exc:  # a name too long for the file system, a folder it may not enter
        raise ConfigError(f"{where}: {shown(position.connection)} cannot be checked ({exc.strerror})") from None
    if not exists:
        raise ConfigError(f"{where}: {printable(str(path))}: no such file or serial device")
    if not is_file and not _pyserial_installed():
        reader = "pymavlink opens" if position.source == "mavlink" else "the agent reads"
        raise ConfigError(f"{where}: {shown(position.connection)} is a serial port, which {reader} only with "
                          f"pyserial: pip install pyserial")
    return dataclasses.replace(position, connection=str(path))


def _table(cls: type, table: Table, source: str) -> Any:
    """``cls`` (:class:`Limits`, :class:`Trigger` or :class:`PositionConfig`) from a checked table; its own
    validation messages get the file name."""
    checked = Table(table.data, table.where, {f.name for f in fields(cls)}, error=ConfigError, source=source)
    for f in fields(cls):  # a field without a default: the table must give it
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            checked.raw(f.name, required=True)
    try:
        return cls(**table.data)
    except ConfigError as exc:
        raise ConfigError(f"{source}: {exc}") from None
