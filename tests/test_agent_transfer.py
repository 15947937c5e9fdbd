"""Node agent transfers on loopback: CURVE admission, revocation, resume after a
cut link, rejection of bad payloads, duplicates. Every test is bounded in time
(socket poll timeouts, transfer deadlines, thread joins with timeouts)."""

from __future__ import annotations

import dataclasses
import hashlib
import os
import json
import re
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import zmq

from fol.agent.config import AgentConfig
from fol.agent.keys import generate_keypair, load_keypair, revoke_key, trust_key
from fol.agent.node import Agent
from fol.agent.protocol import Offer
from fol.agent.transfer import OutgoingTransfer, PeerLink, offer_for_file, send_model
from fol.checkpoint import ModelCard, model_digest, model_to_bytes, save_model
from fol.models import ModelSpec, build_model
from _names import odd_folder
from _waiting import wait_until as _wait

CLASSES = ["damage", "no_damage"]
HURRICANE_CLASSES = ["no_damage", "damage"]  # synthetic-hurricane's, in its order: an on-board node's data


def _model_file(path: Path, producer: str, seed: int = 0, widths: tuple[int, ...] = (16, 32), round_: int = 0,
                classes: list[str] = CLASSES) -> Path:
    spec = ModelSpec("cnn", num_classes=2, options={"widths": list(widths), "hidden": 64})
    save_model(path, build_model(spec, seed=seed), spec=spec, class_names=classes, producer=producer, round=round_)
    return path


class Node:
    """Key pair + trust store + an exchange-only agent (no on-board training)."""

    def __init__(self, root: Path, name: str, trusted: list[Path], *, listen: str = "tcp://127.0.0.1:*",
                 peers: list[dict[str, str]] | None = None, **limits: Any) -> None:
        self.name = name
        self.listen = listen
        self.peers = peers or []
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
            "node": {"id": self.name, "listen": self.listen, "secret_key": str(self.sec),
                     "trust_dir": str(self.trust_dir), "state_dir": str(self.folder / "state"),
                     "model": str(self.model)},
            "peers": self.peers,
            "limits": self.limits,
            "trigger": {"on_board": False, "auto_send": False},
        }, source=f"{self.name}.toml")

    def on_board_config(self, trigger: dict[str, Any], fol: dict[str, Any]) -> AgentConfig:
        """A node that personalizes on board (a small synthetic shard, a model of its classes), with no peers."""
        model = _model_file(self.folder / "own-hurricane.safetensors", self.name, classes=HURRICANE_CLASSES)
        return AgentConfig.from_dict({
            "node": {"id": self.name, "listen": "tcp://127.0.0.1:*", "secret_key": str(self.sec),
                     "trust_dir": str(self.trust_dir), "state_dir": str(self.folder / "state"), "model": str(model),
                     "data": "dataset=synthetic-hurricane,nodes=2,node=0,psi=0.5,per_node=20,size=200"},
            "limits": self.limits, "trigger": trigger, "fol": fol,
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


@pytest.mark.parametrize("broken_file", [False, True], ids=["store-ok", "another-key-file-broken"])
def test_revoked_key_cannot_deliver_even_on_an_open_connection(tmp_path: Path, pair, broken_file: bool) -> None:
    """A revocation takes effect within a second, also when another file of the store cannot be read
    (the re-read fails; the key whose file is gone is dropped all the same)."""
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
        if broken_file:
            (receiver.trust_dir / "drone-9.key").write_text("curve\n    public-key = \"short\"\n")
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
    card = ModelCard(spec=spec, class_names=CLASSES, producer="sender")
    card = replace(card, sha256=model_digest(card, tensors))
    return save(tensors, metadata={"fol": card.to_json()}), card


class _RecordingSocket:
    """A stand-in for a Receiver's ROUTER socket that keeps every message it is given to send."""

    def __init__(self) -> None:
        self.sent: list[list[Any]] = []

    def send_multipart(self, frames: list[Any], flags: int = 0, copy: bool = True) -> None:
        self.sent.append([bytes(f) for f in frames])


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
    return half, _offer(half, card.spec), "truncated model file (cut short"


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
    # Peers get reasons, not the receiver's paths.
    assert str(receiver.folder) not in res.detail and not re.search(r"(^|[\s'\"])/", res.detail), res.detail
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


def _slow_receiver(tmp_path: Path, **limits: Any) -> tuple[Node, Any]:
    """A started receiver trusting a fresh "sender" (whose keys are returned), that fetches
    one 8 kB chunk at a time and drops a stalled transfer after ``transfer_timeout_s``."""
    s_pub, s_sec = generate_keypair(tmp_path / "keys", "sender")
    receiver = Node(tmp_path, "receiver", [s_pub], chunk_bytes=8192, window_chunks=1, chunk_timeout_s=0.3, **limits)
    receiver.start()
    return receiver, load_keypair(s_sec)


def test_busy_receiver_asks_sender_to_retry(tmp_path: Path) -> None:
    receiver, s_keys = _slow_receiver(tmp_path, max_concurrent_transfers=1, transfer_timeout_s=1.0)
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


def test_loopback_links_reopened_after_a_kill_while_making_keys_still_deliver(tmp_path: Path) -> None:
    """A simulation killed while its ``transport = "zmq"`` links made their keys is resumed in
    the same links folder. A kill after a node's key pair was written but before its public key
    was trusted (or between the pair's public and secret files) left a node whose every
    transfer was refused: the resumed run stopped with a timeout. Reopening now completes
    the keys and the trust store."""
    from fol.agent.keys import generate_keypair, trust_key
    from fol.agent.loopback import LoopbackLinks

    root = tmp_path / "links"
    pub, _ = generate_keypair(root / "keys", "sat-1")
    trust_key(root / "trusted", pub)  # sat-1 complete; sat-2: key pair made, then the kill
    generate_keypair(root / "keys", "sat-2")
    generate_keypair(root / "keys", "sat-3")
    (root / "keys" / "sat-3.key_secret").unlink()  # sat-3: killed between the pair's two files
    a = _model_file(tmp_path / "sat-1.safetensors", "sat-1", seed=1)
    with LoopbackLinks(root, ["sat-1", "sat-2", "sat-3"]) as links:
        assert links.send("sat-1", "sat-2", a, timeout_s=5).read_bytes() == a.read_bytes()
        assert links.send("sat-2", "sat-3", a, timeout_s=5).read_bytes() == a.read_bytes()
    assert sorted(p.name for p in (root / "trusted").iterdir()) == ["sat-1.key", "sat-2.key", "sat-3.key"]


def test_loopback_links_reopened_after_a_kill_between_a_models_arrival_and_its_record(tmp_path: Path) -> None:
    """A simulation killed (``transport = "zmq"``) after a model was renamed into a node's inbox
    but before the inbox's state recorded it could not be resumed: the resent model was
    refused ('the inbox already holds a round-0 model'). Reopened links now reconcile each
    inbox with its folder, as an agent does at start-up, and hand over the file."""
    import json

    from fol.agent.loopback import LoopbackLinks

    root = tmp_path / "links"
    a = _model_file(tmp_path / "sat-1.safetensors", "sat-1", seed=1)
    with LoopbackLinks(root, ["sat-1", "sat-2"]) as links:
        got = links.send("sat-1", "sat-2", a)
    state = root / "sat-2" / "state.json"
    record = json.loads(state.read_text())
    record["received"] = {}  # the kill came before the record was saved
    state.write_text(json.dumps(record))
    with LoopbackLinks(root, ["sat-1", "sat-2"]) as links:
        again = links.send("sat-1", "sat-2", a, timeout_s=5)
    assert again == got and again.read_bytes() == a.read_bytes()


# ---------------------------------------------------------------------------- hostile peers


def _hostile_payload(card_edit: Any) -> bytes:
    """A real cnn-small model whose card is edited after signing, then re-signed
    with whatever digest the toolkit of the day checks (an attacker can compute it)."""
    from safetensors.torch import save

    import fol.checkpoint as ck

    spec = ModelSpec("cnn-small", num_classes=2)
    tensors = {k: v.detach().clone().contiguous() for k, v in build_model(spec, seed=3).state_dict().items()}
    card = ModelCard(spec=spec, class_names=CLASSES, producer="sender").to_dict()
    digest = getattr(ck, "model_digest", None)
    card["sha256"] = digest(ModelCard.from_dict(card), tensors) if digest else ck.tensor_digest(tensors)
    return save(tensors, metadata={"fol": card_edit(json.dumps(card))})


def test_a_rejected_model_is_refused_again_without_a_byte(pair) -> None:
    receiver, s_keys, _ = pair
    huge = _hostile_payload(lambda text: text.replace('"options": {}', '"options": {"blocks": 10000}')
                            .replace('"cnn-small"', '"resnet-small"'))
    offer = Offer(sender="sender", model_id="evil-1", round=0,
                  spec={"arch": "resnet-small", "num_classes": 2, "in_channels": 3, "input_size": 32,
                        "options": {"blocks": 10000}},
                  size=len(huge), sha256=hashlib.sha256(huge).hexdigest(), chunk_bytes=65536)
    t0 = time.monotonic()
    first = _send(receiver, huge, offer, s_keys, timeout_s=20)
    assert first.status == "rejected" and first.bytes_served == len(huge)
    assert time.monotonic() - t0 < 5  # the loader refuses it before building anything
    again = _send(receiver, huge, offer, s_keys)
    assert again.status == "rejected" and "rejected before" in again.detail
    assert again.bytes_served == 0 and again.first_fetch_offset is None  # refused from memory, unread
    renamed = _send(receiver, huge, Offer(**{**offer.to_header(), "model_id": "evil-2"}), s_keys)
    assert renamed.status == "rejected" and renamed.bytes_served == 0  # same bytes under another id
    assert receiver.partial_files == [] and receiver.inbox_files == []


def test_nested_card_payload_gets_a_reject_and_leaves_no_partial_files(pair) -> None:
    """Cards nested ~980 levels deep once made the loader raise RecursionError
    inside the agent: no REJECT, partial files left behind. The exact depth
    that overflows depends on the stack, so a range is tried."""
    receiver, s_keys, _ = pair
    for i, depth in enumerate(range(966, 1000, 3)):
        nested = '{"a": ' * depth + "1" + "}" * depth
        data = _hostile_payload(lambda text: text.replace('"extra": {}', f'"extra": {nested}')
                                .replace('"version": 2', '"version": 1').replace('"round": 0', f'"round": {i}'))
        offer = Offer(sender="sender", model_id=f"nested-{i}", round=i, spec=ModelSpec("cnn-small", 2).to_dict(),
                      size=len(data), sha256=hashlib.sha256(data).hexdigest(), chunk_bytes=65536)
        res = _send(receiver, data, offer, s_keys, timeout_s=5)
        assert res.status == "rejected", (depth, res.status)
        assert "nested deeper" in res.detail, res.detail
        assert receiver.partial_files == [] and receiver.inbox_files == []
    assert receiver.agent.running and receiver.agent.request("status")["inbox"] == 0


def _partial_group(folder: Path, key: str, size: int, age_s: float, parts: tuple[str, ...] = (".part", ".json")) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    when = time.time() - age_s
    for suffix in parts:
        path = folder / f"{key}{suffix}"
        path.write_bytes(b"x" * size if suffix == ".part" else b"{}")
        os.utime(path, (when, when))


def test_abandoned_partial_transfers_are_swept_by_age_and_size(tmp_path: Path) -> None:
    keys = tmp_path / "keys"
    s_pub, s_sec = generate_keypair(keys, "sender")
    s_keys = load_keypair(s_sec)
    model = _model_file(tmp_path / "m.safetensors", "sender", seed=1)
    size = model.stat().st_size
    receiver = Node(tmp_path, "receiver", [s_pub], partial_max_age_s=3600.0, partial_max_bytes=int(2.5 * size))
    partial = receiver.folder / "state" / "partial"
    _partial_group(partial, "a" * 32, 1000, age_s=2 * 86400)  # abandoned two days ago
    _partial_group(partial, "b" * 32, 1000, age_s=600, parts=(".part",))  # its .json never written
    _partial_group(partial, "c" * 32, size, age_s=300)  # recent, but the oldest of the two left
    _partial_group(partial, "d" * 32, size // 2, age_s=100)
    receiver.start()
    try:
        # The sweep at start deletes a transfer's files one by one: wait for the whole set it leaves.
        expected = sorted(f"{k * 32}{s}" for k in "cd" for s in (".part", ".json"))
        _wait(lambda: sorted(p.name for p in partial.iterdir()) == expected, what="the sweep at start to leave c and d")
        # A new transfer needs room: the oldest abandoned one goes, the newer stays.
        res = _send(receiver, model, offer_for_file("sender", model, 65536), s_keys)
        assert res.status == "delivered", res.detail
        assert sorted(p.name for p in partial.iterdir()) == [f"{'d' * 32}.json", f"{'d' * 32}.part"]
    finally:
        receiver.stop()


def test_restarted_receiver_resumes_within_seconds(tmp_path: Path) -> None:
    """The sender keeps the default 60 s transfer timeout; the receiver is
    restarted mid-transfer and the model still arrives within seconds."""
    from fol.agent.loopback import free_port

    keys = tmp_path / "keys"
    s_pub, s_sec = generate_keypair(keys, "sender")
    s_keys = load_keypair(s_sec)
    receiver = Node(tmp_path, "receiver", [s_pub], listen=f"tcp://127.0.0.1:{free_port()}", chunk_bytes=8192,
                    window_chunks=2, sync_bytes=8192, chunk_timeout_s=0.5)
    receiver.start()
    model = _model_file(tmp_path / "big.safetensors", "sender", widths=(32, 64, 128))
    transfer = OutgoingTransfer("receiver", offer_for_file("sender", model, 8192), model, offer_retry_s=0.3,
                                transfer_timeout_s=60.0, deadline=time.monotonic() + 30)
    read = transfer._src.read
    transfer._src.read = lambda offset, length: (time.sleep(0.01), read(offset, length))[1]  # a slow link
    ctx = zmq.Context()
    link = PeerLink(ctx, "receiver", receiver.agent.listen_endpoint, s_keys, receiver.keys.public)
    stop = threading.Event()

    def sender() -> None:
        link.add(transfer)
        while not transfer.finished and not stop.is_set():
            link.tick(time.monotonic())
            if link.sock.poll(20):
                link.handle(link.sock.recv_multipart(copy=False), time.monotonic())

    thread = threading.Thread(target=sender, daemon=True)
    thread.start()
    try:
        _wait(lambda: (s := receiver.agent.request("status")["incoming"]) and s[0]["bytes"] >= 10 * 8192,
              what="10 chunks")
        receiver.stop()
        time.sleep(0.5)
        restarted = time.monotonic()
        receiver.start()
        _wait(lambda: transfer.finished, timeout=15.0, what="delivery after the restart")
        elapsed = time.monotonic() - restarted
        assert transfer.status == "delivered", transfer.detail
        stored = receiver.folder / "state" / "inbox" / "round-0" / "sender.safetensors"
        assert stored.read_bytes() == model.read_bytes()
        assert elapsed < 10.0, elapsed
    finally:
        stop.set()
        thread.join(10)
        link.close()
        ctx.term()
        receiver.stop()


# ---------------------------------------------------------------------------- commands


def test_a_failing_command_is_answered_and_the_agent_keeps_running(tmp_path: Path, monkeypatch) -> None:
    from fol.agent.node import control_request
    from fol.errors import ConfigError

    keys = tmp_path / "keys"
    s_pub, _ = generate_keypair(keys, "sender")
    node = Node(tmp_path, "receiver", [s_pub], peers=[{"id": "sender", "address": "tcp://127.0.0.1:9"}])
    agent = node.start()
    try:
        # A model file gone from disk: 'send' cannot open it.
        (node.folder / "state" / "models" / "round-0.safetensors").unlink()
        with pytest.raises(ConfigError, match="command 'send' failed .*FileNotFoundError"):
            agent.request("send", peer="sender")
        assert agent.running and agent.request("status")["node"] == "receiver"
        # an unknown peer id is quoted shortened: it was echoed whole (a 3,000-character id, 3,000 characters)
        with pytest.raises(ConfigError, match=r"unknown peer 'x+\.\.\.; configured peers: sender$") as err:
            agent.request("send", peer="x" * 3000)
        assert len(str(err.value)) < 200

        # A full disk while a command writes the state, asked over the control socket.
        def full(*_a: Any, **_k: Any) -> None:
            raise OSError(28, "No space left on device")

        monkeypatch.setattr(agent.inbox, "save", full)
        with pytest.raises(ConfigError, match="command 'send' failed .*No space left on device"):
            control_request(node.config(), "send", timeout_s=5, peer="sender")
        monkeypatch.setattr(agent.trust, "reload", full)
        with pytest.raises(ConfigError, match="No space left on device"):
            agent.request("reload")
        assert agent.running and control_request(node.config(), "status", timeout_s=5)["node"] == "receiver"
    finally:
        node.stop()


def test_a_full_disk_while_saving_the_state_is_one_line_naming_the_file(tmp_path: Path, monkeypatch, caplog) -> None:
    """A disk error in the poll loop's saves (here the state write after a delivery) or in a command was
    logged with a full traceback; now each is one line naming the file and the error, state.json stays as
    saved before, and the agent keeps running."""
    import errno
    import logging

    import fol.agent.inbox as inbox_module
    from fol.agent.loopback import free_port
    from fol.errors import ConfigError

    peer = Node(tmp_path, "drone-2", [], listen=f"tcp://127.0.0.1:{free_port()}")
    node = Node(tmp_path, "drone-1", [peer.pub], peers=[{"id": "drone-2", "address": peer.listen}])
    trust_key(peer.trust_dir, node.pub)
    state_file = node.folder / "state" / "state.json"
    agent = node.start()
    try:
        agent.request("send", peer="drone-2")  # offered again and again: drone-2 is not up yet
        saved = state_file.read_bytes()
        write = inbox_module.write_json_atomic

        def full(path: Any, data: Any) -> None:  # drone-1's disk is full
            if Path(path) == state_file:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))  # as the crash-safe writer does
            write(path, data)

        monkeypatch.setattr(inbox_module, "write_json_atomic", full)
        caplog.set_level(logging.INFO, logger="fol.agent")
        peer.start()
        _wait(lambda: agent.request("status")["outbox"][0]["status"] == "delivered", what="the delivery")
        with pytest.raises(ConfigError, match=rf"command 'send' failed \(OSError: {re.escape(str(state_file))}: "
                                              r"No space left on device\); the agent keeps running"):
            agent.request("send", peer="drone-2")
        assert agent.running and state_file.read_bytes() == saved
        failures = [r for r in caplog.records if r.levelno >= logging.ERROR and r.name == "fol.agent.node"]
        assert len(failures) == 2 and not any(r.exc_info for r in failures), [r.getMessage() for r in failures]
        assert f"_on_sent failed: {state_file}: No space left on device" in failures[0].getMessage()
        assert f"command 'send' failed: {state_file}: No space left on device" in failures[1].getMessage()
        monkeypatch.undo()
        agent.request("send", peer="drone-2")  # the disk has room again: the sends are recorded
        _wait(lambda: [e["status"] for e in json.loads(state_file.read_text())["outbox"].values()] == ["skipped"],
              what="the state write of the second send")
    finally:
        node.stop()
        peer.stop()


def test_reload_of_a_trust_store_with_a_broken_file_answers_the_error(pair) -> None:
    """'ctl reload' said which peers are trusted as if all went well; the operator must hear that the
    store was not read (the running agent keeps the keys it had, minus revoked ones)."""
    from fol.errors import ConfigError

    receiver, _, _ = pair
    (receiver.trust_dir / "drone-9.key").write_text("not a certificate\n")
    with pytest.raises(ConfigError, match=r"trust store not reloaded: .*drone-9.key: not a ZeroMQ certificate"):
        receiver.agent.request("reload")
    assert receiver.agent.request("status")["trusted_peers"] == ["sender"]
    (receiver.trust_dir / "drone-9.key").unlink()
    assert receiver.agent.request("reload") == {"trusted_peers": ["sender"]}


def test_requests_racing_a_stop_get_an_answer_or_an_error_at_once(tmp_path: Path) -> None:
    from fol.errors import ConfigError

    node = Node(tmp_path, "receiver", [])
    agent = node.start()
    outcomes: list[str] = []

    def client() -> None:
        for _ in range(200):
            t0 = time.monotonic()
            try:
                agent.request("status", timeout=5)
                outcomes.append("ok")
            except ConfigError as exc:  # at once: not the request's own 5 s timeout
                took = time.monotonic() - t0
                outcomes.append("error" if took < 2.0 else f"ConfigError after {took:.1f} s: {exc}")
            except Exception as exc:  # noqa: BLE001 - what the test is about
                outcomes.append(f"{type(exc).__name__} after {time.monotonic() - t0:.1f} s")
                return
            if outcomes[-1] != "ok":
                return

    threads = [threading.Thread(target=client) for _ in range(4)]
    for t in threads:
        t.start()
    time.sleep(0.05)
    agent.request("stop")
    for t in threads:
        t.join(30)
    node.agent = None
    agent.stop()
    assert all(o in ("ok", "error") for o in outcomes), [o for o in outcomes if o not in ("ok", "error")]
    with pytest.raises(ConfigError, match="not running"):
        agent.request("status")


@pytest.mark.parametrize("clock_step_s", [0.0, -3600.0], ids=["steady-clock", "clock-stepped-back"])
def test_a_failed_round_is_retried_with_back_off(tmp_path: Path, monkeypatch, clock_step_s: float, caplog) -> None:
    """Also when the wall clock steps back an hour after the round started (a companion computer
    syncing its time): the deadline and the retry are counted on the monotonic clock (they waited an hour).
    A disk error of the round is one line naming the file, not a traceback."""
    import logging
    import types

    import fol.agent.node as node_module

    node = Node(tmp_path, "receiver", [], round_retry_s=0.3, round_retry_max_s=5.0)
    agent = Agent(node.on_board_config({"auto_send": False, "deadline_s": 0.1}, {"rounds": 1}))
    shifted = types.SimpleNamespace(**{k: getattr(time, k) for k in ("monotonic", "sleep", "perf_counter")},
                                    time=lambda: time.time() + clock_step_s)
    monkeypatch.setattr(node_module, "time", shifted)
    calls: list[float] = []

    def job(info: dict[str, Any], records: list[dict[str, Any]]) -> dict[str, Any]:
        calls.append(time.monotonic())
        if len(calls) == 1:
            raise OSError(28, "No space left on device", "models/round-1.safetensors")
        out = agent.inbox.root / "models" / f"round-{info['round']}.safetensors"
        out.write_bytes(agent.inbox.path(info["current_model"]).read_bytes())
        return {"round": info["round"], "trigger": info["trigger"], "model": agent.inbox.relative(out),
                "report": "", "received": [], "used": [], "kept_local": True, "accuracy_line": "", "time": time.time()}

    monkeypatch.setattr(agent, "_personalize_job", job)
    agent.start()
    try:
        _wait(lambda: agent.request("status")["finished"], timeout=15.0, what="the retried round")
        status = agent.request("status")
    finally:
        agent.stop()
    assert len(calls) == 2 and calls[1] - calls[0] >= 0.3
    (failed,) = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert not failed.exc_info
    assert "round 1 failed (attempt 1): models/round-1.safetensors: No space left on device" in failed.getMessage()
    (entry,) = status["history"]
    assert entry["trigger"] == "deadline (retry 1)"
    assert status["last_error"] is None and status["failed_attempts"] == 0


def test_a_full_disk_while_storing_is_undone_and_not_held_against_the_sender(tmp_path: Path, pair, monkeypatch) -> None:
    receiver, s_keys, _ = pair
    model = _model_file(tmp_path / "m.safetensors", "sender", seed=1)
    offer = offer_for_file("sender", model, 65536)

    def full(*_a: Any, **_k: Any) -> None:
        raise OSError(28, "No space left on device")

    with monkeypatch.context() as m:
        m.setattr(receiver.agent.inbox, "save", full)
        res = _send(receiver, model, offer, s_keys)
    assert res.status == "rejected" and "could not store the model (No space left on device)" in res.detail
    assert receiver.inbox_files == [] and receiver.partial_files == []
    assert receiver.agent.running and receiver.agent.request("status")["inbox"] == 0
    again = _send(receiver, model, offer, s_keys)  # the receiver's fault is not remembered against the sender
    assert again.status == "delivered", again.detail


def test_a_listen_address_in_use_is_one_config_error_and_frees_the_state_folder(tmp_path: Path) -> None:
    """Binding used to raise zmq.ZMQError (a traceback from 'fol agent'); now it names the field."""
    import socket

    from fol.errors import ConfigError

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        node = Node(tmp_path, "receiver", [], listen=f"tcp://127.0.0.1:{port}")
        with pytest.raises(ConfigError, match=rf"receiver.toml: node.listen: cannot bind tcp://127.0.0.1:{port} "
                                              r"\(Address already in use\)"):
            Agent(node.config(), load_fol=False)
    node.listen = "tcp://127.0.0.1:*"
    agent = node.start()  # the state folder lock was released
    assert agent.request("status")["node"] == "receiver"
    node.stop()


def test_a_peer_address_that_cannot_be_connected_ends_the_agent_with_one_error(tmp_path: Path) -> None:
    """connect() raised zmq.ZMQError from run() and the half-made DEALER socket was never closed, so the
    shutdown's context term() blocked for ever: 'fol agent' hung after a traceback."""
    from fol.errors import ConfigError

    s_pub, _ = generate_keypair(tmp_path / "keys", "sender")
    node = Node(tmp_path, "receiver", [s_pub], peers=[{"id": "sender", "address": "tcp://no such host:5602"}])
    agent = Agent(node.config(), load_fol=False)
    errors: list[BaseException] = []

    def run() -> None:
        try:
            agent.run()
        except BaseException as exc:  # noqa: BLE001 - what the test is about
            errors.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(15)
    assert not thread.is_alive(), "the agent hung while shutting down"
    (err,) = errors
    assert isinstance(err, ConfigError) and "peer sender: cannot connect to tcp://no such host:5602" in str(err)
    assert agent.closed


def test_an_ipc_address_on_an_existing_file_is_refused_and_the_file_kept(tmp_path: Path) -> None:
    """ZeroMQ unlinks an ipc:// path before binding: 'control = ipc://node.toml' deleted the file."""
    from fol.errors import ConfigError

    node = Node(tmp_path, "receiver", [])
    precious = tmp_path / "notes.txt"
    precious.write_text("keep me")
    cfg = node.config()
    cfg.control = f"ipc://{precious}"
    with pytest.raises(ConfigError, match=r"receiver.toml: node.control: .*notes.txt exists and is not a socket"):
        Agent(cfg, load_fol=False)
    assert precious.read_text() == "keep me"
    cfg.control = f"ipc://{tmp_path / 'control.sock'}"
    for _ in range(2):  # a socket file left by an earlier run is fine
        agent = Agent(cfg, load_fol=False).start()
        assert agent.request("status")["node"] == "receiver"
        agent.stop(10)


@pytest.mark.parametrize("taken_field", ["control", "listen"])
def test_an_ipc_path_a_running_agent_listens_on_is_refused_and_that_agent_keeps_it(tmp_path: Path,
                                                                                      taken_field: str) -> None:
    """ZeroMQ unlinks an ipc:// socket file to bind: a second node given the first's path took it over, and
    the first went on running with its control (or listen) socket unreachable."""
    from fol.agent.node import control_request
    from fol.errors import ConfigError

    shared = f"ipc://{tmp_path / 'shared.sock'}"
    first, second = Node(tmp_path, "drone-1", []), Node(tmp_path, "drone-2", [])
    cfg1 = first.config()
    cfg1.control = shared
    agent = Agent(cfg1, load_fol=False).start()
    try:
        cfg2 = second.config()
        setattr(cfg2, taken_field, shared)
        with pytest.raises(ConfigError, match=rf"drone-2.toml: node.{taken_field}: {shared} is in use: a running "
                                              r"process \(another agent\?\) listens on"):
            Agent(cfg2, load_fol=False)
        assert control_request(cfg1, "status", timeout_s=5)["node"] == "drone-1"  # still reachable
    finally:
        agent.stop(10)
    assert not agent.running


@pytest.mark.parametrize("blocked", [".", "partial"])
def test_a_state_folder_that_is_a_file_is_one_config_error(tmp_path: Path, blocked: str) -> None:
    """mkdir raised FileExistsError (a traceback from 'fol agent'); the file is left as it was."""
    from fol.errors import ConfigError

    node = Node(tmp_path, "receiver", [])
    state = node.folder / "state"
    if blocked != ".":
        state.mkdir()
    (state / blocked if blocked != "." else state).write_text("not a folder")
    with pytest.raises(ConfigError, match=r"state.*(cannot be used as the state folder.*|cannot create the state "
                                          r"sub-folder) \(File exists\); expected a writable folder"):
        Agent(node.config(), load_fol=False)
    assert (state / blocked if blocked != "." else state).read_text() == "not a folder"


@pytest.mark.parametrize("record", ["[1, 2]", "null", '{"sender": "sender", "sha256": "%s", "size": %d, "confirmed": 1e400}',
                                    pytest.param("[" * 100_000, id="nested")])
def test_a_corrupt_partial_record_restarts_the_transfer(tmp_path: Path, pair, record: str) -> None:
    """A partial record that is JSON but not an object (or whose offset is infinite, or that nests 100,000
    deep) raised AttributeError / OverflowError / RecursionError on every offer of that model: it could not be
    received until the record aged out (24 h)."""
    receiver, s_keys, _ = pair
    model = _model_file(tmp_path / "m.safetensors", "sender", seed=1)
    offer = offer_for_file("sender", model, 65536)
    part, meta = receiver.agent.inbox.partial_paths("sender", offer.model_id)
    part.write_bytes(model.read_bytes()[:1000])
    meta.write_text(record % (offer.sha256, offer.size) if "%" in record else record)
    res = _send(receiver, model, offer, s_keys, timeout_s=10.0)
    assert res.status == "delivered" and res.first_fetch_offset == 0, (res.status, res.detail)
    assert receiver.partial_files == []


def test_an_on_board_node_skips_models_of_rounds_it_will_never_collect(tmp_path: Path) -> None:
    """Every card round >= the one being collected was accepted: a trusted peer could fill the inbox (and
    state.json) with valid models of rounds 1, 2, 3, ... that a node running [fol] rounds = 1 never uses."""
    s_pub, _ = generate_keypair(tmp_path / "keys", "sender")
    s_keys = load_keypair(tmp_path / "keys" / "sender.key_secret")
    node = Node(tmp_path, "receiver", [s_pub])
    node.agent = Agent(node.on_board_config({"auto_send": False, "models": 5}, {"rounds": 2})).start()
    try:
        for round_, outcome in [(2, "skipped"), (7, "skipped"), (1, "delivered"), (0, "delivered")]:
            model = _model_file(tmp_path / f"r{round_}.safetensors", "sender", seed=round_, round_=round_,
                                classes=HURRICANE_CLASSES)
            res = _send(node, model, offer_for_file("sender", model, 65536), s_keys)
            assert res.status == outcome, (round_, res.status, res.detail)
            if outcome == "skipped":
                assert res.bytes_served == 0 and "collects models up to round 1" in res.detail
        assert [p.parent.name for p in node.inbox_files] == ["round-0", "round-1"]
    finally:
        node.stop()


def test_a_second_model_of_a_round_waits_while_the_first_is_still_arriving(tmp_path: Path) -> None:
    """Two models of one sender and round (or the same bytes twice) never run at once:
    the inbox keeps one, so the second would otherwise be refused only after it had
    arrived in full, holding transfer slots meanwhile. It gets BUSY, and the
    first's end decides."""
    receiver, s_keys = _slow_receiver(tmp_path, max_concurrent_transfers=4, transfer_timeout_s=3.0)
    try:
        first = _model_file(tmp_path / "first.safetensors", "sender", widths=(32, 64, 128))
        first_offer = offer_for_file("sender", first, 8192)
        cut = _send(receiver, first, first_offer, s_keys, stop_after_chunks=2, timeout_s=5)
        assert cut.status == "interrupted" and len(receiver.agent.request("status")["incoming"]) == 1
        # the same bytes under another id, while the first is still held open: asked to wait
        renamed = Offer(**{**first_offer.to_header(), "model_id": "renamed"})
        waited = _send(receiver, first, renamed, s_keys, offer_retry_s=0.2, timeout_s=1.0)
        assert waited.status != "delivered" and waited.busy_replies >= 1 and waited.bytes_served == 0
        # another model of the same round: it waits until the stalled first is dropped, then arrives
        second = _model_file(tmp_path / "second.safetensors", "sender", seed=3)
        res = _send(receiver, second, offer_for_file("sender", second, 8192), s_keys, offer_retry_s=0.2, timeout_s=12)
        assert res.status == "delivered" and res.busy_replies >= 1
        # the first, offered again, is now the second model of the round: skipped, not a collision
        again = _send(receiver, first, first_offer, s_keys)
        assert again.status == "skipped" and "already holds a round-0 model from sender" in again.detail
        assert len(receiver.inbox_files) == 1
    finally:
        receiver.stop()


def test_zap_admits_exactly_the_message_level_trusted_keys_after_a_failed_reload(tmp_path: Path, pair) -> None:
    """The CURVE handshake (ZAP) kept its own copy of the trust store, re-read only after a successful
    reload: with another key file broken, a revoked key still completed new handshakes, and a key
    added meanwhile was admitted by ZAP but not trusted by the agent. Both now answer from one set."""
    from fol.errors import ConfigError

    receiver, s_keys, _ = pair
    (receiver.trust_dir / "drone-9.key").write_text("not a certificate\n")
    newcomer_pub, newcomer_sec = generate_keypair(tmp_path / "new", "newcomer")
    (receiver.trust_dir / "newcomer.key").write_bytes(newcomer_pub.read_bytes())  # store not re-read: not trusted
    revoke_key(receiver.trust_dir, "sender")  # gone from the store: revoked
    with pytest.raises(ConfigError, match="trust store not reloaded"):
        receiver.agent.request("reload")
    assert receiver.agent.request("status")["trusted_peers"] == []
    for name, keys in (("sender", s_keys), ("newcomer", load_keypair(newcomer_sec))):
        model = _model_file(tmp_path / f"{name}.safetensors", name, seed=3)
        res = _send(receiver, model, offer_for_file(name, model, 64 * 1024), keys, timeout_s=1.5)
        assert res.status == "timeout" and res.bytes_served == 0, (name, res.status, res.detail)  # no handshake
    (receiver.trust_dir / "drone-9.key").unlink()
    assert receiver.agent.request("reload") == {"trusted_peers": ["newcomer"]}
    model = _model_file(tmp_path / "n2.safetensors", "newcomer", seed=4)
    res = _send(receiver, model, offer_for_file("newcomer", model, 64 * 1024), load_keypair(newcomer_sec))
    assert res.status == "delivered", res.detail
    assert len(receiver.inbox_files) == 1


def test_the_round_age_survives_a_restart_across_wall_clock_steps(tmp_path: Path, monkeypatch) -> None:
    """After a restart the round's age was wall time minus the saved wall-clock start: a clock
    stepped forward while the agent ran (GPS / NTP sync of a companion computer without RTC) made
    a fresh round look weeks old at the next start (the deadline fired at once), and a clock set
    back restarted the wait from zero. The agent now saves the age it counted (monotonic) with the
    wall time of that count; a restart adds only the downtime, never a negative one."""
    import types

    import fol.agent.node as node_module
    from fol.errors import ConfigError

    day = 86400.0
    step = [0.0]
    monkeypatch.setattr(node_module, "time", types.SimpleNamespace(
        monotonic=time.monotonic, sleep=time.sleep, perf_counter=time.perf_counter, time=lambda: time.time() + step[0]))
    node = Node(tmp_path, "receiver", [])
    cfg = node.on_board_config({"auto_send": False, "deadline_s": 600.0}, {"rounds": 1})
    state_path = node.folder / "state" / "state.json"

    def edit_state(**fields: float) -> None:
        state = json.loads(state_path.read_text())
        state.update(fields)
        state_path.write_text(json.dumps(state))

    agent = Agent(cfg)  # a new round
    assert agent.status()["round_age_s"] < 5.0
    step[0] = 30 * day  # the clock is set a month ahead while the agent runs
    agent.stop()
    agent = Agent(cfg)
    assert agent.status()["round_age_s"] < 5.0  # not a month: the deadline does not fire at once
    agent.stop()
    step[0] = 0.0  # set back a month while stopped: the age counted so far is kept
    edit_state(round_age_s=500.0)
    agent = Agent(cfg)
    assert 500.0 <= agent.status()["round_age_s"] < 505.0
    agent.stop()
    edit_state(round_age_s=100.0, round_age_at=time.time() - 200.0)  # 200 s of downtime count
    agent = Agent(cfg)
    assert 300.0 <= agent.status()["round_age_s"] < 305.0
    agent.stop()
    for field, value in (("round_age_s", -1.0), ("round_age_at", "yesterday"), ("round_started", 1e400)):
        edit_state(**{field: value})
        with pytest.raises(ConfigError, match=rf"state.json: field '{field}' must be a non-negative number of seconds"):
            Agent(cfg)
        edit_state(**{field: 0.0})


def test_ctl_status_of_a_long_running_swarm_node_is_answered_in_full(tmp_path: Path) -> None:
    """The control client read the agent's answer with the 64 KiB / 4,096-value limit of peer
    messages: once the outbox held some hundred entries (30 peers, 20 rounds) 'fol agent ctl
    status' only said 'header is 78188 bytes, over the limit'. Answers of the node's own agent
    (CURVE, its own key) have their own, larger bound."""
    from fol.agent.node import control_request

    node = Node(tmp_path, "receiver", [])
    agent = node.start()
    try:
        entries = {f"drone-{p}|receiver:r{r}:0123456789abcdef": {
            "peer": f"drone-{p}", "model_id": f"receiver:r{r}:0123456789abcdef", "status": "delivered",
            "detail": f"inbox/round-{r}/receiver.safetensors"} for r in range(20) for p in range(30)}
        agent.request("status")  # the loop is up; the outbox is only read by 'status' below
        agent.inbox.state.outbox.update(entries)
        status = control_request(node.config(), "status", timeout_s=5)
        assert len(status["outbox"]) == 600 and status["node"] == "receiver"
    finally:
        node.stop()


@pytest.mark.parametrize("field, value, expected", [
    ("received", {"x": 5}, "field 'received' entry 'x' must be an object"),
    ("received", {"x": {"round": 0}}, "field 'received' entry 'x': 'sender' must be"),
    ("models", {"m": []}, "field 'models' entry 'm' must be an object"),
    ("outbox", {"a": {"peer": "p", "model_id": 3, "status": "pending", "detail": ""}},
     "field 'outbox' entry 'a': 'model_id' must be"),
    ("history", 3, "field 'history' must be a list"),
    ("finished", "no", "field 'finished' must be true or false"),
    ("current_model", 5, "field 'current_model' must be a string"),
])
def test_a_damaged_state_file_is_one_line_naming_the_field(tmp_path: Path, field: str, value: Any,
                                                           expected: str) -> None:
    """A hand-edited or damaged state.json stopped the agent with a TypeError / KeyError traceback
    (or started it with a state it would trip over later)."""
    from fol.errors import ConfigError

    node = Node(tmp_path, "receiver", [])
    Agent(node.config(), load_fol=False).stop()
    state_path = node.folder / "state" / "state.json"
    state = json.loads(state_path.read_text())
    state_path.write_text(json.dumps({**state, field: value}))
    with pytest.raises(ConfigError, match=re.escape(f"state.json: {expected}")):
        Agent(node.config(), load_fol=False)
    state_path.write_text(json.dumps(state))
    Agent(node.config(), load_fol=False).stop()  # the state folder was released


def test_a_state_file_without_its_node_is_one_line_naming_the_field(tmp_path: Path) -> None:
    """A state.json without "node" (the one field with no default) stopped the agent with Python's
    "malformed state (AgentState.__init__() missing 1 required positional argument: 'node')"; one without
    another field every version-1 agent writes started on its default (no 'round': round 1; no 'models':
    none), and is refused naming it too."""
    from fol.errors import ConfigError

    node = Node(tmp_path, "receiver", [])
    Agent(node.config(), load_fol=False).stop()
    state_path = node.folder / "state" / "state.json"
    state = json.loads(state_path.read_text())
    state_path.write_text(json.dumps({k: v for k, v in state.items() if k != "node"}))
    with pytest.raises(ConfigError) as refused:
        Agent(node.config(), load_fol=False)
    assert str(refused.value) == f"{state_path}: field 'node' is missing; expected the node's id (a string)"
    # every field version 1 has always held: a file without it is damaged (it started at round 1, no models)
    for name, expected in (("round", "the round in progress (a positive integer)"),
                           ("models", "an object of the node's models"), ("history", "a list of finished rounds")):
        state_path.write_text(json.dumps({k: v for k, v in state.items() if k != name}))
        with pytest.raises(ConfigError) as refused:
            Agent(node.config(), load_fol=False)
        assert str(refused.value) == f"{state_path}: field {name!r} is missing; expected {expected}"
    # a version-1 file written before round_age_s / round_age_at lacks them: they keep their defaults
    state_path.write_text(json.dumps({k: v for k, v in state.items() if k not in ("round_age_s", "round_age_at")}))
    Agent(node.config(), load_fol=False).stop()


def _edit_state(state: dict[str, Any], where: str, value: str) -> dict[str, Any]:
    """``state`` with the path field ``where`` (``current_model``, or ``models.file`` / ``received.file``:
    the first record's, a received record added; ``history.model`` / ``history.report``: a history entry
    added) set to ``value``."""
    state = json.loads(json.dumps(state))
    if where in ("current_model", "local_model"):
        state[where] = value
    elif where == "models.file":
        next(iter(state["models"].values()))["file"] = value
    elif where.startswith("history."):  # a finished round's entry, its other path as the agent writes it
        entry = {"round": 1, "trigger": "command", "model": "models/round-1.safetensors",
                 "report": "reports/round-1.json", "used": []}
        state["history"] = [{**entry, where.split(".")[1]: value}]
    else:
        state["received"]["m"] = {"sender": "sender", "round": 0, "sha256": "0" * 64, "size": 1, "file": value,
                                  "time": 0.0}
    return state


@pytest.mark.parametrize("where", ["current_model", "local_model", "models.file", "received.file", "history.model",
                                   "history.report"])
@pytest.mark.parametrize("value", ["{outside}", "../own.safetensors", "models/../../own.safetensors"],
                         ids=["absolute", "parent", "dotdot-inside"])
def test_a_state_path_outside_the_state_folder_is_one_line_naming_the_field(tmp_path: Path, where: str,
                                                                           value: str) -> None:
    """Review: paths read back from state.json were followed as given: an absolute path or one with '..'
    made the agent start on a model outside its state folder (current_model, local_model), offer such a
    file to its peers (a 'models' record's file) or keep a received record of it. The agent writes every
    path relative to the state folder; any other stops the start in one line naming state.json, the field
    and the value, and nothing is rewritten. Before this change, each of these agents started.
    A history entry's 'model' and 'report' (shown by ``fol agent ctl status``; the loopback exchange reads
    the report) were not checked at all, and an agent with such a history started: they follow the rule too."""
    from fol.errors import ConfigError

    node = Node(tmp_path, "receiver", [])
    Agent(node.config(), load_fol=False).stop()
    state_path = node.folder / "state" / "state.json"
    state = json.loads(state_path.read_text())
    value = value.format(outside=node.model)  # a real model file, outside the state folder
    assert (state_path.parent / value).is_file()
    state_path.write_text(json.dumps(_edit_state(state, where, value)))
    before = state_path.read_bytes()
    field = f"field '{where}'" if "." not in where else (
        f"field 'history' entry 0: '{where.split('.')[1]}'" if where.startswith("history.") else
        f"field '{where.split('.')[0]}' entry '{'m' if where.startswith('received') else next(iter(state['models']))}': 'file'")
    with pytest.raises(ConfigError) as err:
        Agent(node.config(), load_fol=False)
    assert str(err.value) == (f"{state_path}: {field} {value} is outside the state folder; expected a path relative "
                              f"to it without '..' parts, as the agent writes (models/round-1.safetensors)")
    assert state_path.read_bytes() == before
    state_path.write_text(json.dumps(state))
    Agent(node.config(), load_fol=False).stop()  # the state folder was released; the agent's own paths are read


def test_a_current_model_no_file_can_have_is_one_line_naming_state_json_and_the_field(tmp_path: Path) -> None:
    """Review: a 5,000-character current_model stopped the start with an OSError traceback whose line held
    the whole name (File name too long), naming neither state.json nor the field."""
    from fol.errors import ConfigError

    node = Node(tmp_path, "receiver", [])
    Agent(node.config(), load_fol=False).stop()
    state_path = node.folder / "state" / "state.json"
    state_path.write_text(json.dumps({**json.loads(state_path.read_text()), "current_model": "x" * 5000}))
    with pytest.raises(ConfigError) as err:
        Agent(node.config(), load_fol=False)
    message = str(err.value)
    assert message.startswith(f"{state_path}: field 'current_model' 'xxx"), message
    assert message.endswith("... cannot be checked (File name too long)"), message
    assert "\n" not in message and len(message) < len(str(state_path)) + 300, message


@pytest.mark.parametrize("field", ["current_model", "local_model"])
def test_an_on_board_nodes_model_missing_or_too_long_is_one_line_naming_the_field(tmp_path: Path,
                                                                                 field: str) -> None:
    """An on-board node reads both models' cards at start-up: a local_model of 5,000 characters was refused
    by read_card in a line naming neither state.json nor the field, the name whole; a missing one too."""
    from fol.errors import ConfigError

    node = Node(tmp_path, "receiver", [])
    cfg = node.on_board_config({"auto_send": False}, {"rounds": 1})
    Agent(cfg, load_fol=False).stop()
    state_path = node.folder / "state" / "state.json"
    state = json.loads(state_path.read_text())
    for value, ending in (("x" * 5000, "... cannot be checked (File name too long)"),
                          ("models/round-7.safetensors", ": model models/round-7.safetensors is missing")):
        state_path.write_text(json.dumps({**state, field: value}))
        with pytest.raises(ConfigError) as err:
            Agent(cfg, load_fol=False)
        message = str(err.value)
        assert message.startswith(f"{state_path}: field '{field}'") and message.endswith(ending), message
        assert len(message) < len(str(state_path)) + 300, message


@pytest.mark.parametrize("damage, expected", [
    # json.loads raised RecursionError: a traceback at start-up instead of one line
    (lambda p: p.write_text("[" * 100_000 + "]" * 100_000), "state.json: cannot read agent state (nested deeper"),
    # read whole, however large, before it failed to parse (a sparse file here: no disk used)
    (lambda p: (p.touch(), os.truncate(p, 64 * 2**20 + 1)), "state.json: 67108865 bytes; an agent state file may have at most"),
    (lambda p: p.write_text("[" + "0," * 1_000_000 + "0]"), "state.json: cannot read agent state (holds more"),
], ids=["nested", "huge", "too-many-values"])
def test_a_state_file_nested_deep_or_huge_is_one_line_naming_it(tmp_path: Path, damage: Any, expected: str) -> None:
    from fol.agent.inbox import Inbox
    from fol.errors import ConfigError

    state = tmp_path / "state" / "state.json"
    state.parent.mkdir()
    damage(state)
    with pytest.raises(ConfigError, match=re.escape(expected)) as err:
        Inbox(tmp_path / "state", "receiver", 10**8)
    assert "\n" not in str(err.value)


def test_a_failed_runtime_file_write_releases_everything_and_is_one_line(tmp_path: Path, monkeypatch, capsys) -> None:
    """Writing agent.json is the last step of the start; when it failed (a full disk) the sockets, the ZAP
    thread and the state folder lock stayed held: the same process could not start the agent again."""
    import errno

    from fol.agent import node as node_module
    from fol.agent.loopback import free_port, toml_text
    from fol.cli import main

    def full_disk(path: Path, *args: Any, **kw: Any) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))

    node = Node(tmp_path, "receiver", [], listen=f"tcp://127.0.0.1:{free_port()}")
    toml = tmp_path / "receiver.toml"
    toml.write_text(toml_text({
        "node": {"id": "receiver", "listen": node.listen, "secret_key": str(node.sec), "trust_dir": str(node.trust_dir),
                 "state_dir": str(node.folder / "state"), "model": str(node.model)},
        "trigger": {"on_board": False, "auto_send": False}}))
    threads = set(threading.enumerate())
    with monkeypatch.context() as m:
        m.setattr(node_module, "write_json_atomic", full_disk)
        with pytest.raises(OSError, match="No space left on device"):
            Agent(node.config(), load_fol=False)
        assert set(threading.enumerate()) <= threads  # the ZAP authenticator thread was stopped
        assert main(["agent", "--config", str(toml)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"fol agent: error: {node.folder / 'state' / 'agent.json'}: No space left on device"
    state = node.folder / "state"  # the model's adoption as round 0 was taken back
    assert sorted(p.relative_to(state).as_posix() for p in state.rglob("*") if p.is_file()) == ["agent.lock"]
    assert set(threading.enumerate()) <= threads
    agent = node.start()  # the lock and the listen port were released
    try:
        assert agent.request("status")["listen"] == node.listen
    finally:
        node.stop()


def test_new_inbox_and_state_folders_are_made_durable_in_their_parents(tmp_path: Path, monkeypatch) -> None:
    """A new inbox/round-<r>/ folder was fsynced, but not inbox/ that holds its entry: after a power loss
    the folder (and the model the state lists in it) could be gone. The same for a new state folder."""
    from fol.agent import inbox as inbox_module
    from fol.agent.inbox import Inbox

    from swarmbase import fileio

    synced: list[Path] = []
    real = fileio.fsync_dir
    for module in (fileio, inbox_module):  # make_dirs lives in the crash-safe writer's module
        monkeypatch.setattr(module, "fsync_dir", lambda folder: (synced.append(Path(folder)), real(folder)))
    root = tmp_path / "drone" / "state"
    inbox = Inbox(root, "receiver", 10**8, accept_any_round=True)
    assert {tmp_path, tmp_path / "drone", root} <= set(synced)
    data, card = _good_payload()
    part = tmp_path / "m.part"
    part.write_bytes(data)
    synced.clear()
    inbox.commit("sender", _offer(data, card.spec), part)
    assert root / "inbox" in synced and root / "inbox" / "round-0" in synced


def test_an_exchange_only_inbox_is_capped_by_max_inbox_bytes(tmp_path: Path) -> None:
    """An exchange-only node kept one model per peer and round for every round up to 1,000,000: a trusted
    peer offering ever-new rounds filled the disk. The inbox is now capped; over it, an offer is refused
    before any byte moves (and not remembered: the same model is taken once there is room)."""
    keys = tmp_path / "keys"
    s_pub, _ = generate_keypair(keys, "sender")
    s_keys = load_keypair(keys / "sender.key_secret")
    models = [_model_file(tmp_path / f"m{r}.safetensors", "sender", seed=r, round_=r) for r in range(3)]
    size = models[0].stat().st_size
    receiver = Node(tmp_path, "receiver", [s_pub], max_inbox_bytes=2 * size + size // 2)
    receiver.start()
    try:
        for model in models[:2]:
            res = _send(receiver, model, offer_for_file("sender", model, 64 * 1024), s_keys)
            assert res.status == "delivered", res.detail
        res = _send(receiver, models[2], offer_for_file("sender", models[2], 64 * 1024), s_keys)
        assert res.status == "rejected" and res.bytes_served == 0
        assert res.detail == (f"inbox full: it holds {2 * size} bytes of received models, this node keeps at most "
                              f"{2 * size + size // 2} (max_inbox_bytes)")
        assert len(receiver.inbox_files) == 2 and receiver.partial_files == []
    finally:
        receiver.stop()
    (receiver.folder / "state" / "inbox" / "round-0" / "sender.safetensors").unlink()  # collected by its user
    receiver.start()  # the restart drops the record of the file that is gone
    try:
        res = _send(receiver, models[2], offer_for_file("sender", models[2], 64 * 1024), s_keys)
        assert res.status == "delivered", res.detail
    finally:
        receiver.stop()


def test_a_round_that_cannot_be_recorded_at_shutdown_still_releases_the_state_folder(tmp_path: Path) -> None:
    """The stop records a personalization that finished meanwhile; when that failed (a full disk), the
    shutdown ended there: sockets, ZAP thread and state folder lock stayed held."""
    import concurrent.futures
    import errno

    node = Node(tmp_path, "receiver", [])
    agent = node.start()
    threads = set(threading.enumerate()) - {agent._thread}
    agent.request("status")
    job: concurrent.futures.Future = concurrent.futures.Future()  # a round that finishes as the agent stops
    executor = agent._executor
    assert executor is not None
    stop_executor = executor.shutdown

    def finish_round(wait: bool = True) -> None:
        stop_executor(wait)
        if not job.done():
            job.set_result({"round": 1, "model": "models/round-1.safetensors"})

    def full_disk(*args: Any) -> str:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), "state.json")

    executor.shutdown = finish_round  # type: ignore[method-assign]
    agent.inbox.register_own_model = full_disk  # type: ignore[method-assign]
    agent._job_info, agent._job = {"round": agent.inbox.state.round}, job
    agent.stop(10)
    assert agent.closed and not agent.running
    assert set(threading.enumerate()) <= threads  # the ZAP authenticator thread was stopped
    node.start()  # the state folder was released
    node.stop()


def test_a_model_of_no_use_is_refused_in_a_bounded_line(tmp_path: Path) -> None:
    """A peer's card may name up to the loader's 10,000 classes: the refusal of a model for
    other classes quoted the whole list (here 96 kB), in the line the receiver logs,
    remembers and records; the lists are now shown cut."""
    from fol.agent.inbox import Inbox
    from fol.agent.protocol import ProtocolError

    spec = ModelSpec("cnn", num_classes=3000, options={"widths": [2], "hidden": 0})
    names = [f"a-class-of-a-long-name-{i:05d}" for i in range(3000)]
    data = model_to_bytes(build_model(spec, seed=0), ModelCard(spec=spec, class_names=names, producer="sender"))
    inbox = Inbox(tmp_path / "state", "receiver", 10**8, accept_any_round=True)
    inbox.compatible = (tuple(CLASSES), (3, 32, 32))
    part = tmp_path / "m.part"
    part.write_bytes(data)
    with pytest.raises(ProtocolError, match="of no use to this node") as info:
        inbox.verify(part, _offer(data, spec))
    msg = str(info.value)
    assert "'a-class-of-a-long-name-00000'" in msg and "\n" not in msg and len(msg) < 600, len(msg)


def test_an_offer_whose_spec_differs_from_the_card_is_refused_in_a_bounded_line(tmp_path: Path) -> None:
    """The OFFER's spec is only bounded in size (a 60 kB architecture name fits a header):
    the refusal quoted it whole in the line the receiver logs, remembers and records."""
    from fol.agent.inbox import Inbox
    from fol.agent.protocol import ProtocolError

    data, card = _good_payload()
    offer = replace(_offer(data, card.spec), spec={**card.spec.to_dict(), "arch": "x" * 60_000})
    inbox = Inbox(tmp_path / "state", "receiver", 10**8, accept_any_round=True)
    part = tmp_path / "m.part"
    part.write_bytes(data)
    with pytest.raises(ProtocolError, match="differs from the offer's") as info:
        inbox.verify(part, offer)
    msg = str(info.value)
    assert "'arch': 'cnn-small'" in msg and "'arch': 'xxxx" in msg and len(msg) < 600, len(msg)


@pytest.mark.parametrize("data, message", [
    ("dataset=synthetic-hurricane,nodes=2,node=5", r"node=5 must be in \[0, nodes=2\)"),
    ("dataset=synthetic-hurricane,nodes=2,node=0,color=red", r"unknown or malformed entry 'color=red'"),
])
def test_a_bad_data_spec_names_the_config_file_and_node_data(tmp_path: Path, data: str, message: str) -> None:
    """'fol agent' has no --data option: a mistake in node.toml's data is reported as node.data of that file."""
    from fol.errors import ConfigError

    node = Node(tmp_path, "receiver", [])
    cfg = node.on_board_config({"auto_send": False}, {"rounds": 1})
    cfg.data = data
    with pytest.raises(ConfigError, match=rf"^receiver\.toml: node\.data: {message}") as err:
        Agent(cfg, load_fol=False)
    assert "--data" not in str(err.value)


def test_a_data_root_with_a_synthetic_dataset_is_refused_naming_the_config_file_and_node_data_root(
        tmp_path: Path) -> None:
    """node.data_root with a generated dataset was taken and ignored, where fol pretrain and fol personalize
    refuse --data-root with it (check_data_root); the agent now refuses to start in the same line, naming
    its config file and node.data_root, before its state folder is taken."""
    from fol.errors import ConfigError

    node = Node(tmp_path, "receiver", [])
    cfg = node.on_board_config({"auto_send": False}, {"rounds": 1})
    cfg.data_root = str(tmp_path / "datasets")
    with pytest.raises(ConfigError) as err:
        Agent(cfg, load_fol=False)
    assert str(err.value) == ("receiver.toml: node.data_root: only applies to datasets read from files (a real "
                              "dataset's <root>/<name>/, an imagefolder path relative to it), not "
                              "'synthetic-hurricane', which is generated from no folder")
    Agent(node.config(), load_fol=False).stop()  # the state folder was released


def _image_folder(root: Path, classes: dict[str, int], corrupt: str | None = None) -> Path:
    """``root/<class>/<i>.png``: ``classes[name]`` tiny images per class; ``corrupt`` names one class
    whose first file is not an image."""
    import numpy as np
    from PIL import Image

    for name, count in classes.items():
        (root / name).mkdir(parents=True)
        for i in range(count):
            Image.fromarray(np.full((8, 8, 3), 40 * i % 255, dtype=np.uint8)).save(root / name / f"{i}.png")
    if corrupt is not None:
        (root / corrupt / "0.png").write_bytes(b"not a png")
    return root


@pytest.mark.parametrize("make, message", [
    (lambda d: d.mkdir() or d, r"has no class sub-folders"),
    (lambda d: _image_folder(d, {"damage": 12, "no_damage": 0}), r"class folder .*no_damage has no images"),
    (lambda d: _image_folder(d, {"damage": 12, "no_damage": 12}, corrupt="damage"), r"0\.png"),
    (lambda d: _image_folder(d, {"cat": 12, "dog": 12}), r"the data.s classes \[.cat., .dog.\] differ from the model's "
                                                          r"\['damage', 'no_damage'\]"),
    (lambda d: "dataset=synthetic-hurricane,nodes=2,node=0,per_node=500,size=60", r"cannot give nodes=2 per_node=500"),
], ids=["empty-folder", "class-without-images", "corrupt-image", "other-classes", "shard-too-large"])
def test_the_node_data_is_loaded_and_checked_at_start_up(tmp_path: Path, make: Any, message: str) -> None:
    """Bad node data used to pass the start-up and fail only the first personalization, maybe hours into
    a flight; now the agent refuses to start, naming the config file and node.data (not the CLI's --data)."""
    from fol.errors import ConfigError

    node = Node(tmp_path, "receiver", [])
    cfg = node.on_board_config({"auto_send": False}, {"rounds": 1})
    cfg.model, cfg.data = node.model, str(make(tmp_path / "data"))  # a model of classes damage, no_damage
    with pytest.raises(ConfigError, match=rf"^receiver\.toml: node\.data: .*{message}") as err:
        Agent(cfg, load_fol=False)
    assert "--data" not in str(err.value) and "\n" not in str(err.value)
    Agent(node.config(), load_fol=False).stop()  # the state folder was released


def test_the_node_data_is_split_by_the_rule_the_models_card_records(tmp_path: Path) -> None:
    """A --data spec's node K split with seed S + K, fol simulate's with node_seed(S, K): models pretrained
    now record "node_seed" in their card (extra.split_seed) and split so; a round-0 model whose card records
    no rule was pretrained by S + K, and the agent still splits its data so (else its validation and test
    images would hold training images). A rule this toolkit does not know is refused at start-up, in one line."""
    import torch

    from fol.checkpoint import load_model
    from fol.errors import ConfigError
    from fol.nodedata import LEGACY_SPLIT_RULE, SPLIT_RULE, load_node_data, parse_node_data

    spec = "dataset=synthetic-hurricane,nodes=2,node=1,psi=0.5,per_node=20,size=200,seed=1"  # S + K = 2, node_seed 1001
    expected = {rule: load_node_data(parse_node_data(spec), rule=rule) for rule in (LEGACY_SPLIT_RULE, SPLIT_RULE)}
    assert not torch.equal(expected[LEGACY_SPLIT_RULE].test.images, expected[SPLIT_RULE].test.images)
    for name, recorded in (("old", None), ("new", SPLIT_RULE), ("unknown", "node_seed_v2")):
        node = Node(tmp_path, name, [])
        cfg = node.on_board_config({"auto_send": False}, {"rounds": 1})
        if recorded is not None:
            loaded = load_model(cfg.model)
            save_model(cfg.model, loaded.model, replace(loaded.card, extra={"split_seed": recorded}))
        cfg.data = spec
        if name == "unknown":
            with pytest.raises(ConfigError) as err:
                Agent(cfg, load_fol=False)
            assert str(err.value) == (f"unknown.toml: node.model: {cfg.model}: model card extra.split_seed is "
                                      f"'node_seed_v2'; this toolkit splits a node's data by 'node_seed' or "
                                      f"'seed+node' (a model made by a newer toolkit?); use that toolkit, or a "
                                      f"model whose card records one of these")
            continue
        agent = Agent(cfg, load_fol=False)
        try:
            data = agent._load_node_data()
            want = expected[LEGACY_SPLIT_RULE if recorded is None else recorded]
            assert all(torch.equal(getattr(data, s).images, getattr(want, s).images) for s in ("train", "val", "test"))
        finally:
            agent.stop()


def test_an_unknown_split_rule_in_the_state_folder_is_refused_at_start_up(tmp_path: Path, capsys) -> None:
    """The agent read its round-0 model's split rule in two places: at start-up, when it loaded the data
    (a config error line), and in the round's lazy load when it had not (all rounds done): such a start
    went on, and an unknown rule would have surfaced as a CheckpointError in a round's log. One reading at
    every start now (a card's header): a state folder whose round-0 model records a rule this toolkit does
    not know is refused in one line, rounds left or not, and 'fol agent' exits with status 2."""
    import json

    import torch

    from fol.agent.loopback import toml_text
    from fol.checkpoint import load_model
    from fol.cli import main
    from fol.errors import ConfigError
    from fol.nodedata import LEGACY_SPLIT_RULE, load_node_data, parse_node_data

    node = Node(tmp_path, "receiver", [])
    cfg = node.on_board_config({"auto_send": False}, {"rounds": 1})
    Agent(cfg, load_fol=False).stop()  # a first start: the model adopted as the state folder's round 0
    state = node.folder / "state"
    doc = json.loads((state / "state.json").read_text())
    local = state / doc["local_model"]
    loaded = load_model(local)
    config = tmp_path / "receiver.toml"
    config.write_text(toml_text({
        "node": {"id": "receiver", "listen": "tcp://127.0.0.1:*", "secret_key": str(node.sec),
                 "trust_dir": str(node.trust_dir), "state_dir": str(state), "model": str(cfg.model), "data": cfg.data},
        "limits": node.limits, "trigger": {"auto_send": False}, "fol": {"rounds": 1}}))
    line = (f"node.model: {local}: model card extra.split_seed is 'node_seed_v2'; this toolkit splits a node's "
            f"data by 'node_seed' or 'seed+node' (a model made by a newer toolkit?); use that toolkit, or a model "
            f"whose card records one of these")
    for finished in (False, True):  # a round left: the data is loaded at start-up; all done: it is not
        save_model(local, loaded.model, replace(loaded.card, extra={"split_seed": "node_seed_v2"}))
        (state / "state.json").write_text(json.dumps({**doc, "finished": finished}))
        with pytest.raises(ConfigError) as err:
            Agent(cfg, load_fol=False)
        assert str(err.value) == f"receiver.toml: {line}", finished
        assert main(["agent", "--config", str(config)]) == 2
        assert capsys.readouterr().err.splitlines() == [f"fol agent: error: {config}: {line}"], finished
        # a rule this toolkit knows: all rounds done, the start reads it and loads no data; a later load splits by it
        save_model(local, loaded.model, replace(loaded.card, extra={}))  # no rule recorded: the legacy one
        agent = Agent(cfg, load_fol=False)
        try:
            assert agent._split_rule == LEGACY_SPLIT_RULE and (agent._node_data is None) == finished
            want = load_node_data(parse_node_data(cfg.data), rule=LEGACY_SPLIT_RULE)
            assert all(torch.equal(getattr(agent._load_node_data(), s).images, getattr(want, s).images)
                       for s in ("train", "val", "test"))
        finally:
            agent.stop()


def test_good_node_data_is_loaded_once_at_start_up(tmp_path: Path, monkeypatch) -> None:
    import fol.nodedata

    loads: list[Any] = []
    real = fol.nodedata.load_node_data
    monkeypatch.setattr(fol.nodedata, "load_node_data", lambda *a, **k: loads.append(a) or real(*a, **k))
    node = Node(tmp_path, "receiver", [])
    cfg = node.on_board_config({"auto_send": False}, {"rounds": 1})
    cfg.model, cfg.data = node.model, str(_image_folder(tmp_path / "data", {"damage": 12, "no_damage": 12}))
    agent = Agent(cfg, load_fol=False)
    try:
        assert len(loads) == 1
        assert agent._load_node_data().train.class_names == CLASSES and len(loads) == 1  # kept for the first round
    finally:
        agent.stop()
    agent = Agent(cfg, load_fol=False)  # a restart resumes from the state folder and loads the data once again
    try:
        assert len(loads) == 2 and agent._load_node_data().train.class_names == CLASSES and len(loads) == 2
    finally:
        agent.stop()


def test_a_freeze_count_past_the_nodes_own_model_is_refused_at_start(tmp_path: Path, capsys) -> None:
    """fol.finetune_freeze was checked only against received models: an agent whose own model (a cnn,
    4 convolution / linear layers) has fewer layers than the count started, and skipped every neighbour of
    its architecture round after round (its peers, with the same [fol] table, skipped its model). It is
    refused at start now, on a first start and on a restart from the state folder, in the line fol simulate
    --check gives, naming the config file; 'fol agent' exits with status 2 and the state folder is untouched."""
    from fol.agent.loopback import toml_text
    from fol.cli import main
    from fol.errors import ConfigError

    node = Node(tmp_path, "receiver", [])
    line = ("fol.finetune_freeze must be at most 4 (the convolution / linear layers of the node's model, "
            "a cnn), got 5")
    cfg = node.on_board_config({"auto_send": False}, {"rounds": 1, "finetune_freeze": 5})
    state = node.folder / "state"
    with pytest.raises(ConfigError) as err:
        Agent(cfg)
    assert str(err.value) == f"receiver.toml: {line}"
    assert not (state / "state.json").exists()  # refused before the model was adopted
    config = tmp_path / "receiver.toml"
    config.write_text(toml_text({
        "node": {"id": "receiver", "listen": "tcp://127.0.0.1:*", "secret_key": str(node.sec),
                 "trust_dir": str(node.trust_dir), "state_dir": str(state), "model": str(cfg.model), "data": cfg.data},
        "limits": node.limits, "trigger": {"auto_send": False}, "fol": {"rounds": 1, "finetune_freeze": 5}}))
    assert main(["agent", "--config", str(config)]) == 2
    assert capsys.readouterr().err.splitlines() == [f"fol agent: error: {config}: {line}"]
    cfg.fol["finetune_freeze"] = 4  # every layer of the model: accepted
    Agent(cfg).stop()
    assert (state / "state.json").exists()
    cfg.fol["finetune_freeze"] = 5  # a restart reads the model's card from the state folder
    with pytest.raises(ConfigError) as err:
        Agent(cfg)
    assert str(err.value) == f"receiver.toml: {line}"
    cfg.variant = "local"  # uses no neighbour model: the count means nothing
    Agent(cfg).stop()
    exchanging = Node(tmp_path / "x", "exchanger", [])  # trigger.on_board = false: no FOL here, nothing checked
    Agent(dataclasses.replace(exchanging.config(), fol={"rounds": 1, "finetune_freeze": 5})).stop()
    # both pages say when the check runs (they said it ran on every start)
    for page in ("fol-options.md", "fol-algorithm.md"):
        text = " ".join((Path(__file__).resolve().parents[1] / "docs" / page).read_text().split())
        assert "on_board = true" in text and 'other than `"local"`' in text, page


def test_the_retry_back_off_stays_at_its_cap_after_many_failures(tmp_path: Path) -> None:
    """round_retry_s * 2 ** (failures - 1) overflowed a float at the 1,025th failed attempt (about three
    weeks of retries 30 min apart): the error left the next attempt due at once, at every turn of the loop."""
    import concurrent.futures

    node = Node(tmp_path, "receiver", [], round_retry_s=30.0, round_retry_max_s=1800.0)
    agent = Agent(node.config(), load_fol=False)
    try:
        for failures in (3, 1100):
            job: concurrent.futures.Future = concurrent.futures.Future()
            job.set_exception(OSError(28, "No space left on device"))
            agent._job, agent._job_info, agent.failed_attempts = job, {"round": 1}, failures
            agent._check_job()
            assert agent.failed_attempts == failures + 1 and "No space left" in agent.last_error
            delay = agent._retry_at - time.monotonic()
            assert (240 - 1 < delay <= 240) if failures == 3 else (1800 - 1 < delay <= 1800), delay  # 30 s * 2 ** 3
    finally:
        agent.stop()


def test_node_data_other_than_the_pretraining_split_is_refused_at_start_up(tmp_path: Path) -> None:
    """'fol personalize' refuses data whose split differs from the one the model was pretrained on (its
    validation and test images could be training ones); the agent took any node.data."""
    from fol.errors import ConfigError

    node = Node(tmp_path, "receiver", [])
    cfg = node.on_board_config({"auto_send": False}, {"rounds": 1})
    spec = ModelSpec("cnn", num_classes=2, options={"widths": [16, 32], "hidden": 64})
    pretrained = tmp_path / "pretrained.safetensors"
    save_model(pretrained, build_model(spec, seed=0), spec=spec, class_names=HURRICANE_CLASSES, producer="receiver",
               extra={"data": cfg.data.replace("node=0", "node=1")})
    cfg.model = pretrained
    with pytest.raises(ConfigError, match=r"^receiver\.toml: node\.data: the model .* was pretrained on --data "
                                          r"dataset=synthetic-hurricane,nodes=2,node=1,.* another shard or split"):
        Agent(cfg, load_fol=False)
    save_model(pretrained, build_model(spec, seed=0), spec=spec, class_names=HURRICANE_CLASSES, producer="receiver",
               extra={"data": cfg.data})
    # the refused start adopted nothing: the same state folder starts with the model pretrained on this spec
    # (it kept the refused model as the node's round 0, and every later start was refused for it)
    agent = Agent(cfg, load_fol=False)
    try:
        from fol.checkpoint import read_card

        assert read_card(agent.inbox.path(agent.inbox.state.local_model)).extra["data"] == cfg.data
    finally:
        agent.stop()


@pytest.mark.parametrize("taken_field", ["listen", "control", "position"])
def test_a_start_refused_for_a_port_in_use_adopts_no_round_0_model(tmp_path: Path, capsys, taken_field: str) -> None:
    """The model was adopted into the state folder (round 0, state.json) before the sockets were bound and
    the position source opened: a start refused for a port in use left a state behind, and the next start
    took the node for one that had started already (a model file replaced meanwhile was never read). The
    position source's line did not name the config file."""
    import socket

    from fol.agent.loopback import toml_text
    from fol.cli import main

    node = Node(tmp_path, "receiver", [])
    state = node.folder / "state"
    kind = socket.SOCK_DGRAM if taken_field == "position" else socket.SOCK_STREAM
    with socket.socket(socket.AF_INET, kind) as taken:
        taken.bind(("127.0.0.1", 0))
        port = taken.getsockname()[1]
        config: dict[str, Any] = {
            "node": {"id": "receiver", "listen": "tcp://127.0.0.1:*", "secret_key": str(node.sec),
                     "trust_dir": str(node.trust_dir), "state_dir": str(state), "model": str(node.model)},
            "trigger": {"on_board": False, "auto_send": False}}
        if taken_field == "position":
            pytest.importorskip("pymavlink")
            config["position"] = {"source": "mavlink", "connection": f"udpin:127.0.0.1:{port}"}
            expected = rf"position.connection: cannot open 'udpin:127.0.0.1:{port}' \(.*Address already in use\)"
        else:
            taken.listen()
            config["node"][taken_field] = f"tcp://127.0.0.1:{port}"
            expected = rf"node.{taken_field}: cannot bind tcp://127.0.0.1:{port} \(Address already in use\)"
        toml = tmp_path / "receiver.toml"
        toml.write_text(toml_text(config))
        assert main(["agent", "--config", str(toml)]) == 2
    err = capsys.readouterr().err.strip()
    assert re.fullmatch(f"fol agent: error: {re.escape(str(toml))}: {expected}", err), err
    assert sorted(p.relative_to(state).as_posix() for p in state.rglob("*") if p.is_file()) == ["agent.lock"]


def test_a_round_whose_state_write_fails_is_taken_back_and_retried(tmp_path: Path) -> None:
    """The round's commit point (the state write) failing on a full disk left the state in memory one round
    ahead of the disk: status said the round was done, its model was never offered, and no retry came."""
    import concurrent.futures
    import errno
    import shutil

    node = Node(tmp_path, "receiver", [])
    agent = Agent(node.config(), load_fol=False)
    try:
        state = agent.inbox.state
        before = json.loads(json.dumps(state.to_dict()))
        shutil.copy(agent.inbox.path(state.current_model), agent.inbox.root / "models" / "round-1.safetensors")
        job: concurrent.futures.Future = concurrent.futures.Future()
        job.set_result({"round": 1, "model": "models/round-1.safetensors"})
        agent._job_info, agent._job = {"round": 1}, job

        def full_disk() -> None:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), "state.json")

        agent.inbox.save = full_disk  # type: ignore[method-assign]
        agent._guarded(agent._check_job)  # as the poll loop runs it
        assert json.loads(json.dumps(state.to_dict())) == before  # as on disk: round 1 still to be done
        assert agent.failed_attempts == 1 and agent._retry_at > time.monotonic()
        assert agent.last_error is not None and "round 1 could not be recorded (attempt 1)" in agent.last_error
        assert "No space left on device" in agent.last_error
    finally:
        agent.stop()


def test_ctrl_c_before_the_loop_runs_releases_the_agent_and_its_runtime_file(tmp_path: Path, monkeypatch,
                                                                              capsys) -> None:
    """A Ctrl-C between the agent's start-up and its signal handlers left agent.json naming a dead agent and
    its sockets, ZAP thread and state folder lock unreleased until the process ended."""
    from fol.agent import cli as agent_cli
    from fol.agent.loopback import toml_text
    from fol.cli import main

    node = Node(tmp_path, "receiver", [])
    toml = tmp_path / "receiver.toml"
    toml.write_text(toml_text({
        "node": {"id": "receiver", "listen": "tcp://127.0.0.1:*", "secret_key": str(node.sec),
                 "trust_dir": str(node.trust_dir), "state_dir": str(node.folder / "state"), "model": str(node.model)},
        "trigger": {"on_board": False, "auto_send": False}}))
    threads = set(threading.enumerate())

    def interrupted(*args: Any) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(agent_cli.signal, "signal", interrupted)
    assert main(["agent", "--config", str(toml)]) == 130
    assert capsys.readouterr().err.strip() == "fol agent: interrupted"
    assert not (node.folder / "state" / "agent.json").exists()
    assert set(threading.enumerate()) <= threads  # the ZAP authenticator thread was stopped
    monkeypatch.undo()
    node.start()  # the state folder lock was released
    node.stop()


def _block_rounds(monkeypatch: pytest.MonkeyPatch, node_module: Any, started: threading.Event,
                  release: threading.Event, wait_s: float, message: str) -> None:
    """Every personalization sets ``started``, waits for ``release`` (at most ``wait_s``), then fails
    with ``OSError(message)``."""
    def long_round(self: Any, info: dict[str, Any], records: list[dict[str, Any]]) -> dict[str, Any]:
        started.set()
        release.wait(wait_s)
        raise OSError(message)

    monkeypatch.setattr(node_module.Agent, "_personalize_job", long_round)


def test_a_second_ctrl_c_abandons_a_running_personalization_at_once(tmp_path: Path, monkeypatch, capsys) -> None:
    """The first Ctrl-C lets a running round finish; a second one was ignored, so 'fol agent' could not be
    stopped before a round of on-board training ended. Now it stops at once: sockets and agent.json released,
    state.json untouched (the round runs again), the state folder locked until the abandoned worker ends."""
    import fcntl
    import signal

    import fol.agent.node as node_module
    from fol.agent import cli as agent_cli
    from fol.agent.loopback import toml_text
    from fol.agent.node import control_request
    from fol.cli import main
    from fol.errors import ConfigError

    node = Node(tmp_path, "receiver", [])
    cfg = node.on_board_config({"auto_send": False, "deadline_s": 0.05}, {"rounds": 1})
    state = node.folder / "state"
    toml = tmp_path / "receiver.toml"
    toml.write_text(toml_text({
        "node": {"id": "receiver", "listen": "tcp://127.0.0.1:*", "secret_key": str(node.sec),
                 "trust_dir": str(node.trust_dir), "state_dir": str(state), "model": str(cfg.model),
                 "data": cfg.data},
        "trigger": {"auto_send": False, "deadline_s": 0.05}, "fol": {"rounds": 1}}))
    started, release = threading.Event(), threading.Event()

    _block_rounds(monkeypatch, node_module, started, release, 30, "the abandoned round went on")
    def exit_now(status: int) -> None:  # os._exit would end pytest
        raise SystemExit(status)

    monkeypatch.setattr(agent_cli, "_exit_now", exit_now)
    seen: dict[str, Any] = {}

    def runtime() -> str:
        try:
            return (state / "agent.json").read_text()
        except OSError:
            return ""

    def operator() -> None:
        try:
            if started.wait(10):
                seen["state"] = (state / "state.json").read_bytes()
                os.kill(os.getpid(), signal.SIGINT)
                deadline = time.monotonic() + 5.0
                while "stopping" not in runtime() and time.monotonic() < deadline:
                    time.sleep(0.02)
                seen["waiting"] = "stopping" in runtime()  # the first Ctrl-C waits for the round
                try:
                    control_request(AgentConfig.from_toml(toml), "status", timeout_s=0.2)
                except ConfigError as exc:
                    seen["ctl"] = str(exc)
                seen["second"] = time.monotonic()
                os.kill(os.getpid(), signal.SIGINT)
        finally:
            if not release.wait(10):  # the test fails instead of hanging
                release.set()

    helper = threading.Thread(target=operator, daemon=True)
    helper.start()
    try:
        with pytest.raises(SystemExit) as ended:
            main(["agent", "--config", str(toml)])
        took = time.monotonic() - seen["second"]
        assert ended.value.code == 130 and took < 2.0, took
        assert seen["waiting"]
        assert "agent receiver (pid" in seen.get("ctl", "") and "is stopping: it waits for its running personalization" \
            in seen["ctl"], seen.get("ctl")
        assert "round 1 abandoned" in capsys.readouterr().err
        before, after = (json.loads(text) for text in (seen["state"], (state / "state.json").read_bytes()))
        for clock in ("round_age_s", "round_age_at"):  # the stop saves the round's age so far, nothing else
            before.pop(clock), after.pop(clock)
        assert after == before and after["round"] == 1 and after["history"] == []  # no half-recorded round
        assert not (state / "agent.json").exists()
        fd = os.open(state / "agent.lock", os.O_RDWR)
        try:
            with pytest.raises(BlockingIOError):  # the abandoned worker may still write the round's files
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            release.set()
            _wait(lambda: _lock_free(fd), timeout=5.0, what="the state folder lock")
        finally:
            os.close(fd)
    finally:
        release.set()
        helper.join(15)


def _lock_free(fd: int) -> bool:
    import fcntl

    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    fcntl.flock(fd, fcntl.LOCK_UN)
    return True


def test_a_disk_that_fills_mid_transfer_frees_the_slot_and_the_transfer_resumes_later(pair, monkeypatch) -> None:
    """An fsync of a transfer failing (a full disk) raised out of the receiver: the transfer kept its slot for
    ever, fetched nothing more, and the stall check raised again at every turn of the loop (20 tracebacks a
    second). Now it is dropped (resumable from its last confirmed offset) and the sender is told BUSY."""
    import errno

    receiver, s_keys, _ = pair
    data, card = _good_payload()
    offer = _offer(data, card.spec)
    real_fsync = os.fsync

    def full_disk(fd: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", full_disk)
    failed = _send(receiver, data, offer, s_keys, timeout_s=1.0, offer_retry_s=0.2)
    assert failed.status != "delivered" and failed.busy_replies >= 1
    status = receiver.agent.request("status")
    assert status["incoming"] == [] and receiver.inbox_files == []
    assert any(e["outcome"] == "failed" and "No space left on device" in e["detail"] for e in status["events"])
    monkeypatch.setattr(os, "fsync", real_fsync)  # room again: the same model arrives
    assert _send(receiver, data, offer, s_keys).status == "delivered"
    assert receiver.agent.request("status")["inbox"] == 1


def test_a_runtime_file_that_cannot_be_removed_at_stop_still_releases_the_state_folder(tmp_path: Path) -> None:
    """Removing agent.json at the stop failing (a disk remounted read-only) ended the shutdown there: the
    state folder lock stayed held, and this process could not start the node again."""
    node = Node(tmp_path, "receiver", [])
    agent = node.start()
    runtime = node.folder / "state" / "agent.json"
    runtime.unlink()
    (runtime / "blocked").mkdir(parents=True)  # unlink() of it fails with an OSError, as on a read-only disk
    node.stop()
    assert agent.closed and not agent.running
    (runtime / "blocked").rmdir()
    runtime.rmdir()
    node.start()  # the state folder lock was released
    node.stop()


def test_a_model_file_that_is_not_a_model_is_one_line_naming_node_model(tmp_path: Path) -> None:
    """The line read '<file> [node] model: ...', unlike every other field's '<file>: node.<field>: ...'."""
    from fol.errors import ConfigError

    node = Node(tmp_path, "receiver", [])
    node.model.write_bytes(b"\xff" * 64)
    with pytest.raises(ConfigError, match=rf"^receiver.toml: node.model: {re.escape(str(node.model))}: "):
        Agent(node.config(), load_fol=False)
    assert not (node.folder / "state" / "state.json").exists()


def test_an_abandoned_round_publishes_nothing_after_the_stop_returned(tmp_path: Path, monkeypatch) -> None:
    """In library mode (the process goes on after Agent.stop(abandon=True)) the abandoned worker still wrote
    models/round-N.safetensors and reports/round-N.json once its training ended, after the stop had returned
    and said the round was abandoned. Now it drops its outputs (temporaries removed) and publishes nothing."""
    import types

    import fol.personalize

    node = Node(tmp_path, "receiver", [])
    state = node.folder / "state"
    agent = Agent(node.on_board_config({"auto_send": False, "deadline_s": 0.05}, {"rounds": 1}))
    started, release, trained = threading.Event(), threading.Event(), threading.Event()

    def long_round(node_state: Any, received: Any, round_: int, cfg: Any, variant: str) -> Any:
        started.set()
        release.wait(10)
        trained.set()
        return types.SimpleNamespace(kept_local=True, accuracy={}, received=[],
                                     to_dict=lambda: {"round": round_, "kept_local": True})

    monkeypatch.setattr(fol.personalize, "personalize", long_round)
    before = sorted(p.relative_to(state) for p in state.rglob("*") if p.name not in ("agent.json", "state.json"))
    agent.start()
    fd = os.open(state / "agent.lock", os.O_RDWR)
    try:
        assert started.wait(10)
        agent.stop(abandon=True)
        assert not agent.running and agent.abandoned_round == 1
        release.set()
        assert trained.wait(10)
        _wait(lambda: _lock_free(fd), timeout=10.0, what="the abandoned worker's end")
        after = sorted(p.relative_to(state) for p in state.rglob("*") if p.name not in ("agent.json", "state.json"))
        assert after == before  # no round file, no report, no temporary file
        assert json.loads((state / "state.json").read_text())["round"] == 1
    finally:
        release.set()
        os.close(fd)


def test_a_refused_round_deletes_nothing_of_its_pool_folder(tmp_path: Path) -> None:
    """save_pool_round emptied an existing models/pool/round-<e>/ (an earlier attempt's) with a plain rmtree,
    outside the publish gate: a stop(abandon=True) that returned between the worker's last check and that call
    still had the folder deleted after it. Now the removal passes the gate: a refused round removes nothing."""
    from fol.fileio import publish_gate
    from fol.personalize import save_pool_round

    kept = tmp_path / "pool" / "round-1" / "candidate-0.safetensors"
    kept.parent.mkdir(parents=True)
    kept.write_bytes(b"an earlier attempt's candidate")

    def refuse() -> Any:
        raise RuntimeError("abandoned")

    with publish_gate(refuse), pytest.raises(RuntimeError, match="abandoned"):
        save_pool_round(tmp_path / "pool", None, 1, [])  # type: ignore[arg-type]  (refused before it is read)
    assert kept.read_bytes() == b"an earlier attempt's candidate"


def test_a_refused_round_keeps_the_old_ensemble_members(tmp_path: Path) -> None:
    """save_ensemble removed the members ensemble.json no longer lists with a plain unlink: a stop(abandon=True)
    returning after the new ensemble.json was renamed into place still had the old members deleted after it.
    Now the removals pass the publish gate: once it refuses, nothing more is removed."""
    import contextlib
    import types

    import torch

    from fol.ensemble import WeightedEnsemble
    from fol.fileio import publish_gate
    from fol.models import ModelSpec, build_model
    from fol.personalize import save_ensemble

    folder = tmp_path / "round-1-ensemble"
    folder.mkdir()
    old_json = '{"members": [{"file": "member-0-00000000.safetensors"}]}'
    (folder / "ensemble.json").write_text(old_json)
    old_member = folder / "member-0-00000000.safetensors"
    old_member.write_bytes(b"an earlier attempt's member")
    spec = ModelSpec("cnn-small", num_classes=2, in_channels=3, input_size=16)
    model = build_model(spec, seed=0)
    state = types.SimpleNamespace(deployed=WeightedEnsemble([model, model]), pool=[], spec=spec, name="n",
                                  class_names=["a", "b"],
                                  data=types.SimpleNamespace(train=types.SimpleNamespace(images=torch.zeros(1, 3, 16, 16))))
    report = types.SimpleNamespace(round=1, selected=["p", "q"], variant="fol-a")

    @contextlib.contextmanager
    def stopped_once_published() -> Any:  # the stop comes right after ensemble.json was renamed into place
        if (folder / "ensemble.json").read_text() != old_json:
            raise RuntimeError("abandoned")
        yield

    with publish_gate(stopped_once_published), pytest.raises(RuntimeError, match="abandoned"):
        save_ensemble(folder, state, report, [])  # type: ignore[arg-type]
    assert old_member.read_bytes() == b"an earlier attempt's member"


def test_start_up_removes_the_writers_temporaries_and_an_unrecorded_rounds_ensemble(tmp_path: Path) -> None:
    """Only models/ and the inbox were cleaned at start-up: a round killed or abandoned mid-write left the
    crash-safe writer's temporary files in reports/ and models/round-<e>-ensemble/, and the ensemble folder
    of a round state.json does not record. Now they go; files of other names (a user's) stay."""
    node = Node(tmp_path, "receiver", [])
    Agent(node.config(), load_fol=False).stop()  # the state folder of a node collecting round 1
    state = node.folder / "state"
    stray = {"reports/.round-1.json.0123456789ab.tmp", "models/.round-1.safetensors.a1b2c3d4e5f6.tmp",
             "models/round-1-ensemble/.ensemble.json.00ff00ff00ff.tmp", "models/round-1-ensemble/ensemble.json",
             "models/round-1-ensemble/member-0-0a1b2c3d.safetensors",
             "models/round-2-ensemble/member-1-0a1b2c3d.safetensors", "models/pool/round-1/.c.safetensors.abcdefabcdef.tmp"}
    users = {"reports/.notes.tmp", "reports/notes.tmp", "reports/.round-1.json.XYZ.tmp", "models/round-2-ensemble/mine.txt",
             "models/round-0-ensemble/ensemble.json"}  # round 0 is recorded: not an unrecorded round's folder
    for name in stray | users:
        (state / name).parent.mkdir(parents=True, exist_ok=True)
        (state / name).write_bytes(b"x")
    Agent(node.config(), load_fol=False).stop()
    left = {str(p.relative_to(state)) for p in state.rglob("*") if p.is_file()}
    assert users <= left and not stray & left, sorted(stray & left)
    assert not (state / "models" / "round-1-ensemble").exists()


def test_start_up_removes_an_unrecorded_rounds_model_and_report(tmp_path: Path, caplog) -> None:
    """A round killed after models/round-<e>.safetensors (and reports/round-<e>.json) were written but before
    state.json recorded it left a complete model and report of a round the node never committed, beside the
    real ones until the round ran again. Start-up now removes them, one log line each; the recorded round-0
    model and files of other names stay."""
    import logging

    node = Node(tmp_path, "receiver", [])
    Agent(node.config(), load_fol=False).stop()  # the state folder of a node collecting round 1
    state = node.folder / "state"
    recorded = json.loads((state / "state.json").read_text())["current_model"]
    assert recorded == "models/round-0.safetensors"
    stray = {"models/round-1.safetensors", "reports/round-1.json", "models/round-2.safetensors"}
    users = {"models/round-1.safetensors.bak", "models/mine.safetensors", "reports/round-1.txt", recorded}
    for name in stray | users - {recorded}:
        (state / name).write_bytes(b"x")
    with caplog.at_level(logging.WARNING, logger="fol.agent.inbox"):
        Agent(node.config(), load_fol=False).stop()
    left = {str(p.relative_to(state)) for p in state.rglob("*") if p.is_file()}
    assert users <= left and not stray & left, sorted(stray & left)
    lines = [r.getMessage() for r in caplog.records if "recovery" in r.getMessage()]
    assert all(sum(name in line for line in lines) == 1 for name in stray), lines


def test_start_up_removes_the_candidates_an_unrecorded_round_kept(tmp_path: Path, caplog) -> None:
    """keep_received = "all": a round killed after models/pool/round-<e>/ was written, before state.json
    recorded the round, left that round's candidates until the round ran again (and for ever if the node
    then stopped keeping them). Start-up now removes them and the emptied folder, one log line each; a
    recorded round's candidates and files of other names stay."""
    import logging

    node = Node(tmp_path, "receiver", [])
    Agent(node.config(), load_fol=False).stop()  # the state folder of a node collecting round 1
    state = node.folder / "state"
    stray = {"models/pool/round-1/candidate-0.safetensors", "models/pool/round-1/candidate-1.safetensors",
             "models/pool/round-2/candidate-0.safetensors"}
    users = {"models/pool/round-2/notes.txt", "models/pool/round-0/candidate-0.safetensors"}
    for name in stray | users:
        (state / name).parent.mkdir(parents=True, exist_ok=True)
        (state / name).write_bytes(b"x")
    with caplog.at_level(logging.WARNING, logger="fol.agent.inbox"):
        Agent(node.config(), load_fol=False).stop()
    left = {str(p.relative_to(state)) for p in state.rglob("*") if p.is_file()}
    assert users <= left and not stray & left, sorted(stray & left)
    assert not (state / "models" / "pool" / "round-1").exists()
    lines = [r.getMessage() for r in caplog.records if "recovery" in r.getMessage()]
    assert sum("models/pool/round-1 of an unrecorded round" in line for line in lines) == 1, lines
    assert sum("kept candidates of unrecorded models/pool/round-2; kept its 1 other" in line for line in lines) == 1


def test_a_sub_second_retry_delay_is_logged_and_shown_as_it_is(tmp_path: Path, caplog) -> None:
    """'retrying in %.0f s' printed a 0.25 s back-off as 'retrying in 0 s' (and ctl status 'retry in 0 s')."""
    import concurrent.futures
    import logging

    from fol.agent.cli import format_status

    node = Node(tmp_path, "receiver", [], round_retry_s=0.25, round_retry_max_s=5.0)
    agent = Agent(node.config(), load_fol=False)
    try:
        job: concurrent.futures.Future = concurrent.futures.Future()
        job.set_exception(OSError(28, "No space left on device", "models/round-1.safetensors"))
        agent._job, agent._job_info = job, {"round": 1}
        with caplog.at_level(logging.ERROR, logger="fol.agent.node"):
            agent._check_job()
        (line,) = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
        assert line.endswith("; retrying in 0.25 s"), line
        status = {**agent.status(), "retry_in_s": 0.25}
        assert format_status(status).endswith("(automatic retry in 0.25 s)")
    finally:
        agent.stop()


def test_a_stop_waiting_for_a_round_has_told_systemd_it_is_stopping(tmp_path: Path, monkeypatch) -> None:
    """Under WatchdogSec= the poll loop pings WATCHDOG=1; a stop waiting for a long round no longer runs the loop.
    systemd disarms the watchdog once told STOPPING=1 (TimeoutStopSec= bounds the stop instead), so that
    message must come before the wait, or the watchdog could kill the agent mid-write."""
    import socket

    import fol.agent.node as node_module

    path = str(tmp_path / "notify.sock")
    started, release = threading.Event(), threading.Event()

    _block_rounds(monkeypatch, node_module, started, release, 10, "the round ended")
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as server:
        server.bind(path)
        server.settimeout(5)
        monkeypatch.setenv("NOTIFY_SOCKET", path)
        monkeypatch.setenv("WATCHDOG_USEC", "200000")
        monkeypatch.delenv("WATCHDOG_PID", raising=False)
        node = Node(tmp_path, "receiver", [])
        agent = Agent(node.on_board_config({"auto_send": False, "deadline_s": 0.05}, {"rounds": 1}))
        agent.start()
        stopper = threading.Thread(target=agent.stop, kwargs={"timeout": 10.0}, daemon=True)
        try:
            assert started.wait(10)
            stopper.start()
            seen = []
            while b"STOPPING=1" not in seen:
                seen.append(server.recv(64))
            assert not release.is_set() and stopper.is_alive()  # told while the stop still waits for the round
            assert seen[0] == b"READY=1" and b"WATCHDOG=1" in seen
        finally:
            release.set()
            if stopper.ident is not None:
                stopper.join(10)
            agent.stop(10)
    assert not agent.running


def test_start_up_removes_the_state_writes_temporary_files(tmp_path: Path) -> None:
    """A kill while state.json or agent.json was being written left the crash-safe writer's temporary file in
    the state folder itself, which no start-up removed: one more state-sized file for every such crash. Start-up
    now removes them with the others; files of other names (a user's) stay."""
    node = Node(tmp_path, "receiver", [])
    Agent(node.config(), load_fol=False).stop()  # the state folder of a node collecting round 1
    state = node.folder / "state"
    stray = {".state.json.0123456789ab.tmp", ".agent.json.abcdefabcdef.tmp"}
    users = {".notes.tmp", "state.json.bak", ".state.json.XYZ.tmp"}
    for name in stray | users:
        (state / name).write_bytes(b'{"format": "fol-agent-st')  # cut off mid-write
    Agent(node.config(), load_fol=False).stop()
    left = {p.name for p in state.iterdir()}
    assert users <= left and not stray & left and "state.json" in left


def test_only_an_on_board_inbox_skips_rounds_by_number(tmp_path: Path) -> None:
    """docs/security.md, payloads item 6: an exchange-only node (``[trigger] on_board = false``) keeps a
    model of every round, older ones included; a node that personalizes on board skips a round older than
    the one it collects, one after its last, and every round once its rounds are done."""
    from fol.agent.inbox import Inbox

    spec = ModelSpec("cnn-small", num_classes=2)
    offer = lambda r: replace(_offer(b"x", spec, mid=f"m{r}"), round=r)  # noqa: E731
    exchange = Inbox(tmp_path / "exchange", "receiver", 10**8, accept_any_round=True)
    on_board = Inbox(tmp_path / "on-board", "receiver", 10**8)
    for inbox in (exchange, on_board):
        inbox.state.round, inbox.last_round = 3, 4  # collecting card-round 2 models; rounds up to 4 used
    assert [exchange.admit("sender", offer(r))[0] for r in (0, 2, 50)] == ["accept"] * 3
    assert [on_board.admit("sender", offer(r))[0] for r in (0, 2, 4, 5)] == ["skip", "accept", "accept", "skip"]
    on_board.state.finished = exchange.state.finished = True
    assert (on_board.admit("sender", offer(2))[0], exchange.admit("sender", offer(2))[0]) == ("skip", "accept")


def test_a_malformed_message_gets_error_and_an_invalid_offer_gets_reject(tmp_path: Path) -> None:
    """docs/security.md, messages: a message breaking the frame layout or the header bounds is answered
    with ERROR; an OFFER whose fields are invalid (a round over MAX_ROUND, a spec over its bounds) with
    REJECT; neither starts a transfer."""
    from fol.agent import protocol as P
    from fol.agent.inbox import Inbox
    from fol.agent.transfer import Receiver, ReceiverSettings

    sock = _RecordingSocket()
    receiver = Receiver(sock, Inbox(tmp_path / "state", "receiver", 10**8, accept_any_round=True),  # type: ignore[arg-type]
                        ReceiverSettings(), trust=None)
    data, card = _good_payload()
    good = _offer(data, card.spec).to_header()
    for body, answer in [([P.PROTOCOL, P.OFFER, b'{"a": ' * 9 + b"1" + b"}" * 9], P.ERROR),
                         ([P.PROTOCOL, P.OFFER, b" " * (P.MAX_HEADER_BYTES + 1)], P.ERROR),
                         ([b"FOL/2", P.OFFER, b"{}"], P.ERROR),
                         (P.encode(P.OFFER, {**good, "round": P.MAX_ROUND + 1}), P.REJECT),
                         (P.encode(P.OFFER, {**good, "spec": {"options": {"widths": list(range(300))}}}), P.REJECT)]:
        receiver.handle([b"peer", *body], time.monotonic())
        identity, _, kind, header = sock.sent.pop()
        assert (identity, kind) == (b"peer", answer), (body[:2], kind, header[:200])
    assert not sock.sent and not receiver.active


def test_a_peer_flooding_a_busy_receiver_has_only_its_credits_queued(tmp_path: Path) -> None:
    """docs/security.md, messages: while the receiver's loop is busy and reads nothing, one connection
    holds at most the CHUNKs its FETCH credits ask for plus a few messages; ZeroMQ then stops reading it
    (its default let 1,000 messages of up to chunk_bytes each wait per connection)."""
    from fol.agent import protocol as P
    from fol.agent.transfer import QUEUE_SLACK_MESSAGES, Receiver, ReceiverSettings

    settings = ReceiverSettings(chunk_bytes=16 * 1024, window_chunks=2, max_concurrent_transfers=1)
    ctx = zmq.Context()
    router = ctx.socket(zmq.ROUTER)
    dealer = ctx.socket(zmq.DEALER)
    try:
        Receiver.configure(router, settings)
        router.rcvbuf = dealer.sndbuf = 16 * 1024  # small kernel buffers: what is counted is ZeroMQ's queue
        port = router.bind_to_random_port("tcp://127.0.0.1")
        dealer.linger, dealer.sndhwm = 0, 1
        dealer.connect(f"tcp://127.0.0.1:{port}")
        chunk = P.encode(P.CHUNK, {"sender": "s", "model_id": "m", "offset": 0}, bytes(settings.chunk_bytes))
        sent, last_sent = 0, time.monotonic()
        while sent < 1200 and time.monotonic() - last_sent < 0.5:  # until the receiver takes no more
            try:
                dealer.send_multipart(chunk, flags=zmq.NOBLOCK)
                sent, last_sent = sent + 1, time.monotonic()
            except zmq.Again:
                time.sleep(0.005)
        credits = settings.window_chunks * settings.max_concurrent_transfers
        assert sent < 4 * (credits + QUEUE_SLACK_MESSAGES), sent  # about 70 queued, a few in the kernel
    finally:
        dealer.close(linger=0)
        router.close(linger=0)
        ctx.term()


def test_a_peers_reason_is_kept_and_logged_as_one_printable_bounded_line(tmp_path: Path, caplog) -> None:
    """docs/security.md, messages: a peer's free text (a REJECT's or an ERROR's reason, a DONE's file) with
    newlines and terminal escapes, 60,000 characters long, is kept in the outbox (which 'fol agent ctl
    status' prints) and logged escaped, on one line of at most 500 characters."""
    from fol.agent import protocol as P
    from fol.agent.inbox import Inbox
    from fol.agent.transfer import Receiver, ReceiverSettings

    hostile = "no\n2026-01-01 INFO fol.agent: forged line\x1b[2J\u202e" + "x" * 60_000

    def one_line(text: str) -> bool:
        return text.isprintable() and len(text) <= 500

    data, card = _good_payload()
    offer = _offer(data, card.spec)
    for kind, header in [(P.REJECT, {"reason": hostile}), (P.SKIP, {"reason": hostile}), (P.DONE, {"file": hostile}),
                         (P.ERROR, {"reason": hostile})]:
        sent = OutgoingTransfer("receiver", offer, data)
        sent.on_reply(kind, {"model_id": offer.model_id, **header}, time.monotonic())
        assert sent.finished and one_line(sent.detail) and "forged line" in sent.detail, (kind, sent.detail[:80])

    receiver = Receiver(_RecordingSocket(), Inbox(tmp_path / "state", "receiver", 10**8, accept_any_round=True),  # type: ignore[arg-type]
                        ReceiverSettings(), trust=None)
    caplog.set_level("INFO", logger="fol.agent")
    receiver.handle([b"peer", *P.encode(P.OFFER, offer.to_header())], time.monotonic())
    assert receiver.active
    receiver.handle([b"peer", *P.encode(P.ERROR, {"sender": "sender", "model_id": offer.model_id,
                                                   "reason": hostile})], time.monotonic())
    assert not receiver.active
    dropped = [r.getMessage() for r in caplog.records if "dropped transfer" in r.getMessage()]
    assert len(dropped) == 1 and "forged line" in dropped[0] and dropped[0].isprintable(), dropped
    assert len(dropped[0]) <= 700


def test_a_receiver_flooding_a_sender_with_fetches_has_only_its_credits_queued(tmp_path: Path) -> None:
    """docs/security.md, messages: a (trusted, hostile) receiver that sends FETCH after FETCH and reads no
    CHUNK gets at most the CHUNKs a receiver's credits ask for, plus a few, queued at the sender; the
    FETCHes past that are dropped unanswered (an honest receiver fetches them again after chunk_timeout_s).
    ZeroMQ's default queued 1,000 CHUNKs a connection, about 260 MB at the default chunk size."""
    from fol.agent import protocol as P
    from fol.agent.config import Limits
    from fol.agent.transfer import queue_limit

    chunk, flood = 256 * 1024, 600
    data = os.urandom(chunk)
    offer = Offer(sender="sender", model_id="m1", round=0, spec={"arch": "cnn"}, size=len(data),
                  sha256=hashlib.sha256(data).hexdigest(), chunk_bytes=chunk)
    ctx = zmq.Context()
    router = ctx.socket(zmq.ROUTER)
    router.linger, router.sndhwm, router.rcvhwm, router.rcvbuf = 0, 0, 1, 4096  # reads nothing while flooding
    link = None
    try:
        port = router.bind_to_random_port("tcp://127.0.0.1")
        link = PeerLink(ctx, "receiver", f"tcp://127.0.0.1:{port}", None, None)
        link.add(OutgoingTransfer("receiver", offer, data, offer_retry_s=0.05))
        deadline = time.monotonic() + 5
        while not router.poll(50):  # the OFFER, once connected
            link.tick(time.monotonic())
            assert time.monotonic() < deadline, "no OFFER"
        identity = router.recv_multipart()[0]
        fetch = P.encode(P.FETCH, {"model_id": "m1", "offset": 0, "length": chunk})
        for _ in range(flood):
            router.send_multipart([identity, *fetch])
        handled = 0
        while handled < flood and time.monotonic() < deadline:
            if link.sock.poll(50):
                link.handle(link.sock.recv_multipart(copy=False), time.monotonic())
                handled += 1
        assert handled == flood
        chunks = 0
        while router.poll(500):  # now read what the sender queued
            chunks += router.recv_multipart()[2] == P.CHUNK
        queued = queue_limit(Limits.window_chunks, Limits.max_concurrent_transfers)
        assert chunks < 2 * queued, chunks  # 96 queued, a few in the kernel's buffers (600 before)
    finally:
        if link is not None:
            link.close()
        router.close(linger=0)
        ctx.term()


def test_a_receiver_flooding_a_busy_sender_has_only_its_credits_waiting(tmp_path: Path) -> None:
    """The same bound the other way: while the sender's loop reads nothing, a receiver's connection has
    at most that many messages (of up to 65 KiB each) waiting there; ZeroMQ then stops reading it."""
    from fol.agent import protocol as P
    from fol.agent.config import Limits
    from fol.agent.transfer import queue_limit

    ctx = zmq.Context()
    router = ctx.socket(zmq.ROUTER)
    router.linger, router.sndhwm, router.sndbuf, router.router_mandatory = 0, 1, 16 * 1024, True
    link = None
    try:
        port = router.bind_to_random_port("tcp://127.0.0.1")
        link = PeerLink(ctx, "receiver", f"tcp://127.0.0.1:{port}", None, None)
        data = b"x" * 1000
        link.add(OutgoingTransfer("receiver", _offer(data, ModelSpec("cnn", 2)), data, offer_retry_s=0.05))
        deadline = time.monotonic() + 5
        while not router.poll(50):
            link.tick(time.monotonic())
            assert time.monotonic() < deadline, "no OFFER"
        identity = router.recv_multipart()[0]
        fetch = P.encode(P.FETCH, {"model_id": "m1", "offset": 0, "length": 1, "pad": "x" * 32 * 1024})
        sent, last_sent = 0, time.monotonic()
        while sent < 1200 and time.monotonic() - last_sent < 0.5:  # until the sender takes no more
            try:
                router.send_multipart([identity, *fetch], flags=zmq.NOBLOCK)
                sent, last_sent = sent + 1, time.monotonic()
            except zmq.Again:
                time.sleep(0.005)
        assert sent < 2 * queue_limit(Limits.window_chunks, Limits.max_concurrent_transfers), sent
    finally:
        if link is not None:
            link.close()
        router.close(linger=0)
        ctx.term()


def test_one_peer_holds_at_most_its_share_of_the_transfer_slots(tmp_path: Path) -> None:
    """docs/security.md, payloads: one peer offering several rounds took every transfer slot (and, trickling
    its chunks just inside transfer_timeout_s, kept them); it now holds at most max_transfers_per_peer of
    them, its further offers get BUSY, and another peer's offer still starts at once."""
    from fol.agent import protocol as P
    from fol.agent.inbox import Inbox
    from fol.agent.transfer import Receiver, ReceiverSettings

    sock = _RecordingSocket()
    receiver = Receiver(sock, Inbox(tmp_path / "state", "receiver", 10**8, accept_any_round=True),  # type: ignore[arg-type]
                        ReceiverSettings(max_concurrent_transfers=4, max_transfers_per_peer=2), trust=None)
    data, card = _good_payload()

    def offer(sender: str, round_: int) -> str:
        o = replace(_offer(data, card.spec, mid=f"{sender}:r{round_}", sha=f"{round_:064x}"), sender=sender,
                    round=round_)
        receiver.handle([sender.encode(), *P.encode(P.OFFER, o.to_header())], time.monotonic())
        answer = sock.sent[-1][2].decode()
        sock.sent.clear()
        return answer

    assert [offer("greedy", r) for r in (1, 2, 3, 4)] == ["FETCH", "FETCH", "BUSY", "BUSY"]
    assert offer("other", 9) == "FETCH"
    assert sorted(peer for peer, _ in receiver.active) == ["greedy", "greedy", "other"]
    tiny = replace(_offer(data, card.spec, mid="tiny"), sender="third", chunk_bytes=1)  # 1-byte chunks: refused
    receiver.handle([b"third", *P.encode(P.OFFER, tiny.to_header())], time.monotonic())
    _, _, kind, header = sock.sent.pop()
    assert kind == P.REJECT and "'chunk_bytes' must be an integer in [4096," in json.loads(header)["reason"]


def _slow_loris(tmp_path: Path, data: bytes, spec: ModelSpec, **settings: Any) -> tuple[Any, _RecordingSocket, Offer]:
    """A receiver (on a simulated clock) and a peer's offer of ``data`` in 8 KiB chunks, each confirmed."""
    from fol.agent import protocol as P
    from fol.agent.inbox import Inbox
    from fol.agent.transfer import Receiver, ReceiverSettings

    sock = _RecordingSocket()
    receiver = Receiver(sock, Inbox(tmp_path / "state", "receiver", 10**8, accept_any_round=True),  # type: ignore[arg-type]
                        ReceiverSettings(chunk_bytes=8192, sync_bytes=8192, **settings), trust=None)
    offer = _offer(data, spec)
    receiver.handle([b"loris", *P.encode(P.OFFER, offer.to_header())], 0.0)
    assert len(receiver.active) == 1
    return receiver, sock, offer


def test_a_peer_trickling_its_chunks_gives_up_the_slot_once_its_rate_is_under_the_minimum(tmp_path: Path) -> None:
    """docs/security.md, payloads: a trusted peer sending one 8 KiB chunk every 4 s (2 KB/s) always made
    progress within transfer_timeout_s and chunk_timeout_s, so it held its receive slot for as long as it
    liked (the whole 1,000 s here, on the receiver's clock). Its transfer is now abandoned once its rate
    over a period of transfer_timeout_s is under min_transfer_rate_bytes_s: the slot is free, the sender
    gets BUSY and the bytes so far stay confirmed, so the next offer resumes from them."""
    from fol.agent import protocol as P

    data = os.urandom(300 * 8192)  # 20 min at its pace; never checked as a model, as it never completes
    receiver, sock, offer = _slow_loris(tmp_path, data, ModelSpec("cnn", 2), chunk_timeout_s=5.0,
                                        transfer_timeout_s=60.0, min_transfer_rate_bytes_s=10_000)
    now, offset, held_until = 0.0, 0, None
    while now < 1000.0:
        now += 4.0
        if receiver.active:
            receiver.handle([b"loris", *P.encode(P.CHUNK, {"sender": "sender", "model_id": offer.model_id,
                                                            "offset": offset}, data[offset:offset + 8192])], now)
            offset += 8192
        receiver.tick(now)
        if not receiver.active and held_until is None:
            held_until = now
    assert held_until == 60.0, held_until  # at the end of the first period of transfer_timeout_s
    assert [m[2] for m in sock.sent][-1] == P.BUSY
    assert receiver.events[-1]["outcome"] == "abandoned" and "min_transfer_rate_bytes_s" in receiver.events[-1]["detail"]
    confirmed = 8192 * 15  # the chunks of those 60 s, each confirmed (sync_bytes = one chunk)
    part = tmp_path / "state" / "partial" / f"{receiver.inbox.partial_key('sender', offer.model_id)}.part"
    assert part.stat().st_size == confirmed
    sock.sent.clear()
    now += 60.0  # past its cool-down (see the next test)
    receiver.handle([b"loris", *P.encode(P.OFFER, offer.to_header())], now)  # the resume
    assert json.loads(sock.sent[0][3])["offset"] == confirmed


def test_a_peer_whose_transfer_was_too_slow_waits_before_it_takes_a_slot_again(tmp_path: Path) -> None:
    """A peer whose transfer was abandoned as too slow offered again at once and took the slot again, for
    another period of transfer_timeout_s: it held the slot nearly all the time all the same. Its offers (of
    any model) now get BUSY for a cool-down, transfer_timeout_s after the first abandonment and doubling
    after each one that follows (up to reject_memory_s); a model it delivers whole ends the doubling.
    Another peer's offer is taken meanwhile."""
    from fol.agent import protocol as P

    data = os.urandom(300 * 8192)
    receiver, sock, offer = _slow_loris(tmp_path, data, ModelSpec("cnn", 2), chunk_timeout_s=5.0,
                                        transfer_timeout_s=60.0, reject_memory_s=200.0)
    other = replace(_offer(data, ModelSpec("cnn", 2), mid="m2", sha="e" * 64), round=3)

    def answer(message: list[Any], now: float) -> tuple[bytes, dict[str, Any]]:
        sock.sent.clear()
        receiver.handle(message, now)
        return sock.sent[0][2], json.loads(sock.sent[0][3])

    start, cooldowns = 0.0, []
    for _ in range(3):  # three periods at 2 KB/s, each ending in an abandonment and a longer cool-down
        receiver.handle([b"loris", *P.encode(P.CHUNK, {"sender": "sender", "model_id": offer.model_id,
                                                        "offset": receiver.status()[0]["bytes"]},
                                              data[:8192])], start + 1.0)
        receiver.tick(start + 60.0)
        assert not receiver.active
        kind, header = answer([b"loris", *P.encode(P.OFFER, offer.to_header())], start + 60.5)
        assert kind == P.BUSY
        kind2, _ = answer([b"loris", *P.encode(P.OFFER, other.to_header())], start + 60.5)  # another model
        assert kind2 == P.BUSY
        cooldowns.append(header["retry_after_s"])
        start += 60.5 + cooldowns[-1]  # when the BUSY said to offer again
        kind, _ = answer([b"loris", *P.encode(P.OFFER, offer.to_header())], start)  # cooled down: resumes
        assert kind == P.FETCH
    assert cooldowns == [59.5, 119.5, 199.5]  # 60 s, 120 s, then reject_memory_s (200 s), from the abandonment
    assert answer([b"other", *P.encode(P.OFFER, replace(other, sender="other2").to_header())], start)[0] == P.FETCH


def test_a_transfer_at_the_minimum_rate_or_faster_keeps_its_slot(tmp_path: Path) -> None:
    """The rule cuts only slow transfers: one chunk every 0.5 s (16 KB/s, over the default minimum of
    10,000 B/s) runs to the end, past several periods of transfer_timeout_s (here 0.5 s), and is stored."""
    from fol.agent import protocol as P

    data, card = _good_payload()
    receiver, sock, offer = _slow_loris(tmp_path, data, card.spec, chunk_timeout_s=1.0, transfer_timeout_s=0.5)
    receiver.slow_peers["sender"] = (3, 0.0)  # three slow transfers before, cooled down: this one ends the doubling
    now, offset = 0.0, 0
    while offset < len(data):
        now += 0.5
        assert receiver.active, (now, offset)
        receiver.handle([b"loris", *P.encode(P.CHUNK, {"sender": "sender", "model_id": offer.model_id,
                                                        "offset": offset}, data[offset:offset + 8192])], now)
        offset += 8192
        receiver.tick(now)
    assert now >= 1.5 and not receiver.active and receiver.events[-1]["outcome"] == "stored"
    assert "sender" not in receiver.slow_peers


def _full_inbox_receiver(tmp_path: Path, held: int) -> tuple[Any, _RecordingSocket]:
    """A receiver whose state records ``held`` received models (records only: the count is what is checked)."""
    from fol.agent.inbox import Inbox
    from fol.agent.transfer import Receiver, ReceiverSettings

    inbox = Inbox(tmp_path / "state", "receiver", 10**8, accept_any_round=True)
    inbox.state.received = {f"other:r{i}:{i:016x}": {"sender": "other", "round": i, "sha256": f"{i:064x}", "size": 1,
                                                      "file": f"inbox/round-{i}/other.safetensors", "time": 0.0}
                            for i in range(held)}
    return Receiver(_RecordingSocket(), inbox, ReceiverSettings(), trust=None), inbox  # type: ignore[arg-type]


def test_the_inbox_records_at_most_max_inbox_models(tmp_path: Path) -> None:
    """docs/security.md, payloads: an exchange-only node kept a record of every model of every round in
    state.json, without a bound: about 111,000 of them (cnn-small ones, 3.5 GB, well inside max_inbox_bytes)
    made state.json hold over the 1,000,000 values the agent reads at start-up, and it refused to restart.
    At MAX_INBOX_MODELS records a new offer is refused (REJECT "inbox full", not remembered: nothing held
    is dropped), and BUSY while running transfers may fill the rest."""
    from fol.agent import protocol as P
    from fol.agent.inbox import MAX_INBOX_MODELS

    data, card = _good_payload()
    receiver, inbox = _full_inbox_receiver(tmp_path, MAX_INBOX_MODELS)
    receiver.handle([b"peer", *P.encode(P.OFFER, _offer(data, card.spec).to_header())], time.monotonic())
    _, _, kind, header = receiver.sock.sent.pop()
    assert kind == P.REJECT and json.loads(header)["reason"].startswith(
        f"inbox full: it holds {MAX_INBOX_MODELS:,} received models, the most this node records"), header
    assert not receiver.active and not receiver.rejections  # this node's state, not the offer's fault

    receiver, inbox = _full_inbox_receiver(tmp_path / "b", MAX_INBOX_MODELS - 1)  # room for one more
    first = replace(_offer(data, card.spec, mid="m1"), round=1)
    second = replace(_offer(data, card.spec, mid="m2", sha="f" * 64), round=2)
    for offer, answer in ((first, P.FETCH), (second, P.BUSY)):
        receiver.handle([b"peer", *P.encode(P.OFFER, offer.to_header())], time.monotonic())
        assert receiver.sock.sent.pop()[2] == answer


def test_a_received_models_producer_is_at_most_200_characters(tmp_path: Path) -> None:
    """docs/security.md, payloads: a model card's producer (up to the card's 256 KiB) was recorded in
    state.json as it came: about 270 such models of 250,000 characters made state.json pass its 64 MiB
    and the agent refused to restart. A producer over 200 characters (MAX_NAME_CHARS) is now refused with
    the model, naming the field; nothing is stored."""
    from fol.agent import protocol as P
    from fol.agent.inbox import Inbox
    from fol.agent.transfer import Receiver, ReceiverSettings

    sock = _RecordingSocket()
    inbox = Inbox(tmp_path / "state", "receiver", 10**8, accept_any_round=True)
    receiver = Receiver(sock, inbox, ReceiverSettings(), trust=None)  # type: ignore[arg-type]
    spec = ModelSpec("cnn-small", num_classes=2)
    for producer, answer in (("p" * 250_000, P.REJECT), ("p" * 200, P.DONE)):
        data = model_to_bytes(build_model(spec, seed=4), ModelCard(spec=spec, class_names=CLASSES, producer=producer))
        offer = _offer(data, spec, mid=f"m{len(producer)}")
        receiver.handle([b"peer", *P.encode(P.OFFER, offer.to_header())], 0.0)
        sock.sent.pop()
        receiver.handle([b"peer", *P.encode(P.CHUNK, {"sender": "sender", "model_id": offer.model_id, "offset": 0},
                                            data[:8192])], 0.0)
        for offset in range(8192, len(data), 8192):
            receiver.handle([b"peer", *P.encode(P.CHUNK, {"sender": "sender", "model_id": offer.model_id,
                                                           "offset": offset}, data[offset:offset + 8192])], 0.0)
        _, _, kind, header = sock.sent[-1]
        assert kind == answer, header[:300]
        if kind == P.REJECT:
            reason = json.loads(header)["reason"]
            assert "model card field 'producer': expected a name of at most 200 characters, got 250,000" in reason
            assert len(reason) < 400 and not inbox.state.received
    assert [r["producer"] for r in inbox.state.received.values()] == ["p" * 200]


def test_a_recovered_models_long_producer_is_recorded_shortened_and_the_file_kept(tmp_path: Path, caplog) -> None:
    """Inbox.recover registered a model found in inbox/ but not in the state with its card's producer as it
    came (250,000 characters: 250,624 bytes of state.json for one file), while a received model's is capped
    at 200 (verify). Such a file can only be an older agent's: it is kept and registered, its producer
    recorded cut to 200 characters ending in '...', with one warning naming the file; a restart after
    that finds nothing to do."""
    import logging

    from fol.agent.inbox import Inbox

    inbox = Inbox(tmp_path, "receiver", 10**8, accept_any_round=True)
    spec = ModelSpec("cnn-small", num_classes=2)
    files = {}
    for name, producer in (("older-peer", "p" * 250_000), ("peer", "q" * 200)):
        path = tmp_path / "inbox" / "round-1" / f"{name}.safetensors"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(model_to_bytes(build_model(spec, seed=4),
                                        ModelCard(spec=spec, class_names=CLASSES, producer=producer, round=1)))
        files[name] = (path, path.read_bytes())
    with caplog.at_level(logging.WARNING, logger="fol.agent.inbox"):
        notes = inbox.recover()
    assert len(notes) == 2
    by_sender = {r["sender"]: r for r in Inbox(tmp_path, "receiver", 10**8).state.received.values()}
    assert by_sender["older-peer"]["producer"] == "p" * 197 + "..."
    assert by_sender["peer"]["producer"] == "q" * 200  # at the cap: as it is
    assert all(path.read_bytes() == data for path, data in files.values())  # both models kept, untouched
    assert inbox.state_path.stat().st_size < 4096
    (line,) = [r.getMessage() for r in caplog.records if "older-peer" in r.getMessage()]
    assert "inbox/round-1/older-peer.safetensors" in line and "producer of 250,000 characters" in line
    assert len(line) < 400
    assert Inbox(tmp_path, "receiver", 10**8).recover() == []


def _inbox_file(state: Path, name: str, seed: int, classes: list[str], round_: int = 1, folder: int = 1) -> Path:
    spec = ModelSpec("cnn-small", num_classes=2)
    path = state / "inbox" / f"round-{folder}" / f"{name}.safetensors"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(model_to_bytes(build_model(spec, seed=seed),
                                    ModelCard(spec=spec, class_names=classes, producer=name, round=round_)))
    return path


def test_recovery_applies_the_received_models_check_and_cap(tmp_path: Path, monkeypatch, caplog) -> None:
    """Inbox.recover registered every model file it found in inbox/ that the state did not list: past
    MAX_INBOX_MODELS (6 records with a cap of 3), and of classes the node cannot use or a round other than
    its folder's, which the receiver refuses over the wire. Now a file failing the receive path's card check
    is renamed <name>.refused (one line naming it, bytes kept), and files past the cap stay on disk unread
    and unregistered (one line for all of them)."""
    import logging

    from fol.agent.inbox import Inbox

    monkeypatch.setattr("fol.agent.inbox.MAX_INBOX_MODELS", 3)
    inbox = Inbox(tmp_path, "receiver", 10**8)
    inbox.compatible = (tuple(CLASSES), (3, 32, 32))
    stranger = _inbox_file(tmp_path, "a-stranger", 1, ["cat", "dog"])
    late = _inbox_file(tmp_path, "b-late", 2, CLASSES, round_=2)
    peers = [_inbox_file(tmp_path, f"peer{i}", 10 + i, CLASSES) for i in range(4)]
    kept = {p.name: p.read_bytes() for p in (stranger, late, *peers)}
    with caplog.at_level(logging.WARNING, logger="fol.agent.inbox"):
        notes = inbox.recover()
    assert sorted(r["sender"] for r in inbox.state.received.values()) == ["peer0", "peer1", "peer2"]
    assert sorted(r["sender"] for r in Inbox(tmp_path, "receiver", 10**8).state.received.values()) == [
        "peer0", "peer1", "peer2"]
    assert not stranger.exists() and not late.exists()
    for path in (stranger, late):
        assert path.with_name(path.name + ".refused").read_bytes() == kept[path.name]
    assert peers[3].read_bytes() == kept[peers[3].name]  # past the cap: untouched
    (line,) = [n for n in notes if "a-stranger" in n]
    assert "inbox/round-1/a-stranger.safetensors" in line and "of no use to this node" in line
    (line,) = [n for n in notes if "b-late" in n]
    assert "model card says round 2, its folder is round 1" in line
    (line,) = [n for n in notes if "unregistered" in n]
    assert "left 1 model file(s)" in line and "inbox/round-1/peer3.safetensors" in line and "at most 3" in line
    assert len(notes) == 6 and all(len(n) < 600 for n in notes)
    assert sum("recovery" in r.getMessage() for r in caplog.records) == 6
    assert Inbox(tmp_path, "receiver", 10**8).recover() == [line]  # a restart: the same, refused files unread
    # with room: the file past the cap is registered; a refused name already taken is never overwritten
    monkeypatch.setattr("fol.agent.inbox.MAX_INBOX_MODELS", 10)
    stranger.write_bytes(kept[stranger.name])
    inbox = Inbox(tmp_path, "receiver", 10**8)
    inbox.compatible = (tuple(CLASSES), (3, 32, 32))
    notes = inbox.recover()
    assert [n.split(":")[0].removesuffix(", not registered") for n in notes] == [
        "moved inbox/round-1/a-stranger.safetensors aside to inbox/round-1/a-stranger.safetensors.refused.2",
        "registered inbox/round-1/peer3.safetensors found in the inbox"], notes
    assert (stranger.parent / "a-stranger.safetensors.refused").read_bytes() == kept[stranger.name]
    assert len(inbox.state.received) == 4


def test_recovery_keeps_one_of_two_inbox_files_of_the_same_bytes(tmp_path: Path) -> None:
    """Two inbox files of identical bytes got the same recovery key (recovered:<sha>): only the last was
    recorded, and at every restart the record flipped to the other file with a new warning. The receiver
    keeps one copy of a payload; now recovery keeps the first file by sorted path (or the file a record
    already names) and sets the other aside as <name>.refused, once."""
    import shutil

    from fol.agent.inbox import Inbox

    first = _inbox_file(tmp_path, "peer-a", 1, CLASSES)
    second = first.with_name("peer-b.safetensors")
    shutil.copy(first, second)
    notes = Inbox(tmp_path, "receiver", 10**8).recover()
    assert notes == ["registered inbox/round-1/peer-a.safetensors found in the inbox",
                     "moved inbox/round-1/peer-b.safetensors aside to inbox/round-1/peer-b.safetensors.refused, "
                     "not registered: the same bytes as inbox/round-1/peer-a.safetensors"]
    for _ in range(2):  # restarts: nothing to do, the record stays
        inbox = Inbox(tmp_path, "receiver", 10**8)
        assert inbox.recover() == []
        assert [r["file"] for r in inbox.state.received.values()] == ["inbox/round-1/peer-a.safetensors"]
    assert second.with_name(second.name + ".refused").read_bytes() == first.read_bytes()
    # a copy beside a file a record names is the one set aside, though it sorts first
    copy = first.with_name("a-copy.safetensors")
    shutil.copy(first, copy)
    inbox = Inbox(tmp_path, "receiver", 10**8)
    (note,) = inbox.recover()
    assert note.startswith("moved inbox/round-1/a-copy.safetensors aside") and note.endswith("peer-a.safetensors")
    assert [r["file"] for r in inbox.state.received.values()] == ["inbox/round-1/peer-a.safetensors"]


def test_recovery_reads_only_the_receivers_round_folders_and_files(tmp_path: Path) -> None:
    """Inbox.recover took every inbox/round-* folder: a user's copy inbox/round-1.bak/ had its valid model
    deleted ("removed invalid ...: invalid literal for int() with base 10: '1.bak'"), and a folder named
    *.safetensors in a round folder stopped the start-up with IsADirectoryError. Now only round-<n>
    folders and regular files are read; the rest is left as it is."""
    import shutil

    from fol.agent.inbox import Inbox

    model = _inbox_file(tmp_path, "peer-a", 1, CLASSES)
    assert Inbox(tmp_path, "receiver", 10**8).recover() == [
        "registered inbox/round-1/peer-a.safetensors found in the inbox"]
    backup = tmp_path / "inbox" / "round-1.bak"
    shutil.copytree(model.parent, backup)
    (model.parent / "odd.safetensors").mkdir()
    inbox = Inbox(tmp_path, "receiver", 10**8)
    assert inbox.recover() == []
    assert (backup / "peer-a.safetensors").read_bytes() == model.read_bytes()
    assert (model.parent / "odd.safetensors").is_dir()
    assert [r["file"] for r in inbox.state.received.values()] == ["inbox/round-1/peer-a.safetensors"]


def test_an_on_board_node_checks_the_models_found_in_its_inbox_at_start_up(tmp_path: Path) -> None:
    """The agent ran the inbox recovery before it knew its model's classes, so a model for other classes
    left in inbox/ was registered at restart and counted toward [trigger] models like a useful one."""
    node = Node(tmp_path, "receiver", [])
    cfg = node.on_board_config({"auto_send": False, "models": 2}, {"rounds": 1})
    Agent(cfg).stop()  # the state folder of a node collecting round 1 (round-0 models)
    state = node.folder / "state"
    _inbox_file(state, "useful", 1, HURRICANE_CLASSES, round_=0, folder=0)
    useless = _inbox_file(state, "useless", 2, CLASSES, round_=0, folder=0)  # other class order
    Agent(cfg).stop()
    received = json.loads((state / "state.json").read_text())["received"]
    assert [r["sender"] for r in received.values()] == ["useful"]
    assert not useless.exists() and useless.with_name(useless.name + ".refused").is_file()


def test_a_full_inbox_with_the_longest_fields_still_restarts(tmp_path: Path) -> None:
    """What the caps are for: MAX_INBOX_MODELS records with every field at its longest (64-character
    sender, 128-character model id, 200-character producer) keep state.json within the size and value
    limits the agent enforces when it reads the file at start-up."""
    from fol.agent.inbox import MAX_INBOX_MODELS, MAX_STATE_BYTES, Inbox

    inbox = Inbox(tmp_path, "receiver", 10**8, accept_any_round=True)
    sender = "s" * 64
    inbox.state.received = {f"{i:0128d}": {"sender": sender, "round": 10**6 + i, "sha256": "a" * 64, "size": 10**9,
                                           "file": f"inbox/round-{10**6 + i}/{sender}.safetensors",
                                           "time": time.time(), "producer": "p" * 200, "arch": "cnn-small"}
                            for i in range(MAX_INBOX_MODELS)}
    inbox.save()
    assert inbox.state_path.stat().st_size < MAX_STATE_BYTES / 8
    assert len(Inbox(tmp_path, "receiver", 10**8, accept_any_round=True).state.received) == MAX_INBOX_MODELS


def test_recovery_leaves_a_model_file_not_named_for_a_node_id_unregistered(tmp_path: Path, caplog) -> None:
    """Inbox.recover registered a stray inbox file with its file name as the sender, whatever the name: a
    name of bytes that are not UTF-8 (b'\\xff\\xfe'), one holding a newline and a terminal escape, or one of
    200 characters (over the 64 of a node id). The escape reached the log raw, and the round failed at every
    attempt: the card of the model it writes lists the senders, and a lone surrogate is no UTF-8. Now such a
    file is left on disk unread and unregistered, with one escaped line counting them; a record an earlier
    agent made of one is dropped. Before this change the card below raised ConfigError ('surrogates not
    allowed') and the senders were all four names."""
    import logging

    from fol.agent.inbox import Inbox
    from fol.fileio import write_json_atomic

    good = _inbox_file(tmp_path, "peer-a", 1, CLASSES)
    bad = [b"\xff\xfe", b"a\nb\x1b[2J", b"x" * 200]
    for i, name in enumerate(bad):
        target = os.path.join(os.fsencode(good.parent), name + b".safetensors")
        with open(target, "wb") as fh:
            fh.write(_inbox_file(tmp_path, f"other{i}", 2 + i, CLASSES).read_bytes())
        os.unlink(good.with_name(f"other{i}.safetensors"))
    kept = {name: open(os.path.join(os.fsencode(good.parent), name + b".safetensors"), "rb").read() for name in bad}
    with caplog.at_level(logging.WARNING, logger="fol.agent.inbox"):
        notes = Inbox(tmp_path, "receiver", 10**8).recover()
    assert len(notes) == 2 and notes[0] == "registered inbox/round-1/peer-a.safetensors found in the inbox"
    assert notes[1].startswith("left 3 model file(s) in the inbox unregistered, their name not <sender>.safetensors "
                               "of a node id, first in inbox/round-1: sender ")
    assert "expected 1-64 letters" in notes[1] and len(notes[1]) < 300
    lines = [r.getMessage() for r in caplog.records if "recovery" in r.getMessage()]
    assert len(lines) == 2 and all(line.isprintable() for line in lines)
    # what a round does with the records: the state read back, the senders in the card of the model it writes
    inbox = Inbox(tmp_path, "receiver", 10**8)
    records = inbox.state.received_for(1)
    assert [r["sender"] for r in records] == ["peer-a"]
    spec = ModelSpec("cnn-small", num_classes=2)
    card = ModelCard(spec=spec, class_names=CLASSES, producer="receiver", round=2,
                     extra={"received": [r["sender"] for r in records]})
    save_model(tmp_path / "round-2.safetensors", build_model(spec, seed=0), card)
    write_json_atomic(tmp_path / "report.json", {"received_models": [r["model_id"] for r in records]})
    for name, data in kept.items():  # left as they were
        assert open(os.path.join(os.fsencode(good.parent), name + b".safetensors"), "rb").read() == data
    # an earlier agent's record of such a file is dropped; the file is then left as above
    inbox.state.received["recovered:old"] = {"sender": "a\nb\x1b[2J", "round": 1, "sha256": "0" * 64, "size": 1,
                                             "file": "inbox/round-1/a\nb\x1b[2J.safetensors", "time": 0.0}
    inbox.save()
    notes = Inbox(tmp_path, "receiver", 10**8).recover()
    assert notes[0] == ("dropped 'recovered:old': its sender 'a\\nb\\x1b[2J' is invalid; expected 1-64 letters, "
                        "digits, '.', '_' or '-', starting with a letter or digit")
    assert notes[1].startswith("left 3 model file(s)") and all(n.isprintable() for n in notes)
    assert [r["sender"] for r in Inbox(tmp_path, "receiver", 10**8).state.received.values()] == ["peer-a"]


def test_a_node_id_or_model_id_ending_in_a_newline_is_invalid(tmp_path: Path) -> None:
    """check_name, check_model_id and the offer's sha256 matched their pattern with re.match and a final '$',
    which also matches before a trailing newline: 'peer-a\\n' passed as a node id (a config's node.id or
    peers[].id, and Inbox.recover's rule for an inbox file's name, so a file named 'peer-a\\n.safetensors' was
    registered with a newline in its sender, the case 6f4c185 meant to leave unread). Fails before
    fullmatch."""
    from fol.agent.inbox import Inbox
    from fol.agent.protocol import ProtocolError, check_model_id, check_name

    for check, value in ((check_name, "peer-a\n"), (check_model_id, "m-1\n")):
        with pytest.raises(ProtocolError, match="is invalid"):
            check(value)
        assert check(value[:-1]) == value[:-1]
    _inbox_file(tmp_path, "peer-a\n", 1, CLASSES)
    notes = Inbox(tmp_path, "receiver", 10**8).recover()
    assert len(notes) == 1 and notes[0].startswith("left 1 model file(s) in the inbox unregistered")
    assert Inbox(tmp_path, "receiver", 10**8).state.received == {}


@pytest.mark.parametrize("kind", ["fifo", "large"])
def test_a_partial_record_that_is_a_fifo_or_too_large_restarts_the_transfer_unread(tmp_path: Path, caplog,
                                                                                    kind: str) -> None:
    """open_partial read partial/<key>.json with read_bytes(), unchecked: a FIFO there blocked the receiver
    until a writer came (here: the test's timeout), and a file of any size was read whole (a valid record padded
    to 100 kB resumed at its offset). Both are now a damaged record, as unreadable JSON is: the transfer restarts
    at 0, the partial file is emptied and the record rewritten. Both failed before."""
    import logging

    from _waiting import returned_within
    from fol.agent.inbox import MAX_PARTIAL_RECORD_BYTES, Inbox

    data, card = _good_payload()
    offer = _offer(data, card.spec)
    inbox = Inbox(tmp_path / "state", "receiver", 10**8, accept_any_round=True)
    part, meta = inbox.partial_paths("sender", offer.model_id)
    part.parent.mkdir(parents=True, exist_ok=True)
    part.write_bytes(data[:1000])
    record = json.dumps({"sender": "sender", "model_id": offer.model_id, "sha256": offer.sha256, "size": offer.size,
                         "round": offer.round, "confirmed": 1000})
    if kind == "fifo":
        os.mkfifo(meta)
    else:
        meta.write_text(record + " " * 100_000)
    with caplog.at_level(logging.WARNING, logger="fol.agent.inbox"):
        got = returned_within(lambda: inbox.open_partial("sender", offer), timeout=5.0, fifo=meta)
    assert got == (part, 0) and part.stat().st_size == 0
    assert json.loads(meta.read_text())["confirmed"] == 0  # the FIFO replaced by the agent's record
    expected = "not a regular file" if kind == "fifo" else f"may have at most {MAX_PARTIAL_RECORD_BYTES}"
    assert "unreadable partial-transfer record" in caplog.text and expected in caplog.text, caplog.text
    meta.write_text(record)  # the record the agent writes resumes, as before
    part.write_bytes(data[:1000])
    assert inbox.open_partial("sender", offer) == (part, 1000)


@pytest.mark.parametrize("kind", ["control", "long"])
def test_the_listening_line_names_the_state_folder_and_endpoints_through_brief(kind: str, tmp_path: Path,
                                                                               monkeypatch, capsys) -> None:
    """fol agent's start-up line ('listening on ..., control ..., state <folder>') printed the state folder
    (and an ipc:// endpoint, a socket file's path) as given: a newline or a terminal's escape in a folder's
    name went to stdout as it is, a state folder of 3,000 characters made a 3 kB line. Each is named through
    brief(), as the agent's refusals name them."""
    from fol.agent.loopback import toml_text
    from fol.cli import main
    from swarmbase.tomlcheck import brief

    node = Node(tmp_path, "receiver", [])
    folder = odd_folder(tmp_path, kind)
    toml = tmp_path / "receiver.toml"
    toml.write_text(toml_text({
        "node": {"id": "receiver", "listen": "tcp://127.0.0.1:*", "secret_key": str(node.sec),
                 "trust_dir": str(node.trust_dir), "state_dir": str(folder / "state"), "model": str(node.model)},
        "trigger": {"on_board": False, "auto_send": False}}))
    monkeypatch.setattr(Agent, "run", lambda self: None)  # started, the line printed; stopped at once
    assert main(["agent", "--config", str(toml)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 1 and lines[0].startswith("fol agent receiver: listening on tcp://127.0.0.1:"), lines
    assert lines[0].endswith(f", state {brief(folder / 'state')}") and lines[0].isprintable(), lines
    assert len(lines[0]) < 400, lines


@pytest.mark.parametrize("kind", ["control", "long"])
def test_the_agents_log_lines_name_its_folders_and_key_through_brief(kind: str, tmp_path: Path, monkeypatch,
                                                                     caplog) -> None:
    """The agent's log lines at start-up ('initialized <state> from <model>', 'listening on ..., trust store
    <folder>'), 'trusted PEER (...) in <store>' and the warning of a secret key other users can read ('<file>:
    ... chmod 600 <file>') named the folders and the key file as they are: a folder of 3,000 characters made a
    3 kB log line (a newline or a terminal's escape is escaped by the log formatter, but not in the record).
    Each names them through brief(), as the agent's messages do; the warning's closing 'chmod 600 <path>' alone
    gives the whole path, a command to paste (test_the_chmod_hint_for_an_open_secret_key_works_when_pasted)."""
    import logging
    import os

    from fol.agent.loopback import toml_text
    from fol.cli import main
    from swarmbase.tomlcheck import brief

    node = Node(tmp_path, "receiver", [])
    folder = odd_folder(tmp_path, kind)
    _, secret = generate_keypair(folder / "keys", "receiver")
    os.chmod(secret, 0o644)  # readable by others: warned
    caplog.set_level(logging.INFO, logger="fol.agent")
    trust_key(folder / "trusted", node.pub, name="sender")
    toml = tmp_path / "receiver.toml"
    toml.write_text(toml_text({
        "node": {"id": "receiver", "listen": "tcp://127.0.0.1:*", "secret_key": str(secret),
                 "trust_dir": str(folder / "trusted"), "state_dir": str(folder / "state"), "model": str(node.model)},
        "trigger": {"on_board": False, "auto_send": False}}))
    monkeypatch.setattr(Agent, "run", lambda self: None)  # started, its lines logged; stopped at once
    assert main(["agent", "--config", str(toml)]) == 0
    said = [r.getMessage() for r in caplog.records if r.name.startswith("fol.agent")]
    for start in ("trusted sender (", f"{brief(secret)}: the secret key is readable by other users",
                  f"receiver: initialized {brief(folder / 'state')} from "):
        assert any(line.startswith(start) for line in said), (start, said)
    assert any(f", trust store {brief(folder / 'trusted')} (1 keys)" in line for line in said), said
    # the one long part the warning may hold: the command it ends with, the whole path to paste into a shell
    assert all(line.isprintable() and len(line.partition(": chmod 600 ")[0]) < 700 for line in said), said


@pytest.mark.parametrize("kind", ["control", "long"])
def test_the_state_files_refusals_name_it_through_brief(kind: str, tmp_path: Path) -> None:
    """The inbox's refusals of its state file (not JSON, not a state file, another node's, a bad field) and of
    a state sub-folder it cannot create named them as they are: a newline or a terminal's escape in the state
    folder's name (node.state_dir, the user's) went into the message as it is, a folder of 3,000 characters
    made a 3 kB line. Each names the file through brief(), as the bounded reader's own refusals name it."""
    from fol.agent.inbox import Inbox
    from fol.errors import ConfigError
    from swarmbase.tomlcheck import brief

    folder = odd_folder(tmp_path, kind)
    root = folder / "state"
    root.mkdir()
    state = root / "state.json"
    Inbox(root, "receiver", 10**8).save()
    good = json.loads(state.read_text())
    for text, says in (("[1, 2", "cannot read agent state ("), ("[]", "not a FOL agent state file"),
                       (json.dumps({**good, "node": "other"}), "state belongs to node 'other'"),
                       (json.dumps({**good, "round": -1}), "field 'round' must be a positive integer")):
        state.write_text(text)
        with pytest.raises(ConfigError) as err:
            Inbox(root, "receiver", 10**8)
        message = str(err.value)
        assert message.startswith(f"{brief(state)}: {says}") and message.isprintable(), message
        assert len(message) < 500, message
    blocked = folder / "blocked"
    blocked.mkdir()
    (blocked / "models").write_text("a file where a folder belongs")
    with pytest.raises(ConfigError) as err:
        Inbox(blocked, "receiver", 10**8)
    assert str(err.value).startswith(f"{brief(blocked / 'models')}: cannot create the state sub-folder"), err.value
    assert str(err.value).isprintable() and len(str(err.value)) < 500, err.value
