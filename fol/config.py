"""FOL's hyperparameters in one dataclass, loadable from a TOML table.

Defaults are this project's choices for small CNNs on ~300 images of 32x32 pixels
on CPU (the paper publishes no values for most of them); every field is
documented below and every one can be set from a ``[fol]`` table:

>>> cfg = FOLConfig.from_dict({"top_k": 2, "temperature": 4.0})
>>> cfg.top_k, cfg.temperature, cfg.rounds
(2, 4.0, 1)
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from fol.errors import ConfigError
from fol.pruning import PruneConfig
from fol.train import TrainConfig
from swarmbase.tomlcheck import Table, read_toml

__all__ = ["FOLConfig"]

@dataclass
class FOLConfig:
    """Every hyperparameter of the four FOL stages.

    Collection: ``max_neighbours`` (Q, models taken per round; extra ones are
    ignored in arrival order), ``top_k`` (K, ensemble size including the own
    model when it ranks), ``rounds`` (E).

    Pretrain: ``pretrain_epochs`` (max), ``pretrain_lr``, ``patience`` (early
    stopping on D_val), shared ``batch_size``, ``momentum``, ``weight_decay``.

    Align: ``finetune_epochs`` and ``post_finetune_epochs`` (SGD at
    ``finetune_lr`` on D_train), then pruning: ``lambda_p`` (alignment weight),
    ``gamma_shared`` / ``gamma_unshared`` (group-lasso weights), ``prune_ratio``
    (share of channels removed per prunable layer), ``gate_epochs``,
    ``gate_lr`` (Adam on the gates).

    Ensemble: ``ensemble_steps`` full-batch Adam steps at ``ensemble_lr`` on
    cached logits.

    Distill: ``temperature`` (T), ``lam`` (lambda, proximal weight on
    ||theta - theta_prev||^2), ``distill_epochs``, ``distill_lr``.

    ``seed`` drives every random choice of the run.
    """

    max_neighbours: int = 5
    top_k: int = 3
    rounds: int = 1

    pretrain_epochs: int = 30
    # pretrain_lr and patience chosen on validation data only (benchmarks/select_pretrain.py).
    pretrain_lr: float = 1e-3
    patience: int = 10
    batch_size: int = 32
    momentum: float = 0.9
    weight_decay: float = 1e-3

    finetune_epochs: int = 5
    post_finetune_epochs: int = 3
    finetune_lr: float = 0.01

    # Pruning defaults are fol.pruning.PruneConfig's (reasoning in that module).
    lambda_p: float = PruneConfig.lambda_p
    gamma_shared: float = PruneConfig.gamma_shared
    gamma_unshared: float = PruneConfig.gamma_unshared
    prune_ratio: float = PruneConfig.ratio
    gate_epochs: int = PruneConfig.gate_epochs
    gate_lr: float = PruneConfig.gate_lr

    ensemble_steps: int = 200
    ensemble_lr: float = 0.1

    temperature: float = 3.0
    lam: float = 1e-3
    distill_epochs: int = 10
    distill_lr: float = 0.01

    seed: int = 0

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if f.type == "int":
                if not isinstance(value, int) or isinstance(value, bool):
                    raise ConfigError(f"fol.{f.name} must be an integer, got {value!r}")
            elif f.type == "float":
                if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                    raise ConfigError(f"fol.{f.name} must be a finite number, got {value!r}")
                setattr(self, f.name, float(value))
        positive = ("max_neighbours", "top_k", "rounds", "batch_size", "pretrain_lr", "finetune_lr",
                    "gate_lr", "ensemble_lr", "distill_lr", "temperature")
        for name in positive:
            if getattr(self, name) <= 0:
                raise ConfigError(f"fol.{name} must be > 0, got {getattr(self, name)}")
        non_negative = ("pretrain_epochs", "patience", "finetune_epochs", "post_finetune_epochs", "gate_epochs",
                        "ensemble_steps", "distill_epochs", "lambda_p", "gamma_shared", "gamma_unshared",
                        "lam", "weight_decay", "momentum")
        for name in non_negative:
            if getattr(self, name) < 0:
                raise ConfigError(f"fol.{name} must be >= 0, got {getattr(self, name)}")
        if not 0.0 <= self.prune_ratio < 1.0:
            raise ConfigError(f"fol.prune_ratio must be in [0, 1), got {self.prune_ratio}")

    # ------------------------------------------------------------ loading

    @classmethod
    def from_dict(cls, data: dict[str, Any], where: str = "fol") -> "FOLConfig":
        """Build from a mapping; unknown keys are an error naming ``where``."""
        source, _, table = where.rpartition(": ")
        Table(data, table, {f.name for f in fields(cls)}, error=ConfigError, source=source or None)
        return cls(**data)

    @classmethod
    def from_toml(cls, path: str | Path) -> "FOLConfig":
        """Read a TOML file holding either a ``[fol]`` table or the keys at top level."""
        path = Path(path)
        data, _ = read_toml(path, ConfigError, "FOL config file")
        table = data.get("fol", data)
        return cls.from_dict(table, where=f"{path}: fol" if "fol" in data else f"{path}: top level")

    def replace(self, **changes: Any) -> "FOLConfig":
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    # ------------------------------------------------------------ per-stage views

    def pretrain_train(self) -> TrainConfig:
        return TrainConfig(
            epochs=self.pretrain_epochs, batch_size=self.batch_size, lr=self.pretrain_lr, momentum=self.momentum,
            weight_decay=self.weight_decay, patience=self.patience, seed=self.seed, desc="pretrain",
        )

    def finetune_train(self, epochs: int, seed: int, desc: str) -> TrainConfig:
        return TrainConfig(
            epochs=epochs, batch_size=self.batch_size, lr=self.finetune_lr, momentum=self.momentum,
            weight_decay=self.weight_decay, seed=seed, desc=desc,
        )

    def prune(self, seed: int) -> PruneConfig:
        return PruneConfig(
            lambda_p=self.lambda_p, gamma_shared=self.gamma_shared, gamma_unshared=self.gamma_unshared,
            ratio=self.prune_ratio, gate_epochs=self.gate_epochs, gate_lr=self.gate_lr,
            batch_size=self.batch_size, seed=seed,
        )

    def distill_train(self, seed: int) -> TrainConfig:
        return TrainConfig(
            epochs=self.distill_epochs, batch_size=self.batch_size, lr=self.distill_lr, momentum=self.momentum,
            weight_decay=0.0, seed=seed, desc="distill",
        )
