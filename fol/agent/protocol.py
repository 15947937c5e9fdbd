"""The FOL model-exchange protocol, version 1 (``FOL/1``), spoken over ZeroMQ.

Sockets and security
--------------------
Every node binds one ROUTER socket (its *listen* address) for inbound traffic
and connects one DEALER socket to each peer's ROUTER. Model bytes always flow
from the DEALER side (the *sender*) to the ROUTER side (the *receiver*); a node
that both sends to and receives from a peer uses two connections, one per
direction. Every socket runs CURVE (encryption + authentication): the DEALER
knows its peer's public key in advance (``curve_serverkey``), so it can only talk
to the real peer; the ROUTER asks a ZAP authenticator (ZAP domain
:data:`ZAP_DOMAIN_PEERS`), which admits only public keys in the node's trust
store. On top of that, every inbound message is checked against the *current*
trust store (the authenticated key arrives with each message as the frame's
``User-Id`` property): a revoked key is refused at once, even on a connection
opened before it was revoked, and a peer can only offer models in its own name.

Frames
------
Every message is a ZeroMQ multipart message (the ROUTER adds and strips the
routing-id frame in front)::

    frame 0   b"FOL/1"                 protocol name and major version
    frame 1   message type (ASCII)     e.g. b"OFFER"
    frame 2   header: one UTF-8 JSON object (at most MAX_HEADER_BYTES), never pickle
    frame 3   payload bytes            CHUNK only

A message with another first frame, an unknown type, a header that is not a
JSON object (or nests deeper than :data:`MAX_HEADER_DEPTH` containers, or holds
more than :data:`MAX_HEADER_ITEMS` values), or a missing / extra frame is
answered with ``ERROR`` (when a reply is possible) and otherwise ignored.

Message types
-------------
Sender -> receiver:

``OFFER``  ``{"version": 1, "sender": str, "model_id": str, "round": int,
"spec": {...}, "size": int, "sha256": hex, "chunk_bytes": int}``
    "I have this model for you". ``round`` is the model card's round (0 =
    pretrained), ``spec`` its architecture spec, ``size`` the file size in bytes
    and ``sha256`` the digest of the whole file (the card inside the file carries
    a second digest, of the card and the tensors, checked by the safe loader);
    ``chunk_bytes``, the largest CHUNK the sender sends, is at least
    :data:`MIN_CHUNK_BYTES` (4,096), and a smaller one is answered with REJECT
    naming the field (earlier nodes speaking version 1 took any positive
    size: one configured below 4,096 is refused and must raise it; the
    version stays 1). ``sender`` must
    be the peer id the authenticated key belongs to; ``spec`` is at most
    :data:`MAX_SPEC_DEPTH` containers deep with :data:`MAX_SPEC_ITEMS` values.
    Offers are idempotent: the sender repeats an unanswered offer every
    ``offer_retry_s`` seconds, and while sending repeats it after
    ``offer_retry_s`` without a FETCH (see Resume).
``CHUNK``  ``{"sender": str, "model_id": str, "offset": int}`` + payload frame
    The bytes ``[offset, offset + len(payload))`` of the model file, in answer to a
    ``FETCH``. A sender asked for bytes it does not have answers ``ERROR``.

Receiver -> sender:

``FETCH``  ``{"model_id": str, "offset": int, "length": int}``
    Credit-based flow control (the zguide "file transfer" pattern, fileio3): the
    receiver, not the sender, paces the transfer by keeping at most
    ``window_chunks`` FETCH requests outstanding; every arriving CHUNK earns one
    credit back, spent on the next FETCH. The first FETCH also means "offer
    accepted" and its offset is where the transfer starts: 0 for a new model,
    the last confirmed offset for a resumed one. A sender queues at most
    ``window_chunks`` x ``max_concurrent_transfers`` + 64 messages (its own
    limits) for one receiver; a FETCH that finds that queue full is dropped
    unanswered, and the receiver asks again after ``chunk_timeout_s`` without
    a CHUNK (see Resume).
``DONE``   ``{"model_id": str, "file": str}``
    The whole file arrived, its sha256 matched, the safe loader validated it
    and it was atomically renamed into the inbox (``file`` is relative to the
    receiver's state folder).
``SKIP``   ``{"model_id": str, "reason": str}``
    Not needed: a duplicate (same model id or same bytes already in the inbox),
    a second model from the same sender for the same round or, on a node that
    personalizes on board, a stale round, a round after the last one it
    collects (``[fol] rounds - 1``) or any round once its rounds are done.
    The sender treats it as delivered and stops offering.
``BUSY``   ``{"model_id": str, "retry_after_s": float}``
    The receiver is at its limit of concurrent inbound transfers
    (``max_concurrent_transfers``), or the offering peer already holds its
    share of them (``max_transfers_per_peer``, so that one peer offering
    several rounds cannot take every slot), or its
    folder of transfers in progress has no room (``partial_max_bytes``) even
    after sweeping abandoned ones, or the running transfers may fill its
    inbox (``max_inbox_bytes``), or it is already receiving a model of the
    same sender and round, or the same bytes (one of the two would be
    skipped; which one, only the running transfer's end tells), or it cannot
    write the transfer's file (a full disk: a running transfer is then
    dropped, resumable from its last confirmed offset); offer again later.
``REJECT`` ``{"model_id": str, "reason": str}``
    The offer or the payload was refused: oversized, bad header, sender name
    not matching the key, sha256 mismatch, truncated or extra bytes, or a payload
    that fails safe-format validation (unknown or oversized architecture, a
    card the digest does not cover, wrong shapes, non-finite values). Nothing
    reaches the inbox; the partial file is deleted. ``reason`` never contains
    a path of the receiver (paths are replaced by ``<state>`` / ``<path>``).
    A node keeps and logs a peer's reason (and a DONE's ``file``) cut to
    :data:`MAX_REASON_CHARS` characters, its unprintable characters escaped.
    The receiver remembers a payload rejection per peer, by model id and by
    sha256, for ``reject_memory_s``: the same offer is answered at once with
    REJECT ``"rejected before: <reason>"``, without any FETCH. A failure of the
    receiver itself once the whole file is in (a full disk while storing it)
    is answered with REJECT too but not remembered (a disk failing while the
    bytes arrive gets BUSY, see above), and so is an offer that would pass the
    inbox's cap
    (``max_inbox_bytes``, reason ``"inbox full: ..."``), before any FETCH.
``ERROR``  ``{"reason": str, "model_id": str (optional)}``
    A message that could not be parsed or served; it may flow either way. A
    sender's ERROR naming a model id (e.g. a FETCH past the end of its file)
    ends that transfer on the receiver and deletes its partial file.

Control (local operator, ``fol agent ctl``), on a separate CURVE ROUTER whose
ZAP domain :data:`ZAP_DOMAIN_CONTROL` admits only the node's own key pair:
``CTL`` ``{"command": "status" | "personalize" | "send" | "reload" | "stop",
"peer": str (send only)}`` answered by ``CTL-OK`` ``{...}`` or ``CTL-ERR``
``{"reason": str}``. An answer's header may be up to
:data:`MAX_CONTROL_REPLY_BYTES` with :data:`MAX_CONTROL_REPLY_ITEMS` values
(``status`` lists the whole outbox and history).

Resume
------
The receiver writes chunks, in order, to a temporary file in its state folder
(``partial/``) and records, every ``sync_bytes`` bytes and whenever the link
stalls, the *confirmed offset*: the bytes fsynced to disk. If the link drops
(no CHUNK for ``chunk_timeout_s``), outstanding FETCHes are forgotten; when the
sender offers the same model again (it does, until it gets DONE / SKIP /
REJECT), the receiver answers with a FETCH from the confirmed offset. A
restarted receiver finds the partial file and its confirmed offset on disk and
does the same, truncating any unconfirmed tail. A CHUNK at any other offset
than the next expected one is a leftover from before the drop and is ignored.

A restarted receiver has forgotten the FETCHes it had sent, so it would sit
silent; the sender therefore repeats its OFFER whenever ``offer_retry_s``
passes without a FETCH, even while sending. A receiver that still runs the
transfer ignores such a reminder from the same connection while chunks keep
arriving (within ``chunk_timeout_s``); otherwise (a restart, or a new
connection of the sender) it resumes from the confirmed offset. A restart
therefore costs about ``offer_retry_s`` plus the reconnect, not the sender's
``transfer_timeout_s``.

Partial transfers nobody resumes are swept: files in ``partial/`` untouched
for ``partial_max_age_s`` (or incomplete for a minute) are deleted at start and
every 30 s, and the folder is kept under ``partial_max_bytes`` by deleting the
oldest abandoned transfers first.

Verification and the inbox
--------------------------
When ``size`` bytes have arrived, the receiver checks the file's sha256 against
the offer, then validates it with the safe loader
(:func:`fol.checkpoint.load_model`, model format version 2: size limit,
safetensors structure, bounded card, architecture bounds, digest over card and
tensors, dtypes, finite values, shapes vs spec), checks that the card's
round and architecture agree with the offer (and, on a node that personalizes
on board, its classes and input shape with the node's), and only then renames the file
atomically into ``inbox/round-<r>/<sender>.safetensors`` and records it in the
persisted state. A CHUNK whose length is not exactly
``min(chunk_bytes, size - offset)`` (a truncated or overlong stream) rejects the
transfer.

Errors
------
Protocol violations raise :class:`ProtocolError` (a :class:`fol.errors.FOLError`)
inside the node; they are answered with ``REJECT`` / ``ERROR`` and logged, never
raised to the peer as a traceback. Every control command gets an answer: a
command that fails for any reason (a missing model file, a full disk) is
answered with ``CTL-ERR`` and the agent keeps running.

This protocol, its frame layout, message names and limits are this project's
choices.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from swarmbase.cli import printable
from swarmbase.safejson import check_bounds
from swarmbase.safejson import loads as bounded_loads
from swarmbase.tomlcheck import shown

from fol.defaults import MAX_ROUND  # the largest round an OFFER names: a model card's bound (fol.checkpoint)
from fol.errors import FOLError

__all__ = [
    "PROTOCOL",
    "VERSION",
    "MAX_HEADER_BYTES",
    "ZAP_DOMAIN_PEERS",
    "ZAP_DOMAIN_CONTROL",
    "ProtocolError",
    "Offer",
    "encode",
    "decode",
    "check_name",
    "check_model_id",
    "peer_text",
    "MESSAGE_TYPES",
]

PROTOCOL = b"FOL/1"
VERSION = 1
#: Largest JSON header frame accepted (bytes).
MAX_HEADER_BYTES = 64 * 1024
#: Deepest nesting of a header's JSON (containers) and most values in it.
MAX_HEADER_DEPTH = 8
MAX_HEADER_ITEMS = 4096
#: Largest answer of a node's own agent to its control client (``CTL-OK``: ``status`` lists the whole
#: outbox and history, which grow with peers and rounds): bytes and values. Only the node's key gets one.
MAX_CONTROL_REPLY_BYTES = 16 * 1024 * 1024
MAX_CONTROL_REPLY_ITEMS = 1_000_000
#: Largest ``spec`` in an OFFER: nesting (spec -> options -> widths) and values.
MAX_SPEC_DEPTH = 3
MAX_SPEC_ITEMS = 256
#: Largest integer a header field may hold (sizes, offsets: what a file offset can be).
MAX_HEADER_INT = 2**63 - 1
#: Smallest ``chunk_bytes`` an OFFER may ask for (bytes): every CHUNK is a message and a round trip of
#: FETCH credits, so 1-byte chunks made a transfer of any size last for ever while holding its slot.
MIN_CHUNK_BYTES = 4096
#: Longest free text (a reason, a DONE's file) a node sends to a peer, and keeps or logs of a peer's.
MAX_REASON_CHARS = 500
#: Longest model id (:func:`check_model_id`); a peer's longer one is echoed and kept cut to it.
MAX_MODEL_ID_CHARS = 128
ZAP_DOMAIN_PEERS = "fol-peers"
ZAP_DOMAIN_CONTROL = "fol-control"

OFFER, CHUNK = b"OFFER", b"CHUNK"
FETCH, DONE, SKIP, BUSY, REJECT, ERROR = b"FETCH", b"DONE", b"SKIP", b"BUSY", b"REJECT", b"ERROR"
CTL, CTL_OK, CTL_ERR = b"CTL", b"CTL-OK", b"CTL-ERR"
MESSAGE_TYPES = frozenset({OFFER, CHUNK, FETCH, DONE, SKIP, BUSY, REJECT, ERROR, CTL, CTL_OK, CTL_ERR})

_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")  # fullmatch: "$" also matches before a final newline
_MODEL_ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,127}")
_HEX64_RE = re.compile(r"[0-9a-f]{64}")


class ProtocolError(FOLError):
    """A message that does not follow protocol ``FOL/1``."""


def check_name(value: Any, what: str = "node id") -> str:
    """A node id: 1-64 characters of letters, digits, ``.``, ``_``, ``-`` (no path separators)."""
    if not isinstance(value, str) or not _NAME_RE.fullmatch(value):
        raise ProtocolError(
            f"{what} {shown(value)} is invalid; expected 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit"
        )
    return value


def check_model_id(value: Any) -> str:
    """A model id: 1-128 characters of letters, digits, ``.``, ``_``, ``:``, ``-``."""
    if not isinstance(value, str) or not _MODEL_ID_RE.fullmatch(value):
        raise ProtocolError(f"model_id {shown(value)} is invalid; expected 1-128 letters, digits, '.', '_', ':' or '-'")
    return value


def peer_text(value: Any) -> str:
    """A peer's free text (a reason, a DONE's file) as one line of at most :data:`MAX_REASON_CHARS`
    characters, every unprintable character escaped: what a node keeps (the outbox ``fol agent ctl
    status`` prints) or logs of it can neither forge lines nor rewrite the operator's terminal."""
    return printable(str(value)[:MAX_REASON_CHARS])[:MAX_REASON_CHARS]


def _int_field(header: dict[str, Any], key: str, minimum: int = 0, maximum: int = MAX_HEADER_INT) -> int:
    value = header.get(key)
    if not isinstance(value, int) or isinstance(value, bool) or not minimum <= value <= maximum:
        raise ProtocolError(f"header field {key!r} must be an integer in [{minimum}, {maximum}], got {shown(value)}")
    return value


@dataclass(frozen=True)
class Offer:
    """The header of an ``OFFER`` message (see the module docstring)."""

    sender: str
    model_id: str
    round: int
    spec: dict[str, Any]
    size: int
    sha256: str
    chunk_bytes: int
    version: int = VERSION

    def to_header(self) -> dict[str, Any]:
        return {
            "version": self.version, "sender": self.sender, "model_id": self.model_id, "round": self.round,
            "spec": self.spec, "size": self.size, "sha256": self.sha256, "chunk_bytes": self.chunk_bytes,
        }

    @classmethod
    def from_header(cls, header: dict[str, Any]) -> "Offer":
        """Parse and validate an offer header; :class:`ProtocolError` names the bad field."""
        version = header.get("version")
        if type(version) is not int or version != VERSION:  # true and 1.0 are not the integer 1
            raise ProtocolError(f"offer protocol version {shown(version)} is not supported; this node speaks {VERSION}")
        sha = header.get("sha256")
        if not isinstance(sha, str) or not _HEX64_RE.fullmatch(sha):
            raise ProtocolError(f"header field 'sha256' must be 64 lowercase hex digits, got {shown(sha)}")
        spec = header.get("spec")
        if not isinstance(spec, dict):
            raise ProtocolError(f"header field 'spec' must be a JSON object, got {type(spec).__name__}")
        try:
            check_bounds(spec, max_depth=MAX_SPEC_DEPTH, max_items=MAX_SPEC_ITEMS)
        except ValueError as exc:
            raise ProtocolError(f"header field 'spec' is too large: {exc}") from None
        return cls(
            sender=check_name(header.get("sender"), "header field 'sender'"),
            model_id=check_model_id(header.get("model_id")),
            round=_int_field(header, "round", maximum=MAX_ROUND),
            spec=spec,
            size=_int_field(header, "size", 1),
            sha256=sha,
            chunk_bytes=_int_field(header, "chunk_bytes", MIN_CHUNK_BYTES),
        )


def encode(kind: bytes, header: dict[str, Any], payload: bytes | memoryview | None = None) -> list[bytes | memoryview]:
    """The frames of one message (without a routing id)."""
    frames: list[bytes | memoryview] = [PROTOCOL, kind, json.dumps(header, allow_nan=False, separators=(",", ":")).encode()]
    if payload is not None:
        frames.append(payload)
    return frames


def decode(frames: list[Any], *, max_header_bytes: int = MAX_HEADER_BYTES,
           max_items: int = MAX_HEADER_ITEMS) -> tuple[bytes, dict[str, Any], Any]:
    """Split a message (without routing id) into ``(type, header, payload or None)``.

    ``frames`` may hold bytes or :class:`zmq.Frame` objects; the payload is
    returned as it came (a Frame keeps zero-copy access through ``.buffer``).
    Raises :class:`ProtocolError` on any deviation from the frame layout. The
    header limits are the peers' unless given (the control client reads its
    agent's answers with :data:`MAX_CONTROL_REPLY_BYTES` / ``_ITEMS``).
    """
    if len(frames) not in (3, 4):
        raise ProtocolError(f"message has {len(frames)} frames, expected 3 or 4")
    first = _as_bytes(frames[0])
    if first != PROTOCOL:
        raise ProtocolError(f"protocol {first[:16]!r} is not supported; this node speaks {PROTOCOL.decode()}")
    kind = _as_bytes(frames[1])
    if kind not in MESSAGE_TYPES:
        raise ProtocolError(f"unknown message type {kind[:16]!r}")
    raw = _as_bytes(frames[2])
    if len(raw) > max_header_bytes:
        raise ProtocolError(f"header is {len(raw)} bytes, over the limit of {max_header_bytes}")
    try:
        header = bounded_loads(raw, max_depth=MAX_HEADER_DEPTH, max_items=max_items)
    except ValueError as exc:
        raise ProtocolError(f"{kind.decode()} header is not valid JSON ({exc})") from None
    if not isinstance(header, dict):
        raise ProtocolError(f"{kind.decode()} header must be a JSON object, got {type(header).__name__}")
    has_payload = len(frames) == 4
    if has_payload != (kind == CHUNK):
        raise ProtocolError(f"{kind.decode()} message {'must not' if has_payload else 'must'} carry a payload frame")
    return kind, header, frames[3] if has_payload else None


def _as_bytes(frame: Any) -> bytes:
    if isinstance(frame, bytes):
        return frame
    if hasattr(frame, "bytes"):  # zmq.Frame
        return frame.bytes
    return bytes(frame)


def header_int(header: dict[str, Any], key: str, minimum: int = 0) -> int:
    """An integer field of a header, :class:`ProtocolError` if absent or invalid."""
    return _int_field(header, key, minimum)
