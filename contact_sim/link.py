"""Link model: range -> data rate, window -> capacity in bytes.

Three models:

* ``constant``: every contact carries ``rate_bps``.
* ``plan``: each window has its own rate, given by an imported contact plan
  (:mod:`contact_sim.dtn`); the window's ``volume_bits`` is rate x duration.
* ``shannon``: free-space path loss plus Shannon capacity,

      FSPL_dB = 20 log10(4 pi d f / c)
      SNR_dB  = P_tx + G_tx + G_rx - FSPL - losses - 10 log10(k T B)
      rate    = B log2(1 + SNR)            (capped at ``max_rate_bps`` if set)

  with ``d`` the range (m), ``f`` the carrier (Hz), ``k`` Boltzmann's
  constant, ``T`` the system noise temperature (K), ``B`` the bandwidth (Hz).
  Defaults describe a modest Ka-band inter-satellite terminal (10 dBW,
  2 x 32 dBi, 26 GHz, 100 MHz, 500 K, 3 dB losses): about 400 Mbit/s at
  1,000 km and 70 Mbit/s at 5,000 km.

A window's capacity is ``mean_rate x max(0, duration - acquisition_s) / 8``
bytes: the first ``acquisition_s`` seconds of every window (pointing,
acquisition and tracking, link set-up) carry no data; ``mean_rate`` is the
window's rate integrated over the window (Simpson's rule on the window
finder's samples) divided by its duration.

Example:
    >>> m = LinkModel(model="constant", rate_bps=8e6, acquisition_s=10.0)
    >>> int(m.capacity_bytes(np.array([70.0]), None)[0])
    60000000
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np
from scipy.constants import Boltzmann

from .errors import ContactError

#: ``plan``: every window carries its own rate, read from an imported contact plan
#: (``volume_bits / duration``); there is no range -> rate function.
LINK_MODELS = ("constant", "shannon", "plan")
#: Largest ``rate_bps`` / ``max_rate_bps`` accepted (1 Pbit/s): thousands of times the fastest space
#: laser link demonstrated (about 2e11 bit/s), so a larger value is a typing mistake, not a link.
MAX_RATE_BPS = 1e15
#: Accepted range of each Shannon-model field: every real terminal, radio or optical, lies well inside,
#: and within them the SNR stays a finite number (10**(SNR/10) overflowed to inf past ~3,000 dB, giving
#: NaN rates) and ``1 + SNR`` keeps the rate (a too-wide band read as 0 bit/s). The bandwidth is also at
#: most the carrier frequency.
SHANNON_RANGES = {"tx_power_dbw": (-100.0, 100.0), "tx_gain_dbi": (-100.0, 200.0), "rx_gain_dbi": (-100.0, 200.0),
                  "frequency_hz": (1e3, 1e16), "bandwidth_hz": (1.0, 1e16), "noise_temperature_k": (1.0, 1e7),
                  "losses_db": (-100.0, 1000.0)}
#: Boltzmann's constant in dBW/K/Hz, from CODATA's exact k (-228.5991; link budgets often round it to -228.6).
BOLTZMANN_DBW_PER_K_HZ = 10.0 * math.log10(Boltzmann)
SPEED_OF_LIGHT_M_S = 299_792_458.0


@dataclass(frozen=True)
class LinkModel:
    """Data-rate model (bit/s, s, dBW, dBi, Hz, K, dB)."""

    model: str = "constant"
    rate_bps: float = 100e6
    acquisition_s: float = 10.0
    tx_power_dbw: float = 10.0
    tx_gain_dbi: float = 32.0
    rx_gain_dbi: float = 32.0
    frequency_hz: float = 26e9
    bandwidth_hz: float = 100e6
    noise_temperature_k: float = 500.0
    losses_db: float = 3.0
    max_rate_bps: float | None = None

    def __post_init__(self) -> None:
        if self.model not in LINK_MODELS:
            raise ContactError(f"link.model: expected one of {', '.join(map(repr, LINK_MODELS))}, got {self.model!r}")
        if not 0 <= self.acquisition_s < np.inf:  # NaN too: it made every capacity -2**63 bytes
            raise ContactError(f"link.acquisition_s: expected a number of seconds >= 0, got {self.acquisition_s}")
        positive = {"constant": ["rate_bps"], "plan": []}.get(
            self.model, ["frequency_hz", "bandwidth_hz", "noise_temperature_k"])
        for name in positive:
            value = getattr(self, name)
            if not np.isfinite(value) or value <= 0:
                raise ContactError(f"link.{name}: expected a positive number, got {value}")
        if self.model == "shannon":
            for name, (lo, hi) in SHANNON_RANGES.items():
                value = getattr(self, name)
                if not lo <= value <= hi:
                    raise ContactError(f"link.{name}: expected a number in {lo:g}..{hi:g}, got {value}")
            if self.bandwidth_hz > self.frequency_hz:
                raise ContactError(f"link.bandwidth_hz: {self.bandwidth_hz:g} Hz exceeds the carrier "
                                   f"(link.frequency_hz = {self.frequency_hz:g} Hz)")
        for name in ("rate_bps", "max_rate_bps"):
            value = getattr(self, name)
            if value is not None and not 0 < value <= MAX_RATE_BPS:
                raise ContactError(f"link.{name}: expected a positive number of at most {MAX_RATE_BPS:g} (bit/s), "
                                   f"got {value}")

    def snr_db(self, range_km) -> np.ndarray:
        """Signal-to-noise ratio (dB) at ``range_km`` (Shannon model parameters)."""
        d_m = np.maximum(np.asarray(range_km, dtype=float), 1e-3) * 1e3
        fspl = 20.0 * np.log10(4.0 * np.pi * d_m * self.frequency_hz / SPEED_OF_LIGHT_M_S)
        noise = BOLTZMANN_DBW_PER_K_HZ + 10.0 * np.log10(self.noise_temperature_k * self.bandwidth_hz)
        return self.tx_power_dbw + self.tx_gain_dbi + self.rx_gain_dbi - fspl - self.losses_db - noise

    def rate_at(self, range_km) -> np.ndarray:
        """Data rate (bit/s) at ``range_km``; vectorized."""
        r = np.asarray(range_km, dtype=float)
        if self.model == "plan":
            raise ContactError("link.model 'plan': rates come from the imported contact plan, not from range")
        if self.model == "constant":
            rate = np.full(r.shape, float(self.rate_bps))
        else:
            rate = self.bandwidth_hz * np.log2(1.0 + 10.0 ** (self.snr_db(r) / 10.0))
        if self.max_rate_bps is not None:
            rate = np.minimum(rate, self.max_rate_bps)
        return rate

    @property
    def needs_integration(self) -> bool:
        """Whether the rate depends on range (so the window finder must integrate it)."""
        return self.model != "constant"

    def mean_rate(self, duration_s: np.ndarray, volume_bits: np.ndarray | None) -> np.ndarray:
        """Mean rate (bit/s) of windows from their integrated volume."""
        duration_s = np.asarray(duration_s, dtype=float)
        if not self.needs_integration or volume_bits is None:
            return np.asarray(self.rate_at(np.zeros(duration_s.shape)))
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(duration_s > 0, np.asarray(volume_bits) / duration_s, 0.0)

    def capacity_bytes(self, duration_s: np.ndarray, volume_bits: np.ndarray | None) -> np.ndarray:
        """Bytes a window can carry after the acquisition overhead (int64; at most
        2**62, 4.6 EB, so that no rate x duration wraps around to a negative count)."""
        duration_s = np.asarray(duration_s, dtype=float)
        usable = np.maximum(duration_s - self.acquisition_s, 0.0)
        return np.minimum(np.floor(self.mean_rate(duration_s, volume_bits) * usable / 8.0),
                          float(2**62)).astype(np.int64)

    def to_dict(self) -> dict:
        return asdict(self)
