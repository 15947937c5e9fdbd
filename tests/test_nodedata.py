"""``--data`` spec strings of ``fol pretrain`` / ``fol personalize`` (fol/nodedata.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from fol.errors import ConfigError
from fol.nodedata import parse_node_data

from _names import odd_folder


def test_a_folder_whose_name_holds_an_equals_sign_is_a_folder(tmp_path: Path) -> None:
    folder = tmp_path / "run=1"  # hive-style names (year=2020/) are common in exported imagery
    (folder / "burnt").mkdir(parents=True)
    spec = parse_node_data(str(folder))
    assert (spec.dataset, spec.path, spec.partition) == ("imagefolder", str(folder), "all")
    with pytest.raises(ConfigError, match="unknown or malformed entry"):
        parse_node_data(str(tmp_path / "missing=1"))  # not a folder: still read as key=value pairs
    assert parse_node_data("dataset=synthetic-wildfire,nodes=2,node=1").node == 1


def test_an_entry_that_would_be_ignored_is_refused(tmp_path: Path) -> None:
    """A key given twice (the last one won) and path= for a dataset that is not read from a
    folder of one's choosing (it was dropped: the dataset came from the data root instead)."""
    from fol.nodedata import dataset_options

    with pytest.raises(ConfigError, match=r"--data: 'node' is given twice \(node='1', then 'node=2'\)"):
        parse_node_data("dataset=synthetic-wildfire,nodes=4,node=1,node=2")
    spec = parse_node_data(f"dataset=cifar10,path={tmp_path}")
    with pytest.raises(ConfigError, match=r"--data: path= only applies to dataset=imagefolder, not 'cifar10'"):
        dataset_options(spec.dataset, spec.size, spec.seed, spec.path)
    with pytest.raises(ConfigError, match=r"path= only applies to dataset=imagefolder, not 'synthetic-wildfire'"):
        dataset_options("synthetic-wildfire", None, 0, str(tmp_path))
    spec = parse_node_data(f"dataset=imagefolder,path={tmp_path},nodes=2")
    assert dataset_options(spec.dataset, spec.size, spec.seed, spec.path) == {"path": str(tmp_path)}


def test_specs_of_one_shard_and_split_have_equal_split_fields(tmp_path: Path) -> None:
    """A folder given as a path and as dataset=imagefolder,path=...,partition=all is one shard and one
    split (the whole folder, seed 0): fol personalize refused the model pretrained with the other form,
    saying it gave 'another shard or split'. Fields a partition does not read do not count; the
    ones it reads do."""
    from fol.nodedata import load_node_data, split_fields

    folder = tmp_path / "imgs"
    folder.mkdir()
    same = [(str(folder), f"dataset=imagefolder,path={folder},partition=all"),
            (f"dataset=imagefolder,path={folder},partition=all,psi=2,per_node=10,nodes=3",
             f"dataset=imagefolder,path={folder},partition=all"),
            ("dataset=wildfire,partition=region,nodes=4,node=1,psi=0.1,per_node=5",
             "dataset=wildfire,partition=region,nodes=4,node=1")]
    for a, b in same:
        assert split_fields(parse_node_data(a)) == split_fields(parse_node_data(b)), (a, b)
    other = [(str(folder), f"dataset=imagefolder,path={folder},partition=all,seed=1"),
             (f"dataset=imagefolder,path={folder},partition=all,nodes=2,node=1", str(folder)),  # split seed + node
             ("dataset=wildfire,partition=region,nodes=4,node=1", "dataset=wildfire,partition=region,nodes=5,node=1"),
             ("dataset=wildfire,nodes=4,psi=0.5", "dataset=wildfire,nodes=4,psi=0.6"),
             ("dataset=wildfire,nodes=4,per_node=300", "dataset=wildfire,nodes=4,per_node=none")]
    for a, b in other:
        assert split_fields(parse_node_data(a)) != split_fields(parse_node_data(b)), (a, b)
    # the fields left out are ones the loader does not read: one synthetic pool, split alike
    a, b = (load_node_data(parse_node_data(f"dataset=synthetic-wildfire,size=60,partition=all{extra}"))
            for extra in ("", ",psi=3,per_node=7,nodes=2"))
    assert a.train.sources == b.train.sources and bool((a.train.images == b.train.images).all())


def test_region_partition_without_coordinates_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """partition=region places images by their coordinates. An image folder in a --data spec has
    none (the spec has no coords key), so it is refused before any image is read; a dataset that
    loads without them is refused naming that, not with 'lower nodes' (no node count helps)."""
    import numpy as np
    import torch

    import fol.data as fol_data
    from fol.data.geo import GeoDataset
    from fol.errors import DataError
    from fol.nodedata import load_node_data

    for cls in ("a", "b"):
        (tmp_path / cls).mkdir()
        (tmp_path / cls / "x.png").write_bytes(b"not a png")  # unread: refused before the images are read
    with pytest.raises(ConfigError, match=r"^--data: partition=region places images by their coordinates, and a "
                                          r"data spec reads none from an image folder; use partition=dirichlet or "
                                          r"all \(or a scenario with data.coords\)$"):
        parse_node_data(f"dataset=imagefolder,path={tmp_path},partition=region,nodes=2")

    n = 8
    bare = GeoDataset(torch.zeros(n, 3, 4, 4), torch.arange(n) % 2, np.full(n, np.nan), np.full(n, np.nan),
                      ["a", "b"], "cifar10")
    monkeypatch.setattr(fol_data, "load_dataset", lambda *a, **k: bare)
    with pytest.raises(DataError) as info:
        load_node_data(parse_node_data("dataset=cifar10,partition=region,nodes=2"))
    assert str(info.value) == ("--data: partition=region places images by their coordinates, and 8 of the 8 images "
                               "of cifar10 have none; use partition=dirichlet or all")
    for partition in ("all", "dirichlet"):  # the partitions that need no coordinates still take the folder
        assert parse_node_data(f"dataset=imagefolder,path={tmp_path},partition={partition}").partition == partition


def test_a_path_cut_by_a_comma_is_refused_saying_why(tmp_path: Path) -> None:
    """'path=/x/a,b' said "unknown or malformed entry 'b'", which does not say the comma cut the path."""
    folder = tmp_path / "a,b:c"  # commas and colons are legal in folder names (and ':' in Windows paths)
    (folder / "burnt").mkdir(parents=True)
    with pytest.raises(ConfigError) as err:
        parse_node_data(f"dataset=imagefolder,path={folder},partition=all")
    assert str(err.value) == (f"--data: path={str(tmp_path / 'a')!r} is followed by 'b:c': ',' separates the key=value "
                              f"pairs, so path= cannot hold a comma; give the folder itself as --data (the node then holds "
                              f"all of it), or path= a link to it whose name has no comma")
    assert parse_node_data(str(folder)).path == str(folder)  # the folder itself is read, colon and comma included
    assert parse_node_data(f"dataset=imagefolder,path={tmp_path / 'x:y'},nodes=2").path == str(tmp_path / "x:y")


def test_a_missing_dataset_folder_names_the_spec(tmp_path: Path) -> None:
    """The loader's line named the folder it looked in but not the flag (or agent field) that gave it."""
    from fol.errors import DataError
    from fol.nodedata import load_node_data

    with pytest.raises(DataError, match=r"^--data: dataset 'wildfire' not found: .* in " + str(tmp_path)):
        load_node_data(parse_node_data("dataset=wildfire,nodes=2,node=0", root=str(tmp_path)))
    with pytest.raises(DataError, match=r"^node.toml: node.data: image folder .*gone not found"):
        load_node_data(parse_node_data(f"dataset=imagefolder,path={tmp_path / 'gone'}"), where="node.toml: node.data")


@pytest.mark.parametrize("text", ["", " "])
def test_an_empty_data_spec_is_refused_not_read_as_the_current_folder(tmp_path, monkeypatch, text):
    """``--data "$DIR"`` with DIR unset: the current folder (Path("") is ".") became the node's
    image folder, its sub-folders the classes."""
    (tmp_path / "a").mkdir()
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match=r"^--data is empty; expected a folder with one sub-folder per class"):
        parse_node_data(text)


def _same_split(a, b) -> bool:  # noqa: ANN001 - two fol.data.NodeData
    import torch

    return all(torch.equal(getattr(a, s).images, getattr(b, s).images)
               and torch.equal(getattr(a, s).labels, getattr(b, s).labels) for s in ("train", "val", "test"))


def test_a_spec_splits_its_node_as_fol_simulate_does_at_any_seed() -> None:
    """``fol pretrain --data ...,seed=S,node=K`` split node K with seed S + K, fol simulate
    (fol.nodes.build_nodes) with node_seed(S, K) = S * 1000 + K: the same split only at seed 0, and
    at seed 1 most of the simulation node's validation and test images were training images of the
    spec's. The spec now splits by node_seed (the rule new model cards record); S + K stays for old cards."""
    from fol.data import dirichlet_partition, load_dataset
    from fol.models import build_model
    from fol.nodedata import LEGACY_SPLIT_RULE, load_node_data
    from fol.nodes import build_nodes
    from fol.train import TrainConfig

    seed, nodes = 1, 2
    text = "dataset=synthetic-hurricane,nodes=2,psi=0.5,per_node=100,size=300,seed=1,node={k}"
    pool = load_dataset("synthetic-hurricane", n=300, seed=seed)
    shards = dirichlet_partition(pool.labels.numpy(), nodes, 0.5, seed, samples_per_node=100)
    untrained = lambda fn, tasks: [(build_model(t.spec).state_dict(), 0) for t in tasks]  # noqa: E731 - splits only
    sim = build_nodes(pool, shards, ["cnn-small"], TrainConfig(epochs=1), seed, map=untrained)
    for k in range(nodes):
        spec = parse_node_data(text.format(k=k))
        assert _same_split(load_node_data(spec), sim[k].data), k
        assert not _same_split(load_node_data(spec, rule=LEGACY_SPLIT_RULE), sim[k].data), k  # the old rule


def test_the_split_rule_a_card_records(tmp_path: Path) -> None:
    """No rule recorded: S + K (every model made before the card recorded one); a rule this toolkit
    does not know is refused in one line naming the model file and the field, its value shortened."""
    from fol.data import load_dataset, split_node
    from fol.errors import CheckpointError
    from fol.nodedata import LEGACY_SPLIT_RULE, SPLIT_RULE, load_node_data, recorded_split_rule, split_seed

    model = str(tmp_path / "m.safetensors")
    assert recorded_split_rule({"data": "dataset=synthetic-wildfire"}, model) == LEGACY_SPLIT_RULE
    assert recorded_split_rule({"split_seed": "node_seed"}, model) == SPLIT_RULE
    for bad in ("node_seed_v2", 7, None, ["node_seed"], {"a": 1}, "x" * 10_000):
        with pytest.raises(CheckpointError) as err:
            recorded_split_rule({"split_seed": bad}, model)
        line = str(err.value)
        assert line.startswith(f"{model}: model card extra.split_seed is ") and "'node_seed' or 'seed+node'" in line
        assert "\n" not in line and len(line) < 400, line
    spec = parse_node_data("dataset=synthetic-wildfire,partition=all,size=60,seed=2")
    assert (split_seed(spec), split_seed(spec, LEGACY_SPLIT_RULE)) == (2000, 2)
    old = split_node(load_dataset("synthetic-wildfire", n=60, seed=2), seed=2)
    assert _same_split(load_node_data(spec, rule=LEGACY_SPLIT_RULE), old)
    assert not _same_split(load_node_data(spec), old)


def test_fol_pretrain_on_a_spec_gives_the_simulations_pretrained_model(tmp_path: Path) -> None:
    """``fol pretrain --data ...,seed=S,node=K`` split node K as fol simulate does, but trained it with
    seed S (batch order, dropout) from the initialization of --init-seed 0, where fol.nodes.build_nodes
    trains node K with node_seed(S, K) from the initialization of seed S: another model of the same
    node. Now the model is the simulation's, bit for bit, and --init-seed given is the build_nodes
    init_seed given."""
    import dataclasses

    import torch

    from fol.checkpoint import load_model
    from fol.cli import main
    from fol.config import FOLConfig
    from fol.data import dirichlet_partition, load_dataset
    from fol.models import build_model
    from fol.nodes import build_nodes

    seed, nodes, node, epochs = 1, 3, 2, 2
    text = f"dataset=synthetic-hurricane,nodes={nodes},psi=0.5,per_node=60,size=200,seed={seed},node={node}"
    pool = load_dataset("synthetic-hurricane", n=200, seed=seed)
    shards = dirichlet_partition(pool.labels.numpy(), nodes, 0.5, seed, samples_per_node=60)
    train = dataclasses.replace(FOLConfig().pretrain_train(), epochs=epochs)  # the simulation's settings
    only_node = lambda fn, tasks: [fn(t) if t.index == node else (build_model(t.spec).state_dict(), 0)  # noqa: E731
                                   for t in tasks]  # node K trained only
    for init in (None, 0):  # the default (the simulation's: the run's seed), then one given
        out = tmp_path / f"init-{init}.safetensors"
        given = [] if init is None else ["--init-seed", str(init)]
        assert main(["pretrain", "--data", text, "--arch", "cnn-small", "--epochs", str(epochs), *given,
                     "--out", str(out)]) == 0
        sim = build_nodes(pool, shards, ["cnn-small"], train, seed, init_seed=init, map=only_node)[node]
        mine, theirs = load_model(out).model.state_dict(), sim.pretrained.state_dict()
        assert mine.keys() == theirs.keys()
        assert all(torch.equal(mine[k], theirs[k]) for k in mine), init


def test_fol_pretrain_config_gives_the_simulations_model_with_its_settings(tmp_path: Path) -> None:
    """``fol pretrain --config FILE`` pretrains with the file's [fol] pretraining settings (momentum,
    weight_decay, pretrain_epochs, pretrain_lr, batch_size, patience), as fol simulate's build_nodes
    does with that table: the same model bit for bit. A flag overrides its field of the file."""
    import dataclasses

    import torch

    from fol.checkpoint import load_model
    from fol.cli import main
    from fol.config import FOLConfig
    from fol.data import dirichlet_partition, load_dataset
    from fol.models import build_model
    from fol.nodes import build_nodes

    seed, nodes, node = 1, 3, 2
    text = f"dataset=synthetic-hurricane,nodes={nodes},psi=0.5,per_node=60,size=200,seed={seed},node={node}"
    pool = load_dataset("synthetic-hurricane", n=200, seed=seed)
    shards = dirichlet_partition(pool.labels.numpy(), nodes, 0.5, seed, samples_per_node=60)
    config = tmp_path / "scenario.toml"  # a scenario's [fol] table; patience 0: the last epoch's weights
    config.write_text('[time]\nduration_s = 600.0\n\n[fol]\ntop_k = 2\npretrain_epochs = 2\nmomentum = 0.5\n'
                      'weight_decay = 0.01\npretrain_lr = 0.03\nbatch_size = 16\npatience = 0\n')
    settings = FOLConfig.from_toml(config)
    assert (settings.momentum, settings.weight_decay, settings.batch_size) != (FOLConfig().momentum,
                                                                               FOLConfig().weight_decay,
                                                                               FOLConfig().batch_size)
    only_node = lambda fn, tasks: [fn(t) if t.index == node else (build_model(t.spec).state_dict(), 0)  # noqa: E731
                                   for t in tasks]  # node K trained only
    models = {}
    for name, flags, train in (
            ("file", [], settings.pretrain_train()),
            ("--epochs 1", ["--epochs", "1"], dataclasses.replace(settings.pretrain_train(), epochs=1))):
        out = tmp_path / f"{name}.safetensors"
        assert main(["pretrain", "--data", text, "--arch", "cnn-small", "--config", str(config), *flags,
                     "--out", str(out)]) == 0
        sim = build_nodes(pool, shards, ["cnn-small"], train, seed, map=only_node)[node]
        mine, theirs = load_model(out).model.state_dict(), sim.pretrained.state_dict()
        assert mine.keys() == theirs.keys()
        assert all(torch.equal(mine[k], theirs[k]) for k in mine), name
        models[name] = mine
    assert not all(torch.equal(models["file"][k], models["--epochs 1"][k]) for k in models["file"])  # overridden


def test_a_simulation_checkpoint_saved_before_the_rule_was_recorded_splits_by_node_seed(tmp_path: Path) -> None:
    """fol simulate has always split node K with node_seed(S, K) (fol.nodes.build_nodes), but its pretrained
    checkpoints record the rule only since today: one saved before (an interrupted run resumed now keeps
    it, next to new ones that record it) was taken for a spec's model of the S + K rule, and fol personalize
    or the node agent re-split its node so, putting training images in its validation and test sets. Its
    card is told by what only the simulation writes there (extra.pretrain_flops and extra.seed)."""
    from fol.nodedata import LEGACY_SPLIT_RULE, SPLIT_RULE, recorded_split_rule

    model = str(tmp_path / "sat-00.safetensors")
    assert recorded_split_rule({"pretrain_flops": 123_456, "seed": 1}, model) == SPLIT_RULE
    # fol pretrain's and fol personalize's cards of before: S + K, as they split
    assert recorded_split_rule({"val_accuracy": 0.9, "test_accuracy": 0.8, "data": "dataset=x"}, model) \
        == LEGACY_SPLIT_RULE
    assert recorded_split_rule({"variant": "fol", "personalized_from": "sat-00.safetensors", "data": "x"},
                               model) == LEGACY_SPLIT_RULE


def test_the_loopback_set_up_pretrains_as_fol_pretrain_does(tmp_path: Path) -> None:
    """The agent's loopback set-up (fol.agent.loopback.prepare_nodes) pretrained node K with the [fol]
    seed (batch order, dropout) from the initialization of seed 0, where fol pretrain --data (and fol
    simulate) train it with node_seed(S, K) from the initialization of seed S: at seed 1 another model of
    every node (up to 1.5 apart in a weight). Both now pretrain by fol.nodedata.pretrain_from_spec: the
    same model bit for bit, and the same card (split rule, spec, accuracies) but for its producer;
    init_seed given is fol pretrain's --init-seed."""
    import torch

    from fol.agent.loopback import prepare_nodes
    from fol.checkpoint import load_model
    from fol.cli import main

    data = "dataset=synthetic-hurricane,nodes={n},node={i},psi=0.5,per_node=30,size=100,seed=1"
    models = {}
    for init, flags in ((None, []), (0, ["--init-seed", "0"])):
        nodes = prepare_nodes(tmp_path / f"loop-{init}", 2, data=data, arch="cnn-small", fol={"pretrain_epochs": 1},
                              init_seed=init)
        for k, files in enumerate(nodes):
            out = tmp_path / f"cli-{init}-{k}.safetensors"
            assert main(["pretrain", "--data", data.format(n=2, i=k), "--arch", "cnn-small", "--epochs", "1",
                         *flags, "--out", str(out)]) == 0
            loop, cli = load_model(files.model), load_model(out)
            mine, theirs = loop.model.state_dict(), cli.model.state_dict()
            assert mine.keys() == theirs.keys()
            assert all(torch.equal(mine[key], theirs[key]) for key in mine), (init, k)
            assert loop.card.extra == cli.card.extra and loop.card.extra["split_seed"] == "node_seed"
            assert (loop.card.producer, cli.card.producer) == (f"drone-{k}", f"node-{k}")
            assert loop.card.class_names == cli.card.class_names and loop.card.input_shape == cli.card.input_shape
            models[init, k] = mine
    for k in range(2):  # the initialization seed matters: the default is the spec's seed=1, not 0
        assert not all(torch.equal(models[None, k][key], models[0, k][key]) for key in models[None, k])


def test_fol_pretrain_refuses_a_one_class_folder_before_reading_an_image(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """fol pretrain read every image of a folder (load_node_data) before it refused the folder for its one
    class: a one-class folder of 3,000 images took 3.4 s to refuse, and one holding an image that cannot be
    decoded was refused for that image, not for its one class. The class folders are now counted first, as
    fol simulate's scenario check counts them (fol.data.loaders.image_folder_classes): the same one line,
    with no image read, for the folder given as itself, as key=value pairs, and laid out by split
    (splits=, the classes of the split folders pooled)."""
    import fol.nodedata
    import fol.stages
    from fol.cli import main

    root = tmp_path / "one"
    (root / "burnt").mkdir(parents=True)
    (root / "burnt" / "0.png").write_bytes(b"not a png")  # reading it would fail
    by_split = tmp_path / "by-split"
    for split in ("train", "valid"):
        (by_split / split / "burnt").mkdir(parents=True)
        (by_split / split / "burnt" / "0.png").write_bytes(b"not a png")
    monkeypatch.setattr(fol.nodedata, "load_node_data", lambda *a, **k: pytest.fail("data loaded"))
    monkeypatch.setattr(fol.stages, "pretrain", lambda *a, **k: pytest.fail("trained on one class"))
    out = tmp_path / "m.safetensors"
    for text, folder in ((str(root), root), (f"dataset=imagefolder,path={root},partition=all", root),
                         (f"dataset=imagefolder,path={by_split},splits=train+valid,nodes=2,node=1", by_split)):
        assert main(["pretrain", "--data", text, "--epochs", "1", "--out", str(out)]) == 2
        assert capsys.readouterr().err.splitlines() == [
            f"fol pretrain: error: --data {text}: image folder {folder} has one class folder, 'burnt'; a classifier "
            f"needs at least two classes (one sub-folder of images per class)"]
    assert not out.exists()
    # the loader's own refusals stay its own, now said before reading: a split-first folder without splits=
    assert main(["pretrain", "--data", str(by_split), "--epochs", "1", "--out", str(out)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith(f"fol pretrain: error: --data: image folder {by_split} is laid out "
                                               f"by split first"), err


def test_fol_pretrain_threads_gives_the_simulations_model_and_restores_torchs_count(tmp_path: Path) -> None:
    """``fol pretrain --threads N`` trains with N torch threads (the simulation's ``run.threads``,
    default 1, which bit-for-bit equality needs: the thread count orders the float sums), then gives
    the caller back its own count; a count the simulation would refuse is one line, exit 2."""
    import dataclasses

    import torch

    from fol.checkpoint import load_model
    from fol.cli import main
    from fol.config import FOLConfig
    from fol.data import dirichlet_partition, load_dataset
    from fol.threads import torch_threads
    from fol.models import build_model
    from fol.nodes import build_nodes

    seed, nodes, node, epochs = 2, 3, 1, 1
    text = f"dataset=synthetic-hurricane,nodes={nodes},psi=0.5,per_node=60,size=200,seed={seed},node={node}"
    pool = load_dataset("synthetic-hurricane", n=200, seed=seed)
    shards = dirichlet_partition(pool.labels.numpy(), nodes, 0.5, seed, samples_per_node=60)
    train = dataclasses.replace(FOLConfig().pretrain_train(), epochs=epochs)
    only_node = lambda fn, tasks: [fn(t) if t.index == node else (build_model(t.spec).state_dict(), 0)  # noqa: E731
                                   for t in tasks]
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        out = tmp_path / "one-thread.safetensors"
        assert main(["pretrain", "--data", text, "--arch", "cnn-small", "--epochs", str(epochs), "--threads", "1",
                     "--out", str(out)]) == 0
        assert torch.get_num_threads() == 2  # the caller's count, given back
        with torch_threads(1):  # the simulation's node task, with its run.threads
            sim = build_nodes(pool, shards, ["cnn-small"], train, seed, map=only_node)[node]
        mine, theirs = load_model(out).model.state_dict(), sim.pretrained.state_dict()
        assert all(torch.equal(mine[k], theirs[k]) for k in mine)
        assert main(["pretrain", "--data", text, "--threads", "0", "--out", str(tmp_path / "no.safetensors")]) == 2
        assert not (tmp_path / "no.safetensors").exists()
    finally:
        torch.set_num_threads(before)


def test_a_one_class_folder_under_the_data_root_is_named_where_it_is(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """path= under --data-root, or with a ~, is the folder the loader reads (fol.data.registry.image_folder_path):
    the one-class refusal named the path as typed ("the folder one"), where the loader's own lines name the
    folder it looked in ("image folder <root>/one: ..."); it names that folder too."""
    import fol.nodedata
    from fol.cli import main

    root = tmp_path / "root"
    (root / "one" / "burnt").mkdir(parents=True)
    (root / "one" / "burnt" / "0.png").write_bytes(b"not a png")
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "imgs").symlink_to(root / "one")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setattr(fol.nodedata, "load_node_data", lambda *a, **k: pytest.fail("data loaded"))
    out = tmp_path / "m.safetensors"
    for text, flags, folder in (("dataset=imagefolder,path=one,partition=all", ["--data-root", str(root)],
                                 root / "one"),
                                ("dataset=imagefolder,path=~/imgs,partition=all", [], tmp_path / "home" / "imgs")):
        assert main(["pretrain", "--data", text, *flags, "--epochs", "1", "--out", str(out)]) == 2
        assert capsys.readouterr().err.splitlines() == [
            f"fol pretrain: error: --data {text}: image folder {folder} has one class folder, 'burnt'; a classifier "
            f"needs at least two classes (one sub-folder of images per class)"]
    assert not out.exists()


@pytest.mark.parametrize("kind", ["control", "long"])
def test_fol_pretrain_names_out_through_brief(kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """fol pretrain's closing line ('<node>: ... -> <out>') printed --out as given: a newline or a terminal's
    escape in a name went to stdout as it is, a path of 3,000 characters made a 3 kB line. It names --out
    through brief(), as its refusals do."""
    from fol.cli import main
    from swarmbase.tomlcheck import brief

    folder = odd_folder(tmp_path, kind)
    out = folder / "m.safetensors"
    assert main(["pretrain", "--data", "dataset=synthetic-hurricane,nodes=2,node=0,per_node=40,size=100",
                 "--arch", "cnn-small", "--epochs", "1", "--out", str(out)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 1 and lines[0].endswith(f" -> {brief(out)}") and lines[0].isprintable(), lines
    assert len(lines[0]) < 400 and out.is_file(), lines


@pytest.mark.parametrize("where, root_where", [("--data", "--data-root"),
                                               ("node.toml: node.data", "node.toml: node.data_root")])
def test_the_spec_parser_refuses_a_data_root_with_a_generated_dataset(tmp_path: Path, where: str,
                                                                        root_where: str) -> None:
    """The one check of a data root given with a synthetic dataset, which reads no file, is the parser's:
    fol pretrain, fol personalize and the node agent each called check_data_root after parsing, so a
    caller of parse_node_data could read the spec's data with the root unchecked. Named as the caller
    names the root; a root with a dataset read from files, or none, is taken."""
    from fol.nodedata import load_node_data

    with pytest.raises(ConfigError) as err:
        parse_node_data("dataset=synthetic-wildfire,nodes=2,node=1", root=str(tmp_path), where=where,
                        root_where=root_where)
    assert str(err.value) == (f"{root_where}: only applies to datasets read from files (a real dataset's "
                              f"<root>/<name>/, an imagefolder path relative to it), not 'synthetic-wildfire', "
                              f"which is generated from no folder")
    assert parse_node_data("dataset=synthetic-wildfire,nodes=2,node=1").root is None
    assert parse_node_data("dataset=cifar10,nodes=2,node=1", root=str(tmp_path)).root == str(tmp_path)
    assert parse_node_data(str(tmp_path), root=str(tmp_path)).dataset == "imagefolder"
    with pytest.raises(ConfigError, match="unknown dataset 'synthetic-wildfir'"):  # a typo: not "generated"
        load_node_data(parse_node_data("dataset=synthetic-wildfir", root=str(tmp_path)))


def test_the_synthetic_datasets_known_without_torch_are_the_registrys() -> None:
    """fol.defaults.SYNTHETIC_DATASETS (what check_data_root refuses a root with, torch-free for the
    spec parser) names the registry's generated datasets, each of which reads no file."""
    from fol.data.registry import dataset_names
    from fol.defaults import SYNTHETIC_DATASETS

    assert sorted(SYNTHETIC_DATASETS) == sorted(n for n in dataset_names() if n.startswith("synthetic-"))
