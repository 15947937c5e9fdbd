"""A node's persisted state and its inbox of received models.

Everything a node must not lose lives in its state folder::

    state.json                       AgentState, rewritten atomically after every change
    agent.json                       runtime info of a running agent (pid, endpoints)
    models/round-<r>.safetensors     the node's own models (round 0 = the pretrained one)
    models/round-<e>-ensemble/       the ensemble round e deployed (fol-a, fol-an)
    reports/round-<e>.json           the report of personalization round e
    inbox/round-<r>/<sender>.safetensors   verified models received from peers
    partial/<key>.part, <key>.json   transfers in progress and their confirmed offset
                                     (swept by age and size: :meth:`Inbox.sweep_partials`)

A received payload reaches the inbox only through :meth:`Inbox.commit`: the
temporary file's sha256 must equal the offer's, the safe loader
(:func:`fol.checkpoint.load_model`) must accept it and its card must agree with
the offer; then it is atomically renamed into ``inbox/`` and the state file is
rewritten. A crash between the rename and the state write is repaired at the
next start (:meth:`Inbox.recover` re-verifies and registers inbox files the
state does not list, with the card check a received model passes and up to
:data:`MAX_INBOX_MODELS`), so a model is never lost and never counted twice.

Duplicate detection: an offer is skipped when its model id, or its payload
sha256, is already in the inbox, or when the same sender already delivered a
model for that round. An on-board node also skips rounds it will never use
(older than the one it collects, or after its last one), so the inbox holds at
most one model per trusted peer and round. The receiver also refuses offers that
would bring the received models over ``[limits] max_inbox_bytes``
(:meth:`Inbox.received_bytes`) or over :data:`MAX_INBOX_MODELS` of them.
"""

from __future__ import annotations

import errno
import hashlib
import logging
import math
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Callable

from fol.agent.protocol import Offer, ProtocolError, check_name
from fol.errors import CheckpointError, ConfigError
from fol.fileio import file_sha256, fsync_dir, make_dirs, remove_temporaries, write_json_atomic
from swarmbase.safejson import loads as bounded_loads
from swarmbase.units import format_seconds
from swarmbase.tomlcheck import MAX_NAME_CHARS, brief, check_name_length, is_finite_number, read_text_file, shown

__all__ = ["AgentState", "Inbox", "file_sha256", "STATE_FORMAT", "MAX_INBOX_MODELS", "outside_state_folder"]

log = logging.getLogger(__name__)

STATE_FORMAT = "fol-agent-state"
#: Age (s) after which an incomplete partial transfer (or a stray file in ``partial/``) is deleted.
STRAY_AGE_S = 60.0
STATE_VERSION = 1
MODEL_SUFFIX = ".safetensors"
#: The largest ``state.json`` read (bytes), its deepest nesting and most values, checked before it is
#: parsed or walked: far above what a node writes (its records are a few levels deep; ``fol agent ctl
#: status``, which lists them, takes at most 1,000,000 values), so that a damaged or hand-edited file is
#: one line, not a traceback or gigabytes of memory.
MAX_STATE_BYTES = 64 * 1024 * 1024
MAX_STATE_DEPTH = 32
MAX_STATE_ITEMS = 1_000_000
#: The most received models the state records (:meth:`Inbox.commit`; the receiver refuses offers beyond it),
#: and a received model's producer is at most ``MAX_NAME_CHARS`` (200) characters: so ``state.json`` stays
#: far inside the limits above (10,000 records of the longest fields are about 7 MB and 90,000 values). An
#: exchange-only node recorded every model of every round: about 111,000 records (cnn-small models, 3.5 GB,
#: inside ``max_inbox_bytes``), or 270 with 250,000-character producers, made the file pass them, and the
#: agent refused to restart.
MAX_INBOX_MODELS = 10_000
#: The largest ``partial/<key>.json`` read (bytes), checked before it is opened: the record the agent writes
#: (:meth:`Inbox.record_progress`: a node id of at most 64 characters, a model id of 128, a sha256 and three
#: integers below 2**63) is at most 401 bytes. A larger file, a FIFO or a device there is a damaged record.
MAX_PARTIAL_RECORD_BYTES = 4096


def _is_ensemble_file(path: Path) -> bool:
    """A file :func:`fol.personalize.save_ensemble` writes."""
    return path.name == "ensemble.json" or (path.name.startswith("member-") and path.suffix == MODEL_SUFFIX)


def _is_pool_file(path: Path) -> bool:
    """A file :func:`fol.personalize.save_pool_round` writes."""
    return path.name.startswith("candidate-") and path.suffix == MODEL_SUFFIX


#: The fields of the state's records the agent reads, and their types.
_RECORD_FIELDS: dict[str, dict[str, type]] = {
    "models": {"round": int, "file": str, "sha256": str, "size": int, "spec": dict},
    "received": {"sender": str, "round": int, "sha256": str, "size": int, "file": str},
    "outbox": {"peer": str, "model_id": str, "status": str, "detail": str},
}
#: The fields of a history entry (a finished personalization round) ``fol agent ctl status`` prints; every
#: agent has written them all.
_HISTORY_FIELDS: dict[str, type] = {"round": int, "trigger": str, "model": str, "report": str, "used": list}
_TYPE_NAMES = {int: "an integer", str: "a string", dict: "an object"}


#: The fields of the state that hold a path: ``current_model`` and ``local_model``, each record's ``file`` of
#: ``models`` and ``received``, and each ``history`` entry's ``model`` and ``report``.
_PATH_RECORDS = ("models", "received")
_HISTORY_PATHS = ("model", "report")
#: Why a path of these fields that :func:`outside_state_folder` refuses is refused, after the field and value.
_OUTSIDE = ("is outside the state folder; expected a path relative to it without '..' parts, as the agent writes "
            "(models/round-1.safetensors)")


def outside_state_folder(path: str) -> bool:
    """Whether ``path``, as the state records it, names something outside the state folder: an absolute path,
    one with a ``..`` part, or one holding a NUL (no file has one). The agent records every path relative to
    the state folder (:meth:`Inbox.relative`: ``models/round-1.safetensors``), and has since its first
    version; such a path comes only from a hand-edited or damaged file, and is never followed.

    >>> [outside_state_folder(p) for p in ("models/round-1.safetensors", "/etc/passwd", "models/../../x", "")]
    [False, True, True, False]
    """
    return path.startswith("/") or ".." in PurePosixPath(path).parts or "\0" in path


def _non_finite_at(value: Any) -> tuple[str, float] | None:
    """The path (``history[0].time``) and value of a NaN or an infinity in parsed JSON, or None
    (iterative: any depth)."""
    stack: list[tuple[Any, str]] = [(value, "")]
    while stack:
        item, path = stack.pop()
        if isinstance(item, float) and not math.isfinite(item):
            return path, item
        if isinstance(item, dict):
            stack.extend((v, f"{path}.{k}" if path else str(k)) for k, v in item.items())
        elif isinstance(item, list):
            stack.extend((v, f"{path}[{i}]") for i, v in enumerate(item))
    return None


#: The fields every agent writing ``state.json`` version 1 has written (what a missing one is expected to be):
#: a file of that version without one is damaged or hand-edited, and is refused naming it. ``round_age_s`` and
#: ``round_age_at`` came later within version 1: a file written before them lacks them, and they keep their
#: defaults (an age of 0 at ``round_started``).
_WRITTEN_SINCE_VERSION_1 = {
    "node": "the node's id (a string)", "round": "the round in progress (a positive integer)",
    "round_started": "the round's start (seconds since the epoch)", "finished": "true or false",
    "current_model": "a path in the state folder (a string)", "local_model": "a path in the state folder (a string)",
    "models": "an object of the node's models", "received": "an object of received models",
    "outbox": "an object of offers to peers", "history": "a list of finished rounds"}


@dataclass
class AgentState:
    """What a node persists (``state.json``).

    ``round`` is the collection round in progress (1-based; ``rounds done = round - 1``),
    ``round_started`` its wall-clock start (s since the epoch, for the record).
    ``round_age_s`` is the round's age as the agent counted it (on the monotonic
    clock) at wall time ``round_age_at``, both written with every save: after a
    restart the age goes on from there plus the downtime ``now - round_age_at``
    (none if negative, a clock set back), so a wall clock stepped while the agent
    ran does not move the ``[trigger] deadline_s``. ``current_model`` / ``local_model`` are paths relative to the state
    folder. ``models`` maps the node's own model ids to ``{round, file, sha256, size}``;
    ``received`` maps received model ids to ``{sender, round, sha256, size, file, time}``;
    ``outbox`` maps ``"<peer>|<model_id>"`` to ``{peer, model_id, status, detail}``
    (status ``pending``, ``delivered``, ``skipped`` or ``rejected``); ``history``
    lists finished personalization rounds.
    """

    node: str
    round: int = 1
    round_started: float = field(default_factory=time.time)
    round_age_s: float = 0.0
    round_age_at: float | None = None  # None: round_started (a new state, or one written before these fields)
    finished: bool = False
    current_model: str = ""
    local_model: str = ""
    models: dict[str, dict[str, Any]] = field(default_factory=dict)
    received: dict[str, dict[str, Any]] = field(default_factory=dict)
    outbox: dict[str, dict[str, Any]] = field(default_factory=dict)
    history: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.round_age_at is None:
            self.round_age_at = self.round_started

    def to_dict(self) -> dict[str, Any]:
        return {"format": STATE_FORMAT, "version": STATE_VERSION, **asdict(self)}

    @classmethod
    def from_dict(cls, data: Any, source: str) -> "AgentState":
        if not isinstance(data, dict) or data.get("format") != STATE_FORMAT:
            raise ConfigError(f"{source}: not a FOL agent state file")
        if data.get("version") != STATE_VERSION:
            raise ConfigError(f"{source}: state version {shown(data.get('version'))}, this agent reads {STATE_VERSION}")
        for name, expected in _WRITTEN_SINCE_VERSION_1.items():  # absent only from a damaged or hand-edited file
            if name not in data:
                raise ConfigError(f"{source}: field {name!r} is missing; expected {expected}")
        known = set(cls.__dataclass_fields__)
        state = cls(**{k: v for k, v in data.items() if k in known})
        if not isinstance(state.round, int) or isinstance(state.round, bool) or state.round < 1:  # true is not round 1
            raise ConfigError(f"{source}: field 'round' must be a positive integer, got {shown(state.round)}")
        for name in ("round_started", "round_age_s", "round_age_at"):
            value = getattr(state, name)
            if not is_finite_number(value) or value < 0:
                raise ConfigError(f"{source}: field {name!r} must be a non-negative number of seconds, got {shown(value)}")
        if not isinstance(state.finished, bool):
            raise ConfigError(f"{source}: field 'finished' must be true or false, got {shown(state.finished)}")
        for name in ("node", "current_model", "local_model"):
            if not isinstance(getattr(state, name), str):
                raise ConfigError(f"{source}: field {name!r} must be a string, got {shown(getattr(state, name))}")
        for name, required in _RECORD_FIELDS.items():
            records = getattr(state, name)
            if not isinstance(records, dict):
                raise ConfigError(f"{source}: field {name!r} must be an object")
            for key, record in records.items():
                if not isinstance(record, dict):
                    raise ConfigError(f"{source}: field {name!r} entry {shown(key)} must be an object")
                for fname, ftype in required.items():
                    value = record.get(fname)
                    if not isinstance(value, ftype) or isinstance(value, bool):
                        raise ConfigError(f"{source}: field {name!r} entry {shown(key)}: {fname!r} must be "
                                          f"{_TYPE_NAMES[ftype]}, got {shown(value)}")
        paths = [(f"field {name!r}", getattr(state, name)) for name in ("current_model", "local_model")]
        paths += [(f"field {name!r} entry {shown(key)}: 'file'", record["file"])
                  for name in _PATH_RECORDS for key, record in getattr(state, name).items()]
        for where, value in paths:  # followed when the agent reads or sends a model: never out of the folder
            if outside_state_folder(value):
                raise ConfigError(f"{source}: {where} {brief(value)} {_OUTSIDE}")
        for key, record in state.received.items():  # arrival time: received_for orders by it (absent: 0)
            if "time" in record and not is_finite_number(record["time"]):
                raise ConfigError(f"{source}: field 'received' entry {shown(key)}: 'time' must be a number of "
                                  f"seconds, got {shown(record['time'])}")
        if not isinstance(state.history, list) or not all(isinstance(h, dict) for h in state.history):
            raise ConfigError(f"{source}: field 'history' must be a list of objects")
        for i, entry in enumerate(state.history):
            for fname, ftype in _HISTORY_FIELDS.items():
                value = entry.get(fname)
                if (not isinstance(value, ftype) or isinstance(value, bool)
                        or (ftype is list and not all(isinstance(v, str) for v in value))):
                    expected = "a list of strings" if ftype is list else _TYPE_NAMES[ftype]
                    raise ConfigError(f"{source}: field 'history' entry {i}: {fname!r} must be {expected}, "
                                      f"got {shown(value)}")
            for fname in _HISTORY_PATHS:  # shown by `fol agent ctl status`, the report read back: as the paths above
                if outside_state_folder(entry[fname]):
                    raise ConfigError(f"{source}: field 'history' entry {i}: {fname!r} {brief(entry[fname])} "
                                      f"{_OUTSIDE}")
        where = _non_finite_at(state.to_dict())  # the reader takes NaN / Infinity (named above); saving does not
        if where is not None:
            raise ConfigError(f"{source}: field {shown(where[0], 120)} is {where[1]}; expected a finite number "
                              f"(the agent writes its state as JSON, which has no NaN or infinity)")
        return state

    def received_for(self, model_round: int) -> list[dict[str, Any]]:
        """Received records of models whose card round is ``model_round``, in arrival order."""
        records = [dict(r, model_id=mid) for mid, r in self.received.items() if r["round"] == model_round]
        return sorted(records, key=lambda r: (r.get("time", 0.0), r["sender"]))


class Inbox:
    """The state folder of one node: persisted state, own models, inbox, partial transfers.

    ``accept_any_round``: keep models of every round (exchange-only nodes);
    otherwise models older than the round the node is collecting are skipped
    as stale.
    """

    def __init__(self, state_dir: str | os.PathLike[str], node_id: str, max_payload_bytes: int,
                 accept_any_round: bool = False) -> None:
        self.root = Path(state_dir)
        self.node_id = node_id
        self.max_payload_bytes = max_payload_bytes
        self.accept_any_round = accept_any_round
        #: ``(class_names, input_shape)`` a received model must have to be useful here
        #: (set by an on-board agent from its own model); None accepts any.
        self.compatible: tuple[tuple[str, ...], tuple[int, ...]] | None = None
        #: The newest card round this node will ever collect (an on-board agent: its last round - 1);
        #: later rounds are skipped, so a peer cannot fill the inbox with models nobody uses. None: no bound.
        self.last_round: int | None = None
        for sub in ("models", "reports", "inbox", "partial"):
            try:
                make_dirs(self.root / sub)
            except OSError as exc:
                raise ConfigError(f"{brief(self.root / sub)}: cannot create the state sub-folder ({exc.strerror}); "
                                  f"expected a writable folder") from None
        #: Set by the agent: ``() -> (round age in s, wall time)``, stamped into the state at every save.
        self.round_clock: Callable[[], tuple[float, float]] | None = None
        self.state_path = self.root / "state.json"
        self.state_named = brief(self.state_path)  # as every message names the file (the state folder is the user's)
        self.is_new = not self.state_path.exists()
        if self.is_new:
            self.state = AgentState(node=node_id)
        else:
            text = read_text_file(self.state_path, ConfigError, "agent state file", MAX_STATE_BYTES)
            try:
                # NaN / Infinity taken, as json.loads took them: a field holding one is named by from_dict
                data = bounded_loads(text, max_depth=MAX_STATE_DEPTH, max_items=MAX_STATE_ITEMS, allow_nan=True)
            except ValueError as exc:
                raise ConfigError(f"{self.state_named}: cannot read agent state ({exc})") from None
            self.state = AgentState.from_dict(data, self.state_named)
            if self.state.node != node_id:
                raise ConfigError(
                    f"{self.state_named}: state belongs to node {shown(self.state.node)}, this agent is {node_id!r}"
                )

    # ------------------------------------------------------------------ state

    def save(self) -> None:
        if self.round_clock is not None:
            self.state.round_age_s, self.state.round_age_at = self.round_clock()
        write_json_atomic(self.state_path, self.state.to_dict())

    def path(self, relative: str) -> Path:
        return self.root / relative

    def relative(self, path: Path) -> str:
        return path.relative_to(self.root).as_posix()

    def model_file(self, field: str) -> Path:
        """The model file the state's ``field`` (``current_model``, ``local_model``) names, which must be a
        file; else a :class:`~fol.errors.ConfigError` of one line naming ``state.json``, the field and its
        value cut by :func:`~swarmbase.tomlcheck.brief` (a name too long for the file system, too)."""
        value = getattr(self.state, field)
        path = self.path(value)
        try:
            present = path.is_file()
        except OSError as exc:  # a name too long for the file system; a folder on its way that cannot be searched
            raise ConfigError(f"{self.state_named}: field {field!r} {brief(value)} cannot be checked "
                              f"({exc.strerror})") from None
        if not present:
            raise ConfigError(f"{self.state_named}: field {field!r}: model {brief(value)} is missing")
        return path

    # ------------------------------------------------------------------ own models

    def register_own_model(self, path: Path, round_: int) -> str:
        """Record one of the node's own model files (already validated); returns its model id."""
        from fol.checkpoint import read_card

        card = read_card(path, max_bytes=self.max_payload_bytes)
        sha = file_sha256(path)
        model_id = f"{self.node_id}:r{round_}:{sha[:16]}"
        self.state.models[model_id] = {"round": round_, "file": self.relative(path), "sha256": sha,
                                       "size": path.stat().st_size, "spec": card.spec.to_dict()}
        return model_id

    def own_model_id(self, relative_file: str) -> str | None:
        for mid, rec in self.state.models.items():
            if rec["file"] == relative_file:
                return mid
        return None

    def own_offer(self, model_id: str, chunk_bytes: int) -> tuple[Offer, Path]:
        """The offer of one of the node's own models, and its file."""
        rec = self.state.models[model_id]
        offer = Offer(sender=self.node_id, model_id=model_id, round=rec["round"], spec=rec["spec"], size=rec["size"],
                      sha256=rec["sha256"], chunk_bytes=chunk_bytes)
        return offer, self.path(rec["file"])

    # ------------------------------------------------------------------ admission

    def admit(self, sender: str, offer: Offer) -> tuple[str, str]:
        """Decide on an offer: ``("accept", "")``, ``("skip", reason)`` or ``("reject", reason)``."""
        if offer.size > self.max_payload_bytes:
            return "reject", f"payload of {offer.size} bytes is over this node's limit of {self.max_payload_bytes} bytes"
        if offer.model_id in self.state.received:
            return "skip", f"duplicate: model {offer.model_id} is already in the inbox"
        for mid, rec in self.state.received.items():
            if rec["sha256"] == offer.sha256:
                return "skip", f"duplicate: the same bytes arrived before as {mid} from {rec['sender']}"
            if rec["sender"] == sender and rec["round"] == offer.round:
                return "skip", f"already holds a round-{offer.round} model from {sender} ({mid})"
        if not self.accept_any_round:
            if self.state.finished:
                return "skip", "this node has finished all its rounds"
            wanted = self.state.round - 1
            if offer.round < wanted:
                return "skip", f"stale: model of round {offer.round}, this node collects round-{wanted} models"
            if self.last_round is not None and offer.round > self.last_round:
                return "skip", (f"not needed: model of round {offer.round}, this node collects models up to "
                                f"round {self.last_round}")
        return "accept", ""

    def received_bytes(self) -> int:
        """Bytes of the received models the inbox holds (checked against ``[limits] max_inbox_bytes``)."""
        return sum(rec["size"] for rec in self.state.received.values())

    # ------------------------------------------------------------------ partial transfers

    def partial_key(self, sender: str, model_id: str) -> str:
        """The file name stem of a transfer's partial files (no peer-chosen text reaches the file system)."""
        return hashlib.sha256(f"{sender}\0{model_id}".encode()).hexdigest()[:32]

    def partial_paths(self, sender: str, model_id: str) -> tuple[Path, Path]:
        key = self.partial_key(sender, model_id)
        return self.root / "partial" / f"{key}.part", self.root / "partial" / f"{key}.json"

    def open_partial(self, sender: str, offer: Offer) -> tuple[Path, int]:
        """The temporary file of a transfer and the confirmed offset to resume from.

        A partial file left by an earlier attempt at the same model (same sender,
        id, size and sha256) resumes at its confirmed offset; anything after it
        (written but never confirmed) is cut off. Otherwise the transfer starts at 0.
        """
        part, meta = self.partial_paths(sender, offer.model_id)
        confirmed = 0
        if meta.exists() and part.exists():
            try:  # a flat object of a few fields; bounded: a damaged record nested deep is one line too
                # a regular file of at most MAX_PARTIAL_RECORD_BYTES, checked before it is opened: a FIFO blocked
                # the read (and the transfer) until a writer came, a huge file was read whole
                text = read_text_file(meta, ValueError, "partial-transfer record", MAX_PARTIAL_RECORD_BYTES)
                info = bounded_loads(text, max_depth=1, max_items=64)
                if not isinstance(info, dict):
                    raise ValueError(f"expected a JSON object, got {type(info).__name__}")
                same = (info.get("sender") == sender and info.get("sha256") == offer.sha256
                        and info.get("size") == offer.size)
                if same:
                    confirmed = max(0, min(int(info.get("confirmed", 0)), part.stat().st_size, offer.size))
            except (OSError, ValueError, TypeError, OverflowError) as exc:
                log.warning("%s: %s: unreadable partial-transfer record (%s); receiving %s from the start",
                            self.node_id, meta, exc, offer.model_id)
                confirmed = 0
        if confirmed == 0:
            part.unlink(missing_ok=True)
            part.touch()
        else:
            os.truncate(part, confirmed)
        self.record_progress(sender, offer, confirmed)
        return part, confirmed

    def record_progress(self, sender: str, offer: Offer, confirmed: int) -> None:
        """Persist the confirmed offset (the caller fsynced the data up to it)."""
        _, meta = self.partial_paths(sender, offer.model_id)
        write_json_atomic(meta, {"sender": sender, "model_id": offer.model_id, "sha256": offer.sha256,
                                 "size": offer.size, "round": offer.round, "confirmed": confirmed})

    def discard_partial(self, sender: str, model_id: str) -> None:
        for p in self.partial_paths(sender, model_id):
            p.unlink(missing_ok=True)

    def sweep_partials(self, *, max_age_s: float, max_bytes: int, keep: set[str] | frozenset[str] = frozenset(),
                       need_bytes: int = 0, now: float | None = None) -> bool:
        """Delete abandoned partial transfers; True if ``need_bytes`` more fit under ``max_bytes``.

        A transfer's files (``<key>.part``, ``<key>.json`` and temporary files of
        their atomic writes) are deleted when their newest modification is older
        than ``max_age_s``, or older than :data:`STRAY_AGE_S` when incomplete
        (one of the pair missing) or not a transfer's file at all. Then, if the
        folder's size plus ``need_bytes`` is over ``max_bytes``, the oldest
        transfers are deleted until it fits. Keys in ``keep`` (transfers that
        are running or about to resume) are never touched; their bytes are
        expected to be part of ``need_bytes``. Disk errors are logged, not raised.
        """
        now = time.time() if now is None else now
        groups: dict[str, list[tuple[Path, int, float]]] = {}
        try:
            for path in (self.root / "partial").iterdir():
                st = path.stat()
                key = path.name.lstrip(".").split(".")[0]
                groups.setdefault(key, []).append((path, st.st_size, st.st_mtime))
        except OSError as exc:
            log.warning("%s: cannot list partial transfers: %s", self.node_id, exc)
            return False
        removed: list[str] = []
        total = 0

        def drop(key: str, why: str) -> None:
            for path, _, _ in groups.pop(key):
                path.unlink(missing_ok=True)
            removed.append(f"{key} ({why})")

        try:
            for key in [k for k in groups if k not in keep]:
                files = groups[key]
                age = now - max(m for _, _, m in files)
                names = {p.name for p, _, _ in files}
                complete = names == {f"{key}.part", f"{key}.json"}
                if age > max_age_s:
                    drop(key, f"abandoned {format_seconds(age)} ago")
                elif not complete and age > STRAY_AGE_S:
                    drop(key, "incomplete")
            total = sum(size for key, files in groups.items() if key not in keep for _, size, _ in files)
            by_age = sorted((k for k in groups if k not in keep), key=lambda k: max(m for _, _, m in groups[k]))
            while total + need_bytes > max_bytes and by_age:
                key = by_age.pop(0)
                total -= sum(size for _, size, _ in groups[key])
                drop(key, "partial folder over its size limit")
        except OSError as exc:
            log.warning("%s: cannot sweep partial transfers: %s", self.node_id, exc)
            return False
        finally:
            if removed:
                log.info("%s: removed %d abandoned partial transfer(s): %s", self.node_id, len(removed),
                         ", ".join(removed))
        return total + need_bytes <= max_bytes

    # ------------------------------------------------------------------ commit

    def inbox_path(self, sender: str, model_round: int) -> Path:
        return self.root / "inbox" / f"round-{model_round}" / f"{sender}{MODEL_SUFFIX}"

    def verify(self, part: Path, offer: Offer, digest: str | None = None) -> Any:
        """Check a complete temporary file against its offer; returns the model card.

        ``digest`` is the file's sha256 if the caller computed it while writing
        (otherwise the file is hashed here). Raises
        :class:`fol.errors.CheckpointError` (payload) or :class:`ProtocolError`
        (disagreement with the offer).
        """
        from fol.checkpoint import load_model

        size = part.stat().st_size
        if size != offer.size:
            raise ProtocolError(f"payload is {size} bytes, the offer said {offer.size}")
        digest = digest or file_sha256(part)
        if digest != offer.sha256:
            raise ProtocolError(f"payload sha256 {digest[:16]}... does not match the offer's {offer.sha256[:16]}... "
                                f"(corrupted or tampered in transit)")
        card = load_model(part, max_bytes=self.max_payload_bytes, source=f"model {offer.model_id}").card
        check_name_length(card.producer, "model card field 'producer'", ProtocolError)  # recorded in the state
        if card.spec.to_dict() != offer.spec:
            raise ProtocolError(f"model card spec {card.spec.to_dict()} differs from the offer's "
                                f"{shown(offer.spec, 200)}")
        self.check_card(card, offer.round, "the offer said")
        return card

    def check_card(self, card: Any, model_round: int, said: str) -> None:
        """Raise :class:`ProtocolError` unless a model's card is for round ``model_round`` (``said``
        names where that round comes from) and, when :attr:`compatible` is set, for this node's classes
        and input shape: the rule both a received model (:meth:`verify`) and a model found in the inbox
        at start-up (:meth:`recover`) must pass."""
        if card.round != model_round:
            raise ProtocolError(f"model card says round {card.round}, {said} {model_round}")
        if self.compatible is not None:
            if (why := card.unusable_by(*self.compatible)) is not None:  # personalize's rule for its neighbours
                raise ProtocolError(f"model is of no use to this node: {why}")

    def commit(self, sender: str, offer: Offer, part: Path, digest: str | None = None) -> dict[str, Any]:
        """Verify ``part`` and move it atomically into the inbox; returns the new record.

        On failure the partial file is deleted and the error re-raised; the inbox
        is untouched.
        """
        target = self.inbox_path(sender, offer.round)
        try:
            card = self.verify(part, offer, digest)
            make_dirs(target.parent)
            if target.exists():  # the receiver runs one transfer per sender and round; be safe rather than overwrite
                raise ProtocolError(f"the inbox already holds a round-{offer.round} model from {sender}")
            os.replace(part, target)
        except Exception:  # noqa: BLE001 - whatever went wrong, no partial file stays behind
            self.discard_partial(sender, offer.model_id)
            raise
        fsync_dir(target.parent)
        record = {"sender": sender, "round": offer.round, "sha256": offer.sha256, "size": offer.size,
                  "file": self.relative(target), "time": time.time(), "producer": card.producer,
                  "arch": card.spec.arch}
        self.state.received[offer.model_id] = record
        try:
            self.save()
        except Exception:  # noqa: BLE001 - e.g. a full disk: undo, so that the sender's REJECT is the truth
            del self.state.received[offer.model_id]
            target.unlink(missing_ok=True)
            self.discard_partial(sender, offer.model_id)
            raise
        self.discard_partial(sender, offer.model_id)
        log.info("%s: stored %s from %s (%d bytes, round %d)", self.node_id, offer.model_id, sender, offer.size, offer.round)
        return record

    # ------------------------------------------------------------------ recovery

    def recover(self) -> list[str]:
        """Reconcile the inbox folder with the state after a crash; returns what was done.

        * state records whose file is gone are dropped (first, so that they take no room below), and so
          are those whose ``file`` no file can have (too long for the file system), with a
          warning naming ``state.json``'s field and the name cut by :func:`~swarmbase.tomlcheck.brief`;
          a name that cannot be checked for another reason (a folder on its way that cannot be searched)
          is a :class:`~fol.errors.ConfigError` of one line naming them;
        * inbox files the state does not list (crash after the rename; regular files named
          ``*.safetensors`` in ``inbox/round-<n>/``, ``n`` digits: other names, folders such as a copy
          ``round-1.bak/`` and anything in them are left alone) are verified
          with the safe loader and registered (or deleted when invalid); a card's producer over
          ``MAX_NAME_CHARS`` (200) characters, which :meth:`verify` refuses in a received model
          (such a file can only come from an older agent), is recorded cut to 197 characters and
          ``...``, with a warning naming the file: the model is kept and registered, and ``state.json``
          stays bounded (the whole producer stays in the file's card);
        * a file whose name is not ``<sender>.safetensors`` with a node id as the sender
          (:func:`fol.agent.protocol.check_name`: 1-64 letters, digits, ``.``, ``_``, ``-``; the name
          the receiver gives a file), e.g. one of bytes that are not UTF-8, a newline or a terminal escape
          (local tampering), is left on disk unread and unregistered, with one warning counting such files
          and naming the first, escaped; so is the file of a state record whose sender is no node id (an
          earlier agent's recovery recorded any name): the record is dropped, with a warning;
        * a file whose card fails :meth:`check_card`, the check a received model passes (a round other
          than its folder's; an on-board node's agent sets :attr:`compatible` first, so classes or an input
          shape other than the node's model's), is not registered: it is renamed ``<name>.refused``
          (:meth:`_set_aside`), with a warning naming it, never deleted; a peer's real model of that
          sender and round can still arrive;
        * a file of the same bytes (sha256) as a recorded received model, or as one registered before it
          here (files are taken by sorted path), is set aside in the same way: the receiver keeps one copy
          of a payload, and the record stays that of the first file at every restart;
        * once the state records :data:`MAX_INBOX_MODELS` received models, the remaining files are
          left on disk unread and unregistered, with one warning counting them and naming the first;
        * the crash-safe writer's temporary files (:func:`fol.fileio.is_temporary`) left in
          the state folder itself (``state.json``'s and ``agent.json``'s), ``inbox/round-*/``, ``models/``, ``models/round-*-ensemble/``, ``models/pool/round-*/``
          and ``reports/`` are removed (no other file);
        * the ensemble folder of a round the state does not record (``models/round-<e>-ensemble/``
          with ``e`` >= the current round: a crash or an abandoned stop during round ``e``) is
          removed, so the round, run again, starts without it; only the files an ensemble save
          writes (``ensemble.json``, ``member-*.safetensors``) are deleted: a folder that holds
          anything else keeps it, with a warning;
        * so are the model and the report of such a round (``models/round-<e>.safetensors``,
          ``reports/round-<e>.json``; a kill after they were written, before the state recorded
          the round), unless the state names the model file;
        * and so are the candidates such a round kept (``models/pool/round-<e>/candidate-*.safetensors``,
          ``keep_received = "all"``), and their folder once empty: the round, run again, writes its own.
        """
        from fol.checkpoint import load_model

        notes: list[str] = []
        for mid, rec in list(self.state.received.items()):  # first: a record of a missing file takes no room
            try:
                present = self.path(rec["file"]).exists()
            except OSError as exc:
                if exc.errno != errno.ENAMETOOLONG:  # a folder on its way that cannot be searched: it may be there
                    raise ConfigError(f"{self.state_named}: field 'received' entry {shown(mid)}: 'file' "
                                      f"{brief(rec['file'])} cannot be checked ({exc.strerror})") from None
                del self.state.received[mid]  # too long for the file system: no such file can be there
                notes.append(f"dropped {self.state_path.name} field 'received' entry {shown(mid)}: its 'file' "
                             f"{brief(rec['file'])} names no file ({exc.strerror})")
                continue
            if not present:
                del self.state.received[mid]
                notes.append(f"dropped {shown(mid)}: {shown(rec['file'], 200)} is missing")
                continue
            try:  # recorded by an agent whose recovery took any file name as the sender: dropped, its file left
                check_name(rec["sender"], "its sender")
            except ProtocolError as exc:
                del self.state.received[mid]
                notes.append(f"dropped {shown(mid)}: {exc}")
        known = {rec["file"] for rec in self.state.received.values()}
        held = {rec["sha256"]: rec["file"] for rec in self.state.received.values()}  # the receiver's one-copy rule
        unrecorded: list[str] = []  # files beyond MAX_INBOX_MODELS: left as they are, not read
        misnamed: list[str] = []  # files not named <sender>.safetensors for a node id: left as they are, not read
        for folder in sorted((self.root / "inbox").glob("round-*")):
            number = folder.name.removeprefix("round-")
            if not (number.isascii() and number.isdigit() and folder.is_dir()):  # not the receiver's: left alone
                continue
            model_round = int(number)
            remove_temporaries(folder)
            for path in sorted(folder.iterdir()):
                rel = self.relative(path)
                if rel in known or path.suffix != MODEL_SUFFIX or not path.is_file():
                    continue
                try:  # the receiver names a file for its sender, a node id; the sender is in logs, state, cards
                    check_name(path.stem, "sender")
                except ProtocolError as exc:
                    misnamed.append(f"{self.relative(folder)}: {exc}")
                    continue
                if len(self.state.received) >= MAX_INBOX_MODELS:
                    unrecorded.append(rel)
                    continue
                try:
                    card = load_model(path, max_bytes=self.max_payload_bytes).card
                except (CheckpointError, ValueError) as exc:
                    path.unlink(missing_ok=True)
                    notes.append(f"removed invalid {rel}: {exc}")
                    continue
                try:
                    self.check_card(card, model_round, "its folder is round")
                except ProtocolError as exc:  # kept for whoever put it there, out of the way of a real delivery
                    aside = self._set_aside(path)
                    notes.append(f"moved {rel} aside to {self.relative(aside)}, not registered: {exc}")
                    continue
                sha = file_sha256(path)
                if sha in held:  # the same bytes are one model: the first (recorded, or by sorted path) is kept
                    aside = self._set_aside(path)
                    notes.append(f"moved {rel} aside to {self.relative(aside)}, not registered: the same bytes "
                                 f"as {held[sha]}")
                    continue
                held[sha] = rel
                producer, note = card.producer, f"registered {rel} found in the inbox"
                if len(producer) > MAX_NAME_CHARS:  # an older agent's file: kept, its record bounded as verify's
                    producer = producer[:MAX_NAME_CHARS - 3] + "..."
                    note += (f"; its card's producer of {len(card.producer):,} characters (over the {MAX_NAME_CHARS} "
                             f"a received model's may have) is recorded shortened to {MAX_NAME_CHARS}, ending in "
                             f"'...': {shown(card.producer, 40)}")
                self.state.received[f"recovered:{sha[:32]}"] = {
                    "sender": path.stem, "round": model_round, "sha256": sha, "size": path.stat().st_size,
                    "file": rel, "time": path.stat().st_mtime, "producer": producer, "arch": card.spec.arch,
                }
                notes.append(note)
        if misnamed:
            notes.append(f"left {len(misnamed):,} model file(s) in the inbox unregistered, their name not "
                         f"<sender>{MODEL_SUFFIX} of a node id, first in {misnamed[0]}")
        if unrecorded:
            notes.append(f"left {len(unrecorded):,} model file(s) in the inbox unregistered, first "
                         f"{unrecorded[0]}: the state records at most {MAX_INBOX_MODELS:,} received models "
                         f"(MAX_INBOX_MODELS)")
        models = self.root / "models"
        ensembles = sorted(models.glob("round-*-ensemble"))
        pools = sorted((models / "pool").glob("round-*"))
        for folder in (self.root, models, self.root / "reports", *ensembles, *pools):
            remove_temporaries(folder)
        for folders, suffix, written, what in ((ensembles, "-ensemble", _is_ensemble_file, "ensemble files"),
                                               (pools, "", _is_pool_file, "kept candidates")):
            for folder in folders:  # a round's folder: round-<e>-ensemble/ or pool/round-<e>/
                number = folder.name.removeprefix("round-").removesuffix(suffix)
                if folder.is_dir() and number.isdigit() and int(number) >= self.state.round:
                    notes.append(self._remove_unrecorded(folder, written, what))
        named = {rec["file"] for rec in self.state.models.values()} | {self.state.current_model,
                                                                         self.state.local_model}
        for folder, suffix in ((models, MODEL_SUFFIX), (self.root / "reports", ".json")):
            for path in sorted(folder.glob(f"round-*{suffix}")):
                number = path.name.removeprefix("round-").removesuffix(suffix)
                if (number.isdigit() and int(number) >= self.state.round and path.is_file()
                        and self.relative(path) not in named):
                    path.unlink()
                    fsync_dir(folder)
                    notes.append(f"removed {self.relative(path)} of an unrecorded round")
        if notes:
            self.save()
            for note in notes:
                log.warning("%s: recovery: %s", self.node_id, note)
        return notes

    def _set_aside(self, path: Path) -> Path:
        """Rename an inbox file :meth:`recover` will not register to ``<name>.refused`` (``.refused.<n>``
        if that is taken), a name recovery and the receiver ignore; returns the new path."""
        aside, n = path.with_name(f"{path.name}.refused"), 1
        while aside.exists():
            n += 1
            aside = path.with_name(f"{path.name}.refused.{n}")
        os.replace(path, aside)
        fsync_dir(path.parent)
        return aside

    def _remove_unrecorded(self, folder: Path, written: Callable[[Path], bool], what: str) -> str:
        """Delete the files a round's save wrote in ``folder`` (an unrecorded round's: ``written`` tells
        them apart), and the folder once empty."""
        for path in folder.iterdir():
            if path.is_file() and written(path):
                path.unlink()
        others = sorted(p.name for p in folder.iterdir())
        if others:
            return (f"removed the {what} of unrecorded {self.relative(folder)}; kept its {len(others)} "
                    f"other file(s), e.g. {others[0]}")
        folder.rmdir()
        fsync_dir(folder.parent)
        return f"removed {self.relative(folder)} of an unrecorded round"
