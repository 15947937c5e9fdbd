"""Shared helpers of the benchmark scripts (not part of the installed package).

:class:`PeakMemory` is the one memory and CPU probe of the benchmarks: it
samples a process tree (this process and every descendant: forked workers, a
process pool, the raylets and workers of a Ray cluster started from here)
and keeps the peak of its summed PSS, the memory the tree really holds, and
the kernel's per-process peak records summed, an upper bound no spike between
two samples escapes.
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import statistics
import sys
import threading
from typing import Callable, Sequence


def fail(message: str, code: int = 2) -> int:
    """Print ``message`` as the script's one error line on stderr, ``<script>: error: <message>``,
    the style of argparse's own refusals of its command line (``<script>`` is argparse's program
    name: the base name of ``sys.argv[0]``), and return ``code`` for ``main`` to return (or
    ``raise SystemExit(fail(...))``). Every error line of the benchmarks goes through here."""
    print(f"{os.path.basename(sys.argv[0])}: error: {message}", file=sys.stderr)
    return code


def result_line(stdout: str, what: str, kind: type) -> object:
    """The JSON value of type ``kind`` that a measuring child process printed as its last line (a
    benchmark runs each measurement in a fresh interpreter and reads its result so). A child that
    exited 0 without it (its script cut short while being rewritten, a stray print after it) is one
    line, ``<what> gave no result (its last line: ...)``, exit 1, not an IndexError or a
    JSONDecodeError traceback."""
    import json

    from swarmbase.tomlcheck import brief

    last = (stdout.strip().splitlines() or [""])[-1]
    try:
        value = json.loads(last)
    except ValueError:
        value = None
    if not isinstance(value, kind):
        said = f"its last line: {brief(last)}" if last else "it printed nothing"
        raise SystemExit(fail(f"{what} gave no result ({said})", 1))
    return value


def key_values(items: list[str], what: str) -> dict[str, object]:
    """``KEY=VALUE`` command-line items as a dict (ints and floats parsed; a
    malformed item stops the script with one error line naming ``what``, exit 2 as a
    command-line refusal of argparse)."""
    out: dict[str, object] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise SystemExit(fail(f"{what}: expected KEY=VALUE, got {item!r}"))
        try:
            out[key] = int(value)
        except ValueError:
            try:
                out[key] = float(value)
            except ValueError:
                out[key] = value
    return out


def checked(parse: Callable[[str], object], ok: Callable[[object], bool], want: str) -> Callable[[str], object]:
    """An argparse ``type=``: ``parse`` the text, and refuse it unless ``ok`` holds. A bad value stops
    the script while the command line is read, before any work, with argparse's one error line
    ``argument --flag: expected <want>, got <text>``, the same in every benchmark."""

    def convert(text: str) -> object:
        try:
            value = parse(text)
        except (ValueError, OverflowError):
            value = None
        if value is None or not ok(value):
            raise argparse.ArgumentTypeError(f"expected {want}, got {text}")
        return value

    convert.__name__ = want  # what argparse would name the type in any other message
    return convert


def int_in(lo: int, hi: int | None = None, why: str = "") -> Callable[[str], object]:
    """An integer ``lo`` .. ``hi`` (no upper limit when ``hi`` is None); ``why`` says what the range is for."""
    want = f"an integer >= {lo}" if hi is None else f"an integer in {lo}..{hi}"
    return checked(int, lambda v: lo <= v and (hi is None or v <= hi), want + (f" ({why})" if why else ""))


def positive_float(what: str = "a number") -> Callable[[str], object]:
    """A finite number > 0 (not nan, not inf), described as ``what``."""
    return checked(float, lambda v: 0 < v < math.inf, f"{what} > 0")


def fraction(what: str = "a number") -> Callable[[str], object]:
    """A number strictly between 0 and 1, described as ``what``."""
    return checked(float, lambda v: 0 < v < 1, f"{what} strictly between 0 and 1")


def comma_names(known: Sequence[str], unique: bool = False) -> Callable[[str], object]:
    """Comma-separated names, each one of ``known`` (and with ``unique``, each at most once); the
    value stays the text."""

    def ok(text: str) -> bool:
        names = text.split(",")
        return all(name in known for name in names) and (not unique or len(set(names)) == len(names))

    return checked(str, ok, f"a comma-separated list of {', '.join(known)}" + (", each once" if unique else ""))


def user_seed(text: str) -> object:
    """A seed a user may give (:func:`fol.defaults.is_seed`): an integer 0 .. ``MAX_SEED``."""
    from fol.defaults import MAX_SEED, is_seed

    return checked(int, is_seed, f"a seed in 0..{MAX_SEED}")(text)


def seed_range(ap: argparse.ArgumentParser, first: int, count: int, flags: str) -> range:
    """The seeds ``first`` .. ``first + count - 1`` that ``flags`` (a first seed and a number of seeds,
    each checked by its ``type=``) ask for. When the last one is past ``MAX_SEED``, argparse's one
    error line and exit 2, before any work: the data generators use a seed's low 32 bits, so seed
    ``MAX_SEED + 1`` would draw seed 0's pool again and count it as another seed."""
    from fol.defaults import MAX_SEED

    last = first + count - 1
    if last > MAX_SEED:
        ap.error(f"{flags}: expected seeds in 0..{MAX_SEED}, got {first}..{last} (at most {MAX_SEED - first + 1} "
                 f"seeds from {first})")
    return range(first, first + count)


def pool_fits(ap: argparse.ArgumentParser, n_images: int, image_size: int, what: str) -> None:
    """Refuse, with argparse's one error line and exit 2, a synthetic pool of ``n_images`` images of
    ``image_size`` pixels that :func:`fol.data.geo.check_pool_size` would refuse when it is drawn
    (``what`` names the arguments that size it), before anything is drawn or trained."""
    from fol.data.geo import check_pool_size
    from fol.errors import DataError

    try:
        check_pool_size(n_images, image_size, what)
    except DataError as exc:
        ap.error(str(exc))


def per_core(text: str) -> object:
    """A benchmark's ``--threads`` / ``--workers``: 1 .. 4 per core, the limit of a scenario's
    ``run.threads`` / ``run.workers``."""
    from swarmbase.cli import parallelism_problem, parallelism_range

    return checked(int, lambda v: parallelism_problem(v) is None, parallelism_range())(text)  # its words too


def set_threads(threads: int) -> None:
    """Apply ``--threads`` (checked by its ``type=per_core``) to torch."""
    import torch

    torch.set_num_threads(threads)


def machine_line() -> str:
    import torch  # here, so that scripts that never train do not pay torch's import in their memory peak

    return (f"machine: {platform.processor() or platform.machine()}, {torch.get_num_threads()} torch threads, "
            f"torch {torch.__version__}, python {platform.python_version()}")


def mean_std(values: Sequence[float], signed: bool = False) -> str:
    """'mean ± std' in percent of fractions in [0, 1] (with ``signed``, the
    mean carries its sign, for differences)."""
    sign = "+" if signed else ""
    if len(values) == 1:
        return f"{100 * values[0]:{sign}.2f}"
    return f"{100 * statistics.mean(values):{sign}.2f} ± {100 * statistics.stdev(values):.2f}"


def unwritable_output(path: object, flag: str = "--json") -> bool:
    """Whether the output file ``path`` (None: not asked for) cannot be written, said in
    one error line on stderr (:func:`fail`); a script calls it before any work, not after."""
    if path is None or path == "":
        return False
    from fol.errors import ConfigError
    from fol.fileio import check_output_file

    try:
        check_output_file(path, ConfigError, what=flag)
    except ConfigError as exc:
        fail(str(exc))
        return True
    return False


# --------------------------------------------------------------------------- true peak memory

def _tree(root: int) -> list[int]:
    """``root`` and all its descendants (from /proc/<pid>/task/<tid>/children)."""
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        try:
            for tid in os.listdir(f"/proc/{pid}/task"):
                with open(f"/proc/{pid}/task/{tid}/children") as fh:
                    todo += [int(x) for x in fh.read().split()]
        except OSError:
            continue
    return out


_PAGE_KB = os.sysconf("SC_PAGE_SIZE") // 1024
_TICK_S = 1.0 / os.sysconf("SC_CLK_TCK")


def _rss_kb(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/statm") as fh:
            return int(fh.read().split()[1]) * _PAGE_KB
    except (OSError, IndexError, ValueError):
        return 0


def _proc_kb(pid: int, file: str, field: str) -> int:
    """The kB value of the line ``<field>: <n> kB`` of ``/proc/<pid>/<file>``; 0 when the
    process is gone or the line is missing."""
    try:
        with open(f"/proc/{pid}/{file}") as fh:
            for line in fh:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except (OSError, IndexError, ValueError):
        pass
    return 0


def _pss_kb(pid: int) -> int:
    """Proportional set size: each page shared by k processes counts 1/k to each."""
    return _proc_kb(pid, "smaps_rollup", "Pss")


def _hwm_kb(pid: int) -> int:
    """The kernel's record of the process's peak resident size (``VmHWM``), in kB."""
    return _proc_kb(pid, "status", "VmHWM")


def own_peak_kb() -> int:
    """This process's peak resident kB, for a benchmark's child process to print: its own ``VmHWM``, where
    ``ru_maxrss`` of a child started by fork and exec keeps the parent's resident size at the fork (a child of
    11 MB read 319 MB under a parent holding 300 MB); ``ru_maxrss`` where there is no ``/proc``."""
    import resource

    return _hwm_kb(os.getpid()) or resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def _reset_hwm(pid: int) -> None:
    """Reset the process's ``VmHWM`` to its current resident size (Linux >= 4.0; a
    process this user may not touch keeps its record)."""
    try:
        with open(f"/proc/{pid}/clear_refs", "w") as fh:
            fh.write("5")
    except OSError:
        pass


def _cpu(pid: int) -> tuple[int, float] | None:
    """(start time in ticks, user + system CPU seconds) of one process, from /proc/<pid>/stat."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        return int(fields[19]), (int(fields[11]) + int(fields[12])) * _TICK_S
    except (OSError, IndexError, ValueError):
        return None


class PeakMemory:
    """Samples the memory and CPU of this process tree in a thread every ``interval_s``.

    ``pss_kb``: the peak of the summed proportional set sizes, the memory the
    tree really holds (pages shared after a fork count once in total);
    ``rss_kb``: the peak of the summed resident sizes, which counts shared
    pages once per process (an upper bound). ``cpu_s``: user + system CPU of
    every process seen in the tree while sampling, each at its last sample
    (a process that ends between two samples loses at most ``interval_s``; the
    final sample is taken on exit, so processes alive then count in full),
    less what they had used when sampling began.

    ``hwm_kb``: the kernel's own record of each process's peak resident size
    (``VmHWM``, reset for the processes alive when sampling begins), summed over
    every process seen. No spike between two samples escapes it, so it bounds
    the tree's peak from above where the sampled sums could bound it from
    below: processes that never ran at the same time still add up, and pages
    shared after a fork count once per process. (A process that grows and ends
    between two samples keeps the record of its last sample.)
    """

    def __init__(self, interval_s: float = 0.2) -> None:
        self.interval_s = interval_s
        self.rss_kb = 0
        self.pss_kb = 0
        self._cpu: dict[tuple[int, int], float] = {}
        self._cpu0: dict[tuple[int, int], float] = {}
        self._hwm: dict[tuple[int, int], int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    @property
    def cpu_s(self) -> float:
        return sum(self.cpu_by_pid().values())

    def cpu_by_pid(self) -> dict[int, float]:
        """CPU seconds per process id, counted as in :attr:`cpu_s`."""
        out: dict[int, float] = {}
        for k, v in self._cpu.items():
            out[k[0]] = out.get(k[0], 0.0) + v - self._cpu0.get(k, 0.0)
        return out

    def _sample(self) -> None:
        tree = _tree(os.getpid())
        self.pss_kb = max(self.pss_kb, sum(_pss_kb(p) for p in tree))
        self.rss_kb = max(self.rss_kb, sum(_rss_kb(p) for p in tree))
        for pid in tree:
            got = _cpu(pid)
            if got is not None:
                self._cpu[(pid, got[0])] = got[1]
                self._hwm[(pid, got[0])] = max(self._hwm.get((pid, got[0]), 0), _hwm_kb(pid))

    @property
    def hwm_kb(self) -> int:
        return sum(self._hwm.values())

    def _run(self) -> None:
        while not self._stop.is_set():
            self._sample()
            self._stop.wait(self.interval_s)

    def __enter__(self) -> "PeakMemory":
        for pid in _tree(os.getpid()):
            _reset_hwm(pid)
        self._sample()
        self._cpu0 = dict(self._cpu)
        self._thread.start()
        return self

    def stop(self) -> None:
        """End the sampling now, with a last sample, inside the ``with`` block, to measure one phase of a
        call (``contacts_scale.py --fork-overhead``: a contact search's scan, not the table built after
        it); the block's end then adds nothing."""
        if not self._stop.is_set():
            self._stop.set()
            self._thread.join()
            self._sample()

    def __exit__(self, *exc) -> None:
        self.stop()


#: A node counts as nearly one class (``calibrate_synthetic.py --by-form``, ``paper_tables.py --by-skew``)
#: when this share or more of its test split is one class.
ONE_CLASS_SHARE = 0.9
