"""examples/drone_swarm: ``run_swarm.py`` runs at a tiny size (three agents on
127.0.0.1, keys, pretraining, one exchange, on-board FOL), and the systemd unit
agrees with the node template it deploys (the command, the working folder, the
one folder it may write)."""

from __future__ import annotations

import configparser
import os
import signal
import subprocess
import sys
from pathlib import Path

from fol.checkpoint import load_model

FOLDER = Path(__file__).resolve().parents[1] / "examples" / "drone_swarm"


def test_run_swarm_personalizes_every_drone(tmp_path: Path) -> None:
    out = tmp_path / "run"
    proc = subprocess.Popen([sys.executable, str(FOLDER / "run_swarm.py"), "--out", str(out), "--per-node", "60",
                             "--pool-size", "600", "--epochs", "1", "--timeout", "240"], cwd=tmp_path, start_new_session=True,
                            env={**os.environ, "OMP_NUM_THREADS": "1"},
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        log, _ = proc.communicate(timeout=360)
    finally:
        if proc.poll() is None:  # stop the script and the agents it started
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 0, log[-3000:]
    for k in range(3):
        state = out / f"drone-{k}" / "state"
        model = load_model(state / "models" / "round-1.safetensors")
        assert model.card.round == 1 and model.card.producer == f"drone-{k}"
        assert (state / "reports" / "round-1.json").is_file()
        assert f"drone-{k}: round 1 done, used models from" in log
    assert not list(out.glob("drone-*/keys/*.key_secret"))[0].stat().st_mode & 0o077  # the secret stays private


def test_run_swarms_children_get_the_repository_on_their_path_and_not_the_working_folder(monkeypatch) -> None:
    """With PYTHONPATH unset, _env() gave the children 'REPO:' (a trailing empty entry: the working folder,
    whose modules then shadowed the repository's); a PYTHONPATH the user set is kept after the repository."""
    import importlib.util

    monkeypatch.setattr(sys, "path", list(sys.path))  # the script puts the repository first: undone after
    spec = importlib.util.spec_from_file_location("run_swarm_example", FOLDER / "run_swarm.py")
    run_swarm = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(run_swarm)
    repo = str(FOLDER.parents[1])
    for given, expected in ((None, [repo]), ("", [repo]), (f"/opt/a{os.pathsep}/opt/b", [repo, "/opt/a", "/opt/b"])):
        if given is None:
            monkeypatch.delenv("PYTHONPATH", raising=False)
        else:
            monkeypatch.setenv("PYTHONPATH", given)
        assert run_swarm._env()["PYTHONPATH"].split(os.pathsep) == expected, given


def test_the_systemd_unit_matches_the_node_template() -> None:
    unit = configparser.ConfigParser(strict=False, interpolation=None)
    unit.optionxform = str
    unit.read_string((FOLDER / "fol-agent.service").read_text())
    service = unit["Service"]
    workdir = Path(service["WorkingDirectory"])
    command = service["ExecStart"].split()
    assert command[1:3] == ["agent", "--config"] and Path(command[0]).name == "fol"
    assert Path(command[3]).parent == workdir
    state_dir = next(line.split("=", 1)[1].split("#")[0].strip().strip('"')
                     for line in (FOLDER / "node.toml.template").read_text().splitlines()
                     if line.startswith("state_dir"))
    # the agent writes its state folder only, and that folder is the unit's one writable path
    assert Path(service["ReadWritePaths"]) == workdir / state_dir
    assert service["ProtectSystem"] == "strict" and service["Type"] == "notify"
    deploy = (FOLDER / "DEPLOY.md").read_text()
    assert f"mkdir -p {workdir.name}/{state_dir}" in deploy  # created before the unit starts, as it must be


def test_the_template_filled_as_deploy_md_says_is_a_valid_node_config(tmp_path: Path) -> None:
    """DEPLOY.md step 2: every '$' placeholder of the template replaced, then its [position] block added:
    AgentConfig accepts the file (the unit's ReadWritePaths is its state folder), and an ipc:// address
    written as DEPLOY.md says resolves inside that folder, the one the unit may write."""
    import re
    import string

    from fol.agent.config import AgentConfig

    deploy = (FOLDER / "DEPLOY.md").read_text()
    template = (FOLDER / "node.toml.template").read_text()
    named = set(re.findall(r"\$(\w+)", template))
    assert all(f"`${name}`" in deploy for name in named)  # DEPLOY.md says what to put in each
    position = next(block for block in re.findall(r"```toml\n(.*?)```", deploy, re.S) if 'source = "mavlink"' in block)
    ipc = re.search(r'`(control = "ipc://[^`]+")`', deploy).group(1)
    peers = '[[peers]]\nid = "drone-2"\naddress = "tcp://10.0.0.2:5601"\n'
    text = string.Template(template).substitute(node_id="drone-1", host="10.0.0.1", port=5601, peers=peers,
                                                data="dataset=synthetic-hurricane,nodes=3,node=0", models=1,
                                                deadline=600.0, fol="rounds = 1")
    text = re.sub(r"^control = .*$", ipc, text, flags=re.M) + "\n" + position
    (tmp_path / "node.toml").write_text(text)
    cfg = AgentConfig.from_toml(tmp_path / "node.toml")
    assert cfg.node_id == "drone-1" and cfg.listen == "tcp://10.0.0.1:5601" and cfg.fol == {"rounds": 1}
    assert cfg.secret_key == tmp_path / "keys" / "drone-1.key_secret"  # where 'fol keys gen drone-1 --dir keys' writes
    assert cfg.position is not None and cfg.position.connection == "udpin:0.0.0.0:14550"
    assert [p.public_key for p in cfg.peers] == [str(tmp_path / "trusted" / "drone-2.key")]  # 'fol keys trust'
    unit = configparser.ConfigParser(strict=False, interpolation=None)
    unit.read_string((FOLDER / "fol-agent.service").read_text())
    assert cfg.state_dir.relative_to(tmp_path) == Path(unit["Service"]["ReadWritePaths"]).relative_to(
        unit["Service"]["WorkingDirectory"])
    assert cfg.control.startswith(f"ipc://{cfg.state_dir}/")


def _service_entries() -> list[tuple[str, str]]:
    """The unit's [Service] lines as (key, value), a repeated key (DeviceAllow=) once per line."""
    entries, section = [], None
    for line in (FOLDER / "fol-agent.service").read_text().splitlines():
        line = line.strip()
        if line.startswith("["):
            section = line
        elif section == "[Service]" and line and not line.startswith("#"):
            key, value = line.split("=", 1)
            entries.append((key.strip(), value.strip()))
    return entries


def test_the_systemd_unit_is_hardened_and_every_directive_is_explained() -> None:
    """The hardening the agent keeps working under (DEPLOY.md step 3), its start timeout, and a reason in
    DEPLOY.md for each of the unit's [Service] directives."""
    entries = _service_entries()
    service = dict(entries)
    expected = {"NoNewPrivileges": "true", "CapabilityBoundingSet": "", "ProtectSystem": "strict",
                "ProtectHome": "true", "PrivateTmp": "true", "ProtectKernelTunables": "true",
                "ProtectKernelModules": "true", "ProtectKernelLogs": "true", "ProtectControlGroups": "true",
                "RestrictNamespaces": "true", "LockPersonality": "true", "SystemCallFilter": "@system-service",
                "SystemCallErrorNumber": "EPERM", "SystemCallArchitectures": "native", "UMask": "0077",
                "DevicePolicy": "closed", "Type": "notify"}
    assert {key: service.get(key) for key in expected} == expected
    # ZeroMQ binds a tcp:// address after listing the interfaces (netlink); nothing else is needed
    assert set(service["RestrictAddressFamilies"].split()) == {"AF_INET", "AF_INET6", "AF_UNIX", "AF_NETLINK"}
    assert "MemoryDenyWriteExecute" not in service  # torch's oneDNN makes the kernels it compiles executable
    # the serial ports a MAVLink flight controller or an NMEA receiver is on, and no other device
    assert {value for key, value in entries if key == "DeviceAllow"} == {
        "char-ttyS rw", "char-ttyUSB rw", "char-ttyACM rw", "char-ttyAMA rw"}
    # READY=1 comes after the imports and loading node.data: longer than systemd's default 90 s
    assert int(service["TimeoutStartSec"]) >= 300
    # the one writable path is the configured state folder
    state_dir = next(line.split("=", 1)[1].split("#")[0].strip().strip('"')
                     for line in (FOLDER / "node.toml.template").read_text().splitlines()
                     if line.startswith("state_dir"))
    assert service["ReadWritePaths"] == str(Path(service["WorkingDirectory"]) / state_dir)
    deploy = (FOLDER / "DEPLOY.md").read_text()
    what_to_run = {"User", "Group", "WorkingDirectory", "Environment", "ExecStart", "NotifyAccess"}
    assert not [key for key, _ in entries if key not in what_to_run and f"`{key}=" not in deploy]


def test_the_systemd_unit_passes_systemd_analyze(tmp_path: Path) -> None:
    """``systemd-analyze verify`` reports nothing about the unit (an unknown key or a bad value is only a
    warning, so the test reads the output), and the exposure rating DEPLOY.md quotes is the one this
    systemd gives (when it is the version quoted)."""
    import re
    import shutil

    import pytest

    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze is not installed")
    stub = tmp_path / "fol"  # verify checks that ExecStart's program exists and is executable
    stub.write_text("#!/bin/sh\n")
    stub.chmod(0o755)
    text = (FOLDER / "fol-agent.service").read_text()
    unit = tmp_path / "fol-agent.service"
    unit.write_text(re.sub(r"^ExecStart=\S+", f"ExecStart={stub}", text, count=1, flags=re.M))
    verify = subprocess.run([analyze, "verify", "--man=no", str(unit)], capture_output=True, text=True, timeout=60)
    about_unit = [line for line in (verify.stdout + verify.stderr).splitlines() if "fol-agent" in line]
    assert verify.returncode == 0 and not about_unit, verify.stdout + verify.stderr
    deploy = " ".join((FOLDER / "DEPLOY.md").read_text().split())
    quoted = re.search(r"`systemd-analyze security --offline=yes fol-agent.service` gives ([\d.]+) "
                       r"\(\"\w+\"; systemd (\d+)\)", deploy)
    assert quoted is not None
    version = subprocess.run([analyze, "--version"], capture_output=True, text=True, timeout=60).stdout.split()
    if version[:2] != ["systemd", quoted.group(2)]:
        pytest.skip(f"DEPLOY.md quotes the rating of systemd {quoted.group(2)}, this is {' '.join(version[:2])}")
    security = subprocess.run([analyze, "security", "--no-pager", "--offline=yes", str(unit)],
                              capture_output=True, text=True, timeout=60)
    rating = re.search(r"Overall exposure level for fol-agent\.service: ([\d.]+)", security.stdout)
    assert rating is not None and rating.group(1) == quoted.group(1), security.stdout[-2000:] + security.stderr
