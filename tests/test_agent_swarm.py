"""Node agents with on-board personalization, on loopback: three agents exchange
and personalize; triggers (deadline, control command); an agent killed
(SIGKILL) mid-round and restarted loses nothing and personalizes once."""

from __future__ import annotations

import functools
import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import torch


from fol.agent.config import AgentConfig
from fol.agent.keys import load_keypair
from fol.agent.loopback import LoopbackSwarm, prepare_nodes, toml_text
from fol.agent.node import Agent, control_request
from fol.agent.transfer import offer_for_file, send_model
from fol.checkpoint import load_model, save_model
from fol.errors import ConfigError
from fol.models import ModelSpec, build_model
from fol.nodedata import load_node_data, parse_node_data
from fol.train import evaluate
from _names import odd_folder
from _processes import REPO, repo_env
from _waiting import wait_until

_wait = functools.partial(wait_until, poll_s=0.1)  # each poll is a request to an agent process

TINY_FOL = {"finetune_epochs": 1, "post_finetune_epochs": 1, "gate_epochs": 1, "distill_epochs": 1,
            "pretrain_epochs": 2, "ensemble_steps": 50, "top_k": 2}
DATA = "dataset=synthetic-hurricane,nodes={n},node={i},psi=0.5,per_node=120,size=400"


@pytest.fixture(scope="module")
def pretrained(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The three drones' pretrained round-0 models, trained once for the module."""
    nodes = prepare_nodes(tmp_path_factory.mktemp("pretrained"), 3, data=DATA, fol=TINY_FOL)
    return {n.node: n.model for n in nodes}


def test_three_agents_exchange_models_and_each_personalizes(tmp_path: Path, pretrained: dict[str, Path]) -> None:
    nodes = prepare_nodes(tmp_path, 3, data=DATA, fol=TINY_FOL, models=pretrained)
    names = [n.node for n in nodes]
    with LoopbackSwarm(nodes) as swarm:
        statuses = swarm.wait_finished(timeout_s=120)
    for files in nodes:
        status = statuses[files.node]
        others = sorted(set(names) - {files.node})
        assert status["finished"] and status["round"] == 2 and status["last_error"] is None
        (entry,) = status["history"]
        assert entry["trigger"] == "models" and sorted(entry["used"]) == others
        assert {o["peer"]: o["status"] for o in status["outbox"]} == {o: "delivered" for o in others}
        state_dir = files.folder / "state"
        # The inbox holds the peers' round-0 models byte for byte.
        for other in nodes:
            if other.node != files.node:
                got = (state_dir / "inbox" / "round-0" / f"{other.node}.safetensors").read_bytes()
                assert got == (other.folder / "state" / "models" / "round-0.safetensors").read_bytes()
        # The personalized model is in the safe format with its report; the previous one is kept.
        new = load_model(state_dir / "models" / "round-1.safetensors")
        assert new.card.round == 1 and new.card.producer == files.node
        assert new.card.extra["split_seed"] == "node_seed"  # the rule its data was split by (its pretraining's)
        assert (state_dir / "models" / "round-0.safetensors").exists()
        report = json.loads((state_dir / "reports" / "round-1.json").read_text())
        assert report["node"] == files.node and report["round"] == 1 and report["trigger"] == "models"
        assert sorted(r["name"] for r in report["received"] if r["used"]) == others
        # Neighbours were used, so the deployed model is the personalized one, not the local model kept as round 0
        # (on these tiny splits their accuracies can coincide, so compare the parameters).
        assert not report["kept_local"]
        old_state = load_model(state_dir / "models" / "round-0.safetensors").model.state_dict()
        assert any(not torch.equal(t, old_state[k]) for k, t in new.model.state_dict().items())
        # The reported accuracy is that of the model deployed, i.e. the saved round-1 file, on this node's splits.
        cfg = AgentConfig.from_dict(files.config, base_dir=files.folder, source=f"{files.node} config")
        data = load_node_data(parse_node_data(cfg.data, root=cfg.data_root))
        assert report["accuracy"]["deployed"] == {"test": evaluate(new.model.eval(), *data.test.tensors()).accuracy,
                                                  "val": evaluate(new.model.eval(), *data.val.tensors()).accuracy}
        state = json.loads((state_dir / "state.json").read_text())
        assert state["current_model"] == "models/round-1.safetensors" and state["finished"]


def test_two_rounds_keeping_earlier_models_on_disk(tmp_path: Path, pretrained: dict[str, Path]) -> None:
    """``keep_received = "all"`` on agents: round 1's aligned (and pruned)
    neighbours go to ``models/pool/round-1/`` and compete again in round 2,
    beside the students the peers sent in round 2."""
    nodes = prepare_nodes(tmp_path, 3, data=DATA, fol={**TINY_FOL, "rounds": 2, "keep_received": "all"},
                          models=pretrained)
    with LoopbackSwarm(nodes) as swarm:
        statuses = swarm.wait_finished(timeout_s=180)
    for files in nodes:
        status = statuses[files.node]
        assert status["finished"] and status["round"] == 3 and status["last_error"] is None
        state_dir = files.folder / "state"
        others = sorted(n.node for n in nodes if n.node != files.node)
        kept = sorted(load_model(p).card.extra["candidate"]
                      for p in (state_dir / "models" / "pool" / "round-1").glob("candidate-*.safetensors"))
        assert kept == [f"{o} (round 1)" for o in others]
        report = json.loads((state_dir / "reports" / "round-2.json").read_text())
        names = [c["name"] for c in report["candidates"]]
        assert names[0] == f"{files.node} (own)"  # then the kept ones, then this round's, each in arrival order
        assert sorted(names[1:3]) == kept and sorted(names[3:]) == others
        assert [c["round"] for c in report["candidates"]] == [0, 1, 1, 0, 0]
        assert sorted(p.name for p in (state_dir / "models" / "pool" / "round-2").iterdir()) == [
            "candidate-0.safetensors", "candidate-1.safetensors"]


def _solo_node(tmp_path: Path, pretrained: dict[str, Path], trigger: dict[str, Any]) -> tuple[list[Any], AgentConfig]:
    nodes = prepare_nodes(tmp_path, 3, data=DATA, fol=TINY_FOL, models=pretrained,
                          trigger={"auto_send": False, **trigger})
    files = nodes[0]
    return nodes, AgentConfig.from_dict(files.config, base_dir=files.folder, source="drone-0 config")


def test_deadline_trigger_keeps_the_model_when_nothing_arrived(tmp_path: Path, pretrained: dict[str, Path]) -> None:
    _, cfg = _solo_node(tmp_path, pretrained, {"deadline_s": 0.5})
    agent = Agent(cfg).start()
    try:
        status = _wait(lambda: (s := agent.request("status"))["finished"] and s, 60, "deadline personalization")
    finally:
        agent.stop()
    (entry,) = status["history"]
    assert entry["trigger"] == "deadline" and entry["kept_local"] and entry["used"] == []
    assert load_model(cfg.state_dir / "models" / "round-1.safetensors").card.round == 1


def test_control_command_personalizes_with_what_arrived(tmp_path: Path, pretrained: dict[str, Path]) -> None:
    nodes, cfg = _solo_node(tmp_path, pretrained, {})
    agent = Agent(cfg).start()
    try:
        with pytest.raises(ConfigError, match="another agent is already running on this state folder"):
            Agent(cfg)
        sender = nodes[1]
        # A valid model for another task (other classes) is refused: it could only waste a round.
        spec = ModelSpec("cnn-small", num_classes=3)
        alien = save_model_file(tmp_path / "alien.safetensors", spec, ["a", "b", "c"], sender.node)
        res = send_model(agent.listen_endpoint, alien, offer_for_file(sender.node, alien, 65536),
                         keys=load_keypair(sender.secret_key), server_key=agent.keys.public, timeout_s=20)
        assert res.status == "rejected" and "of no use to this node" in res.detail
        model = sender.folder / "pretrained.safetensors"
        res = send_model(agent.listen_endpoint, model, offer_for_file(sender.node, model, 65536),
                         keys=load_keypair(sender.secret_key), server_key=agent.keys.public, timeout_s=20)
        assert res.status == "delivered"
        time.sleep(0.3)
        status = control_request(cfg, "status")  # over the CURVE control socket, with the node's own keys
        assert status["received_this_round"] == [sender.node] and status["expected_models"] == 2
        assert status["history"] == []  # 1 of Q = 2: not triggered
        assert control_request(cfg, "personalize")["started"]
        status = _wait(lambda: (s := control_request(cfg, "status"))["finished"] and s, 60, "personalization")
        with pytest.raises(ConfigError) as done:  # the node named once ('agent X: X: ...' before)
            control_request(cfg, "personalize")
        assert str(done.value) == f"agent {cfg.node_id}: all 1 round(s) are done"
    finally:
        agent.stop()
    (entry,) = status["history"]
    assert entry["trigger"] == "command" and entry["used"] == [sender.node]


def save_model_file(path: Path, spec: ModelSpec, classes: list[str], producer: str) -> Path:
    save_model(path, build_model(spec, seed=0), spec=spec, class_names=classes, producer=producer)
    return path


def _start_agent(config: Path, log: Path) -> subprocess.Popen:
    env = repo_env(OMP_NUM_THREADS="2")
    return subprocess.Popen([sys.executable, "-m", "fol.cli", "agent", "--config", str(config)], cwd=REPO, env=env,
                            stdout=subprocess.DEVNULL, stderr=open(log, "ab"))


def _runtime(state_dir: Path) -> dict[str, Any] | None:
    try:
        return json.loads((state_dir / "agent.json").read_text())
    except (OSError, ValueError):
        return None


def test_agent_killed_mid_round_restarts_without_losing_or_double_counting(
    tmp_path: Path, pretrained: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    from fol.cli import main

    nodes = prepare_nodes(tmp_path, 3, data=DATA, fol=TINY_FOL, models=pretrained, trigger={"auto_send": False},
                          limits={"chunk_bytes": 4096, "sync_bytes": 4096, "chunk_timeout_s": 0.5})
    me, one, two = nodes
    # drone-0 listens on an ephemeral port and only receives (drone-1 and drone-2 are played by this test).
    toml = me.folder / "node.toml"
    toml.write_text(toml_text({**me.config, "peers": []}))
    cfg = AgentConfig.from_toml(toml)
    state_dir = cfg.state_dir
    server_key = load_keypair(me.secret_key).public
    log = tmp_path / "agent.log"
    endpoint = ""

    def send(files: Any, **kw: Any) -> Any:
        model = files.folder / "pretrained.safetensors"
        return send_model(endpoint, model, offer_for_file(files.node, model, 4096),
                          keys=load_keypair(files.secret_key), server_key=server_key, timeout_s=20, **kw)

    proc = _start_agent(toml, log)  # 'fol agent --config node.toml' in its own process
    try:
        endpoint = _wait(lambda: _runtime(state_dir), 60, f"agent start (log: {log})")["listen"]
        assert send(one).status == "delivered"
        cut = send(two, stop_after_chunks=3)  # the second model is half-way when the agent dies
        assert cut.status == "interrupted"
        # The receiver confirms (fsync + offset file) what it wrote.
        _wait(lambda: [p for p in (state_dir / "partial").glob("*.json")
                       if json.loads(p.read_text())["confirmed"] == 3 * 4096], 10, "confirmed offset")
        proc.send_signal(signal.SIGKILL)  # a crash: no clean-up at all
        assert proc.wait(10) == -signal.SIGKILL
        state = json.loads((state_dir / "state.json").read_text())
        assert [r["sender"] for r in state["received"].values()] == [one.node] and state["history"] == []

        # Restart from the same state folder (in this process, to save a second interpreter start-up).
        agent = Agent(AgentConfig.from_toml(toml)).start()
        endpoint = agent.listen_endpoint
        try:
            again = send(one)
            assert again.status == "skipped" and "duplicate" in again.detail  # still counted once
            resumed = send(two)
            assert resumed.status == "delivered" and resumed.first_fetch_offset == 3 * 4096  # resumed
            status = _wait(lambda: (s := control_request(cfg, "status"))["finished"] and s, 90, "personalization")
            assert main(["agent", "ctl", str(toml), "status"]) == 0  # the operator's view
            assert "finished: 1 of 1 round(s) done" in capsys.readouterr().out
        finally:
            agent.stop()
        (entry,) = status["history"]
        assert sorted(entry["used"]) == [one.node, two.node] and entry["trigger"] == "models"
        assert sorted(p.name for p in (state_dir / "reports").iterdir()) == ["round-1.json"]
        assert len(json.loads((state_dir / "state.json").read_text())["received"]) == 2
        for files in (one, two):
            got = (state_dir / "inbox" / "round-0" / f"{files.node}.safetensors").read_bytes()
            assert got == (files.folder / "pretrained.safetensors").read_bytes()
        assert not (state_dir / "agent.json").exists()  # removed by the clean stop
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


def test_loopback_exchange_reads_a_damaged_report_as_one_line(tmp_path: Path, monkeypatch: Any) -> None:
    """run_loopback_exchange read each node's round report with json.loads: a report damaged on
    disk (here nested 100,000 deep) ended in a RecursionError traceback, and a huge one was read
    whole. It goes through the bounded reader now: one FOLError line naming the file."""
    import fol.agent.loopback as loopback
    from fol.errors import FOLError

    report = tmp_path / "drone-0" / "state" / "reports" / "round-1.json"
    report.parent.mkdir(parents=True)
    files = loopback.NodeFiles("drone-0", tmp_path / "drone-0", tmp_path / "k", tmp_path / "k.pub",
                               tmp_path / "m", {})

    class FinishedSwarm:  # stands in for the agents: they finished and wrote the report above
        def __init__(self, nodes: Any) -> None:
            pass

        def __enter__(self) -> "FinishedSwarm":
            return self

        def __exit__(self, *exc: Any) -> None:
            pass

        def wait_finished(self, timeout_s: float) -> dict[str, Any]:
            return {"drone-0": {"history": [{"report": "reports/round-1.json"}]}}

    monkeypatch.setattr(loopback, "prepare_nodes", lambda workdir, n, **kw: [files])
    monkeypatch.setattr(loopback, "LoopbackSwarm", FinishedSwarm)
    report.write_text(json.dumps({"node": "drone-0", "round": 1}))
    assert loopback.run_loopback_exchange(tmp_path, 1) == {"drone-0": {"node": "drone-0", "round": 1}}
    report.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(FOLError, match=r"round-1\.json: .*nested deeper than") as info:
        loopback.run_loopback_exchange(tmp_path, 1)
    assert "\n" not in str(info.value)
    report.write_text("[1, 2")
    with pytest.raises(FOLError, match=r"round-1\.json: "):
        loopback.run_loopback_exchange(tmp_path, 1)


@pytest.mark.parametrize("kind", ["control", "long"])
def test_a_damaged_report_is_named_through_brief(kind: str, tmp_path: Path) -> None:
    """read_report named a damaged round report as it is: a newline or a terminal's escape in the work
    folder's name went into the message as it is, a folder of 3,000 characters made a 3 kB line. It is named
    through brief(), as the bounded reader's own refusals name it."""
    from fol.agent.loopback import read_report
    from fol.errors import FOLError
    from swarmbase.tomlcheck import brief

    folder = odd_folder(tmp_path, kind)
    report = folder / "round-1.json"
    for text, says in (("[1, 2", "cannot read the round report ("), ("[1, 2]", "expected a round report (a JSON "
                                                                                "object), got list")):
        report.write_text(text)
        with pytest.raises(FOLError) as info:
            read_report(report)
        message = str(info.value)
        assert message.startswith(f"{brief(report)}: {says}") and message.isprintable(), message
        assert len(message) < 400, message


def test_fixed_ports_writes_each_nodes_config_for_its_own_fol_agent(tmp_path: Path,
                                                                    pretrained: dict[str, Path]) -> None:
    """``prepare_nodes(fixed_ports=True)``: every node listens on its own port chosen now, every peer
    is addressed there, and ``<folder>/node.toml`` is the config ``fol agent --config`` reads."""
    nodes = prepare_nodes(tmp_path, 3, data=DATA, fol=TINY_FOL, models=pretrained, fixed_ports=True)
    listen = {f.node: f.config["node"]["listen"] for f in nodes}
    assert len(set(listen.values())) == 3 and all(a.startswith("tcp://127.0.0.1:") for a in listen.values())
    for files in nodes:
        cfg = AgentConfig.from_toml(files.config_path)
        assert cfg.node_id == files.node and cfg.listen == listen[files.node]
        assert {p.id: p.address for p in cfg.peers} == {o: a for o, a in listen.items() if o != files.node}
