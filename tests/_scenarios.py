"""Scenario text shared by the tests that run a swarm simulation: the ``[fol]`` table of a tiny
FOL budget (so a run takes seconds) and the tiny LEO scenario."""

from __future__ import annotations


def tiny_fol(distill_epochs: int = 2, pretrain_epochs: int = 2) -> str:
    """A scenario's ``[fol]`` table with one epoch per fine-tuning and gate stage, two
    neighbours at most and ``distill_epochs``/``pretrain_epochs`` epochs."""
    return (f"[fol]\nmax_neighbours = 2\ntop_k = 2\nfinetune_epochs = 1\npost_finetune_epochs = 1\n"
            f"gate_epochs = 1\ndistill_epochs = {distill_epochs}\npretrain_epochs = {pretrain_epochs}\n")


# Six satellites in two planes, 16x16 synthetic hurricane images partitioned by orbit, one seed, one
# round, methods local, fol and fol-a, run by the local executor.
LEO = f"""
[scenario]
name = "tiny-leo"
seeds = [0]
[constellation]
kind = "walker-delta"
total = 6
planes = 2
phasing = 1
altitude_km = 550.0
inclination_deg = 53.0
epoch = "2026-06-01T00:00:00Z"
[time]
duration_s = 86400.0
step_s = 120.0
[link]
model = "constant"
rate_bps = 10e6
max_range_km = 5000.0
acquisition_s = 30.0
[rounds]
count = 1
[data]
dataset = "synthetic-hurricane"
size = 2000
image_size = 16
partition = "orbit"
per_node = 100
min_samples = 40
{tiny_fol()}[methods]
run = ["local", "fol", "fol-a"]
[run]
executor = "local"
threads = 1
"""
