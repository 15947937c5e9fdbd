"""numba's compiled loops cached on disk where numba can write its cache, and compiled in each process
where it cannot, instead of an import that fails.

``numba.njit(cache=True)`` looks for a folder it may write compiled code in as the function is
decorated, so as its module is imported: ``NUMBA_CACHE_DIR``, the ``__pycache__`` folder beside the
module, then the user's cache folder (``$XDG_CACHE_HOME/numba`` or ``~/.cache/numba``). Where there is
none (a read-only install: a container's read-only file system, a system-wide install used by an
account whose home folder cannot be written), numba raises ``RuntimeError: cannot cache function ...:
no locator available`` and the import fails with a traceback. :func:`cached_njit` decorates without
the cache there, so each process compiles the loops on its first call (about 6 s for the window
search's kernels, 1 s for the PackBits loop), and says so once per module in a warning that names
``NUMBA_CACHE_DIR``, the folder to give numba to keep them.

It takes numba's ``njit`` from its caller: ``swarmbase`` imports no third-party package.

>>> calls = []
>>> def fake_njit(**options):  # numba's njit as it behaves with no folder to cache in
...     calls.append(options)
...     if options.get("cache"):
...         raise RuntimeError("cannot cache function 'f': no locator available for file 'f.py'")
...     return lambda fn: fn
>>> f = cached_njit(fake_njit, nogil=True)(lambda x: x + 1)
>>> f(1), calls
(2, [{'cache': True, 'nogil': True}, {'nogil': True}])
"""

from __future__ import annotations

import logging
from typing import Any, Callable

__all__ = ["cached_njit"]

log = logging.getLogger(__name__)

#: The modules already warned of (once per process each).
_WARNED: set[str] = set()


def cached_njit(njit: Callable[..., Any], **options: Any) -> Callable[[Callable[..., Any]], Any]:
    """A decorator: ``njit(cache=True, **options)``, or ``njit(**options)`` where numba finds no folder
    it may write its cache in (a warning names the module and ``NUMBA_CACHE_DIR``, once per module)."""

    def decorate(fn: Callable[..., Any]) -> Any:
        try:
            return njit(cache=True, **options)(fn)
        except RuntimeError as exc:
            if "cannot cache" not in str(exc):
                raise
        module = getattr(fn, "__module__", None) or "?"
        if module not in _WARNED:
            _WARNED.add(module)
            log.warning("numba finds no folder it may write its cache in for %s (a read-only install?): its loops "
                        "are compiled again in each process; set NUMBA_CACHE_DIR to a writable folder to keep them",
                        module)
        return njit(**options)(fn)

    return decorate
