"""Node agent configuration, keys / trust store, protocol framing and the CLI."""

from __future__ import annotations

import argparse
import json
import os
import re
import stat
from pathlib import Path

import pytest

from fol.agent import protocol as P
from fol.agent.config import DEFAULT_MAX_PAYLOAD_BYTES, AgentConfig
from fol.agent.keys import TrustStore, generate_keypair, load_keypair, load_public_key, revoke_key, trust_key
from fol.agent.loopback import toml_text
from fol.errors import ConfigError

from _names import odd_folder


def _base(tmp_path: Path) -> dict:
    return {
        "node": {"id": "drone-1", "listen": "tcp://127.0.0.1:*", "secret_key": "keys/drone-1.key_secret",
                 "trust_dir": "trusted", "state_dir": "state", "model": "m.safetensors",
                 "data": "dataset=synthetic-hurricane,nodes=3,node=0"},
        "peers": [{"id": "drone-2", "address": "tcp://127.0.0.1:5602"}],
        "limits": {"max_payload_bytes": 1000000},
        "trigger": {"models": 1, "deadline_s": 30.0},
        "fol": {"top_k": 2},
    }


def test_config_round_trip_through_toml_resolves_relative_paths(tmp_path: Path) -> None:
    path = tmp_path / "node.toml"
    path.write_text(toml_text(_base(tmp_path)))
    cfg = AgentConfig.from_toml(path)
    assert cfg.node_id == "drone-1" and cfg.listen == "tcp://127.0.0.1:*"
    assert cfg.secret_key == tmp_path / "keys" / "drone-1.key_secret"
    assert cfg.peers[0].public_key == str(tmp_path / "trusted" / "drone-2.key")  # default: trust store
    assert cfg.limits.max_payload_bytes == 1000000 and cfg.limits.chunk_bytes == 256 * 1024
    assert cfg.trigger.models == 1 and cfg.expected_models(5) == 1
    assert cfg.fol_config().top_k == 2


def test_relative_ipc_addresses_resolve_against_the_config_folder(tmp_path: Path, monkeypatch) -> None:
    """Like every path of the config: started from another folder, the agent binds the same socket."""
    data = _base(tmp_path)
    data["node"].update(listen="ipc://state/in.sock", control="ipc:///run/fol/ctl.sock")
    data["peers"][0]["address"] = "ipc://../drone-2/state/in.sock"
    path = tmp_path / "node.toml"
    path.write_text(toml_text(data))
    monkeypatch.chdir("/")
    cfg = AgentConfig.from_toml(path)
    assert cfg.listen == f"ipc://{tmp_path / 'state' / 'in.sock'}"
    assert cfg.control == "ipc:///run/fol/ctl.sock"  # absolute: as written
    assert cfg.peers[0].address == f"ipc://{tmp_path / '..' / 'drone-2' / 'state' / 'in.sock'}"


def test_default_payload_limit_matches_the_safe_format() -> None:
    from fol.checkpoint import DEFAULT_MAX_BYTES

    assert DEFAULT_MAX_PAYLOAD_BYTES == DEFAULT_MAX_BYTES


@pytest.mark.parametrize(
    "mutate, needle",
    [
        (lambda d: d["node"].pop("id"), "node.id: missing"),
        (lambda d: d["node"].update(listen="udp://x"), "node.listen"),
        (lambda d: d["node"].update(id="../evil"), "id '../evil' is invalid"),
        (lambda d: d["node"].update(colour="red"), "node: unknown key 'colour'"),
        (lambda d: d["peers"][0].update(id="drone-1"), "own id"),
        (lambda d: d["peers"].append({"id": "drone-2", "address": "tcp://127.0.0.1:1"}), "listed twice"),
        (lambda d: d["peers"][0].update(address="tcp://127.0.0.1:*"), "peers[0].address"),
        (lambda d: d["limits"].update(max_payload_bytes=-5), "limits.max_payload_bytes: expected an integer >= 1"),
        (lambda d: d["limits"].update(chunk_timeout_s="soon"), "limits.chunk_timeout_s"),
        # this node's own offers would be refused by every peer (an OFFER asks for chunks of 4,096 bytes or more)
        (lambda d: d["limits"].update(chunk_bytes=1024), "limits.chunk_bytes: expected an integer >= 4096, got 1024"),
        (lambda d: d["limits"].update(max_transfers_per_peer=0), "limits.max_transfers_per_peer: expected an integer >= 1"),
        # a back-off cap below its first step was taken: every retry waited the cap, not 30 s, 60 s, ...
        (lambda d: d["limits"].update(round_retry_s=60.0, round_retry_max_s=10.0),
         "limits.round_retry_max_s: expected at least limits.round_retry_s (60 s), got 10"),
        # a TOML boolean was shown as Python's: "got True"
        (lambda d: d["limits"].update(window_chunks=True), "limits.window_chunks: expected an integer, got true"),
        (lambda d: d["limits"].update(chunk_timeout_s=[False]),
         "limits.chunk_timeout_s: expected a number, got [false]"),
        (lambda d: d["trigger"].update(models=0), "trigger.models: expected an integer >= 1"),
        (lambda d: d["trigger"].update(on_board="yes"), "trigger.on_board: expected true or false"),
        (lambda d: d["node"].pop("data"), "node.data: missing"),
        (lambda d: d["node"].update(variant="fol-x"), "node.variant: expected one of"),
        # a [position] table without its connection ended in a TypeError from the dataclass
        (lambda d: d.update(position={"source": "mavlink"}), "position.connection: missing (required)"),
        # a connection name longer than the file system takes ended in OSError 'File name too long'
        (lambda d: d.update(position={"source": "nmea", "connection": "n" * 5000}),
         "position.connection: 'nnnnnnnnn"),
    ],
)
def test_bad_config_names_the_field(tmp_path: Path, mutate, needle: str) -> None:
    data = _base(tmp_path)
    mutate(data)
    with pytest.raises(ConfigError) as err:
        AgentConfig.from_dict(data, base_dir=tmp_path, source="node.toml")
    assert needle in str(err.value) and "node.toml" in str(err.value)


@pytest.mark.parametrize("given, named", [
    ({}, "node.data"),
    ({"data": "dataset=synthetic-hurricnae,nodes=3,node=0"}, "node.data"),  # a misspelt name was not looked at
    ({"data_root": "datasets"}, "node.data and node.data_root"),
    ({"data": "missing/folder", "data_root": "datasets"}, "node.data and node.data_root"),
    ({"variant": "fol-a"}, "node.data and node.variant"),  # read by on-board personalization only
    ({"data_root": "datasets", "variant": "local"}, "node.data, node.data_root and node.variant"),
])
def test_node_data_with_on_board_off_is_refused_naming_both_fields(tmp_path: Path, given: dict, named: str,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """With trigger.on_board = false nothing reads node.data, node.data_root or node.variant: a mistyped spec, root,
    dataset name or variant was taken and ignored, and a node meant to personalize on board, given its data but
    on_board = false, only exchanged models, unsaid. The config is refused in one line naming the fields
    and trigger.on_board, as node.data missing with on_board = true is."""
    from fol.cli import main
    from swarmbase.tomlcheck import brief

    data = _base(tmp_path)
    data["node"].update(given)
    data["trigger"]["on_board"] = False
    expected = (f"node.toml: {named}: not read with trigger.on_board = false (the node only exchanges models, it "
                f"personalizes none); set trigger.on_board = true to personalize on board, or remove {named}")
    with pytest.raises(ConfigError) as err:
        AgentConfig.from_dict(data, base_dir=tmp_path, source="node.toml")
    assert str(err.value) == expected
    path = tmp_path / "node.toml"
    path.write_text(toml_text(data))
    assert main(["agent", "--config", str(path)]) == 2
    out = capsys.readouterr()
    assert out.out == ""
    assert out.err.splitlines() == [f"fol agent: error: {expected.replace('node.toml', brief(path), 1)}"]
    data["node"].pop("data"), data["node"].pop("data_root", None), data["node"].pop("variant", None)
    assert not AgentConfig.from_dict(data, base_dir=tmp_path, source="node.toml").trigger.on_board  # exchange only


def test_the_loopback_gives_an_exchange_only_node_no_data_and_no_variant(tmp_path: Path) -> None:
    """prepare_nodes wrote node.variant into every node's config; with trigger.on_board = false, which
    refuses it as it refuses node.data, no node's config was taken. An on-board node keeps both."""
    from fol.agent.loopback import prepare_nodes
    from fol.checkpoint import save_model
    from fol.models import ModelSpec, build_model

    spec = ModelSpec("cnn-small", num_classes=4)
    model = tmp_path / "m.safetensors"
    save_model(model, build_model(spec, seed=0), spec=spec, class_names=["a", "b", "c", "d"], producer="x")
    for trigger, variant in (({"on_board": False}, None), ({}, "fol-a")):
        nodes = prepare_nodes(tmp_path / str(bool(trigger)), 2, models={"drone-0": model, "drone-1": model},
                              trigger=trigger, variant="fol-a")
        for node in nodes:
            cfg = AgentConfig.from_dict(node.config, base_dir=node.folder, source="node.toml")
            assert cfg.trigger.on_board is (variant is not None)
            assert node.config["node"].get("variant") == variant and cfg.variant == (variant or "fol")
            assert ("data" in node.config["node"]) is (variant is not None)


@pytest.mark.parametrize("mutate", [
    lambda d: d["node"].update(listen="x" * 5000),
    lambda d: d["node"].update(control="tcp://" + "x" * 5000),
    lambda d: d["peers"][0].update(address="x" * 5000),
    lambda d: d.update(position={"source": "x" * 5000, "connection": "udpin:0.0.0.0:14550"}),
    lambda d: d.update(position={"source": "nmea", "connection": "udpin:" + "x" * 5000}),
    lambda d: d.update(position={"connection": "udpin:0.0.0.0:14550", "baud": "x" * 5000}),
])
def test_a_long_bad_value_is_shortened_in_its_one_line_error(tmp_path: Path, mutate) -> None:
    """A TOML string has no size limit; the message quoted it whole (5,000 characters)."""
    data = _base(tmp_path)
    mutate(data)
    with pytest.raises(ConfigError) as err:
        AgentConfig.from_dict(data, base_dir=tmp_path, source="node.toml")
    assert len(str(err.value)) < 400 and "\n" not in str(err.value) and "..." in str(err.value)


@pytest.mark.parametrize("field, value, needle", [
    # each drives an allocation or a count: FETCH credits (one dict entry and one message each, so a
    # tiny chunk_bytes with a huge window made one per byte of the payload), open transfer files,
    # a received model read whole into memory, or how long a stalled transfer / retry waits
    ("window_chunks", 10**9, "limits.window_chunks: expected an integer <= 1024, got 1000000000"),
    ("max_concurrent_transfers", 100_000, "limits.max_concurrent_transfers: expected an integer <= 256"),
    ("max_transfers_per_peer", 100_000, "limits.max_transfers_per_peer: expected an integer <= 256"),
    ("max_payload_bytes", 10**15, "limits.max_payload_bytes: expected an integer <= 4000000000"),
    ("chunk_bytes", 2**30, "limits.chunk_bytes: expected an integer <= 16777216"),
    ("transfer_timeout_s", 1e300, "limits.transfer_timeout_s: expected a positive number of at most 86400"),
    ("chunk_timeout_s", 1e9, "limits.chunk_timeout_s: expected a positive number of at most 3600"),
    ("offer_retry_s", 1e9, "limits.offer_retry_s: expected a positive number of at most 3600"),
    # disk caps and ages, unbounded before: a cap above any flight computer's disk caps nothing
    ("partial_max_bytes", 10**15, "limits.partial_max_bytes: expected an integer <= 1024000000000"),
    ("max_inbox_bytes", 2**62, "limits.max_inbox_bytes: expected an integer <= 10000000000000"),
    ("sync_bytes", 10**12, "limits.sync_bytes: expected an integer <= 4000000000"),
    ("partial_max_age_s", 1e300, "limits.partial_max_age_s: expected a positive number of at most 604800"),
    ("reject_memory_s", 1e9, "limits.reject_memory_s: expected a positive number of at most 86400"),
    # a minimum rate above any link would end every transfer after its first period
    ("min_transfer_rate_bytes_s", 10**12, "limits.min_transfer_rate_bytes_s: expected an integer <= 1000000000"),
    ("min_transfer_rate_bytes_s", 0, "limits.min_transfer_rate_bytes_s: expected an integer >= 1, got 0"),
    ("min_transfer_rate_bytes_s", "fast", "limits.min_transfer_rate_bytes_s: expected an integer"),
])
def test_limits_have_upper_bounds(tmp_path: Path, field: str, value: float, needle: str) -> None:
    from fol.agent.config import LIMITS_MAXIMA

    _check_upper_bound(tmp_path, "limits", LIMITS_MAXIMA, field, value, needle)


def _check_upper_bound(tmp_path: Path, table: str, maxima: dict, field: str, value: float, needle: str) -> None:
    """``[table] field = value`` is refused with ``needle``; the bound itself is taken."""
    data = _base(tmp_path)
    data[table] = {field: value}
    with pytest.raises(ConfigError, match="^node.toml: " + re.escape(needle)):
        AgentConfig.from_dict(data, base_dir=tmp_path, source="node.toml")
    data[table] = {field: maxima[field]}
    assert getattr(getattr(AgentConfig.from_dict(data, base_dir=tmp_path, source="node.toml"), table), field) \
        == maxima[field]


@pytest.mark.parametrize("field, value, needle", [
    # unbounded before: a round waiting for 10**9 models or 1e300 s never fires, and nothing said so
    ("models", 10**9, "trigger.models: expected an integer <= 1024, got 1000000000"),
    ("deadline_s", 1e300, "trigger.deadline_s: expected a number in 0..604800, got 1e+300"),
    ("deadline_s", 86400.0 * 30, "trigger.deadline_s: expected a number in 0..604800, got 2592000.0"),
])
def test_trigger_numbers_have_upper_bounds(tmp_path: Path, field: str, value: float, needle: str) -> None:
    from fol.agent.config import TRIGGER_MAXIMA

    _check_upper_bound(tmp_path, "trigger", TRIGGER_MAXIMA, field, value, needle)


def test_every_limit_has_an_upper_bound() -> None:
    from dataclasses import fields

    from fol.agent.config import LIMITS_MAXIMA, Limits

    assert sorted(LIMITS_MAXIMA) == sorted(f.name for f in fields(Limits))
    assert all(getattr(Limits(), name) <= top for name, top in LIMITS_MAXIMA.items())  # every default fits


def test_bad_fol_table_is_reported_with_the_file(tmp_path: Path) -> None:
    data = _base(tmp_path)
    data["fol"] = {"top_kk": 2}
    cfg = AgentConfig.from_dict(data, base_dir=tmp_path, source="node.toml")
    with pytest.raises(ConfigError, match=r"node.toml: fol: unknown key 'top_kk'"):
        cfg.fol_config()


def test_missing_or_broken_toml(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="agent config file not found"):
        AgentConfig.from_toml(tmp_path / "nope.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("[node\nid=")
    with pytest.raises(ConfigError, match="invalid TOML"):
        AgentConfig.from_toml(bad)


# ---------------------------------------------------------------------------- keys


def test_keypair_files_trust_and_revoke(tmp_path: Path) -> None:
    pub, sec = generate_keypair(tmp_path / "keys", "drone-1")
    assert stat.S_IMODE(sec.stat().st_mode) == 0o600
    pair = load_keypair(sec)
    assert load_public_key(pub) == pair.public and len(pair.secret) == 40
    assert "secret" not in pub.read_text()
    with pytest.raises(ConfigError, match="already exists"):
        generate_keypair(tmp_path / "keys", "drone-1")
    with pytest.raises(ConfigError, match="holds no secret key"):
        load_keypair(pub)

    store = tmp_path / "trusted"
    stored = trust_key(store, sec)  # a secret file given by mistake: only the public key is stored
    assert stored.name == "drone-1.key" and "secret" not in stored.read_text()
    ts = TrustStore(store)
    assert ts.reload() == {pair.public: "drone-1"}
    assert not ts.changed()
    other_pub, _ = generate_keypair(tmp_path / "keys", "drone-2")
    trust_key(store, other_pub)
    assert ts.changed() and set(ts.reload().values()) == {"drone-1", "drone-2"}
    with pytest.raises(ConfigError, match="already trusted as 'drone-1'"):
        trust_key(store, pub, name="alias")
    revoke_key(store, "drone-1")
    assert set(ts.reload().values()) == {"drone-2"}
    with pytest.raises(ConfigError, match="no trusted key"):
        revoke_key(store, "drone-1")


def test_malformed_key_file_is_a_config_error(tmp_path: Path) -> None:
    store = tmp_path / "trusted"
    store.mkdir()
    (store / "x.key").write_text("curve\n    public-key = \"short\"\n")
    with pytest.raises(ConfigError, match="not a CURVE key"):
        TrustStore(store).reload()
    with pytest.raises(ConfigError, match="trust store folder does not exist"):
        TrustStore(tmp_path / "none").reload()


def test_key_and_store_folders_that_cannot_be_made_are_config_errors(tmp_path: Path) -> None:
    """``fol keys gen --dir`` / ``trust --store`` under a file or in /proc: one
    line naming the folder (they were FileExistsError / FileNotFoundError tracebacks)."""
    (tmp_path / "afile").write_text("x")
    for folder, why in ((tmp_path / "afile", "exists and is not a folder"), (tmp_path / "afile" / "sub", "Not a"),
                        (Path("/proc/fol-no-such"), "No such file")):
        with pytest.raises(ConfigError, match=f"{folder}: cannot write the key pair there .*{why}"):
            generate_keypair(folder, "drone-1")
    pub, _ = generate_keypair(tmp_path / "keys", "drone-1")
    with pytest.raises(ConfigError, match="afile: cannot be used as a trust store folder .exists and is not a folder"):
        trust_key(tmp_path / "afile", pub)
    assert (tmp_path / "afile").read_text() == "x"


def test_a_trusted_key_is_written_by_the_crash_safe_writer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``trust_key`` renamed its own temporary file over the key without an fsync, so
    after a power cut the trust store could hold an empty or torn key file (which
    stops every later reload); it is now fsynced, file and folder, like every
    other output, and a failed write still leaves the old key and no temporary file."""
    pub, _ = generate_keypair(tmp_path / "keys", "drone-1")
    other, _ = generate_keypair(tmp_path / "keys2", "drone-1")
    store = tmp_path / "trusted"
    synced: list[int] = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real_fsync(fd))[1])
    stored = trust_key(store, pub)
    assert len(synced) >= 2  # the key file's bytes, then the folder's entry
    before = stored.read_text()
    revoke_key(store, "drone-1")
    stored.write_text(before)
    def failing_fsync(fd: int) -> None:
        raise OSError(5, "Input/output error")
    monkeypatch.setattr(os, "fsync", failing_fsync)
    with pytest.raises(ConfigError, match="drone-1.key: cannot write the trusted key .Input/output error"):
        trust_key(store, other)
    assert stored.read_text() == before and sorted(p.name for p in store.iterdir()) == ["drone-1.key"]


# ---------------------------------------------------------------------------- protocol


def test_protocol_frames_round_trip_and_reject_garbage() -> None:
    offer = P.Offer(sender="drone-1", model_id="drone-1:r0:abc", round=0, spec={"arch": "cnn-small"}, size=10,
                    sha256="a" * 64, chunk_bytes=4096)
    kind, header, payload = P.decode(P.encode(P.OFFER, offer.to_header()))
    assert kind == P.OFFER and payload is None and P.Offer.from_header(header) == offer
    kind, header, payload = P.decode(P.encode(P.CHUNK, {"model_id": "m", "offset": 0}, b"data"))
    assert payload == b"data"
    bad_frames = [
        [b"FOL/2", P.OFFER, b"{}"],
        [P.PROTOCOL, b"PICKLE", b"{}"],
        [P.PROTOCOL, P.OFFER, b"not json"],
        [P.PROTOCOL, P.OFFER, b"[1, 2]"],
        [P.PROTOCOL, P.OFFER, b'{"x": NaN}'],
        [P.PROTOCOL, P.CHUNK, b"{}"],  # CHUNK without payload
        [P.PROTOCOL, P.OFFER, b"{}", b"extra"],
        [P.PROTOCOL, P.OFFER, b" " * (P.MAX_HEADER_BYTES + 1)],
        [P.PROTOCOL, P.OFFER, b'{"a": ' * 9 + b"1" + b"}" * 9],  # nested deeper than MAX_HEADER_DEPTH
        [P.PROTOCOL, P.OFFER, b"[" * 5000 + b"]" * 5000],
        [P.PROTOCOL],
    ]
    for frames in bad_frames:
        with pytest.raises(P.ProtocolError):
            P.decode(frames)
    for change, needle in [({"version": 2}, "version"), ({"sha256": "xyz"}, "sha256"), ({"size": 0}, "size"),
                           # true and 1.0 equal 1 in Python: a retyped version was taken as version 1
                           ({"version": True}, "version true is not"), ({"version": 1.0}, "version 1.0 is not"),
                           ({"sender": "a/b"}, "sender"), ({"model_id": "../x"}, "model_id"),
                           ({"round": -1}, "round"), ({"spec": []}, "spec"),
                           # a round no deployment reaches (it named an inbox folder too long to create, so the
                           # failure was not remembered and the peer could make the node fetch it again and again)
                           ({"round": P.MAX_ROUND + 1}, r"'round' must be an integer in \[0, 1000000\]"),
                           ({"round": 10**300}, r"got 10000000000000000000\.\.\. \(301 digits\)$"),
                           ({"sender": "a/" * 30_000}, r"^header field 'sender' 'a/a/.{40,60}\.\.\. is invalid"),
                           ({"round": "x" * 60_000}, r"got 'xxxxxxxx.{40,60}\.\.\.$"), ({"size": 2**63}, "size"),
                           ({"spec": {"options": {"widths": [[1]]}}}, "spec"),
                           ({"spec": {"options": {"widths": list(range(300))}}}, "spec"),
                           # 1-byte chunks trickled just inside transfer_timeout_s held a slot for ever
                           ({"chunk_bytes": 1}, r"'chunk_bytes' must be an integer in \[4096, ")]:
        with pytest.raises(P.ProtocolError, match=needle):
            P.Offer.from_header({**offer.to_header(), **change})


def test_protocol_is_documented() -> None:
    doc = P.__doc__
    for word in ("OFFER", "FETCH", "CHUNK", "DONE", "SKIP", "BUSY", "REJECT", "credit", "confirmed offset",
                 "CURVE", "ZAP", "version"):
        assert word in doc


# ---------------------------------------------------------------------------- CLI


def _parser() -> argparse.ArgumentParser:
    from fol.agent.cli import add_agent_parser, add_keys_parser

    parser = argparse.ArgumentParser(prog="fol")
    sub = parser.add_subparsers(dest="command")
    add_agent_parser(sub)
    add_keys_parser(sub)
    return parser


def test_keys_cli_gen_trust_list_revoke(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    parser = _parser()

    def run(*argv: str) -> str:
        args = parser.parse_args(list(argv))
        assert args.func(args) == 0
        return capsys.readouterr().out

    run("keys", "gen", "drone-7", "--dir", str(tmp_path / "k"))
    assert (tmp_path / "k" / "drone-7.key_secret").exists()
    run("keys", "trust", str(tmp_path / "k" / "drone-7.key"), "--store", str(tmp_path / "t"))
    out = run("keys", "list", "--store", str(tmp_path / "t"))
    assert "drone-7" in out and load_public_key(tmp_path / "k" / "drone-7.key").decode() in out
    run("keys", "revoke", "drone-7", "--store", str(tmp_path / "t"))
    assert "no trusted peers" in run("keys", "list", "--store", str(tmp_path / "t"))


@pytest.mark.parametrize("kind", ["control", "long"])
def test_keys_cli_lines_name_the_key_files_through_brief(kind: str, tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """fol keys gen / trust / revoke printed the key files they wrote or removed ('wrote ... and ...',
    'trusted NAME -> ...', 'revoked NAME (removed ...)') as given, and a key file whose key is not 40 Z85
    characters was refused naming it as given: a newline or a terminal's escape in a folder's name went to the
    terminal as it is, a folder of 3,000 characters made a 3 kB line. Each names the file through brief(), a
    printed line keeping the file's own name at a cut (drone-7.key and drone-7.key_secret told apart)."""
    from swarmbase.tomlcheck import brief

    folder = odd_folder(tmp_path, kind)
    parser = _parser()

    def run(*argv: str) -> str:
        args = parser.parse_args(list(argv))
        assert args.func(args) == 0
        out = capsys.readouterr().out
        assert out.endswith("\n") and out.count("\n") == 1 and out[:-1].isprintable(), out
        assert len(out) < 600, out
        return out[:-1]

    keys, store = folder / "k", folder / "t"
    assert run("keys", "gen", "drone-7", "--dir", str(keys)) == (
        f"wrote {brief(keys / 'drone-7.key', keep_end=40)} (give it to peers) and {brief(keys / 'drone-7.key_secret', keep_end=40)} (keep "
        "it on this node only)")
    assert run("keys", "trust", str(keys / "drone-7.key"), "--store", str(store)) == (
        f"trusted drone-7 -> {brief(store / 'drone-7.key', keep_end=40)}")
    assert run("keys", "revoke", "drone-7", "--store", str(store)) == (
        f"revoked drone-7 (removed {brief(store / 'drone-7.key', keep_end=40)}); a running agent refuses it within about a "
        "second")
    bad, bad_secret = keys / "drone-8.key", keys / "drone-8.key_secret"  # keys that are not 40 Z85 characters
    bad.write_text('metadata\ncurve\n    public-key = "tooshort"\n')
    bad_secret.write_text('metadata\ncurve\n    public-key = "tooshort"\n    secret-key = "tooshort"\n')
    for load, file in ((lambda: trust_key(store, bad), bad), (lambda: load_keypair(bad_secret), bad_secret)):
        with pytest.raises(ConfigError) as refused:
            load()
        message = str(refused.value)
        assert message == f"{brief(file)} public-key: not a CURVE key (expected 40 Z85 characters)", message


def test_agent_cli_parses_ctl_commands(tmp_path: Path) -> None:
    parser = _parser()
    args = parser.parse_args(["agent", "ctl", "node.toml", "send", "drone-2"])
    assert args.func.__name__ == "_run_ctl" and args.action == "send" and args.peer == "drone-2"
    assert args.command == "agent"
    args = parser.parse_args(["agent", "--config", "node.toml"])
    assert args.func.__name__ == "_run_agent"
    with pytest.raises(SystemExit):
        parser.parse_args(["agent", "ctl", "node.toml", "explode"])


def test_ctl_without_running_agent_is_a_clear_error(tmp_path: Path) -> None:
    from fol.agent.node import control_request
    from swarmbase.tomlcheck import brief

    data = _base(tmp_path)
    cfg = AgentConfig.from_dict(data, base_dir=tmp_path, source="node.toml")
    with pytest.raises(ConfigError, match="no running agent for node drone-1"):
        control_request(cfg, "status")
    (tmp_path / "state").mkdir()
    (tmp_path / "state" / "agent.json").write_text(json.dumps({"control": "tcp://127.0.0.1:1", "pid": 1}))
    generate_keypair(tmp_path / "keys", "drone-1")
    with pytest.raises(ConfigError, match=r"did not answer within 0\.3 s"):  # not "within 0 s"
        control_request(cfg, "status", timeout_s=0.3)
    # the address and the pid as agent.json holds them, a newline or a terminal's escape in them
    # included: escaped, as every value read from a file is named, so the line stays one line
    endpoint = f"ipc://{tmp_path}/ctl\n2026-01-01 INFO forged\x1b[2J"
    (tmp_path / "state" / "agent.json").write_text(json.dumps({"control": endpoint, "pid": "1\x1b[2J"}))
    with pytest.raises(ConfigError) as refused:
        control_request(cfg, "status", timeout_s=0.3)
    assert str(refused.value) == (f"agent drone-1 at {brief(endpoint)} did not answer within 0.3 s (not running, or "
                                  "pid '1\\x1b[2J' crashed)"), str(refused.value)
    assert str(refused.value).isprintable()
    # one that cannot be connected: named cut, not whole (a 5,000-character address made a 5 kB line)
    (tmp_path / "state" / "agent.json").write_text(json.dumps({"control": "garbage" + "x" * 5000, "pid": 1}))
    with pytest.raises(ConfigError) as refused:
        control_request(cfg, "status", timeout_s=0.3)
    assert "control address 'garbagexxx" in str(refused.value) and len(str(refused.value)) < 400, str(refused.value)


def test_fol_cli_reports_a_bad_agent_config_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from fol.cli import main

    assert main(["agent", "--config", str(tmp_path / "missing.toml")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("fol agent: error:") and "agent config file not found" in err and "\n" not in err


@pytest.mark.parametrize("timeout", ["-1", "nan", "inf", "0", "1e-300", "0.099"])
def test_ctl_timeout_that_is_not_a_positive_number_is_refused_at_once(tmp_path: Path, timeout: str,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """A negative timeout used to poll forever (zmq: -1 = no timeout); nan / inf ended in a traceback;
    1e-300 was taken (a poll of 0 ms) and said the agent "did not answer within 1e-300 s"."""
    import time

    from fol.cli import main

    (tmp_path / "node.toml").write_text(toml_text(_base(tmp_path)))
    (tmp_path / "state").mkdir()
    (tmp_path / "state" / "agent.json").write_text(json.dumps({"control": "tcp://127.0.0.1:1", "pid": 1}))
    generate_keypair(tmp_path / "keys", "drone-1")
    t0 = time.monotonic()
    assert main(["agent", "ctl", str(tmp_path / "node.toml"), "status", f"--timeout={timeout}"]) == 2
    assert time.monotonic() - t0 < 5
    err = capsys.readouterr().err.strip()
    assert "--timeout" in err and "expected a number of seconds in [0.1, 86400]" in err and "\n" not in err


@pytest.mark.parametrize("runtime, needle", [("[1]", "no running agent"), ('{"control": 5}', "no running agent"),
                                             ('{"control": "garbage"}', "control address 'garbage'"),
                                             # a RecursionError traceback from json.loads
                                             ("[" * 100_000 + "]" * 100_000, "no running agent"),
                                             # read and parsed whole, however large (then no answer in 0.3 s)
                                             ('{"control": "tcp://127.0.0.1:1"}' + " " * 2**20, "no running agent")])
def test_ctl_with_a_malformed_runtime_file_is_one_line(tmp_path: Path, runtime: str, needle: str) -> None:
    """state/agent.json that is not an object, or holds no usable address, raised TypeError / zmq.ZMQError;
    one nested deep or grown huge is refused before it is walked or read."""
    from fol.agent.node import control_request

    cfg = AgentConfig.from_dict(_base(tmp_path), base_dir=tmp_path, source="node.toml")
    generate_keypair(tmp_path / "keys", "drone-1")
    (tmp_path / "state").mkdir()
    (tmp_path / "state" / "agent.json").write_text(runtime)
    with pytest.raises(ConfigError, match=needle):
        control_request(cfg, "status", timeout_s=0.3)


@pytest.mark.parametrize("kind", ["control", "long"])
@pytest.mark.parametrize("runtime, needle", [(None, "no running agent"),
                                             ('{"control": "garbage"}', "control address 'garbage'")])
def test_ctl_names_the_runtime_file_through_brief(tmp_path: Path, kind: str, runtime: str | None,
                                                  needle: str) -> None:
    """fol agent ctl's refusals of state/agent.json (no running agent; an address that cannot be connected)
    named the file as it is: a state folder of 3,000 characters made a 3 kB line, and a newline in its name
    split it. Each names it through brief(), as every other message of the agent names its files."""
    from fol.agent.node import control_request
    from swarmbase.tomlcheck import brief

    state = odd_folder(tmp_path, kind) / "state"
    cfg = AgentConfig.from_dict({**_base(tmp_path), "node": {**_base(tmp_path)["node"], "state_dir": str(state)}},
                                base_dir=tmp_path, source="node.toml")
    generate_keypair(tmp_path / "keys", "drone-1")
    if runtime is not None:
        state.mkdir()
        (state / "agent.json").write_text(runtime)
    with pytest.raises(ConfigError, match=needle) as caught:
        control_request(cfg, "status", timeout_s=0.3)
    message = str(caught.value)
    assert message.startswith(f"{brief(state / 'agent.json')}: ") and "\n" not in message and len(message) < 600


def test_a_missing_key_file_at_start_names_its_config_field_and_the_command_that_makes_it(tmp_path: Path) -> None:
    """DEPLOY.md: a mistake in node.toml stops the agent with one line naming the file and the field. A missing
    secret key or peer key named only the key file ('.../drone-2.key: public key file not found'), not the
    field it came from nor that 'fol keys trust' had not been run."""
    from fol.agent.node import Agent

    path = tmp_path / "node.toml"
    path.write_text(toml_text(_base(tmp_path)))
    cfg = AgentConfig.from_toml(path)
    with pytest.raises(ConfigError, match=r"^.*node.toml: node.secret_key: .*drone-1.key_secret: key file not found "
                                          r"\('fol keys gen drone-1 --dir <folder>' writes it\)$"):
        Agent(cfg, load_fol=False)
    generate_keypair(tmp_path / "keys", "drone-1")
    (tmp_path / "trusted").mkdir()
    with pytest.raises(ConfigError, match=r"^.*node.toml: peers\[0\].public_key: .*drone-2.key: public key file not "
                                          r"found \('fol keys trust drone-2.key --store .*trusted' adds it\)$"):
        Agent(cfg, load_fol=False)
    assert not (tmp_path / "state").exists()  # refused before the state folder was touched


@pytest.mark.parametrize("name", ["a\nb\x1b[2J.toml", "x" * 5000], ids=["control", "long"])
def test_every_message_names_the_config_file_through_brief(name: str, tmp_path: Path) -> None:
    """The config reader and the agent named the config file as it is (cfg.source, about ten messages of
    fol/agent/node.py: a key, node.data, node.model, node.listen, ...): a newline or a terminal's escape in its
    name went raw into the message and a 5,000-character name made a 5 kB line. It is named through brief(),
    once, as every other reader names a file."""
    from fol.agent.node import Agent
    from swarmbase.tomlcheck import brief

    def refusal(data: dict, start: bool = False) -> str:
        with pytest.raises(ConfigError) as refused:
            cfg = AgentConfig.from_dict(data, base_dir=tmp_path, source=name)
            Agent(cfg, load_fol=False) if start else cfg.fol_config()
        message = str(refused.value)
        assert message.startswith(f"{brief(name)}: ") and message.isprintable() and len(message) < 500, message
        return message

    assert refusal({}).endswith(": missing [node] table")
    assert "fol: unknown key 'topk'" in refusal({**_base(tmp_path), "fol": {"topk": 1}})
    assert "fol.top_k must be > 0" in refusal({**_base(tmp_path), "fol": {"top_k": 0}})
    assert "node.secret_key: " in refusal(_base(tmp_path), start=True)
    from fol.agent.node import _bind, _lock_state_dir

    blocked = tmp_path / "file"
    blocked.write_text("")
    for state_dir in [blocked / name] + [tmp_path / name] * (len(name) > 255):  # under a file; too long a name
        with pytest.raises(ConfigError) as refused:
            _lock_state_dir(state_dir, "drone-1")
        message = str(refused.value)
        assert message.startswith(f"{brief(state_dir)}: cannot be used") and message.isprintable(), message
        assert len(message) < 500, message
    if len(name) < 200:  # a name the file system takes: from_toml names it as from_dict does
        with pytest.raises(ConfigError) as refused:
            _bind(None, f"ipc://{blocked}", f"{brief(name)}: node.listen")  # type: ignore[arg-type]
        assert str(refused.value).isprintable(), refused.value
        (tmp_path / name).write_text(toml_text({**_base(tmp_path), "fol": {"topk": 1}}))
        with pytest.raises(ConfigError) as refused:
            AgentConfig.from_toml(tmp_path / name).fol_config()
        assert str(refused.value).startswith(f"{brief(tmp_path / name)}: fol: unknown key"), refused.value


def test_a_key_path_that_is_a_folder_or_an_open_secret_key_is_said_so(tmp_path: Path, caplog) -> None:
    """A folder where a key file belongs is said to be one (it was 'not found', then 'cannot read key file
    (Is a directory)' from pyzmq's open; now checked first, as every input file is); a secret key
    other users can read still loads, with a warning naming the file and the fix."""
    import logging
    import os

    (tmp_path / "d.key_secret").mkdir()
    with pytest.raises(ConfigError, match=r"d.key_secret: is a directory; expected a key file$"):
        load_keypair(tmp_path / "d.key_secret")
    (tmp_path / "p.key").mkdir()
    with pytest.raises(ConfigError, match=r"p.key: is a directory; expected a public key file$"):
        load_public_key(tmp_path / "p.key")
    _, secret = generate_keypair(tmp_path / "keys", "drone-1")
    with caplog.at_level(logging.WARNING, logger="fol.agent.keys"):
        load_keypair(secret)
        assert not caplog.records  # as 'fol keys gen' writes it: 0600
        os.chmod(secret, 0o644)
        load_keypair(secret)
    assert len(caplog.records) == 1 and "readable by other users (mode 644)" in caplog.records[0].getMessage()


@pytest.mark.parametrize("kind", ["long", "quotes", "control"])
def test_the_chmod_hint_for_an_open_secret_key_works_when_pasted(kind: str, tmp_path: Path, caplog) -> None:
    """The warning of a secret key other users can read gave the fix as 'chmod 600 <file>' with the file
    through brief(): a long path came out cut ('...'), one with a space or a quote unquoted, so the line pasted
    into a shell changed nothing or another file. The file is still named through brief(), but the command
    ends the line with the whole absolute path, shell-quoted: pasted, from any folder, it makes the key its
    owner's only. A path holding a newline or a terminal's escape (escaped when logged, so no command would
    name it) gets no command, and the line says why."""
    import logging
    import subprocess

    from swarmbase.tomlcheck import brief

    folder = {"long": lambda: odd_folder(tmp_path, "long"), "control": lambda: odd_folder(tmp_path, "control"),
              "quotes": lambda: tmp_path / "Bob's keys $(touch pwned)"}[kind]()
    _, secret = generate_keypair(os.path.relpath(folder / "keys") if kind == "quotes" else folder / "keys", "d-1")
    os.chmod(secret, 0o644)
    with caplog.at_level(logging.WARNING, logger="fol.agent.keys"):
        load_keypair(secret)
    [line] = [r.getMessage() for r in caplog.records]
    assert line.startswith(f"{brief(secret)}: the secret key is readable by other users (mode 644); "), line
    if kind == "control":
        assert "chmod 600 /" not in line and "\n" not in line and "\x1b" not in line, line
        assert line.endswith("no command given: its name holds a character a log line shows escaped"), line
        return
    command = line.partition(" as 'fol keys gen' writes it: ")[2]
    assert command.startswith("chmod 600 "), line
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    subprocess.run(["sh", "-c", command], cwd=elsewhere, check=True)  # as pasted, in another folder
    assert stat.S_IMODE(os.stat(secret).st_mode) == 0o600
    assert not (elsewhere / "pwned").exists()  # nothing of the name ran as a command


def test_a_peer_key_given_as_z85_text_is_used_even_when_it_holds_a_slash(tmp_path: Path) -> None:
    """Z85 has '/' among its 85 characters (about a third of all public keys hold one):
    such a key written inline in node.toml is the key, not a path under the config folder."""
    import zmq

    keys = [zmq.curve_keypair()[0] for _ in range(200)]
    with_slash = next(k for k in keys if b"/" in k)
    data = _base(tmp_path)
    data["peers"][0]["public_key"] = with_slash.decode()
    data["peers"].append({"id": "drone-3", "address": "tcp://127.0.0.1:5603", "public_key": "keys/drone-3.key"})
    cfg = AgentConfig.from_dict(data, base_dir=tmp_path)
    assert load_public_key(cfg.peers[0].public_key) == with_slash
    assert cfg.peers[1].public_key == str(tmp_path / "keys" / "drone-3.key")  # a path stays a path


def test_a_peer_key_of_z85_text_and_a_newline_is_not_taken_as_the_key(tmp_path: Path) -> None:
    """Review: the Z85 pattern ends in '$' and was applied with re.match, so 40 key characters and a final
    newline (a multi-line TOML string) were taken as the inline key, a newline in it; now the whole text
    must be the key's 40 characters, else it is a path (and a missing key file is said when it is loaded)."""
    import zmq

    key = zmq.curve_keypair()[0].decode()
    data = _base(tmp_path)
    data["peers"][0]["public_key"] = key
    assert AgentConfig.from_dict(data, base_dir=tmp_path).peers[0].public_key == key
    data["peers"][0]["public_key"] = key + "\n"
    assert AgentConfig.from_dict(data, base_dir=tmp_path).peers[0].public_key == str(tmp_path / (key + "\n"))


@pytest.mark.parametrize("text", ["curve\n    public-key\n", "curve\n    public-key = \"" + "a" * 40 + "\"\n    secret-key\n"])
def test_a_key_line_without_equals_sign_is_one_line_not_a_traceback(tmp_path: Path, text: str,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """pyzmq's certificate reader indexes the split of a key line; 'public-key' alone was an IndexError
    traceback from 'fol keys list', the agent's start and every trust-store reload."""
    from fol.cli import main

    store = tmp_path / "trusted"
    store.mkdir()
    (store / "drone-2.key").write_text(text)
    for load in (load_keypair, load_public_key):
        with pytest.raises(ConfigError, match="drone-2.key: not a ZeroMQ certificate"):
            load(store / "drone-2.key")
    with pytest.raises(ConfigError, match="drone-2.key: not a ZeroMQ certificate"):
        TrustStore(store).reload()
    assert main(["keys", "list", "--store", str(store)]) == 2
    err = capsys.readouterr().err
    assert "not a ZeroMQ certificate" in err and err.count("\n") == 1
    with pytest.raises(ConfigError, match=r"nothing.key: public key file not found$"):
        load_public_key(tmp_path / "nothing.key")
    with pytest.raises(ConfigError, match=r"nothing.key_secret: key file not found$"):
        load_keypair(tmp_path / "nothing.key_secret")


def test_keys_revoke_names_a_store_that_is_not_a_folder(tmp_path: Path) -> None:
    """``fol keys revoke P --store FILE`` said 'FILE/P.key: no trusted key', as if the store were
    a folder without that key; a missing store said the same. Now each says what the store is."""
    (tmp_path / "file").write_text("not a folder")
    with pytest.raises(ConfigError, match=r"file: trust store folder exists and is not a folder$"):
        revoke_key(tmp_path / "file", "drone-1")
    with pytest.raises(ConfigError, match=r"absent: trust store folder does not exist$"):
        revoke_key(tmp_path / "absent", "drone-1")


def test_keys_revoke_refuses_a_peer_id_that_leaves_the_store(tmp_path: Path) -> None:
    """``fol keys revoke ../drone-1 --store trusted`` removed trusted/../drone-1.key: a file
    outside the store (here the node's own public key beside its secret). The peer id is
    now checked as 'fol keys trust' checks it, and nothing is removed."""
    pub, _ = generate_keypair(tmp_path, "drone-1")
    store = tmp_path / "trusted"
    trust_key(store, pub)
    with pytest.raises(ConfigError, match=r"peer id '\.\./drone-1' is invalid"):
        revoke_key(store, "../drone-1")
    assert pub.exists() and (store / "drone-1.key").exists()


def test_a_folder_given_as_the_agent_config_says_an_agent_config_file(tmp_path: Path) -> None:
    """The one line read 'expected a agent config file'."""
    with pytest.raises(ConfigError, match=r": is a directory; expected an agent config file$"):
        AgentConfig.from_toml(tmp_path)


def test_position_log_file_resolves_against_the_config_folder(tmp_path: Path, monkeypatch) -> None:
    """A .tlog (or serial device) path in [position] is a path of the config like any other: relative to
    the TOML's folder, and a missing one is one line naming the file and the field, at load time."""
    data = _base(tmp_path)
    data["position"] = {"connection": "flight.tlog"}
    path = tmp_path / "node.toml"
    path.write_text(toml_text(data))
    monkeypatch.chdir("/")
    with pytest.raises(ConfigError, match=r"node\.toml: position\.connection: .*flight\.tlog: no such file or "
                                          r"serial device") as err:
        AgentConfig.from_toml(path)
    assert "\n" not in str(err.value)
    (tmp_path / "flight.tlog").write_bytes(b"")
    assert AgentConfig.from_toml(path).position.connection == str(tmp_path / "flight.tlog")
    data["position"]["connection"] = "udpin:127.0.0.1:14550"  # a network connection string: as written
    path.write_text(toml_text(data))
    assert AgentConfig.from_toml(path).position.connection == "udpin:127.0.0.1:14550"


def test_serial_position_port_without_pyserial_says_what_to_install(tmp_path: Path, monkeypatch) -> None:
    """pymavlink (the 'mavlink' extra) opens a serial port only with pyserial, which it does not require:
    the documented '/dev/ttyAMA0' must not fail later with "No module named 'serial'"."""
    import fol.agent.config as agent_config

    monkeypatch.setattr(agent_config, "_pyserial_installed", lambda: False)
    data = _base(tmp_path)
    data["position"] = {"connection": "/dev/null", "baud": 921600}  # a character device, like /dev/ttyAMA0
    with pytest.raises(ConfigError, match=r"position\.connection: '/dev/null' is a serial port.*pip install pyserial"):
        AgentConfig.from_dict(data, base_dir=tmp_path, source="node.toml")
    monkeypatch.setattr(agent_config, "_pyserial_installed", lambda: True)
    assert AgentConfig.from_dict(data, base_dir=tmp_path, source="node.toml").position.connection == "/dev/null"


def test_a_key_file_that_is_a_fifo_or_huge_is_refused_unread(tmp_path: Path) -> None:
    """A key file is a few hundred bytes of text: a FIFO (or /dev/zero) given as one blocked or grew without
    bound while pyzmq read it line by line; a huge file was read whole. Both are one line, without reading."""
    import threading

    fifo = tmp_path / "drone-2.key"
    os.mkfifo(fifo)
    result: dict[str, str] = {}

    def trust() -> None:
        try:
            trust_key(tmp_path / "trusted", fifo)
        except ConfigError as exc:
            result["error"] = str(exc)

    thread = threading.Thread(target=trust, daemon=True)
    thread.start()
    thread.join(2.0)
    if thread.is_alive():  # blocked in open(): give it a writer so that the thread ends, then fail
        with open(fifo, "w"):
            pass
        thread.join(2.0)
        pytest.fail("reading a FIFO given as a key file blocked")
    assert result["error"] == f"{fifo}: not a regular file; expected a public key file"
    big = tmp_path / "drone-3.key"
    big.write_bytes(b"x" * (1 << 20))
    with pytest.raises(ConfigError, match=r"drone-3\.key: 1048576 bytes; a public key file may have at most 65536$"):
        trust_key(tmp_path / "trusted", big)


def test_ctl_refuses_a_peer_id_its_command_would_ignore(tmp_path: Path, capsys) -> None:
    """'fol agent ctl node.toml status drone-2' ran status and dropped drone-2 without a word;
    only 'send' takes a peer id. Refused in one line before the configuration is read."""
    from fol.cli import main

    assert main(["agent", "ctl", str(tmp_path / "absent.toml"), "status", "drone-2"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["fol agent: error: fol agent ctl NODE status: takes no peer id (only 'send PEER' does), "
                   "got 'drone-2'"]



@pytest.mark.parametrize("peer", [" ", "x" * 5000, "a\nb", "bad\udcff"])
def test_ctl_send_refuses_an_invalid_peer_id_before_asking_the_agent(peer: str, tmp_path: Path, capsys) -> None:
    """'fol agent ctl node.toml send " "' (or a peer id of 5,000 characters, a newline, bytes that are not
    UTF-8) was sent to the agent, then waited for: 'did not answer within ...' when none runs. It is refused
    at once, in one line, by the rule every configured peer id follows (protocol.check_name)."""
    import time

    from fol.cli import main

    (tmp_path / "node.toml").write_text(toml_text(_base(tmp_path)))
    (tmp_path / "state").mkdir()
    (tmp_path / "state" / "agent.json").write_text(json.dumps({"control": "tcp://127.0.0.1:1", "pid": 1}))
    generate_keypair(tmp_path / "keys", "drone-1")
    t0 = time.monotonic()
    assert main(["agent", "ctl", str(tmp_path / "node.toml"), "send", peer, "--timeout", "5"]) == 2
    assert time.monotonic() - t0 < 2
    err = capsys.readouterr().err
    assert err.startswith("fol agent: error: fol agent ctl NODE send PEER: peer id ") and "is invalid" in err, err
    assert len(err.splitlines()) == 1 and len(err) < 300, err


def test_keys_gen_force_on_a_full_disk_keeps_the_old_pair_whole(tmp_path: Path) -> None:
    """``fol keys gen --force`` wrote each key file in place (pyzmq's ``create_certificates``: truncate, then
    write, no fsync): a disk that filled part-way (or a power cut) left a torn key file, and could leave a new
    secret key beside the old public one. The pair is now written as one set through the crash-safe writer: a
    failure part-way is one line and leaves the old pair byte for byte, and nothing else in the folder."""
    import resource
    import signal

    pub, sec = generate_keypair(tmp_path / "keys", "drone-1")
    before = {p.name: p.read_bytes() for p in (pub, sec)}
    limits = resource.getrlimit(resource.RLIMIT_FSIZE)
    handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails (EFBIG), like a full disk
    resource.setrlimit(resource.RLIMIT_FSIZE, (64, limits[1]))
    try:
        with pytest.raises(ConfigError, match=r"keys: cannot write the key pair there \(File too large\)"):
            generate_keypair(tmp_path / "keys", "drone-1", overwrite=True)
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, limits)
        signal.signal(signal.SIGXFSZ, handler)
    assert {p.name: p.read_bytes() for p in (tmp_path / "keys").iterdir()} == before
    pub2, sec2 = generate_keypair(tmp_path / "keys", "drone-1", overwrite=True)  # the disk has room again
    pair = load_keypair(sec2)
    assert load_public_key(pub2) == pair.public and sec2.read_bytes() != before["drone-1.key_secret"]
    assert stat.S_IMODE(sec2.stat().st_mode) == 0o600 and stat.S_IMODE(pub2.stat().st_mode) == 0o644
    assert sorted(p.name for p in (tmp_path / "keys").iterdir()) == ["drone-1.key", "drone-1.key_secret"]


def test_a_revocation_and_a_new_trust_store_are_made_durable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``fol keys revoke`` unlinked the key file without an fsync of the store folder: after a power cut the
    revoked key could be back, and trusted again at the next start. The folder is now fsynced after the removal,
    and a trust store folder ``fol keys trust`` creates is made durable in its parent; a removal that fails
    is one line naming the file."""
    import swarmbase.fileio

    pub, _ = generate_keypair(tmp_path / "keys", "drone-1")
    synced: list[Path] = []
    real = swarmbase.fileio.fsync_dir
    monkeypatch.setattr(swarmbase.fileio, "fsync_dir", lambda folder: (synced.append(Path(folder)), real(folder))[1])
    store = tmp_path / "trusted"
    trust_key(store, pub)
    assert tmp_path in synced  # the new store's entry in its parent
    synced.clear()
    revoke_key(store, "drone-1")
    assert synced == [store] and not any(store.iterdir())
    trust_key(store, pub)
    monkeypatch.setattr(os, "unlink", lambda *a, **k: (_ for _ in ()).throw(PermissionError(13, "Permission denied")))
    with pytest.raises(ConfigError, match=r"drone-1.key: cannot remove the trusted key \(Permission denied\)"):
        revoke_key(store, "drone-1")


@pytest.mark.parametrize("argv", [
    lambda t: ["keys", "trust", str(t / ("k" * 5000)), "--store", str(t / "trusted")],
    lambda t: ["keys", "trust", str(t / "peer" / "drone-2.key"), "--store", str(t / ("s" * 5000))],
    lambda t: ["keys", "trust", str(t / "peer" / "drone-2.key"), "--store", str(t / "f" / ("s" * 5000))],
], ids=["key", "store", "store-under-a-file"])
def test_keys_refusal_of_a_long_path_is_one_short_line(argv, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """fol keys trust wrote a 5,000-character key file or --store folder whole in its refusal (a 5 kB line);
    it is cut (brief), as every other keys refusal names a path."""
    from fol.cli import main

    generate_keypair(tmp_path / "peer", "drone-2")
    (tmp_path / "f").write_text("a file")
    assert main(argv(tmp_path)) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and len(err) < 600 and "s" * 300 not in err and "k" * 300 not in err, err[:300]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f", "peer"]


@pytest.mark.parametrize("name", ["", "a/b"])
def test_keys_trust_refuses_an_empty_or_invalid_name_naming_the_flag(name: str, tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """An empty --name (an unset shell variable in --name "$PEER") was taken as the name left out: the key
    was trusted under its file's name, exit 0. It is refused as any invalid peer id, naming --name."""
    from fol.cli import main

    generate_keypair(tmp_path / "peer", "drone-2")
    argv = ["keys", "trust", str(tmp_path / "peer" / "drone-2.key"), "--store", str(tmp_path / "trusted")]
    assert main([*argv, "--name", name]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"fol keys: error: --name: peer id '{name}' is invalid") and len(err.splitlines()) == 1, err
    assert not (tmp_path / "trusted").exists()
    assert main(argv) == 0 and (tmp_path / "trusted" / "drone-2.key").is_file()  # no --name: the file's name


def test_toml_text_writes_any_string_as_tomllib_reads_it_back() -> None:
    """Review: toml_text wrote a string's newline, tab, escape and DEL characters as they were, which a TOML
    basic string may not hold, so a config naming a folder with a newline in its name could not be read back
    (tomllib: 'Illegal character'). Every character is now written as TOML escapes it, and a lone surrogate
    (an undecodable byte of a file name), which no TOML string can hold, is refused naming it."""
    import tomllib

    odd = 'a\nb\tc\x1bd\x7fe\x00f"g\\h\ri\x0cj\x08k é ✓'
    data = {"node": {"id": "n1", "state_dir": odd, "list": [odd, "plain"]}, "peers": [{"id": "n2", "address": odd}]}
    back = tomllib.loads(toml_text(data))
    assert back["node"]["state_dir"] == odd and back["node"]["list"] == [odd, "plain"]
    assert back["peers"] == [{"id": "n2", "address": odd}]
    with pytest.raises(ValueError, match="U\\+DCFF"):
        toml_text({"node": {"state_dir": "x\udcff"}})
