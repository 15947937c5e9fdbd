"""Chunked, resumable model transfers with credit-based flow control (protocol ``FOL/1``).

The sender side is :class:`OutgoingTransfer` (one model to one peer, offered
until the peer answers DONE / SKIP / REJECT) driven by a :class:`PeerLink`
(the DEALER socket to that peer). The receiver side is :class:`Receiver` (the
node's ROUTER socket) running one :class:`IncomingTransfer` per model being
received; the receiver paces every transfer with FETCH credits and hands
complete files to :meth:`fol.agent.inbox.Inbox.commit`. See
:mod:`fol.agent.protocol` for the wire format.

:func:`send_model` is a blocking, single-transfer sender (tests, benchmarks,
scripts); the agent (:mod:`fol.agent.node`) drives the same classes from its
poll loop.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import zmq

from fol.agent import protocol as P
from fol.agent.config import Limits
from fol.agent.inbox import MAX_INBOX_MODELS, Inbox, file_sha256
from fol.agent.keys import KeyPair, TrustStore
from fol.agent.protocol import Offer, ProtocolError
from fol.errors import CheckpointError, ConfigError, FOLError
from swarmbase.units import format_seconds

__all__ = [
    "OutgoingTransfer",
    "PeerLink",
    "IncomingTransfer",
    "Receiver",
    "ReceiverSettings",
    "send_model",
    "offer_for_file",
    "secure_server",
    "secure_client",
    "tune_socket",
    "queue_limit",
]

log = logging.getLogger(__name__)

#: Final states of an outgoing transfer.
FINAL = ("delivered", "skipped", "rejected", "interrupted", "timeout")


# ---------------------------------------------------------------------- sockets


def tune_socket(sock: zmq.Socket, *, heartbeat_ms: int = 1000) -> None:
    """Options every FOL socket uses: no linger on close, ZMTP heartbeats (a
    silent peer is dropped after 3 heartbeats and reconnected), fast reconnects."""
    sock.linger = 0
    sock.heartbeat_ivl = heartbeat_ms
    sock.heartbeat_timeout = 3 * heartbeat_ms
    sock.heartbeat_ttl = 3 * heartbeat_ms
    sock.reconnect_ivl = 100
    sock.reconnect_ivl_max = 2000


#: Messages one connection may have queued, each way, beyond the CHUNKs the FETCH credits ask for (offers,
#: reminders, answers, errors); see :func:`queue_limit`.
QUEUE_SLACK_MESSAGES = 64


def queue_limit(window_chunks: int, max_transfers: int) -> int:
    """The most messages one connection's ZeroMQ queue holds (its high-water mark): the CHUNKs of
    ``max_transfers`` transfers of ``window_chunks`` FETCH credits each, and :data:`QUEUE_SLACK_MESSAGES`.
    ZeroMQ's default, 1,000 a connection, let one peer queue 1,000 chunks (about 260 MB at the default
    chunk size) in this process while its loop was busy or the peer read nothing."""
    return window_chunks * max_transfers + QUEUE_SLACK_MESSAGES


def secure_server(sock: zmq.Socket, keys: KeyPair, zap_domain: str) -> None:
    """Make ``sock`` a CURVE server whose clients are checked by ZAP in ``zap_domain``."""
    sock.curve_secretkey = keys.secret
    sock.curve_publickey = keys.public
    sock.curve_server = True
    sock.zap_domain = zap_domain.encode()


def secure_client(sock: zmq.Socket, keys: KeyPair, server_key: bytes) -> None:
    """Make ``sock`` a CURVE client that only talks to the holder of ``server_key``."""
    sock.curve_secretkey = keys.secret
    sock.curve_publickey = keys.public
    sock.curve_serverkey = server_key


def recv_waiting(sock: zmq.Socket, budget: int = 256) -> list[list[Any]]:
    """The messages already waiting on ``sock`` (no blocking), at most
    ``budget`` of them so one busy socket cannot starve a poll loop."""
    out = []
    for _ in range(budget):
        try:
            out.append(sock.recv_multipart(flags=zmq.NOBLOCK, copy=False))
        except zmq.Again:
            break
    return out


def _send(sock: zmq.Socket, frames: list[Any]) -> bool:
    """Non-blocking send; False when the message cannot be queued (no peer, HWM, gone)."""
    try:
        sock.send_multipart(frames, flags=zmq.NOBLOCK, copy=False)
        return True
    except zmq.Again:
        return False
    except zmq.ZMQError as exc:
        if exc.errno == zmq.EHOSTUNREACH:
            return False
        raise


def offer_for_file(sender: str, path: Path, chunk_bytes: int, model_id: str | None = None) -> Offer:
    """An offer for a model file (reads its card header and hashes the file)."""
    from fol.checkpoint import read_card

    card = read_card(path, max_bytes=max(path.stat().st_size, 1))
    sha = file_sha256(path)
    return Offer(sender=sender, model_id=model_id or f"{sender}:r{card.round}:{sha[:16]}", round=card.round,
                 spec=card.spec.to_dict(), size=path.stat().st_size, sha256=sha, chunk_bytes=chunk_bytes)


# ---------------------------------------------------------------------- sender side


class _Source:
    """Random access to the bytes being sent (a file, read with ``pread``, or bytes)."""

    def __init__(self, source: bytes | bytearray | memoryview | str | os.PathLike[str]) -> None:
        if isinstance(source, (bytes, bytearray, memoryview)):
            self.data: memoryview | None = memoryview(bytes(source))
            self.fd: int | None = None
        else:
            self.data = None
            self.fd = os.open(source, os.O_RDONLY)

    def read(self, offset: int, length: int) -> bytes | memoryview:
        if self.data is not None:
            return self.data[offset: offset + length]
        assert self.fd is not None
        return os.pread(self.fd, length, offset)

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


@dataclass
class OutgoingTransfer:
    """One model offered to one peer.

    ``status``: ``offering`` (waiting for an answer), ``sending`` (serving
    FETCHes), then one of ``delivered`` (DONE), ``skipped`` (SKIP: the peer
    already has it or does not need it), ``rejected`` (REJECT / ERROR),
    ``interrupted`` (test hook ``stop_after_chunks`` reached) or ``timeout``
    (``deadline`` passed). An unanswered offer is repeated every
    ``offer_retry_s`` seconds. While sending, an offer is also repeated after
    ``offer_retry_s`` without a FETCH: a receiver that restarted (and forgot
    the transfer) answers it by resuming from its confirmed offset, while a
    receiver that is still receiving ignores it. After ``transfer_timeout_s``
    without FETCH the transfer falls back to offering.
    """

    peer: str
    offer: Offer
    source: Any
    offer_retry_s: float = 2.0
    transfer_timeout_s: float = 60.0
    stop_after_chunks: int | None = None
    deadline: float | None = None  # monotonic time
    status: str = "offering"
    detail: str = ""
    chunks_served: int = 0
    bytes_served: int = 0
    first_fetch_offset: int | None = None
    busy_replies: int = 0
    started: float = field(default_factory=time.monotonic)
    finished_at: float | None = None
    _next_offer: float = 0.0
    _last_activity: float = field(default_factory=time.monotonic)
    _src: _Source | None = None

    def __post_init__(self) -> None:
        self._src = _Source(self.source)

    @property
    def finished(self) -> bool:
        return self.status in FINAL

    def _finish(self, status: str, detail: str = "") -> None:
        self.status, self.detail = status, detail
        self.finished_at = time.monotonic()
        if self._src is not None:
            self._src.close()

    def offer_due(self, now: float) -> bool:
        if self.finished:
            return False
        if self.deadline is not None and now > self.deadline:
            self._finish("timeout", f"no answer from {self.peer} before the deadline")
            return False
        if self.status == "sending":
            if now - self._last_activity > self.transfer_timeout_s:
                log.info("transfer of %s to %s stalled; offering again", self.offer.model_id, self.peer)
                self.status = "offering"
                self._next_offer = now
            elif now - self._last_activity > self.offer_retry_s:
                return now >= self._next_offer  # no FETCH for a while: remind the receiver (it may have restarted)
            else:
                return False
        return self.status == "offering" and now >= self._next_offer

    def offered(self, now: float) -> None:
        self._next_offer = now + self.offer_retry_s

    def serve(self, header: dict[str, Any], now: float) -> tuple[bytes, dict[str, Any], Any] | None:
        """The answer to a FETCH: ``(type, header, payload)``, or None to stay silent."""
        if self.finished:
            return None
        offset = P.header_int(header, "offset")
        length = P.header_int(header, "length", 1)
        if length > self.offer.chunk_bytes:
            return P.ERROR, {"model_id": self.offer.model_id,
                             "reason": f"FETCH length {length} is over the offered chunk size {self.offer.chunk_bytes}"}, None
        if offset >= self.offer.size:
            return P.ERROR, {"model_id": self.offer.model_id,
                             "reason": f"FETCH offset {offset} is past the end ({self.offer.size} bytes)"}, None
        if self.stop_after_chunks is not None and self.chunks_served >= self.stop_after_chunks:
            self._finish("interrupted", f"test hook: stopped after {self.chunks_served} chunks")
            return None
        if self.first_fetch_offset is None:
            self.first_fetch_offset = offset
        if self.status == "offering":
            self.status = "sending"
        self._last_activity = now
        assert self._src is not None
        data = self._src.read(offset, length)
        self.chunks_served += 1
        self.bytes_served += len(data)
        return P.CHUNK, {"sender": self.offer.sender, "model_id": self.offer.model_id, "offset": offset}, data

    def on_reply(self, kind: bytes, header: dict[str, Any], now: float) -> None:
        self._last_activity = now
        if kind == P.DONE:
            self._finish("delivered", P.peer_text(header.get("file", "")))
        elif kind == P.SKIP:
            self._finish("skipped", P.peer_text(header.get("reason", "")))
        elif kind in (P.REJECT, P.ERROR):
            self._finish("rejected", P.peer_text(header.get("reason", "")))
        elif kind == P.BUSY:
            self.busy_replies += 1
            retry = header.get("retry_after_s", self.offer_retry_s)
            retry = float(retry) if isinstance(retry, (int, float)) and 0 < retry < 3600 else self.offer_retry_s
            self.status = "offering"
            self._next_offer = now + retry

    def close(self) -> None:
        if self._src is not None:
            self._src.close()

    @property
    def seconds(self) -> float:
        """Time from creation to the final answer (or until now), s."""
        return (self.finished_at or time.monotonic()) - self.started

    def summary(self) -> dict[str, Any]:
        return {"peer": self.peer, "model_id": self.offer.model_id, "status": self.status, "detail": self.detail,
                "bytes_served": self.bytes_served, "first_fetch_offset": self.first_fetch_offset,
                "busy_replies": self.busy_replies, "seconds": self.seconds}


class PeerLink:
    """The DEALER socket from this node to one peer's ROUTER, and the models
    being offered to that peer."""

    def __init__(self, context: zmq.Context, peer: str, endpoint: str, keys: KeyPair | None,
                 server_key: bytes | None, heartbeat_ms: int = 1000, *, window_chunks: int = Limits.window_chunks,
                 max_transfers: int = Limits.max_concurrent_transfers) -> None:
        self.peer = peer
        self.endpoint = endpoint
        self.sock = context.socket(zmq.DEALER)
        tune_socket(self.sock, heartbeat_ms=heartbeat_ms)
        self.sock.immediate = True  # do not queue messages for a peer that is not connected
        # A receiver with this node's limits has at most window_chunks FETCHes in flight for each of at most
        # max_transfers transfers: that many CHUNKs (and a few offers) are queued here, the FETCHes
        # of a receiver asking for more are dropped unanswered (see handle); the same bound for what it sends.
        self.sock.sndhwm = self.sock.rcvhwm = queue_limit(window_chunks, max_transfers)
        self.sock.maxmsgsize = P.MAX_HEADER_BYTES + 1024  # the peer only sends small control messages here
        try:
            if keys is not None:
                if server_key is None:
                    raise ValueError("a CURVE client needs the server's public key")
                secure_client(self.sock, keys, server_key)
            self.sock.connect(endpoint)
        except BaseException as exc:  # an open socket would block the context's term() for ever
            self.sock.close(linger=0)
            if isinstance(exc, zmq.ZMQError):
                raise ConfigError(f"peer {peer}: cannot connect to {endpoint} ({zmq.strerror(exc.errno)})") from None
            raise
        self.transfers: dict[str, OutgoingTransfer] = {}

    def add(self, transfer: OutgoingTransfer) -> None:
        old = self.transfers.get(transfer.offer.model_id)
        if old is not None and not old.finished:
            transfer.close()
            return
        self.transfers[transfer.offer.model_id] = transfer

    def handle(self, frames: list[Any], now: float) -> OutgoingTransfer | None:
        """Process one message from the peer; returns the transfer it finished, if any."""
        try:
            kind, header, _ = P.decode(frames)
        except ProtocolError as exc:
            log.warning("from %s: %s", self.peer, exc)
            return None
        model_id = header.get("model_id")
        transfer = self.transfers.get(model_id) if isinstance(model_id, str) else None
        if transfer is None:
            if kind == P.FETCH:
                _send(self.sock, P.encode(P.ERROR, {"model_id": str(model_id)[:P.MAX_MODEL_ID_CHARS],
                                                    "reason": "unknown model id"}))
            elif kind == P.ERROR:
                log.warning("%s reports an error: %s", self.peer, P.peer_text(header.get("reason")))
            return None
        if kind == P.FETCH:
            if not self.sock.getsockopt(zmq.EVENTS) & zmq.POLLOUT:
                # The queue to this peer is full: it asked for more than its credits. Dropped, not read from
                # disk nor answered (an ERROR would end the transfer); a receiver fetches again after a stall.
                log.debug("%s: FETCH of %s dropped (queue to the peer full)", self.peer, transfer.offer.model_id)
                return None
            try:
                answer = transfer.serve(header, now)
            except ProtocolError as exc:
                answer = P.ERROR, {"model_id": transfer.offer.model_id, "reason": str(exc)}, None
            if answer is not None:
                _send(self.sock, P.encode(*answer))
            return transfer if transfer.finished else None
        was_finished = transfer.finished
        transfer.on_reply(kind, header, now)
        if transfer.finished and not was_finished:
            level = logging.WARNING if transfer.status == "rejected" else logging.INFO
            log.log(level, "%s -> %s: %s %s", transfer.offer.model_id, self.peer, transfer.status, transfer.detail)
            return transfer
        return None

    def tick(self, now: float) -> list[OutgoingTransfer]:
        """Send due offers; returns transfers that finished (timed out) meanwhile."""
        done = []
        for transfer in list(self.transfers.values()):
            was_finished = transfer.finished
            if transfer.offer_due(now):
                if _send(self.sock, P.encode(P.OFFER, transfer.offer.to_header())):
                    log.debug("offered %s to %s", transfer.offer.model_id, self.peer)
                    transfer.offered(now)
                else:  # not connected (yet): try again soon, without flooding
                    transfer.offered(now - transfer.offer_retry_s + min(0.01, transfer.offer_retry_s))
            if transfer.finished and not was_finished:
                done.append(transfer)
        return done

    def close(self, linger_ms: int = 0) -> None:
        for transfer in self.transfers.values():
            transfer.close()
        self.sock.close(linger=linger_ms)


def send_model(
    endpoint: str,
    source: bytes | str | os.PathLike[str],
    offer: Offer,
    *,
    keys: KeyPair | None = None,
    server_key: bytes | None = None,
    peer: str = "peer",
    timeout_s: float = 30.0,
    offer_retry_s: float = 1.0,
    transfer_timeout_s: float = 10.0,
    stop_after_chunks: int | None = None,
    context: zmq.Context | None = None,
) -> OutgoingTransfer:
    """Offer one model to the ROUTER at ``endpoint`` and serve it until the peer
    answers (or ``timeout_s`` s pass); returns the finished transfer.

    With ``keys`` and ``server_key`` the link runs CURVE (the agent always
    does); without them it is plain TCP (only for the benchmark's comparison).
    ``stop_after_chunks`` cuts the link after that many chunks have been sent
    (test hook for resume: the receiver gets exactly those chunks, then nothing).
    """
    ctx = context or zmq.Context.instance()
    link = PeerLink(ctx, peer, endpoint, keys, server_key)
    transfer = OutgoingTransfer(peer, offer, source, offer_retry_s=offer_retry_s,
                                transfer_timeout_s=transfer_timeout_s, stop_after_chunks=stop_after_chunks,
                                deadline=time.monotonic() + timeout_s)
    link.add(transfer)
    poller = zmq.Poller()
    poller.register(link.sock, zmq.POLLIN)
    try:
        while not transfer.finished:
            now = time.monotonic()
            link.tick(now)
            if transfer.finished:
                break
            if poller.poll(50):
                for _ in range(256):
                    try:
                        frames = link.sock.recv_multipart(flags=zmq.NOBLOCK, copy=False)
                    except zmq.Again:
                        break
                    link.handle(frames, time.monotonic())
                    if transfer.finished:
                        break
    finally:
        # An interrupted transfer (test hook) still delivers the chunks it already sent, then disconnects.
        link.close(linger_ms=1000 if transfer.status == "interrupted" else 0)
    return transfer


# ---------------------------------------------------------------------- receiver side

#: An absolute path inside a message (a ``/`` not preceded by a name character).
_ABSOLUTE_PATH = re.compile(r"(?<![\w.:<>~-])/[^\s'\",;()\[\]{}]+")


@dataclass(frozen=True)
class ReceiverSettings:
    """Limits of the receiving side (bytes, seconds); the defaults are the node
    configuration's (:class:`fol.agent.config.Limits`)."""

    max_concurrent_transfers: int = Limits.max_concurrent_transfers
    max_transfers_per_peer: int = Limits.max_transfers_per_peer
    chunk_bytes: int = Limits.chunk_bytes
    window_chunks: int = Limits.window_chunks
    chunk_timeout_s: float = Limits.chunk_timeout_s
    transfer_timeout_s: float = Limits.transfer_timeout_s
    min_transfer_rate_bytes_s: int = Limits.min_transfer_rate_bytes_s
    offer_retry_s: float = Limits.offer_retry_s
    sync_bytes: int = Limits.sync_bytes
    partial_max_bytes: int = Limits.partial_max_bytes
    max_inbox_bytes: int = Limits.max_inbox_bytes
    partial_max_age_s: float = Limits.partial_max_age_s
    reject_memory_s: float = Limits.reject_memory_s

    @classmethod
    def from_limits(cls, limits: Any) -> "ReceiverSettings":
        return cls(**{k: getattr(limits, k) for k in cls.__dataclass_fields__})


class IncomingTransfer:
    """One model being received: the temporary file and the FETCH credits.

    Chunks are accepted only in order (at the next unwritten offset) and only
    with the exact expected length; everything else from before a stall is
    ignored, and a wrong length ends the transfer.
    """

    def __init__(self, peer: str, offer: Offer, part: Path, start: int, fetch_bytes: int, window: int,
                 identity: bytes, now: float) -> None:
        self.peer, self.offer, self.part = peer, offer, part
        self.fetch_bytes = min(fetch_bytes, offer.chunk_bytes)
        self.window = window
        self.identity = identity
        self.start = start
        self.written = start
        self.confirmed = start
        self.next_offset = start
        self.requested: dict[int, int] = {}
        self.last_activity = now
        self.last_progress = now
        self.created = now
        # the period over which the rate is checked (see Receiver.tick): its start and the bytes written then
        self.period_start, self.period_written = now, start
        self.stalls = 0
        self.fh = open(part, "r+b")
        # sha256 of the bytes so far, kept up to date chunk by chunk (no second pass over the file).
        self.hasher = hashlib.sha256()
        while self.fh.tell() < start:
            block = self.fh.read(min(1 << 20, start - self.fh.tell()))
            if not block:
                break
            self.hasher.update(block)
        self.fh.seek(start)

    @property
    def key(self) -> tuple[str, str]:
        return self.peer, self.offer.model_id

    @property
    def complete(self) -> bool:
        return self.written == self.offer.size

    def next_fetches(self) -> list[dict[str, Any]]:
        """FETCH headers to send now (one per free credit)."""
        out = []
        while len(self.requested) < self.window and self.next_offset < self.offer.size:
            length = min(self.fetch_bytes, self.offer.size - self.next_offset)
            self.requested[self.next_offset] = length
            out.append({"model_id": self.offer.model_id, "offset": self.next_offset, "length": length})
            self.next_offset += length
        return out

    def on_chunk(self, offset: int, data: Any, now: float) -> bool:
        """Write a chunk; True when it was the next one (progress). Raises
        :class:`ProtocolError` when the stream is truncated or overlong."""
        self.last_activity = now
        if offset != self.written:
            return False  # a leftover from before a stall, or a duplicate
        expected = min(self.fetch_bytes, self.offer.size - offset)
        if len(data) != expected:
            raise ProtocolError(
                f"chunk at offset {offset} has {len(data)} bytes, expected {expected} (truncated or overlong stream)"
            )
        self.fh.write(data)
        self.hasher.update(data)
        self.written += len(data)
        for off in [o for o in self.requested if o < self.written]:
            del self.requested[off]
        if self.next_offset < self.written:
            self.next_offset = self.written
        self.last_progress = now
        return True

    def sync(self) -> int:
        """fsync the written bytes; returns the new confirmed offset."""
        self.fh.flush()
        os.fsync(self.fh.fileno())
        self.confirmed = self.written
        return self.confirmed

    def stall(self, count: bool = True) -> None:
        """Forget outstanding FETCHes (the link dropped them); refetch from ``written``."""
        self.requested.clear()
        self.next_offset = self.written
        self.stalls += int(count)

    def close(self) -> None:
        if not self.fh.closed:
            try:
                self.fh.close()
            except OSError:  # bytes a full disk did not take: never confirmed, cut off when the transfer resumes
                pass


class Receiver:
    """The inbound side of a node: its ROUTER socket and running transfers.

    ``trust`` maps authenticated CURVE keys to peer ids; every message's
    ``User-Id`` (set by the ZAP handler) is looked up in it, so a key that is
    not (or no longer) trusted cannot deliver anything. ``trust=None`` turns
    that off and takes the sender from the headers: only for the plain-TCP
    benchmark, never used by the agent.

    ``on_stored(record)`` is called after a model reached the inbox.

    A payload that was rejected (bad model, protocol violation, offer over the
    limit) is remembered per peer, by model id and by sha256, for
    ``reject_memory_s``: the same offer is then refused at once, without
    receiving or loading anything. Reasons sent to peers never contain a local
    path. An offer that would bring the inbox over ``max_inbox_bytes`` or over
    :data:`~fol.agent.inbox.MAX_INBOX_MODELS` models is refused (not remembered). Abandoned partial transfers are swept (:meth:`Inbox.sweep_partials`)
    every :attr:`SWEEP_INTERVAL_S` and whenever a new transfer needs room.
    """

    #: How many rejected (peer, model id / sha256) pairs are remembered at most.
    MAX_REMEMBERED = 1024
    #: Seconds between two sweeps of the partial folder.
    SWEEP_INTERVAL_S = 30.0

    def __init__(self, sock: zmq.Socket, inbox: Inbox, settings: ReceiverSettings, trust: TrustStore | None,
                 on_stored: Callable[[dict[str, Any]], None] | None = None) -> None:
        self.sock = sock
        self.inbox = inbox
        self.settings = settings
        self.trust = trust
        self.on_stored = on_stored
        self.active: dict[tuple[str, str], IncomingTransfer] = {}
        self.events: list[dict[str, Any]] = []  # last outcomes, for status and tests
        self.refused = 0
        self.rejections: OrderedDict[tuple[str, str], tuple[str, float]] = OrderedDict()
        #: Peers whose transfer was abandoned as too slow: peer -> (abandonments in a row, end of its cool-down).
        self.slow_peers: OrderedDict[str, tuple[int, float]] = OrderedDict()
        self._next_sweep = 0.0

    @staticmethod
    def configure(sock: zmq.Socket, settings: ReceiverSettings) -> None:
        """Socket options of the inbound ROUTER (call before bind)."""
        tune_socket(sock)
        sock.router_mandatory = True
        sock.maxmsgsize = settings.chunk_bytes + P.MAX_HEADER_BYTES + 1024
        # Messages one connection may have waiting while the loop is busy (verifying a model): the CHUNKs the
        # FETCH credits ask for and a few offers and errors. Past it ZeroMQ stops reading that connection until
        # the loop catches up.
        sock.rcvhwm = queue_limit(settings.window_chunks, settings.max_concurrent_transfers)

    def _reply(self, identity: bytes, kind: bytes, header: dict[str, Any]) -> bool:
        if isinstance(header.get("reason"), str):
            header = {**header, "reason": self.for_peer(header["reason"])}
        if isinstance(header.get("model_id"), str):  # a peer's unchecked id (a refusal, an ERROR) echoed cut
            header = {**header, "model_id": header["model_id"][:P.MAX_MODEL_ID_CHARS]}
        return _send(self.sock, [identity, *P.encode(kind, header)])

    def for_peer(self, reason: str) -> str:
        """``reason`` without local paths (peers get reasons, not paths), at most
        :data:`~fol.agent.protocol.MAX_REASON_CHARS` characters."""
        for root in sorted({str(self.inbox.root), str(self.inbox.root.resolve())}, key=len, reverse=True):
            reason = reason.replace(root, "<state>")
        return _ABSOLUTE_PATH.sub("<path>", reason)[:P.MAX_REASON_CHARS]

    # ---------------------------------------------------------------- rejections

    def _remember(self, peer: str, offer: Offer, reason: str, now: float) -> None:
        for key in (offer.model_id, f"sha256:{offer.sha256}"):
            self.rejections[(peer, key)] = (reason, now)
            self.rejections.move_to_end((peer, key))
        while len(self.rejections) > self.MAX_REMEMBERED:
            self.rejections.popitem(last=False)

    def _remembered(self, peer: str, offer: Offer, now: float) -> str | None:
        for key in (offer.model_id, f"sha256:{offer.sha256}"):
            item = self.rejections.get((peer, key))
            if item is not None and now - item[1] < self.settings.reject_memory_s:
                return item[0]
        return None

    def _event(self, peer: str, model_id: str, outcome: str, detail: str = "", **extra: Any) -> None:
        self.events.append({"peer": peer, "model_id": model_id[:P.MAX_MODEL_ID_CHARS], "outcome": outcome,
                            "detail": detail, "time": time.time(), **extra})
        del self.events[:-100]

    def handle(self, frames: list[Any], now: float) -> None:
        """Process one message (``frames[0]`` is the routing id)."""
        identity = frames[0].bytes if hasattr(frames[0], "bytes") else bytes(frames[0])
        body = frames[1:]
        try:
            kind, header, payload = P.decode(body)
        except ProtocolError as exc:
            log.warning("%s: bad message: %s", self.inbox.node_id, exc)
            self._reply(identity, P.ERROR, {"reason": str(exc)})
            return
        model_id = header.get("model_id") if isinstance(header.get("model_id"), str) else ""
        if self.trust is not None:
            user = body[0].get("User-Id") if hasattr(body[0], "get") else None
            peer = self.trust.peers.get(user.encode()) if user else None
            if peer is None:
                self.refused += 1
                log.warning("%s: refused a %s from a key that is not trusted (revoked?): %s",
                            self.inbox.node_id, kind.decode(), user)
                self._event("?", model_id, "refused", "key not in the trust store")
                self._reply(identity, P.REJECT, {"model_id": model_id, "reason": "your key is not trusted by this node"})
                active = [t for t in self.active.values() if t.identity == identity]
                for t in active:
                    self._abort(t, "key revoked")
                return
        else:
            peer = header.get("sender") if isinstance(header.get("sender"), str) else "anonymous"
        if kind == P.OFFER:
            self._on_offer(identity, peer, header, now)
        elif kind == P.CHUNK:
            self._on_chunk(identity, peer, header, payload, now)
        elif kind == P.ERROR:
            t = self.active.get((peer, model_id))
            if t is not None:
                self._abort(t, f"sender error: {P.peer_text(header.get('reason'))}")
        else:
            self._reply(identity, P.ERROR, {"model_id": model_id, "reason": f"{kind.decode()} is not a sender message"})

    def _on_offer(self, identity: bytes, peer: str, header: dict[str, Any], now: float) -> None:
        try:
            offer = Offer.from_header(header)
        except ProtocolError as exc:
            model_id = header.get("model_id") if isinstance(header.get("model_id"), str) else ""
            self._reply(identity, P.REJECT, {"model_id": model_id, "reason": str(exc)})
            self._event(peer, model_id, "rejected", str(exc))
            return
        if self.trust is not None and offer.sender != peer:
            reason = f"offer names sender {offer.sender!r} but the key belongs to {peer!r}"
            self._reply(identity, P.REJECT, {"model_id": offer.model_id, "reason": reason})
            self._event(peer, offer.model_id, "rejected", reason)
            return
        remembered = self._remembered(peer, offer, now)
        if remembered is not None:
            reason = f"rejected before: {remembered}"
            log.debug("%s: refused %s from %s again (remembered rejection)", self.inbox.node_id, offer.model_id, peer)
            self._reply(identity, P.REJECT, {"model_id": offer.model_id, "reason": reason})
            self._event(peer, offer.model_id, "rejected", reason, remembered=True)
            return
        current = self.active.get((peer, offer.model_id))
        cooling = self.slow_peers.get(peer, (0, now))[1] - now
        if current is None and cooling > 0:
            # its last transfer was too slow: no slot before its cool-down ends (BUSY, not REJECT: it may
            # resume then; the sender reads a retry_after_s under an hour, else offers again as usual)
            self._reply(identity, P.BUSY, {"model_id": offer.model_id, "retry_after_s": min(cooling, 3599.0)})
            return
        if current is not None:
            if (current.offer.sha256, current.offer.size) == (offer.sha256, offer.size):
                if current.identity == identity and now - current.last_activity < self.settings.chunk_timeout_s:
                    return  # a reminder while chunks are flowing: nothing to do
                current.identity = identity  # the sender lost track (reconnect/restart): resume
                current.stall(count=False)
                current.last_activity = current.last_progress = now
                self._fetch(current)
                return
            self._abort(current, "superseded by a different offer with the same id", discard=True)
        decision, reason = self.inbox.admit(peer, offer)
        if decision == "skip":
            self._reply(identity, P.SKIP, {"model_id": offer.model_id, "reason": reason})
            self._event(peer, offer.model_id, "skipped", reason)
            return
        if decision == "accept" and offer.size > self.settings.partial_max_bytes:
            decision = "reject"
            reason = (f"payload of {offer.size} bytes is over this node's space for transfers in progress "
                      f"({self.settings.partial_max_bytes} bytes)")
        held = self.inbox.received_bytes()
        held_models = len(self.inbox.state.received)
        if decision == "accept" and (held + offer.size > self.settings.max_inbox_bytes
                                     or held_models >= MAX_INBOX_MODELS):
            # This node's state, not the payload's fault: not remembered (the model is taken once there is room).
            reason = (f"inbox full: it holds {held} bytes of received models, this node keeps at most "
                      f"{self.settings.max_inbox_bytes} (max_inbox_bytes)"
                      if held_models < MAX_INBOX_MODELS else
                      f"inbox full: it holds {held_models:,} received models, the most this node records "
                      f"(MAX_INBOX_MODELS)")
            log.warning("%s: rejected offer %s from %s: %s", self.inbox.node_id, offer.model_id, peer, reason)
            self._reply(identity, P.REJECT, {"model_id": offer.model_id, "reason": reason})
            self._event(peer, offer.model_id, "rejected", reason)
            return
        if decision == "reject":
            log.warning("%s: rejected offer %s from %s: %s", self.inbox.node_id, offer.model_id, peer, reason)
            self._remember(peer, offer, reason, now)
            self._reply(identity, P.REJECT, {"model_id": offer.model_id, "reason": reason})
            self._event(peer, offer.model_id, "rejected", reason)
            return
        # One transfer per (sender, round) and per payload at a time: the inbox keeps one model of each, so a
        # second would only be refused once it had fully arrived (and could hold every transfer slot meanwhile).
        # BUSY, not SKIP: if the running one fails, this one is still wanted.
        overlapping = any(t.offer.sha256 == offer.sha256 or (t.peer == peer and t.offer.round == offer.round)
                          for t in self.active.values())
        # The running transfers may fill the inbox: BUSY, not REJECT, as one of them may still fail.
        inbox_room = (held + offer.size + sum(t.offer.size for t in self.active.values()) <= self.settings.max_inbox_bytes
                      and held_models + len(self.active) < MAX_INBOX_MODELS)
        # A peer's share of the slots: one peer offering several rounds (and trickling their chunks just inside
        # transfer_timeout_s) cannot take them all.
        peer_full = sum(t.peer == peer for t in self.active.values()) >= self.settings.max_transfers_per_peer
        if (overlapping or not inbox_room or peer_full or len(self.active) >= self.settings.max_concurrent_transfers
                or not self._make_room(peer, offer)):
            self._reply(identity, P.BUSY, {"model_id": offer.model_id, "retry_after_s": self.settings.offer_retry_s})
            return
        try:
            part, start = self.inbox.open_partial(peer, offer)
            t = IncomingTransfer(peer, offer, part, start, self.settings.chunk_bytes, self.settings.window_chunks,
                                 identity, now)
        except OSError as exc:  # a full or failing disk: this node's state, not the offer's fault
            reason = f"the receiver cannot write transfers ({exc.strerror or exc})"
            log.error("%s: cannot receive %s from %s: %s", self.inbox.node_id, offer.model_id, peer, reason)
            self._reply(identity, P.BUSY, {"model_id": offer.model_id, "retry_after_s": self.settings.offer_retry_s})
            self._event(peer, offer.model_id, "failed", reason)
            return
        self.active[t.key] = t
        if start:
            log.info("%s: resuming %s from %s at byte %d of %d", self.inbox.node_id, offer.model_id, peer, start,
                     offer.size)
        if t.complete:
            self._finish(t)
        else:
            self._fetch(t)

    def _make_room(self, peer: str, offer: Offer) -> bool:
        """Whether the partial folder has room for ``offer`` next to the running
        transfers (sweeping abandoned ones, oldest first, to make it)."""
        keep = {self.inbox.partial_key(t.peer, t.offer.model_id) for t in self.active.values()}
        keep.add(self.inbox.partial_key(peer, offer.model_id))
        need = offer.size + sum(t.offer.size for t in self.active.values())
        return self.inbox.sweep_partials(max_age_s=self.settings.partial_max_age_s,
                                         max_bytes=self.settings.partial_max_bytes, keep=keep, need_bytes=need)

    def _fetch(self, t: IncomingTransfer) -> None:
        for h in t.next_fetches():
            if not self._reply(t.identity, P.FETCH, h):
                t.stall(count=False)  # the sender is not reachable right now; wait for its next offer
                break

    def _on_chunk(self, identity: bytes, peer: str, header: dict[str, Any], payload: Any, now: float) -> None:
        model_id = header.get("model_id")
        t = self.active.get((peer, model_id)) if isinstance(model_id, str) else None
        if t is None:
            return  # late chunk of a finished, aborted or dropped transfer
        t.identity = identity
        try:
            offset = P.header_int(header, "offset")
            data = payload.buffer if hasattr(payload, "buffer") else payload
            progressed = t.on_chunk(offset, data, now)
        except ProtocolError as exc:
            self._reject(t, str(exc))
            return
        except OSError as exc:
            self._write_failed(t, exc)
            return
        if not progressed:
            return
        if t.complete:
            self._finish(t)
            return
        if t.written - t.confirmed >= self.settings.sync_bytes and not self._confirm(t):
            return
        self._fetch(t)

    def _confirm(self, t: IncomingTransfer) -> bool:
        """fsync ``t``'s written bytes and record the confirmed offset; False when the disk failed
        (``t`` is then dropped, see :meth:`_write_failed`)."""
        try:
            self.inbox.record_progress(t.peer, t.offer, t.sync())
        except OSError as exc:
            self._write_failed(t, exc)
            return False
        return True

    def _write_failed(self, t: IncomingTransfer, exc: OSError) -> None:
        """A disk error while writing or confirming ``t`` (a full disk): this node's fault, not the sender's.
        The transfer frees its slot, resumable from its last recorded offset (bytes after it are cut off
        on resume), and the sender is told BUSY, to offer again after ``offer_retry_s``."""
        reason = f"the receiver could not write the model ({exc.strerror or exc})"  # no local path: the peer's
        log.error("%s: %s %s from %s (%s); dropped at byte %d (resumable from byte %d)", self.inbox.node_id, reason,
                  t.offer.model_id, t.peer, exc.filename or t.part, t.written, t.confirmed)
        self._abort(t, reason, discard=False)
        self._reply(t.identity, P.BUSY, {"model_id": t.offer.model_id, "retry_after_s": self.settings.offer_retry_s})
        self._event(t.peer, t.offer.model_id, "failed", reason)

    def _finish(self, t: IncomingTransfer) -> None:
        try:
            t.sync()
        except OSError as exc:
            self._write_failed(t, exc)
            return
        t.close()
        del self.active[t.key]
        t_commit = time.monotonic()
        try:
            record = self.inbox.commit(t.peer, t.offer, t.part, digest=t.hasher.hexdigest())
        except (CheckpointError, ProtocolError) as exc:  # the payload's fault: remembered
            reason = str(exc)
            log.warning("%s: rejected %s from %s: %s", self.inbox.node_id, t.offer.model_id, t.peer, reason)
            self._remember(t.peer, t.offer, reason, time.monotonic())
            self._reply(t.identity, P.REJECT, {"model_id": t.offer.model_id, "reason": reason})
            self._event(t.peer, t.offer.model_id, "rejected", reason)
            return
        except Exception as exc:  # noqa: BLE001 - this node's fault (disk full, a bug): not remembered
            reason = (f"the receiver could not store the model ({exc.strerror or type(exc).__name__})"
                      if isinstance(exc, OSError) else f"internal error on the receiver ({type(exc).__name__})")
            log.error("%s: could not store %s from %s: %s", self.inbox.node_id, t.offer.model_id, t.peer, exc,
                      exc_info=not isinstance(exc, (OSError, FOLError)))
            self._reply(t.identity, P.REJECT, {"model_id": t.offer.model_id, "reason": reason})
            self._event(t.peer, t.offer.model_id, "failed", reason)
            return
        self._reply(t.identity, P.DONE, {"model_id": t.offer.model_id, "file": record["file"]})
        self.slow_peers.pop(t.peer, None)  # a whole model delivered: its next slow transfer counts as a first
        # Wire time since this attempt was accepted (a resumed transfer counts from its resume) and verify time.
        self._event(t.peer, t.offer.model_id, "stored", record["file"], bytes=t.written - t.start,
                    transfer_s=t.last_progress - t.created, verify_s=time.monotonic() - t_commit)
        if self.on_stored is not None:
            self.on_stored(dict(record, model_id=t.offer.model_id))

    def _reject(self, t: IncomingTransfer, reason: str) -> None:
        log.warning("%s: rejected %s from %s: %s", self.inbox.node_id, t.offer.model_id, t.peer, reason)
        self._abort(t, reason, discard=True)  # clean up before the sender hears about it
        self._remember(t.peer, t.offer, reason, time.monotonic())
        self._reply(t.identity, P.REJECT, {"model_id": t.offer.model_id, "reason": reason})
        self._event(t.peer, t.offer.model_id, "rejected", reason)

    def _abort(self, t: IncomingTransfer, reason: str, discard: bool = True) -> None:
        t.close()
        self.active.pop(t.key, None)
        if discard:
            self.inbox.discard_partial(t.peer, t.offer.model_id)
        log.info("%s: dropped transfer %s from %s: %s", self.inbox.node_id, t.offer.model_id, t.peer, reason)

    def drain(self, sock: zmq.Socket, max_frames: int = 256) -> int:
        """Handle the messages waiting on ``sock`` (a ROUTER), at most
        ``max_frames`` so one busy peer cannot starve the caller's loop;
        returns how many were handled."""
        waiting = recv_waiting(sock, max_frames)
        for frames in waiting:
            self.handle(frames, time.monotonic())
        return len(waiting)

    def tick(self, now: float) -> None:
        """Detect stalled links: refetch after ``chunk_timeout_s``; after
        ``transfer_timeout_s`` without progress free the slot (the partial file
        and its confirmed offset stay for a resume). Detect slow ones: a transfer
        whose rate over a period of ``transfer_timeout_s`` (the first from its
        start, then each following one) is under ``min_transfer_rate_bytes_s`` frees
        its slot the same way, and its sender gets BUSY for a cool-down (a peer
        trickling a chunk now and then made progress often enough to hold a slot
        for ever; see :meth:`_too_slow`). Every
        :attr:`SWEEP_INTERVAL_S` (and at the first tick) sweep abandoned partial transfers."""
        if now >= self._next_sweep:
            self._next_sweep = now + self.SWEEP_INTERVAL_S
            keep = {self.inbox.partial_key(t.peer, t.offer.model_id) for t in self.active.values()}
            self.inbox.sweep_partials(max_age_s=self.settings.partial_max_age_s,
                                      max_bytes=self.settings.partial_max_bytes, keep=keep)
        for t in list(self.active.values()):
            if now - t.last_progress > self.settings.transfer_timeout_s:
                if self._confirm(t):
                    self._abort(t, f"no progress for {format_seconds(self.settings.transfer_timeout_s)} (resumable)",
                                discard=False)
                continue
            if now - t.period_start >= self.settings.transfer_timeout_s:
                rate = (t.written - t.period_written) / (now - t.period_start)
                if rate < self.settings.min_transfer_rate_bytes_s:
                    self._too_slow(t, rate, now - t.period_start, now)
                    continue
                t.period_start, t.period_written = now, t.written
            if now - t.last_activity > self.settings.chunk_timeout_s:
                if not self._confirm(t):
                    continue
                t.stall()
                t.last_activity = now
                log.info("%s: transfer %s from %s stalled at byte %d; fetching again", self.inbox.node_id,
                         t.offer.model_id, t.peer, t.written)
                self._fetch(t)

    def _too_slow(self, t: IncomingTransfer, rate: float, period_s: float, now: float) -> None:
        """Free the slot of a transfer slower than ``min_transfer_rate_bytes_s`` (``rate`` over the last
        ``period_s``): its bytes are confirmed for a resume, and its sender is told BUSY until the end
        of a cool-down in which none of its offers takes a slot: ``transfer_timeout_s`` after its first
        such transfer, doubling with each that follows, at most ``reject_memory_s``; a model it
        delivers whole ends the doubling."""
        if not self._confirm(t):
            return
        count = self.slow_peers.pop(t.peer, (0, now))[0] + 1
        cooldown = min(self.settings.transfer_timeout_s * 2.0 ** min(count - 1, 64), self.settings.reject_memory_s)
        self.slow_peers[t.peer] = (count, now + cooldown)
        while len(self.slow_peers) > self.MAX_REMEMBERED:
            self.slow_peers.popitem(last=False)
        reason = (f"{rate:,.0f} B/s over the last {format_seconds(period_s)}, under this node's minimum of "
                  f"{self.settings.min_transfer_rate_bytes_s:,} B/s (min_transfer_rate_bytes_s); "
                  f"resumable from byte {t.confirmed} after {format_seconds(cooldown)}")
        self._abort(t, reason, discard=False)
        self._reply(t.identity, P.BUSY, {"model_id": t.offer.model_id, "retry_after_s": min(cooldown, 3599.0)})
        self._event(t.peer, t.offer.model_id, "abandoned", reason)

    def flush(self) -> None:
        """Confirm every running transfer's written bytes (clean shutdown)."""
        for t in list(self.active.values()):
            try:
                self.inbox.record_progress(t.peer, t.offer, t.sync())
            except OSError as exc:  # the last recorded offset stands; the others are still confirmed
                log.warning("%s: could not confirm %s from %s at shutdown: %s", self.inbox.node_id,
                            t.offer.model_id, t.peer, exc)
            finally:
                t.close()
        self.active.clear()

    def status(self) -> list[dict[str, Any]]:
        return [{"peer": t.peer, "model_id": t.offer.model_id, "bytes": t.written, "size": t.offer.size,
                 "resumed_from": t.start, "stalls": t.stalls} for t in self.active.values()]
