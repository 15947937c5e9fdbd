"""systemd's service notification protocol (``sd_notify``): readiness and watchdog pings.

Under a unit with ``Type=notify`` systemd passes ``NOTIFY_SOCKET`` (a Unix
datagram socket; a leading ``@`` means the abstract namespace), and with
``WatchdogSec=`` also ``WATCHDOG_USEC`` (and ``WATCHDOG_PID``). The agent
sends ``READY=1`` once its sockets are bound, ``WATCHDOG=1`` from its poll
loop at half the watchdog interval (so a hung loop gets the service
restarted), and ``STOPPING=1`` when it shuts down. Outside systemd every call
is a no-op. The protocol is one datagram of ``KEY=value`` lines, so it is
written here directly rather than through a library.

Example:
    >>> Watchdog(env={}).interval_s is None   # not under a systemd watchdog
    True
"""

from __future__ import annotations

import logging
import os
import socket
import time
from typing import Mapping

__all__ = ["notify", "Watchdog"]

log = logging.getLogger(__name__)


def notify(message: str, env: Mapping[str, str] | None = None) -> bool:
    """Send ``message`` (e.g. ``"READY=1"``) to systemd; ``False`` when not under systemd."""
    env = os.environ if env is None else env
    address = env.get("NOTIFY_SOCKET")
    if not address:
        return False
    if address.startswith("@"):
        address = "\0" + address[1:]
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
            sock.connect(address)
            sock.sendall(message.encode("utf-8"))
    except OSError as exc:
        log.warning("sd_notify %s failed: %s", message, exc)
        return False
    return True


class Watchdog:
    """Pings systemd's watchdog at half of ``WATCHDOG_USEC`` (when this process is the one watched)."""

    def __init__(self, env: Mapping[str, str] | None = None) -> None:
        self.env = os.environ if env is None else env
        self.interval_s: float | None = None
        usec, pid = self.env.get("WATCHDOG_USEC"), self.env.get("WATCHDOG_PID")
        if usec and usec.isdigit() and int(usec) > 0 and (not pid or pid == str(os.getpid())):
            self.interval_s = int(usec) / 1e6
        self._next = 0.0

    def ping(self, now: float | None = None) -> bool:
        """Send ``WATCHDOG=1`` if half an interval passed since the last ping; returns whether it sent."""
        if self.interval_s is None:
            return False
        now = time.monotonic() if now is None else now
        if now < self._next:
            return False
        self._next = now + self.interval_s / 2.0
        return notify("WATCHDOG=1", self.env)
