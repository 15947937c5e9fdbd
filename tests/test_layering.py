"""The layering the architecture fixes, checked over the whole tree.

- ``orbits`` imports neither ``contact_sim``, ``fol`` nor torch; ``contact_sim``
  imports neither ``fol`` nor torch (statically, in any function, and at run time).
- The learning core (``fol`` outside ``fol/simulation/`` and the CLI modules
  that register contact commands) never imports ``orbits`` or ``contact_sim``,
  and nothing but those CLI modules imports ``fol/simulation/``.
- ``swarmbase`` (the shared bottom layer) imports nothing from the project and
  no third-party package, so every package may import it.
- No cycles: neither between the top-level packages nor between modules
  (imports inside functions count too).
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import networkx as nx
import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("swarmbase", "orbits", "contact_sim", "fol")
#: Modules of ``fol`` allowed to import the contact side: the simulation runner
#: and the command registry that lists ``fol contacts``.
JOINERS = ("fol.simulation", "fol.commands", "fol.cli")


def _module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules(root: Path = ROOT) -> dict[str, Path]:
    return {_module_name(p, root): p for pkg in PACKAGES for p in (root / pkg).rglob("*.py")}


def _imported_names(module: str, path: Path, known: set[str]) -> set[str]:
    """Every dotted name an import statement anywhere in the file imports:
    ``from pkg import sub`` counts as ``pkg.sub`` when that is a module of the
    tree, else as ``pkg``."""
    is_pkg = path.name == "__init__.py"
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".") if is_pkg else module.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            for alias in node.names:
                names.add(f"{mod}.{alias.name}" if f"{mod}.{alias.name}" in known else mod)
    return names


def import_graph(root: Path = ROOT) -> tuple[nx.DiGraph, dict[str, set[str]]]:
    """Module -> module edges inside the three packages, and each module's
    imported top-level names (for third-party checks such as torch)."""
    mods = _modules(root)
    graph = nx.DiGraph()
    tops: dict[str, set[str]] = {}
    for mod, path in mods.items():
        graph.add_node(mod)
        names = _imported_names(mod, path, set(mods))
        tops[mod] = {n.split(".")[0] for n in names if n}
        for name in names:
            target = name
            while target and target not in mods:
                target = target.rpartition(".")[0]
            if target and target != mod:
                graph.add_edge(mod, target)
    return graph, tops


GRAPH, TOPS = import_graph()


def _package(mod: str) -> str:
    return mod.split(".")[0]


def test_graph_sees_the_whole_tree() -> None:
    for pkg in PACKAGES:
        assert sum(1 for m in GRAPH if _package(m) == pkg) >= (3 if pkg == "swarmbase" else 5)
    # a known edge in each direction that the rules allow
    assert GRAPH.has_edge("contact_sim.trajectory", "orbits")
    assert GRAPH.has_edge("contact_sim.scenario", "swarmbase.tomlcheck")
    assert GRAPH.has_edge("fol.agent.config", "swarmbase.tomlcheck")
    assert GRAPH.has_edge("fol.simulation.runner", "contact_sim.plan")


@pytest.mark.parametrize("pkg, forbidden", [("swarmbase", {"orbits", "contact_sim", "fol", "torch", "torchvision",
                                                          "numpy", "scipy", "zmq", "safetensors"}),
                                            ("orbits", {"contact_sim", "fol", "torch", "torchvision"}),
                                            ("contact_sim", {"fol", "torch", "torchvision"})])
def test_contact_side_imports_no_learning_code(pkg: str, forbidden: set[str]) -> None:
    bad = {m: sorted(TOPS[m] & forbidden) for m in TOPS if _package(m) == pkg and TOPS[m] & forbidden}
    assert not bad, f"{pkg} must not import {sorted(forbidden)}: {bad}"


def _outside_stdlib(tops: dict[str, set[str]], pkg: str) -> dict[str, list[str]]:
    """Per module of ``pkg``: the imported top-level names that are neither the
    standard library nor ``pkg`` itself."""
    allowed = set(sys.stdlib_module_names) | {"__future__", pkg}
    return {m: sorted(tops[m] - allowed) for m in tops if _package(m) == pkg and tops[m] - allowed}


def test_swarmbase_imports_only_the_standard_library() -> None:
    """Rule 0 of docs/architecture.md: no project package and no third-party package
    at all (the list above names only some of them)."""
    assert not _outside_stdlib(TOPS, "swarmbase"), _outside_stdlib(TOPS, "swarmbase")


def test_learning_core_imports_no_orbit_code() -> None:
    bad = {m: sorted(TOPS[m] & {"orbits", "contact_sim"}) for m in TOPS
           if _package(m) == "fol" and not m.startswith(JOINERS) and TOPS[m] & {"orbits", "contact_sim"}}
    assert not bad, f"only {JOINERS} may import orbits/contact_sim: {bad}"


def test_only_the_cli_imports_the_simulation() -> None:
    """docs/architecture.md: nothing imports ``fol/simulation/`` but the CLI."""
    bad = sorted({a for a, b in GRAPH.edges if b.startswith("fol.simulation") and not a.startswith(JOINERS)})
    assert not bad, f"only {JOINERS} may import fol.simulation: {bad}"


def test_no_package_cycles() -> None:
    packages = nx.DiGraph()
    packages.add_nodes_from(PACKAGES)
    packages.add_edges_from((_package(a), _package(b)) for a, b in GRAPH.edges if _package(a) != _package(b))
    assert nx.is_directed_acyclic_graph(packages), list(nx.simple_cycles(packages))


def test_no_module_cycles() -> None:
    cycles = list(nx.simple_cycles(GRAPH))
    assert not cycles, f"import cycles between modules: {cycles[:5]}"


def test_checker_finds_a_cycle(tmp_path: Path) -> None:
    """The checks above can fail: a two-file cycle, a contact-side torch import and a
    third-party import in swarmbase are seen."""
    for pkg in PACKAGES:
        (tmp_path / pkg).mkdir()
        (tmp_path / pkg / "__init__.py").write_text("")
    (tmp_path / "fol" / "a.py").write_text("from fol.b import x\n")
    (tmp_path / "fol" / "b.py").write_text("def f():\n    from fol import a\n")
    (tmp_path / "contact_sim" / "c.py").write_text("def g():\n    import torch\n    from fol.a import y\n")
    (tmp_path / "swarmbase" / "u.py").write_text("import os\nfrom . import v\ndef h():\n    import networkx\n")
    (tmp_path / "swarmbase" / "v.py").write_text("")
    graph, tops = import_graph(tmp_path)
    assert ["fol.a", "fol.b"] in [sorted(c) for c in nx.simple_cycles(graph)]
    assert {"torch", "fol"} <= tops["contact_sim.c"]
    assert _outside_stdlib(tops, "swarmbase") == {"swarmbase.u": ["networkx"]}


def _modules_after(code: str) -> set[str]:
    out = subprocess.run([sys.executable, "-c", code + "\nimport sys; print(' '.join(sorted(sys.modules)))"],
                         capture_output=True, text=True, check=True, timeout=120, cwd=ROOT)
    return set(out.stdout.split())


def test_contact_side_never_imports_torch_at_run_time() -> None:
    mods = _modules_after(
        "import orbits, contact_sim, contact_sim.cli, contact_sim.plotting\n"
        "from contact_sim import load_contact_scenario, compute_contacts\n"
        "plan = compute_contacts(load_contact_scenario('examples/drone_contacts.toml'))\n"
        "assert plan.summary()['windows'] > 0"
    )
    assert "orbits" in mods and "contact_sim.windows" in mods
    assert "torch" not in mods and not {m for m in mods if m == "fol" or m.startswith("fol.")}


@pytest.mark.parametrize("module", ["fol.personalize", "fol.methods.fol_method", "fol.agent.node", "fol.personalize_cli"])
def test_learning_core_never_imports_orbits_at_run_time(module: str) -> None:
    mods = _modules_after(f"import {module}")
    assert module in mods
    assert not {m for m in mods if m == "orbits" or m.startswith("orbits.") or m.startswith("contact_sim")}


def test_the_command_line_starts_without_the_heavy_libraries() -> None:
    """Every sub-command registers itself without importing what it drives:
    ``fol --help`` (and the set-up of ``fol keys``, ``fol agent ctl``) loads
    neither torch nor the contact search's numba and scipy (2 s on these cores)."""
    mods = _modules_after("from fol.cli import build_parser, _user_error_types\n"
                          "build_parser().format_help(); _user_error_types()")
    assert {"contact_sim.cli", "fol.agent.cli", "contact_sim.errors"} <= mods
    assert not {"torch", "numba", "scipy", "skyfield"} & {m.split(".")[0] for m in mods}


def test_the_node_data_spec_parser_imports_no_torch() -> None:
    """``parse_node_data`` (``fol personalize``'s and the agent's first check of ``--data`` / ``node.data``),
    its refusal of a data root given with a synthetic dataset included, loads neither torch nor ``fol.data``:
    the rule (``fol.defaults.check_data_root``) is known without them."""
    mods = _modules_after("from fol.errors import ConfigError\n"
                          "from fol.nodedata import parse_node_data\n"
                          "parse_node_data('dataset=cifar10,nodes=2,node=1', root='datasets')\n"
                          "try:\n    parse_node_data('dataset=synthetic-wildfire', root='datasets')\n"
                          "except ConfigError:\n    pass\n"
                          "else:\n    raise SystemExit('not refused')")
    assert "fol.nodedata" in mods and "fol.defaults" in mods
    assert not {m for m in mods if m.split(".")[0] == "torch" or m == "fol.data" or m.startswith("fol.data.")}


def test_the_flight_file_readers_import_no_contact_search() -> None:
    """Reading a mission or a track (``read_mission``, ``read_track``, ``read_waypoints_csv``) loads neither
    the window search's numba and scipy nor skyfield: the mission reader once imported ``contact_sim.dtn`` for
    its node-name check, about 90 MB of the readers' 132 MB of imports."""
    mods = _modules_after("import contact_sim.tracks, contact_sim.missions, contact_sim.drones")
    assert {"contact_sim.tracks", "contact_sim.missions", "numpy", "orbits"} <= mods
    assert not {"torch", "numba", "scipy", "skyfield"} & {m.split(".")[0] for m in mods}
    assert "contact_sim.dtn" not in mods
