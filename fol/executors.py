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

import contextlib
import logging
import os
import sys
import weakref
from concurrent.futures import ProcessPoolExecutor
from typing import Any, Callable, Iterator, Sequence

OnResult = Callable[[int, Any], None] | None

from fol.errors import ConfigError, FOLError
from fol.threads import torch_threads
from swarmbase.tomlcheck import brief, is_decimal, shown

__all__ = ["torch_threads", "Executor", "LocalExecutor", "ProcessExecutor", "RayExecutor", "LocalRayCluster", "make_executor", "EXECUTORS",
           "check_ray_address", "cluster_address"]

log = logging.getLogger(__name__)

EXECUTORS = ("local", "process", "ray")


def _run_with_threads(args: tuple[Callable[[Any], Any], Any, int | None]) -> Any:
    """A worker's task (process pool, Ray) with torch's thread count ``threads`` (None: as it is), the
    worker's own count given back after it, as :func:`fol.threads.torch_threads` does for every caller."""
    fn, item, threads = args
    with torch_threads(threads):
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
        out = []
        with torch_threads(self.threads), _bar(len(items), desc) as bar:
            for i, item in enumerate(items):
                out.append(fn(item))
                if on_result is not None:
                    on_result(i, out[-1])
                bar.update()
        return out


def _run_pickled(payload: bytes) -> bytes:
    """A process-pool task: arguments in, result out, each as one plain pickle. An exception the
    parent could not get back (it cannot be pickled, or not rebuilt from its pickle: the pool then
    reported a worker that "ended abruptly") is raised as one :class:`fol.errors.FOLError` saying
    what the task raised."""
    import pickle

    try:
        result = _run_with_threads(pickle.loads(payload))
    except Exception as exc:
        try:
            pickle.loads(pickle.dumps(exc, protocol=pickle.HIGHEST_PROTOCOL))
        except Exception as why:
            raise FOLError(f"a task raised {type(exc).__name__}: {str(exc)[:300]}, which its worker process could "
                           f"not pass back ({type(why).__name__}: {str(why)[:200]})") from None
        raise
    return pickle.dumps(result, protocol=pickle.HIGHEST_PROTOCOL)


def _exit_with_parent(parent_pid: int, every_s: float = 1.0) -> None:
    """A pool worker's initializer: a daemon thread ends the worker once its
    parent is gone. A parent stopped by a signal (``kill``, a scheduler's
    time limit) runs no clean-up, and its workers would otherwise compute on,
    unseen, for as long as their current task lasts.

    The worker also ignores SIGINT: a terminal's Ctrl-C reaches every process
    of the foreground group, and each worker printed its KeyboardInterrupt
    traceback above the parent's one line; the parent ends its workers itself.

    Its progress bars take a thread lock, not tqdm's default multiprocessing
    lock: that one is a named semaphore in a spawned process, unlinked only
    when the process exits normally, and a worker the parent terminates (a
    failed ``map``) or one that ends with its parent left it behind, for the
    resource tracker to warn of ("2 leaked semaphore objects") under the
    parent's error line. A spawned worker shares that lock with no other
    process, so it guarded nothing a thread lock does not."""
    import signal
    import threading
    import time

    from tqdm import tqdm

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    tqdm.set_lock(threading.RLock())

    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(every_s)
        os._exit(1)

    threading.Thread(target=watch, name="exit-with-parent", daemon=True).start()


class ProcessExecutor(Executor):
    """A pool of ``workers`` local processes (default: the machine's cores),
    started with ``spawn`` so no torch state is forked.

    Arguments and results cross as plain pickles (bytes), not through torch's
    multiprocessing reductions: those move every tensor sent or received to
    shared memory and keep one file descriptor open per storage in this
    process, which a few hundred nodes' models and data exhaust (``Too many
    open files``). At most ``2 x workers`` tasks are in flight, each pickled
    only when it is submitted, so memory does not grow with the task count.
    A worker ends itself within a second of its parent's death, however the
    parent was stopped. A task's exception is raised in the caller as it
    was (one that cannot be pickled, or not rebuilt from its pickle, as one
    :class:`fol.errors.FOLError` line saying what the task raised), at once (after ``on_result`` for every task that finished before or
    with it): the tasks not yet started are dropped and the workers still
    running others are terminated (an error, or Ctrl-C, does not wait for
    the rest of the work); the next ``map`` starts a fresh pool. A worker
    that dies without an exception (killed, e.g. by the out-of-memory
    killer) ends ``map`` with one :class:`fol.errors.FOLError` line, and the
    pool cannot run tasks again.
    """

    kind = "process"

    def __init__(self, workers: int | None = None, threads: int | None = 1) -> None:
        super().__init__(threads)
        import multiprocessing as mp

        self.workers = workers or os.cpu_count() or 1
        self._context = mp.get_context("spawn")
        self._pool: ProcessPoolExecutor | None = None
        self._start_pool()

    def _start_pool(self) -> ProcessPoolExecutor:
        self._pool = ProcessPoolExecutor(max_workers=self.workers, mp_context=self._context,
                                         initializer=_exit_with_parent, initargs=(os.getpid(),))
        return self._pool

    def _stop_workers(self) -> None:
        """End the pool now: cancel what has not started, terminate the workers
        (also those computing a task), and wait until they are gone, so no
        process outlives the failed ``map``."""
        pool, self._pool = self._pool, None
        if pool is None:
            return
        # Private attributes, on purpose: before Python 3.14 (terminate_workers()) concurrent.futures
        # has no public way to end a worker that is running a task; shutdown(cancel_futures=True) only
        # drops the queued ones and then waits for (or, wait=False, leaves running) the rest. Our own
        # handles would need other internals (a context whose Process records its instances), and the
        # manager thread is what fails the futures of the ended workers and joins them.
        processes = list((pool._processes or {}).values())  # shutdown() forgets them
        manager = pool._executor_manager_thread
        pool.shutdown(wait=False, cancel_futures=True)
        for p in processes:
            if p.is_alive():
                p.terminate()
        if manager is not None:  # it sees the workers gone, fails their futures and joins them
            manager.join(timeout=30)
        for p in processes:
            p.join(timeout=5)
            if p.is_alive():  # pragma: no cover - a worker that ignored SIGTERM
                p.kill()
                p.join()

    def map(self, fn: Callable[[Any], Any], items: Sequence[Any], desc: str | None = None,
            on_result: OnResult = None) -> list[Any]:
        import pickle
        from concurrent.futures import FIRST_COMPLETED, wait

        from concurrent.futures.process import BrokenProcessPool

        pool = self._pool or self._start_pool()  # a map that failed ended the last one
        todo = iter(enumerate(items))
        pending: dict[Any, int] = {}
        out: list[Any] = [None] * len(items)

        def submit_next() -> None:
            nxt = next(todo, None)
            if nxt is not None:
                i, item = nxt
                payload = pickle.dumps((fn, item, self.threads), protocol=pickle.HIGHEST_PROTOCOL)
                pending[pool.submit(_run_pickled, payload)] = i

        try:
            for _ in range(2 * self.workers):
                submit_next()
            with _bar(len(items), desc) as bar:
                while pending:
                    done, _ = wait(pending, return_when=FIRST_COMPLETED)
                    # the successes first: a task that failed beside them must not cost their
                    # results (on_result checkpoints them) when its exception is raised
                    for f in sorted(done, key=lambda f: (f.exception() is not None, pending[f])):
                        i = pending.pop(f)
                        out[i] = pickle.loads(f.result())  # our own worker's pickle
                        if on_result is not None:
                            on_result(i, out[i])
                        bar.update()
                        submit_next()
        except BrokenProcessPool:
            # a worker died without raising (SIGKILL, the out-of-memory killer, a crash in native
            # code): concurrent.futures says only that, and the pool is unusable from now on
            raise FOLError(f"a worker process of the process executor ended abruptly{f' during {desc}' if desc else ''} "
                           "(killed by a signal, e.g. the out-of-memory killer, or crashed); fewer workers "
                           "(--workers, run.workers) need less memory") from None
        except BaseException:
            # a task raised, on_result raised, or Ctrl-C: the caller hears it now, not once
            # every task already started (or queued in the workers' pipe) has run to its end
            if any(not f.done() for f in pending):
                self._stop_workers()
            raise
        finally:
            for f in pending:
                f.cancel()
        return out

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)


# --------------------------------------------------------------------------- Ray

# Objects of the shared types (each node's data) cross to Ray workers once:
# the driver ray.put()s each such object the first time a task argument holds
# it, and every later task carries only its ObjectRef. A worker remembers which
# ref each object came from, so a task that returns the object (a NodeState
# holds its data) sends back the ref, and the driver maps it to its own copy.
# The driver's entries hold the object weakly: once the caller drops it (a
# finished seed's nodes), its entry and ref go, and the store's copy with them.
_DRIVER_SHARED: dict[int, tuple[Any, Any]] = {}  # id(obj) -> (weakref to obj, ref), the driver's puts
_DRIVER_BY_REF: dict[bytes, Any] = {}  # ref binary -> weakref to obj (the driver's own object)
_WORKER_SEEN: dict[int, tuple[Any, Any]] = {}  # id(obj) -> (weakref to obj, ref), objects tasks received
_PUTS = [0]  # objects put so far by this process (for tests and logs)
_IS_WORKER = [False]  # this process runs Ray tasks


def _default_shared_types() -> tuple[type, ...]:
    from fol.data import NodeData

    return (NodeData,)


def _shared_state(obj: Any) -> Any:
    """Serializer of a shared object: its ObjectRef (put once per object)."""
    import ray

    hit = _DRIVER_SHARED.get(id(obj))
    if hit is not None and hit[0]() is obj:
        return hit[1]
    seen = _WORKER_SEEN.get(id(obj))
    if seen is not None and seen[0]() is obj:
        return seen[1]
    # the object's fields, not the object: pickling it would call this serializer again
    ref = ray.put((type(obj), obj.__dict__))
    _PUTS[0] += 1
    if not _IS_WORKER[0]:  # a task's own new objects are not kept alive in the worker
        key, binary = id(obj), ref.binary()
        _DRIVER_SHARED[key] = (weakref.ref(obj), ref)
        _DRIVER_BY_REF[binary] = _DRIVER_SHARED[key][0]
        weakref.finalize(obj, _forget_shared, key, binary).atexit = False
    return ref


def _forget_shared(key: int, binary: bytes) -> None:
    """The driver dropped a shared object: drop its entries (and so its ref)."""
    _DRIVER_BY_REF.pop(binary, None)
    hit = _DRIVER_SHARED.get(key)
    if hit is not None and hit[1].binary() == binary:
        del _DRIVER_SHARED[key]


def _shared_object(ref: Any) -> Any:
    """Deserializer: the driver's own object, or the object fetched from the store."""
    import ray

    mine = _DRIVER_BY_REF.get(ref.binary())
    own = mine() if mine is not None else None
    if own is not None:
        return own
    cls, state = ray.get(ref)
    obj = cls.__new__(cls)
    obj.__dict__.update(state)
    if len(_WORKER_SEEN) > 4096:  # forget objects that are gone
        for key in [k for k, (w, _) in _WORKER_SEEN.items() if w() is None]:
            del _WORKER_SEEN[key]
    _WORKER_SEEN[id(obj)] = (weakref.ref(obj), ref)
    return obj


def _register_shared(types: Sequence[type]) -> None:
    from ray.util import register_serializer

    for cls in types:
        register_serializer(cls, serializer=_shared_state, deserializer=_shared_object)


def _run_on_ray(args: tuple[Callable[[Any], Any], Any, int | None, tuple[type, ...]]) -> Any:
    fn, item, threads, shared = args
    _register_shared(shared)  # so that results holding shared objects send refs back
    _IS_WORKER[0] = True
    return _run_with_threads((fn, item, threads))


def _ray_failure(exc: BaseException, desc: str | None) -> BaseException:
    """What the caller sees of a task that failed on Ray: the task's own
    exception as it raised it (Ray's ``RayTaskError`` wraps it with the remote
    traceback, in colour, into its message; the traceback is kept as a note,
    shown with ``--debug``), or, when the task ended without one of its own
    (its worker or node died, it ran out of memory, its code could not be
    loaded on the cluster), one :class:`fol.errors.FOLError` line. An
    exception of the task that Ray cannot carry back (it cannot be pickled,
    or not rebuilt from its pickle) is one FOLError line too, ending with the
    last line of the task's traceback (what it raised); Ray's whole message
    is kept as a note."""
    from ray.exceptions import RayError, RayTaskError

    if isinstance(exc, RayTaskError):
        cause = exc.cause
        if isinstance(cause, BaseException) and not isinstance(cause, RayError):
            cause.add_note(f"raised in a Ray task: {exc}")
            return cause
        exc = cause if isinstance(cause, RayError) else exc
    text = str(exc)
    lines = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("\x1b")]
    reason = next((ln for ln in lines if not ln.startswith("At least one of the input arguments")), type(exc).__name__)
    during = f" during {desc}" if desc else ""
    # Ray's message of an exception it could not carry back ("... isn't serializable", "Failed to
    # deserialize exception") ends with the task's own traceback, whose last line is what it raised
    if any(ln.startswith("Original exception") for ln in lines) and lines[-1] != reason:
        error = FOLError(f"a Ray task{during} raised {lines[-1][:300]}, which Ray could not bring back to this "
                         f"process: {reason[:300]} ({type(exc).__name__})")
        error.add_note(f"from Ray: {text}")
        return error
    return FOLError(f"a Ray task{during} ended without a result: {reason[:300]} ({type(exc).__name__})")


def _host_port(address: str) -> tuple[str, int] | None:
    """``(host, port)`` of ``host:port``, ``[v6]:port`` or ``ray://host:port``; ``None`` if it is none of those."""
    hostport = address.removeprefix("ray://").rstrip("/")
    host, sep, port = hostport.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not is_decimal(port, 5) or not 0 < int(port) < 65536 or any(c in host for c in "/@ \t"):
        return None
    return host, int(port)


def _unreachable(host: str, port: int, timeout_s: float) -> str | None:
    """Why nothing accepted a TCP connection at ``host:port`` within ``timeout_s``
    (refused, unreachable, unknown host, timed out), or ``None`` when something did."""
    import socket

    try:
        socket.create_connection((host, port), timeout=timeout_s).close()
    except (OSError, ValueError) as exc:
        return getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
    return None


#: seconds a throw-away driver is given to join the cluster at a ``host:port`` that accepts connections
#: (:func:`check_ray_address`); joining one takes a few seconds
RAY_JOIN_TIMEOUT_S = 30.0
_JOINED: set[str] = set()  # host:port addresses a throw-away driver joined (checked once per process)


def _join_failure(address: str, timeout_s: float) -> str | None:
    """Why a driver could not join the Ray cluster at ``address`` within ``timeout_s``
    (tried by a throw-away ``python -c`` process, whose output, Ray's C++ log lines
    included, stays there), or ``None`` when it joined."""
    import subprocess

    code = ("import sys, ray; ray.init(address=sys.argv[1], log_to_driver=False, configure_logging=False, "
            "include_dashboard=False)")
    try:
        r = subprocess.run([sys.executable, "-c", code, address], capture_output=True, text=True, timeout=timeout_s,
                           stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return f"no Ray cluster's head answered there within {timeout_s:.0f} s"
    if r.returncode == 0:
        return None
    lines = [ln.strip() for ln in r.stderr.splitlines() if ln.strip()]
    return f"a driver could not join it: {lines[-1][:300] if lines else f'exit code {r.returncode}'}"


def _token_hint() -> str:
    """What to add to a failure to join a ``host:port`` cluster when RAY_AUTH_MODE is unset (a cluster
    that ``ray start`` started takes drivers in token mode only), else nothing."""
    if "RAY_AUTH_MODE" in os.environ:
        return ""
    return ("; a cluster started with 'ray start' uses token authentication: run with RAY_AUTH_MODE=token, "
            "or use --ray-address auto on its head machine")


def check_ray_address(address: str | None, timeout_s: float = 5.0, join_timeout_s: float | None = None,
                      field: str = "run.ray_address") -> None:
    """Refuse an address that is not ``"auto"``, ``"local"``, ``host:port`` or
    ``ray://host:port`` (Ray itself found out only when it was joined, after the
    contact search and with the output folder started), and in seconds a
    ``host:port`` or ``ray://host:port`` where nothing accepts a connection: Ray
    retries such an address for minutes (about 40 s per attempt, 20 attempts)
    and does not stop on Ctrl-C or ``kill`` meanwhile. ``None`` is a local instance.
    A ``host:port`` that accepts connections must take a driver within
    ``join_timeout_s`` (:data:`RAY_JOIN_TIMEOUT_S`): something that is not a Ray
    head, or a head that gives an address this machine does not reach, had Ray
    retry for minutes too, printing three C++ log lines every 40 s. The refusals name the
    address as ``field`` (``fol simulate``'s check: ``run.ray_address (or --ray-address)``)."""
    if address is None or address in ("auto", "local"):
        return
    hostport = _host_port(address)
    if hostport is None:
        raise ConfigError(f"{field} {shown(address)}: expected 'auto' (on the cluster's head machine), "
                          "'local' (a new Ray instance on this machine), host:port (a cluster started with "
                          "ray start) or ray://host:port (Ray Client)")
    host, port = hostport
    reason = _unreachable(host, port, timeout_s)
    if reason is not None:
        raise ConfigError(f"{field} {shown(address)}: no Ray cluster answers at {brief(f'{host}:{port}')} ({reason}); "
                          "start it first (ray start --head) or correct the address")
    if address.startswith("ray://") or address in _JOINED:
        return
    why = _join_failure(address, RAY_JOIN_TIMEOUT_S if join_timeout_s is None else join_timeout_s)
    if why is not None:
        hint = _token_hint() if "auth" in why.lower() or "token" in why.lower() else ""
        raise ConfigError(f"{field} {shown(address)}: something accepts connections at {brief(f'{host}:{port}')}, but {why} "
                          f"(is it the GCS port of a Ray head, and does this machine reach the address the cluster "
                          f"gives for it?){hint}")
    _JOINED.add(address)


#: seconds the head of the Ray cluster (its GCS server) may accept no connection while ``RayExecutor.map``
#: waits for tasks before the map gives up with one line. Ray's own driver waits 60 s
#: (``gcs_rpc_server_reconnect_timeout_s``) and then ends the whole process from its C++ code.
HEAD_LOST_AFTER_S = 15.0
#: seconds between two looks at the head while no task finishes (a look is one TCP connection)
HEAD_CHECK_EVERY_S = 1.0
#: seconds a driver that joined a cluster lets Ray wait for a lost head before Ray ends the process
#: (``RAY_gcs_rpc_server_reconnect_timeout_s``, unless set already). Ray's own 60 s ended a run whose
#: head died between two maps (while it evaluated or wrote results) from C++, with Ray's log line and
#: exit code 1; the next ``map`` notices the lost head itself and ends in one line.
GCS_RECONNECT_S = 7 * 24 * 3600


def _lost_cluster(what: str, why: str, desc: str | None) -> FOLError:
    """The one line of a driver that lost its Ray cluster: ``what`` happened (``why``)."""
    during = f" during {desc}" if desc else ""
    return FOLError(f"{what}{during} ({why}); what the run saved so far is kept: once the cluster is "
                    "back, continue it with fol simulate --resume OUT")


class _HeadWatch:
    """Whether the head of a Ray cluster still accepts connections at ``host:port``.
    :meth:`check` (called while no task finishes) gives one :class:`fol.errors.FOLError`
    line once connections have failed for ``lost_after_s`` without one that succeeded;
    a long task is not a lost head, only the GCS connection counts."""

    def __init__(self, host: str, port: int, lost_after_s: float | None = None,
                 clock: Callable[[], float] | None = None) -> None:
        import time

        self.host, self.port = host, port
        self.lost_after_s = HEAD_LOST_AFTER_S if lost_after_s is None else lost_after_s
        self.clock = clock or time.monotonic
        self.silent_since: float | None = None  # when the first of the failed connections in a row began

    def unreachable(self) -> str | None:
        """Why the head accepted no connection just now, or ``None`` when it did."""
        return _unreachable(self.host, self.port, timeout_s=min(5.0, self.lost_after_s))

    @property
    def stopped(self) -> str:
        return f"the Ray cluster's head at {self.host}:{self.port} stopped answering"

    def check(self, desc: str | None = None) -> FOLError | None:
        """``None`` while the head answers (or has not been silent for ``lost_after_s``), else the error to raise."""
        began = self.clock()
        reason = self.unreachable()
        if reason is None:
            self.silent_since = None
            return None
        if self.silent_since is None:
            self.silent_since = began
        if self.clock() - self.silent_since < self.lost_after_s:
            return None
        return _lost_cluster(self.stopped, f"{reason} for {self.lost_after_s:.0f} s", desc)


def _connection_lost(head: _HeadWatch | None, exc: OSError, desc: str | None) -> FOLError:
    """The error of a Ray call that failed with ``exc``, Ray's own ``IOError``: the driver's
    connection to its node broke (that node died, e.g. with the head of the cluster)."""
    broke = getattr(exc, "strerror", None) or str(exc)[:200] or type(exc).__name__
    reason = head.unreachable() if head is not None else None
    if reason is None:
        return _lost_cluster("this driver lost its connection to its Ray node", broke, desc)
    return _lost_cluster(head.stopped, f"{reason}; this driver's connection to its node: {broke}", desc)


def _head_watch(ray: Any, address: str | None) -> _HeadWatch | None:
    """A watch on the GCS this driver is connected to (the Ray Client server for ``ray://``)."""
    if address and address.startswith("ray://"):
        text = address
    else:
        try:
            text = ray.get_runtime_context().gcs_address
        except Exception:  # pragma: no cover - a Ray Client connection made by the caller
            return None
    hostport = _host_port(text) if isinstance(text, str) else None
    return _HeadWatch(*hostport) if hostport else None


#: the start of Ray's notice (a warning of its logger, printed by the handler Ray puts on its
#: "ray" logger at import) that a Ray instance started without RAY_AUTH_MODE uses token authentication
_AUTH_NOTICE = "Token authentication is enabled for this Ray cluster."


class _NoAuthNotice(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith(_AUTH_NOTICE)


def _private_ray_token() -> None:
    """Before a local Ray instance starts: when Ray would make the user's token itself (token
    authentication on, RAY_AUTH_MODE unset or ``token``, no RAY_AUTH_TOKEN / RAY_AUTH_TOKEN_PATH, no
    ``~/.ray/auth_token`` yet), make it here, readable by its owner only (``~/.ray`` 0700, the file
    0600; 256 random bits as hex, Ray's own form). Ray writes it with the process's umask, 0644 under
    the usual 022: any user of the machine who can reach the home folder could read the token and run
    code on every instance this user starts. A token file that exists already is Ray's and the
    user's; it is left as it is. Nothing is written when the home folder cannot take it (Ray then
    says so itself)."""
    import secrets
    from pathlib import Path

    if os.environ.get("RAY_AUTH_MODE", "token").lower() != "token":
        return
    if os.environ.get("RAY_AUTH_TOKEN") or os.environ.get("RAY_AUTH_TOKEN_PATH"):
        return
    try:
        folder = Path.home() / ".ray"
        folder.mkdir(mode=0o700, exist_ok=True)
        fd = os.open(folder / "auth_token", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except (OSError, RuntimeError):  # there already, or no home folder to write: Ray's own way
        return
    with os.fdopen(fd, "w") as fh:
        fh.write(secrets.token_hex(32))


@contextlib.contextmanager
def _auth_notice_muted() -> Iterator[None]:
    """While ``ray.init`` runs: Ray's notice :data:`_AUTH_NOTICE`, and only that record, does
    not reach the terminal amid ``fol simulate``'s log. Ray gives it when it turns token
    authentication on by itself (RAY_AUTH_MODE unset): for the local instance it starts for this
    process, or with ``auto`` when a token file exists. Ray's other log lines and its errors
    (exceptions) pass as before."""
    logger = logging.getLogger("ray._private.authentication.authentication_token_setup")
    muted = _NoAuthNotice()
    logger.addFilter(muted)
    try:
        yield
    finally:
        logger.removeFilter(muted)


def cluster_address(address: str | None) -> str | None:
    """The Ray cluster ``address`` joins, or ``None`` for a new Ray instance on this machine (no address, or
    ``"local"``, which means the same): a run on such an instance counts this machine's cores.

    >>> cluster_address("local"), cluster_address(None), cluster_address("10.0.0.5:6379")
    (None, None, '10.0.0.5:6379')
    """
    return None if address in (None, "", "local") else address


class RayExecutor(Executor):
    """Node work as Ray tasks. ``address=None`` (or ``"local"``) starts a local Ray instance
    (with ``num_cpus`` CPUs, listening on 127.0.0.1 only; also when ``RAY_ADDRESS`` is set or a cluster
    started with ``ray start`` runs on this machine);
    ``"auto"``, ``"host:port"`` (a cluster started with ``ray start``) or
    ``"ray://host:port"`` (Ray Client) joins an existing cluster.

    Each node's data (objects of ``shared_types``, by default
    :class:`fol.data.NodeData`) goes to the object store once, with
    ``ray.put``; tasks carry only its reference, so the same data is not
    pickled again into every task of every round. Results come back one by
    one as tasks finish (``ray.wait``), and each is fetched and released at
    once, so the driver holds no more than the results themselves. When a
    task fails (or ``on_result`` raises, or Ctrl-C), the results of the tasks
    that finished before or with it reach ``on_result`` first, then every task
    still queued or running is cancelled (``ray.cancel(force=True)``, which
    ends the worker process of a running one) before the error reaches the
    caller: on a cluster the driver joined, which outlives it, no node work is
    left holding CPUs. A task's exception is raised as the task raised it
    (not as Ray's ``RayTaskError``, whose message is the remote traceback); a
    task that ended without one (its worker or node died after Ray's retries,
    its code could not be loaded) is one :class:`fol.errors.FOLError` line,
    as is one that Ray cannot carry back (not picklable), naming what it raised.
    While no task finishes, ``map`` looks every :data:`HEAD_CHECK_EVERY_S`
    whether the cluster's head accepts a connection; a head that has accepted
    none for :data:`HEAD_LOST_AFTER_S` ends it with one FOLError line (Ray's
    own driver would wait 60 s and then end the process from its C++ code),
    as does a Ray call that fails because the driver's connection to its
    node broke (Ray's own ``OSError``, e.g. "Broken pipe"). A refusal of ``address`` names it as
    ``address_field`` (:func:`check_ray_address`'s ``field``).
    """

    kind = "ray"

    def __init__(self, address: str | None = None, threads: int | None = 1, num_cpus: int | None = None,
                 shared_types: Sequence[type] | None = None, address_field: str = "run.ray_address") -> None:
        super().__init__(threads)
        try:
            import ray
        except ImportError:
            raise ConfigError("executor 'ray' needs Ray: pip install 'fol-swarm[ray]'") from None
        self._ray = ray
        self._owns = not ray.is_initialized()
        if self._owns:
            check_ray_address(address, field=address_field)
            address = cluster_address(address)
            kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False, "configure_logging": False}
            if address:
                kwargs["address"] = address
                os.environ.setdefault("RAY_gcs_rpc_server_reconnect_timeout_s", str(GCS_RECONNECT_S))
            else:  # 'local': Ray would otherwise join whatever RAY_ADDRESS or a running 'ray start' names
                kwargs["address"] = "local"
                kwargs["_node_ip_address"] = "127.0.0.1"  # listening on 127.0.0.1 only (_loopback_kept)
                if num_cpus:
                    kwargs["num_cpus"] = num_cpus
            try:
                if not address:
                    _private_ray_token()
                with _loopback_kept() if not address else contextlib.nullcontext(), _auth_notice_muted():
                    ray.init(**kwargs)
            except Exception as e:  # Ray's node startup timing out raises a bare Exception
                if type(e) is not Exception and not isinstance(e, (ConnectionError, ValueError, RuntimeError)):
                    raise  # a TypeError, a KeyError ...: a bug, with its traceback
                if not address:
                    raise ConfigError(f"executor 'ray': cannot start a local Ray instance ({brief(e, 300)})") from None
                hint = _token_hint() if address != "auto" else ""
                raise ConfigError(f"{address_field} {shown(address)}: cannot join a Ray cluster there ({brief(e, 300)}){hint}") from None
        self.shared_types = tuple(shared_types) if shared_types is not None else _default_shared_types()
        _register_shared(self.shared_types)
        self._remote = ray.remote(num_cpus=1)(_run_on_ray)
        self._head = _head_watch(ray, address)

    @property
    def shared_puts(self) -> int:
        """Shared objects put in the object store so far (one per distinct node data object)."""
        return _PUTS[0]

    def map(self, fn: Callable[[Any], Any], items: Sequence[Any], desc: str | None = None,
            on_result: OnResult = None) -> list[Any]:
        ray = self._ray
        index: dict[Any, int] = {}
        pending: list[Any] = []
        out: list[Any] = [None] * len(items)

        def take(ref: Any) -> None:
            i = index.pop(ref)
            with self._cluster_calls(desc):
                out[i] = ray.get(ref)
            if on_result is not None:
                on_result(i, out[i])

        try:
            with self._cluster_calls(desc):
                for i, item in enumerate(items):
                    pending.append(self._remote.remote((fn, item, self.threads, self.shared_types)))
                    index[pending[-1]] = i
            with _bar(len(pending), desc) as bar:
                while pending:
                    with self._cluster_calls(desc):
                        done, pending = ray.wait(pending, num_returns=1, timeout=HEAD_CHECK_EVERY_S)
                    if not done:  # nothing finished meanwhile (a long task is no failure): is the head there?
                        lost = self._head.check(desc) if self._head is not None else None
                        if lost is not None:
                            raise lost
                        continue
                    try:  # stream: fetch each result as its task ends, then drop the ref
                        take(done[0])
                    except ray.exceptions.RayError:
                        # the tasks that finished beside the failure: their results (on_result
                        # checkpoints them) are handed over before it is raised
                        with self._cluster_calls(desc):
                            ready, pending = (ray.wait(pending, num_returns=len(pending), timeout=0) if pending
                                              else ([], []))
                        for ref in ready:
                            try:
                                take(ref)
                            except ray.exceptions.RayError:
                                pass
                        failure = sys.exc_info()[1]
                        raise _ray_failure(failure, desc) from None
                    bar.update(1)
        except BaseException:
            # a task failed, on_result raised, or Ctrl-C: the tasks still queued or running are
            # cancelled, the running ones with their worker, so that they do not hold a cluster's
            # CPUs (a joined cluster is not shut down with this driver) once the caller has the error
            self._cancel(pending)
            raise
        return out

    @contextlib.contextmanager
    def _cluster_calls(self, desc: str | None) -> Iterator[None]:
        """Around the driver's own Ray calls: an ``OSError`` that Ray raises itself (its
        ``IOError``, e.g. "Broken pipe": the driver's connection to its node broke) is one
        :class:`fol.errors.FOLError` line. A task's failure (a ``RayError``, also one that
        wraps a task's own OSError) passes as it is."""
        try:
            yield
        except self._ray.exceptions.RayError:
            raise
        except OSError as exc:
            raise _connection_lost(self._head, exc, desc) from None

    def _cancel(self, refs: list[Any], timeout_s: float = 10.0) -> None:
        """Cancel the tasks of ``refs`` (force: a running one's worker is ended),
        again for those not confirmed ended a second later (Ray's cancel is best
        effort), for up to ``timeout_s``."""
        import time

        ray = self._ray
        deadline = time.monotonic() + timeout_s
        while refs:
            for ref in refs:
                try:
                    ray.cancel(ref, force=True)
                except Exception:  # pragma: no cover - finished meanwhile, or the cluster is gone
                    pass
            if time.monotonic() > deadline:
                log.warning("%d Ray task(s) did not confirm their cancellation within %.0f s", len(refs), timeout_s)
                return
            try:
                _, refs = ray.wait(refs, num_returns=len(refs), timeout=1.0, fetch_local=False)
            except Exception:  # pragma: no cover - the cluster is gone
                return

    def close(self) -> None:
        _DRIVER_SHARED.clear()
        _DRIVER_BY_REF.clear()
        try:
            from ray.util import deregister_serializer

            for cls in self.shared_types:
                deregister_serializer(cls)
        except Exception:  # pragma: no cover - Ray already shut down
            pass
        if self._owns and self._ray.is_initialized():
            self._ray.shutdown()


def make_executor(kind: str, *, workers: int | None = None, threads: int | None = None, ray_address: str | None = None,
                  ray_address_field: str = "run.ray_address") -> Executor:
    """Build the executor named ``kind`` (``local``, ``process`` or ``ray``); a refusal of ``ray_address`` names it as
    ``ray_address_field``."""
    if kind == "local":
        return LocalExecutor(threads)
    if kind == "process":
        return ProcessExecutor(workers, threads if threads is not None else 1)
    if kind == "ray":
        return RayExecutor(ray_address, threads if threads is not None else 1, num_cpus=workers,
                           address_field=ray_address_field)
    raise ConfigError(f"executor {kind!r} is unknown; expected one of {', '.join(EXECUTORS)}")


# --------------------------------------------------------------------------- a Ray cluster on this machine

@contextlib.contextmanager
def _loopback_kept() -> Iterator[None]:
    """While a Ray node is started here: a node IP of ``127.0.0.1`` stays that.
    Ray's servers (GCS, raylet, object manager, workers, agents) listen on
    127.0.0.1 only when their node's IP is 127.0.0.1, else on every interface,
    but Ray >= 2.4x replaces a given 127.0.0.1 with the machine's address
    (``resolve_ip_for_localhost``: on Linux it assumes a multi-machine cluster);
    its only switch against that, ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``, is
    read once at import and makes ``ray start --address`` (a second raylet) exit."""
    from ray._private import services

    resolve = getattr(services, "resolve_ip_for_localhost", None)
    if resolve is None:  # a Ray release without it keeps the IP it is given
        yield
        return
    services.resolve_ip_for_localhost = lambda host: host
    try:
        yield
    finally:
        services.resolve_ip_for_localhost = resolve


def _ray_start_on_loopback() -> None:  # pragma: no cover - runs as a node's 'ray start' process
    """``ray start`` with the arguments of this process, the node on 127.0.0.1 (:func:`_loopback_kept`)."""
    from ray.scripts.scripts import main

    sys.argv[:1] = ["ray", "start"]
    with _loopback_kept():
        main()


#: a ``python -c`` program: ``ray start`` on 127.0.0.1 with the arguments after it
_RAY_START = "from fol.executors import _ray_start_on_loopback; _ray_start_on_loopback()"


def _free_ports(n: int, host: str = "127.0.0.1") -> list[int]:
    """``n`` distinct TCP ports free on ``host`` right now (bound to port 0, then released)."""
    import socket

    socks, ports = [], []
    try:
        while len(ports) < n:
            s = socket.socket()
            s.bind((host, 0))
            socks.append(s)
            if s.getsockname()[1] not in ports:
                ports.append(s.getsockname()[1])
    finally:
        for s in socks:
            s.close()
    return ports


def _end_cluster(procs: list[Any], logs: list[str], folder: str | None, grace_s: list[float]) -> None:
    """:meth:`LocalRayCluster.stop`: SIGTERM to the process group of each of ``procs``
    (the last started first), SIGKILL to whatever is left of them ``grace_s[0]`` seconds
    later (one wait for all of them, not one per node), then remove ``folder`` (``None``: keep it)."""
    import shutil
    import signal
    import time

    try:
        for p in reversed(procs):
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        deadline = time.monotonic() + grace_s[0]
        while any(p.poll() is None for p in procs) and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:  # also when interrupted while waiting: nothing is left running, the folder goes
        for p in reversed(procs):
            try:  # whatever of the node is left in its process group
                os.killpg(p.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            p.wait()
        procs.clear()
        logs.clear()
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)


#: How Ray's ``ray start`` says it gave up on its raylet: the raylet did not register with the GCS within
#: the 30 s Ray allows (``ray/_private/node.py``, a constant, not a setting), which a busy machine can pass
#: (seen under the test suite's two workers). :meth:`LocalRayCluster.start` starts the nodes again then,
#: while its own deadline lasts.
RAY_STARTUP_TIMED_OUT = "The current node timed out during startup"


class LocalRayCluster:
    """A real multi-node Ray cluster on this machine: a head raylet plus
    ``workers`` more raylets, each started with ``ray start`` as separate node
    processes on ``127.0.0.1`` (every server of every node listens there only,
    not on the machine's other interfaces; a driver joins it with ``env``,
    which makes Ray keep ``127.0.0.1``), on distinct free ports and in a private temp
    folder. :meth:`stop` (or leaving the ``with`` block, also on errors and
    Ctrl-C, and a :meth:`start` that fails or times out) stops exactly the
    processes it started (their process groups), never other Ray instances of
    the machine, and removes the temp folder it made (its ``/tmp/rayc-*``
    with Ray's session, logs and token; a ``temp_dir`` the caller gave is
    kept, e.g. to read the logs). A cluster still running when it is garbage
    collected or the interpreter exits is stopped then. A stopped cluster is
    not started again. Every wait of :meth:`start` ends at one deadline,
    ``timeout_s`` after it began (the stop that follows a timeout adds up to
    :attr:`STOP_GRACE_FAILED_S`).
    ``address`` is what ``--ray-address`` takes.

    Each ``ray start`` runs with ``--block`` in its own session, so ending its
    process group ends that node's raylet, object store and workers.
    """

    def __init__(self, workers: int = 1, cpus_per_node: int = 1, object_store_mb: int = 200,
                 timeout_s: float = 120.0, temp_dir: str | None = None) -> None:
        import importlib.util
        import tempfile

        if importlib.util.find_spec("ray") is None:  # each node is 'ray start' run by this Python
            raise ConfigError("LocalRayCluster needs Ray: pip install 'fol-swarm[ray]'")
        self.workers = workers
        self.cpus_per_node = cpus_per_node
        self.object_store_bytes = object_store_mb * 2**20
        self.timeout_s = timeout_s
        # a short path: Ray's socket names must fit in 107 characters
        self.temp_dir = temp_dir or tempfile.mkdtemp(prefix="rayc-", dir="/tmp")
        self.procs: list[Any] = []
        self.logs: list[str] = []  # the log file of each process in ``procs``
        self.address = ""
        # stop() is this finalizer: it runs once, at stop() or when this object is collected or Python exits
        # the grace of the stop: STOP_GRACE_S, or STOP_GRACE_FAILED_S once a start failed
        self._grace_s = [self.STOP_GRACE_S]
        self._end = weakref.finalize(self, _end_cluster, self.procs, self.logs, None if temp_dir else self.temp_dir,
                                     self._grace_s)
        # Ray >= 2.5x turns on token authentication for clusters started with ``ray start``,
        # and newer releases no longer create a missing token: the cluster gets its own
        # random token in its private folder (mode 0600), given to every node and driver
        # through ``env``, unless the caller already names one. ~/.ray is never touched.
        # RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0: a driver's ray.init keeps the address 127.0.0.1 (and its own
        # node IP) instead of replacing it with the machine's address, where nothing listens (_loopback_kept)
        self.env = {"RAY_AUTH_MODE": os.environ.get("RAY_AUTH_MODE", "token"), "RAY_USAGE_STATS_ENABLED": "0",
                    "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}
        if self.env["RAY_AUTH_MODE"] == "token" and not (os.environ.get("RAY_AUTH_TOKEN")
                                                         or os.environ.get("RAY_AUTH_TOKEN_PATH")):
            import secrets

            token_path = os.path.join(self.temp_dir, "auth_token")
            if os.path.lexists(token_path):  # a reused folder: a fresh token, created owner-only
                os.remove(token_path)
            fd = os.open(token_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as fh:
                fh.write(secrets.token_hex(32))
            self.env["RAY_AUTH_TOKEN_PATH"] = token_path

    def _node_args(self) -> list[str]:
        (om, nm, mt, dal, dag, rte) = _free_ports(6)
        return [f"--object-manager-port={om}", f"--node-manager-port={nm}",
                f"--metrics-export-port={mt}", f"--dashboard-agent-listen-port={dal}",
                f"--dashboard-agent-grpc-port={dag}", f"--runtime-env-agent-port={rte}",
                f"--num-cpus={self.cpus_per_node}", f"--object-store-memory={self.object_store_bytes}",
                "--block", "--disable-usage-stats", "--include-log-monitor=false"]

    def _spawn(self, args: list[str], log_name: str) -> None:
        import subprocess

        # the switch that keeps 127.0.0.1 in a driver makes a second raylet's ray start exit
        env = dict(os.environ, **dict(self.env, RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="1"))
        env.pop("RAY_ADDRESS", None)
        log = os.path.join(self.temp_dir, log_name)
        with open(log, "wb") as fh:  # the child has its own copy of the descriptor
            self.procs.append(subprocess.Popen([sys.executable, "-c", _RAY_START, *args], stdout=fh,
                                               stderr=subprocess.STDOUT, start_new_session=True, env=env))
        self.logs.append(log)

    def _nodes_alive(self, timeout_s: float) -> int:
        """How many nodes are alive, as a throw-away driver sees them; it is killed after
        ``timeout_s`` (its ray.init waits as long as the GCS does not answer: minutes,
        measured, against a port where nothing listens yet)."""
        import subprocess

        code = ("import ray, sys; ray.init(address=sys.argv[1], log_to_driver=False, configure_logging=False); "
                "print(sum(1 for n in ray.nodes() if n['Alive']))")
        r = subprocess.run([sys.executable, "-c", code, self.address], capture_output=True, text=True,
                           timeout=timeout_s, env=dict(os.environ, **self.env))
        return int(r.stdout.strip().splitlines()[-1]) if r.returncode == 0 and r.stdout.strip() else 0

    def start(self) -> "LocalRayCluster":
        import time

        if not self._end.alive:
            raise ConfigError("LocalRayCluster: this cluster was stopped; make a new one to start")
        # one deadline for every wait of the start: the head, the other raylets, each node check
        deadline = time.monotonic() + self.timeout_s
        try:
            while True:
                try:
                    self._start_nodes(deadline)
                    return self
                except ConfigError as e:
                    # Ray's own 30 s for a raylet to register, passed on a busy machine: the nodes are
                    # ended (their folder kept) and started anew on fresh ports while the deadline lasts
                    if RAY_STARTUP_TIMED_OUT not in str(e) or deadline - time.monotonic() < 1.0:
                        raise
                    log.warning("%s; starting the cluster's nodes again (%.0f s of the %.0f s left)", e,
                                deadline - time.monotonic(), self.timeout_s)
                    _end_cluster(self.procs, self.logs, None, [self.STOP_GRACE_FAILED_S])
        except BaseException:  # its nodes are not up (or it was interrupted): they get the short grace
            self._grace_s[0] = min(self._grace_s[0], self.STOP_GRACE_FAILED_S)
            self.stop()
            raise

    def _start_nodes(self, deadline: float) -> None:
        """Start the head, then the other raylets, each waited for until ``deadline``."""
        gcs, dash = _free_ports(2)
        self.address = f"127.0.0.1:{gcs}"
        # the head's node IP 127.0.0.1 (kept by _loopback_kept); the other raylets take the address
        # they reach the head from, 127.0.0.1, as theirs
        head = ["--head", f"--port={gcs}", "--node-ip-address=127.0.0.1", "--include-dashboard=false",
                f"--dashboard-port={dash}", f"--temp-dir={self.temp_dir}"]
        self._spawn(head + self._node_args(), "head.log")
        self._wait(1, deadline)
        for i in range(self.workers):
            self._spawn([f"--address={self.address}"] + self._node_args(), f"worker-{i}.log")
        self._wait(1 + self.workers, deadline)

    @staticmethod
    def _last_line(log: str) -> str:
        """The last non-empty line of a ``ray start`` log (usually why it exited)."""
        with open(log, "rb") as fh:
            lines = [ln.strip() for ln in fh.read()[-4096:].decode(errors="replace").splitlines() if ln.strip()]
        return lines[-1][:300] if lines else "no output"

    def _wait(self, nodes: int, deadline: float) -> None:
        import time

        while True:
            dead = [i for i, p in enumerate(self.procs) if p.poll() is not None]
            if dead:
                i = dead[0]
                raise ConfigError(f"ray start exited with code {self.procs[i].returncode}: "
                                  f"{self._last_line(self.logs[i])}")
            left_s = deadline - time.monotonic()
            if left_s <= 0:
                raise ConfigError(f"Ray cluster: {nodes} nodes not up after {self.timeout_s:.0f} s; the head's log "
                                  f"ends: {self._last_line(self.logs[0])}")
            try:  # a check still waiting at the deadline is killed then (subprocess.TimeoutExpired)
                if self._nodes_alive(left_s) >= nodes:
                    return
            except Exception:  # not up yet
                pass
            time.sleep(max(0.0, min(1.0, deadline - time.monotonic())))

    #: seconds the nodes' process groups are given, all together, to end after SIGTERM before
    #: what is left is killed. A worker raylet ends in about a second; the head often does not
    #: (measured: a head's GCS server, raylet and ``ray start`` still running 8 s after SIGTERM;
    #: Ray's SIGTERM handler drains the node for up to 30 s), so a longer grace only delays the
    #: kill. Before, each node had 5 s of its own, one after the other.
    STOP_GRACE_S = 2.0
    #: the grace when :meth:`start` failed, timed out or was interrupted: nodes that are not up
    #: in time are stuck or dead, and nothing they hold is worth waiting for
    STOP_GRACE_FAILED_S = 0.5

    def stop(self) -> None:
        """End every process this cluster started (worker raylets first, then the head):
        SIGTERM to their process groups, SIGKILL to what is left after :attr:`STOP_GRACE_S`
        (:attr:`STOP_GRACE_FAILED_S` after a failed start; at once on Ctrl-C meanwhile);
        then remove the temp folder it made."""
        self._end()

    def __enter__(self) -> "LocalRayCluster":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()
