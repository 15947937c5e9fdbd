"""Node agent transfers on loopback: CURVE admission, revocation, resume after a
cut link, rejection of bad payloads, duplicates. Every test is bounded in time
(socket poll timeouts, transfer deadlines, thread joins with timeouts)."""

from __future__ import annotations

import hashlib
import time
from pathlib import Path
from typing import Any

import pytest
import zmq

from fol.agent.config import AgentConfig
from fol.agent.keys import generate_keypair, load_keypair, revoke_key, trust_key
from fol.agent.node import Agent
from fol.agent.protocol import Offer
from fol.agent.transfer import OutgoingTransfer, PeerLink, offer_for_file, send_model
from fol.checkpoint import ModelCard, model_to_bytes, save_model, tensor_digest
from fol.models import ModelSpec, build_model

CLASSES = ["damage", "no_damage"]


def _model_file(path: Path, producer: str, seed: int = 0, widths: tuple[int, ...] = (16, 32), round_: int = 0) -> Path:
    spec = ModelSpec("cnn", num_classes=2, options={"widths": list(widths), "hidden": 64})
    save_model(path, build_model(spec, seed=seed), spec=spec, class_names=CLASSES, producer=producer, round=round_)
    return path


def _wait(predicate: Any, timeout: float = 10.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


class Node:
    """Key pair + trust store + an exchange-only agent (no on-board training)."""

    def __init__(self, root: Path, name: str, trusted: list[Path], **limits: Any) -> None:
        self.name = name
        self.folder = root / name
        self.pub, self.sec = generate_keypair(root / "keys", name)
        self.keys = load_keypair(self.sec)
        self.trust_dir = self.folder / "trusted"
        self.trust_dir.mkdir(parents=True)
        for key in trusted:
            trust_key(self.trust_dir, key)
        self.model = _model_file(self.folder / "own.safetensors", name)
        self.limits = {"chunk_timeout_s": 0.5, "offer_retry_s": 0.3, **limits}
        self.agent: Agent | None = None

    def config(self) -> AgentConfig:
        return AgentConfig.from_dict({
            "node": {"id": self.name, "listen": "tcp://127.0.0.1:*", "secret_key": str(self.sec),
                     "trust_dir": str(self.trust_dir), "state_dir": str(self.folder / "state"),
                     "model": str(self.model)},
            "limits": self.limits,
            "trigger": {"on_board": False, "auto_send": False},
        }, source=f"{self.name}.toml")

    def start(self) -> Agent:
        self.agent = Agent(self.config(), load_fol=False).start()
        return self.agent

    def stop(self) -> None:
        if self.agent is not None:
            self.agent.stop(10)
            self.agent = None

    @property
    def inbox_files(self) -> list[Path]:
        return sorted(p for p in (self.folder / "state" / "inbox").rglob("*") if p.is_file())

    def confirmed_offset(self) -> int:
        import json

        metas = list((self.folder / "state" / "partial").glob("*.json"))
        assert len(metas) == 1
        return json.loads(metas[0].read_text())["confirmed"]

    @property
    def partial_files(self) -> list[Path]:
        return sorted(p for p in (self.folder / "state" / "partial").glob("*") if p.is_file())


@pytest.fixture
def pair(tmp_path: Path):
    """A receiver R that trusts sender S."""
    keys = tmp_path / "keys"
    s_pub, _ = generate_keypair(keys, "sender")
    s_keys = load_keypair(keys / "sender.key_secret")
    receiver = Node(tmp_path, "receiver", [s_pub])
    receiver.start()
    yield receiver, s_keys, s_pub
    receiver.stop()


def _send(receiver: Node, source: Any, offer: Offer, keys: Any, **kw: Any) -> OutgoingTransfer:
    assert receiver.agent is not None
    kw.setdefault("timeout_s", 15.0)
    return send_model(receiver.agent.listen_endpoint, source, offer, keys=keys, server_key=receiver.keys.public,
                      peer="receiver", **kw)


# ---------------------------------------------------------------------------- security


def test_trusted_peer_delivers_and_untrusted_key_is_refused(tmp_path: Path, pair) -> None:
    receiver, s_keys, _ = pair
    model = _model_file(tmp_path / "m.safetensors", "sender", seed=1)
    ok = _send(receiver, model, offer_for_file("sender", model, 64 * 1024), s_keys)
    assert ok.status == "delivered", ok.detail
    stored = receiver.folder / "state" / "inbox" / "round-0" / "sender.safetensors"
    assert stored.read_bytes() == model.read_bytes()

    # An intruder with its own (untrusted) key pair, even claiming to be "sender".
    _, intr_sec = generate_keypair(tmp_path / "intruder", "sender")
    intruder = load_keypair(intr_sec)
    other = _model_file(tmp_path / "evil.safetensors", "sender", seed=2, round_=1)
    t0 = time.monotonic()
    res = _send(receiver, other, offer_for_file("sender", other, 64 * 1024), intruder, timeout_s=2.0)
    assert res.status == "timeout" and res.bytes_served == 0  # the CURVE handshake never completes
    assert time.monotonic() - t0 < 5
    assert receiver.inbox_files == [stored]
    status = receiver.agent.request("status")
    assert status["inbox"] == 1 and [e["outcome"] for e in status["events"]] == ["stored"]


def test_sender_cannot_offer_in_another_peers_name(tmp_path: Path, pair) -> None:
    receiver, s_keys, _ = pair
    model = _model_file(tmp_path / "m.safetensors", "sender")
    res = _send(receiver, model, offer_for_file("receiver-friend", model, 64 * 1024), s_keys)
    assert res.status == "rejected" and "key belongs to 'sender'" in res.detail
    assert receiver.inbox_files == []


def test_revoked_key_cannot_deliver_even_on_an_open_connection(tmp_path: Path, pair) -> None:
    receiver, s_keys, _ = pair
    ctx = zmq.Context()
    link = PeerLink(ctx, "receiver", receiver.agent.listen_endpoint, s_keys, receiver.keys.public)
    try:
        def run(transfer: OutgoingTransfer, timeout: float = 10.0) -> None:
            link.add(transfer)
            deadline = time.monotonic() + timeout
            while not transfer.finished and time.monotonic() < deadline:
                link.tick(time.monotonic())
                if link.sock.poll(50):
                    link.handle(link.sock.recv_multipart(copy=False), time.monotonic())

        first = _model_file(tmp_path / "a.safetensors", "sender", seed=1)
        t1 = OutgoingTransfer("receiver", offer_for_file("sender", first, 65536), first, offer_retry_s=0.3)
        run(t1)
        assert t1.status == "delivered"
        revoke_key(receiver.trust_dir, "sender")
        _wait(lambda: "sender" not in receiver.agent.request("status")["trusted_peers"], what="trust reload")
        second = _model_file(tmp_path / "b.safetensors", "sender", seed=2, round_=1)
        t2 = OutgoingTransfer("receiver", offer_for_file("sender", second, 65536), second, offer_retry_s=0.3)
        run(t2)  # same socket, same CURVE session as the delivered model
        assert t2.status == "rejected" and "not trusted" in t2.detail
        assert t2.bytes_served == 0
    finally:
        link.close()
        ctx.term()
    assert len(receiver.inbox_files) == 1
    assert receiver.agent.request("status")["refused_messages"] >= 1


# ---------------------------------------------------------------------------- resume


def test_transfer_cut_halfway_resumes_from_confirmed_offset_byte_identical(tmp_path: Path) -> None:
    keys = tmp_path / "keys"
    s_pub, s_sec = generate_keypair(keys, "sender")
    s_keys = load_keypair(s_sec)
    receiver = Node(tmp_path, "receiver", [s_pub], chunk_bytes=16 * 1024, window_chunks=3, sync_bytes=32 * 1024,
                    chunk_timeout_s=0.3)
    receiver.start()
    try:
        model = _model_file(tmp_path / "big.safetensors", "sender", widths=(32, 64, 128))
        size = model.stat().st_size
        offer = offer_for_file("sender", model, 16 * 1024)
        chunks = -(-size // (16 * 1024))
        assert chunks >= 10
        cut = _send(receiver, model, offer, s_keys, stop_after_chunks=chunks // 2, timeout_s=10)
        assert cut.status == "interrupted" and cut.first_fetch_offset == 0
        # The receiver notices the stall and confirms what it wrote.
        _wait(lambda: receiver.agent.request("status")["incoming"]
              and receiver.agent.request("status")["incoming"][0]["stalls"] >= 1, what="stall")
        assert receiver.inbox_files == []
        confirmed = receiver.confirmed_offset()
        assert confirmed == (chunks // 2) * 16 * 1024
        resumed = _send(receiver, model, offer, s_keys)
        assert resumed.status == "delivered", resumed.detail
        assert resumed.first_fetch_offset == confirmed
        assert resumed.bytes_served == size - confirmed
        stored = receiver.folder / "state" / "inbox" / "round-0" / "sender.safetensors"
        assert hashlib.sha256(stored.read_bytes()).digest() == hashlib.sha256(model.read_bytes()).digest()
        assert stored.read_bytes() == model.read_bytes()
        assert receiver.partial_files == []
    finally:
        receiver.stop()


def test_resume_survives_receiver_restart(tmp_path: Path) -> None:
    keys = tmp_path / "keys"
    s_pub, s_sec = generate_keypair(keys, "sender")
    s_keys = load_keypair(s_sec)
    receiver = Node(tmp_path, "receiver", [s_pub], chunk_bytes=16 * 1024, window_chunks=2, sync_bytes=16 * 1024,
                    chunk_timeout_s=0.3)
    receiver.start()
    model = _model_file(tmp_path / "big.safetensors", "sender", widths=(32, 64, 128))
    offer = offer_for_file("sender", model, 16 * 1024)
    try:
        cut = _send(receiver, model, offer, s_keys, stop_after_chunks=8, timeout_s=10)
        assert cut.status == "interrupted"
        _wait(lambda: receiver.agent.request("status")["incoming"][0]["bytes"] == 8 * 16 * 1024, what="8 chunks")
        receiver.stop()  # the receiver restarts while the model is half there
        assert len(receiver.partial_files) == 2  # data + confirmed offset
        confirmed = receiver.confirmed_offset()
        assert confirmed == 8 * 16 * 1024
        receiver.start()
        resumed = _send(receiver, model, offer, s_keys)
        assert resumed.status == "delivered", resumed.detail
        assert resumed.first_fetch_offset == confirmed
        stored = receiver.folder / "state" / "inbox" / "round-0" / "sender.safetensors"
        assert stored.read_bytes() == model.read_bytes()
    finally:
        receiver.stop()


# ---------------------------------------------------------------------------- bad payloads


def _nonfinite_payload() -> tuple[bytes, ModelCard]:
    from safetensors.torch import save

    spec = ModelSpec("cnn-small", num_classes=2)
    tensors = {k: v.detach().clone().contiguous() for k, v in build_model(spec, seed=3).state_dict().items()}
    tensors["features.0.weight"][0, 0, 0, 0] = float("nan")
    card = ModelCard(spec=spec, class_names=CLASSES, producer="sender", sha256=tensor_digest(tensors))
    return save(tensors, metadata={"fol": card.to_json()}), card


def _good_payload(seed: int = 4) -> tuple[bytes, ModelCard]:
    spec = ModelSpec("cnn-small", num_classes=2)
    card = ModelCard(spec=spec, class_names=CLASSES, producer="sender")
    return model_to_bytes(build_model(spec, seed=seed), card), card


def _offer(data: bytes, spec: ModelSpec, *, size: int | None = None, sha: str | None = None, mid: str = "m1") -> Offer:
    return Offer(sender="sender", model_id=mid, round=0, spec=spec.to_dict(), size=size if size is not None else len(data),
                 sha256=sha or hashlib.sha256(data).hexdigest(), chunk_bytes=8192)


def _tampered() -> tuple[bytes, Offer, str]:
    data, card = _good_payload()
    bad = bytearray(data)
    bad[-100] ^= 0xFF  # a weight byte; the offer is computed over the tampered bytes
    return bytes(bad), _offer(bytes(bad), card.spec), "does not match the card"


def _tampered_in_transit() -> tuple[bytes, Offer, str]:
    data, card = _good_payload()
    bad = bytearray(data)
    bad[-100] ^= 0xFF
    return bytes(bad), _offer(bytes(bad), card.spec, sha=hashlib.sha256(data).hexdigest()), "does not match the offer"


def _truncated_file() -> tuple[bytes, Offer, str]:
    data, card = _good_payload()
    half = data[: len(data) // 2]
    return half, _offer(half, card.spec), "not a valid safetensors payload"


def _truncated_stream() -> tuple[bytes, Offer, str]:
    data, card = _good_payload()
    return data[: len(data) - 5000], _offer(data, card.spec), "truncated or overlong"


def _oversized() -> tuple[bytes, Offer, str]:
    data, card = _good_payload()
    return data, _offer(data, card.spec, size=300_000_000), "over this node's limit"


def _nonfinite() -> tuple[bytes, Offer, str]:
    data, card = _nonfinite_payload()
    return data, _offer(data, card.spec), "non-finite"


def _wrong_spec() -> tuple[bytes, Offer, str]:
    data, card = _good_payload()
    other = ModelSpec("cnn-medium", num_classes=2)
    return data, _offer(data, other), "differs from the offer"


@pytest.mark.parametrize("case", [_tampered, _tampered_in_transit, _truncated_file, _truncated_stream, _oversized,
                                  _nonfinite, _wrong_spec])
def test_bad_payload_is_rejected_and_inbox_stays_clean(pair, case) -> None:
    receiver, s_keys, _ = pair
    data, offer, reason = case()
    res = _send(receiver, data, offer, s_keys)
    assert res.status == "rejected"
    assert reason in res.detail
    assert receiver.inbox_files == []
    assert receiver.partial_files == []
    status = receiver.agent.request("status")
    assert status["inbox"] == 0 and status["incoming"] == []
    # A good model still gets through afterwards.
    good, card = _good_payload(seed=9)
    ok = _send(receiver, good, _offer(good, card.spec, mid="good"), s_keys)
    assert ok.status == "delivered", ok.detail


def test_oversized_offer_is_refused_before_any_byte(pair) -> None:
    receiver, s_keys, _ = pair
    data, offer, _ = _oversized()
    res = _send(receiver, data, offer, s_keys)
    assert res.status == "rejected" and res.bytes_served == 0 and res.first_fetch_offset is None


# ---------------------------------------------------------------------------- duplicates and state


def test_duplicate_offers_are_skipped_and_state_persists(tmp_path: Path, pair) -> None:
    receiver, s_keys, _ = pair
    model = _model_file(tmp_path / "m.safetensors", "sender", seed=5)
    offer = offer_for_file("sender", model, 65536)
    assert _send(receiver, model, offer, s_keys).status == "delivered"
    again = _send(receiver, model, offer, s_keys)
    assert again.status == "skipped" and "duplicate" in again.detail and again.bytes_served == 0
    renamed = Offer(**{**offer.to_header(), "model_id": "another-id"})
    same_bytes = _send(receiver, model, renamed, s_keys)
    assert same_bytes.status == "skipped" and "same bytes" in same_bytes.detail
    other = _model_file(tmp_path / "m2.safetensors", "sender", seed=6)
    second = _send(receiver, other, offer_for_file("sender", other, 65536), s_keys)
    assert second.status == "skipped" and "already holds a round-0 model from sender" in second.detail
    receiver.stop()
    receiver.start()  # the received list survives a restart
    assert _send(receiver, model, offer, s_keys).status == "skipped"
    assert receiver.agent.request("status")["inbox"] == 1
    assert len(receiver.inbox_files) == 1


def test_busy_receiver_asks_sender_to_retry(tmp_path: Path) -> None:
    keys = tmp_path / "keys"
    s_pub, s_sec = generate_keypair(keys, "sender")
    s_keys = load_keypair(s_sec)
    receiver = Node(tmp_path, "receiver", [s_pub], max_concurrent_transfers=1, chunk_bytes=8192, window_chunks=1,
                    chunk_timeout_s=0.3, transfer_timeout_s=1.0)
    receiver.start()
    try:
        big = _model_file(tmp_path / "big.safetensors", "sender", widths=(32, 64, 128))
        cut = _send(receiver, big, offer_for_file("sender", big, 8192), s_keys, stop_after_chunks=2, timeout_s=5)
        assert cut.status == "interrupted"  # its slot stays taken until transfer_timeout_s
        small = _model_file(tmp_path / "small.safetensors", "sender", round_=1)
        res = _send(receiver, small, offer_for_file("sender", small, 8192), s_keys, offer_retry_s=0.2)
        assert res.status == "delivered"
        assert res.busy_replies >= 1  # it had to wait for the stalled transfer's slot to be freed
    finally:
        receiver.stop()


# ---------------------------------------------------------------------------- simulation links


def test_loopback_links_move_models_between_named_nodes(tmp_path: Path) -> None:
    from fol.agent.loopback import LoopbackLinks
    from fol.errors import FOLError

    a = _model_file(tmp_path / "sat-1.safetensors", "sat-1", seed=1)
    b = _model_file(tmp_path / "sat-2.safetensors", "sat-2", seed=2)
    with LoopbackLinks(tmp_path / "links", ["sat-1", "sat-2", "sat-3"]) as links:
        got = links.send("sat-1", "sat-3", a)
        assert got.read_bytes() == a.read_bytes() and got.is_relative_to(tmp_path / "links" / "sat-3")
        assert links.send("sat-1", "sat-3", a) == got  # already there: same file, no second copy
        assert links.send("sat-2", "sat-3", b).read_bytes() == b.read_bytes()
        assert links.send("sat-3", "sat-1", b).read_bytes() == b.read_bytes()
        with pytest.raises(FOLError, match="unknown loopback node 'sat-9'"):
            links.send("sat-1", "sat-9", a)
    assert len(list((tmp_path / "links" / "sat-3" / "inbox").rglob("*.safetensors"))) == 2
