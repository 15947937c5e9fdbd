"""The documentation stays true to the code and the repository stands alone.

- ``docs/scenario.md`` lists exactly the fields the scenario validators accept
  (read from the validators' own "unknown key" messages), and its complete
  example passes validation, as do every other TOML scenario and fragment of
  ``docs/`` (the agent's ``[limits]`` by the agent's own class);
- ``docs/security.md`` states the loader's, the protocol's and the agent's
  limits, defaults and bounds as the code has them;
- every markdown page with ``>>>`` examples lies where the test run collects it;
- every relative link in ``docs/`` points at a file of the repository, and no
  file of the tree cites a design note that is not in it;
- collecting the packages' docstring examples (``--doctest-modules``) works
  without the optional extras, as in a base install;
- every ``fol`` and ``python benchmarks/...`` command of ``README.md``, and every
  ``python benchmarks/...`` command of the pages of measured results
  (``docs/results.md``, ``evaluation.md``, ``protocol.md``, ``baselines.md``, ``scale.md``,
  ``formats.md``, ``scenario.md``), names a
  sub-command or script and options that exist (parsed, never run), and
  ``.ci/run`` runs the README's install-and-test command;
- the README's architecture, documentation and baselines tables and its demo
  paragraph name the paths, pages, methods, defaults and scenario the code has;
- ``docs/architecture.md`` quotes the line ``fol`` prints for an ``OSError`` past the checks.
"""

from __future__ import annotations

import copy
import re
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
SCENARIO_MD = DOCS / "scenario.md"
PROBE = "zz_not_a_field"

#: A minimal valid satellite scenario and a minimal valid drone scenario.
SATELLITES: dict[str, Any] = {
    "constellation": {"kind": "walker-delta", "total": 6, "planes": 2, "altitude_km": 550.0,
                      "inclination_deg": 53.0, "epoch": "2025-01-01T00:00:00Z"},
    "time": {"duration_s": 3600.0},
    "link": {"max_range_km": 5000.0},
}
DRONES: dict[str, Any] = {"drones": {"count": 3, "radio_range_km": 1.0}, "time": {"duration_s": 600.0}}


def documented_fields(text: str) -> dict[str, set[str]]:
    """Table name -> the field names in the first column of the markdown tables
    under that table's heading (``### `[name]` `` or ``### `[[name]]` ``)."""
    fields: dict[str, set[str]] = {}
    current = None
    for line in text.splitlines():
        heading = re.match(r"^#{2,4} `\[\[?([a-z_.]+)\]\]?`", line)
        if heading:
            current = heading.group(1)
            fields.setdefault(current, set())
        elif line.startswith("#"):
            current = None
        elif current is not None:
            row = re.match(r"^\| `([a-z_0-9]+)` \|", line)
            if row:
                fields[current].add(row.group(1))
    return fields


def _accepted_from_message(message: str) -> set[str]:
    """The key list of a validator's "unknown key" message."""
    match = re.search(r"(?:allowed:|expected some of)\s*([a-z0-9_, ]+)", message)
    return set(match.group(1).replace(" ", "").strip(",").split(",")) if match else set()


def accepted_fields(table: str) -> set[str]:
    """Fields the validators accept in ``table``: feed it an unknown key and read
    the list of allowed keys from the error (written whole here: a long one is cut
    in the message users see)."""
    from unittest import mock

    from contact_sim.errors import ContactError
    from fol.errors import FOLError
    from fol.simulation.scenario import parse_scenario
    from swarmbase import tomlcheck

    doc = copy.deepcopy(DRONES if table == "drones" else SATELLITES)
    if table == "contacts":  # a plan file replaces the constellation and its ground stations
        doc.pop("constellation")
        doc.pop("ground_stations", None)
        doc["link"] = {}
    if table == "ground_stations":
        doc[table] = [{"lat_deg": 0.0, "lon_deg": 0.0, PROBE: 1}]
    else:
        doc.setdefault(table, {})[PROBE] = 1
    with pytest.raises((ContactError, FOLError)) as info, mock.patch.object(tomlcheck, "_ALLOWED_CHARS", 10**6):
        parse_scenario(doc, ROOT)
    message = str(info.value)
    accepted = _accepted_from_message(message)
    assert PROBE in message and accepted, (
        f"could not read the accepted keys of [{table}] from the validator's message: {message}")
    return accepted


TABLES = ["constellation", "drones", "ground_stations", "time", "link", "rounds", "contacts", "energy",
          "scenario", "data", "models", "fol", "run", "output"]


@pytest.fixture(scope="module")
def documented() -> dict[str, set[str]]:
    return documented_fields(SCENARIO_MD.read_text(encoding="utf-8"))


@pytest.mark.parametrize("table", TABLES)
def test_every_accepted_field_is_documented(table: str, documented: dict[str, set[str]]) -> None:
    accepted = accepted_fields(table)
    assert table in documented, f"docs/scenario.md has no section for [{table}]"
    missing, stale = sorted(accepted - documented[table]), sorted(documented[table] - accepted)
    assert not missing, f"docs/scenario.md, [{table}]: document the field(s) {missing}"
    assert not stale, f"docs/scenario.md, [{table}]: field(s) {stale} are no longer accepted"


def test_methods_table_is_documented(documented: dict[str, set[str]]) -> None:
    from fol.methods import method_names

    assert documented.get("methods") == {"run"}
    text = SCENARIO_MD.read_text(encoding="utf-8")
    section = text[text.index("### `[methods]`"):text.index("### `[run]`")]
    missing = [m for m in method_names() if f"`{m}`" not in section]
    assert not missing, f"docs/scenario.md, [methods]: list the method(s) {missing}"


def test_reader_sees_a_missing_field() -> None:
    """The check above can fail: a table without one of its fields is reported."""
    text = "### `[time]`\n\n| field | type |\n|---|---|\n| `start` | time |\n| `step_s` | number |\n"
    assert documented_fields(text) == {"time": {"start", "step_s"}}
    assert accepted_fields("time") - documented_fields(text)["time"] == {"duration_s", "iers_finals"}


def test_scenario_unknown_key_example_is_the_validators_message() -> None:
    """The unknown-key error docs/scenario.md quotes is what the validator prints, up to its ``...``."""
    from fol.errors import ConfigError
    from fol.simulation.scenario import parse_scenario

    quoted = re.search(r"`(run\.toml: data: unknown key 'zz' \(allowed: [^`]*?), \.\.\.\)`",
                       SCENARIO_MD.read_text(encoding="utf-8"))
    assert quoted, "docs/scenario.md no longer quotes the unknown-key example"
    with pytest.raises(ConfigError) as exc:
        parse_scenario({**copy.deepcopy(DRONES), "data": {"zz": 1}}, ROOT, "run.toml")
    assert str(exc.value).startswith(quoted.group(1) + ", "), str(exc.value)


def test_complete_example_is_valid() -> None:
    from fol.simulation.scenario import parse_scenario

    text = SCENARIO_MD.read_text(encoding="utf-8")
    section = text[text.index("## A complete example"):]
    example = re.search(r"```toml\n(.*?)```", section, re.S).group(1)
    doc = tomllib.loads(example)
    scn = parse_scenario(doc, ROOT, "docs-example.toml", example)
    # every table of the reference appears in the complete example
    # (but the alternatives to a constellation and the optional energy model)
    assert set(TABLES) - {"drones", "contacts", "energy"} <= set(doc)
    assert scn.name == "docs-example" and scn.seeds == [0, 1]
    assert scn.contact.rounds.count == 2 and len(scn.contact.ground_stations) == 1


def test_every_scenario_example_in_docs_is_valid() -> None:
    """Every complete TOML scenario of the docs pages (a block with a ``[time]``
    table; smaller blocks are fragments of one table) passes validation."""
    from fol.simulation.scenario import parse_scenario

    examples = [(page.name, tomllib.loads(block)) for page in sorted(DOCS.glob("*.md"))
                for block in re.findall(r"```toml\n(.*?)```", page.read_text(encoding="utf-8"), re.S)]
    complete = [(name, doc) for name, doc in examples if "time" in doc]
    assert len(complete) >= 2
    for name, doc in complete:
        parse_scenario(doc, ROOT, f"docs/{name}")


#: Top-level tables of TOML blocks in docs/ that belong to the node agent's
#: configuration, not to a scenario (``fol/agent/config.py``).
AGENT_TABLES = {"node", "peers", "limits", "trigger", "position"}


def test_every_scenario_fragment_in_docs_is_valid() -> None:
    """A TOML block of a docs page without a ``[time]`` table is a fragment
    (one or a few tables, e.g. a ``[fol]`` option set): on top of a minimal
    valid scenario it passes validation, so a misspelt key or a value out of
    range in a fragment is caught. Blocks of the agent's configuration are
    checked there instead."""
    from contact_sim.scenario import CONTACT_TABLES, RESERVED_TABLES
    from fol.agent.config import Limits
    from fol.simulation.scenario import parse_scenario

    checked = 0
    for page in sorted(DOCS.glob("*.md")):
        for block in re.findall(r"```toml\n(.*?)```", page.read_text(encoding="utf-8"), re.S):
            fragment = tomllib.loads(block)
            if "time" in fragment:  # a complete scenario: test_every_scenario_example_in_docs_is_valid
                continue
            if set(fragment) <= AGENT_TABLES:
                if "limits" in fragment:
                    Limits(**fragment["limits"])
                continue
            assert set(fragment) <= set(CONTACT_TABLES) | set(RESERVED_TABLES), (page.name, sorted(fragment))
            # energy.sunlight_step_s is refused outside satellite scenarios (only satellites have eclipses)
            satellites = "constellation" in fragment or "sunlight_step_s" in fragment.get("energy", {})
            base = copy.deepcopy(SATELLITES if satellites else DRONES)
            parse_scenario({**base, **fragment}, ROOT, f"docs/{page.name}")
            checked += 1
    assert checked >= 3


def test_every_markdown_example_runs_with_the_suite() -> None:
    """The ``>>>`` examples of markdown pages run only because pytest collects
    them: ``--doctest-glob=*.md`` over the ``testpaths``. Every page that holds
    one (any tracked ``*.md``, not only ``docs/``) lies in a collected folder."""
    import doctest

    ini = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
    assert "--doctest-glob=*.md" in ini["addopts"].split()
    collected = [ROOT / p for p in ini["testpaths"]]
    tracked = subprocess.run(["git", "ls-files", "*.md"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    pages = ([ROOT / n for n in tracked.stdout.split()] if tracked.returncode == 0
             else sorted(ROOT.glob("**/*.md")))
    parser = doctest.DocTestParser()
    with_examples = [p for p in pages if p.is_file()
                     and parser.get_examples(p.read_text(encoding="utf-8"), name=p.name)]
    assert {"architecture.md", "fol-algorithm.md"} <= {p.name for p in with_examples}
    uncollected = [str(p.relative_to(ROOT)) for p in with_examples
                   if not any(p.is_relative_to(folder) for folder in collected)]
    assert not uncollected, f"these pages' >>> examples are never run (not under {ini['testpaths']}): {uncollected}"


# --------------------------------------------------------------------- the repository stands alone


def _heading_anchors(page: Path) -> set[str]:
    """The ``#anchors`` GitHub gives a markdown page's headings: lower case, punctuation but
    ``-`` and ``_`` dropped, spaces to ``-``, a repeated heading's anchor suffixed ``-1``, ``-2`` ..."""
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)  # no headings in code
    seen: dict[str, int] = {}
    for heading in re.findall(r"^#{1,6} (.+)$", text, re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        seen[slug] = seen.get(slug, 0) + 1
        if seen[slug] > 1:
            seen[f"{slug}-{seen[slug] - 1}"] = 1
    return set(seen)


def test_doc_links_resolve() -> None:
    """Every relative link of every markdown page (the README's links into docs/ too, not
    only those of docs/) names a file of the repository, and a link's ``#anchor`` one of
    that page's headings (a renamed heading broke the README's links into docs/results.md)."""
    tracked = subprocess.run(["git", "ls-files", "*.md"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    pages = ([ROOT / n for n in tracked.stdout.split()] if tracked.returncode == 0
             else sorted(p for p in ROOT.glob("**/*.md") if ".venv" not in p.parts))
    names = {str(p.relative_to(ROOT)) for p in pages}
    assert {"README.md", "docs/README.md", "docs/architecture.md", "docs/fol-algorithm.md", "docs/protocol.md",
            "docs/scenario.md"} <= names
    broken, links, anchored = [], 0, 0
    for page in pages:
        for target, anchor in re.findall(r"\]\(([^)#\s]*)(?:#([^)\s]*))?\)", page.read_text(encoding="utf-8")):
            if "://" in target or not (target or anchor):
                continue
            dest = page.parent / target if target else page
            links += 1
            if not dest.exists():
                broken.append(f"{page.relative_to(ROOT)} -> {target}")
            elif anchor and dest.suffix == ".md":
                anchored += 1
                if anchor not in _heading_anchors(dest):
                    broken.append(f"{page.relative_to(ROOT)} -> {target}#{anchor} (no such heading)")
    assert not broken, f"links to files or headings that do not exist: {broken}"
    assert links >= 20  # the README's and docs/README.md's page lists, at least
    assert anchored >= 10  # the README's targets table links its subsections of docs/results.md


def test_no_file_cites_notes_outside_the_repository() -> None:
    """The repository stands alone: no file cites the design notes or papers kept beside it, nor the
    issue tracker (its targets are the README's own table)."""
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    if tracked.returncode != 0:
        pytest.skip("not a git checkout")
    pattern = re.compile(r"DESIGN\.md|\bpapers/[\w-]+\.txt|\b[Ii]ssue(s|'s|s')?\b")
    offenders = []
    for name in tracked.stdout.split():
        path = ROOT / name
        if path.suffix in {".py", ".md", ".toml", ".txt", ".cfg", ".template"} and path.is_file():
            if path.resolve() != Path(__file__).resolve() and pattern.search(path.read_text(encoding="utf-8", errors="replace")):
                offenders.append(name)
    assert not offenders, f"these files cite documents outside the repository: {offenders}"


# --------------------------------------------------------------------- doctests without the extras


def _optional_modules() -> set[str]:
    """Import names of the run-time libraries that only an extra installs (every
    extra but ``dev``, whose test tools the test runner itself needs)."""
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]

    def names(requirements: list[str]) -> set[str]:
        return {re.split(r"[<>=!~\[; ]", r, maxsplit=1)[0].lower().replace("-", "_") for r in requirements}

    extras = meta.get("optional-dependencies", {})
    runtime = set().union(*(names(v) for k, v in extras.items() if k != "dev"))
    return runtime - names(meta["dependencies"])


def test_doctest_collection_needs_no_optional_extra() -> None:
    optional = _optional_modules()
    assert "ray" in optional
    packages = [p for p in ("swarmbase", "orbits", "contact_sim", "fol") if (ROOT / p / "__init__.py").is_file()]
    blocker = (
        "import sys, importlib.abc\n"
        "class Block(importlib.abc.MetaPathFinder):\n"
        f"    names = {sorted(optional)!r}\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in self.names:\n"
        "            raise ModuleNotFoundError(f'No module named {name!r} (blocked: optional extra)', name=name)\n"
        "sys.meta_path.insert(0, Block())\n"
        "import pytest\n"
        "sys.exit(pytest.main(['--collect-only', '-q', '-p', 'no:cacheprovider', '--doctest-modules',\n"
        f"                      *{packages!r}]))\n"
    )
    out = subprocess.run([sys.executable, "-c", blocker], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "error" not in out.stdout.lower().replace("errors.py", "")
    # the packages' docstring examples are really collected
    assert re.search(r"(\d+) tests? collected", out.stdout) and "fol/pruning.py::fol.pruning" in out.stdout


def _same_default(doc: str, default: object) -> bool:
    """Does a documented default (the text between backticks) state ``default``?"""
    if isinstance(default, str):
        return doc == f'"{default}"'
    if isinstance(default, bool):
        return doc == str(default).lower()
    return float(doc) == float(default)


def test_fol_algorithm_lists_every_folconfig_field_with_its_default() -> None:
    import dataclasses

    from fol.config import FOLConfig

    text = (DOCS / "fol-algorithm.md").read_text(encoding="utf-8")
    section = text[text.index("## `[fol]` fields (FOLConfig)"):]
    rows = dict(re.findall(r"^\| `([a-z_0-9]+)` \| `([^`]+)` \|", section, re.M))
    fields = {f.name: f.default for f in dataclasses.fields(FOLConfig)}
    assert set(rows) == set(fields), (
        f"docs/fol-algorithm.md: missing {sorted(set(fields) - set(rows))}, stale {sorted(set(rows) - set(fields))}")
    wrong = {name: (rows[name], default) for name, default in fields.items() if not _same_default(rows[name], default)}
    assert not wrong, f"docs/fol-algorithm.md: documented vs actual defaults differ: {wrong}"


def test_fol_algorithm_states_the_folconfig_bounds_and_presets() -> None:
    """docs/fol-algorithm.md's ``[fol]`` section: the ranges its table states are the ones
    ``FOLConfig`` enforces (both ends), the fields its prose says are refused above 1e6 and
    above 100,000 are exactly those the code bounds, and the project default differs from the
    ``paper`` preset in exactly the fields it names, with the values it gives."""
    import dataclasses

    from contact_sim.scenario import MAX_ROUNDS
    from fol.config import COUNTS, FACTORS, MAX_AUG_COPIES, FOLConfig
    from fol.defaults import MAX_ITERATIONS
    from fol.errors import ConfigError
    from fol.train import MAX_FACTOR

    text = (DOCS / "fol-algorithm.md").read_text(encoding="utf-8")
    section = " ".join(text[text.index("## `[fol]` fields (FOLConfig)"):text.index("## A runnable example")].split())
    meaning = {name: cell for name, cell in re.findall(r"\| `([a-z_0-9]+)` \| `[^`]+` \| [^|]+ \| ([^|]+) \|", section)}

    def refused(**field: Any) -> bool:
        try:
            FOLConfig(**field)
        except ConfigError:
            return True
        return False

    ranges = {"temperature": r"in \[([\d.]+), ([\d.]+)\]", "momentum": r"in \[(0), (1)\)",
              "prune_ratio": r"in \[(0), (1)\)"}
    for name, pattern in ranges.items():
        low, high = map(float, re.search(pattern, meaning[name]).groups())
        closed = meaning[name][re.search(pattern, meaning[name]).end() - 1] == "]"
        assert not refused(**{name: low}) and refused(**{name: low - 1e-3}), name
        assert refused(**{name: high}) != closed and refused(**{name: high + 1e-3}), name
    least = int(re.search(r"at least (\d+)", meaning["batch_size"]).group(1))
    assert not refused(batch_size=least) and refused(batch_size=least - 1)
    for name in ("batch_size", "top_k"):  # 10**400 was taken by --batch-size and --top-k
        most = int(re.search(r"at most (\d+)", meaning[name]).group(1))
        assert not refused(**{name: most}) and refused(**{name: most + 1}), name
    most = int(re.search(r"at most (\d+)", meaning["distill_aug_copies"]).group(1))
    assert most == MAX_AUG_COPIES and not refused(distill_aug_copies=most) and refused(distill_aug_copies=most + 1)
    plan_rounds = re.search(r"refuses more than that, at most ([\d,]+)", meaning["rounds"]).group(1)
    assert int(plan_rounds.replace(",", "")) == MAX_ROUNDS  # [rounds] makes at most that many plan rounds

    factors = re.search(r"The learning rates \(`\*_lr`\), (.*?) are refused above ([\de]+)", section)
    named = set(re.findall(r"`([a-z_]+)`", factors.group(1)))
    named |= {f.name for f in dataclasses.fields(FOLConfig) if f.name.endswith("_lr")}
    assert named == set(FACTORS) and float(factors.group(2)) == MAX_FACTOR
    counts = re.search(r"The counts (.*?) are refused above ([\d,]+) \(`fol\.defaults\.MAX_ITERATIONS`", section)
    assert set(re.findall(r"`([a-z_]+)`", counts.group(1))) == set(COUNTS)
    assert int(counts.group(2).replace(",", "")) == MAX_ITERATIONS

    default, paper = FOLConfig(), FOLConfig.preset("paper")
    stated = re.search(r"The project default differs from it in (\w+) fields: (.*?)\. ", section)
    pairs = dict(re.findall(r"`([a-z_]+) = ([^`]+)`", stated.group(2)))
    differing = {f.name for f in dataclasses.fields(FOLConfig) if getattr(default, f.name) != getattr(paper, f.name)}
    assert set(pairs) == differing and stated.group(1) == {2: "two", 3: "three", 4: "four"}[len(differing)]
    assert all(_same_default(pairs[name], getattr(default, name)) for name in pairs), pairs
    kept = re.search(r"the preset keeps them on, .*?: (.*?) \(the paper's bare", section).group(1)
    for name, value in re.findall(r"`([a-z_]+) = ([^`]+)`", kept):
        assert _same_default(value, getattr(paper, name)) and _same_default(value, getattr(default, name)), name
    for name, value in re.findall(r"`([a-z_]+)` \| `[^`]+` \| [^|]+ \| [^|]*\(paper preset: ([\d.]+)", section):
        assert _same_default(value, getattr(paper, name)), name


def test_scale_projection_sizes_are_the_codes() -> None:
    """docs/scale.md's estimate of a 1,584-node head (section 4, *What limits it*) multiplies
    sizes the code fixes: a contact plan's bytes per window (the window table's columns and
    the plan's per-window arrays), the size of one cnn-medium and of its payload in the safe
    format. It said 48 bytes and ~316 kB, sizes of an older table and model."""
    import numpy as np

    from contact_sim import ContactPlan, LinkModel, WindowTable
    from fol.checkpoint import ModelCard, model_to_bytes
    from fol.models import ModelSpec, build_model

    text = " ".join((DOCS / "scale.md").read_text(encoding="utf-8").split())
    n = 10
    table = WindowTable(np.zeros(n), np.ones(n), np.arange(n, dtype=float), np.arange(n) + 1.0, np.full(n, 10.0),
                        np.full(n, 20.0), np.zeros(n))
    plan = ContactPlan(["a", "b"], table, LinkModel("constant", 8e6, 10.0), [0.0, 100.0])
    per_window = sum(v.nbytes for obj in (table, plan) for v in vars(obj).values()
                     if isinstance(v, np.ndarray) and v.shape[:1] == (n,)) // n
    stated = re.search(r"contact plan \(9\.5 million windows x (\d+) bytes = ([\d.]+) GB", text)
    assert int(stated.group(1)) == per_window and float(stated.group(2)) == round(9.5e6 * per_window / 1e9, 2)

    spec = ModelSpec("cnn-medium", 2, 3, 32)
    model = build_model(spec, seed=0)
    weights_mb = sum(t.numel() * t.element_size() for t in model.state_dict().values()) / 1e6
    assert re.search(r"about six cnn-medium models of ([\d.]+) MB", text).group(1) == f"{weights_mb:.2f}"
    payload = len(model_to_bytes(model, ModelCard(spec, ["no_damage", "damage"], producer="sat-0001")))
    stated_kb = int(re.search(r"Q payloads of ~(\d+) kB, a cnn-medium", text).group(1))
    assert abs(stated_kb - payload / 1e3) <= 5, payload


def test_scenario_fol_table_gives_the_folconfig_defaults() -> None:
    """docs/scenario.md's ``[fol]`` table states the same defaults as
    ``FOLConfig()`` (a scenario without a key gets exactly that value)."""
    import dataclasses

    from fol.config import FOLConfig

    rows = {name: literal.group(1) for name, (cell, _) in _table_rows("fol").items()
            if (literal := re.fullmatch(r"`([^`]+)`", cell))}
    # ``rounds`` is the one exception: a scenario's default is its plan's round count.
    fields = {f.name: f.default for f in dataclasses.fields(FOLConfig) if f.name != "rounds"}
    assert set(fields) <= set(rows), f"docs/scenario.md [fol]: missing {sorted(set(fields) - set(rows))}"

    wrong = {name: (rows[name], default) for name, default in fields.items() if not _same_default(rows[name], default)}
    assert not wrong, f"docs/scenario.md [fol]: documented vs actual defaults differ: {wrong}"


def _table_rows(table: str) -> dict[str, tuple[str, str]]:
    """``docs/scenario.md``'s rows of ``[table]``: field -> (default cell, meaning cell)."""
    return {name: (default, meaning) for name, (_, default, meaning) in _table_cells(table).items()}


def _table_cells(table: str) -> dict[str, tuple[str, str, str]]:
    """``docs/scenario.md``'s rows of ``[table]``: field -> (type cell, default cell, meaning cell)."""
    text = SCENARIO_MD.read_text(encoding="utf-8")
    heading = re.search(rf"^### `\[\[?{re.escape(table)}\]\]?`", text, re.M)  # [table] or [[table]]
    assert heading, f"docs/scenario.md has no section for [{table}]"
    start = heading.start()
    end = text.find("\n### ", start + 1)
    section = text[start:end if end > 0 else len(text)]
    return {m[0]: (m[1].strip(), m[2].strip(), m[3])
            for m in re.findall(r"^\| `([a-z_0-9]+)` \|([^|]+)\|([^|]+)\|(.*)\|$", section, re.M)}


@pytest.mark.parametrize("table", ["data", "models", "run"])
def test_scenario_learning_tables_state_the_code_defaults(table: str) -> None:
    """Every literal default ``docs/scenario.md`` gives for ``[data]``,
    ``[models]`` and ``[run]`` is the value a scenario without that key gets
    (the dataclass default; ``None`` there means "resolved later", and its
    row says how in words)."""
    import dataclasses

    from fol.simulation.scenario import DataConfig, ModelsConfig, RunConfig

    cls = {"data": DataConfig, "models": ModelsConfig, "run": RunConfig}[table]
    defaults = {f.name: f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
                for f in dataclasses.fields(cls)}
    rows = _table_rows(table)
    checked, wrong = 0, {}
    for name, value in defaults.items():
        if value is None or name not in rows:
            continue
        literal = re.match(r"`([^`]+)`", rows[name][0])
        assert literal, f"docs/scenario.md [{table}] {name}: default {value!r} is not stated"
        stated = tomllib.loads(f"v = {literal.group(1)}")["v"]
        checked += 1
        if stated != value:
            wrong[name] = (stated, value)
    assert checked >= 2 and not wrong, f"docs/scenario.md [{table}]: documented vs actual defaults differ: {wrong}"


def test_scenario_data_and_models_list_every_dataset_and_architecture() -> None:
    from fol.data.registry import dataset_names
    from fol.models import architectures

    missing = [n for n in dataset_names() if f"`{n}`" not in _table_rows("data")["dataset"][1]]
    missing += [a for a in architectures() if f"`{a}`" not in _table_rows("models")["archs"][1]]
    assert not missing, f"docs/scenario.md: list {missing}"


def _stated_defaults(table: str) -> dict[str, Any]:
    """``docs/scenario.md``'s ``[table]`` rows whose default cell starts with a TOML
    literal (```60.0` (`duration_s` when that is shorter)`` states ``60.0``)."""
    stated = {}
    for name, (cell, _) in _table_rows(table).items():
        literal = re.match(r"`([^`]+)`", cell)
        if literal:
            try:
                stated[name] = tomllib.loads(f"v = {literal.group(1)}")["v"]
            except tomllib.TOMLDecodeError:  # a pattern such as `runs/<scenario name>`, not a value
                continue
    return stated


def test_scenario_contact_tables_state_the_code_defaults() -> None:
    """Every literal default ``docs/scenario.md`` gives for a contact table is the
    value a scenario without that key gets from ``contact_sim/scenario.py`` (which
    passes its own defaults to the validator, not the dataclasses'); a row with a
    literal default and no reading here fails too, so a new field gets checked."""
    from fol.simulation.scenario import parse_scenario

    energy = {"battery_wh": 1.0, "solar_w": 1.0, "idle_w": 1.0}
    sats = parse_scenario({**copy.deepcopy(SATELLITES), "ground_stations": [{"lat_deg": 0.0, "lon_deg": 0.0}],
                           "energy": energy}, ROOT).contact
    shannon = parse_scenario({**copy.deepcopy(SATELLITES), "link": {"max_range_km": 5000.0, "model": "shannon"}},
                             ROOT).contact.link
    drones = parse_scenario(copy.deepcopy(DRONES), ROOT).contact.drones
    origin = parse_scenario({"drones": {"missions": ["a.plan"], "radio_range_km": 1.0, "origin_lat_deg": 47.0,
                                        "origin_lon_deg": 8.0}, "time": {"duration_s": 600.0}}, ROOT).contact.drones
    station = sats.ground_stations[0]
    read = {
        "constellation": {"phasing": sats.constellation.phasing},
        "drones": {**{k: getattr(drones, k) for k in ("area_km", "speed_m_s", "altitude_km", "pause_s", "seed")},
                   "origin_alt_m": origin.origin[2]},
        "ground_stations": {"name": station.name.replace("0", "<i>"), "elevation_m": station.elevation_m},
        "time": {"step_s": sats.time.step_s},
        "link": {"model": sats.link.model, "rate_bps": sats.link.rate_bps, "acquisition_s": sats.link.acquisition_s,
                 "grazing_altitude_km": sats.geometry.grazing_altitude_km,
                 "min_elevation_deg": sats.geometry.min_elevation_deg,
                 **{k: getattr(shannon, k) for k in ("tx_power_dbw", "tx_gain_dbi", "rx_gain_dbi", "frequency_hz",
                                                     "bandwidth_hz", "noise_temperature_k", "losses_db")}},
        "energy": {**{k: getattr(sats.energy, k) for k in ("j_per_flop", "j_per_byte", "initial_charge")},
                   "sunlight_step_s": sats.sunlight_step_s},
    }
    wrong, unread = {}, {}
    for table, values in read.items():
        stated = _stated_defaults(table)
        unread.update({f"{table}.{k}": v for k, v in stated.items() if k not in values})
        wrong.update({f"{table}.{k}": (stated.get(k), v) for k, v in values.items() if stated.get(k) != v})
    assert not unread, f"docs/scenario.md states defaults this test does not read from the code: {unread}"
    assert not wrong, f"docs/scenario.md: documented vs actual defaults (documented, code) differ: {wrong}"


def _stated_bounds(type_cell: str) -> list[tuple[float, bool, bool]] | None:
    """The bounds a ``docs/scenario.md`` type cell states, as ``(bound, is_upper, inclusive)``:
    ``number, -1,000..1,000``, ``number, 100-50,000``, ``number, 0..90, 90 excluded``, ``number, 0 < r <= 1,000``,
    ``number, > 0 and <= 1e15``, ``number, 0 < width < 20015.08...``, ``number in [0, 1)``,
    ``integer 1-10,000``, ``integer in 0..4294967295``, ``number > 0``, ``integer >= 1``; None for
    a cell that states none (``number``, ``list of numbers``, ``integer >= `min_samples` ``, ...)."""
    num = r"-?[\d,]*\.?\d+(?:e\d+)?"
    value = lambda text: float(text.replace(",", ""))  # noqa: E731
    cell = type_cell.strip()
    if m := re.fullmatch(rf"(?:number|integer)(?:,| in)? ({num})(?:\.\.|-)({num})(?:, ({num}) excluded| and <= `\w+`)?",
                         cell):
        return [(value(m[1]), False, m[3] != m[1]), (value(m[2]), True, m[3] != m[2])]
    if m := re.fullmatch(rf"number, 0 < \w+ < ({num}) .*", cell):
        return [(0.0, False, False), (value(m[1]), True, False)]
    if m := re.fullmatch(rf"number, (?:0 < \w+ <=|> 0 and <=) ({num})", cell):
        return [(0.0, False, False), (value(m[1]), True, True)]
    if m := re.fullmatch(r"number in \[0, 1([\])])", cell):
        return [(0.0, False, True), (1.0, True, m[1] == "]")]
    if m := re.fullmatch(rf"(?:number|integer) (>=?) ({num})", cell):
        return [(value(m[2]), False, m[1] == ">=")]
    return None


def test_scenario_tables_state_the_code_bounds() -> None:
    """Every range a table's type cell in ``docs/scenario.md`` states is the
    validators': a stated bound itself is accepted when inclusive and refused
    when not, a value just past it is refused, and one just inside accepted."""
    from contact_sim.errors import ContactError
    from fol.errors import FOLError
    from fol.simulation.scenario import parse_scenario

    energy = {"battery_wh": 1.0, "solar_w": 1.0, "idle_w": 1.0}
    missions = {"missions": ["a.plan"], "radio_range_km": 1.0, "origin_lat_deg": 47.0, "origin_lon_deg": 8.0}
    # what a field needs beside it (a table replaced or merged into the minimal scenario)
    context: dict[str, dict[str, Any]] = {
        "constellation.total": {"constellation": {"planes": 1}},
        "drones.origin_lat_deg": {"drones": missions}, "drones.origin_lon_deg": {"drones": missions},
        "drones.origin_alt_m": {"drones": missions},
        **{f"link.{k}": {"link": {"model": "shannon"}} for k in ("tx_power_dbw", "tx_gain_dbi", "rx_gain_dbi",
                                                                "noise_temperature_k", "losses_db")},
        "link.frequency_hz": {"link": {"model": "shannon", "bandwidth_hz": 1.0}},
        "link.bandwidth_hz": {"link": {"model": "shannon", "frequency_hz": 1e16}},
        **{f"energy.{k}": {"energy": energy} for k in (*energy, "j_per_flop", "j_per_byte", "initial_charge",
                                                        "sunlight_step_s")},
        "data.image_size": {"data": {"size": 100}},  # a default pool of 1024-pixel images is refused (8 GiB)
        "data.acquisition_s": {"data": {"partition": "orbit"}}, "data.swath_km": {"data": {"partition": "orbit"}},
        "data.scale": {"data": {"dataset": "imagefolder", "path": "imgs", "bands": [4, 3, 2]}},  # with bands only
        "fol.rounds": {"rounds": {"count": 10_000}},  # at most the plan's rounds
    }
    # just inside an open lower bound of 0 (1e-3; an integer's 1), where 1e-3 would make too many samples or rounds
    inside = {"rounds.duration_s": 3600.0, "energy.sunlight_step_s": 1.0}

    def accepted(table: str, key: str, value: float) -> bool:
        doc = copy.deepcopy(DRONES if table == "drones" else SATELLITES)
        for name, values in context.get(f"{table}.{key}", {}).items():
            doc[name] = {**values} if name == "drones" else {**doc.get(name, {}), **values}
        if table == "ground_stations":
            doc[table] = [{"lat_deg": 0.0, "lon_deg": 0.0, key: value}]
        else:
            doc.setdefault(table, {})[key] = value
        try:
            parse_scenario(doc, ROOT)
        except (ContactError, FOLError):
            return False
        return True

    probed, wrong = 0, []
    for table in (*TABLES, "methods"):
        for key, (type_cell, _, _) in _table_cells(table).items():
            for bound, upper, inclusive in _stated_bounds(type_cell) or ():
                integer = type_cell.startswith("integer")
                step = 1 if integer else max(abs(bound) * 1e-6, 1e-6)
                past, within = (bound + step, bound - step) if upper else (bound - step, bound + step)
                if not upper and bound == 0 and not inclusive:
                    within = inside.get(f"{table}.{key}", 1 if integer else 1e-3)
                cast = int if integer else float
                for value, expected in ((bound, inclusive), (past, False), (within, True)):
                    if accepted(table, key, cast(value)) != expected:
                        wrong.append(f"[{table}] {key} = {cast(value)!r} {'refused' if expected else 'accepted'}"
                                     f" (stated: {type_cell})")
                probed += 1
    assert not wrong, f"docs/scenario.md states other bounds than the validators: {wrong}"
    assert probed >= 100


def test_scenario_and_methods_tables_state_the_code_defaults() -> None:
    """``[scenario]`` seeds / seed and ``[methods]`` run: the literal defaults
    ``docs/scenario.md`` states are what a scenario without them runs."""
    from fol.simulation.scenario import parse_scenario

    scn = parse_scenario(copy.deepcopy(DRONES), ROOT)
    stated = {**{f"scenario.{k}": v for k, v in _stated_defaults("scenario").items()},
              **{f"methods.{k}": v for k, v in _stated_defaults("methods").items()}}
    assert stated == {"scenario.seeds": scn.seeds, "scenario.seed": scn.seeds[0], "methods.run": scn.methods}, (
        f"docs/scenario.md: documented {stated}, code: seeds {scn.seeds}, methods {scn.methods}")


def test_scenario_data_size_and_image_size_defaults_are_the_loaders() -> None:
    """``[data] size`` and ``image_size`` are ``None`` in :class:`DataConfig` (left to
    the loaders), so the dataclass comparison skips them; the defaults the page
    states are the synthetic pool's size and the loaders' image side."""
    from fol.data.registry import SYNTHETIC_DEFAULT_SIZE
    from fol.simulation.scenario import DataConfig

    stated = _stated_defaults("data")
    assert (stated["size"], stated["image_size"]) == (SYNTHETIC_DEFAULT_SIZE, DataConfig().side_px)


FORMATS_MD = DOCS / "formats.md"


def test_formats_omm_example_reads_and_its_quoted_errors_are_the_readers() -> None:
    """``docs/formats.md``'s KVN message reads as the six-digit satellite it shows, and the
    three error lines it quotes are what the readers say of that record made bad: 'fast' as the
    fourth JSON record's mean motion, a CSV without INCLINATION, 'fast' in the KVN example itself."""
    import csv
    import io
    import json

    from orbits import OrbitError
    from orbits.omm import format_omm, parse_omm_text

    text = FORMATS_MD.read_text()
    kvn = re.search(r"```\n(CCSDS_OMM_VERS = .*?)```", text, re.S).group(1)
    sat = parse_omm_text(kvn, "kvn", "gp.kvn")
    assert sat.catalog_numbers == [412345] and sat.names == ["NEWSAT 1"]
    quoted = dict(re.findall(r"^error: (gp\.\w+)(.*)$", text, re.M))
    assert set(quoted) == {"gp.json", "gp.csv", "gp.kvn"}

    record = json.loads(format_omm(sat, "json"))[0]
    records = [{**record, "NORAD_CAT_ID": 412345 + i, "OBJECT_NAME": f"NEWSAT {i + 1}"} for i in range(4)]
    records[3]["MEAN_MOTION"] = "fast"
    rows = list(csv.DictReader(io.StringIO(format_omm(sat, "csv"))))
    no_inclination = io.StringIO()
    writer = csv.DictWriter(no_inclination, [k for k in rows[0] if k != "INCLINATION"], extrasaction="ignore")
    writer.writeheader()
    writer.writerows(rows)
    bad = {"gp.json": (json.dumps(records), "json"), "gp.csv": (no_inclination.getvalue(), "csv"),
           "gp.kvn": (re.sub(r"(?m)^MEAN_MOTION = \S+", "MEAN_MOTION = fast", kvn), "kvn")}
    for name, (body, fmt) in bad.items():
        with pytest.raises(OrbitError) as info:
            parse_omm_text(body, fmt, name)
        assert str(info.value) == name + quoted[name], f"docs/formats.md quotes {name}{quoted[name]}"


def test_formats_page_states_the_code_limits() -> None:
    """Every file limit, bound and rounding step ``docs/formats.md`` states (file sizes in MiB,
    2**20 bytes) is the constant the code uses: read from the page, compared with the code, so
    neither drifts alone. A sentence reworded so that its value is no longer found fails too."""
    import datetime as dt
    import inspect

    from contact_sim import dtn, missions
    from fol.agent import position
    from orbits import omm, sunlight
    from orbits.constants import SGP4_MAX_SATNUM

    text = " ".join(FORMATS_MD.read_text().split())
    number = lambda s: float(s.replace(",", ""))  # noqa: E731

    def stated(pattern: str, count: int = 1) -> list[tuple[str, ...]]:
        found = [m if isinstance(m, tuple) else (m,) for m in re.findall(pattern, text)]
        assert len(found) == count, f"docs/formats.md: expected {count} match(es) of {pattern!r}, found {found}"
        return found

    def day(value: str) -> dt.datetime:
        return dt.datetime.fromisoformat(value).replace(tzinfo=dt.timezone.utc)

    (omm_mib,), = stated(r"Files over (\d+) MiB are refused unread")
    mission_mib = {m for (m,) in stated(r"a file over (\d+) MiB \(checked before reading\)", 2)}
    (alpha5_from, alpha5_to), = stated(r"Alpha-5 for (\d+)\.\.(\d+)")
    (ion_rate,), = stated(r"faster than ([\d,]+) bytes/s")
    (ion_span,), = stated(r"between the plan start and (1e\d+) s")
    (plan_int_exp,), = stated(r"integers of at most 1e(\d+)")
    (hdtn_rate_exp,), = stated(r"at most 2\^(\d+) - 1, HDTN's 64-bit")
    (hdtn_time_exp,), = stated(r"ending after 2\^(\d+) - 1 s")
    (ion_node_exp, hdtn_node_exp), = stated(r"Node numbers are integers of 1 to 2\^(\d+) - 1 \(ION's `uvast`; a larger "
                                            r"one is an error naming the line; an HDTN plan's are of 1 to 2\^(\d+) - 1")
    (unix_from,), = stated(r"every `startTime` after (\d{4}-\d\d-\d\d)")
    (grid_s, tol_s), = stated(r"`is_sunlit` on a (\d+) s grid, each change refined by bisection to ([\d.]+) s")
    (span_from, span_to), = stated(r"horizon leaves (\d{4}-\d\d-\d\d)\.\.(\d{4}-\d\d-\d\d) is refused")
    spacings = set(stated(r"a spacing under ([\d.]+) m counts as (\d+) km", 2))
    (radius_km,), = stated(r"sphere of radius ([\d.]+) km")
    (speed_lo, speed_hi), = stated(r"a speed outside ([\d.]+)\.\.([\d,]+) m/s")
    (hold_days,), = stated(r"a hold outside 0\.\.(\d+) days")
    local_km = {k for (k,) in stated(r"a point more than ([\d,]+) km east, west, north or south of the origin", 2)}
    (baud,), = stated(r"\(`baud`, default (\d+)\)")
    (nmea_line,), = stated(r"garbage or over (\d+) bytes are skipped")
    (retry_s,), = stated(r"tries again every ([\d.]+) s")
    sweep = inspect.signature(sunlight.eclipse_intervals).parameters

    stated_vs_code = {
        "OMM file limit (bytes)": (int(omm_mib) * 2**20, omm.MAX_OMM_BYTES),
        "mission / track file limit (bytes)": ({int(m) * 2**20 for m in mission_mib}, {missions.MAX_MISSION_BYTES}),
        "Alpha-5 catalog numbers": ((int(alpha5_from), int(alpha5_to)), (100000, SGP4_MAX_SATNUM)),
        "ION rate limit (bytes/s)": (int(number(ion_rate)), dtn.ION_MAX_RATE_BYTES_S),
        "ION / HDTN latest time (s)": (float(ion_span), dtn.MAX_ION_OFFSET_S),
        "plan integers": (10 ** int(plan_int_exp), dtn.MAX_PLAN_INT),
        "HDTN rate limit (bit/s)": (2 ** int(hdtn_rate_exp) - 1, dtn.HDTN_MAX_RATE_BPS),
        "HDTN latest time (s)": (2 ** int(hdtn_time_exp) - 1, dtn.HDTN_MAX_TIME_S),
        "ION / HDTN largest node number": ((2 ** int(ion_node_exp) - 1, 2 ** int(hdtn_node_exp) - 1),
                                           (dtn.MAX_NODE_NUMBER, dtn.HDTN_MAX_NODE_NUMBER)),
        "HDTN Unix times from": (day(unix_from).timestamp(), dtn.HDTN_UNIX_FROM_S),
        "eclipse grid and bisection (s)": ((float(grid_s), float(tol_s)),
                                          (sweep["step_s"].default, sweep["tol_s"].default)),
        "DE421 horizon": ((day(span_from), day(span_to)), sunlight.EPHEMERIS_SPAN),
        "QGroundControl spacing guard (m)": ({(float(a), float(b) * 1000) for a, b in spacings},
                                             {(0.5, missions._qgc_spacing(0.4999))}),
        "spacing kept from (m)": (0.5, missions._qgc_spacing(0.5)),
        "QGroundControl sphere (m)": (float(radius_km) * 1000, missions.QT_EARTH_RADIUS_M),
        "mission speed (m/s)": ((float(speed_lo), number(speed_hi)),
                                (missions.MIN_SPEED_M_S, missions.MAX_SPEED_M_S)),
        "mission hold (s)": (int(hold_days) * 86400.0, missions.MAX_HOLD_S),
        "drone frame (km)": ({number(k) for k in local_km}, {missions.MAX_LOCAL_KM}),
        "NMEA serial baud": (int(baud), position.PositionConfig(connection="/dev/ttyUSB0", source="nmea").baud),
        "NMEA line (bytes)": (int(nmea_line), position.NMEA_MAX_LINE),
        "NMEA link retry (s)": (float(retry_s), position.RETRY_S),
    }
    wrong = {k: v for k, v in stated_vs_code.items() if v[0] != v[1]}
    assert not wrong, f"docs/formats.md: stated vs code values differ: {wrong}"


def _security_text() -> str:
    """``docs/security.md`` with every run of white space made one space."""
    return " ".join((DOCS / "security.md").read_text().split())


def test_security_page_states_the_node_id_rule() -> None:
    """The node ids docs/security.md describes (the names of inbox files it registers) are those
    ``fol.agent.protocol.check_name`` takes: a leading '.', '_' or '-' is refused, so the page says so."""
    from fol.agent.protocol import ProtocolError, check_name

    assert "node id (1-64 letters, digits, `.`, `_`, `-`, starting with a letter or digit," in _security_text()
    assert check_name("a" * 63 + "-") and check_name("9._-x")
    for name in (".x", "_x", "-x", "a" * 65, ""):
        with pytest.raises(ProtocolError):
            check_name(name)


def _n(value: float) -> str:
    """A number as the pages write it: ``4,096``, ``86,400``."""
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:g}"


def test_security_page_states_the_loader_and_protocol_limits() -> None:
    """Every limit ``docs/security.md`` gives for the model loader, the protocol
    headers, the transfer sweeps and the key files is the code's constant."""
    from fol import checkpoint as C
    from fol.agent import protocol as P
    from fol.agent.inbox import STRAY_AGE_S
    from fol.agent.keys import MAX_CERTIFICATE_BYTES
    from fol.agent.transfer import Receiver

    text = _security_text()
    spec = C.SPEC_LIMITS
    options = ", ".join(f"`{k}` ≤ {_n(top)}" if n == 1 else f"`{k}` ≤ {n} entries of ≤ {_n(top)}"
                        for k, (top, n) in spec["options"].items())
    stated = [
        f"`max_bytes`, default {C.DEFAULT_MAX_BYTES // 10**6} MB",
        f"| {C.MAX_HEADER_BYTES // 2**20} MiB; 3 levels; {_n(C.MAX_TENSORS)} tensors |",
        f"| {_n(C.MAX_CARD_BYTES)} characters ({C.MAX_CARD_BYTES // 1024} KiB of ASCII); {C.MAX_CARD_DEPTH} levels; "
        f"{_n(C.MAX_CARD_ITEMS)} values; a round of at most {_n(C.MAX_ROUND)} (an OFFER's bound) |",
        f"| `num_classes` ≤ {_n(spec['num_classes'])}, `in_channels` ≤ {_n(spec['in_channels'])}, "
        f"`input_size` ≤ {_n(spec['input_size'])}, {options} |",
        f"the file's tensor count + {C._BUILD_SLACK} tensors",
        f"JSON objects of at most {P.MAX_HEADER_BYTES // 1024} KiB, {P.MAX_HEADER_DEPTH} levels deep and "
        f"{_n(P.MAX_HEADER_ITEMS)} values",
        f"the `spec` of an OFFER at most {P.MAX_SPEC_DEPTH} levels and {P.MAX_SPEC_ITEMS} values",
        f"integer fields at most 2^{(P.MAX_HEADER_INT + 1).bit_length() - 1} − 1",
        f"an OFFER's round at most {_n(P.MAX_ROUND)}",
        f"{P.MAX_CONTROL_REPLY_BYTES // 2**20} MiB and {_n(P.MAX_CONTROL_REPLY_ITEMS)} values",
        f"the newest {_n(Receiver.MAX_REMEMBERED)} peer-id and peer-digest entries",
        f"At start and every {Receiver.SWEEP_INTERVAL_S:g} s",
        f"incomplete or stray files older than {'a minute' if STRAY_AGE_S == 60 else STRAY_AGE_S}",
        f"is larger than {MAX_CERTIFICATE_BYTES // 1024} KiB, is refused unread",
    ]
    assert P.MAX_HEADER_INT == 2**63 - 1
    missing = [s for s in stated if s not in text]
    assert not missing, f"docs/security.md no longer states the code's limits: {missing}"


def test_security_page_states_the_agent_defaults_and_bounds() -> None:
    """The ``[limits]`` block of ``docs/security.md`` holds the defaults of
    :class:`fol.agent.config.Limits`, the defaults named in the text are those,
    and every upper bound the text gives for a ``[limits]`` or ``[trigger]``
    number is the one the config checks (``LIMITS_MAXIMA``, ``TRIGGER_MAXIMA``),
    each field named once."""
    from dataclasses import asdict

    from fol.agent.config import LIMITS_MAXIMA, TRIGGER_MAXIMA, Limits

    page = (DOCS / "security.md").read_text()
    block = re.search(r"```toml\n(\[limits\]\n.*?)```", page, re.S)
    assert block, "docs/security.md: no [limits] example"
    defaults = asdict(Limits())
    example = tomllib.loads(block.group(1))["limits"]
    assert example == {k: defaults[k] for k in example}, "the [limits] example is not the defaults"
    text = _security_text()
    for phrase in (f"`reject_memory_s` (default {defaults['reject_memory_s'] / 3600:g} h",
                   f"`max_inbox_bytes` of received models (default {defaults['max_inbox_bytes'] // 10**9} GB)",
                   f"`partial_max_age_s` (default {defaults['partial_max_age_s'] / 3600:g} h)",
                   f"`partial_max_bytes` (default {defaults['partial_max_bytes'] // 10**9} GB)",
                   f"`round_retry_s` (default {defaults['round_retry_s']:g} s)",
                   f"`round_retry_max_s` (default {defaults['round_retry_max_s'] / 60:g} min)"):
        assert phrase in text, f"docs/security.md: expected {phrase!r} (the code's default)"
    bounds: dict[str, float] = {}
    for names, value in re.findall(r"((?:`[a-z_]+`(?:, | and ))*`[a-z_]+`) (?:is )?at most ([0-9][0-9,]*)", text):
        for name in re.findall(r"`([a-z_]+)`", names):
            assert name not in bounds, f"docs/security.md states the bound of {name} twice"
            bounds[name] = float(value.replace(",", ""))
    for name, low, high in re.findall(r"`([a-z_]+)` (?:is an integer|a number) from ([0-9]+)[^`]*? to ([0-9][0-9,]*)",
                                      text):
        bounds[name] = float(high.replace(",", ""))
    assert bounds == {k: float(v) for k, v in {**LIMITS_MAXIMA, **TRIGGER_MAXIMA}.items()}, (
        "docs/security.md states other [limits] / [trigger] bounds than the config checks")


# --------------------------------------------------------------------- the README's commands

README = ROOT / "README.md"


def _readme_code(inline: bool = True) -> list[str]:
    """The lines of the README's fenced code blocks (continuation lines joined) and, with
    ``inline``, its inline code spans (a span that wraps a line made one line again)."""
    text = README.read_text(encoding="utf-8")
    blocks = [re.sub(r"\\\n\s*", " ", b) for b in re.findall(r"```[a-z]*\n(.*?)```", text, re.S)]
    prose = re.sub(r"```[a-z]*\n.*?```", "", text, flags=re.S)
    spans = [" ".join(s.split()) for s in re.findall(r"`([^`]+)`", prose)] if inline else []
    return [line for block in blocks for line in block.splitlines()] + spans


def _shell_words(command: str) -> list[str]:
    """A README command's words with its placeholders filled in: ``<task>``, ``<seed>``,
    ``$s``, ``distill_epochs=N`` and the first member of a ``{a,b}`` brace expansion."""
    import shlex

    command = command.split(" #")[0].split(";")[0]
    command = command.replace("<task>", "hurricane").replace("<seed>", "6").replace("$s", "0")
    command = command.replace("distill_epochs=N", "distill_epochs=30")
    command = re.sub(r"\{([^,{}]*),?[^{}]*\}", r"\1", command)
    return shlex.split(command)


def readme_fol_commands() -> list[list[str]]:
    """Every ``fol ...`` command of the README's code blocks (not of its prose, which names
    sub-commands and options alone), as argument lists: the parts of ``a && b``, each
    alternative of ``... status | personalize | send drone-2``, an optional
    ``[--preset paper]`` given."""
    commands = []
    for line in _readme_code(inline=False):
        for part in line.split(" #")[0].split("&&"):
            part = part.strip()
            part = re.sub(r"^(\w+=\S+ )*(\.venv/bin/)?", "", part)
            if not part.startswith("fol "):
                continue
            first, *alternatives = [p.strip() for p in part.split(" | ")]
            words = _shell_words(first.replace("[", "").replace("]", ""))
            commands.append(words[1:])
            for alternative in alternatives:  # replaces the last word of the first form
                commands.append(words[1:-1] + _shell_words(alternative))
    return commands


def readme_benchmark_commands() -> list[tuple[str, list[str]]]:
    """Every ``python benchmarks/<script>.py ...`` command of the README (code blocks,
    table cells and inline spans): ``(script, arguments)``."""
    found = []
    for line in _readme_code():
        for m in re.finditer(r"python3? benchmarks/(\w+)\.py([^|`&]*)", line):
            found.append((m.group(1), _shell_words(m.group(2))))
    return found


class _Parsed(Exception):
    """Raised by the patched ``parse_args`` once the arguments are parsed: nothing runs."""


def _parses(monkeypatch: pytest.MonkeyPatch, main, argv: list[str], prog: str) -> str | None:
    """``None`` if ``main`` parses ``argv`` (and is stopped right there), else argparse's message."""
    import argparse
    import contextlib
    import inspect
    import io

    original, init = argparse.ArgumentParser.parse_args, argparse.ArgumentParser.__init__

    def parse_only(self, args=None, namespace=None):
        original(self, args, namespace)
        raise _Parsed

    def exact(self, *args, **kwargs):  # a flag the code renamed must not pass as an abbreviation
        init(self, *args, **{**kwargs, "allow_abbrev": False})

    err = io.StringIO()
    with monkeypatch.context() as m:
        m.setattr(argparse.ArgumentParser, "parse_args", parse_only)
        m.setattr(argparse.ArgumentParser, "__init__", exact)
        m.setattr(sys, "argv", [prog, *argv])
        try:
            with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
                main(argv) if inspect.signature(main).parameters else main()
        except _Parsed:
            return None
        except SystemExit as exc:
            if exc.code == 0:  # --help
                return None
            return err.getvalue().strip().splitlines()[-1] if err.getvalue().strip() else "exit"
    return "ran without parsing any argument"


def test_readme_fol_commands_exist_with_their_arguments(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every ``fol`` command line of the README names a sub-command and options that
    ``fol`` has (parsed by ``fol``'s own parser; nothing runs)."""
    from fol.cli import build_parser

    commands = readme_fol_commands()
    names = {c[0] for c in commands if c}
    assert {"demo", "simulate", "contacts", "data", "pretrain", "personalize", "model", "keys", "agent"} <= names
    main = lambda argv: build_parser().parse_args(argv)  # noqa: E731
    wrong = {" ".join(c): why for c in commands if (why := _parses(monkeypatch, main, c, "fol"))}
    assert not wrong, f"README.md: these fol commands do not parse: {wrong}"
    assert _parses(monkeypatch, main, ["simulate", "--no-such-flag", "x.toml"], "fol")  # the check can fail
    # a node's --data spec (key=value pairs) is read by the spec's own parser too
    from fol.nodedata import parse_node_data

    specs = [c[c.index("--data") + 1] for c in commands if "--data" in c]
    assert specs and all(parse_node_data(s).dataset for s in specs)


def test_readme_benchmark_commands_exist_with_their_flags(monkeypatch: pytest.MonkeyPatch, benchmark_script) -> None:
    """Every ``python benchmarks/X.py ...`` command of the README, measured figures' commands
    included, names a script of ``benchmarks/`` and flags it has (parsed by the script's own
    parser, which is stopped before any work)."""
    commands = readme_benchmark_commands()
    scripts = {s for s, _ in commands}
    assert len(commands) >= 5 and {"paper_tables", "contacts_scale", "hostile_models"} <= scripts
    missing = sorted(s for s in scripts if not (ROOT / "benchmarks" / f"{s}.py").is_file())
    assert not missing, f"README.md runs benchmark scripts that do not exist: {missing}"
    modules = {s: benchmark_script(s) for s in scripts}
    wrong = {}
    for script, argv in commands:
        if argv or "argparse" in vars(modules[script]):
            if why := _parses(monkeypatch, modules[script].main, argv, f"{script}.py"):
                wrong[f"{script}.py {' '.join(argv)}"] = why
    assert not wrong, f"README.md: these benchmark commands do not parse: {wrong}"
    assert _parses(monkeypatch, modules["paper_tables"].main, ["--no-such-flag"], "paper_tables.py")


def test_readme_setup_test_command_is_what_ci_runs() -> None:
    """``.ci/run`` runs the README's set-up command 2 (install with the dev extra, run the
    tests), as the README says: each step of that command is a line of the script
    (``pip``'s ``-q`` aside)."""
    text = README.read_text(encoding="utf-8")
    setup = text[text.index("## Set-up"):text.index("## Using it")]
    command = re.search(r"^# 2\..*\n(.*)$", setup, re.M).group(1)
    steps = [s.strip() for s in command.split("&&")]
    assert len(steps) == 3 and '-e ".[dev]"' in steps[1] and "pytest" in steps[2]
    assert "`.ci/run` runs command 2" in setup
    ci = [line.replace(" -q ", " ", 1) if "pip install" in line else line
          for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    absent = [s for s in steps if not any(s in line for line in ci)]
    assert not absent, f".ci/run no longer runs these steps of the README's command 2: {absent}"


def test_readme_architecture_table_names_real_paths_and_the_zoo() -> None:
    """The README's architecture table: every path it names exists, the model zoo it
    lists is :func:`fol.models.architectures` and the default it states is
    ``DEFAULT_ARCH``."""
    from fol.defaults import DEFAULT_ARCH
    from fol.models import architectures

    text = README.read_text(encoding="utf-8")
    table = text[text.index("| path | holds |"):text.index("## FOL as implemented here")]
    paths = [p for cell in re.findall(r"^\| ([^|]+) \|", table, re.M) for p in re.findall(r"`([^`]+)`", cell)]
    assert len(paths) >= 20
    missing = [p for p in paths if not (ROOT / p).exists()]
    assert not missing, f"README.md's architecture table names paths that do not exist: {missing}"
    zoo = re.search(r"the model zoo built from a `ModelSpec`: (.*?);", table).group(1)
    listed = set()
    for name in re.findall(r"`([a-z0-9_/-]+)`", zoo):
        stem, _, sizes = name.partition("-")
        listed |= {f"{stem}-{s}" for s in sizes.split("/")} if "/" in sizes else {name}
    assert listed == set(architectures()), (
        f"README.md lists the zoo {sorted(listed)}, the code has {architectures()}")
    assert f'`DEFAULT_ARCH = "{DEFAULT_ARCH}"`' in table


def test_readme_documentation_table_lists_every_page() -> None:
    """The README's documentation table links every page of ``docs/`` (but its index), once."""
    text = README.read_text(encoding="utf-8")
    table = text[text.index("## Documentation"):text.index("## Architecture")]
    linked = re.findall(r"\[docs/([\w.-]+\.md)\]\(docs/\1\)", table)
    pages = sorted(p.name for p in DOCS.glob("*.md") if p.name != "README.md")
    assert sorted(linked) == pages, f"README.md's documentation table: linked {sorted(linked)}, docs/ has {pages}"


def test_readme_demo_paragraph_is_the_demo_scenario() -> None:
    """What the README says ``fol demo`` runs is the embedded scenario: the shell, the
    horizon, the model, one exchange, the methods (and the rows of its quoted table), the
    output folder."""
    from importlib import resources

    from fol.defaults import DEFAULT_ARCH
    from fol.simulation.cli import DEMO_OUT, DEMO_SCENARIO

    demo = tomllib.loads(resources.files("fol.simulation").joinpath(DEMO_SCENARIO).read_text())
    c, methods = demo["constellation"], demo["methods"]["run"]
    text = " ".join(README.read_text(encoding="utf-8").split())
    section = text[text.index("`fol demo` simulates"):text.index("## Using it")]
    shell = (f"a {c['total']}-satellite Walker-delta shell ({c['altitude_km']:g} km, {c['inclination_deg']:g}°) "
             f"for {demo['time']['duration_s'] / 3600:g} hours")
    assert c["kind"] == "walker-delta" and shell in section, f"README.md: expected {shell!r}"
    assert "archs" not in demo.get("models", {}) and f"the default CNN (`{DEFAULT_ARCH}`)" in section
    assert demo["rounds"]["count"] == 1 and "exchanges models once" in section
    assert demo["data"]["dataset"] == "synthetic-hurricane" and demo["data"]["partition"] == "orbit"
    assert f"writes `{DEMO_OUT}/report.md` (or `{DEMO_OUT}-2`" in section
    variants = ["fol", "fol-a", "fol-n", "fol-an"]
    assert methods == ["local", *variants, "fedavg"] and "(local, the four FOL variants, one FedAvg round)" in section
    rows = re.findall(r"\| (\S+) \| [\d.]+ \| [^|]+ \| [\d.]+ \| \d+ \| \d+ of \d+ node runs \|", section)
    assert rows == methods, f"README.md's demo table has the rows {rows}, the demo runs {methods}"


def test_readme_baselines_table_lists_every_method() -> None:
    """The README's baselines table names every registered method but local and the FOL
    variants, and the variants paragraph names those."""
    from fol.methods import method_names

    text = README.read_text(encoding="utf-8")
    table = text[text.index("| method | what it does here (defaults) |"):text.index("A new multi-round method")]
    listed = {m for cell in re.findall(r"^\| ([^|]+) \|", table, re.M) for m in re.findall(r"`([a-z+-]+)`", cell)}
    fol_rows = {"local", "fol", "fol-a", "fol-n", "fol-an"}
    assert listed == set(method_names()) - fol_rows, (
        f"README.md's baselines table: missing {sorted(set(method_names()) - fol_rows - listed)}, "
        f"stale {sorted(listed - set(method_names()))}")
    variants = text[text.index("Variants: `fol`"):text.index("Presets: `paper`")]
    assert set(re.findall(r"`([a-z-]+)`", variants)) == fol_rows


def test_readme_baselines_table_states_the_defaults() -> None:
    """The defaults the README's baselines table gives are the methods' own."""
    from fol.methods import get_method
    from fol.methods.dense import BUDGETS, budget_share, generator_samples

    text = " ".join(README.read_text(encoding="utf-8").split())
    fedavg, hermes, dense = get_method("fedavg"), get_method("hermes"), get_method("dense")
    stated = [
        f"sampled clients (`fraction`), {fedavg.local_epochs} local epochs",
        f"until `r_target` = {hermes.target:g} of them is **{hermes.target_share}**",
        f'`budget = "{dense.budget}"` (default: {generator_samples(BUDGETS[dense.budget]):,} generator samples, '
        f"1/{round(1 / budget_share('dense', dense.budget))} of DENSE's published budget and "
        f"1/{round(1 / budget_share('co-boosting', dense.budget))} of Co-Boosting's",
        '`"small"`, `"medium"` or `"paper"`',
    ]
    assert list(BUDGETS) == ["tiny", "small", "medium"]
    missing = [s for s in stated if s not in text]
    assert not missing, f"README.md's baselines table no longer states the code's defaults: {missing}"


def test_readme_fol_section_states_the_code_settings() -> None:
    """The settings the README's "FOL as implemented here" section gives (the node split,
    pretraining, the default's and the ``paper`` preset's fit and distillation, fine-tuning)
    are ``DEFAULT_SPLIT``, ``FOLConfig()`` and ``FOLConfig.preset("paper")``, and the
    options it names by field are fields."""
    from fol.config import FOLConfig
    from fol.data import DEFAULT_SPLIT

    text = " ".join(README.read_text(encoding="utf-8").split())
    section = text[text.index("## FOL as implemented here"):text.index("## The swarm simulation")]
    d = FOLConfig()
    p = FOLConfig.preset("paper")
    split = " / ".join(f"{100 * f:g}" for f in DEFAULT_SPLIT)
    stated = [
        f"local data split {split} (train / val / test",
        f"Pretraining: SGD, momentum {d.momentum:g}, weight decay {d.weight_decay:.0e}".replace("e-0", "e-")
        + f", batch {d.batch_size}, lr {d.pretrain_lr:g}, early stopping with patience {d.patience} on D_val",
        f"{d.distill_epochs} epochs at T = {d.temperature:g} on a fresh augmented view of D_train",
        f"The `paper` preset fits on D_{p.ensemble_fit} and distils on D_{p.distill_inputs} only, "
        f"{p.distill_epochs} epochs at T = {p.temperature:g}",
        f"Both fine-tune neighbours at lr {d.finetune_lr:g} with nothing frozen",
    ]
    missing = [s for s in stated if s not in section]
    assert not missing, f"README.md, FOL as implemented here: no longer states {missing}"
    assert (d.ensemble_fit, d.distill_inputs, d.distill_mix) == ("val", "function-matching", "cutmix")
    assert "the ensemble weights are fitted on D_val instead of D_train" in section and "cutmix" in section
    assert (p.finetune_lr, p.finetune_freeze, d.finetune_freeze) == (d.finetune_lr, 0, 0)
    options = set(re.findall(r"\(`([a-z_]+)`[^)]*\)", section)) | set(re.findall(r"`([a-z_]+) = ", section))
    unknown = options - {f for f in FOLConfig.__dataclass_fields__}
    assert options and not unknown, f"README.md names FOLConfig fields that do not exist: {sorted(unknown)}"


def test_readme_extras_python_and_pins_are_the_projects() -> None:
    """The extras the README installs or names exist, its Python version is the package's,
    and the constraints file pins what the README says it pins (torch with torchvision, Ray)."""
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    text = README.read_text(encoding="utf-8")
    named = {e for group in re.findall(r'-e "\.\[([a-z,]+)\]"', text) for e in group.split(",")}
    named |= set(re.findall(r"extra `([a-z]+)`", text))
    assert {"dev", "energy", "mavlink", "ray", "nmea"} <= named
    unknown = sorted(named - set(meta["optional-dependencies"]))
    assert not unknown, f"README.md names extras that pyproject.toml does not have: {unknown}"
    assert f"Python {meta['requires-python']}" in text.replace("Python >= ", "Python >=")
    pins = {line.split("==")[0] for line in (ROOT / "constraints.txt").read_text().splitlines()
            if "==" in line and not line.startswith("#")}
    assert {"torch", "torchvision", "ray"} <= pins
    assert "the constraints file pins the torch / torchvision pair" in " ".join(text.split())
    assert "the constraints file pins the Ray release the tests ran on" in " ".join(text.split())


# ------------------------------------------------- docs/evaluation.md, protocol.md, baselines.md

EVALUATION = DOCS / "evaluation.md"


def _script_defaults(monkeypatch: pytest.MonkeyPatch, main, argv: tuple[str, ...] = ()) -> Any:
    """The namespace a benchmark script's own parser gives for ``argv`` (its defaults for
    none); the script is stopped right there, nothing runs."""
    import argparse

    original = argparse.ArgumentParser.parse_args
    got = []

    def parse_only(self, args=None, namespace=None):
        got.append(original(self, args, namespace))
        raise _Parsed

    with monkeypatch.context() as m, pytest.raises(_Parsed):
        m.setattr(argparse.ArgumentParser, "parse_args", parse_only)
        m.setattr(sys, "argv", ["script.py", *argv])
        main(list(argv)) if main.__code__.co_argcount else main()
    return got[0]


def test_evaluation_model_zoo_command_names_the_architectures_it_measures(monkeypatch: pytest.MonkeyPatch,
                                                                          benchmark_script) -> None:
    """Section 1's plain ``model_zoo.py`` command measures the architectures its comment
    names (the script's default ``--archs``), and the zoo entries it leaves out are
    named as not measured where the page calls ``cnn-medium`` the cheapest that fits."""
    from fol.models import architectures

    text = EVALUATION.read_text(encoding="utf-8")
    comment = re.search(r"^OMP_NUM_THREADS=1 python benchmarks/model_zoo.py +# every task; (.*)$", text, re.M)
    assert comment, "docs/evaluation.md: the plain model_zoo.py command no longer says what it measures"
    measured = _script_defaults(monkeypatch, benchmark_script("model_zoo").main).archs.split(",")
    assert comment.group(1).split(", ") == measured
    section = " ".join(text[text.index("`cnn-small` (two 3x3 conv blocks"):text.index("## 2. ")].split())
    left_out = set(architectures()) - set(measured)
    assert left_out and all(f"`{a}`" in section for a in left_out), (
        f"docs/evaluation.md: the zoo entries model_zoo.py does not measure by default are {sorted(left_out)}")
    assert "has not been measured" in section


def test_evaluation_benchmarks_take_the_default_architecture_from_its_one_place(monkeypatch: pytest.MonkeyPatch,
                                                                                benchmark_script) -> None:
    """Section 1: ``fol.defaults.DEFAULT_ARCH`` is the one place the default architecture is
    named and the benchmarks all use it. Every benchmark script with an ``--arch`` option
    defaults to it: with another default in its place (here ``cnn-small``) the script's
    default follows, where a script naming ``cnn-medium`` itself would not."""
    import fol.defaults
    import fol.models

    text = " ".join(EVALUATION.read_text(encoding="utf-8").split())
    assert ("`fol.defaults.DEFAULT_ARCH` is the one place the default architecture is named. The CLI's `--arch`, "
            "scenario files without `[models] archs`, the demo, the node agent's loopback set-up and the benchmarks "
            "all use it.") in text
    other = "cnn-small"
    assert fol.defaults.DEFAULT_ARCH != other
    monkeypatch.setattr(fol.defaults, "DEFAULT_ARCH", other)
    monkeypatch.setattr(fol.models, "DEFAULT_ARCH", other)  # some scripts import it from there
    checked, wrong = [], {}
    for path in sorted((ROOT / "benchmarks").glob("*.py")):
        if path.stem.startswith("_") or '"--arch"' not in path.read_text(encoding="utf-8"):
            continue
        arch = _script_defaults(monkeypatch, benchmark_script(path.stem).main).arch
        if arch is not None:  # None: the protocol's own default (fol.reproduce.ProtocolConfig.arch)
            checked.append(path.stem)
            if arch != other:
                wrong[path.stem] = arch
    assert len(checked) >= 5, checked
    assert not wrong, f"benchmark scripts whose --arch default is not fol.defaults.DEFAULT_ARCH: {wrong}"


def test_evaluation_paired_table_gives_the_number_of_nodes_that_differ() -> None:
    """The paired table of ``paper_tables.py`` is as section 4 describes it: the Wilcoxon
    test ranks each node's difference averaged over the seeds, nodes without one are
    dropped, and the number printed beside p is that of the nodes that differ (here 3 of
    4), not of those dropped."""
    from fol.reproduce import ProtocolConfig, ProtocolResult, column_nodes

    text = " ".join(EVALUATION.read_text(encoding="utf-8").split())
    assert ("nodes with no difference are dropped, and the number of nodes that differ, those the test ranks, "
            "is given beside p") in text
    cfg = ProtocolConfig(datasets=("synthetic-hurricane",), psis=(0.5,), seeds=(0, 1), nodes=4, pool=0, rounds=1,
                         methods=("fol",))
    local = [0.8, 0.8, 0.8, 0.8]
    acc = {s: {"Local": local, "FOL (E=1)": [0.9, 0.7, 0.8, 0.85 + 0.05 * s], "FOL-A (E=1)": local} for s in (0, 1)}
    res = ProtocolResult(cfg, settings={("synthetic-hurricane", 0.5): {"sizes": [60] * 4,
                                                                         "columns": column_nodes([60] * 4), "acc": acc}})
    d = res.paired("synthetic-hurricane", 0.5, "FOL (E=1)")
    assert (d.nonzero, d.pairs) == (3, 8)
    row = next(line for line in res.markdown().splitlines() if line.startswith("| FOL (E=1) | +"))
    assert row.endswith(f"| {d.p:.2g} (3) |") and "Wilcoxon signed-rank p (nodes that differ)" in res.markdown()


def test_the_pages_snippets_print_a_paired_p_only_when_a_node_differs() -> None:
    """``paired_difference`` (and ``ProtocolResult.paired``) give ``p = None`` when no node
    differs; a page's snippet that formats it as a number (``{r.p:.2g}``) would stop there
    with a TypeError, so every line of a Python block that formats a ``.p`` checks for None."""
    unguarded = []
    for page in sorted(DOCS.glob("*.md")):
        blocks = re.findall(r"^```python\n(.*?)^```", page.read_text(encoding="utf-8"), flags=re.S | re.M)
        for block in blocks:
            for line in block.splitlines():
                for name in re.findall(r"\{(\w+(?:\.\w+)*)\.p:", line):
                    if f"{name}.p is not None" not in line and f"{name}.p is None" not in line:
                        unguarded.append(f"{page.name}: {line.strip()}")
    assert not unguarded, "a paired p printed without checking for None (no node differs):\n" + "\n".join(unguarded)


BASELINES_MD = DOCS / "baselines.md"


def test_baselines_page_states_the_methods_defaults() -> None:
    """The defaults ``docs/baselines.md`` gives for the server skeleton's common options,
    Hermes', DM-PFL's, MTFL's and the data-free methods' (temperatures, the decay of
    Co-Boosting's weight step, the synthesis budgets) are the methods' own."""
    from fol.methods import get_method
    from fol.methods.dense import BUDGETS, budget_share, generator_samples

    text = " ".join(BASELINES_MD.read_text(encoding="utf-8").split())
    m = {n: get_method(n) for n in ("fedavg", "hermes", "dm-pfl", "dm-pfl+", "mtfl", "mtfl-adam", "dense",
                                    "co-boosting")}
    server = [n for n in m if n not in ("dense", "co-boosting")]
    assert {m[n].local_epochs for n in server} == {5, 1} and [n for n in server if m[n].local_epochs == 1] == [
        "mtfl", "mtfl-adam"]
    assert {(m[n].fraction, m[n].lr, m[n].rounds) for n in server} == {(1.0, None, None)}
    h, d, co = m["hermes"], m["dm-pfl"], m["co-boosting"]
    dense = m["dense"].options
    stated = [
        "`local_epochs` (default 5; MTFL's 1), `fraction` (default 1: every node that can reach the server), "
        "`lr` (default: the swarm's shared setting) and `rounds` (default: every round the context allows",
        f"`mtfl-adam` trains with Adam at its own `adam_lr` (default {m['mtfl-adam'].adam_lr:.0e})".replace("e-0", "e-"),
        f"`weight_decay_rate` (default {co.options['weight_decay_rate']:g}",
        f'| `intersection` | `"{h.intersection}"`, `"channel"` |',
        f'| `target_share` | `"{h.target_share}"`, `"pruned"` |',
        f'| `init` | `"{h.init}"`, `"pretrained"` |',
        f"r_target (`target`, default {h.target:g})",
        f"`prune_rate = {h.prune_rate:g}`, `acc_threshold = {h.acc_threshold:g}`, `local_epochs = {h.local_epochs}`",
        f'| `distribution` | `"{d.distribution}"`, `"uniform"` |',
        f'| `init` | `"{d.init}"`, `"pretrained"` |',
        f"| `rounds`, `phase1_share`, `iterations` | every round, {d.phase1_share:g}, {d.iterations} |",
        f"`rounds` and `local_epochs` (default {m['mtfl'].local_epochs},",
        f"The distillation `temperature` (DENSE {dense['temperature']:g}, Co-Boosting {co.options['temperature']:g}) "
        f"and the adversarial term's `adv_temperature` ({dense['adv_temperature']:g} and "
        f"{co.options['adv_temperature']:g})",
    ]
    assert (m["dm-pfl+"].distribution, m["dm-pfl+"].init) == (d.distribution, d.init)
    assert m["dense"].budget == co.budget == "tiny" and "| `tiny` (default) |" in text
    for name, b in BUDGETS.items():
        steps = f"{b['epochs']} × {b['g_steps']} × {b['synthesis_batch']} = {generator_samples(b):,}"
        stated.append(f"| `{name}`{' (default)' if name == 'tiny' else ''} | {steps} | {b['nz']} / {b['ngf']}")
        for method in ("dense", "co-boosting"):
            share = budget_share(method, name)
            assert (f"1/{round(1 / share)} (" in text) if share < 0.05 else (f"| {100 * share:g} % |" in text)
    missing = [s for s in stated if s not in text]
    assert not missing, f"docs/baselines.md no longer states the methods' defaults: {missing}"


PROTOCOL_MD = DOCS / "protocol.md"


def test_protocol_page_states_the_code_settings(monkeypatch: pytest.MonkeyPatch, benchmark_script) -> None:
    """``docs/protocol.md``'s settings are the code's: the node split, the optimizer, the
    protocol's node floor, data seed and column quantiles, the sample std over seeds, and
    the settings its benchmark table gives for compare_methods.py, fol_accuracy.py and
    calibrate_synthetic.py (their parsers' defaults)."""
    from fol.config import FOLConfig
    from fol.data import DEFAULT_SPLIT
    from fol.reproduce import COLUMN_QUANTILES, ProtocolConfig

    text = " ".join(PROTOCOL_MD.read_text(encoding="utf-8").split())
    d, p = FOLConfig(), ProtocolConfig.__dataclass_fields__
    quantiles = [f"{100 * q:g}" for q in COLUMN_QUANTILES]
    stated = [
        "| splits | " + " / ".join(f"{100 * f:g}" for f in DEFAULT_SPLIT) + " train / val / test per node, stratified",
        f"mini-batch SGD, momentum {d.momentum:g}, weight decay {d.weight_decay:.0e}".replace("e-0", "e-")
        + f", batch {d.batch_size} (`FOLConfig`)",
        f"with at least {p['min_samples'].default} images per node",
        f"(`--data-seed`, default {p['data_seed'].default})",
        f"the nodes at the {', '.join(quantiles[:-1])} and {quantiles[-1]} % quantiles of local data size",
        "(the sample standard deviation, n - 1 in the denominator)",
    ]
    cm = _script_defaults(monkeypatch, benchmark_script("compare_methods").main)
    stated.append(f"FOL against every baseline on both tasks, `ψ = {cm.psi[0]:g}` (`--psi` for others), {cm.nodes} "
                  f"nodes, {cm.seeds} seeds, multi-round baselines for R = {cm.rounds} rounds")
    assert cm.tasks == ["hurricane", "wildfire"] and len(cm.psi) == 1
    fa = _script_defaults(monkeypatch, benchmark_script("fol_accuracy").main)
    stated.append(f"local and the four FOL variants, {fa.nodes} nodes, `ψ = {fa.psi:g}`, `Q = {fa.q}`, `K = {fa.k}`, "
                  f"`E = 1`, {fa.seeds} seeds, on synthetic {fa.task}")
    cal = _script_defaults(monkeypatch, benchmark_script("calibrate_synthetic").main)
    stated.append(f"({cal.nodes} nodes x {cal.per_node} images, `ψ = {cal.psi:g}`)")
    missing = [s for s in stated if s not in text]
    assert not missing, f"docs/protocol.md no longer states the code's settings: {missing}"
    # the std over seeds of the protocol, the benchmarks and fol simulate's report: n - 1 (7.07 here, not 5.0)
    from fol.reproduce import _mean_std
    from fol.simulation.report import _pm

    assert _mean_std([0.85, 0.95]) == pytest.approx((90.0, 7.0711), abs=1e-4)
    assert benchmark_script("_common").mean_std([0.85, 0.95]) == _pm([0.85, 0.95]) == "90.00 ± 7.07"


#: The measured results the README's "Numbers" section held: the commands of every script they ran.
RESULTS_SCRIPTS = {"paper_tables", "select_fol_config", "compare_methods", "fol_node_time", "calibrate_synthetic",
                   "simulate_scale", "model_zoo"}
#: The scripts docs/scale.md measures with (its sections 1, 2 and 4 and their dated measurements).
SCALE_SCRIPTS = {"contacts_scale", "simulate_scale", "load_memory", "fol_node_time"}


#: The pages whose ``python benchmarks/...`` commands are parsed: (page, at least that many commands,
#: scripts among them).
BENCHMARK_PAGES = [("evaluation.md", 10, set()), ("protocol.md", 10, set()), ("baselines.md", 10, set()),
                   ("results.md", 100, RESULTS_SCRIPTS), ("scale.md", 20, SCALE_SCRIPTS),
                   ("formats.md", 3, {"dtn_import", "flight_files"}), ("scenario.md", 1, {"contact_edges"})]


@pytest.mark.parametrize("page, least, scripts", BENCHMARK_PAGES, ids=[page for page, _, _ in BENCHMARK_PAGES])
def test_evaluation_pages_benchmark_commands_exist_with_their_flags(monkeypatch: pytest.MonkeyPatch,
                                                                    benchmark_script, page: str, least: int,
                                                                    scripts: set[str]) -> None:
    """Every ``python benchmarks/X.py ...`` command of the pages that report measurements
    with their commands (``docs/results.md``, the measured results the README's "Numbers"
    section held, among them) names a script and flags it has (parsed by the script's own
    parser, stopped before any work), as the README's are."""
    monkeypatch.setattr(sys.modules[__name__], "README", DOCS / page)
    commands = readme_benchmark_commands()
    assert len(commands) >= least and scripts <= {s for s, _ in commands}
    modules = {s: benchmark_script(s) for s in {s for s, _ in commands}}
    wrong = {f"{s}.py {' '.join(argv)}": why for s, argv in commands
             if (argv or "argparse" in vars(modules[s])) and (why := _parses(monkeypatch, modules[s].main, argv,
                                                                             f"{s}.py"))}
    assert not wrong, f"docs/{page}: these benchmark commands do not parse: {wrong}"


#: The benchmark scripts with a command-line parser (each but ``_common``, the helper, and
#: ``hostile_models``, which takes no options).
PARSED_SCRIPTS = sorted(p.stem for p in (ROOT / "benchmarks").glob("*.py")
                        if "ArgumentParser(" in p.read_text(encoding="utf-8"))


@pytest.mark.parametrize("script", PARSED_SCRIPTS)
def test_a_benchmarks_help_opens_with_its_docstrings_whole_first_paragraph(monkeypatch: pytest.MonkeyPatch,
                                                                           benchmark_script, script: str) -> None:
    """``python benchmarks/X.py --help``, which docs/protocol.md's table of scripts sends a reader to, says
    what the script measures in the first paragraph of its docstring, whole: a description cut at the
    docstring's first line break ended transfer.py's help at "CURVE on and off, and" and
    contacts_scale.py's at "one Starlink-like shell and a"."""
    import argparse

    module = benchmark_script(script)
    parsers = []
    original = argparse.ArgumentParser.parse_args

    def keep(self, args=None, namespace=None):
        parsers.append(self)
        return original(self, args, namespace)

    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", keep)
    with pytest.raises(SystemExit):
        _script_defaults(monkeypatch, module.main, ("--help",))
    first = " ".join(module.__doc__.split("\n\n")[0].split())
    shown = " ".join(f"{parsers[0].description or ''} {parsers[0].epilog or ''}".split())
    assert first in shown, f"benchmarks/{script}.py --help: the description does not hold {first!r}"


def test_the_orbit_partitions_memory_budget_the_pages_give_is_the_codes() -> None:
    """docs/scenario.md (``data.acquisition_s``) and docs/running-simulations.md give the bytes ``fol simulate
    --check`` counts for the orbit partition's ground tracks: per satellite and sample (turned Earth-fixed, and an
    all-ITRF OEM's), per time sample, and Skyfield's Earth rotation per time sample; each is the code's constant."""
    from contact_sim.trajectory import STATION_ROTATION_BYTES_PER_TIME
    from fol.simulation import partition

    code = (partition.GROUND_TRACK_BYTES_PER_SAMPLE, partition.ITRF_GROUND_TRACK_BYTES_PER_SAMPLE,
            partition.GROUND_TRACK_BYTES_PER_TIME, STATION_ROTATION_BYTES_PER_TIME)
    for page in ("scenario.md", "running-simulations.md"):
        text = " ".join((DOCS / page).read_text().split())
        found = re.findall(r"(\d+) bytes per satellite and (?:time )?sample, (\d+) for an OEM whose states are all ITRF, "
                           r"Earth-fixed as read[;,] (?:plus )?(\d+) bytes per (?:time )?sample\b[^()]{0,80}?(\d+) KiB",
                           text)
        assert len(found) == 1, f"docs/{page}: expected the orbit partition's budget once, found {found}"
        stated = tuple(int(v) for v in found[0][:3]) + (int(found[0][3]) * 2**10,)
        assert stated == code, f"docs/{page}: the orbit partition's budget is stated as {stated}, the code's is {code}"


ARCHITECTURE_MD = DOCS / "architecture.md"


def test_architecture_page_quotes_the_os_error_line_fol_prints(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    """docs/architecture.md's line of an ``OSError`` past the checks (``fol keys gen --dir`` of a name too long for
    the file system) is the one ``fol`` prints: the option that gave the path first, then the path, cut, and the
    reason."""
    from fol.cli import main

    quoted = re.findall(r"`fol keys gen n1 --dir` of a name too long for the file system: `([^`]*)`",
                        " ".join(ARCHITECTURE_MD.read_text(encoding="utf-8").split()))
    assert len(quoted) == 1, "docs/architecture.md no longer quotes the OSError line of fol keys gen --dir"
    monkeypatch.chdir(tmp_path)
    assert main(["keys", "gen", "n1", "--dir", "a" * 5000]) == 2
    printed = capsys.readouterr().err.strip()
    head, _, tail = quoted[0].partition("aaa...")
    assert tail and printed.startswith(head + "aaa") and printed.endswith("..." + tail), (quoted[0], printed[-80:])


def test_architecture_page_states_the_bound_of_processes_per_core() -> None:
    """docs/architecture.md gives the one bound of local processes and torch threads per core that
    ``swarmbase.cli`` holds, in the package table and in the table of where each job lives."""
    from swarmbase.cli import MAX_PER_CORE

    text = " ".join(ARCHITECTURE_MD.read_text(encoding="utf-8").split())
    stated = re.findall(r"(\d+) (?:processes or threads )?per core \(`(?:cli|max_local_parallelism)`", text)
    assert len(stated) == 2 and {int(n) for n in stated} == {MAX_PER_CORE}, stated


def test_docs_index_names_the_pages_whose_benchmark_commands_are_parsed() -> None:
    """docs/README.md says which pages' ``benchmarks/`` commands the test run parses: exactly those it parses."""
    text = " ".join((DOCS / "README.md").read_text(encoding="utf-8").split())
    found = re.findall(r"every `benchmarks/` command of ((?:[\w-]+\.md,? )+and [\w-]+\.md), parses", text)
    assert len(found) == 1, "docs/README.md no longer says which pages' benchmark commands are parsed"
    named = re.findall(r"[\w-]+\.md", found[0])
    assert sorted(named) == sorted(page for page, _, _ in BENCHMARK_PAGES), named


FOL_ALGORITHM_MD = DOCS / "fol-algorithm.md"

#: How docs/fol-algorithm.md's "What a round reports" names each field of ``RoundReport`` (``node``, ``round``
#: and ``variant`` name the round itself) and each key ``fol personalize`` adds to ``report.json``.
ROUND_REPORT_WORDS = {
    "received": "every received model and whether it was used", "candidates": "every candidate with its scores",
    "selected": "the selected members", "weights": "and their weights", "distillation": "KL before and after",
    "accuracy": "accuracy of the local model, student, ensemble and deployed model", "transfer": "(`transfer`;",
    "kept_local": "(`kept_local`)", "train_flops": "the training FLOPs spent", "seconds": "the wall time of each stage",
    "config": "(`config`)", "outputs": "(`outputs`)", "skipped_files": "(`skipped_files`)",
}


def test_fol_algorithm_names_every_field_of_a_rounds_report() -> None:
    """docs/fol-algorithm.md's "What a round reports" says what every field of ``RoundReport`` holds (and the
    keys ``fol personalize`` adds to it in ``report.json``): a field added to the report is added there too."""
    from fol.personalize import RoundReport

    text = " ".join(FOL_ALGORITHM_MD.read_text(encoding="utf-8").split())
    section = text.split("## What a round reports", 1)[1].split("## ", 1)[0]
    fields = set(RoundReport.__dataclass_fields__) - {"node", "round", "variant"}
    unknown = fields - set(ROUND_REPORT_WORDS)
    assert not unknown, f"RoundReport fields the test does not know: {unknown}"
    missing = {f: words for f, words in ROUND_REPORT_WORDS.items() if words not in section}
    assert not missing, f"docs/fol-algorithm.md: 'What a round reports' no longer says these fields: {missing}"


def test_baselines_page_states_the_quick_comparisons_settings(monkeypatch: pytest.MonkeyPatch,
                                                              benchmark_script) -> None:
    """docs/baselines.md says what ``compare_methods.py --quick`` runs: its parser's defaults under ``--quick``."""
    text = " ".join(BASELINES_MD.read_text(encoding="utf-8").split())
    stated = re.findall(r"# a small run that shows the output in a few minutes: "
                        r"(\d+) nodes x (\d+) images of (\d+) px, "
                        r"one seed, R = (\d+), # FOL at E = (\d+) ", text)
    assert len(stated) == 1, "docs/baselines.md no longer says what compare_methods.py --quick runs"
    a = _script_defaults(monkeypatch, benchmark_script("compare_methods").main, ("--quick",))
    assert a.seeds == 1 and len(a.fol_rounds) == 1
    assert tuple(int(v) for v in stated[0]) == (a.nodes, a.per_node, a.image_size, a.rounds, a.fol_rounds[0])


def test_architecture_page_names_every_module() -> None:
    """docs/architecture.md says where each job lives: every module of the four packages is named there by its
    path (a ``fol`` module may be named by its folder), the error modules by their error type."""
    text = ARCHITECTURE_MD.read_text(encoding="utf-8")
    missing = []
    for package in ("swarmbase", "orbits", "contact_sim", "fol"):
        for path in sorted((ROOT / package).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if path.name == "__init__.py" or "__pycache__" in rel:
                continue
            if path.name == "errors.py":
                if f"`{rel[:-3].replace('/', '.')}." not in text:
                    missing.append(rel)
            elif f"`{rel}`" not in text and not (package == "fol" and f"`{path.parent.relative_to(ROOT).as_posix()}/`"
                                                  in text and path.parent.name != "fol"):
                missing.append(rel)
    assert not missing, f"docs/architecture.md does not say where these modules' jobs live: {missing}"


def test_architecture_page_names_every_way_a_stage_adapts_fit() -> None:
    """docs/architecture.md's "One training loop" names each keyword ``fol.train.fit`` takes to adapt the one loop
    to a stage (its own loss, other parameters, its own optimizer; ``val`` is D_val, said in words)."""
    import inspect

    from fol.train import fit

    text = " ".join(ARCHITECTURE_MD.read_text(encoding="utf-8").split())
    section = text.split("## One training loop", 1)[1].split("## ", 1)[0]
    keywords = [n for n, p in inspect.signature(fit).parameters.items() if p.kind is p.KEYWORD_ONLY and n != "val"]
    assert keywords, "fol.train.fit takes no keyword-only parameter any more"
    missing = [n for n in keywords if not re.search(rf"`{n}[`(]", section)]
    assert not missing, f"docs/architecture.md: 'One training loop' does not say what fit's {missing} are for"
