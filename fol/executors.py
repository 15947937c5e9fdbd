"""Where per-node work runs: in this process, in a pool of local processes, or as
Ray tasks on a cluster.

Every executor exposes ``map(fn, items) -> list`` with results in item order;
``fn`` must be a top-level function and ``items`` picklable. ``on_result(i,
result)``, if given, is called in this process as soon as item ``i`` finishes
(in completion order), e.g. to checkpoint finished work before the rest is done. Each task runs
with the same number of torch threads (``threads``) whatever the executor,
and all randomness inside a task is seeded by the task itself, so the same
scenario and seed give the same results (to floating-point tolerance) on any
executor.

>>> with make_executor("local") as ex:
...     ex.map(abs, [-1, 2, -3])
[1, 2, 3]
"""

from __future__ import annotations

import logging
import os
from concurrent.futures import ProcessPoolExecutor
from typing import Any, Callable, Sequence

OnResult = Callable[[int, Any], None] | None

from fol.errors import ConfigError

__all__ = ["Executor", "LocalExecutor", "ProcessExecutor", "RayExecutor", "make_executor", "EXECUTORS"]

log = logging.getLogger(__name__)

EXECUTORS = ("local", "process", "ray")


def _run_with_threads(args: tuple[Callable[[Any], Any], Any, int | None]) -> Any:
    fn, item, threads = args
    if threads:
        import torch

        torch.set_num_threads(threads)
    return fn(item)


class Executor:
    """Base class: a context manager with ``map``."""

    kind = ""

    def __init__(self, threads: int | None = None) -> None:
        self.threads = threads

    def map(self, fn: Callable[[Any], Any], items: Sequence[Any], desc: str | None = None,
            on_result: OnResult = None) -> list[Any]:  # pragma: no cover
        """``[fn(item) for item in items]``, possibly elsewhere; with ``desc``, a
        progress bar over finished items (hidden when not on a terminal);
        ``on_result(i, result)`` as each item finishes."""
        raise NotImplementedError

    def close(self) -> None:
        pass

    def __enter__(self) -> "Executor":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __call__(self, fn: Callable[[Any], Any], items: Sequence[Any], desc: str | None = None,
                 on_result: OnResult = None) -> list[Any]:
        return self.map(fn, items, desc, on_result)


def _bar(total: int, desc: str | None) -> Any:
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, leave=False, disable=None if desc else True)


class LocalExecutor(Executor):
    """Run tasks one after another in this process."""

    kind = "local"

    def map(self, fn: Callable[[Any], Any], items: Sequence[Any], desc: str | None = None,
            on_result: OnResult = None) -> list[Any]:
        before = None
        if self.threads:
            import torch

            before = torch.get_num_threads()
        out = []
        try:
            with _bar(len(items), desc) as bar:
                for i, item in enumerate(items):
                    out.append(_run_with_threads((fn, item, self.threads)))
                    if on_result is not None:
                        on_result(i, out[-1])
                    bar.update()
        finally:
            if before is not None:
                torch.set_num_threads(before)
        return out


class ProcessExecutor(Executor):
    """A pool of ``workers`` local processes (default: the machine's cores),
    started with ``spawn`` so no torch state is forked."""

    kind = "process"

    def __init__(self, workers: int | None = None, threads: int | None = 1) -> None:
        super().__init__(threads)
        import multiprocessing as mp

        self.workers = workers or os.cpu_count() or 1
        self._pool = ProcessPoolExecutor(max_workers=self.workers, mp_context=mp.get_context("spawn"))

    def map(self, fn: Callable[[Any], Any], items: Sequence[Any], desc: str | None = None,
            on_result: OnResult = None) -> list[Any]:
        from concurrent.futures import as_completed

        futures = [self._pool.submit(_run_with_threads, (fn, item, self.threads)) for item in items]
        index = {f: i for i, f in enumerate(futures)}
        with _bar(len(futures), desc) as bar:
            for f in as_completed(futures):
                if on_result is not None:
                    on_result(index[f], f.result())
                bar.update()
        return [f.result() for f in futures]

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)


class RayExecutor(Executor):
    """Node work as Ray tasks. ``address=None`` starts a local Ray instance;
    ``"auto"`` (or ``ray://host:port``) joins an existing cluster."""

    kind = "ray"

    def __init__(self, address: str | None = None, threads: int | None = 1, num_cpus: int | None = None) -> None:
        super().__init__(threads)
        try:
            import ray
        except ImportError:
            raise ConfigError("executor 'ray' needs Ray: pip install 'fol-swarm[ray]'") from None
        self._ray = ray
        self._owns = not ray.is_initialized()
        if self._owns:
            kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False, "configure_logging": False}
            if address:
                kwargs["address"] = address
            elif num_cpus:
                kwargs["num_cpus"] = num_cpus
            ray.init(**kwargs)
        self._remote = ray.remote(num_cpus=1)(_run_with_threads)

    def map(self, fn: Callable[[Any], Any], items: Sequence[Any], desc: str | None = None,
            on_result: OnResult = None) -> list[Any]:
        refs = [self._remote.remote((fn, item, self.threads)) for item in items]
        index = {ref: i for i, ref in enumerate(refs)}
        pending = list(refs)
        with _bar(len(refs), desc) as bar:
            while pending:
                done, pending = self._ray.wait(pending, num_returns=1)
                if on_result is not None:
                    for ref in done:
                        on_result(index[ref], self._ray.get(ref))
                bar.update(len(done))
        return list(self._ray.get(refs))

    def close(self) -> None:
        if self._owns and self._ray.is_initialized():
            self._ray.shutdown()


def make_executor(kind: str, *, workers: int | None = None, threads: int | None = None, ray_address: str | None = None) -> Executor:
    """Build the executor named ``kind`` (``local``, ``process`` or ``ray``)."""
    if kind == "local":
        return LocalExecutor(threads)
    if kind == "process":
        return ProcessExecutor(workers, threads if threads is not None else 1)
    if kind == "ray":
        return RayExecutor(ray_address, threads if threads is not None else 1, num_cpus=workers)
    raise ConfigError(f"executor {kind!r} is unknown; expected one of {', '.join(EXECUTORS)}")
