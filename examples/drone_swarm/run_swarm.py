"""Three drones on one machine: keys, pretraining, node agents, one FOL exchange.

What an engineer does on three flight computers, here on 127.0.0.1 with the
``fol`` command line (each step is printed before it runs)::

    fol keys gen drone-0 --dir drone-0/keys                       # on every drone
    fol keys trust drone-1/keys/drone-1.key --store drone-0/trusted   # exchange public keys
    fol pretrain --data "dataset=synthetic-hurricane,nodes=3,node=0,..." --out drone-0/pretrained.safetensors
    fol agent --config drone-0/node.toml                          # long-running, one per drone
    fol agent ctl drone-0/node.toml status                        # watch the round

Each agent offers its pretrained model to the two others over CURVE, receives
theirs (verified, atomically in its inbox), personalizes on-board once both
arrived (FOL: align, Top-K, ensemble, distill) and writes
``state/models/round-1.safetensors`` with ``state/reports/round-1.json``.

Run from the repository root (about 1-3 minutes on 2 CPU cores)::

    python examples/drone_swarm/run_swarm.py --out drone-swarm-run
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import string
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from fol.agent.config import AgentConfig  # noqa: E402
from fol.agent.loopback import free_port, read_report  # noqa: E402
from fol.agent.node import control_request  # noqa: E402
from fol.errors import FOLError  # noqa: E402

TEMPLATE = Path(__file__).with_name("node.toml.template")
FAST_FOL = {"finetune_epochs": 2, "post_finetune_epochs": 1, "gate_epochs": 1, "distill_epochs": 3,
            "ensemble_steps": 100, "top_k": 2}


def fol_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "fol.cli", *args]


def run(*args: str, cwd: Path) -> None:
    print(f"$ fol {shlex.join(args)}", flush=True)
    subprocess.run(fol_cmd(*args), cwd=cwd, check=True, env=_env())


def _env() -> dict[str, str]:
    """This environment, the repository first on the children's PYTHONPATH. No empty entry is added when
    PYTHONPATH is unset or empty: Python reads one as the working folder, whose modules would then shadow
    the repository's for every fol command run here."""
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, (str(REPO), os.environ.get("PYTHONPATH"))))}


def toml_value(v: object) -> str:
    return json.dumps(v) if not isinstance(v, bool) else ("true" if v else "false")


def main() -> int:
    ap = argparse.ArgumentParser(description="three drone agents on loopback: one exchange + personalization")
    ap.add_argument("--out", default="drone-swarm-run", help="working folder (default: %(default)s)")
    ap.add_argument("--dataset", default="synthetic-hurricane")
    ap.add_argument("--per-node", type=int, default=200, help="images per drone (default: %(default)s)")
    ap.add_argument("--epochs", type=int, default=10, help="pretraining epochs (default: %(default)s)")
    ap.add_argument("--pool-size", type=int, default=None,
                    help="images in the synthetic pool the drones' shards are drawn from (default: the dataset's own)")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds to wait for the round")
    args = ap.parse_args()

    out = Path(args.out).resolve()
    names = [f"drone-{i}" for i in range(3)]
    ports = {n: free_port() for n in names}
    for i, name in enumerate(names):
        folder = out / name
        folder.mkdir(parents=True, exist_ok=True)
        if not (folder / "keys" / f"{name}.key_secret").exists():
            run("keys", "gen", name, "--dir", "keys", cwd=folder)
    for name in names:
        for other in names:
            if other != name and not (out / name / "trusted" / f"{other}.key").exists():
                run("keys", "trust", f"../{other}/keys/{other}.key", "--store", "trusted", cwd=out / name)
    for i, name in enumerate(names):
        size = "" if args.pool_size is None else f",size={args.pool_size}"
        data = f"dataset={args.dataset}{size},nodes=3,node={i},psi=0.5,per_node={args.per_node}"
        folder = out / name
        if not (folder / "pretrained.safetensors").exists():
            run("pretrain", "--data", data, "--arch", "cnn-small", "--epochs", str(args.epochs),
                "--out", "pretrained.safetensors", cwd=folder)
        peers = "".join(f'\n[[peers]]\nid = "{o}"\naddress = "tcp://127.0.0.1:{ports[o]}"\n'
                        for o in names if o != name)
        text = string.Template(TEMPLATE.read_text()).substitute(
            node_id=name, host="127.0.0.1", port=ports[name], data=data, peers=peers, models=2, deadline=600.0,
            fol="\n".join(f"{k} = {toml_value(v)}" for k, v in FAST_FOL.items()))
        (folder / "node.toml").write_text(text)

    procs = {}
    try:
        for name in names:
            folder = out / name
            print(f"$ fol agent --config {name}/node.toml &   (log: {name}/agent.log)", flush=True)
            procs[name] = subprocess.Popen(fol_cmd("agent", "--config", "node.toml"), cwd=folder, env=_env(),
                                           stdout=subprocess.DEVNULL, stderr=open(folder / "agent.log", "ab"))
        configs = {n: AgentConfig.from_toml(out / n / "node.toml") for n in names}
        deadline = time.monotonic() + args.timeout
        done: dict[str, dict] = {}
        while len(done) < len(names):
            if time.monotonic() > deadline:
                raise SystemExit(f"timed out after {args.timeout:.0f} s; see the agent.log files in {out}")
            for name, proc in procs.items():
                if proc.poll() is not None and name not in done:
                    raise SystemExit(f"agent {name} exited with {proc.returncode}; see {out / name / 'agent.log'}")
            for name in names:
                if name in done:
                    continue
                try:
                    status = control_request(configs[name], "status", timeout_s=5)
                except FOLError:
                    continue  # not up yet
                if status["last_error"]:
                    raise SystemExit(f"{name}: {status['last_error']}")
                if status["finished"]:
                    done[name] = status
                    print(f"{name}: round 1 done, used models from {', '.join(status['history'][-1]['used'])}",
                          flush=True)
            time.sleep(1.0)
        run("agent", "ctl", "drone-0/node.toml", "status", cwd=out)
        from fol.personalize_cli import format_summary

        for name in names:
            report = read_report(out / name / "state" / done[name]["history"][-1]["report"])
            print()
            print(format_summary(report))
        for name in names:
            control_request(configs[name], "stop", timeout_s=5)
        for proc in procs.values():
            proc.wait(60)
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(10)
                except subprocess.TimeoutExpired:
                    proc.kill()
    print(f"\npersonalized models: {out}/drone-*/state/models/round-1.safetensors "
          f"(reports: state/reports/round-1.json)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
