"""The swarm simulation: scenario validation, orbit-driven partition, isolated
nodes, resuming an interrupted run, and executors agreeing."""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import json
import re
import os
import shutil
import signal
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import numpy as np
import pytest

from contact_sim.errors import ContactError
from fol.simulation import parse_scenario, run_simulation
from fol.simulation.check import check_resumable
from fol.simulation.cli import _apply_overrides
from fol.simulation.partition import orbit_assignment
from fol.simulation.scenario import result_settings
from fol.cli import main
from fol.checkpoint import read_card
from fol.data import assignment_partition
from fol.errors import ConfigError
from orbits import ground_track, in_swath, swath_half_angle_rad, walker_delta

from _scenarios import LEO, tiny_fol


def _doc(text: str = LEO, **changes: dict) -> dict:
    doc = tomllib.loads(text)
    for table, values in changes.items():
        doc.setdefault(table, {}).update(values)
    return doc


def _rows(out: Path) -> list[dict[str, str]]:
    with open(out / "results.csv") as fh:
        return sorted(csv.DictReader(fh), key=lambda r: (r["seed"], r["method"], r["node"]))


# ------------------------------------------------------------------ validation


@pytest.mark.parametrize(
    ("changes", "match"),
    [
        ({"data": {"partiton": "orbit"}}, r"tiny.toml: data: unknown key 'partiton'"),
        # a negative seed ran until a method's own generator refused it, after pretraining, as a traceback
        ({"scenario": {"seeds": [0, -1]}}, r"tiny.toml: scenario\.seeds: expected a non-empty list of integers in "
                                           r"0\.\.4294967295, got \[0, -1\]"),
        ({"data": {"partition": "by-hand"}}, r"data\.partition: expected one of"),
        ({"data": {"psi": -1.0}}, r"data\.psi"),
        ({"data": {"min_samples": 5}}, r"tiny.toml: data\.min_samples: expected >= 20 \(every node's images are "
                                       r"split 70/15/15 into train/val/test, which needs 20\), got 5"),
        ({"data": {"per_node": 30}}, r"tiny.toml: data\.per_node: expected >= data\.min_samples = 40 \(a node "
                                     r"holds at most per_node images\), got 30"),
        ({"models": {"archs": ["vgg99"]}}, r"models\.archs: unknown architecture 'vgg99'"),
        # the shorthand arch = ... was reported as models.archs = [...], a field the file did not have
        ({"models": {"arch": 3}}, r"^tiny\.toml: models\.arch: expected an architecture name, got 3$"),
        ({"models": {"arch": ["cnn-small"]}}, r"^tiny\.toml: models\.arch: expected an architecture name, "
                                              r"got \['cnn-small'\]$"),
        ({"methods": {"run": ["fol", "fedsgd"]}}, r"methods\.run: unknown method 'fedsgd'"),
        # a repeat ran the method twice per seed, over the same results file, and put its rows in twice
        ({"methods": {"run": ["local", "fol", "local"]}}, r"tiny.toml: methods\.run: repeated method 'local' in "
                                                          r"\['local', 'fol', 'local'\]"),
        ({"fol": {"rounds": 3}}, r"fol\.rounds: 3 FOL rounds but the contact plan has 1"),
        ({"fol": {"top_k": 0}}, r"fol\.top_k must be > 0"),
        ({"run": {"executor": "slurm"}}, r"run\.executor: expected one of"),
        # a NUL stopped the run with a traceback (ValueError: embedded null byte) when the folder was made
        ({"output": {"dir": "a\x00b"}}, r"^tiny\.toml: output\.dir: expected a path without a NUL character, got "
                                         r"'a\\x00b'$"),
        ({"scenario": {"seeds": []}}, r"scenario\.seeds"),
        ({"data": {"dataset": "imagefolder", "partition": "dirichlet"}},
         r"tiny.toml: data\.path: dataset 'imagefolder' needs path"),
        ({"data": {"path": "my_images"}}, r"tiny.toml: data\.path: only applies to dataset 'imagefolder'"),
        ({"data": {"coords": "filename"}}, r"data\.coords: only applies to dataset 'imagefolder'"),
        ({"data": {"dataset": "imagefolder", "path": "x", "coords": "gps"}}, r"data\.coords: expected one of"),
        ({"data": {"dataset": "imagefolder", "path": "x"}},
         r"data\.partition: 'orbit' places images by their coordinates, but data\.coords is 'none'"),
        # a swath wider than half the Earth's circumference passed the check and stopped the run at the
        # partition with orbits' own 'swath_width_km' message, naming neither the file nor the field
        ({"data": {"swath_km": 30000.0}}, r"^tiny\.toml: data\.swath_km: expected a width of 0 < swath_km < "
                                          r"20015\.086796020572 km \(pi x 6371 km, half the Earth's circumference\), "
                                          r"got 30000\.0"),
        # the message said "< 20015 km" but 20015.05 (below pi x 6371 = 20015.0868) was accepted
        ({"data": {"swath_km": 20015.09}}, r"^tiny\.toml: data\.swath_km: expected a width of 0 < swath_km < "
                                           r"20015\.086796020572 km .*, got 20015\.09$"),
        # a root was silently ignored by the datasets not read from it
        ({"data": {"root": "datasets"}}, r"^tiny\.toml: data\.root: only applies to the datasets read from "
                                         r"<root>/<name>/ \(wildfire, hurricane, cifar10, cifar100, svhn\), not "
                                         r"'synthetic-hurricane'$"),
        ({"data": {"dataset": "imagefolder", "path": "x", "coords": "filename", "root": "datasets"}},
         r"^tiny\.toml: data\.root: only applies to .*, not 'imagefolder' \(its images are in data\.path\)$"),
        ({"data": {"skip_corrupt": True}}, r"data\.skip_corrupt: only applies to the datasets read from image files "
                                           r"\(wildfire, hurricane, imagefolder\), not 'synthetic-hurricane'"),
        ({"data": {"splits": ["train"]}}, r"data\.splits: only applies to the datasets read from split folders "
                                          r"\(wildfire, hurricane, svhn, imagefolder\), not 'synthetic-hurricane'"),
        ({"data": {"dataset": "wildfire", "splits": "train"}}, r"data\.splits: expected a non-empty list of split "
                                                               r"folder names, got 'train'"),
    ],
)
def test_learning_sections_are_validated(changes: dict, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        parse_scenario(_doc(**changes), Path("."), "tiny.toml")


@pytest.mark.parametrize("seed, shown", [(-1, "-1"), (2**32, "4294967296"), ("7", "'7'"), (1.0, "1.0"),
                                         (True, "true")])
def test_a_bad_scenario_seed_is_named_as_written(seed, shown: str) -> None:
    """scenario.seed (the shorthand of seeds = [seed]) was reported as scenario.seeds = [seed]."""
    doc = _doc()
    doc["scenario"].pop("seeds")
    doc["scenario"]["seed"] = seed
    with pytest.raises(ConfigError) as exc:
        parse_scenario(doc, Path("."), "tiny.toml")
    assert str(exc.value) == f"tiny.toml: scenario.seed: expected an integer in 0..4294967295, got {shown}"
    doc["scenario"]["seed"] = 4294967295
    assert parse_scenario(doc, Path("."), "tiny.toml").seeds == [4294967295]


def test_more_seeds_than_the_cap_are_refused_before_anything_is_built() -> None:
    """A generated seeds list of 200,000 (1.5 MB of TOML) passed the check (which printed it whole,
    a 1.5 MB line) and planned 200,000 full runs; the list is capped at MAX_SEEDS now."""
    from fol.simulation.scenario import MAX_SEEDS

    assert MAX_SEEDS == 1_000
    assert len(parse_scenario(_doc(scenario={"seeds": list(range(MAX_SEEDS))}), Path("."), "tiny.toml").seeds) == 1_000
    for n in (MAX_SEEDS + 1, 200_000):
        with pytest.raises(ConfigError) as exc:
            parse_scenario(_doc(scenario={"seeds": list(range(n))}), Path("."), "tiny.toml")
        message = str(exc.value)
        assert message.startswith(f"tiny.toml: scenario.seeds: expected at most 1,000 seeds (one full run each), "
                                  f"got {n:,}: [0, 1, 2, ") and len(message) < 200, message


def test_the_check_says_how_much_will_run_and_lists_the_seeds_shortened(tmp_path: Path,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """--check printed the whole seeds list (1,000 seeds: a 6 KB line) and not how many
    node results the run would make."""
    (tmp_path / "wp.csv").write_text("node_id,t_s,x_km,y_km,z_km\na,0,0,0,0.1\nb,0,0.2,0,0.1\nc,0,0.4,0,0.1\n")
    seeds = ", ".join(str(k) for k in range(1_000))
    (tmp_path / "s.toml").write_text(DRONES.replace("seeds = [0]", f"seeds = [{seeds}]").replace("size = 1600", "size = 3000"))
    assert main(["simulate", "--check", str(tmp_path / "s.toml")]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 1 and len(out[0]) < 500, out
    assert "seeds [0, 1, 2, 3" in out[0] and "999" not in out[0], out[0]
    assert out[0].endswith("will run 1,000 seed(s) x 3 nodes x 3 method(s) = 9,000 node results"), out[0]


def test_output_dir_reads_the_home_folder_as_every_other_path_field() -> None:
    """output.dir = "~/runs/x" made a folder literally named ~ in the working directory."""
    doc = _doc(output={"dir": "~/runs/x"})
    assert parse_scenario(doc, Path("."), "tiny.toml").output_dir == Path.home() / "runs" / "x"


def test_data_root_is_read_as_every_other_path_of_the_file(tmp_path: Path) -> None:
    """data.root was read as plain text: "~/datasets" became <scenario folder>/~/datasets and ""
    the scenario's folder itself, where every other path of the file expands ~ and refuses ""."""
    def root(value: str) -> str:
        return parse_scenario(_doc(data={"dataset": "cifar10", "partition": "dirichlet", "root": value}),
                              tmp_path, "tiny.toml").data.root

    assert root("~/datasets") == str(Path.home() / "datasets")
    assert root("datasets") == str(tmp_path / "datasets")
    for value, match in (("", r"^tiny\.toml: data\.root: expected a non-empty string$"),
                         ("a\x00b", r"^tiny\.toml: data\.root: expected a path without a NUL character")):
        with pytest.raises(ConfigError, match=match):
            root(value)


@pytest.mark.parametrize("name", ["", "..", "a/b", "/tmp/x", "..\\x", "a\x00b", "a\nb"])
def test_scenario_name_must_be_one_folder_name(name: str) -> None:
    """The name is the default output folder runs/<name>: "" wrote into runs/ itself, "a/../../b"
    or "/tmp/x" outside runs/, "a\\x00b" stopped with a traceback. It is refused in one line;
    output.dir places a run anywhere."""
    with pytest.raises(ConfigError) as exc:
        parse_scenario(_doc(scenario={"name": name}), Path("."), "tiny.toml")
    assert str(exc.value) == ("tiny.toml: scenario.name: expected a printable name with no slash or backslash, not "
                              "'.' or '..' (the default output folder is runs/<name>; output.dir sets another), "
                              f"got {name!r}")
    assert parse_scenario(_doc(scenario={"name": "leo run 2"}), Path("."), "tiny.toml").name == "leo run 2"


def test_a_scenario_name_over_200_characters_is_refused() -> None:
    """The name is the run folder's and every report's: 128 kB was accepted (and is beyond any
    file system's name limit)."""
    with pytest.raises(ConfigError, match=r"^tiny\.toml: scenario\.name: expected a name of at most 200 characters, "
                                          r"got 131,072: 'xxx"):
        parse_scenario(_doc(scenario={"name": "x" * 131_072}), Path("."), "tiny.toml")
    assert parse_scenario(_doc(scenario={"name": "x" * 200}), Path("."), "tiny.toml").name == "x" * 200


@pytest.mark.parametrize(("table", "match"), [
    # a table of a method not in methods.run was never checked: its typo or bad value went unnoticed
    # the unknown option named, with the ones the method takes (not Python's "unexpected keyword argument")
    ({"fedavg": {"local_epoch": 5}}, r"^tiny\.toml: methods\.fedavg: invalid option\(s\): unknown 'local_epoch'; "
                                     r"expected some of local_epochs, fraction, lr, rounds$"),
    ({"pooled": {"epochs": 5}}, r"^tiny\.toml: methods\.pooled: invalid option\(s\): unknown 'epochs'; "
                                r"it takes no options$"),
    # also where the options are forwarded to the server skeleton (**common) or checked by the method itself
    ({"hermes": {"prune": 0.2}}, r"^tiny\.toml: methods\.hermes: invalid option\(s\): unknown 'prune'; expected some "
                                 r"of prune_rate, acc_threshold, target, lam, intersection, target_share, init, "
                                 r"local_epochs, fraction, lr, rounds$"),
    ({"mtfl-adam": {"adam_lrate": 0.1}}, r"^tiny\.toml: methods\.mtfl-adam: invalid option\(s\): unknown "
                                         r"'adam_lrate'; expected some of private, adam_lr, local_epochs, "
                                         r"fraction, lr, rounds$"),
    ({"dm-pfl": {"sparse": 0.5}}, r"^tiny\.toml: methods\.dm-pfl: invalid option\(s\): unknown 'sparse'; "
                                  r"expected some of sparsity, .*, init, local_epochs, fraction, lr, rounds$"),
    ({"dense": {"epoch": 5}}, r"^tiny\.toml: methods\.dense: invalid option\(s\): unknown 'epoch'; expected "
                              r"some of budget, epochs, g_steps, .*, \.\.\. \(24 keys; the closest: epochs\)$"),
    ({"hermes": {"prune_rate": 2.0}}, r"^tiny\.toml: methods\.hermes\.prune_rate must be a number in \(0, 1\]"),
    ({"fol": {"top_k": 2}}, r"^tiny\.toml: methods\.fol: invalid option\(s\): unknown 'top_k'; it takes no "
                            r"options \(FOL's settings are the scenario's \[fol\] table\)$"),
    # a table of no method says which names exist
    ({"fedsgd": {"fraction": 0.5}}, r"^tiny\.toml: methods: unknown method table 'fedsgd'; expected a table of "
                                    r"options of one of .*fedavg.*mtfl"),
    # a key of any length is shown bounded
    ({"x" * 5000: {"a": 1}}, r"^tiny\.toml: methods: unknown method table 'x{8,80}\.\.\.; expected .{,300}$"),
    ({"fedavg": 3}, r"^tiny\.toml: methods\.fedavg: expected a table of options, got 3"),
])
def test_every_method_options_table_is_validated_run_or_not(table: dict, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        parse_scenario(_doc(methods=table), Path("."), "tiny.toml")
    ok = parse_scenario(_doc(methods={"fedavg": {"fraction": 0.5}}), Path("."), "tiny.toml")  # valid, not run: kept
    for name, options in {"hermes": {"target": 0.5, "local_epochs": 2}, "mtfl-adam": {"adam_lr": 0.01, "rounds": 3},
                          "dense": {"budget": "small", "epochs": 2}, "co-boosting": {"perturb": "ods"}}.items():
        assert parse_scenario(_doc(methods={name: options}), Path("."), "tiny.toml").method_options == {name: options}
    assert ok.method_options == {"fedavg": {"fraction": 0.5}} and "fedavg" not in ok.methods


def test_contact_sections_are_validated_too() -> None:
    with pytest.raises(ContactError, match="planes"):
        parse_scenario(_doc(constellation={"planes": 4}), Path("."), "tiny.toml")
    doc = _doc()
    doc["rendezvous"] = {}
    with pytest.raises(ContactError, match="rendezvous"):
        parse_scenario(doc, Path("."), "tiny.toml")


def test_simulate_cli_reports_a_bad_field_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(LEO.replace('partition = "orbit"', 'partition = "orbital"'))
    assert main(["simulate", str(path), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "data.partition" in err[0]



@pytest.mark.parametrize("workers", ["-1", "0", "two"])
def test_simulate_refuses_workers_below_one_before_any_work(workers: str, tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    """``--workers -1`` passed ``--check`` and then failed after the output folder
    was started; ``--workers 0`` was silently ignored. Both are a usage error now."""
    path = tmp_path / "tiny.toml"
    path.write_text(LEO)
    out = tmp_path / "out"
    for extra in (["--check"], []):
        with pytest.raises(SystemExit) as stop:
            main(["simulate", str(path), "--out", str(out), f"--workers={workers}", *extra])
        assert stop.value.code == 2
        err = capsys.readouterr().err
        assert "argument --workers: expected a whole number >= 1" in err and "Traceback" not in err, err
    assert not out.exists()



@pytest.mark.parametrize("key", ["workers", "threads"])
def test_run_workers_below_one_reads_as_the_workers_option(key: str, tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    """A scenario's ``run.workers = 0`` (or ``run.threads``) said "expected >= 1" and ``--workers 0`` "expected
    a whole number >= 1": one rule, one wording (swarmbase.cli.parallelism_floor_problem), on a Ray cluster too,
    whose CPUs have no bound here."""
    def on_a_cluster(value: int) -> str:
        run = '[run]\nexecutor = "local"\nthreads = 1\n'
        assert run in LEO
        return LEO.replace(run, f'[run]\nexecutor = "ray"\nray_address = "auto"\n{key} = {value}\n')

    path = tmp_path / "tiny.toml"
    path.write_text(on_a_cluster(0))
    assert main(["simulate", "--check", str(path), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].endswith(f"run.{key}: expected a whole number >= 1, got 0"), err
    with pytest.raises(SystemExit):
        main(["simulate", "--check", str(path), "--workers", "0"])
    assert "argument --workers: expected a whole number >= 1, got 0" in capsys.readouterr().err
    accepted = parse_scenario(tomllib.loads(on_a_cluster(100000)), tmp_path)
    assert getattr(accepted.run, key) == 100000  # no upper bound as read: a Ray cluster counts its own CPUs


@pytest.mark.parametrize("fol_extra, methods, executor, where, stage, field", [
    ("pretrain_lr = 1e6\nweight_decay = 0.0\n", None, "local", "pretraining", "pretrain", "fol.pretrain_lr"),
    ("distill_lr = 1e6\n", None, "process", "fol / fol-a, round 1", "distill", "fol.distill_lr"),
    ("weight_decay = 0.0\n", 'run = ["fedavg"]\n[methods.fedavg]\nlr = 1e6', "local", "fedavg, round 1",
     "local update", "methods.fedavg.lr"),
])
def test_a_node_whose_training_diverges_is_named_in_the_one_line(
        fol_extra: str, methods: str | None, executor: str, where: str, stage: str, field: str, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    """A divergence in fol simulate said the stage and the rate to lower ('distill: the weights became
    non-finite at epoch 0 (learning rate 1e+06; a smaller fol.distill_lr usually fixes this)') but not which
    node's training it was: the line now starts with the node and what it was running (its method and round,
    or its pretraining), from a worker process too. A server method's local update said its stage was
    'pretrain' (the swarm's training settings it copies); it says 'local update'."""
    text = LEO.replace("[methods]", f"{fol_extra}[methods]")
    if methods is not None:
        text = text.replace('run = ["local", "fol", "fol-a"]', methods)
    path = tmp_path / "s.toml"
    path.write_text(text.replace('executor = "local"', f'executor = "{executor}"\nworkers = 2'))
    assert main(["simulate", str(path), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "Traceback" not in err[0], err
    named = re.fullmatch(rf"fol simulate: error: node (\S+) \({re.escape(where)}\): {stage}: the \w+ became "
                         rf"non-finite at epoch 0 \(learning rate 1e\+06; a smaller {re.escape(field)} usually fixes "
                         rf"this\)", err[0])
    assert named, err[0]
    assert named[1] in walker_delta(6, 2, 1, 550.0, 53.0, "2026-06-01T00:00:00Z").names, named[1]  # LEO's nodes


@pytest.mark.parametrize("method", ["dense", "co-boosting"])
def test_a_server_side_divergence_says_where_in_the_one_line(method: str, tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    """DENSE's and Co-Boosting's distillation runs on the server, not in a node's work: a divergence there
    said the stage and the rate to lower but not which method's server or round it was; the line now starts
    'server (<method>, round 1)', as a node's says 'node <name> (<method>, round 1)'."""
    text = LEO.replace('run = ["local", "fol", "fol-a"]',
                       f'run = ["{method}"]\n[methods.{method}]\nkd_lr = 1e6\nkd_weight_decay = 0.0')
    path = tmp_path / "s.toml"
    path.write_text(text)
    assert main(["simulate", str(path), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "Traceback" not in err[0], err
    assert re.fullmatch(rf"fol simulate: error: server \({method}, round 1\): data-free distillation: the [\w -]+ "
                        rf"became non-finite at epoch \d+ \((finite but huge weights; )?learning rate 1e\+06; "
                        rf"a smaller methods\.{method}\.kd_lr usually fixes this\)", err[0]), err[0]


def test_a_ray_address_where_nothing_listens_is_refused_in_seconds(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """Ray retries an address where no cluster listens for minutes, deaf to Ctrl-C
    and kill; the check (and the executor) refuse it in one line instead."""
    import socket

    from fol.executors import RayExecutor

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    path = tmp_path / "tiny.toml"
    path.write_text(LEO)
    out = tmp_path / "out"
    for address in (f"127.0.0.1:{port}", f"ray://127.0.0.1:{port}"):
        for extra in (["--check"], []):
            t0 = time.monotonic()
            assert main(["simulate", str(path), "--out", str(out), "--ray-address", address, *extra]) == 2
            assert time.monotonic() - t0 < 30
            err = capsys.readouterr().err.strip().splitlines()
            assert len(err) == 1 and f"run.ray_address (or --ray-address) '{address}': no Ray cluster answers at " \
                f"127.0.0.1:{port}" in err[0] and str(path) in err[0], err
    assert not out.exists()
    with pytest.raises(ConfigError, match="no Ray cluster answers"):
        RayExecutor(f"127.0.0.1:{port}")


def test_a_ray_cluster_that_cannot_be_joined_is_named_as_the_check_names_the_address(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """An address that passes the check but that Ray then fails to join (the cluster went away, a token it
    refuses) was 'run.ray_address ...: cannot join a Ray cluster there' when the address came from
    --ray-address; it is named as the check's refusals name it, the flag too."""
    ray = pytest.importorskip("ray")
    import fol.executors as ex
    import fol.simulation.check as check

    def refused(**kwargs):
        raise ConnectionError("the GCS went away")

    monkeypatch.setattr(check, "check_ray_address", lambda *a, **k: None)  # a head that answered the check ...
    monkeypatch.setattr(ex, "check_ray_address", lambda *a, **k: None)
    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "init", refused)  # ... and then did not take the driver
    path = tmp_path / "tiny.toml"
    path.write_text(LEO)
    assert main(["simulate", str(path), "--out", str(tmp_path / "out"), "--ray-address", "127.0.0.1:6379"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and ("run.ray_address (or --ray-address) '127.0.0.1:6379': cannot join a Ray cluster "
                              "there (the GCS went away)") in err[0], err


def test_a_malformed_ray_address_is_refused_by_the_check_before_any_work(tmp_path: Path,
                                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """An address Ray cannot parse ('garbage', a port out of range, an empty --ray-address) passed
    --check and was found only when Ray was joined, after the contact search and with the output
    folder started; an empty one was taken as no address at all."""
    from fol.executors import RayExecutor

    path = tmp_path / "tiny.toml"
    path.write_text(LEO)
    out = tmp_path / "out"
    for address in ("garbage", "127.0.0.1:0", "127.0.0.1:70000", "ray://:6379", "http://host/x:1", ""):
        for extra in (["--check"], []):
            assert main(["simulate", str(path), "--out", str(out), "--ray-address", address, *extra]) == 2
            err = capsys.readouterr().err.strip().splitlines()
            # named as the other refusals of the address are, the flag too: here the value came from it
            assert len(err) == 1 and f"run.ray_address (or --ray-address) '{address}': expected 'auto'" in err[0] \
                and str(path) in err[0], (address, err)
    assert not out.exists()
    in_file = tmp_path / "in_file.toml"
    in_file.write_text(LEO.replace('executor = "local"', 'ray_address = ""'))
    assert main(["simulate", str(in_file), "--out", str(out), "--check"]) == 2
    assert "run.ray_address (or --ray-address) '': expected 'auto'" in capsys.readouterr().err
    with pytest.raises(ConfigError, match="expected 'auto'") as refused:
        RayExecutor("garbage")
    # 'local' is taken too (docs/running-simulations.md): the refusal lists it with the others
    assert str(refused.value) == ("run.ray_address 'garbage': expected 'auto' (on the cluster's head machine), "
                                  "'local' (a new Ray instance on this machine), host:port (a cluster started "
                                  "with ray start) or ray://host:port (Ray Client)")


def test_ray_address_help_names_every_form_the_check_takes() -> None:
    """``fol simulate --help`` gives every form of --ray-address that check_ray_address takes: 'local' (a new Ray
    instance on this machine) was taken, and listed by the check's refusal, but not in the help."""
    from fol.cli import build_parser
    from fol.executors import check_ray_address

    with pytest.raises(ConfigError) as refused:
        check_ray_address("garbage")
    forms = re.findall(r"'(\w+)' \(|(\S+://\S+|\bhost:port\b)", str(refused.value))
    forms = [a or b for a, b in forms]
    assert {"auto", "local", "host:port", "ray://host:port"} <= set(forms), forms
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    action = next(a for a in sub.choices["simulate"]._actions if "--ray-address" in a.option_strings)
    helped = " ".join(action.help.split())
    assert all(f"'{f}'" in helped if f.isalnum() else f in helped for f in forms), (forms, helped)
    for form in ("auto", "local"):
        check_ray_address(form)  # taken, as the help says


def test_a_ray_address_with_another_executor_is_refused_not_ignored(tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """An address of a Ray cluster with the local or process executor was silently
    ignored (the run went on without Ray); it is refused in one line naming the
    fields and the flags, from the command line and from the file alike."""
    path = tmp_path / "tiny.toml"
    out = tmp_path / "out"
    message = ("run.ray_address (or --ray-address) '127.0.0.1:1' only applies to the ray executor, but "
               "run.executor (or --executor) is 'process'")
    path.write_text(LEO)
    path_conflict = tmp_path / "conflict.toml"
    path_conflict.write_text(LEO.replace('executor = "local"', 'executor = "process"\nray_address = "127.0.0.1:1"'))
    for argv in (["simulate", str(path), "--executor", "process", "--ray-address", "127.0.0.1:1"],
                 ["simulate", str(path_conflict)]):
        for extra in (["--check"], []):
            assert main([*argv, "--out", str(out), *extra]) == 2
            err = capsys.readouterr().err.strip().splitlines()
            assert len(err) == 1 and message in err[0] and argv[1] in err[0], err
    assert not out.exists()
    # an empty address is an address too: with --executor local or process it passed --check and the
    # run went on without Ray, where docs/running-simulations.md says it is refused (it was taken as absent)
    for executor in ("local", "process"):
        for extra in (["--check"], []):
            assert main(["simulate", str(path), "--executor", executor, "--ray-address", "", "--out", str(out),
                         *extra]) == 2
            err = capsys.readouterr().err.strip().splitlines()
            assert len(err) == 1 and "run.ray_address (or --ray-address) '' only applies to the ray executor" \
                in err[0], err
    assert not out.exists()
    # an address alone means Ray, in the file as on the command line (--ray-address without --executor)
    alone = parse_scenario({**_doc(), "run": {"ray_address": "auto"}}, tmp_path)
    assert (alone.run.executor, alone.run.ray_address) == ("ray", "auto")
    # --executor local or process on the command line replaces the file's Ray executor, address and all
    on_ray = parse_scenario(_doc(run={"executor": "ray", "ray_address": "auto"}), tmp_path)
    _apply_overrides(on_ray, argparse.Namespace(executor="process", workers=None, ray_address=None))
    assert (on_ray.run.executor, on_ray.run.ray_address) == ("process", None)


# ------------------------------------------------------------------ orbit-driven partition


@pytest.mark.parametrize("rule", ["uniform", "first"])
def test_orbit_partition_assigns_every_covered_sample_exactly_once(rule: str) -> None:
    epoch = dt.datetime(2026, 6, 1, tzinfo=dt.timezone.utc)
    sats = walker_delta(4, 2, 1, 550.0, 53.0, epoch)
    rng = np.random.default_rng(0)
    lat, lon = rng.uniform(-50, 50, 800), rng.uniform(-180, 180, 800)
    acquisition_s, swath_km = 7200.0, 800.0
    owner = orbit_assignment(lat, lon, sats, epoch, acquisition_s, swath_km, rule=rule, seed=1, step_s=5.0)
    again = orbit_assignment(lat, lon, sats, epoch, acquisition_s, swath_km, rule=rule, seed=1, step_s=5.0)
    assert np.array_equal(owner, again)

    # Independent coverage check on the same 5 s grid: which satellites ever covered each point.
    offsets = np.arange(0.0, acquisition_s + 1e-9, 5.0)
    track = ground_track(sats, epoch, offsets)
    ever = in_swath(lat, lon, track.lat_deg, track.lon_deg, swath_half_angle_rad(swath_width_km=swath_km)).any(axis=0)
    covered = ever.any(axis=1)
    assert 100 < covered.sum() < 800  # some but not all points were overflown
    assert np.array_equal(owner >= 0, covered)
    assigned = owner >= 0
    assert ever[np.flatnonzero(assigned), owner[assigned]].all()  # each owner really covered its sample

    # Which covering satellite, exactly, from the dense (times x points x satellites) mask.
    mask = in_swath(lat, lon, track.lat_deg, track.lon_deg, swath_half_angle_rad(swath_width_km=swath_km))
    rows = np.flatnonzero(covered)
    if rule == "first":  # the earliest covering step, ties to the lowest satellite index
        first = np.where(mask.any(axis=0), mask.argmax(axis=0), np.iinfo(np.int64).max)
        expected = first[rows].argmin(axis=1)
    else:  # the same seeded draw among a point's covering satellites, in index order
        u = np.random.default_rng([1, 0x5A7]).random(len(lat))
        expected = np.array([np.flatnonzero(ever[i])[min(int(u[i] * ever[i].sum()), ever[i].sum() - 1)]
                             for i in rows])
    assert np.array_equal(owner[rows], expected)

    shards = assignment_partition(owner, 4)
    everything = np.concatenate(shards)
    assert len(everything) == len(np.unique(everything)) == covered.sum()
    assert set(everything) == set(np.flatnonzero(covered))

    # The default (coarser) sampling step only loses points grazing the swath edges.
    coarse = orbit_assignment(lat, lon, sats, epoch, acquisition_s, swath_km, rule=rule, seed=1)
    assert ((coarse >= 0) & ~covered).sum() == 0
    assert (coarse >= 0).sum() >= 0.9 * covered.sum()


# ------------------------------------------------------------------ runs


DRONES = f"""
[scenario]
name = "tiny-drones"
seeds = [0]
[drones]
radio_range_km = 1.0
waypoints_csv = "wp.csv"
[time]
duration_s = 600.0
step_s = 10.0
[link]
rate_bps = 1e6
acquisition_s = 1.0
[rounds]
count = 1
[data]
dataset = "synthetic-wildfire"
size = 1600
image_size = 16
partition = "dirichlet"
psi = 1.0
per_node = 100
{tiny_fol()}[methods]
run = ["local", "fol", "fedavg"]
[methods.fedavg]
local_epochs = 1
[run]
executor = "local"
threads = 1
"""


def test_a_node_without_contacts_keeps_its_local_model(tmp_path: Path) -> None:
    # Drones a, b, c fly together; drone "far" stays 20 km away, beyond radio range.
    (tmp_path / "wp.csv").write_text(
        "node_id,t_s,x_km,y_km,z_km\n"
        "a,0,0,0,0.1\na,600,0.3,0,0.1\n"
        "b,0,0.2,0,0.1\nb,600,0.5,0,0.1\n"
        "c,0,0,0.2,0.1\nc,600,0.3,0.2,0.1\n"
        "far,0,20,20,0.1\nfar,600,20.5,20,0.1\n"
    )
    (tmp_path / "s.toml").write_text(DRONES)
    out = tmp_path / "out"
    assert main(["simulate", str(tmp_path / "s.toml"), "--out", str(out)]) == 0
    rows = {(r["method"], r["node"]): r for r in _rows(out)}
    far_fol, far_local = rows[("fol", "far")], rows[("local", "far")]
    assert far_fol["kept_local"] == "True" and int(far_fol["bytes_down"]) == 0 == int(far_fol["bytes_up"])
    assert float(far_fol["test_accuracy"]) == float(far_local["test_accuracy"])
    for name in ("a", "b", "c"):
        assert rows[("fol", name)]["kept_local"] == "False"
        assert int(rows[("fol", name)]["received_models"]) == 2
    for f in ("report.md", "contacts.csv", "results.json", "contacts.png", "accuracy_by_node.png", "accuracy_vs_bytes.png",
              "accuracy_vs_rounds.png"):
        assert (out / f).stat().st_size > 0
    report = (out / "report.md").read_text()
    assert "| fol |" in report and "rounds to fol (" in report and "| fedavg | " in report
    assert "mean ± std over seeds (std: the sample standard deviation, n - 1 in the denominator" in report
    assert int(rows[("fedavg", "far")]["rounds"]) == 0  # the contact plan keeps "far" out of the server rounds


def _image_folder(root: Path, per_class: int, coords: bool) -> None:
    """Three classes told apart by brightness; with ``coords`` the files are named
    ``<lon>,<lat>.png`` (the wildfire / hurricane sets' convention)."""
    from PIL import Image

    rng = np.random.default_rng(0)
    for c, level in enumerate((30, 120, 210)):
        (root / f"class{c}").mkdir(parents=True)
        for i in range(per_class):
            pixels = np.clip(rng.normal(level, 20, (12, 12, 3)), 0, 255).astype(np.uint8)
            stem = f"{rng.uniform(-70, -60):.5f},{rng.uniform(45, 50):.5f}" if coords else f"img{i}"
            Image.fromarray(pixels).save(root / f"class{c}" / f"{stem}.png")


def _drones_with_data(data: str) -> str:
    """The ``DRONES`` scenario with another ``[data]`` table."""
    before = DRONES[DRONES.index("[data]\n"):DRONES.index("[fol]\n")]
    return DRONES.replace(before, f"[data]\n{data}\n")


def test_a_swarm_runs_on_a_users_image_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``dataset = "imagefolder"`` with ``path`` (relative to the scenario file)
    and coordinates from the file names: the region partition places the images
    and every node learns its classes; ``skip_corrupt`` passes over a broken file."""
    _image_folder(tmp_path / "my_images", per_class=60, coords=True)
    (tmp_path / "my_images" / "class1" / "-65.0,47.0.png").write_bytes(b"not an image")
    (tmp_path / "wp.csv").write_text("node_id,t_s,x_km,y_km,z_km\n" + "".join(
        f"{n},0,{0.1 * k},0,0.1\n{n},600,{0.1 * k + 0.2},0,0.1\n" for k, n in enumerate("abc")))
    text = _drones_with_data('dataset = "imagefolder"\npath = "my_images"\ncoords = "filename"\nskip_corrupt = true\n'
                             'image_size = 12\npartition = "region"\nmin_samples = 20')
    text = text.replace('run = ["local", "fol", "fedavg"]', 'run = ["local", "fol"]')
    (tmp_path / "s.toml").write_text(text.replace("skip_corrupt = true\n", ""))
    assert main(["simulate", str(tmp_path / "s.toml"), "--out", str(tmp_path / "refused")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "-65.0,47.0.png: cannot read image" in err[0], err
    (tmp_path / "s.toml").write_text(text)
    out = tmp_path / "out"
    assert main(["simulate", str(tmp_path / "s.toml"), "--out", str(out)]) == 0
    rows = _rows(out)
    local = [r for r in rows if r["method"] == "local"]
    assert sorted(r["node"] for r in local) == ["a", "b", "c"]
    assert sum(float(r["test_accuracy"]) for r in local) / 3 > 0.6  # three brightness classes: chance is 1/3
    assert {r["node"] for r in rows if r["method"] == "fol"} == {"a", "b", "c"}
    resolved = json.loads((out / "scenario.resolved.json").read_text())["data"]
    assert Path(resolved["path"]) == (tmp_path / "my_images").resolve() and resolved["coords"] == "filename"


def test_the_check_refuses_a_missing_image_folder_or_coordinates_file(tmp_path: Path,
                                                                        capsys: pytest.CaptureFixture[str],
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """A missing image folder, coords.csv or real dataset: one line naming the scenario and the field."""
    monkeypatch.setenv("FOL_DATA_ROOT", str(tmp_path / "empty-root"))
    _image_folder(tmp_path / "imgs", per_class=2, coords=False)
    (tmp_path / "wp.csv").write_text("node_id,t_s,x_km,y_km,z_km\na,0,0,0,0.1\nb,0,0.2,0,0.1\n")
    scenario = tmp_path / "s.toml"
    for data, field, expected in [
            ('dataset = "imagefolder"\npath = "nope"\npartition = "dirichlet"\npsi = 1.0', "data.path", "image folder"),
            ('dataset = "imagefolder"\npath = "imgs"\ncoords = "csv"\npartition = "region"', "data.coords",
             "coordinates file"),
            (f'dataset = "wildfire"\nroot = "{tmp_path / "none"}"', "data.root", "not found"),
            ('dataset = "wildfire"', "data.dataset", "not found")]:
        scenario.write_text(_drones_with_data(f'{data}\nimage_size = 16\nper_node = 100'))
        assert main(["simulate", "--check", str(scenario)]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        # one line naming the scenario file and the field first, as every other error of the check
        assert len(err) == 1 and f"{scenario}: {field}: " in err[0] and expected in err[0], err
    (tmp_path / "imgs" / "coords.csv").write_text("file,lat,lon\n")
    scenario.write_text(_drones_with_data('dataset = "imagefolder"\npath = "imgs"\ncoords = "csv"\n'
                                          'partition = "region"\nimage_size = 16\nper_node = 100'))
    assert main(["simulate", "--check", str(scenario)]) == 0


def test_the_check_refuses_an_image_folder_of_one_class(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """One class folder: refused by the check, naming the field, before any contact
    or image work (it stopped after both with 'model num_classes must be at least 2'), in the words
    fol pretrain --data refuses the same folder with (fol.data.loaders.refuse_one_class): the check said
    "has 1 class sub-folder(s) ['class0']; a classifier needs at least 2", fol pretrain "the folder ... has
    one class folder, 'class0'; a node needs at least two classes to train a classifier". A folder of no
    class folder (its images directly in it) is refused in the same shape."""
    _image_folder(tmp_path / "imgs", per_class=2, coords=False)
    for extra in ("class1", "class2"):
        shutil.rmtree(tmp_path / "imgs" / extra)
    (tmp_path / "imgs" / ".thumbs").mkdir()
    (tmp_path / "wp.csv").write_text("node_id,t_s,x_km,y_km,z_km\na,0,0,0,0.1\nb,0,0.2,0,0.1\n")
    (tmp_path / "s.toml").write_text(_drones_with_data('dataset = "imagefolder"\npath = "imgs"\nimage_size = 16\n'
                                                       'partition = "dirichlet"\npsi = 1.0\nper_node = 100'))
    same = (f"image folder {tmp_path / 'imgs'} has one class folder, 'class0'; a classifier needs at least two "
            "classes (one sub-folder of images per class)")
    assert main(["simulate", "--check", str(tmp_path / "s.toml")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"fol simulate: error: {tmp_path / 's.toml'}: data.path: {same}"], err
    out = tmp_path / "m.safetensors"
    assert main(["pretrain", "--data", str(tmp_path / "imgs"), "--epochs", "1", "--out", str(out)]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [f"fol pretrain: error: --data {tmp_path / 'imgs'}: {same}"]
    assert not out.exists()
    shutil.move(tmp_path / "imgs" / "class0" / "img0.png", tmp_path / "imgs" / "img0.png")
    shutil.rmtree(tmp_path / "imgs" / "class0")
    assert main(["simulate", "--check", str(tmp_path / "s.toml")]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        f"fol simulate: error: {tmp_path / 's.toml'}: data.path: image folder {tmp_path / 'imgs'} has no class folder; "
        "a classifier needs at least two classes (one sub-folder of images per class)"]


def test_the_check_refuses_a_folder_laid_out_by_split_first_unless_its_splits_are_named(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """train/<class>/, test/<class>/ passed the check as two classes 'test', 'train' (every label wrong)."""
    for split in ("train", "test"):
        _image_folder(tmp_path / "imgs" / split, per_class=1, coords=False)
    (tmp_path / "wp.csv").write_text("node_id,t_s,x_km,y_km,z_km\na,0,0,0,0.1\nb,0,0.2,0,0.1\n")
    data = 'dataset = "imagefolder"\npath = "imgs"\nimage_size = 16\npartition = "dirichlet"\npsi = 1.0\nper_node = 100'
    (tmp_path / "s.toml").write_text(_drones_with_data(data))
    assert main(["simulate", "--check", str(tmp_path / "s.toml")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "laid out by split first (test/, train/ each holding class folders class0, class1, " \
                             "class2)" in err[0] and "data.splits = ['test', 'train'] in a scenario" in err[0], err
    (tmp_path / "s.toml").write_text(_drones_with_data(data + '\nsplits = ["train"]'))
    assert main(["simulate", "--check", str(tmp_path / "s.toml")]) == 0


@pytest.mark.parametrize("partition, needle", [
    ('partition = "dirichlet"\npsi = 1.0', "cannot give 3 nodes data.per_node = 300 images each at data.psi = 1.0"),
    ('partition = "region"\ncoords = "filename"', "cannot give 3 nodes data.min_samples = 40 images each"),
])
def test_a_pool_too_small_for_the_partition_names_the_fields_before_pretraining(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], partition: str, needle: str) -> None:
    _image_folder(tmp_path / "imgs", per_class=10, coords=True)
    (tmp_path / "wp.csv").write_text("node_id,t_s,x_km,y_km,z_km\na,0,0,0,0.1\nb,0,0.2,0,0.1\nc,0,0.4,0,0.1\n")
    (tmp_path / "s.toml").write_text(_drones_with_data(f'dataset = "imagefolder"\npath = "imgs"\n{partition}'))
    assert main(["simulate", str(tmp_path / "s.toml"), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"fol simulate: error: {tmp_path / 's.toml'}: data: the imagefolder "
                                               f"pool of 30 images {needle}"), err
    assert not (tmp_path / "out").exists()  # stopped before the output folder was started (no --resume needed)


@pytest.mark.parametrize("data, needle", [
    ("size = 250\nper_node = 100", "data.size: 250 images cannot give 3 nodes data.per_node = 100 each "
                                   "(dirichlet partition)"),
    ("per_node = 4001", "data.size (default 12000): 12000 images cannot give 3 nodes data.per_node = 4001 each"),
    ('size = 100\npartition = "region"', "data.size: 100 images cannot give 3 nodes data.min_samples = 40 each"),
])
def test_the_check_refuses_a_synthetic_pool_too_small_for_the_partition(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], data: str, needle: str) -> None:
    """The dirichlet partition gives every node exactly per_node images: a synthetic pool of
    fewer than nodes x per_node passed ``--check`` and stopped the run once drawn."""
    (tmp_path / "wp.csv").write_text("node_id,t_s,x_km,y_km,z_km\na,0,0,0,0.1\nb,0,0.2,0,0.1\nc,0,0.4,0,0.1\n")
    text = _drones_with_data(f'dataset = "synthetic-wildfire"\nimage_size = 16\n{data}')
    (tmp_path / "s.toml").write_text(text)
    assert main(["simulate", "--check", str(tmp_path / "s.toml")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"{tmp_path / 's.toml'}: {needle}" in err[0], err
    if "size = 250" in data:  # 3 x 100 images: enough
        (tmp_path / "s.toml").write_text(text.replace("size = 250", "size = 300"))
        assert main(["simulate", "--check", str(tmp_path / "s.toml")]) == 0


def test_a_place_based_partition_of_a_pool_without_coordinates_says_so(tmp_path: Path,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """SVHN has no coordinates: the region partition stops in one line naming the
    field, after the pool is read and before any node is pretrained."""
    import scipy.io

    rng = np.random.default_rng(0)
    (tmp_path / "data" / "svhn").mkdir(parents=True)
    scipy.io.savemat(tmp_path / "data" / "svhn" / "train_32x32.mat",
                     {"X": rng.integers(0, 256, (32, 32, 3, 90), dtype=np.uint8),
                      "y": rng.integers(1, 11, (90, 1)).astype(np.uint8)})
    scipy.io.savemat(tmp_path / "data" / "svhn" / "test_32x32.mat",
                     {"X": rng.integers(0, 256, (32, 32, 3, 30), dtype=np.uint8),
                      "y": rng.integers(1, 11, (30, 1)).astype(np.uint8)})
    (tmp_path / "wp.csv").write_text("node_id,t_s,x_km,y_km,z_km\na,0,0,0,0.1\nb,0,0.2,0,0.1\n")
    (tmp_path / "s.toml").write_text(_drones_with_data('dataset = "svhn"\nroot = "data"\npartition = "region"'))
    assert main(["simulate", str(tmp_path / "s.toml"), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "data.partition: 'region' places images by their coordinates, but 120 of the 120 " \
        "images of the svhn pool have none; use partition = 'dirichlet'" in err[0], err
    assert not (tmp_path / "out").exists()


def _tle_scenario(folder: Path) -> Path:
    """LEO with its satellites in a TLE file named by a relative path."""
    from orbits import walker_delta, write_tle

    folder.mkdir(parents=True, exist_ok=True)
    write_tle(folder / "shell.tle", walker_delta(6, 2, 1, 550.0, 53.0, "2026-06-01T00:00:00Z"))
    text = LEO.replace('kind = "walker-delta"\ntotal = 6\nplanes = 2\nphasing = 1\naltitude_km = 550.0\n'
                       'inclination_deg = 53.0\nepoch = "2026-06-01T00:00:00Z"',
                       'kind = "tle"\ntle_file = "shell.tle"')
    text = text.replace("[time]\n", '[time]\nstart = "2026-06-01T00:00:00Z"\n')
    assert 'tle_file = "shell.tle"' in text
    (folder / "leo.toml").write_text(text)
    return folder / "leo.toml"


def test_resume_after_a_kill_during_pretraining_keeps_finished_nodes(tiny_leo_local, tmp_path: Path,
                                                                      monkeypatch) -> None:
    """A run killed during pretraining and resumed gives the rows of a run never
    stopped: those of seed 0 of the shared local run (the TLE file holds the tiny
    LEO scenario's Walker shell, and the rows of the two are equal to the bit:
    TLE precision keeps every contact window of this shell)."""
    scenario = _tle_scenario(tmp_path / "scenarios")

    cut = tmp_path / "cut"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "fol.cli", "simulate", str(scenario), "--out", str(cut)],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    pretrained = cut / "state" / "seed-0" / "pretrained"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        if pretrained.exists() and len(list(pretrained.glob("*.safetensors"))) >= 1:
            break
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    kept = {p.name: p.read_bytes() for p in pretrained.glob("*.safetensors")}
    assert 1 <= len(kept) < 6, f"not killed during pretraining ({len(kept)} of 6 nodes checkpointed)"

    monkeypatch.chdir(tmp_path)  # --resume must not resolve tle_file against the output folder or here
    assert main(["simulate", "--resume", str(cut)]) == 0
    for name, data in kept.items():  # finished nodes were kept, not pretrained again
        assert (pretrained / name).read_bytes() == data
    assert len(list(pretrained.glob("*.safetensors"))) == 6
    # build_nodes split every node by node_seed: a later fol personalize re-splits by the rule the card records
    assert {read_card(p).extra.get("split_seed") for p in pretrained.glob("*.safetensors")} == {"node_seed"}
    # and a card of them without the rule (one saved before it was recorded) is still told by its own keys
    from fol.nodedata import SIMULATION_CARD_KEYS, recorded_split_rule

    for p in pretrained.glob("*.safetensors"):
        extra = {k: v for k, v in read_card(p).extra.items() if k != "split_seed"}
        assert set(SIMULATION_CARD_KEYS) <= extra.keys() and recorded_split_rule(extra, str(p)) == "node_seed"
    a, b = [r for r in _rows(tiny_leo_local[2].out) if r["seed"] == "0"], _rows(cut)
    assert len(a) == len(b) == 18
    assert sum(int(r["received_models"]) for r in a if r["method"] == "fol") > 0  # FOL really exchanged models
    for ra, rb in zip(a, b, strict=True):
        assert (ra["method"], ra["node"]) == (rb["method"], rb["node"])
        assert float(ra["test_accuracy"]) == pytest.approx(float(rb["test_accuracy"]), abs=1e-9)
        assert ra["bytes_down"] == rb["bytes_down"]


def test_resume_refuses_a_scenario_that_changes_results(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    base = {"run": ["local", "fol", "fol-a", "fedavg"]}
    scn = parse_scenario(_doc(methods=base), tmp_path, "tiny.toml")
    out.mkdir()
    (out / "scenario.resolved.json").write_text(json.dumps(scn.resolved()))
    same = parse_scenario(_doc(methods=base, run={"executor": "process", "workers": 2}), tmp_path, "elsewhere.toml")
    assert result_settings(same.resolved()) == result_settings(scn.resolved())  # executor and file name: neutral
    # each named as the scenario file writes it (docs/running-simulations.md): 'name' was said of
    # [scenario] name, 'contact' of a field of the contact side's [link] table
    for changes, named in (({"link": {"acquisition_s": 5.0}}, "link.acquisition_s"),
                           ({"models": {"archs": ["resnet-small"]}}, "models.archs"),
                           ({"methods": {**base, "fedavg": {"fraction": 0.5}}}, "methods.fedavg.fraction"),  # a table the run had not
                           ({"rounds": {"count": 2}}, "fol.rounds, rounds.count"),  # fol.rounds' default: the plan's
                           ({"scenario": {"seeds": [1]}}, "scenario.seeds"),
                           ({"scenario": {"name": "renamed"}}, "scenario.name")):  # the report's title
        other = parse_scenario(_doc(**{"methods": dict(base), **changes}), tmp_path, "tiny.toml")
        with pytest.raises(ConfigError) as refused:
            run_simulation(other, out, resume=True)
        assert str(refused.value).endswith(f"differs from the interrupted run's in {named}; use a new output folder"), \
            (named, str(refused.value))
    assert sorted(p.name for p in out.iterdir()) == ["scenario.resolved.json"]  # refused before any work


def test_resume_takes_method_options_written_at_their_defaults_and_refuses_one_changed(tmp_path: Path) -> None:
    """``--resume`` refused a scenario that wrote out a method's option at its default (``[methods.fedavg]
    fraction = 1.0``), or a table of a method it does not run, as a change: the run would be the same. A
    value other than the default is still refused, naming the field; so is one the record holds against
    the default now left out."""
    out = tmp_path / "out"
    out.mkdir()
    base = {"run": ["local", "fedavg", "dense"]}
    scn = parse_scenario(_doc(methods=base), tmp_path, "tiny.toml")
    (out / "scenario.resolved.json").write_text(json.dumps(scn.resolved()))
    explicit = {**base, "fedavg": {"fraction": 1.0, "local_epochs": 5}, "dense": {"budget": "tiny", "epochs": 15},
                "hermes": {"prune_rate": 0.3}}  # hermes is not run: its options change nothing
    check_resumable(parse_scenario(_doc(methods=explicit), tmp_path, "tiny.toml"), out)
    for changes, named in (({"fedavg": {"fraction": 0.5}}, "methods.fedavg.fraction"),
                           ({"fedavg": {"local_epochs": 4}}, "methods.fedavg.local_epochs"),
                           ({"dense": {"epochs": 14}}, "methods.dense.epochs")):
        other = parse_scenario(_doc(methods={**base, **changes}), tmp_path, "tiny.toml")
        with pytest.raises(ConfigError) as refused:
            check_resumable(other, out)
        assert str(refused.value).endswith(f"differs from the interrupted run's in {named}; use a new output folder"), \
            (named, str(refused.value))
    # and the other way: the run had the option off its default, the scenario now leaves it out
    changed = parse_scenario(_doc(methods={**base, "fedavg": {"fraction": 0.5}}), tmp_path, "tiny.toml")
    (out / "scenario.resolved.json").write_text(json.dumps(changed.resolved()))
    with pytest.raises(ConfigError, match=r"differs from the interrupted run's in methods\.fedavg\.fraction;"):
        check_resumable(scn, out)


def test_resume_reads_a_record_saved_with_method_options_as_written(tmp_path: Path) -> None:
    """A run record saved before the defaults were filled in holds ``methods`` as the file wrote them
    (no table for a method given none): it is not refused for that form alone, and a real change is."""
    out = tmp_path / "out"
    out.mkdir()
    base = {"run": ["local", "fedavg"]}
    scn = parse_scenario(_doc(methods=base), tmp_path, "tiny.toml")
    for written, accepted in (({}, True), ({"fedavg": {"fraction": 1.0}}, True), ({"fedavg": {"fraction": 0.5}}, False)):
        old_form = {**json.loads(json.dumps(scn.resolved())), "methods": {**base, **written}}
        (out / "scenario.resolved.json").write_text(json.dumps(old_form))
        for now in (scn, parse_scenario(_doc(methods={**base, "fedavg": {"fraction": 1.0}}), tmp_path, "tiny.toml")):
            if accepted:
                check_resumable(now, out)
            else:
                with pytest.raises(ConfigError, match=r"differs from the interrupted run's in methods\.fedavg\.fraction;"):
                    check_resumable(now, out)


def test_check_with_resume_refuses_what_the_resume_would(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``--check --resume`` said OK for a scenario that changes results and for a folder
    holding no run, both of which the resumed run then refused."""
    (tmp_path / "tiny.toml").write_text(LEO)
    (tmp_path / "other.toml").write_text(LEO.replace("acquisition_s = 30.0", "acquisition_s = 5.0"))
    out, mine = tmp_path / "out", tmp_path / "mine"
    out.mkdir()
    (out / "scenario.resolved.json").write_text(json.dumps(parse_scenario(_doc(), tmp_path, "tiny.toml").resolved()))
    mine.mkdir()
    (mine / "notes.txt").write_text("a user's folder")
    assert main(["simulate", str(tmp_path / "tiny.toml"), "--resume", str(out), "--check"]) == 0
    capsys.readouterr()
    for scenario, folder, expected in (("other.toml", out, "differs from the interrupted run's in link.acquisition_s;"),
                                       ("tiny.toml", mine, "no readable scenario.resolved.json")):
        assert main(["simulate", str(tmp_path / scenario), "--resume", str(folder), "--check"]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and f"--resume {folder}: " in err[0] and expected in err[0], err
    assert sorted(p.name for p in out.iterdir()) == ["scenario.resolved.json"]
    assert sorted(p.name for p in mine.iterdir()) == ["notes.txt"]


@pytest.mark.parametrize("record", ["[1]", '{"source": 7}', '{"base_dir": ["x"]}', "{\"source\": \"tiny", ""])
def test_resume_refuses_a_broken_run_record_in_one_line(record: str, tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    """A hand-edited or truncated ``scenario.resolved.json`` is one line (it was
    an AttributeError / TypeError / JSONDecodeError traceback), with or without
    the scenario file, and the record is left as it was."""
    out = tmp_path / "out"
    out.mkdir()
    (out / "scenario.resolved.json").write_text(record)
    (out / "scenario.toml").write_text(LEO)
    (tmp_path / "tiny.toml").write_text(LEO)
    for argv in (["simulate", "--resume", str(out)], ["simulate", str(tmp_path / "tiny.toml"), "--resume", str(out)]):
        assert main(argv) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and f"--resume {out}: " in err[0] and "scenario.resolved.json" in err[0], err
    assert (out / "scenario.resolved.json").read_text() == record
    assert sorted(p.name for p in out.iterdir()) == ["scenario.resolved.json", "scenario.toml"]



def test_resume_with_another_out_is_refused_not_ignored(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``--resume A --out B`` wrote everything to A and said nothing about B."""
    out = tmp_path / "out"
    out.mkdir()
    (out / "scenario.toml").write_text(LEO)
    scn = parse_scenario(_doc(), tmp_path, "tiny.toml")
    (out / "scenario.resolved.json").write_text(json.dumps(scn.resolved()))
    other = tmp_path / "other"
    assert main(["simulate", "--resume", str(out), "--out", str(other), "--check"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"--out {other}: a resumed run continues in its own folder --resume {out}" in err[0], err
    assert not other.exists()
    assert main(["simulate", "--resume", str(out), "--out", str(out), "--check"]) == 0  # the same folder: fine


def test_resume_with_a_hand_edited_run_table_says_it_differs(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    scn = parse_scenario(_doc(), tmp_path, "tiny.toml")
    (out / "scenario.resolved.json").write_text(json.dumps({**scn.resolved(), "run": [1]}))
    with pytest.raises(ConfigError, match="differs from the interrupted run's in run;"):
        run_simulation(scn, out, resume=True)
    # a record far from the scenario: the first fields that differ, then how many more, in one line
    data = {k: "edited" for k in scn.resolved()["data"]}
    (out / "scenario.resolved.json").write_text(json.dumps({**scn.resolved(), "data": data}))
    with pytest.raises(ConfigError) as refused:
        run_simulation(scn, out, resume=True)
    shown = ", ".join(f"data.{k}" for k in sorted(data)[:5])
    assert str(refused.value).endswith(f"in {shown} and {len(data) - 5} more; use a new output folder"), str(refused.value)


def test_refuses_to_overwrite_a_run_without_resume(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "something").write_text("x")
    scn = parse_scenario(_doc(), tmp_path, "tiny.toml")
    with pytest.raises(ConfigError, match="not empty"):
        run_simulation(scn, out)


def test_resume_refuses_saved_results_that_are_broken_and_keeps_them(tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """A saved per-method result file that is truncated, of other types or of
    another method is one line naming it on ``--resume`` (it was a traceback),
    and the file is left as it was."""
    out = _local_only_run(tmp_path)
    saved = out / "state" / "seed-0" / "results" / "local.json"
    good = saved.read_text()
    capsys.readouterr()
    for bad, needle in ((good[:40], "(not valid JSON (Expecting"), ('{"node": "a"}', "expected a list"),
                        ('[{"node": 1, "method": "local", "test_accuracy": 0.5}]', "node: expected str"),
                        (good.replace('"local"', '"fol"'), "of method 'fol'"),
                        # counts are whole numbers: a float or negative one was taken into the report
                        (good.replace('"rounds": 0', '"rounds": 2.5', 1), "rounds: expected a whole number >= 0, got 2.5"),
                        (good.replace('"bytes_up": 0', '"bytes_up": -5', 1), "bytes_up: expected a whole number >= 0, got -5"),
                        # a count or an accuracy beyond any float, what the report reads of extra of another
                        # type: an OverflowError or TypeError traceback while writing the report
                        (re.sub(r'"train_flops": \d+', '"train_flops": 1' + "0" * 400, good, count=1),
                         "train_flops: expected a whole number >= 0 below 2**63, got 10000000000000000000... (401 digits)"),
                        (re.sub(r'"test_accuracy": [^,]+', '"test_accuracy": 1' + "0" * 400, good, count=1),
                         "test_accuracy: expected float, got int beyond any float"),
                        (re.sub(r'"test_accuracy": [^,]+', '"test_accuracy": Infinity', good, count=1),
                         "test_accuracy: expected a share from 0 to 1 (or NaN), got inf"),
                        (good.replace('"extra": {}', '"extra": {"exchanges": ["x"]}', 1),
                         "extra.exchanges: expected a list of objects, got ['x']"),
                        (good.replace('"extra": {}', '"extra": {"accuracy": {"local": 1e999999, "student": 1, "ensemble": 1' + "0" * 400 + "}}", 1),
                         "extra.accuracy: ensemble: expected a number, got 10000000000000000000... (401 digits)"),
                        # nested thousands deep: a RecursionError traceback
                        (good.replace('"extra": {}', '"extra": {"x": ' + "[" * 5000 + "]" * 5000 + "}", 1),
                         "nested deeper than")):
        saved.write_text(bad)
        assert main(["simulate", "--resume", str(out)]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and str(saved) in err[0] and needle in err[0], err
        assert saved.read_text() == bad
    saved.write_text(good)
    # the run's record and its input-file digests, nested thousands deep: one line naming them, kept
    deep = "[" * 5000 + "]" * 5000
    for record in (out / "scenario.resolved.json", out / "state" / "inputs.json"):
        kept = record.read_text()
        record.write_text(deep)
        assert main(["simulate", "--resume", str(out)]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and record.name in err[0], err
        assert record.read_text() == deep
        record.write_text(kept)
    # the wall time is only reported: a damaged one is left out (as a missing one), not a traceback
    for damaged in (deep, '{"seconds": 1' + "0" * 400 + "}"):  # the second: an OverflowError traceback
        (out / "state" / "wall_seconds.json").write_text(damaged)
        assert main(["simulate", "--resume", str(out)]) == 0
        assert "after --resume only" in (out / "report.md").read_text()


def test_resume_refuses_saved_results_that_miss_or_repeat_a_node(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    """A saved per-method result file must hold every node of the swarm once: one
    without a node's row (left out of the report's means) or with a node twice
    (counted twice) was taken as the method's result; it is one line naming it."""
    out = _local_only_run(tmp_path)
    saved = out / "state" / "seed-0" / "results" / "local.json"
    good = saved.read_text()
    rows = json.loads(good)
    assert sorted(r["node"] for r in rows) == ["a", "b", "c"]
    capsys.readouterr()
    for bad, needle in ((rows[:2], "no result for node 'c'"), (rows + rows[:1], "node 'a' twice")):
        saved.write_text(json.dumps(bad))
        assert main(["simulate", "--resume", str(out)]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and str(saved) in err[0] and needle in err[0], err
        assert json.loads(saved.read_text()) == bad
    saved.write_text(good)
    # a bad field in the copy --resume reads names the copy (it named the original file, which is fine)
    copy = out / "scenario.toml"
    kept = copy.read_text()
    copy.write_text(kept.replace('executor = "local"', "executor = 0"))
    assert main(["simulate", "--resume", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"fol simulate: error: {copy}: run.executor: expected a string, got 0"], err
    copy.write_text(kept)
    assert main(["simulate", "--resume", str(out)]) == 0
    # the run recorded its waypoint file's contents: one edited since is refused, not mixed in
    (tmp_path / "wp.csv").write_text((tmp_path / "wp.csv").read_text().replace("a,600,0.2", "a,600,9.2"))
    capsys.readouterr()
    assert main(["simulate", "--resume", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"the contents of drones.waypoints_csv ({tmp_path / 'wp.csv'}) differ" in err[0], err



def test_resume_compares_the_contents_of_the_contact_input_files(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """The run's record names the waypoint / TLE / OMM / mission / plan files, not their
    contents: a file edited between the run and --resume was read as it came, and the
    report mixed results of two contact plans. The run now records each one's sha256
    (state/inputs.json) and --resume (and --check --resume) refuses a changed one in one line."""
    from fol.simulation import load_scenario
    from fol.simulation.check import INPUTS_FILE, input_digests

    wp = tmp_path / "wp.csv"
    wp.write_text("node_id,t_s,x_km,y_km,z_km\n" + "".join(f"{n},0,{0.1 * k},0,0.1\n" for k, n in enumerate("abc")))
    (tmp_path / "s.toml").write_text(DRONES)
    scn = load_scenario(tmp_path / "s.toml")
    out = tmp_path / "out"
    (out / "state").mkdir(parents=True)
    (out / "scenario.resolved.json").write_text(json.dumps(scn.resolved(), default=str))
    (out / INPUTS_FILE).write_text(json.dumps(input_digests(scn)))
    argv = ["simulate", str(tmp_path / "s.toml"), "--resume", str(out), "--check"]
    assert main(argv) == 0
    wp.write_text(wp.read_text().replace("c,0,0.2", "c,0,0.3"))
    capsys.readouterr()
    for bad, needle in ((None, f"the contents of drones.waypoints_csv ({wp}) differ from the interrupted run's"),
                        ("[1]", f"{out / INPUTS_FILE}: not the record of the run's input files"),
                        ('{"a": ', f"{out / INPUTS_FILE}: not the record of the run's input files (not valid JSON "
                                   "(Expecting value: line 1 column 7 (char 6)))")):
        if bad is not None:
            (out / INPUTS_FILE).write_text(bad)
        assert main(argv) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and f"--resume {out}: " in err[0] and needle in err[0], err
    (out / INPUTS_FILE).unlink()  # a run made before the record was kept: resumed as it is
    assert main(argv) == 0


def test_resume_compares_the_images_of_an_image_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An image folder's files were not compared on --resume: an image edited, added, removed
    or moved to another class between the run and the resume was read as it came, and the
    report mixed two datasets. The run now records every image's size and sha256 and its
    coords.csv (state/inputs.json); a changed one is refused in one line naming the first."""
    from fol.simulation import load_scenario
    from fol.simulation.check import INPUTS_FILE, input_digests

    imgs = tmp_path / "imgs"
    _image_folder(imgs, per_class=3, coords=False)
    (imgs / "coords.csv").write_text("file,lat,lon\n" + "".join(
        f"{p.relative_to(imgs).as_posix()},45.0,-65.0\n" for p in sorted(imgs.rglob("*.png"))))
    (tmp_path / "wp.csv").write_text("node_id,t_s,x_km,y_km,z_km\n" + "".join(
        f"{n},0,{0.1 * k},0,0.1\n" for k, n in enumerate("abc")))
    (tmp_path / "s.toml").write_text(_drones_with_data(
        'dataset = "imagefolder"\npath = "imgs"\ncoords = "csv"\nimage_size = 12\npartition = "region"\nmin_samples = 20'))
    scn = load_scenario(tmp_path / "s.toml")
    out = tmp_path / "out"
    (out / "state").mkdir(parents=True)
    (out / "scenario.resolved.json").write_text(json.dumps(scn.resolved(), default=str))
    record = input_digests(scn)
    assert sorted(record["data.path"]) == [f"class{c}/img{i}.png" for c in range(3) for i in range(3)]
    (out / INPUTS_FILE).write_text(json.dumps(record))
    argv = ["simulate", str(tmp_path / "s.toml"), "--resume", str(out), "--check"]
    assert main(argv) == 0
    one, other = imgs / "class1" / "img0.png", imgs / "class2" / "img0.png"
    kept = one.read_bytes()
    changes = [  # (change, undo, the refusal's words)
        (lambda: one.write_bytes(other.read_bytes()), lambda: one.write_bytes(kept), "class1/img0.png was edited"),
        (lambda: shutil.copy(one, imgs / "class2" / "new.png"), lambda: (imgs / "class2" / "new.png").unlink(),
         "class2/new.png was added"),
        (lambda: one.rename(imgs / "class0" / "moved.png"), lambda: (imgs / "class0" / "moved.png").rename(one),
         "class0/moved.png was added; 1 more image(s) differ"),
        (lambda: one.unlink(), lambda: one.write_bytes(kept), "class1/img0.png was removed"),
        (lambda: (imgs / "coords.csv").write_text((imgs / "coords.csv").read_text().replace("45.0", "46.0", 1)),
         lambda: (imgs / "coords.csv").write_text((imgs / "coords.csv").read_text().replace("46.0", "45.0", 1)),
         f"the contents of data.coords ({imgs / 'coords.csv'}) differ"),
    ]
    capsys.readouterr()
    for change, undo, needle in changes:
        change()
        assert main(argv) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and f"--resume {out}: " in err[0] and needle in err[0], err
        undo()
        assert main(argv) == 0
    (imgs / "class1" / "._img0.png").write_bytes(b"macOS metadata")  # not an image the loader reads
    (imgs / "notes.txt").write_text("a user's notes")
    assert main(argv) == 0
    # a record made before the image folder was recorded resumes without comparing it
    (out / INPUTS_FILE).write_text(json.dumps({k: v for k, v in record.items() if not k.startswith("data.")}))
    one.write_bytes(other.read_bytes())
    assert main(argv) == 0


def _local_only_run(tmp_path: Path) -> Path:
    """A finished run of the three-drone scenario with the local method only; its folder."""
    (tmp_path / "wp.csv").write_text("node_id,t_s,x_km,y_km,z_km\n" + "".join(
        f"{n},0,{0.1 * k},0,0.1\n{n},600,{0.1 * k + 0.2},0,0.1\n" for k, n in enumerate("abc")))
    (tmp_path / "s.toml").write_text(DRONES.replace('run = ["local", "fol", "fedavg"]', 'run = ["local"]'))
    out = tmp_path / "out"
    assert main(["simulate", str(tmp_path / "s.toml"), "--out", str(out)]) == 0
    return out


def test_a_run_killed_while_writing_its_report_is_completed_by_resume(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """A run killed after results.csv and results.json but before report.md (the last file written)
    leaves the rows of every method, whole (the crash-safe writer), and no report: --resume, with
    every method's result saved, trains nothing and writes the whole set again, report.md included."""
    from fol.simulation import report as report_module

    (tmp_path / "wp.csv").write_text("node_id,t_s,x_km,y_km,z_km\n" + "".join(
        f"{n},0,{0.1 * k},0,0.1\n{n},600,{0.1 * k + 0.2},0,0.1\n" for k, n in enumerate("abc")))
    (tmp_path / "s.toml").write_text(DRONES.replace('run = ["local", "fol", "fedavg"]', 'run = ["local"]'))
    out = tmp_path / "out"

    class Killed(BaseException):
        pass

    real = report_module.atomic_write_text

    def killed_at_the_report(path, *args, **kwargs):
        if Path(path).name == "report.md":
            raise Killed  # as SIGKILL there: nothing after it runs
        return real(path, *args, **kwargs)

    monkeypatch.setattr(report_module, "atomic_write_text", killed_at_the_report)
    with pytest.raises(Killed):
        main(["simulate", str(tmp_path / "s.toml"), "--out", str(out)])
    monkeypatch.undo()
    assert (out / "results.csv").exists() and (out / "results.json").exists() and not (out / "report.md").exists()
    rows, saved = (out / "results.csv").read_bytes(), (out / "state" / "seed-0" / "results" / "local.json")
    saved_at = saved.stat().st_mtime_ns
    assert main(["simulate", "--resume", str(out)]) == 0
    assert saved.stat().st_mtime_ns == saved_at  # the method's saved result was read back, not run again
    assert (out / "results.csv").read_bytes() == rows
    assert (out / "report.md").read_text().startswith("# Swarm simulation: ")


def test_every_seed_plans_on_the_one_table_of_windows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A run of two seeds books each seed's transfers on a plan of its own whose windows are the searched
    plan's arrays, not a copy: before, every seed deep-copied the plan (about 65 bytes a window, the
    resident set rose 258 MiB for 4.2 million windows), which the contact search's budget did not count."""
    from fol.simulation import runner

    searched = []

    def search(*args, **kwargs):
        searched.append(real(*args, **kwargs))
        return searched[-1]

    real = runner.plan_from_trajectories
    monkeypatch.setattr(runner, "plan_from_trajectories", search)
    (tmp_path / "wp.csv").write_text("node_id,t_s,x_km,y_km,z_km\n" + "".join(
        f"{n},0,{0.1 * k},0,0.1\n{n},600,{0.1 * k + 0.2},0,0.1\n" for k, n in enumerate("abc")))
    doc = tomllib.loads(DRONES.replace('run = ["local", "fol", "fedavg"]', 'run = ["local"]'))
    doc["scenario"]["seeds"] = [0, 1]
    result = run_simulation(parse_scenario(doc, tmp_path, "s.toml"), tmp_path / "out", progress=False)
    assert len(searched) == 1 and len(searched[0].windows) > 0 and result.plan is not searched[0]
    for name in ("a", "b", "t_start_s", "t_end_s", "capacity_bytes", "direction"):
        assert getattr(result.plan.windows, name) is getattr(searched[0].windows, name)


def test_the_recorded_digest_of_the_drones_file_is_of_the_file_the_run_flew(tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """Review: the drones' files are read once, by the check, and the window search reuses that read; the
    run's record of their sha256 (state/inputs.json, which --resume compares the files with) was taken
    later, after the data pool was read (seconds to minutes): a waypoint file edited in between was
    recorded as the edited file while the run flew the one read before, and a --resume with the edited
    file went on as if nothing had changed. The digests are now taken as the check reads the files."""
    import hashlib

    from fol.simulation import runner

    wp = tmp_path / "wp.csv"
    wp.write_text("node_id,t_s,x_km,y_km,z_km\n" + "".join(
        f"{n},0,{0.1 * k},0,0.1\n{n},600,{0.1 * k + 0.2},0,0.1\n" for k, n in enumerate("abc")))
    flown = hashlib.sha256(wp.read_bytes()).hexdigest()
    real = runner._load_pool

    def load_pool(*args, **kwargs):  # the file edited while the pool is read
        wp.write_text(wp.read_text().replace("c,600,0.4", "c,600,9.4"))
        return real(*args, **kwargs)

    monkeypatch.setattr(runner, "_load_pool", load_pool)
    doc = tomllib.loads(DRONES.replace('run = ["local", "fol", "fedavg"]', 'run = ["local"]'))
    run_simulation(parse_scenario(doc, tmp_path, "s.toml"), tmp_path / "out", progress=False)
    assert hashlib.sha256(wp.read_bytes()).hexdigest() != flown  # edited
    recorded = json.loads((tmp_path / "out" / "state" / "inputs.json").read_text())
    assert recorded["drones.waypoints_csv"] == flown


def test_resume_refuses_a_pretrained_checkpoint_of_another_node(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    """A checkpoint in another node's place (copied or renamed by hand) was taken as
    that node's pretrained model and silently changed every result; it is now one
    line naming the file, and nothing saved is changed."""
    out = _local_only_run(tmp_path)
    state = out / "state" / "seed-0"
    (state / "results" / "local.json").unlink()  # interrupted before the methods
    a, b = state / "pretrained" / "a.safetensors", state / "pretrained" / "b.safetensors"
    a.write_bytes(b.read_bytes())
    kept = {p.name: p.read_bytes() for p in state.rglob("*") if p.is_file()}
    capsys.readouterr()
    assert main(["simulate", "--resume", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(a) in err[0] and "node 'b' seed 0, not of node 'a' seed 0" in err[0], err
    assert {p.name: p.read_bytes() for p in state.rglob("*") if p.is_file()} == kept


def test_resume_refuses_a_checkpoint_of_another_architecture_and_says_what_to_do(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A checkpoint of another architecture in a node's place (swapped by hand: an edited scenario is
    refused before) told the user to start a fresh output folder, losing the run's saved work; moving
    the one file away pretrains that node again."""
    import dataclasses

    from fol.checkpoint import load_model, save_model
    from fol.models import ModelSpec, build_model

    out = _local_only_run(tmp_path)
    state = out / "state" / "seed-0"
    (state / "results" / "local.json").unlink()  # interrupted before the methods
    a = state / "pretrained" / "a.safetensors"
    loaded = load_model(a)
    spec = loaded.card.spec
    other = ModelSpec("cnn-small" if spec.arch != "cnn-small" else "cnn-medium", spec.num_classes,
                      spec.in_channels, spec.input_size)
    save_model(a, build_model(other, seed=0), dataclasses.replace(loaded.card, spec=other))
    capsys.readouterr()
    assert main(["simulate", "--resume", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"--resume: {a}: a '{other.arch}' checkpoint where the scenario gives node 'a' " \
        f"'{spec.arch}'" in err[0] and "move the file away to pretrain 'a' again" in err[0], err
    a.unlink()
    assert main(["simulate", "--resume", str(out)]) == 0


def test_resume_names_a_refused_pretrained_model_through_brief(tmp_path: Path) -> None:
    """``--resume``'s refusal of a node's pretrained model wrote the file's name as it is, where every
    other message writes it through ``brief()``: a name holding a terminal's escape character reached
    the terminal raw."""
    from fol.checkpoint import read_card
    from fol.simulation.check import refused_pretrained
    from swarmbase.tomlcheck import brief

    path = tmp_path / "a\x1b[2J.safetensors"
    path.write_bytes(b"not a model")
    with pytest.raises(ConfigError) as refused, refused_pretrained(path, "a"):
        read_card(path)
    message = str(refused.value)
    assert "\x1b" not in message and message.startswith(f"--resume: {brief(path)}: not a pretrained model this "
                                                         "run saved (") and "\\x1b[2J" in message, message
    assert f"{brief(path)}:" not in message.split("saved (", 1)[1], message  # the loader's prefix, taken off once
    assert message.endswith("); move the file away to pretrain 'a' again"), message


def test_a_contact_refusal_names_the_scenario_once_through_brief(tmp_path: Path) -> None:
    """The contact side names a scenario file through brief(); errors_name_the_file compared the message with
    the name as it is, so a name holding a terminal's escape was written twice, raw then escaped. It is named
    once, through brief(), as fol contacts names it."""
    from fol.simulation import load_scenario
    from fol.simulation.check import check_scenario
    from swarmbase.tomlcheck import brief

    path = tmp_path / "s\x1b[2J.toml"
    path.write_text(LEO + '[[ground_stations]]\nname = "WD-P01-S02"\nlat_deg = 1.0\nlon_deg = 2.0\n')
    with pytest.raises(ContactError) as refused:
        check_scenario(load_scenario(path), check_data=False)
    assert str(refused.value) == (f"{brief(path)}: ground_stations[0].name: 'WD-P01-S02' is also the name of a "
                                  "satellite; node names must be unique")


#: File names a message must name in one bounded, escaped line: a newline, a terminal's escape, 5,000 characters.
ODD_NAMES = ["a\nb\x1b[2J.toml", "x" * 5000]


@pytest.mark.parametrize("source", ODD_NAMES, ids=["control", "long"])
@pytest.mark.parametrize("changes", [{"data": {"partiton": 1}}, {"run": {"bogus": 1}}, {"fol": {"topk": 1}},
                                     {"fol": {"top_k": 0}}, {"models": {"rule": "x"}}], ids=str)
def test_a_learning_table_refusal_names_the_scenario_through_brief(source: str, changes: dict) -> None:
    """A learning table's refusal ([data], [run], [output] through _table, [fol] through FOLConfig.from_dict)
    named the file as it is: a newline or a terminal's escape went raw into the message and a long name whole,
    where errors_name_the_file and the contact side name it through brief(). One bounded, escaped line now."""
    from swarmbase.tomlcheck import brief

    with pytest.raises(ConfigError) as refused:
        parse_scenario(_doc(**changes), Path("."), source)
    message = str(refused.value)
    assert message.startswith(f"{brief(source)}: ") and message.count(brief(source)) == 1, message
    assert message.isprintable() and len(message) < 500, message


@pytest.mark.parametrize("original", ODD_NAMES, ids=["control", "long"])
def test_resume_names_the_copy_once_whatever_the_original_is_called(original: str, tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """--resume reads the copy in the output folder as the original file named in the run's record, and names
    the copy in a refusal instead: it took off the original's name as it is, so a message naming it through
    brief() (a name holding a newline, or of 5,000 characters) kept the original's name; it names the copy."""
    from swarmbase.tomlcheck import brief

    out = tmp_path / "out"
    out.mkdir()
    (out / "scenario.resolved.json").write_text(json.dumps({"source": original, "base_dir": str(tmp_path)}))
    (out / "scenario.toml").write_text(LEO.replace('executor = "local"', 'executor = 0'))
    assert main(["simulate", "--resume", str(out)]) == 2
    err = capsys.readouterr().err
    assert err == f"fol simulate: error: {brief(out / 'scenario.toml')}: run.executor: expected a string, got 0\n", err


@pytest.mark.parametrize("name", ODD_NAMES, ids=["control", "long"])
def test_the_check_and_resume_name_every_file_through_brief(name: str, tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    """fol simulate's check and --resume named a file as it is: the scenario in the OK line and in the data
    refusals (scn.source), the output folder and the files in it (--resume OUT: ..., --resume: <file>: ...), a
    pretrained model of another node or architecture: a newline or a terminal's escape in the name went raw into
    the message and a 5,000-character name made a 5 kB line. Each is one bounded, escaped line, named by brief()."""
    import types

    from fol.checkpoint import save_model
    from fol.models import ModelSpec, build_model
    from fol.simulation import load_scenario
    from fol.simulation.check import (check_pretrained_card, check_resumable, check_scenario, read_run_record,
                                      saved_results)
    from fol.simulation.runner import _resumed_pretraining
    from swarmbase.tomlcheck import brief

    def one_line(message: str, *names: object) -> str:
        assert message.isprintable() and len(message) < 700, message
        assert all(brief(n) in message for n in names), message
        return message

    path = tmp_path / "s.toml"
    path.write_text(LEO)
    scn = load_scenario(path, source=name)
    summary = one_line(check_scenario(scn, check_data=False).summary(scn), name)
    assert summary.startswith(f"{brief(name)}: OK — "), summary
    odd = tmp_path / (name if len(name) < 200 else "o" * 200)  # a name the file system takes
    odd.mkdir()
    for out in (odd, Path(name)):  # missing: read_run_record; no record: check_resumable
        with pytest.raises(ConfigError) as refused:
            read_run_record(out / "none")
        assert one_line(str(refused.value), out / "none").startswith(f"--resume {brief(out / 'none')}: no readable ")
    with pytest.raises(ConfigError) as refused:
        check_resumable(scn, odd)
    one_line(str(refused.value), odd)
    with pytest.raises(ConfigError) as refused:
        saved_results(Path(name), "local", ["a"])
    assert one_line(str(refused.value), name).startswith(f"--resume: {brief(name)}: not the saved results ")
    card = types.SimpleNamespace(producer="b", extra={"seed": 0})
    with pytest.raises(ConfigError) as refused:
        check_pretrained_card(Path(name), card, "a", 0)  # type: ignore[arg-type]
    assert one_line(str(refused.value), name).startswith(f"--resume: {brief(name)}: the pretrained model of node ")
    model = odd / "m.safetensors"
    spec = ModelSpec("cnn-small", 2, 3, 16)
    save_model(model, build_model(spec, seed=0), spec=spec, class_names=["x", "y"], producer="a", extra={"seed": 0})
    with pytest.raises(ConfigError) as refused:
        _resumed_pretraining(model, ModelSpec("cnn-medium", 2, 3, 16), "a", 0)
    assert one_line(str(refused.value), model).startswith(f"--resume: {brief(model)}: a 'cnn-small' checkpoint ")
    (odd / "run").mkdir()
    assert main(["simulate", "--resume", str(odd / "run"), "--out", name]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and one_line(err.strip(), odd / "run", name), err
    assert main(["simulate", "--resume", str(odd / "run")]) == 2  # no scenario.toml there
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and one_line(err.strip(), odd / "run") and "no scenario.toml there" in err, err


@pytest.mark.parametrize("name", ODD_NAMES, ids=["control", "long"])
def test_the_report_line_names_the_output_folder_through_brief(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    """fol simulate's last line ('report: <out>/report.md ...', stdout, which the CLI does not escape) printed the
    output folder as given: a newline or a terminal's escape as it is, a 5,000-character folder whole."""
    import types

    from fol.simulation.cli import _print_outcome
    from swarmbase.tomlcheck import brief

    _print_outcome(types.SimpleNamespace(results=[], rounds_used={}, out=Path(name), seconds=1.0))
    last = capsys.readouterr().out.splitlines()[-1]
    assert last == f"report: {brief(Path(name) / 'report.md')} (plots and results.csv beside it); 1 s", last
    assert last.isprintable() and len(last) < 300, last


def _snapshot(folder: Path) -> dict[str, bytes | None]:
    """Every path under ``folder``: a file's bytes, None for a folder."""
    return {p.relative_to(folder).as_posix(): p.read_bytes() if p.is_file() else None for p in folder.rglob("*")}


def test_a_refused_resume_changes_nothing_in_the_run_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A --resume refused for any reason left the run folder changed: the run record and the
    wall time rewritten, the crash-safe writer's temporary files removed and, when a saved
    result or checkpoint was refused, the nodes not yet pretrained pretrained and saved first.
    Everything the resume reads is now checked before anything is written."""
    out = _local_only_run(tmp_path)
    state = out / "state" / "seed-0"
    (state / "pretrained" / "b.safetensors").unlink()  # interrupted: node b not pretrained yet
    (state / "results" / ".local.json.0123456789ab.tmp").write_bytes(b"half a file")
    scenario, copy, wp = tmp_path / "s.toml", out / "scenario.toml", tmp_path / "wp.csv"
    (tmp_path / "other.toml").write_text(scenario.read_text().replace("per_node = 100", "per_node = 90"))
    a, c, saved = state / "pretrained" / "a.safetensors", state / "pretrained" / "c.safetensors", state / "results" / "local.json"

    def damaged(path: Path, text: str | bytes):  # the file holds ``text`` for one resume, then what it held
        kept = path.read_bytes()
        path.write_bytes(text.encode() if isinstance(text, str) else text)
        yield
        path.write_bytes(kept)

    cases = [  # (damage, the scenario given with --resume, a word of the one-line refusal)
        (damaged(saved, saved.read_text()[:40]), [], str(saved)),
        (damaged(a, c.read_bytes()), [], "not of node 'a' seed 0"),
        (damaged(wp, wp.read_text().replace("a,600,0.2", "a,600,9.2")), [], "drones.waypoints_csv"),
        (damaged(out / "state" / "inputs.json", "[1]"), [], "not the record of the run's input files"),
        (damaged(copy, copy.read_text().replace('executor = "local"', "executor = 0")), [], "run.executor"),
        (damaged(out / "scenario.resolved.json", "[" * 5000), [], "scenario.resolved.json"),
        (iter([None, None]), [str(tmp_path / "other.toml")], "differs from the interrupted run's in data"),
    ]
    capsys.readouterr()
    for damage, given, needle in cases:
        next(damage)
        before = _snapshot(out)
        assert main(["simulate", *given, "--resume", str(out)]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and needle in err[0], err
        assert _snapshot(out) == before, needle
        next(damage, None)
    assert main(["simulate", "--resume", str(out)]) == 0  # restored: it resumes
    assert (state / "pretrained" / "b.safetensors").exists()


@pytest.mark.parametrize("flops", ["lots", [1], 1.5e300, -5, True])
def test_resume_refuses_a_checkpoint_whose_pretraining_flops_are_not_a_count(flops: object, tmp_path: Path) -> None:
    """A pretrained checkpoint's card carries its pretraining FLOPs (they feed every result's
    train FLOPs and energy). A value that is not a non-negative integer stopped --resume with
    int()'s traceback ('lots', [1]) or was taken as it came (1.5e300, -5, true): it is one line
    naming the file and the field, and a count is taken as it is."""
    import torch

    from fol.checkpoint import save_model
    from fol.models import ModelSpec, build_model
    from fol.simulation.runner import _resumed_pretraining

    spec = ModelSpec("cnn", 2, 1, 8, options={"widths": [2], "hidden": 0})
    model = build_model(spec, seed=0)
    path = tmp_path / "a.safetensors"
    save_model(path, model, spec=spec, class_names=["x", "y"], producer="a", extra={"pretrain_flops": 1234, "seed": 0})
    state, count = _resumed_pretraining(path, spec, "a", 0)
    assert count == 1234 and all(torch.equal(state[k], v) for k, v in model.state_dict().items())
    save_model(path, model, spec=spec, class_names=["x", "y"], producer="a", extra={"pretrain_flops": flops, "seed": 0})
    with pytest.raises(ConfigError) as info:
        _resumed_pretraining(path, spec, "a", 0)
    msg = str(info.value)
    assert msg.startswith(f"--resume: {path}: ") and "'pretrain_flops' is " in msg and "\n" not in msg, msg


def test_saved_method_results_read_back_as_the_rows_of_the_uncut_run(tiny_leo_local) -> None:
    """--resume takes a finished method's rows from its saved file. That file was written
    with sorted keys, so a resumed run's results.json listed each row's ``extra`` (FOL's
    'selected', 'accuracy', 'exchanges', ...) in another order than an uncut run's: the
    same values, a different file. The saved rows are now the method's own dicts, in order."""
    _, _, result = tiny_leo_local
    for method in ("fol", "fol-a"):
        saved = json.loads((result.out / "state" / "seed-0" / "results" / f"{method}.json").read_text())
        rows = {r["node"]: r for r in result.results if r["seed"] == 0 and r["method"] == method}
        assert len(saved) == len(rows) == 6 and len(saved[0]["extra"]) > 1
        for row in saved:
            uncut = {k: rows[row["node"]][k] for k in row}
            assert json.dumps(row) == json.dumps(uncut, default=str), row["node"]


def test_local_and_ray_executors_agree(tiny_leo_local, tmp_path: Path) -> None:
    import importlib

    importlib.import_module("ray")  # in the dev extra: CI runs this test, never skips it
    text, _, local = tiny_leo_local
    scn = parse_scenario(tomllib.loads(text), tmp_path, "tiny.toml")
    scn.run.executor, scn.run.workers = "ray", 2
    on_ray = run_simulation(scn, tmp_path / "ray", progress=False)
    seed0 = [r for r in local.results if r["seed"] == 0]
    assert sum(r["received_models"] for r in seed0 if r["method"] == "fol") > 0
    assert len(seed0) == len(on_ray.results) == 6 * 3
    for a, b in zip(seed0, on_ray.results, strict=True):  # same rows, same order, bit for bit
        assert _untimed(a) == _untimed(b)
    assert on_ray.transfers == [t for t in local.transfers if t["seed"] == 0] != []


def _untimed(row: dict) -> dict:
    """A result row without its wall-clock seconds (also those of FOL's per-exchange points)."""
    out = {k: v for k, v in row.items() if k != "seconds"}
    extra = out.get("extra") or {}
    if extra.get("exchanges"):
        out["extra"] = {**extra, "exchanges": [{k: v for k, v in p.items() if k != "seconds"}
                                               for p in extra["exchanges"]]}
    return out


def test_local_and_process_executors_agree_row_for_row(tiny_leo_local, tmp_path: Path) -> None:
    """The process pool (the demo's default) gives the same rows, bit for bit, as
    one process; every seed's transfers and rounds are kept."""
    _, doc, local = tiny_leo_local
    scn = parse_scenario(doc, tmp_path, "tiny.toml")
    scn.run.executor, scn.run.workers = "process", 2
    pool = run_simulation(scn, tmp_path / "process", progress=False)
    assert len(local.results) == len(pool.results) == 2 * 6 * 3
    assert sum(r["received_models"] for r in local.results if r["method"] == "fol") > 0
    for a, b in zip(local.results, pool.results, strict=True):
        assert _untimed(a) == _untimed(b)
    for run in (local, pool):
        transfers = json.loads((run.out / "transfers.json").read_text())
        assert {t["seed"] for t in transfers} == {0, 1} and transfers == run.transfers
        assert set(json.loads((run.out / "rounds_used.json").read_text())) == {"0", "1"}
    assert json.loads((local.out / "transfers.json").read_text()) == \
        json.loads((tmp_path / "process" / "transfers.json").read_text())


def test_zmq_transport_delivers_the_same_models_as_in_memory(tmp_path: Path) -> None:
    scn = parse_scenario(_doc(), tmp_path, "tiny.toml")
    scn.methods = ["fol"]
    inproc = run_simulation(scn, tmp_path / "inproc", progress=False)
    scn.run.transport = "zmq"
    zmq_run = run_simulation(scn, tmp_path / "zmq", progress=False)
    key = lambda r: r["node"]  # noqa: E731
    for a, b in zip(sorted(inproc.results, key=key), sorted(zmq_run.results, key=key), strict=True):
        assert a["test_accuracy"] == b["test_accuracy"] and a["bytes_down"] == b["bytes_down"]
    inboxes = list((tmp_path / "zmq" / "state" / "seed-0" / "links").glob("*/inbox/round-*/*.safetensors"))
    assert len(inboxes) == sum(r["received_models"] for r in zmq_run.results) > 0


def test_node_names_from_element_files_run_with_either_transport(tmp_path: Path) -> None:
    """Node names come from TLE / OMM name lines (or a waypoints CSV) as written: CelesTrak's hold
    spaces, parentheses and path separators ('SL-16 R/B'). The pretrained checkpoint
    '<node>.safetensors' of 'SL-16 R/B' was a missing folder ('cannot write model file'), and the
    zmq transport refused 'ISS (ZARYA)' as a key name, after pretraining every node."""
    names = ["SL-16 R/B", "ISS (ZARYA)", "c"]
    (tmp_path / "wp.csv").write_text("node_id,t_s,x_km,y_km,z_km\n" + "".join(
        f'"{n}",0,{0.1 * k},0,0.1\n"{n}",600,{0.1 * k + 0.2},0,0.1\n' for k, n in enumerate(names)))
    scn = parse_scenario(tomllib.loads(DRONES.replace('run = ["local", "fol", "fedavg"]', 'run = ["fol"]')),
                         tmp_path, "s.toml")
    scn.run.transport = "zmq"
    run = run_simulation(scn, tmp_path / "out", progress=False)
    assert sorted(r["node"] for r in run.results) == sorted(names)
    assert sum(r["received_models"] for r in run.results) > 0
    state = tmp_path / "out" / "state" / "seed-0"
    assert sorted(p.name for p in (state / "pretrained").iterdir()) == \
        ["ISS%20%28ZARYA%29.safetensors", "SL-16%20R%2FB.safetensors", "c.safetensors"]


def test_run_workers_sets_the_contact_search_processes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import fol.simulation.runner as runner

    seen: list[int] = []

    class Stop(Exception):
        pass

    def fake_plan(traj, scenario, workers=1):
        seen.append(workers)
        raise Stop

    monkeypatch.setattr(runner, "plan_from_trajectories", fake_plan)
    scn = parse_scenario(_doc(), tmp_path, "tiny.toml")
    scn.run.workers = 3
    with pytest.raises(Stop):
        run_simulation(scn, tmp_path / "a", progress=False)
    scn.run.workers = None  # default: every core
    with pytest.raises(Stop):
        run_simulation(scn, tmp_path / "b", progress=False)
    assert seen == [3, os.cpu_count() or 1]


@pytest.mark.parametrize("edit, words", [
    (('run = ["local", "fol", "fedavg"]', 'run = ["local", "dense"]\n[methods.dense]\nsynthesis_batch = 1000000000'),
     r"methods\.dense: synthesis_batch / nz / ngf / epochs: a synthesis batch of 1,000,000,000 images of 16x16"),
    (("distill_epochs = 2", 'distill_epochs = 2\ndistill_inputs = "synth"\nbatch_size = 1000000'),
     r"fol\.batch_size \(the synthesis batch of distill_inputs = 'synth'\): a synthesis batch of 1,000,000 "),
])
def test_the_check_refuses_a_synthesis_too_large_before_pretraining(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                                    edit: tuple[str, str], words: str) -> None:
    """A DENSE (or FOL "synth") synthesis too large for memory was refused only when the
    synthesis started, after every node had pretrained; now ``--check`` refuses it."""
    (tmp_path / "wp.csv").write_text("node_id,t_s,x_km,y_km,z_km\na,0,0,0,0.1\nb,0,0.2,0,0.1\n")
    (tmp_path / "s.toml").write_text(DRONES.replace(*edit))
    for argv in (["simulate", "--check", str(tmp_path / "s.toml")],
                 ["simulate", str(tmp_path / "s.toml"), "--out", str(tmp_path / "out")]):
        assert main(argv) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and re.search(words, err[0]) and "GiB" in err[0], err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(("fields", "words"), [
    ("acquisition_s = 1e12", r"data\.acquisition_s: 1e\+12 s of ground tracks every 25 s"),
    # the default period is the scenario's, but the coverage step follows the swath, not time.step_s
    ("swath_km = 2.0\n[time]\nduration_s = 5e8\nstep_s = 1e5", r"data\.acquisition_s: 5e\+08 s of ground tracks every 1 s"),
    # 10^6 times of a few satellites: 1 GB of tracks, but Skyfield's Earth rotation takes 22 kB a time
    # sample whatever the satellites (25 GB): counted since 2026-12-07, the tracks alone were before
    ("swath_km = 16.0\nacquisition_s = 1e6", r"data\.acquisition_s: 1e\+06 s of ground tracks every 1 s"),
])
def test_the_check_refuses_an_orbit_partition_too_long_to_track(fields: str, words: str, tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """The orbit partition samples the ground tracks every swath_km / 16 s over the
    acquisition period: a long period allocated the whole table at once (298 GiB for
    1e12 s, a traceback or the out-of-memory killer); the check refuses it in one line."""
    doc = LEO.replace("per_node = 100", "per_node = 100\n" + fields.split("\n[time]")[0])
    if "[time]" in fields:
        doc = doc.replace("duration_s = 86400.0\nstep_s = 120.0", fields.split("[time]\n")[1])
    (tmp_path / "s.toml").write_text(doc)
    for argv in (["simulate", "--check", str(tmp_path / "s.toml")],
                 ["simulate", str(tmp_path / "s.toml"), "--out", str(tmp_path / "out")]):
        assert main(argv) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and re.search(words, err[0]) and "GiB" in err[0] and "s.toml" in err[0], err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(("turned", "measured_mb", "old_mb"), [(True, 928, 506), (False, 628, 432)])
def test_the_ground_track_budget_counts_the_partitions_measured_peak(turned: bool, measured_mb: int, old_mb: int,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """The budget counted 72 bytes per satellite and sample (the contact search's trajectory table), well under
    what the partition takes: 2,000 Walker satellites x 3,000 samples (16 km swaths, 1 s apart) peaked 928 MB above
    the program (old budget 506 MB with the Earth rotation), the same from an all-ITRF OEM 628 MB (old budget
    432 MB). Under a limit between the old budget and the measured peak the old budget let it through; now it is
    refused, and it passes a limit a fifth above the peak (the budget is not wildly above what the partition takes)."""
    from fol.simulation import check

    acquisition_s, n_sats = 2998.0, 2000  # counted as 3,000 samples, as many as measured
    assert check.grid_samples(acquisition_s, check.coverage_step_s(16.0)) == 3000
    monkeypatch.setattr(check, "MAX_TRAJECTORY_BYTES", (measured_mb + old_mb) / 2 * 1e6)
    with pytest.raises(ConfigError, match=r"^data\.acquisition_s: 2998 s of ground tracks every 1 s .* x 2,000 "
                                          r"satellite\(s\) would need \d\.\d GiB"):
        check._check_ground_tracks(acquisition_s, 16.0, n_sats, turned)
    monkeypatch.setattr(check, "MAX_TRAJECTORY_BYTES", measured_mb * 1.2e6)
    check._check_ground_tracks(acquisition_s, 16.0, n_sats, turned)


def test_resume_reports_the_wall_time_of_the_whole_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """After --resume the report's wall time counted only the resumed part: the run
    folder keeps the time so far, and a resumed run adds it (or says it has none)."""
    out = _local_only_run(tmp_path)
    wall = out / "state" / "wall_seconds.json"
    first = json.loads(wall.read_text())["seconds"]
    assert first > 0 and re.search(r"^Wall time \d+ s\.$", (out / "report.md").read_text(), re.M)
    wall.write_text(json.dumps({"seconds": 5000.0}))  # as if the interrupted part had taken 5000 s
    # and as if kills mid-write had left the crash-safe writer's temporary files: --resume removes
    # them (they were kept forever, a model's size each) and nothing else
    seed = out / "state" / "seed-0"
    left = [seed / "pretrained" / ".a.safetensors.0123456789ab.tmp", out / ".report.md.a1b2c3d4e5f6.tmp"]
    for path in left:
        path.write_bytes(b"half a file")
    (seed / "results" / "notes.tmp").write_text("a user's file")
    assert main(["simulate", "--resume", str(out)]) == 0
    assert not any(path.exists() for path in left) and (seed / "results" / "notes.tmp").exists()
    report = (out / "report.md").read_text()
    assert re.search(r"^Wall time 50\d\d s: 5000 s before --resume \(up to the last saved result\) and \d+ s after\.$",
                     report, re.M), report
    assert 5000 < json.loads(wall.read_text())["seconds"] < 5000 + 600
    wall.unlink()  # a run made before the time was kept
    assert main(["simulate", "--resume", str(out)]) == 0
    assert re.search(r"^Wall time \d+ s after --resume only \(the interrupted part's time was not recorded\)\.$",
                     (out / "report.md").read_text(), re.M)


def test_the_zmq_transport_is_closed_when_a_method_raises(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Library use: a method that raised left the seed's CURVE links (sockets, threads) open."""
    import fol.simulation.runner as runner

    closed: list[bool] = []

    class Spy(runner.ZmqTransport):
        def close(self) -> None:
            super().close()
            closed.append(True)

    class Boom(Exception):
        pass

    class Failing:
        def run(self, ctx):
            raise Boom

    monkeypatch.setattr(runner, "ZmqTransport", Spy)
    monkeypatch.setattr(runner, "get_method", lambda name, **opts: Failing())
    (tmp_path / "wp.csv").write_text("node_id,t_s,x_km,y_km,z_km\n" + "".join(
        f"{n},0,{0.1 * k},0,0.1\n{n},600,{0.1 * k + 0.2},0,0.1\n" for k, n in enumerate("abc")))
    scn = parse_scenario(tomllib.loads(DRONES.replace('run = ["local", "fol", "fedavg"]', 'run = ["local"]')),
                         tmp_path, "s.toml")
    scn.run.transport = "zmq"
    with pytest.raises(Boom):
        run_simulation(scn, tmp_path / "out", progress=False)
    assert closed == [True]


def test_run_threads_hold_in_the_methods_and_the_callers_count_is_restored_when_one_raises(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Library use: the methods run with the scenario's run.threads torch threads, and the caller's own
    count is given back even when a method raised (fol.executors.torch_threads, the one way to set it)."""
    import torch

    import fol.simulation.runner as runner

    seen: list[int] = []

    class Boom(Exception):
        pass

    class Failing:
        def run(self, ctx):
            seen.append(torch.get_num_threads())
            raise Boom

    monkeypatch.setattr(runner, "get_method", lambda name, **opts: Failing())
    (tmp_path / "wp.csv").write_text("node_id,t_s,x_km,y_km,z_km\n" + "".join(
        f"{n},0,{0.1 * k},0,0.1\n{n},600,{0.1 * k + 0.2},0,0.1\n" for k, n in enumerate("abc")))
    scn = parse_scenario(tomllib.loads(DRONES.replace('run = ["local", "fol", "fedavg"]', 'run = ["local"]')),
                         tmp_path, "s.toml")
    assert scn.run.threads == 1
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        with pytest.raises(Boom):
            run_simulation(scn, tmp_path / "out", progress=False)
        assert seen == [1]  # the scenario's count inside the run
        assert torch.get_num_threads() == 2  # the caller's, given back after the raise
    finally:
        torch.set_num_threads(before)


def test_a_run_without_a_fol_variant_books_no_peer_to_peer_transfers(tmp_path: Path) -> None:
    """Only the FOL variants exchange models peer to peer: a run of 'local' and
    FedAvg must not list (nor report) FOL transfers that never happened."""
    (tmp_path / "wp.csv").write_text("node_id,t_s,x_km,y_km,z_km\n"
                                     "a,0,0,0,0.1\na,600,0.3,0,0.1\nb,0,0.2,0,0.1\nb,600,0.5,0,0.1\n")
    (tmp_path / "s.toml").write_text(DRONES.replace('run = ["local", "fol", "fedavg"]', 'run = ["local"]'))
    out = tmp_path / "out"
    assert main(["simulate", str(tmp_path / "s.toml"), "--out", str(out)]) == 0
    assert json.loads((out / "transfers.json").read_text()) == []
    assert ", 0 model transfers recorded" in (out / "report.md").read_text()


def test_resume_of_a_file_or_a_missing_folder_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``--resume FILE`` or a missing folder said 'no scenario.toml there; give the scenario
    file too', pointing at the wrong fix (and a scenario given too then said 'no such folder'
    of a file). Now the line says what the path is, with or without a scenario."""
    (tmp_path / "file").write_text("not a run")
    (tmp_path / "tiny.toml").write_text(LEO)
    for path, what in ((tmp_path / "file", "exists and is not a folder"), (tmp_path / "absent", "does not exist")):
        for scenario in ([], [str(tmp_path / "tiny.toml")]):
            assert main(["simulate", *scenario, "--resume", str(path), "--check"]) == 2
            err = capsys.readouterr().err.strip().splitlines()
            assert err == [f"fol simulate: error: --resume {path}: {what}"], err


def test_a_bad_output_folder_names_the_scenario_and_the_field_it_came_from(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``fol simulate``'s output folder (``output.dir`` in the scenario, or ``--out``) that is a file, or a folder
    not empty, was refused as 'output folder X: exists and is not a folder', naming neither the scenario nor the
    field, where the scenario's other refusals say '<file>: <field>: ...'. Now it names both, from the field or
    from --out; --resume's folder is still named --resume."""
    (tmp_path / "file").write_text("x")
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("x")
    scenario = tmp_path / "tiny.toml"
    for folder, what in ((tmp_path / "file", "exists and is not a folder"),
                         (tmp_path / "full", "is not empty and holds no run to continue; give another --out")):
        said = f"fol simulate: error: {scenario}: output.dir (or --out): output folder {folder}"
        scenario.write_text(LEO)
        assert main(["simulate", str(scenario), "--check", "--out", str(folder)]) == 2
        assert capsys.readouterr().err.strip().splitlines() == [f"{said}{'' if 'empty' in what else ':'} {what}"]
        scenario.write_text(LEO + f"\n[output]\ndir = {json.dumps(str(folder))}\n")
        assert main(["simulate", str(scenario), "--check"]) == 2
        assert capsys.readouterr().err.strip().splitlines() == [f"{said}{'' if 'empty' in what else ':'} {what}"]


def test_simulate_without_a_scenario_says_so_once(capsys: pytest.CaptureFixture[str]) -> None:
    """The line read 'fol simulate: error: simulate: a scenario file is required'."""
    assert main(["simulate"]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        "fol simulate: error: a scenario file is required (or --list-methods, or --resume OUT)"]


def test_a_scenario_reads_image_places_from_exif_gps_tags(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``data.coords = "exif"`` passes the scenario check with a place-based partition and
    gives the pool the images' GPS places (south and west negative), as a run loads it."""
    from PIL import Image
    from fol.data import load_dataset
    from fol.simulation.scenario import load_scenario

    places = {"class0/a.jpg": (-33.5, -70.25), "class1/b.jpg": (48.75, 2.5)}
    for rel, (lat, lon) in places.items():
        exif = Image.Exif()
        exif[0x8825] = {1: "S" if lat < 0 else "N", 2: (abs(lat), 0.0, 0.0), 3: "W" if lon < 0 else "E",
                        4: (abs(lon), 0.0, 0.0)}
        (tmp_path / "imgs" / rel).parent.mkdir(parents=True)
        Image.new("RGB", (8, 8), (200, 0, 0)).save(tmp_path / "imgs" / rel, exif=exif)
    (tmp_path / "wp.csv").write_text("node_id,t_s,x_km,y_km,z_km\na,0,0,0,0.1\nb,0,0.2,0,0.1\n")
    (tmp_path / "s.toml").write_text(_drones_with_data('dataset = "imagefolder"\npath = "imgs"\ncoords = "exif"\n'
                                                       'image_size = 8\npartition = "region"\nper_node = 100'))
    assert main(["simulate", "--check", str(tmp_path / "s.toml")]) == 0, capsys.readouterr().err
    data = load_scenario(tmp_path / "s.toml").data
    pool = load_dataset(data.dataset, **data.loader_options(0))
    np.testing.assert_allclose(np.c_[pool.lat, pool.lon], list(places.values()), atol=1e-6, rtol=0)


def test_a_run_reads_the_satellites_file_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The check, the orbit partition and the trajectories of one run share the satellites the check read: the
    TLE file is read once (three times before), and a field changed after is read again."""
    import contact_sim.scenario as scenario_module
    from orbits import read_tle

    reads: list[Path] = []
    monkeypatch.setattr(scenario_module, "read_tle", lambda path: reads.append(path) or read_tle(path))
    path = _tle_scenario(tmp_path)
    text = path.read_text().replace('run = ["local", "fol", "fol-a"]', 'run = ["local"]')
    path.write_text(text.replace("pretrain_epochs = 2", "pretrain_epochs = 0"))
    scn = parse_scenario(tomllib.loads(path.read_text()), tmp_path, str(path))
    run_simulation(scn, tmp_path / "out", progress=False)
    assert reads == [tmp_path / "shell.tle"]
    assert (tmp_path / "out" / "contacts.csv").read_text().count("\n") > 1  # the windows were searched
    scn.contact.time.duration_s /= 2
    assert len(scenario_module.build_constellation(scn.contact).names) == 6 and len(reads) == 2


@pytest.mark.parametrize(("archs", "most", "shallowest"), [('["cnn-medium"]', 5, "cnn-medium"),
                                                          ('["cnn-medium", "cnn-small"]', 4, "cnn-small")])
def test_the_check_refuses_a_freeze_count_past_the_swarms_layers(archs: str, most: int, shallowest: str,
                                                                  tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """fol.finetune_freeze counts a neighbour's convolution / linear layers: 1000 was accepted and froze
    exactly what freezing them all does. ``--check`` now refuses a count past the layers of the swarm's
    shallowest model (any neighbour may hold it), before anything is trained."""
    from fol.models import ModelSpec, build_model
    from fol.stages import freezable_layers, frozen_prefix

    model = build_model(ModelSpec(shallowest, num_classes=2, input_size=16))
    assert len(freezable_layers(model)) == most
    assert frozen_prefix(model, 1000) == frozen_prefix(model, most)  # the count past the layers means nothing more
    scenario = tmp_path / "s.toml"
    for freeze, refused in ((most + 1, True), (most, False)):
        scenario.write_text(LEO.replace("[methods]", f"finetune_freeze = {freeze}\n[models]\narchs = {archs}\n[methods]"))
        assert main(["simulate", "--check", str(scenario)]) == (2 if refused else 0)
        err = capsys.readouterr().err.strip().splitlines()
        if refused:
            which = "the swarm's model with the fewest" if "," in archs else "the swarm's model"  # one: that one
            assert err == [f"fol simulate: error: {scenario}: fol.finetune_freeze must be at most {most} (the "
                           f"convolution / linear layers of {shallowest}, {which}), got {most + 1}"], err


@pytest.mark.parametrize("damage", ["truncated", "garbage header", "plain safetensors", "another node's", "version 1"])
def test_resume_refuses_a_damaged_pretrained_checkpoint_before_the_data_pool_is_read(
        damage: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """A damaged pretrained checkpoint in a run folder (cut short, a garbled safetensors header, a
    safetensors file without the project's model card, another node's) was refused by --resume only
    after the data pool was read (the spec the checkpoint is compared with needs the pool's classes),
    minutes for a large dataset, and --check --resume said OK. What the file alone shows is now checked
    with the other saved work, before the pool: one line naming the file, --check --resume too."""
    import struct

    from fol.simulation import runner

    out = _local_only_run(tmp_path)
    state = out / "state" / "seed-0"
    (state / "results" / "local.json").unlink()  # interrupted before the methods
    a, b = state / "pretrained" / "a.safetensors", state / "pretrained" / "b.safetensors"
    good = a.read_bytes()
    header = b'{"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}'
    # a card of version 1 (before fc60fd7; read_card reads it, load_model refuses it): the resume refused it
    # after the data pool, and --check --resume said OK
    (n,) = struct.unpack("<Q", good[:8])
    old_header = json.loads(good[8:8 + n])
    old_header["__metadata__"]["fol"] = json.dumps({**json.loads(old_header["__metadata__"]["fol"]), "version": 1})
    v1 = json.dumps(old_header).encode()
    a.write_bytes({"truncated": good[: len(good) - 100],
                   "garbage header": struct.pack("<Q", 20) + b"\x00not json at all\xff\xfe" + good[28:],
                   "plain safetensors": struct.pack("<Q", len(header)) + header + b"\x00" * 4,
                   "another node's": b.read_bytes(),
                   "version 1": struct.pack("<Q", len(v1)) + v1 + good[8 + n:]}[damage])
    needle = {"truncated": "truncated model file (cut short", "garbage header": "safetensors header is not valid JSON",
              "plain safetensors": "not a FOL model file", "another node's": "not of node 'a' seed 0",
              "version 1": "model card version 1 is not covered by the file's digest"}[damage]

    def no_pool(*args: object, **kwargs: object) -> None:
        raise AssertionError("the data pool was read before the damaged checkpoint was refused")

    monkeypatch.setattr(runner, "_load_pool", no_pool)
    before = _snapshot(out)
    capsys.readouterr()
    for argv in (["simulate", "--resume", str(out)], ["simulate", "--resume", str(out), "--check"]):
        assert main(argv) == 2, argv
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and str(a) in err[0] and needle in err[0] and "move the file away" in err[0], err
    assert _snapshot(out) == before


@pytest.mark.parametrize("damage, why", [
    ("missing", "it is missing"),
    ("folder", "is a directory"),
    ("fifo", "not a regular file"),
    ("dead link", "a link to "),
    ("not json", "not valid JSON (Expecting property name"),
    ("not utf-8", "not a UTF-8 text file"),
    ("too large", "5000 bytes; a JSON file of a run may have at most 4096"),
])
def test_resume_says_why_the_run_record_cannot_be_read(damage: str, why: str, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """``--resume``'s "no readable scenario.resolved.json there" did not say why: a folder with no
    record, one whose record is a folder, a FIFO, a link to nothing, not JSON, not UTF-8 or too large
    were one message. The line now says which, still one line naming the folder."""
    from fol.simulation import check

    out = tmp_path / "out"
    out.mkdir()
    record = out / "scenario.resolved.json"
    monkeypatch.setattr(check, "MAX_RUN_JSON_BYTES", 4096)
    if damage == "folder":
        record.mkdir()
    elif damage == "fifo":
        os.mkfifo(record)
    elif damage == "dead link":
        record.symlink_to(tmp_path / "gone.json")
    elif damage == "not json":
        record.write_text("{'source': 'x'}")
    elif damage == "not utf-8":
        record.write_bytes(b'{"source": "\xff"}')
    elif damage == "too large":
        record.write_text(" " * 5000)
    with pytest.raises(ConfigError) as info:
        check.read_run_record(out)
    msg = str(info.value)
    assert msg.startswith(f"--resume {out}: no readable scenario.resolved.json there (") and why in msg, msg
    assert "\n" not in msg and str(out / "scenario.resolved.json") not in msg, msg
