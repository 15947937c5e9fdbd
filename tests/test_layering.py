"""The layering DESIGN.md fixes: the contact side never imports torch, the
learning core never imports the orbit code; only the swarm runner joins them."""

from __future__ import annotations

import subprocess
import sys

import pytest


def _modules_after(code: str) -> set[str]:
    out = subprocess.run([sys.executable, "-c", code + "\nimport sys; print(' '.join(sorted(sys.modules)))"],
                         capture_output=True, text=True, check=True, timeout=120)
    return set(out.stdout.split())


def test_contact_side_never_imports_torch() -> None:
    mods = _modules_after(
        "import orbits, contact_sim, contact_sim.cli, contact_sim.plotting\n"
        "from contact_sim import load_contact_scenario, compute_contacts\n"
        "plan = compute_contacts(load_contact_scenario('examples/drone_contacts.toml'))\n"
        "assert plan.summary()['windows'] > 0"
    )
    assert "orbits" in mods and "contact_sim.windows" in mods
    assert "torch" not in mods


@pytest.mark.parametrize("module", ["fol.personalize", "fol.methods.fol_method", "fol.agent.node", "fol.personalize_cli"])
def test_learning_core_never_imports_orbits(module: str) -> None:
    mods = _modules_after(f"import {module}")
    assert module in mods
    assert not {m for m in mods if m == "orbits" or m.startswith("orbits.") or m.startswith("contact_sim")}
