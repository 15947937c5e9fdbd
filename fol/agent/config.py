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
    data = "dataset=synthetic-hurricane,nodes=3,node=0,psi=0.5,per_node=200"
    # data_root = "datasets"                # where real datasets are unpacked
    variant = "fol"                         # fol | fol-a | fol-n | fol-an | local

    [[peers]]
    id = "drone-2"
    address = "tcp://127.0.0.1:5602"
    # public_key = "trusted/drone-2.key"    # default: <trust_dir>/<id>.key

    [limits]
    max_payload_bytes = 200000000           # bytes; larger offers are refused unread
    max_concurrent_transfers = 4            # inbound transfers at once; more get BUSY
    chunk_bytes = 262144                    # bytes per CHUNK
    window_chunks = 8                       # outstanding FETCH credits per transfer
    chunk_timeout_s = 5.0                   # no CHUNK for this long: the link is stalled
    transfer_timeout_s = 60.0               # stalled this long: give up the slot (resumable)
    offer_retry_s = 2.0                     # repeat an unanswered OFFER after this long
    sync_bytes = 4194304                    # fsync + record the confirmed offset every this many bytes

    [trigger]
    models = 2          # personalize when Q models of the round arrived (default: min(#peers, fol.max_neighbours))
    deadline_s = 600.0  # ... or this long after the round started (0 = no deadline)
    auto_send = true    # offer the current model to every peer when a round starts
    on_board = true     # run FOL on the node (false: exchange only, the inbox is for someone else)

    [fol]               # FOL hyperparameters, see fol.config.FOLConfig
    rounds = 1

    [position]          # optional: the drone's position from its autopilot (fol.agent.position)
    source = "mavlink"
    connection = "udpin:127.0.0.1:14550"
"""

from __future__ import annotations

import math
import os
import tomllib
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from fol.agent.position import PositionConfig
from fol.agent.protocol import ProtocolError, check_name
from fol.errors import ConfigError

__all__ = ["AgentConfig", "PeerConfig", "Limits", "Trigger", "check_address"]

VARIANT_NAMES = ("local", "fol", "fol-a", "fol-n", "fol-an")
#: Default payload limit (bytes); equal to :data:`fol.checkpoint.DEFAULT_MAX_BYTES`, repeated
#: here so that reading a config (e.g. for ``fol agent ctl``) does not import torch.
DEFAULT_MAX_PAYLOAD_BYTES = 200 * 1000 * 1000


def check_address(value: Any, where: str, bind: bool = False) -> str:
    """A ZeroMQ endpoint ``tcp://host:port`` (``port`` may be ``*`` or 0 when binding) or ``ipc://path``."""
    if not isinstance(value, str):
        raise ConfigError(f"{where} must be a string like 'tcp://127.0.0.1:5601', got {value!r}")
    if value.startswith("ipc://") and len(value) > 6:
        return value
    if value.startswith("tcp://"):
        host, sep, port = value[6:].rpartition(":")
        if sep and host:
            if bind and port in ("*", "0"):
                return f"tcp://{host}:*"
            if port.isdigit() and 0 < int(port) < 65536:
                return value
    kind = "tcp://host:port (port may be '*' for any free port)" if bind else "tcp://host:port"
    raise ConfigError(f"{where} is {value!r}; expected {kind} or ipc://path")


@dataclass(frozen=True)
class PeerConfig:
    """A peer this node sends its model to: id, ROUTER address, public key file or Z85 text."""

    id: str
    address: str
    public_key: str


@dataclass(frozen=True)
class Limits:
    """Transfer limits (bytes, seconds); see the module docstring."""

    max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES
    max_concurrent_transfers: int = 4
    chunk_bytes: int = 256 * 1024
    window_chunks: int = 8
    chunk_timeout_s: float = 5.0
    transfer_timeout_s: float = 60.0
    offer_retry_s: float = 2.0
    sync_bytes: int = 4 * 1024 * 1024

    def __post_init__(self) -> None:
        _check_numbers(self, "limits")
        if self.chunk_bytes > 16 * 1024 * 1024:
            raise ConfigError(f"limits.chunk_bytes must be <= 16 MiB, got {self.chunk_bytes}")


@dataclass(frozen=True)
class Trigger:
    """When a round's personalization runs; see the module docstring."""

    models: int | None = None
    deadline_s: float = 0.0
    auto_send: bool = True
    on_board: bool = True

    def __post_init__(self) -> None:
        if self.models is not None and (not isinstance(self.models, int) or isinstance(self.models, bool) or self.models < 1):
            raise ConfigError(f"trigger.models must be a positive integer, got {self.models!r}")
        if isinstance(self.deadline_s, bool) or not isinstance(self.deadline_s, (int, float)) or not (
            math.isfinite(self.deadline_s) and self.deadline_s >= 0
        ):
            raise ConfigError(f"trigger.deadline_s must be a number of seconds >= 0, got {self.deadline_s!r}")
        for name in ("auto_send", "on_board"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(f"trigger.{name} must be true or false, got {getattr(self, name)!r}")


def _check_numbers(obj: Any, table: str) -> None:
    for f in fields(obj):
        value = getattr(obj, f.name)
        if f.type == "int":
            ok = isinstance(value, int) and not isinstance(value, bool) and value > 0
            expected = "a positive integer"
        else:
            ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0
            expected = "a positive number"
        if not ok:
            raise ConfigError(f"{table}.{f.name} must be {expected}, got {value!r}")


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
    source: str = "<config>"
    position: PositionConfig | None = None

    # ------------------------------------------------------------------ derived

    def fol_config(self) -> Any:
        """The ``[fol]`` table as a validated :class:`fol.config.FOLConfig` (imports torch)."""
        from fol.config import FOLConfig

        return FOLConfig.from_dict(dict(self.fol), where=f"{self.source} [fol]")

    def expected_models(self, max_neighbours: int) -> int:
        """Q: models per round that trigger personalization."""
        if self.trigger.models is not None:
            return self.trigger.models
        return max(1, min(len(self.peers), max_neighbours))

    # ------------------------------------------------------------------ loading

    @classmethod
    def from_toml(cls, path: str | os.PathLike[str]) -> "AgentConfig":
        path = Path(path)
        try:
            data = tomllib.loads(path.read_text())
        except FileNotFoundError:
            raise ConfigError(f"{path}: no such agent config file") from None
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise ConfigError(f"{path}: not valid TOML ({exc})") from None
        return cls.from_dict(data, base_dir=path.resolve().parent, source=str(path))

    @classmethod
    def from_dict(cls, data: dict[str, Any], base_dir: str | os.PathLike[str] = ".", source: str = "<config>") -> "AgentConfig":
        base = Path(base_dir)
        _only(data, {"node", "peers", "limits", "trigger", "fol", "position"}, source, "top level")
        node = data.get("node")
        if not isinstance(node, dict):
            raise ConfigError(f"{source}: missing [node] table")
        where = f"{source} [node]"
        _only(node, {"id", "listen", "control", "secret_key", "trust_dir", "state_dir", "model", "data", "data_root",
                     "variant"}, source, "[node]")

        def need(key: str) -> Any:
            if key not in node:
                raise ConfigError(f"{where}: missing field '{key}'")
            return node[key]

        def path_field(key: str) -> Path:
            value = need(key)
            if not isinstance(value, str) or not value:
                raise ConfigError(f"{where} {key} must be a path string, got {value!r}")
            p = Path(os.path.expanduser(value))
            return p if p.is_absolute() else base / p

        try:
            node_id = check_name(need("id"), f"{where} id")
        except ProtocolError as exc:
            raise ConfigError(str(exc)) from None
        listen = check_address(need("listen"), f"{where} listen", bind=True)
        control = check_address(node.get("control", "tcp://127.0.0.1:*"), f"{where} control", bind=True)
        data_spec = node.get("data")
        if data_spec is not None and (not isinstance(data_spec, str) or not data_spec.strip()):
            raise ConfigError(f"{where} data must be a node data spec string, got {data_spec!r}")
        if isinstance(data_spec, str) and "=" not in data_spec and not os.path.isabs(data_spec):
            data_spec = str(base / data_spec)  # a folder of class sub-folders, relative to the config
        data_root = node.get("data_root")
        if data_root is not None:
            if not isinstance(data_root, str):
                raise ConfigError(f"{where} data_root must be a path string, got {data_root!r}")
            data_root = str(base / os.path.expanduser(data_root))
        variant = node.get("variant", "fol")
        if variant not in VARIANT_NAMES:
            raise ConfigError(f"{where} variant is {variant!r}; expected one of {', '.join(VARIANT_NAMES)}")
        trust_dir = path_field("trust_dir")

        peers_raw = data.get("peers", [])
        if not isinstance(peers_raw, list):
            raise ConfigError(f"{source}: 'peers' must be an array of tables ([[peers]])")
        peers: list[PeerConfig] = []
        seen: set[str] = set()
        for i, entry in enumerate(peers_raw):
            pw = f"{source} [[peers]] #{i + 1}"
            if not isinstance(entry, dict):
                raise ConfigError(f"{pw} must be a table")
            _only(entry, {"id", "address", "public_key"}, source, f"[[peers]] #{i + 1}")
            try:
                pid = check_name(entry.get("id"), f"{pw} id")
            except ProtocolError as exc:
                raise ConfigError(str(exc)) from None
            if pid == node_id:
                raise ConfigError(f"{pw} id {pid!r} is this node's own id")
            if pid in seen:
                raise ConfigError(f"{pw} id {pid!r} is listed twice")
            seen.add(pid)
            address = check_address(entry.get("address"), f"{pw} address")
            key = entry.get("public_key")
            if key is None:
                key = str(trust_dir / f"{pid}.key")
            elif not isinstance(key, str):
                raise ConfigError(f"{pw} public_key must be a key file path or 40 Z85 characters, got {key!r}")
            elif not (len(key) == 40 and "/" not in key and not key.endswith(".key")):
                key = str(base / os.path.expanduser(key))
            peers.append(PeerConfig(pid, address, key))

        limits = _table(Limits, data.get("limits", {}), source, "limits")
        trigger = _table(Trigger, data.get("trigger", {}), source, "trigger")
        if trigger.on_board and data_spec is None:
            raise ConfigError(f"{where}: missing field 'data' (needed for on-board personalization; "
                              f"or set [trigger] on_board = false)")
        position = _table(PositionConfig, data["position"], source, "position") if "position" in data else None
        fol_table = data.get("fol", {})
        if not isinstance(fol_table, dict):
            raise ConfigError(f"{source}: [fol] must be a table")
        return cls(
            node_id=node_id, listen=listen, control=control, secret_key=path_field("secret_key"),
            trust_dir=trust_dir, state_dir=path_field("state_dir"), model=path_field("model"), data=data_spec,
            data_root=data_root, variant=variant, peers=peers, limits=limits, trigger=trigger,
            fol=dict(fol_table), source=source, position=position,
        )


def _only(table: dict[str, Any], allowed: set[str], source: str, where: str) -> None:
    unknown = sorted(set(table) - allowed)
    if unknown:
        raise ConfigError(
            f"{source} {where}: unknown field(s) {', '.join(map(repr, unknown))}; expected some of {', '.join(sorted(allowed))}"
        )


def _table(cls: type, value: Any, source: str, name: str) -> Any:
    if not isinstance(value, dict):
        raise ConfigError(f"{source}: [{name}] must be a table")
    _only(value, {f.name for f in fields(cls)}, source, f"[{name}]")
    try:
        return cls(**value)
    except ConfigError as exc:
        raise ConfigError(f"{source} [{name}]: {exc}") from None
