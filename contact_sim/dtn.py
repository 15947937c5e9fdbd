"""Contact plans in the DTN tools' formats: ION (text) and HDTN (JSON), in and out.

**ION** (``ionadmin`` contact-plan commands), one direction per line::

    a contact +t0 +t1 FROM TO RATE      # RATE in bytes per second (then an optional confidence, 0..1)
    a range   +t0 +t1 FROM TO OWLT      # one-way light time, seconds

Times are whole seconds relative to the plan start (``+t``), or absolute UTC
``yyyy/mm/dd-hh:mm:ss`` when the plan start is known; a contact's stop time of ``-1`` is ``ionadmin``'s latest
time, :data:`ION_MAX_POSIX_TIME` (2038-01-19T03:14:07Z), which also needs the plan start. ION node numbers are
integers of 1 to 2**64 - 1 (unsigned 64-bit, as ION holds them; an HDTN plan's of 1 to 2**31 - 1,
:data:`HDTN_MAX_NODE_NUMBER`); every number is read in ASCII digits; this project writes node ``i`` as
``i + 1`` and keeps the names in header comments that :func:`read_ion` reads back (only in a plan whose first
line is the first line below, and only the comment lines before its first command; any other ``#`` line is a
comment, as ``ionadmin`` reads it)::

    # fol-swarm contact plan
    # start 2025-03-01T00:00:00Z
    # node 1 WD-P00-S00 satellite

**HDTN** (``contactPlan.json``): ``{"contacts": [{"contact", "source",
"dest", "startTime", "endTime", "rateBitsPerSec", "owlt"}]}``, integers,
rates in **bits** per second, one direction per record.

Rounding (both formats take integers): a window ``[t0, t1]`` is written as
``[ceil(t0), floor(t1)]`` (never longer than the real window), its mean rate
rounded down (to bytes/s for ION, bits/s for HDTN), and the one-way light
time of its mean range rounded up to whole seconds (at least 1); a window shorter than a second once
rounded, or whose rate rounds down to 0 (which the import, as ``ionadmin``, reads as no contact), is left
out. A rate either
tool cannot hold (ION: above 2**32 - 1 bytes/s, ``ionadmin``'s 32-bit rate;
HDTN: above 2**64 - 1 bits/s), a rate that is not a finite number >= 0, a window starting before the
plan start or never ending, a time ION cannot name (after :data:`ION_MAX_POSIX_TIME`, 2038, counted from the
plan start, or from 1970 in a plan of no start; or, in a plan starting before 1970, before 1970) or HDTN cannot
(after 2**31 - 1 s), is refused, naming the
contact, and so is a plan whose every window is left out (the file would hold no contact, and the import
refuses such a plan); every window is checked before anything is written. A plan whose
windows already have whole-second edges and whole byte rates of at least 1 byte/s round-trips
exactly (through ION, unless two of its contacts of one direction meet at different rates, below).

Export writes a two-way window as both directions' contacts and a one-way window as its own
direction's only. ``ionadmin`` takes two contacts of one direction that meet (one ending at the second the next
starts) for an overlap and ignores the later, so the ION export writes such contacts of one rate as one, and of two
rates gives the slower's second where they meet up (:func:`_joins`, one warning counting the bytes left out; a
slower that ends a second sooner ends its last window's range with it, which ION's CGR would otherwise take for the
next contact); the HDTN export, as HDTN, takes them as they are.

Import (ION with :func:`read_ion`, HDTN with :func:`read_hdtn`, either by file name with
:func:`read_plan`): for each pair of nodes, each overlap in time of an A->B contact and a B->A
contact is a two-way window, carrying the smaller of the two rates; each stretch of a contact that
no reverse contact covers is a one-way window (``windows.direction``) at that contact's own rate
(one info line per file counts these contact-seconds).
Contacts of one direction must not overlap one another (in ION, nor meet; in HDTN, nor meet listed later first). An
ION time past :data:`ION_MAX_POSIX_TIME` or before 1970, counted as the export counts it (:func:`_ion_latest_s`,
:func:`_ion_earliest_s`), is refused naming its line, as ``ionadmin`` refuses it (a registration or hypothetical
contact's stop too, which ``ionadmin`` reads alike), and so is a contact starting at 1970-01-01T00:00:00Z, which
``ionadmin`` reads as 0, a hypothetical contact's start (the export writes neither). A
window's OWLT is the largest of the ``a range`` lines of the pair that cover it, or, where no one line does, of
those that together cover it (a window the ION export joined of two: :func:`_largest_joint_cover`) (kept in
``plan.meta["owlt_s_per_window"]``, ``None`` where a stretch of the window is in no line, and written back on
export; an HDTN record's ``owlt`` is such a line, 0 where it is missing, as ``cp_load`` reads it; an ION range is
held as ``ionadmin`` holds it, :func:`_add_range`: a second of one start and nodes, or one overlapping another, is
skipped, the earlier kept).
``ionadmin``'s edits apply in file order (``@`` moves the time ``+ss`` counts from; ``d contact`` / ``d range``
delete, ``c contact`` changes an earlier line's); registration (start ``-1``) and hypothetical (start ``0``, as
``ionadmin`` reads it; a stop of ``0`` after a start is refused, as ``ionadmin`` refuses it) contacts carry no
scheduled data and are skipped (their fields read and checked all the same), as are ION contacts of rate 0 (the
reverse contact alone is a one-way window; ``ionadmin`` does not insert an ``a contact`` of rate 0, so
it holds no start: a contact of its start or overlapping it is read, a ``d contact`` of it deletes nothing and a
``c contact`` of it is refused); other ``ionadmin`` commands (``1``, ``s``, ``m ...``, ``^`` (all regions are read
into one plan), ``v``, ``x``) are ignored. An HDTN record of rate 0 is refused, naming it: HDTN reads 0 as unlimited
(``cp_load`` plans it at 1e9 bit/s; its router sets no rate limit), a capacity the import cannot know.

Example:
    >>> from contact_sim.windows import WindowTable
    >>> from contact_sim.link import LinkModel
    >>> w = WindowTable([0], [1], [0.0], [600.0], [1000.0], [1000.0], [0.0])
    >>> plan = ContactPlan(["a", "b"], w, LinkModel("constant", 8e6, 0.0), [0.0, 600.0])
    >>> [ln for ln in format_ion(plan).splitlines() if ln.startswith("a contact")]
    ['a contact +0 +600 1 2 1000000', 'a contact +0 +600 2 1 1000000']
"""

from __future__ import annotations

import bisect
import datetime as _dt
import io
import itertools
import logging
import math
import operator
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, Callable, Iterator, Sequence

import numpy as np

from orbits import OrbitError, parse_utc, utc_text
from swarmbase.fileio import atomic_writer
from swarmbase.safejson import loads as bounded_loads
from swarmbase.tomlcheck import brief, check_name_length, decimal_number, read_text_file, shown

from .errors import ContactError
from .link import SPEED_OF_LIGHT_M_S, LinkModel
from .plan import ContactPlan, check_span_end
from .tablewriter import Int, Lit, Lookup, row_blocks, write_rows
from .trajectory import header_name_ok
from .windows import A_TO_B, B_TO_A, BOTH, WindowTable

log = logging.getLogger(__name__)

#: The link model's speed of light, in km/s (one-way light times of ranges in km).
SPEED_OF_LIGHT_KM_S = SPEED_OF_LIGHT_M_S / 1e3
#: Largest ``a contact`` rate ION holds: ``ionadmin`` reads it into a 32-bit ``unsigned int`` (bytes/s,
#: about 34.4 Gbit/s), so a larger one would wrap around to a small rate without a word.
ION_MAX_RATE_BYTES_S = 2**32 - 1
#: Largest ``rateBitsPerSec`` HDTN reads (a ``uint64_t``); a larger one is not read at all.
HDTN_MAX_RATE_BPS = 2**64 - 1
#: Latest ``startTime`` / ``endTime`` HDTN reads: its router takes them as ``int`` (32 bits) with a
#: default of 0, so a later time (past 68 years, or a Unix time past 2038) would silently become 0. The export
#: refuses a window ending later, and the import a record.
HDTN_MAX_TIME_S = 2**31 - 1
#: Plan files larger than this are refused before they are read.
MAX_PLAN_BYTES = 64 * 1024 * 1024
_ION_TIME = "%Y/%m/%d-%H:%M:%S"
#: An HDTN plan's JSON limits: ``{"contacts": [{...}]}`` is 3 levels deep; compact records of 8 values
#: (about 90 bytes) fill the size limit with about 6,000,000 values.
MAX_HDTN_JSON_DEPTH, MAX_HDTN_JSON_VALUES = 8, 8_000_000
#: The first line of an ION plan this project writes; only in a plan that opens with it are the comment lines
#: before the first command read as its headers (``# start``, ``# node``).
HEADER_MARKER = "# fol-swarm contact plan"
_IGNORED = ("1", "s", "m", "x", "q", "e", "h", "?", "l", "w", "v", "i", "^")


def _whole_start(t_s):
    """A window's start rounded up to a whole second (its end is rounded down): ``ceil(t - 1e-9)``."""
    return np.ceil(t_s - 1e-9)


def _export_blocks(plan: ContactPlan) -> Iterator[np.ndarray]:
    """Indices of the windows the DTN plans carry, in their order, a block at a time: by whole-second start
    and end (the window rounded inward), then nodes; a window shorter than a whole second once rounded is
    left out. A table in start order (every search's) is cut into blocks of about
    :data:`~contact_sim.tablewriter.BLOCK_ROWS` rows at a change of whole-second start and each block sorted
    alone, so nothing is allocated per window of the plan; an imported plan's table, in file order, is
    sorted whole (its whole-second edges, the order and their copies: about 60 bytes a window at the peak,
    as traced, the file being at most :data:`MAX_PLAN_BYTES`)."""
    w = plan.windows
    n, t = len(w), w.t_start_s
    if any((t[max(lo - 1, 0):hi][1:] < t[max(lo - 1, 0):hi][:-1]).any() for lo, hi in row_blocks(n)):
        order = _sorted_whole(w, np.arange(n))
        for lo, hi in row_blocks(order.size):
            yield order[lo:hi]
        return
    lo = 0
    for _, hi in row_blocks(n):
        if hi <= lo:
            continue  # the block before ran past this one's end (a long run of one whole-second start)
        if hi < n:  # take in the rest of the run of the block's last whole-second start (bisection)
            last, end = _whole_start(t[hi - 1]), n
            while hi < end:
                mid = (hi + end) // 2
                hi, end = (hi, mid) if _whole_start(t[mid]) > last else (mid + 1, end)
        yield _sorted_whole(w, np.arange(lo, hi))
        lo = hi


def _sorted_whole(w: WindowTable, k: np.ndarray) -> np.ndarray:
    """Windows ``k`` by whole-second start and end, then nodes, those shorter than a second once rounded
    inward left out."""
    t0, t1 = _whole_start(w.t_start_s[k]), np.floor(w.t_end_s[k] + 1e-9)
    order = np.lexsort((w.b[k], w.a[k], t1, t0))
    return k[order[t1[order] > t0[order]]]


def _edges_and_rate(plan: ContactPlan, k: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per window of indices ``k``: whole-second start and end (rounded inward) and mean rate (bit/s)."""
    w = plan.windows
    t_start, t_end = w.t_start_s[k], w.t_end_s[k]
    rate = plan.link.mean_rate(t_end - t_start, w.volume_bits[k])
    return _whole_start(t_start), np.floor(t_end + 1e-9), np.asarray(rate, dtype=float)


def _rounded(plan: ContactPlan, k: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per window of indices ``k``: whole-second start/end, mean rate (bit/s) and OWLT (s, >= 1)."""
    w = plan.windows
    t0, t1, rate = _edges_and_rate(plan, k)
    rng = np.nan_to_num(np.asarray(w.mean_range_km[k], dtype=float), nan=0.0)
    owlt = np.maximum(np.ceil(rng / SPEED_OF_LIGHT_KM_S - 1e-12), 1.0)
    imported = plan.meta.get("owlt_s_per_window")
    if imported is not None and len(imported) == len(w):  # an imported plan keeps its own OWLTs (None: none)
        own = np.array([np.nan if imported[i] is None else imported[i] for i in k.tolist()], dtype=float)
        owlt = np.where(np.isnan(own), owlt, own)
    return t0, t1, rate, owlt


def _carried(plan: ContactPlan, k: np.ndarray, unit_bps: float) -> tuple[np.ndarray, ...]:
    """Windows ``k`` that a DTN plan carries, with :func:`_rounded`'s columns: those whose mean rate rounded
    down to the plan's unit (``unit_bps``: 8 for ION's bytes/s, 1 for HDTN's bits/s) is not 0. A contact of
    rate 0 carries nothing, and the import (as ``ionadmin``) makes no window of it: written, a window slower
    than the unit came back as no window, and a plan of none but such windows as a file the import refused."""
    t0, t1, rate, owlt = _rounded(plan, k)
    keep = rate >= unit_bps
    if keep.all():
        return k, t0, t1, rate, owlt
    return k[keep], t0[keep], t1[keep], rate[keep], owlt[keep]


def _directed(plan: ContactPlan, k: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The contacts windows ``k`` are written as, in order: a two-way window as both directions' contacts
    (``a -> b`` then ``b -> a``), a one-way window as its own direction's only. Per contact: its window's
    position in ``k``, whether it is a two-way window's second (``b -> a``), and its ION node numbers ``from``,
    ``to``."""
    w = plan.windows
    a, b, d = w.a[k], w.b[k], w.direction[k]
    pos = np.repeat(np.arange(k.size), np.where(d == BOTH, 2, 1))
    second = np.zeros(pos.size, dtype=bool)
    second[1:] = pos[1:] == pos[:-1]  # a two-way window's second contact: b -> a
    flip = second | (d[pos] == B_TO_A)
    src = np.where(flip, b[pos], a[pos]).astype(np.int64) + 1
    dst = np.where(flip, a[pos], b[pos]).astype(np.int64) + 1
    return pos, second, src, dst


def _directed_rows(plan: ContactPlan, k: np.ndarray, unit_bps: float) -> tuple[np.ndarray, ...]:
    """The contacts a DTN plan writes of windows ``k`` (in :func:`_export_blocks`' order), once :func:`_carried`
    leaves out those it does not carry: per contact, ``from``, ``to`` (ION numbers), whole-second start and end,
    rate in the plan's unit (``unit_bps``: 8 for ION's bytes/s, 1 for HDTN's bits/s; rounded down), OWLT (s) and
    its key, ``2 * window + 1`` for a two-way window's second contact (``b -> a``), else ``2 * window``."""
    k, t0, t1, rate, owlt = _carried(plan, k, unit_bps)
    pos, second, src, dst = _directed(plan, k)
    return src, dst, t0[pos], t1[pos], (rate // unit_bps)[pos], owlt[pos], 2 * k[pos].astype(np.int64) + second


#: :func:`_joins`' changes, by :func:`_directed_rows`' key: new ``(start, end)``, or ``None`` for one left out
_Changes = dict[int, tuple[float, float] | None]


def _joins(plan: ContactPlan) -> tuple[_Changes, _Changes]:
    """How the contacts an ION plan writes change where two of one direction meet (one ends at the second the next
    starts), which ``ionadmin`` takes for an overlap (``rfx_insert_contact``: "Overlapping contact ignored", the
    later-listed lost): a run of such contacts of one rate is written as one contact, from the run's start to its
    end; where contacts of two rates meet, the slower gives up the second where they meet (the least capacity lost;
    a one-second contact so cut is left out), and one warning counts them. Returns two maps by
    :func:`_directed_rows`' key, both empty when no contacts meet: of the contacts, the new ``(start, end)`` of a
    run's first contact and ``None`` for a contact left out (merged into its run's first, or cut to nothing); of
    the ranges, where a run ends a second sooner, the ``(start, end)`` of its last window's range, ended with it
    (``None`` for one cut to nothing). ION's CGR takes for a contact the first range of its direction that does not
    end before the contact starts (``getApplicableRange`` in ``bpv7/cgr/libcgr.c``), so a range left ending at the
    next run's start would be that run's. A run that starts a second later keeps its first window's range as it
    was: the range before ends before it, and a range of FROM < TO moved a second on would make ``ionadmin``
    impute a reverse range overlapping that of the reverse window of the same start, and skip the latter. A merged
    window's range stays as it was (ION then takes the run's first). Contacts that may meet a later one are kept from block
    to block (those ending at or after the block's last start), so nothing is allocated per window of the plan but
    per contact that meets another. (HDTN takes contacts that meet, as the HDTN import does.)"""
    links: dict[int, int] = {}  # key of a contact -> key of the contact of its direction starting at its end
    rows: dict[int, tuple[float, float, float]] = {}  # key -> (start, end, rate) of those contacts
    carry: list[np.ndarray] | None = None
    total = 0.0  # the plan's capacity, in bytes
    for k in _export_blocks(plan):
        src, dst, t0, t1, rate, _, key = _directed_rows(plan, k, 8.0)
        cols = [src, dst, t0, t1, rate, key, np.ones(src.size, dtype=bool)]  # last: read in this block
        total += float(np.sum(rate * (t1 - t0)))
        if not src.size:
            continue
        last_start = t0.max()
        if carry is not None:
            cols = [np.concatenate((c, d)) for c, d in zip(carry, cols)]
        order = np.lexsort((cols[2], cols[1], cols[0]))  # by direction, then start
        src, dst, t0, t1, rate, key, new = (c[order] for c in cols)
        meet = np.flatnonzero((src[1:] == src[:-1]) & (dst[1:] == dst[:-1]) & (t0[1:] == t1[:-1]) & new[1:])
        for i in meet.tolist():
            links[int(key[i])] = int(key[i + 1])
            for j in (i, i + 1):
                rows[int(key[j])] = (float(t0[j]), float(t1[j]), float(rate[j]))
        keep = t1 >= last_start  # may meet a contact of a later block, which starts after last_start
        carry = [c[keep] for c in (src, dst, t0, t1, rate, key)] + [np.zeros(int(keep.sum()), dtype=bool)]
    joins: _Changes = {}
    ranges: _Changes = {}
    cut = lost = 0.0
    for head in set(links) - set(links.values()):
        chain = [head]
        while chain[-1] in links:
            chain.append(links[chain[-1]])
        runs: list[list] = []  # [start, end, rate, first key, last key] of each run of one rate
        for key in chain:
            t0, t1, rate = rows[key]
            if runs and runs[-1][2] == rate:
                runs[-1][1], runs[-1][4] = t1, key
                joins[key] = None
            else:
                runs.append([t0, t1, rate, key, key])
        for before, after in zip(runs, runs[1:]):  # the slower of two runs that meet gives up that second
            if before[2] < after[2]:
                before[1] -= 1.0  # ends a second sooner
            else:
                after[0] += 1.0  # starts a second later
            cut += 1
            lost += min(before[2], after[2])
        for t0, t1, rate, key, last in runs:
            if t1 <= t0:
                lost += rate * (t1 - t0)  # a one-second run cut at both ends lost its one second, not two
            joins[key] = (t0, t1) if t1 > t0 else None
            if t1 < rows[last][1]:  # the run ends a second sooner: so does its last window's range
                ranges[last] = (rows[last][0], t1) if t1 > rows[last][0] else None
    if cut:
        log.warning("ION plan: %d time(s) two contacts of one direction at different rates meet, which ionadmin "
                    "takes for an overlap: the slower ends a second sooner or starts a second later; %.12g of %.12g "
                    "bytes left out", int(cut), lost, total)
    return joins, ranges


def _changed_keys(joins: _Changes) -> np.ndarray:
    """The keys of one of :func:`_joins`' maps, sorted: built once for the whole plan, looked up in each block
    (:func:`_joined`)."""
    return np.sort(np.fromiter(joins, dtype=np.int64, count=len(joins)))


def _joined(cols: tuple[np.ndarray, ...], joins: _Changes, changed: np.ndarray) -> tuple[np.ndarray, ...]:
    """:func:`_directed_rows`' columns ``cols`` with one of :func:`_joins`' maps of changes made: the contacts (or
    ranges) it maps to ``None`` left out, those it maps to times given them (``changed``: its
    :func:`_changed_keys`)."""
    if not joins:
        return cols
    key = cols[-1]
    at = np.minimum(np.searchsorted(changed, key), changed.size - 1)
    hit = np.flatnonzero(changed[at] == key)
    if not hit.size:
        return cols
    t0, t1, keep = cols[2].copy(), cols[3].copy(), np.ones(key.size, dtype=bool)
    for i in hit.tolist():
        joined = joins[int(key[i])]
        if joined is None:
            keep[i] = False
        else:
            t0[i], t1[i] = joined
    return tuple(c[keep] for c in (*cols[:2], t0, t1, *cols[4:]))


def _seconds_text(t_s: float) -> str:
    """A whole-second time as a message shows it (``inf`` / ``nan`` as they are)."""
    return str(int(t_s)) if math.isfinite(t_s) else str(t_s)


def _contact(plan: ContactPlan, k: int, t0: float, t1: float) -> str:
    """Window ``k`` as an error message names it: its nodes (names and plan numbers) and times."""
    a, b = int(plan.windows.a[k]), int(plan.windows.b[k])
    return (f"contact {plan.node_names[a]} - {plan.node_names[b]} (nodes {a + 1}, {b + 1}) "
            f"+{_seconds_text(t0)} +{_seconds_text(t1)}")


def _too_fast(plan: ContactPlan, k: int, t0: float, t1: float, rate: str, limit: str, hint: str) -> str:
    """The message for window ``k``, whose rate a DTN tool's contact plan cannot hold."""
    return f"{_contact(plan, k, t0, t1)}: mean rate {rate} is above {limit}; {hint}"


def _ion_latest_s(start: _dt.datetime | None) -> float:
    """The latest time an ION plan starting at ``start`` can name, in seconds after its start: ``ionadmin`` refuses a
    time past :data:`ION_MAX_POSIX_TIME` (``readTimestamp`` in ``ici/library/ion.c``), a ``+SECONDS`` one too, which it
    adds to its reference time (the time it starts, or ``@``'s): the plan start when there is one, else 1970, the
    least. The export (:func:`_check_exportable`) and the import (:func:`_ion_time`) hold times to it alike."""
    start_s = start.timestamp() if start is not None else 0.0
    return ION_MAX_POSIX_TIME.timestamp() - start_s


def _ion_earliest_s(start: _dt.datetime | None) -> float:
    """The earliest time an ION plan starting at ``start`` can name, in seconds after its start: ``readTimestamp``
    refuses a time before 1970 (a negative POSIX time, an absolute one or a ``+SECONDS`` one once added), which
    only a plan starting before 1970 can name (a plan of no start counts from 1970 at the least). The export
    (:func:`_check_exportable`) and the import (:func:`_ion_time`) hold times to it alike."""
    return -start.timestamp() if start is not None else 0.0


def _ion_latest_text(start: _dt.datetime | None, counted: bool = True) -> str:
    """:func:`_ion_latest_s`'s limit as its refusals name it: ION's latest time, why, and (``counted``: a time
    counted from the plan start, not an absolute one) what it counts from."""
    base = (f"; the plan starts at {utc_text(start)}" if start is not None
            else "; the plan has no start, and ionadmin adds +SECONDS to its own time")
    return f"ION's latest time, {utc_text(ION_MAX_POSIX_TIME)} (ionadmin's MAX_POSIX_TIME{base if counted else ''})"


def _ion_time_0_text() -> str:
    """What ``ionadmin`` makes of a contact starting at 1970-01-01T00:00:00Z, as refusals say it: ``readTimestamp``
    reads it as 0, and ``executeAdd`` takes a contact of start 0 for a hypothetical one (no scheduled data)."""
    return (f"{utc_text(_POSIX_EPOCH)}, ionadmin's time 0, which it reads as a hypothetical contact's start (no "
            "scheduled data)")


def _ion_earliest_text(start: _dt.datetime | None) -> str:
    """:func:`_ion_earliest_s`'s limit as its refusals name it: ION's earliest time, why, and the plan start."""
    base = f"; the plan starts at {utc_text(start)}" if start is not None else ""
    return (f"ION's earliest time, {utc_text(_POSIX_EPOCH)} (ionadmin's readTimestamp refuses a time before "
            f"1970{base})")


def _check_exportable(plan: ContactPlan, tool: str) -> None:
    """The one check of the windows an ION (``tool="ion"``) or HDTN (``"hdtn"``) plan carries, made whole
    before anything is formatted or written (:func:`format_ion`, :func:`write_ion`, :func:`hdtn_contacts`,
    :func:`write_hdtn`): every window left in once rounded inward starts at or after the plan start and
    ends at a finite time (for ION, from 1970 by :data:`ION_MAX_POSIX_TIME`, :func:`_ion_earliest_s` and
    :func:`_ion_latest_s`, and not starting at 1970-01-01T00:00:00Z, which ``ionadmin`` reads as a hypothetical
    contact's start; for HDTN by
    :data:`HDTN_MAX_TIME_S`), and its mean rate is a finite number
    >= 0 the tool can hold (:data:`ION_MAX_RATE_BYTES_S`, :data:`HDTN_MAX_RATE_BPS`). The first window
    that fails, in the plans' order, is refused naming its nodes, times and the field; a plan of windows none
    of which the file would carry (each shorter than a second once rounded, or slower than the tool's unit,
    as :func:`_sorted_whole` and :func:`_carried` leave them out) is refused: every window would be lost, and
    the file, of no contact, would not read back. A plan of no window at all is written, as a plan of no
    contact (``fol contacts`` of a scenario that finds none writes its whole set). A block of windows at a
    time, in the table's order (no sort): nothing allocated per window of the plan."""
    w = plan.windows
    first = None  # (export-order key, window, t0, t1, rate) of the first failing window met so far
    short = slow = 0  # windows left out: shorter than a second once rounded inward; slower than the plan's unit
    bits = 0  # of the slow ones, those of at least 1 bit/s, which an HDTN plan would carry
    unit_bps = 8.0 if tool == "ion" else 1.0
    ion_earliest, ion_latest = _ion_earliest_s(plan.start), _ion_latest_s(plan.start)
    for lo, hi in row_blocks(len(w)):
        k = np.arange(lo, hi)
        t0, t1, rate = _edges_and_rate(plan, k)
        with np.errstate(invalid="ignore"):
            short += int(np.count_nonzero(t1 <= t0))
            slow += int(np.count_nonzero((t1 > t0) & (rate < unit_bps)))  # as _carried leaves them out
            bits += int(np.count_nonzero((t1 > t0) & (rate >= 1.0) & (rate < unit_bps)))
            ok = (t0 >= 0) & np.isfinite(t1) & (rate >= 0)  # NaN fails every comparison
            if tool == "ion":
                ok &= (rate // 8 <= ION_MAX_RATE_BYTES_S) & (t0 >= ion_earliest) & (t1 <= ion_latest)
                if plan.start is not None:
                    ok &= t0 != ion_earliest  # a contact of start 1970-01-01T00:00:00Z, read as a hypothetical one
            else:
                ok &= (t1 <= HDTN_MAX_TIME_S) & (rate < 2.0**64)  # int(rate) <= HDTN_MAX_RATE_BPS
            bad = np.flatnonzero((t1 > t0) & ~ok)  # a window shorter than a second once rounded is left out
        if bad.size:
            j = bad[np.lexsort((w.b[k][bad], w.a[k][bad], t1[bad], t0[bad]))[0]]
            key = (float(t0[j]), float(t1[j]), int(w.a[lo + j]), int(w.b[lo + j]))
            if first is None or key < first[0]:
                first = (key, lo + int(j), float(t0[j]), float(t1[j]), float(rate[j]))
    if first is None:
        if len(w) and short + slow == len(w):  # every window would be lost, and the file read back as no plan
            unit = "1 byte/s" if tool == "ion" else "1 bit/s"
            hint = "; export HDTN (--hdtn), whose unit is 1 bit/s" if tool == "ion" and bits else ""
            raise ContactError(f"no window to write: of the plan's {len(w)} window(s), {short} shorter than a "
                               f"whole second once rounded inward and {slow} slower than {unit} (0 once rounded "
                               f"down, no contact); an {tool.upper()} plan of no contact would not read back{hint}")
        return
    _, i, t0_i, t1_i, rate_i = first
    where = _contact(plan, i, t0_i, t1_i)
    if not (t0_i >= 0 and math.isfinite(t1_i)):
        raise ContactError(f"{where}: window times {w.t_start_s[i]:g} .. {w.t_end_s[i]:g} s; expected finite "
                           "seconds at or after the plan start (>= 0)")
    if tool == "hdtn" and t1_i > HDTN_MAX_TIME_S:
        raise ContactError(f"{where}: ends after HDTN's latest time, {HDTN_MAX_TIME_S} s (startTime and endTime "
                           "are 32-bit integers)")
    if tool == "ion" and plan.start is not None and t0_i == ion_earliest:
        raise ContactError(f"{where}: starts at {_ion_time_0_text()}; expected windows starting after it, or export "
                           "HDTN (--hdtn)")
    if tool == "ion" and t0_i < ion_earliest:
        raise ContactError(f"{where}: starts before {_ion_earliest_text(plan.start)}; expected windows starting "
                           "from then, or export HDTN (--hdtn)")
    if tool == "ion" and t1_i > ion_latest:
        raise ContactError(f"{where}: ends after {_ion_latest_text(plan.start)}; expected windows ending by then"
                           + (", or export HDTN (--hdtn)" if plan.start is not None else ""))
    if not (math.isfinite(rate_i) and rate_i >= 0):
        raise ContactError(f"{where}: mean rate {rate_i:g} bit/s (volume_bits {w.volume_bits[i]:g} over "
                           f"{w.t_end_s[i] - w.t_start_s[i]:g} s); expected a finite rate >= 0")
    if tool == "ion":
        raise ContactError(_too_fast(
            plan, i, t0_i, t1_i, f"{rate_i / 8:.6g} bytes/s",
            f"ION's limit of {ION_MAX_RATE_BYTES_S} bytes/s (ionadmin reads a 32-bit rate)",
            f"export HDTN (--hdtn) or cap the rate (link.max_rate_bps <= {8 * ION_MAX_RATE_BYTES_S})"))
    raise ContactError(_too_fast(
        plan, i, t0_i, t1_i, f"{rate_i:.6g} bit/s",
        f"HDTN's limit of {HDTN_MAX_RATE_BPS} bit/s (rateBitsPerSec is a 64-bit integer)",
        f"cap the rate (link.max_rate_bps <= {HDTN_MAX_RATE_BPS})"))


def _ion_header(plan: ContactPlan) -> bytes:
    """An ION plan's header comments (ASCII): what it is, its start, each node's number, name and kind.
    A name or kind a header line cannot carry (not ASCII; whitespace other than single spaces) is refused,
    naming the node by its number in the plan (from 1, as its header line and contacts number it)."""
    lines = [f"{HEADER_MARKER} (ION ionadmin commands; rates in bytes/s, times in s)"]
    if plan.start is not None:
        lines.append(f"# start {utc_text(plan.start)}")
    for i, (name, kind) in enumerate(zip(plan.node_names, plan.node_kinds)):
        if not header_name_ok(name) or any(c.isspace() for c in kind):
            raise ContactError(f"node {i + 1}: name {name!r} (kind {kind!r}) is empty or has leading, trailing, "
                               "repeated or non-space whitespace; an ION header line cannot carry it")
        if not (name + kind).isascii():
            held, what = (name, "name") if not name.isascii() else (kind, "kind")
            raise ContactError(f"node {i + 1}: name {name!r} (kind {kind!r}): an ION plan is ASCII text; a node "
                               f"{what} holds {next(c for c in held if not c.isascii())!r}")
        lines.append(f"# node {i + 1} {name} {kind}")
    return ("\n".join(lines) + "\n").encode("ascii")


def _ion_lines(plan: ContactPlan, fh: BinaryIO) -> None:
    """Write an ION plan's ``a contact`` lines, then its ``a range`` lines (ASCII), to ``fh``, a block of
    windows at a time (:func:`contact_sim.tablewriter.row_blocks`): each two-way window as both
    directions, in :func:`_export_blocks`' order. The plan has passed :func:`_check_exportable`."""
    joins = _joins(plan)
    for kind, changes in zip((b"contact", b"range"), joins):
        changed = _changed_keys(changes)
        for k in _export_blocks(plan):
            # a range a window (ionadmin takes ranges that meet), cut as its contact was
            cols = _joined(_directed_rows(plan, k, 8.0), changes, changed)
            src, dst, t0, t1, rate, owlt, _ = cols
            write_rows(fh, [Lit(b"a " + kind + b" +"), Int(t0.astype(np.int64)), Lit(b" +"),
                            Int(t1.astype(np.int64)), Lit(b" "), Int(src), Lit(b" "), Int(dst), Lit(b" "),
                            Int((rate if kind == b"contact" else owlt).astype(np.int64)), Lit(b"\n")])


def _checked_ion_header(plan: ContactPlan) -> bytes:
    """The checks of an ION plan, all made before anything is written: its header (node names and kinds),
    then every window (:func:`_check_exportable`); returns the header."""
    header = _ion_header(plan)
    _check_exportable(plan, "ion")
    return header


def format_ion(plan: ContactPlan) -> str:
    """ION contact-plan text: header comments (start, node names), then contacts and ranges."""
    buf = io.BytesIO(_checked_ion_header(plan))
    buf.seek(0, io.SEEK_END)
    _ion_lines(plan, buf)
    return buf.getvalue().decode("ascii")


def write_ion(path: str | Path, plan: ContactPlan) -> Path:
    """Write :func:`format_ion` text to ``path``, a block of windows at a time, once the plan has passed
    its checks (crash-safe: the old file or the whole new one; a refused plan leaves the old file as it
    was and writes nothing)."""
    path = Path(path)
    try:
        header = _checked_ion_header(plan)
    except ContactError as exc:
        raise ContactError(f"{brief(path)}: {exc}") from None
    with atomic_writer(path) as fh:
        fh.write(header)
        _ion_lines(plan, fh)
    return path


def _hdtn_blocks(plan: ContactPlan) -> Iterator[tuple[np.ndarray, ...]]:
    """HDTN's records, a block of windows at a time: arrays ``contact, source, dest, startTime, endTime,
    rateBitsPerSec, owlt`` (rates uint64 where one passes 2**63 - 1). The plan has passed
    :func:`_check_exportable`."""
    n_records = 0
    for k in _export_blocks(plan):  # HDTN takes contacts of one direction that meet, as the import does
        src, dst, t0, t1, rate, owlt, _ = _directed_rows(plan, k, 1.0)
        whole_rate = rate.astype(np.uint64) if (rate >= 2.0**63).any() else rate.astype(np.int64)
        yield (np.arange(n_records, n_records + src.size), src, dst, t0.astype(np.int64), t1.astype(np.int64),
               whole_rate, owlt.astype(np.int64))
        n_records += src.size


_HDTN_RECORD = ("contact", "source", "dest", "startTime", "endTime", "rateBitsPerSec", "owlt")


def hdtn_contacts(plan: ContactPlan) -> dict:
    """HDTN contact plan (``{"contacts": [...]}``, rates in bits/s, node ``i`` as ``i + 1``)."""
    _check_exportable(plan, "hdtn")
    out = []
    for cols in _hdtn_blocks(plan):
        out.extend(dict(zip(_HDTN_RECORD, rec)) for rec in zip(*(c.tolist() for c in cols)))
    return {"contacts": out}


def write_hdtn(path: str | Path, plan: ContactPlan) -> Path:
    """Write the HDTN JSON contact plan of ``plan`` to ``path``: the text of ``json.dumps(hdtn_contacts(plan),
    indent=1)`` and a newline, written a block of windows at a time (crash-safe: the old file or the whole
    new one; a refused plan leaves the old file as it was and writes nothing)."""
    path = Path(path)
    try:
        _check_exportable(plan, "hdtn")
    except ContactError as exc:
        raise ContactError(f"{brief(path)}: {exc}") from None
    first = True
    with atomic_writer(path) as fh:
        fh.write(b'{\n "contacts": [')
        for cols in _hdtn_blocks(plan):
            if not cols[0].size:
                continue
            sep = np.ones(cols[0].size, dtype=np.int8)
            sep[0] = not first  # "\n" before the first record, ",\n" between records
            pieces: list[object] = [Lookup([b"\n", b",\n"], sep), Lit(b"  {")]
            for key, col in zip(_HDTN_RECORD, cols):  # json.dumps(indent=1): one key a line, 3 spaces in
                pieces += [Lit(b'\n   "' + key.encode() + b'": '), Int(col), Lit(b",")]
            pieces[-1] = Lit(b"\n  }")
            write_rows(fh, pieces)
            first = False
        fh.write(b"]\n}\n" if first else b"\n ]\n}\n")
    return path


# ------------------------------------------------------------------------------------ import


@dataclass
class IonPlan:
    """The contents of an ION contact-plan file, or of an HDTN one read into the same
    fields (node numbers as written)."""

    start: _dt.datetime | None
    names: dict[int, str] = field(default_factory=dict)
    kinds: dict[int, str] = field(default_factory=dict)
    #: ``(t0_s, t1_s, from, to, rate_bytes_per_s, where)``; ``where`` names the file and the line
    #: (ION) or the record (HDTN) for error messages
    #: (ION: a contact changed to rate 0 by ``c contact`` is listed, as ``ionadmin`` keeps it: it makes no window,
    #: and a contact of its direction overlapping it is refused)
    contacts: list[tuple[float, float, int, int, float, str]] = field(default_factory=list)
    #: ``(t0_s, t1_s, from, to, owlt_s, where)``
    ranges: list[tuple[float, float, int, int, int, str]] = field(default_factory=list)
    #: the file format it was read from: ``"ion"`` or ``"hdtn"``
    format: str = "ion"
    #: node numbers of the ION contacts of rate 0, which make no window: a range naming one names a node of the
    #: plan, though maybe of no window (an HDTN record of rate 0, HDTN's "unlimited", is refused)
    rate0_nodes: set[int] = field(default_factory=set)


#: Latest relative time an ION plan may name (about 317 years after its start).
MAX_ION_OFFSET_S = 1e10
#: ``ionadmin``'s latest time, ION's ``MAX_POSIX_TIME`` (2**31 - 1 s after 1970, ``ici/include/platform.h``), which
#: it reads a scheduled contact's stop time of ``-1`` as (``executeAdd`` in ``ici/utils/ionadmin.c``)
ION_MAX_POSIX_TIME = _dt.datetime.fromtimestamp(2**31 - 1, _dt.timezone.utc)
#: ION's earliest time, POSIX time 0: ``readTimestamp`` (``ici/library/ion.c``) refuses a negative one
_POSIX_EPOCH = _dt.datetime.fromtimestamp(0, _dt.timezone.utc)
#: Largest integer (node number, rate, OWLT, HDTN time) a plan may give: far beyond any real link
#: (rates past int64 are held at 2**62 bytes of capacity), yet rate x 1e10 s stays a finite float;
#: a 10^400 does not even convert to floating point.
MAX_PLAN_INT = 10**100
#: Longest OWLT a plan may give (s): the latest time it may name. A window keeps its OWLT as a float, which
#: holds every integer up to this exactly, so an export writes back the OWLT it read (10**100 came back
#: as 1.00000000000000001590e100, which the import refuses).
MAX_PLAN_OWLT_S = int(MAX_ION_OFFSET_S)
#: Largest node number: ION reads one as a ``uvast`` (unsigned 64-bit), so a larger one names no node it holds.
#: The plan numbers its nodes by their rank (0, 1, ...), so no array is typed or sized by a node number.
MAX_NODE_NUMBER = 2**64 - 1
#: Largest ``source`` / ``dest`` an HDTN plan may give: HDTN's node ids are ``uint64_t`` (its config, ``cp_load``),
#: but its router takes a record's ``source`` and ``dest`` as ``int`` (32 bits) with a default of 0
#: (``ProcessContacts``, ``FilterContactsPropertyTree``), so a larger one becomes 0 and the router of the contact's
#: sending node ignores the record (not its own, or no outduct to node 0): the link is never taken up for it. The
#: import refuses a record naming one; the export numbers the nodes 1 .. n (node ``i`` as ``i + 1``), so it writes
#: none.
HDTN_MAX_NODE_NUMBER = 2**31 - 1


#: Why a node number is at most :data:`MAX_NODE_NUMBER`, as refusals say it.
_NODE_NUMBER_WHY = "unsigned 64-bit"
#: Why an HDTN ``source`` / ``dest`` is at most :data:`HDTN_MAX_NODE_NUMBER`, and a ``startTime`` / ``endTime`` at most
#: :data:`HDTN_MAX_TIME_S` (the two limits are equal, each refusal says its own reason) or at least 0.
_HDTN_NODE_WHY = "HDTN's router reads source and dest as 32-bit integers, a larger one as 0"
_HDTN_TIME_WHY = "HDTN's router reads startTime and endTime as 32-bit integers, a larger one as 0"
_HDTN_NEGATIVE_TIME_WHY = ("HDTN's router holds startTime and endTime as unsigned 64-bit integers, a negative one as "
                           "about 2**64")
#: Why an HDTN ``owlt`` is at least 0: ``cp_load`` (``libcgr.cpp``) reads it as a signed ``time_t`` (default 0, a larger
#: one than 2**63 - 1 as 0, past the import's own limit, :data:`MAX_PLAN_OWLT_S`), and its CGR adds it to a contact's
#: start as the bundle's arrival (``Route``'s ``best_delivery_time``, ``last_byte_arr_time``).
_HDTN_NEGATIVE_OWLT_WHY = ("HDTN's CGR reads owlt as a signed 64-bit time_t and adds it to a contact's start, a negative "
                           "one as a bundle arriving before it is sent")


def _limit_text(limit: int, why: str = "") -> str:
    """A limit as messages write it, with the caller's reason ``why`` (if any) after it: a power of ten past 9999 as
    ``1e100`` or ``1e10``, any other number in full."""
    text = str(limit)
    if len(text) > 4 and text.rstrip("0") == "1":
        text = f"1e{len(text) - 1}"
    return f"{text} ({why})" if why else text


def _ion_time(token: str, start: _dt.datetime | None, where: str, reference_s: float, unread_start: int | None,
              span_s: tuple[float, float]) -> float:
    """Seconds after the plan start of an ION time: ``+ss`` after the reference time (``@``;
    the plan start unless moved), or absolute ``yyyy/mm/dd-hh:mm:ss``. ``unread_start``: the line number of a
    ``# start`` read as a comment (a plan without :data:`HEADER_MARKER`), named when an absolute time needs one.
    A time outside ``span_s`` (:func:`_ion_earliest_s` and :func:`_ion_latest_s` of ``start``, which :func:`parse_ion`
    computes once for the plan: before 1970 or past 2038) is refused, as ``ionadmin`` refuses it (``readTimestamp``:
    "Time value not supported"; a start so refused it reads as 0, a hypothetical contact, a stop as 0, before the
    start)."""
    if token.startswith("+"):
        digits = token[1:]
        # whole seconds in ASCII digits: float() also reads 1e3, 1_000, 0.5 and every script's digits
        seconds = int(digits) if _ascii_digits(digits) else math.inf  # compared as an int: 4,000 digits are no float
        value = reference_s + seconds if seconds <= MAX_ION_OFFSET_S else math.inf
        if value > MAX_ION_OFFSET_S:
            raise ContactError(f"{where}: expected a relative time +SECONDS of 0..{MAX_ION_OFFSET_S:.0e} (whole "
                               f"seconds in ASCII digits), got {shown(token)}")
    else:
        value = _offset(_ion_utc(token, where), start, f"{where}: absolute time {token!r}", f"{where}: {token}",
                        unread_start)
    earliest, latest = span_s
    if not earliest <= value <= latest:
        raise ContactError(f"{where}: {shown(token)} ({value:.0f} s after the plan start) is "
                           + (f"after {_ion_latest_text(start)}; expected times by then" if value > latest else
                              f"before {_ion_earliest_text(start)}; expected times from then"))
    return float(value)


def _offset(t: _dt.datetime, start: _dt.datetime | None, needs: str, lies: str, unread_start: int | None,
            advice: str = "") -> float:
    """Seconds after the plan start of UTC time ``t``, refused unless the start is known (``needs``: the time as the
    refusal names it, ``advice`` ends it; ``unread_start``: as :func:`_ion_time` takes it) and ``t`` lies between
    it and :data:`MAX_ION_OFFSET_S` after it (``lies``: the time as that refusal names it)."""
    if start is None and unread_start is not None:  # the user's '# start' line, not read: say why
        raise ContactError(f"{needs} needs the plan start (time.start; the '# start' of line {unread_start} is "
                           f"read only in a plan whose first line is {HEADER_MARKER!r}){advice}")
    if start is None:
        raise ContactError(f"{needs} needs the plan start (time.start, or the '# start ...' header of a fol-swarm "
                           f"plan){advice}")
    offset = (t - start).total_seconds()
    if not 0 <= offset <= MAX_ION_OFFSET_S:
        raise ContactError(f"{lies} is {'before' if offset < 0 else 'too long after'} the plan start "
                           f"{utc_text(start)}")
    return offset


def _ion_utc(token: str, where: str, what: str = "+SECONDS or yyyy/mm/dd-hh:mm:ss") -> _dt.datetime:
    """An absolute ION time ``yyyy/mm/dd-hh:mm:ss`` (UTC) in ASCII digits; ``what`` names the field expected."""
    try:
        if not token.isascii():  # strptime's %Y, %m, %d, %H and %M read every script's digits
            raise ValueError(token)
        return _dt.datetime.strptime(token, _ION_TIME).replace(tzinfo=_dt.timezone.utc)
    except ValueError:
        raise ContactError(f"{where}: expected {what}, got {shown(token)}") from None


def _check_unscheduled_time(token: str, what: str, where: str, start: _dt.datetime | None, reference_s: float,
                            span_s: tuple[float, float]) -> None:
    """Read the stop time of a registration (start ``-1``) or hypothetical (start ``0``) contact as ``ionadmin``
    reads a time, though no window is made of it: ``0`` or ``-1`` (which ``ionadmin`` reads before a time),
    ``+SECONDS`` (ASCII digits, at most :data:`MAX_ION_OFFSET_S`) or ``yyyy/mm/dd-hh:mm:ss`` (checked as written:
    no plan start is needed). ``ionadmin`` reads it with ``readTimestamp``, as a scheduled contact's, so a time
    before 1970 or past 2038 is refused as :func:`_ion_time` refuses it (a ``+SECONDS`` one after ``reference_s``,
    within ``span_s``; an absolute one as written)."""
    expected = f"the {what} time (0, -1, +SECONDS or yyyy/mm/dd-hh:mm:ss)"
    if token in ("0", "-1"):
        return
    if not token.startswith("+"):
        t = _ion_utc(token, where, expected)
        if t > ION_MAX_POSIX_TIME:
            raise ContactError(f"{where}: the {what} time {shown(token)} is after "
                               f"{_ion_latest_text(None, counted=False)}; expected times by then")
        if t < _POSIX_EPOCH:
            raise ContactError(f"{where}: the {what} time {shown(token)} is before {_ion_earliest_text(None)}; "
                               "expected times from then")
    elif not (_ascii_digits(token[1:]) and int(token[1:]) <= MAX_ION_OFFSET_S):
        raise ContactError(f"{where}: expected {expected} with +SECONDS of 0..{MAX_ION_OFFSET_S:.0e} in ASCII "
                           f"digits, got {shown(token)}")
    else:
        _ion_time(token, start, where, reference_s, None, span_s)


#: Most digits an ION number or time is read with (``int()`` reads at most 4,300; past 1e100 is refused by value).
_MAX_DIGITS = 4000


def _ascii_digits(text: str) -> bool:
    """``text`` is 1 to :data:`_MAX_DIGITS` ASCII digits: ``int()`` also reads ``1_000``, ``+1``, `` 1`` and every
    script's digits (``swarmbase.tomlcheck.is_decimal`` says the same, at twice the time a line of a large plan)."""
    return text.isascii() and text.isdigit() and len(text) <= _MAX_DIGITS


def _pos_int(token: str, what: str, where: str, allow_zero: bool = False, limit: int = MAX_PLAN_INT,
             why: str = "") -> int:
    """A non-negative (``allow_zero``) or positive integer in ASCII digits, at most ``limit`` (``why``: the reason
    the refusal of a larger one gives, :func:`_limit_text`)."""
    if not _ascii_digits(token[1:] if token[:1] == "-" else token):
        raise ContactError(f"{where}: expected an integer {what} in ASCII digits, got {shown(token)}")
    value = int(token)
    if value < 0 or (value == 0 and not allow_zero):
        raise ContactError(f"{where}: expected a {'non-negative' if allow_zero else 'positive'} {what}, got {value}")
    if value > limit:
        raise ContactError(f"{where}: {what} {token[:40]!r} is too large; expected at most {_limit_text(limit, why)}")
    return value


def _node_numbers(src: str, dst: str, where: str) -> tuple[int, int]:
    """A line's FROM and TO node numbers: positive integers of at most :data:`MAX_NODE_NUMBER`."""
    return (_pos_int(src, "node number", where, limit=MAX_NODE_NUMBER, why=_NODE_NUMBER_WHY),
            _pos_int(dst, "node number", where, limit=MAX_NODE_NUMBER, why=_NODE_NUMBER_WHY))


_DIGITS = frozenset("0123456789")

#: What ``str.splitlines()`` breaks a line at besides LF and CR LF: CR (not before an LF or at the end), VT, FF,
#: FS, GS, RS, NEL, U+2028, U+2029; and what ``str.split()`` also takes for a space between fields besides those, a
#: space and a tab: :data:`_ODD_SPACES` (no groups: a pattern of two groups took three times as long to search).
_ODD_SPACES = "\x1f\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u202f\u205f\u3000"
_ODD_CHARACTER = re.compile(f"\r(?!\n|\\Z)|[\x0b\x0c\x1c-\x1e\x85\u2028\u2029{_ODD_SPACES}]")


def _odd_character(text: str) -> re.Match | None:
    """The first :data:`_ODD_CHARACTER` outside a comment (after a ``#`` on its line, which ``ionadmin`` and
    :func:`parse_ion` pass over: a form feed, U+2028 or a no-break space there breaks nothing), or ``None``. One
    search of the whole text, not one a line; a comment's line is looked at once, however many it holds."""
    comment_end = -1  # where the comment line of the last character passed over ends
    for odd in _ODD_CHARACTER.finditer(text):
        if odd.start() < comment_end:
            continue
        line_start = text.rfind("\n", 0, odd.start()) + 1
        if text.find("#", line_start, odd.start()) < 0:
            return odd
        comment_end = text.find("\n", odd.start())
        if comment_end < 0:
            return None
    return None


def _lf_lines(text: str) -> Iterator[str]:
    """The lines of ``text`` split at LF, as ``text.split("\\n")`` gives them, one at a time: the list of a
    64 MiB plan's lines was about 130 MB, next to the text itself."""
    start = 0
    while (end := text.find("\n", start)) >= 0:
        yield text[start:end]
        start = end + 1
    yield text[start:]


def _keep_as_tuples(entries: list[list], keep) -> None:
    """Keep the entries of ``entries`` that ``keep`` takes, each made a tuple, in place: each list is let go as
    its tuple is made, not after a copy of the whole list (for a plan of 1.4 million contacts, 130 MB)."""
    n = 0
    for entry in entries:
        if keep(entry):
            entries[n] = tuple(entry)
            n += 1
    del entries[n:]


def parse_ion(text: str, source: str = "<text>", start: _dt.datetime | None = None) -> IonPlan:
    """Parse ION contact-plan text; ``start`` is used when the file has no ``# start`` header.

    ``ionadmin``'s own edits are applied in file order: ``@`` moves the reference time of the
    relative times after it, ``d contact`` / ``d range`` delete and ``c contact`` changes what an
    earlier line added; registration (start ``-1``) and hypothetical (start ``0``) contacts carry
    no scheduled data and are skipped."""
    plan = IonPlan(start)
    # the earliest and latest times ionadmin names, in seconds after the plan start (its header's)
    span = (_ion_earliest_s(start), _ion_latest_s(start))
    reference = 0.0  # seconds after the plan start that '+ss' counts from ('@' moves it)
    # the live 'a contact' / 'a range' lines by (from, to), then start, so that 'd' (also 'd * FROM TO') and
    # 'c' find theirs without a scan of the file so far; one small dict a pair, not a key tuple a line. A
    # contact or a range is held by its start (a second range of one start is skipped, :func:`_add_range`).
    # "rate 0": the 'a contact' lines of rate 0, which ionadmin does not insert and which hold no start (a 'd contact'
    # of one deletes nothing, as in ionadmin; a 'c contact' of one is refused)
    # "imputed": the reverse (TO, FROM) of each live range of FROM < TO, by start, holding its end, as ionadmin imputes
    # it (rfx.c, insertRXref) unless a range of TO, FROM and that start is live; "starts": each direction's starts of
    # its live and imputed ranges, in order (:class:`_Starts`), where a new range's neighbours are found
    live: dict[str, dict] = {"contact": {}, "range": {}, "rate 0": {}, "imputed": {}, "starts": {}}
    skipped: list[str] = []  # where the 'a range' lines that ionadmin skips are
    hypothetical: set[tuple[int, int]] = set()  # (from, to) of the live hypothetical contacts ('d contact 0')
    odd = _odd_character(text)
    if odd and odd.group() not in _ODD_SPACES:  # a line numbered by splitlines() is not the line an editor shows
        raise ContactError(f"{source}:{text.count(chr(10), 0, odd.start()) + 1}: a line break {shown(odd.group())} "
                           "inside the line; expected lines ended by LF or CR LF")
    if odd:  # split() takes it for a space, ionadmin for a part of the field
        raise ContactError(f"{source}:{text.count(chr(10), 0, odd.start()) + 1}: a character {shown(odd.group())} "
                           "between or inside fields; expected fields separated by spaces or tabs")
    # the project's header lines are read in the comment lines that open a plan whose first line is the
    # HEADER_MARKER, as the export writes them; everywhere else a '#' line is a comment, as ionadmin reads it
    # ('# node 5 goes offline' names nothing)
    headers: bool | None = None  # None until the first non-empty line
    passed_over = None  # where the first line of a header's shape was read as a comment
    unread_start = None  # the line of the first '# start' read as a comment (an absolute time's refusal names it)
    for lineno, raw in enumerate(_lf_lines(text), 1):  # ionadmin's lines; str.splitlines() breaks at 8 more
        where = f"{source}:{lineno}"
        line = raw.strip()
        if not line:
            continue
        if headers is None:
            headers = line.startswith("#") and line[1:].split()[:3] == HEADER_MARKER[2:].split()
        if line.startswith("#"):
            words = line[1:].split()
            # a header's value starts with an ASCII digit; '# start here' or '# node numbers: ...' is a comment
            if len(words) < 2 or words[1][:1] not in _DIGITS or words[0] not in ("start", "node"):
                continue
            if not headers:
                passed_over = passed_over or where
                if words[0] == "start":
                    unread_start = unread_start or lineno
                continue
            if len(words) == 2 and words[0] == "start":
                try:
                    header_start = parse_utc(words[1], field=f"{where}: start")
                except OrbitError as exc:
                    raise ContactError(str(exc)) from None
                if start is not None and header_start != start:
                    raise ContactError(f"{where}: the plan starts at {words[1]}, not at time.start "
                                       f"({utc_text(start)}); drop one of the two")
                plan.start = header_start
                span = (_ion_earliest_s(header_start), _ion_latest_s(header_start))
            elif len(words) >= 3 and words[0] == "node":
                number = _pos_int(words[1], "node number", where, limit=MAX_NODE_NUMBER, why=_NODE_NUMBER_WHY)
                if number in plan.names:
                    raise ContactError(f"{where}: node {number} named twice in the header")
                # '# node N NAME [KIND]'; a name with spaces ('ISS (ZARYA)') is written with its kind last
                name = " ".join(words[2:-1]) if len(words) > 4 else words[2]
                kind = words[-1] if len(words) >= 4 else "node"
                if not (name + kind).isprintable():  # a control character would reach every table and message
                    raise ContactError(f"{where}: node {number}: expected a name and kind without control "
                                       f"characters, got {shown(name)} {shown(kind)}")
                plan.names[number] = check_name_length(name, f"{where}: node {number}", ContactError)
                plan.kinds[number] = kind
            continue
        headers = False  # the opening comment lines end at the first command
        words = line.split("#", 1)[0].split()
        if words[0] in _IGNORED:
            continue
        if words[0] == "@":
            if len(words) != 2:
                raise ContactError(f"{where}: expected '@ TIME' (+SECONDS or yyyy/mm/dd-hh:mm:ss)")
            reference = _ion_time(words[1], plan.start, where, reference, unread_start, span)
            continue
        if words[0] in ("d", "c") and len(words) >= 2 and words[1] in ("contact", "range"):
            _edit_ion(words, where, plan, reference, live, hypothetical, unread_start, span)
            continue
        if words[0] != "a" or len(words) < 2 or words[1] not in ("contact", "range"):
            raise ContactError(f"{where}: expected 'a contact' or 'a range', got {line[:40]!r}")
        if words[1] == "contact" and len(words) not in (7, 8):
            raise ContactError(f"{where}: expected 'a contact FROM_TIME UNTIL_TIME FROM TO RATE_BYTES_PER_S'")
        if words[1] == "contact" and len(words) == 8:
            _check_confidence(words[7], where)
        if words[1] == "range" and len(words) != 7:
            raise ContactError(f"{where}: expected 'a range FROM_TIME UNTIL_TIME FROM TO OWLT_S'")
        if words[1] == "contact" and words[2] in ("-1", "0"):
            # a registration (start -1) or a hypothetical contact (start 0): no scheduled data
            _unscheduled_contact(words, where, hypothetical, plan.start, reference, span)
            continue
        t0 = _ion_time(words[2], plan.start, where, reference, unread_start, span)  # a start that is no time first
        if t0 == span[0] and words[1] == "contact" and plan.start is not None:  # (no start: 1970 is only the least)
            raise ContactError(f"{where}: the start time {shown(words[2])} is {_ion_time_0_text()}; expected a "
                               "later start")
        if words[1] == "contact" and words[3] == "0":
            raise ContactError(f"{where}: the stop time 0 is not after the start time {shown(words[2])}; a "
                               "hypothetical contact is written with a start of 0 ('a contact 0 0 FROM TO RATE'), "
                               "as ionadmin reads it")
        if words[1] == "contact" and words[3] == "-1":  # ionadmin's 'until its latest time' (not in a range line)
            ion_end = f"the stop time -1 (ionadmin's latest time, {utc_text(ION_MAX_POSIX_TIME)})"
            t1 = _offset(ION_MAX_POSIX_TIME, plan.start, f"{where}: {ion_end}", f"{where}: {ion_end}", unread_start,
                         "; or write the contact's end as +SECONDS")
        else:
            t1 = _ion_time(words[3], plan.start, where, reference, unread_start, span)
        if t1 <= t0:
            raise ContactError(f"{where}: the end time {shown(words[3])} is not after the start time {shown(words[2])}")
        src, dst = _node_numbers(words[4], words[5], where)
        value = (_pos_int(words[6], "rate (bytes/s)", where, allow_zero=True) if words[1] == "contact"
                 else _pos_int(words[6], "OWLT (s)", where, allow_zero=True, limit=MAX_PLAN_OWLT_S))
        if src == dst:
            continue  # ION's loopback contacts (a node to itself) carry nothing between nodes
        entry = [t0, t1, src, dst, value, where]
        if words[1] == "contact" and value == 0:
            # ionadmin does not insert a scheduled contact of rate 0 (rfx_insert_contact: "Can't insert contact with
            # xmit rate 0") and reads on: it makes no window and holds no start, so a later contact of the same
            # start and nodes, or one overlapping it, is taken; its nodes are kept (a range may name them)
            _pair_of(live["rate 0"], src, dst)[t0] = entry
            plan.rate0_nodes.update((src, dst))
            continue
        if words[1] == "contact":  # ionadmin holds one contact of a start, FROM and TO: the second is refused here
            _hold_once(live["contact"], entry)
            plan.contacts.append(entry)
        else:
            if _add_range(live, entry):
                plan.ranges.append(entry)
            else:
                skipped.append(where)
    live.clear()  # its entries are plan.contacts' and plan.ranges', now made tuples in place
    def positive(contact: list) -> bool:
        """A contact changed to rate 0 ('c contact', which ionadmin takes and keeps) carries nothing: it makes no
        window (its reverse contact alone is a one-way one) but is kept, as ionadmin keeps it, so a contact of its
        direction overlapping it is refused; its nodes are kept (a range may name them); a deleted one's rate is
        None."""
        if contact[4] == 0:
            plan.rate0_nodes.update(contact[2:4])
        return contact[4] is not None

    _keep_as_tuples(plan.contacts, positive)
    _keep_as_tuples(plan.ranges, lambda r: r[4] is not None)
    if not any(c[4] for c in plan.contacts):
        raise ContactError(f"{source}: no 'a contact' lines of a positive rate between two different nodes")
    if skipped:
        log.warning("%s: %d 'a range' line(s) skipped, as ionadmin skips them (the first at %s): a range of the start, "
                    "FROM and TO of an earlier one, or overlapping one of its direction (or one ionadmin imputes, the "
                    "reverse of a range of FROM < TO); the earlier stays", source, len(skipped), skipped[0])
    if passed_over is not None:
        log.info("%s: a '# start' or '# node' line is read as a comment: header lines are read only at the top "
                 "of a plan whose first line is %r", passed_over, HEADER_MARKER)
    return plan


def _check_confidence(token: str, where: str) -> None:
    """Refuse a contact's optional last field, ``ionadmin``'s confidence in it (not used here), unless it is a
    number of 0..1 (``1.0``, ``0.5``)."""
    try:
        value = decimal_number(token, special=False)
    except ValueError:
        value = math.nan
    if not 0.0 <= value <= 1.0:
        raise ContactError(f"{where}: expected the contact's confidence, a number of 0..1, after the rate, got "
                           f"{shown(token)}")


def _unscheduled_contact(words: list[str], where: str, hypothetical: set[tuple[int, int]],
                         start: _dt.datetime | None, reference_s: float, span_s: tuple[float, float]) -> None:
    """Read an ``a contact`` line of start ``-1`` (registration) or ``0`` (hypothetical), which makes no window,
    as ``ionadmin`` reads it (``ionadmin.c``, ``executeAdd``: the start alone tells the two from a scheduled
    contact): its stop time (:func:`_check_unscheduled_time`, with ``start``, ``reference_s`` and ``span_s``),
    node numbers and rate; a registration names one node as FROM and TO, a
    hypothetical contact two different ones (``(from, to)`` added to ``hypothetical``, which ``d contact 0``
    deletes)."""
    registration = words[2] == "-1"
    kind = "registration" if registration else "hypothetical"
    _check_unscheduled_time(words[3], f"{kind} contact's stop", where, start, reference_s, span_s)
    src, dst = _node_numbers(words[4], words[5], where)
    _pos_int(words[6], "rate (bytes/s)", where, allow_zero=True)
    if registration and src != dst:
        raise ContactError(f"{where}: a registration contact (start -1) from node {src} to node {dst}; expected "
                           "FROM and TO the same node, the one it registers")
    if not registration and src == dst:
        raise ContactError(f"{where}: a hypothetical contact (start 0) from node {src} to itself; expected FROM "
                           "and TO two different nodes")
    if not registration:
        hypothetical.add((src, dst))  # a second one of the same nodes replaces the first, as in ionadmin


def _edit_ion(words: list[str], where: str, plan: IonPlan, reference: float,
              live: dict[str, dict], hypothetical: set[tuple[int, int]],
              unread_start: int | None, span_s: tuple[float, float]) -> None:
    """Apply a ``d contact`` / ``d range`` (start ``*``: every one of the pair) or ``c contact``
    line to the entries added so far; a deleted entry's value becomes ``None``. A contact is found by its
    start, FROM and TO, as ``ionadmin`` finds it; ``d contact 0`` deletes the hypothetical contact of FROM and TO
    (``hypothetical``), ``d contact -1`` is read and changes nothing, and ``c contact`` of start ``0`` or ``-1``
    is refused, as ``ionadmin`` refuses it; an ``a contact`` of rate 0 (``live["rate 0"]``, not inserted by
    ``ionadmin``) is deleted as nothing (``d``) and refused a change (``c``) (``unread_start``, ``span_s``: as
    :func:`_ion_time` takes them; :func:`parse_ion` gives the span it holds, which no line then computes again)."""
    kind = words[1]
    if words[0] == "c" and kind == "range":
        raise ContactError(f"{where}: expected 'c contact START FROM TO RATE_BYTES_PER_S'")
    if words[0] == "d" and len(words) != 5:
        raise ContactError(f"{where}: expected 'd {kind} START FROM TO'")
    if words[0] == "c" and len(words) not in (6, 7):
        raise ContactError(f"{where}: expected 'c contact START FROM TO RATE_BYTES_PER_S'")
    if words[0] == "c" and len(words) == 7:
        _check_confidence(words[6], where)
    src, dst = _node_numbers(words[3], words[4], where)
    if kind == "contact" and words[2] in ("-1", "0"):
        if words[0] == "c":
            raise ContactError(f"{where}: 'c contact' of start {words[2]}: a registration (-1) or hypothetical (0) "
                               "contact has no rate to change; expected the start of a scheduled contact")
        if words[2] == "0" and src == dst:  # never live: 'a contact 0' of one node is refused
            raise ContactError(f"{where}: no hypothetical contact (start 0) from node {src} to itself to delete; a "
                               "hypothetical contact joins two different nodes")
        if words[2] == "0" and (src, dst) not in hypothetical:
            raise ContactError(f"{where}: no hypothetical contact {src}->{dst} (start 0) to delete (an 'a contact 0' "
                               "line must come first)")
        hypothetical.discard((src, dst))
        return  # skipped contacts: no window to change
    pair = live[kind].get((src, dst), {})
    unheld = live["rate 0"].get((src, dst), {}) if kind == "contact" else {}  # the 'a contact' lines of rate 0
    if words[0] == "d" and words[2] == "*":
        if kind == "contact":
            hypothetical.discard((src, dst))
            unheld.clear()
        t0s = list(pair)
    else:
        t0s = [_ion_time(words[2], plan.start, where, reference, unread_start, span_s)]
    if kind == "range":
        if words[2] == "*":  # every range of the direction, and (FROM < TO) every range ionadmin imputed of it
            t0s += list(live["imputed"].get((src, dst), {}))
        for t0 in t0s:
            if not _remove_range(live, src, dst, t0) and src != dst:  # a loopback was skipped
                raise ContactError(f"{where}: no range {src}->{dst} starting at {shown(words[2])} to delete (an "
                                   "'a range' line must come first)")
        if words[2] == "*" and src < dst:
            for t0 in list(live["imputed"].get((dst, src), {})):
                _remove_range(live, dst, src, t0)
        return
    for t0 in t0s:
        held = pair.get(t0)  # a contact
        if held is None and t0 in unheld:  # an 'a contact' of rate 0, which ionadmin did not insert
            if words[0] == "d":
                del unheld[t0]  # ionadmin finds no contact and deletes nothing; nor is there a window to delete
                return
            raise ContactError(f"{where}: no contact {src}->{dst} starting at {shown(words[2])} to change: its line "
                               f"({unheld[t0][5]}) gives rate 0, which ionadmin does not insert; give the rate there")
        if held is None:
            if src == dst:
                return  # a loopback, which was skipped
            raise ContactError(f"{where}: no {kind} {src}->{dst} starting at {shown(words[2])} to "
                               f"{'delete' if words[0] == 'd' else 'change'} (an 'a {kind}' line must come first)")
        if words[0] == "c":
            held[4] = _pos_int(words[5], "rate (bytes/s)", where, allow_zero=True)
        else:
            held[4] = None
            del pair[t0]


class _Starts:
    """The starts of one direction's ranges, in order, in chunks of at most :attr:`CHUNK` (``bisect.insort`` into
    one list of a 64 MiB plan's ranges, listed latest first, would move terabytes): add, remove, and the nearest
    start before or after a time, each in O(log n + CHUNK)."""

    CHUNK = 512

    def __init__(self) -> None:
        self.chunks: list[list[float]] = []  # each sorted and non-empty, every start of one below the next's
        self.lasts: list[float] = []  # each chunk's last start

    def _chunk(self, t: float) -> int:
        """The index of the first chunk whose last start is >= ``t`` (``len(chunks)`` if none)."""
        return bisect.bisect_left(self.lasts, t)

    def add(self, t: float) -> None:
        i = min(self._chunk(t), len(self.chunks) - 1)
        if i < 0:
            self.chunks, self.lasts = [[t]], [t]
            return
        chunk = self.chunks[i]
        bisect.insort(chunk, t)
        self.lasts[i] = chunk[-1]
        if len(chunk) > self.CHUNK:
            half = len(chunk) // 2
            self.chunks[i:i + 1] = [chunk[:half], chunk[half:]]
            self.lasts[i:i + 1] = [chunk[half - 1], chunk[-1]]

    def remove(self, t: float) -> None:
        i = self._chunk(t)
        chunk = self.chunks[i]
        del chunk[bisect.bisect_left(chunk, t)]
        if chunk:
            self.lasts[i] = chunk[-1]
        else:
            del self.chunks[i], self.lasts[i]

    def before(self, t: float) -> float | None:
        """The latest start before ``t``, or ``None``."""
        i = self._chunk(t)
        if i < len(self.chunks) and self.chunks[i][0] < t:
            chunk = self.chunks[i]
            return chunk[bisect.bisect_left(chunk, t) - 1]
        return self.lasts[i - 1] if i > 0 else None

    def after(self, t: float) -> float | None:
        """The earliest start after ``t``, or ``None``."""
        i = bisect.bisect_right(self.lasts, t)
        if i == len(self.chunks):
            return None
        chunk = self.chunks[i]
        return chunk[bisect.bisect_right(chunk, t)]


def _add_range(live: dict[str, dict], entry: list) -> bool:
    """Hold range ``entry`` ``[t0, t1, from, to, owlt, where]`` in ``live`` (:func:`parse_ion`'s) as ``ionadmin``
    inserts it (``rfx_insert_range`` in ``ici/library/rfx.c``), or return ``False`` for a range it skips (a note in its
    log, the earlier range kept): one of the same start, FROM and TO as a live range (whatever its OWLT: "This range is
    already asserted", "Range OWLT not revised"), or overlapping the range of its direction, live or imputed, that
    starts before it or the one that starts after it (ranges that meet do not overlap). A range of FROM < TO also
    imputes its reverse, unless a range of TO, FROM and its start is there; a live range replaces the imputed one
    of its start."""
    t0, t1, src, dst = entry[:4]
    asserted, imputed = _pair_of(live["range"], src, dst), _pair_of(live["imputed"], src, dst)
    if t0 in asserted:
        return False
    starts = _pair_of(live["starts"], src, dst, _Starts)
    if t0 in imputed:
        del imputed[t0]
        starts.remove(t0)
    before, after = starts.before(t0), starts.after(t0)
    if before is not None and (asserted[before][1] if before in asserted else imputed[before]) > t0:
        return False
    if after is not None and after < t1:
        return False
    asserted[t0] = entry
    starts.add(t0)
    if src < dst and t0 not in live["range"].get((dst, src), {}) and t0 not in live["imputed"].get((dst, src), {}):
        _pair_of(live["imputed"], dst, src)[t0] = t1
        _pair_of(live["starts"], dst, src, _Starts).add(t0)
    return True


def _remove_range(live: dict[str, dict], src: int, dst: int, t0: float) -> bool:
    """Delete the range of ``src``, ``dst`` and start ``t0``, live or imputed, from ``live`` as ``rfx_remove_range``
    does (a live one's OWLT made ``None``), and, for ``src < dst``, the reverse range ``ionadmin`` imputed of it;
    ``False`` if there is none."""
    entry = live["range"].get((src, dst), {}).pop(t0, None)
    imputed = live["imputed"].get((src, dst), {}).pop(t0, None)
    if entry is None and imputed is None:
        return False
    if entry is not None:
        entry[4] = None
    live["starts"][src, dst].remove(t0)
    if src < dst and live["imputed"].get((dst, src), {}).pop(t0, None) is not None:
        live["starts"][dst, src].remove(t0)
    return True


def _seconds(value: float) -> str:
    """A count of seconds as written in a warning: ``12345``, or ``0.5`` when not whole."""
    return f"{value:.12g}"


def _minus(own: list, other: list) -> list[tuple[float, float, float]]:
    """The parts ``(t0, t1, rate)`` of each contact ``(t0, t1, from, to, rate, where)`` of ``own`` that no
    contact of ``other`` covers (both sorted by start, neither overlapping itself): one sweep of the two lists."""
    out, j = [], 0
    for f0, f1, rate in ((c[0], c[1], c[4]) for c in own):
        while j < len(other) and other[j][1] <= f0:
            j += 1  # ends before this contact, so before every later one
        cursor, k = f0, j
        while k < len(other) and other[k][0] < f1:
            if other[k][0] > cursor:
                out.append((cursor, other[k][0], rate))
            cursor = max(cursor, other[k][1])
            k += 1
        if cursor < f1:
            out.append((cursor, f1, rate))
    return out


def _pair_of(by_pair: dict[tuple[int, int], Any], src: int, dst: int, make: Callable[[], Any] = dict) -> Any:
    """What ``by_pair`` holds of direction ``src -> dst``: its entries by start, or what ``make`` makes (its
    :class:`_Starts`), made for a pair not seen yet (no object made for a pair already there)."""
    pair = by_pair.get((src, dst))
    if pair is None:
        pair = by_pair[src, dst] = make()
    return pair


def _hold_once(by_pair: dict[tuple[int, int], dict], contact: Sequence) -> None:
    """Hold ``contact`` ``(t0, t1, from, to, rate, where)`` in ``by_pair`` by its direction and start, where the
    ION and HDTN imports keep the contacts read so far: a second contact of the same start, FROM and TO is
    refused at its own line or record, naming the first (``ionadmin`` holds one)."""
    src, dst = contact[2], contact[3]
    first = _pair_of(by_pair, src, dst).setdefault(contact[0], contact)
    if first is not contact:
        raise ContactError(_overlap_message(src, dst, first, contact))


def _overlap_message(src: int, dst: int, first: Sequence, second: Sequence) -> str:
    """The refusal of contact ``second`` ``(t0, t1, from, to, rate, where)``, which overlaps the earlier-listed
    ``first`` of the same direction ``src -> dst``: listed twice when the two have the same times."""
    head = f"{second[5]}: contact {src}->{dst} +{second[0]:g} +{second[1]:g}"
    if (first[0], first[1]) == (second[0], second[1]):
        return f"{head} listed twice (first at {first[5]})"
    if second[0] == first[1] or second[1] == first[0]:
        return (f"{head} meets the contact +{first[0]:g} +{first[1]:g} at {first[5]}, an overlap to ionadmin (it "
                "ignores the later); expected one contact of the two, or a gap")
    return (f"{head} overlaps the contact +{first[0]:g} +{first[1]:g} at {first[5]}; contacts of one direction "
            "must not overlap")


def _in_file_order(contacts: Sequence[Sequence], some: Sequence[Sequence]) -> list[Sequence]:
    """The contacts ``some`` (each one of ``contacts``) in the order of ``contacts``, the file's: one pass over the
    plan, nothing held per contact of it but those of ``some``."""
    wanted = {id(c) for c in some}
    return [c for c in contacts if id(c) in wanted]


def _hdtn_meet_message(src: int, dst: int, first: Sequence, second: Sequence) -> str:
    """The refusal of HDTN record ``second`` ``(t0, t1, from, to, rate, where)``, which ends at the second the
    earlier-listed ``first`` of its direction starts: HDTN's router runs a link's up and down events of one second in
    the order of the records, so it takes the link down there, for the rest of ``first``."""
    record = first[5].rsplit(": ", 1)[-1]  # 'contacts[1]': the file is named once, at the start
    return (f"{second[5]}: contact {src}->{dst} +{second[0]:g} +{second[1]:g} meets the contact +{first[0]:g} "
            f"+{first[1]:g} listed before it, {record}, which HDTN's router takes down at +{second[1]:g} (events of "
            "one second in record order); expected the records in time order")


def _plan_windows(contacts: Sequence[tuple[float, float, int, int, float, str]], meeting_overlaps: bool = True
                  ) -> tuple[list[tuple[int, int, float, float, float, int]], float, float, int]:
    """The windows of one-direction contacts ``(t0, t1, from, to, rate, where)``.

    For each pair of nodes, a duplex window is each stretch where an A->B contact and a B->A
    contact are both up (their intersection), its capacity the smaller of the two rates over that
    stretch; each stretch of a contact that no reverse contact covers is a one-way window at that
    contact's rate. The contacts of one direction must not overlap one another (their rate there
    would be ambiguous; ``ionadmin`` refuses such a contact too), nor, when ``meeting_overlaps`` (an ION plan's),
    meet one another (one ending at the second the next starts, an overlap to ``ionadmin``'s
    ``rfx_insert_contact``, which ignores the later-listed), a contact of rate 0 among them (ION's
    ``c contact`` to 0, which ``ionadmin`` keeps), which makes no window; in an HDTN plan two that meet are read,
    unless the later was listed first (:func:`_hdtn_meet_message`). Sorting each direction and
    sweeping the two lists together visits each contact a bounded number of times: O(n log n)
    for n contacts.

    Returns ``(rows, one_way_s, total_s, unequal)``: rows ``(low node, high node, t0, t1,
    capacity_bits, direction)``, the contact-seconds kept as one-way windows, all contact-seconds,
    and how many duplex windows have different rates in the two directions."""
    # each direction's contacts themselves (a reference each, no tuple a contact: 1.4 million of them took
    # 0.15 GB), sorted by start; the sort is stable, so contacts of one start stay in file order
    by_direction: dict[tuple[int, int], list[tuple[float, float, int, int, float, str]]] = {}
    total_s = 0.0
    zero = False  # a contact of rate 0 (ION's 'c contact' to 0): in the overlap check, then let go
    for c in contacts:
        by_direction.setdefault((c[2], c[3]), []).append(c)
        if c[4]:
            total_s += c[1] - c[0]
        else:
            zero = True
    start = operator.itemgetter(0)
    meets = []  # (earlier, later) of each two contacts of a direction that meet, in an HDTN plan
    for (src, dst), own in by_direction.items():
        own.sort(key=start)
        for prev, cur in zip(own, own[1:]):
            if cur[0] > prev[1]:
                continue
            if cur[0] == prev[1] and not meeting_overlaps:
                meets.append((prev, cur))
                continue
            first, second = _in_file_order(contacts, (prev, cur))
            raise ContactError(_overlap_message(src, dst, first, second))
        if zero:
            own[:] = [c for c in own if c[4]]  # a contact of rate 0 makes no window
    if meets:  # HDTN: the later listed first has its link taken down at the second they meet
        listed = _in_file_order(contacts, [c for pair in meets for c in pair])
        position = {id(c): k for k, c in enumerate(listed)}
        late = [(position[id(prev)], prev, cur) for prev, cur in meets if position[id(cur)] < position[id(prev)]]
        if late:
            _, prev, cur = min(late, key=operator.itemgetter(0))
            raise ContactError(_hdtn_meet_message(prev[2], prev[3], cur, prev))
    rows = []
    one_way_s = 0.0
    unequal = 0
    for (src, dst), forward in by_direction.items():
        backward = by_direction.get((dst, src), [])
        lo, hi = min(src, dst), max(src, dst)
        for t0, t1, rate in _minus(forward, backward):  # this direction alone
            rows.append((lo, hi, t0, t1, 8.0 * rate * (t1 - t0), A_TO_B if src == lo else B_TO_A))
            one_way_s += t1 - t0
        if src > dst:
            continue  # the duplex windows of the pair, once
        i = j = 0
        while i < len(forward) and j < len(backward):
            f0, f1, _, _, f_rate, _ = forward[i]
            b0, b1, _, _, b_rate, _ = backward[j]
            t0, t1 = max(f0, b0), min(f1, b1)
            if t1 > t0:
                rows.append((src, dst, t0, t1, 8.0 * min(f_rate, b_rate) * (t1 - t0), BOTH))
                unequal += f_rate != b_rate
            # the contact that ends first meets no later contact of the other direction
            if f1 <= b1:
                i += 1
            if b1 <= f1:
                j += 1
    return rows, one_way_s, total_s, unequal


def _largest_covering(ranges: Sequence[tuple[float, float, float]], spans: Sequence[tuple[float, float, int]]
                      ) -> list[float]:
    """For each span ``(s0, s1, _)``, the largest value of the ranges ``(r0, r1, value)`` with
    ``r0 <= s0`` and ``s1 <= r1`` (NaN if none): the ranges enter in order of ``r0`` as the spans
    are taken in order of ``s0``, into a Fenwick tree of running maxima indexed by ``r1`` from the
    latest down, so each span asks only among the ranges that reach past its end.
    O((n + m) log m) rather than a scan of every range for every span."""
    if not ranges:
        return [np.nan] * len(spans)
    ends = sorted({r1 for _, r1, _ in ranges})
    tree = [-math.inf] * (len(ends) + 1)
    by_start = sorted(ranges, key=lambda r: r[0])
    out = [np.nan] * len(spans)
    nxt = 0
    for k in sorted(range(len(spans)), key=lambda k: spans[k][0]):
        s0, s1, _ = spans[k]
        while nxt < len(by_start) and by_start[nxt][0] <= s0:
            _, r1, value = by_start[nxt]
            pos = len(ends) - bisect.bisect_left(ends, r1)  # 1 for the latest end
            while pos <= len(ends):
                tree[pos] = max(tree[pos], value)
                pos += pos & -pos
            nxt += 1
        pos, best = len(ends) - bisect.bisect_left(ends, s1), -math.inf  # the ends at or after s1
        while pos > 0:
            best = max(best, tree[pos])
            pos -= pos & -pos
        if best > -math.inf:
            out[k] = best
    return out


def _largest_joint_cover(ranges: Sequence[tuple[float, float, float]], span: tuple[float, float],
                         starts: list[float], reach: list[float]) -> float:
    """The largest value of the ranges ``(r0, r1, value)`` (sorted by ``r0``, whose starts are ``starts`` and whose
    running largest ends are ``reach``) that overlap ``span`` ``(s0, s1)``, if together they cover it, else NaN: a
    range gives the light time at each time within it, so a window over two ranges (an ION contact joined of two
    windows that met, of one range each) takes the larger of the two. Only the ranges reaching past ``s0`` and
    starting before ``s1`` are looked at (a bisection on ``reach``)."""
    s0, s1 = span
    cursor, best = s0, -math.inf
    for i in range(bisect.bisect_right(reach, s0), bisect.bisect_left(starts, s1)):
        r0, r1, value = ranges[i]
        if r1 <= s0:
            continue  # ends before the span (an earlier range reaches past it)
        if r0 > cursor:
            return np.nan  # a stretch of the span no range covers
        cursor, best = max(cursor, r1), max(best, value)
    return best if cursor >= s1 else np.nan


def ion_to_plan(ion: IonPlan, source: str, round_boundaries_s: Sequence[float] | None = None,
                acquisition_s: float = 0.0) -> ContactPlan:
    """A :class:`ContactPlan` from parsed ION contacts (two-way and one-way windows, per-window rates)."""
    numbers = sorted(set(ion.names) | {c[2] for c in ion.contacts if c[4]} | {c[3] for c in ion.contacts if c[4]})
    index = {n: i for i, n in enumerate(numbers)}
    names = [ion.names.get(n, f"ipn-{n}") for n in numbers]
    named = brief(source)  # the file as every message names it (the plan's meta keeps it whole)
    if len(set(names)) != len(names):
        raise ContactError(f"{named}: two header nodes share a name")
    kinds = [ion.kinds.get(n, "node") for n in numbers]
    if ion.start is not None:  # every window's UTC stamps are the plan's start plus its times
        # every contact-second of a positive rate is in a window: the last window's end
        last = max((c for c in ion.contacts if c[4]), key=lambda c: c[1])
        check_span_end(ion.start, last[1], f"{last[5]}: contact", "the plan's start")
    rows, one_way_s, total_s, unequal = _plan_windows(ion.contacts, ion.format == "ion")
    rows = [(index[src], index[dst], t0, t1, vol, d) for src, dst, t0, t1, vol, d in rows]
    if one_way_s:
        n_one_way = sum(r[5] != BOTH for r in rows)
        log.info("%s: %s of %s contact-seconds have no reverse contact at the same time; kept as %d one-way "
                 "window%s", named, _seconds(one_way_s), _seconds(total_s), n_one_way, "" if n_one_way == 1 else "s")
    if unequal:
        log.warning("%s: %d of %d two-way windows have different rates in the two directions; each carries the "
                    "smaller", named, unequal, sum(r[5] == BOTH for r in rows))
    ranges: dict[tuple[int, int], list[tuple[float, float, int]]] = {}
    for t0, t1, src, dst, owlt, where in ion.ranges:
        if src not in index or dst not in index:
            if all(n in index or n in ion.rate0_nodes for n in (src, dst)):
                continue  # a node of contacts of rate 0 only: the pair has no window for the range to cover
            raise ContactError(f"{where}: range {src}->{dst} names a node with no contact to another node")
        ranges.setdefault((min(index[src], index[dst]), max(index[src], index[dst])), []).append((t0, t1, owlt))
    rows.sort(key=lambda r: (r[2], r[0], r[1]))  # the window table's order: start, then node ids
    a, b, t0s, t1s, vol, direction = (np.array(col) for col in zip(*rows))
    del rows  # a tuple a window (0.1 GB for 565,000), now in the arrays: let go before the OWLTs' spans
    # OWLT of a window: the largest of the range lines (either direction) that cover it
    owlt_w = [np.nan] * a.size
    spans: dict[tuple[int, int], list[tuple[float, float, int]]] = {}
    for k, (i, j, s0, s1) in enumerate(zip(a.tolist(), b.tolist(), t0s.tolist(), t1s.tolist())):
        spans.setdefault((i, j), []).append((s0, s1, k))
    for pair, pair_spans in spans.items():
        pair_ranges = ranges.get(pair, [])
        joint = None  # the pair's ranges by start, their starts and running largest ends, made for a first gap
        for (s0, s1, k), owlt in zip(pair_spans, _largest_covering(pair_ranges, pair_spans)):
            if np.isnan(owlt) and pair_ranges:  # no one range covers it: the ranges that together do, if any
                if joint is None:
                    by_start = sorted(pair_ranges, key=operator.itemgetter(0))
                    joint = (by_start, [r[0] for r in by_start], list(itertools.accumulate(
                        (r[1] for r in by_start), max)))
                owlt = _largest_joint_cover(joint[0], (s0, s1), joint[1], joint[2])
            owlt_w[k] = float(owlt)  # exact: an OWLT is at most MAX_PLAN_OWLT_S
    nan = np.full(a.size, np.nan)
    windows = WindowTable(a, b, t0s, t1s, nan, nan, vol, direction=direction, sort=False)
    bounds = (np.asarray(round_boundaries_s, dtype=float) if round_boundaries_s is not None
              else np.array([0.0, float(t1s.max())]))
    # None (JSON null), not NaN, for a window no range line covers: plan.to_json writes meta as JSON
    meta = {"source": source, "kind": "plan", "format": ion.format,
            "owlt_s_per_window": [None if np.isnan(o) else float(o) for o in owlt_w]}
    return ContactPlan(names, windows, LinkModel("plan", acquisition_s=acquisition_s), bounds,
                       ion.start, kinds, meta)


#: HDTN times at or after this many seconds are Unix times (2000-01-01T00:00:00Z), as HDTN writes them
#: with ``--use-unix-timestamp``; smaller ones are seconds after the plan start (HDTN's default epoch).
HDTN_UNIX_FROM_S = 946_684_800
_HDTN_KEYS = {"contact", "source", "dest", "startTime", "endTime", "rateBitsPerSec", "rate", "owlt",
              "finalDestination"}


def _hdtn_int(record: dict, key: str, where: str, positive: bool = False, limit: int = MAX_PLAN_INT, why: str = "",
              negative_why: str = "") -> int:
    """Field ``key`` of HDTN record ``record``: a non-negative (``positive``: positive) integer of at most ``limit``;
    the refusal of a larger one gives the reason ``why`` (:func:`_limit_text`), that of a negative one
    ``negative_why``."""
    value = record.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value < (1 if positive else 0):
        why_not = f" ({negative_why})" if negative_why and isinstance(value, int) and value < 0 else ""
        raise ContactError(f"{where}: {key}: expected a{' positive' if positive else ' non-negative'} integer"
                           f"{why_not}, got {str(value)[:40]!r}")
    if value > limit:
        raise ContactError(f"{where}: {key}: expected an integer of at most {_limit_text(limit, why)}, "
                           f"got {str(value)[:40]!r}")
    return value


def parse_hdtn(text: str, source: str = "<text>", start: _dt.datetime | None = None) -> IonPlan:
    """Parse an HDTN contact plan (``contactPlan.json``) into the fields an ION file gives.

    Each record of ``"contacts"`` is one direction: ``source`` -> ``dest`` (node numbers) from
    ``startTime`` to ``endTime`` (whole seconds) at ``rateBitsPerSec`` (or HDTN's deprecated ``rate``,
    Mbit/s; a rate of 0, HDTN's unlimited, is refused), with an optional one-way light time ``owlt`` (s; 0 where
    it is missing, as ``cp_load`` reads it); ``contact`` and ``finalDestination`` are HDTN's own bookkeeping and
    are not used. Times are seconds after the plan start (HDTN's default: its epoch is the moment it loads the
    plan), or Unix times when every ``startTime`` is
    after 2000-01-01 (HDTN's ``--use-unix-timestamp``), which need ``start`` to be converted. The records are
    read in one pass, each checked whole where it is read (the first record's kind of time is every record's),
    so the first such problem in file order is the one refused; overlaps of one direction are found once
    every record is read (:func:`ion_to_plan`), after any malformed record.

    >>> plan = parse_hdtn('{"contacts": [{"contact": 0, "source": 1, "dest": 2, "startTime": 0, '
    ...                   '"endTime": 60, "rateBitsPerSec": 8000, "owlt": 1}]}')
    >>> plan.contacts, plan.ranges
    ([(0.0, 60.0, 1, 2, 1000.0, '<text>: contacts[0]')], [(0.0, 60.0, 1, 2, 1, '<text>: contacts[0]')])
    """
    try:
        doc = bounded_loads(text, max_depth=MAX_HDTN_JSON_DEPTH, max_items=MAX_HDTN_JSON_VALUES, allow_nan=True)
    except ValueError as exc:
        raise ContactError(f"{source}: invalid JSON ({exc}); expected an HDTN contact plan") from None
    records = doc.get("contacts") if isinstance(doc, dict) else None
    if not isinstance(records, list):
        raise ContactError(f"{source}: expected an HDTN contact plan, a JSON object with a \"contacts\" list")
    plan = IonPlan(start, format="hdtn")
    del doc  # 'records' is the only reference left to the parsed records: each is let go once read below
    # the first record's kind of time (Unix or seconds after the plan start) is every record's: one that differs
    # is refused where it is read, so each record is checked whole in one pass, in file order
    first: tuple[int, bool] | None = None  # (index, Unix time) of the first record
    offset = 0.0
    unread_unix = False  # Unix times without the start to convert them: refused once every record is read
    # each direction's records of a positive rate by start, as parse_ion's live contacts: a second record of the same
    # start, source and dest is refused where it is read (the ION plan of the same contacts is refused)
    firsts: dict[tuple[int, int], dict[float, tuple]] = {}
    for i, record in enumerate(records):
        records[i] = None  # a record's dict (about 0.5 kB) let go as its contact is made, not after every one
        where = f"{source}: contacts[{i}]"
        if not isinstance(record, dict):
            raise ContactError(f"{where}: expected an object, got {type(record).__name__}")
        unknown = sorted(set(record) - _HDTN_KEYS)
        if unknown:
            raise ContactError(f"{where}: unknown key {shown(unknown[0])}; expected {', '.join(sorted(_HDTN_KEYS))}")
        src = _hdtn_int(record, "source", where, True, HDTN_MAX_NODE_NUMBER, _HDTN_NODE_WHY)
        dst = _hdtn_int(record, "dest", where, True, HDTN_MAX_NODE_NUMBER, _HDTN_NODE_WHY)
        # HDTN's router would take a later time's link up and down at 0 (its epoch): never up
        t0, t1 = (_hdtn_int(record, key, where, False, HDTN_MAX_TIME_S, _HDTN_TIME_WHY, _HDTN_NEGATIVE_TIME_WHY)
                  for key in ("startTime", "endTime"))
        if "rateBitsPerSec" in record:
            rate_key, rate_bps = "rateBitsPerSec", _hdtn_int(record, "rateBitsPerSec", where)
        elif "rate" in record:
            rate_key, rate_bps = "rate", _hdtn_int(record, "rate", where) * 1_000_000
        else:
            raise ContactError(f"{where}: expected rateBitsPerSec (or HDTN's older rate, Mbit/s)")
        if rate_bps == 0:  # HDTN's "unlimited" (cp_load, libcgr.cpp): a contact of no known capacity
            raise ContactError(f"{where}: {rate_key} 0 is HDTN's unlimited rate (its CGR plans with 1e9 bit/s, its "
                               "router sets no rate limit), a capacity this import cannot know; expected the link's "
                               "rate, > 0")
        # a missing owlt is 0 to cp_load (libcgr.cpp), HDTN's only reader of it, and so a light time of 0 here
        owlt = (_hdtn_int(record, "owlt", where, limit=MAX_PLAN_OWLT_S, negative_why=_HDTN_NEGATIVE_OWLT_WHY)
                if "owlt" in record else 0)
        unix = t0 >= HDTN_UNIX_FROM_S
        if first is None:
            first = (i, unix)
            if unix and start is not None:
                offset = start.timestamp()
            unread_unix = unix and start is None
        elif unix != first[1]:  # read as relative, the Unix ones would sit decades out, unused
            raise ContactError(
                f"{where}: startTime is a Unix time (after 2000-01-01) where other records give seconds after the "
                f"plan start (the first, contacts[{first[0]}]); use one kind of time in a plan" if unix else
                f"{where}: startTime is seconds after the plan start where other records give Unix times (after "
                f"2000-01-01; the first, contacts[{first[0]}]); use one kind of time in a plan")
        t0_s, t1_s = t0 - offset, t1 - offset
        for value, key in ((t0_s, "startTime"), (t1_s, "endTime")):
            if not unread_unix and not 0 <= value <= MAX_ION_OFFSET_S:
                raise ContactError(f"{where}: {key} {value + offset:.0f} is "
                                   f"{'before' if value < 0 else 'too long after'} the plan start"
                                   + (f" {utc_text(start)}" if start is not None else ""))
        if t1 <= t0:
            raise ContactError(f"{where}: endTime {t1} is not after startTime {t0}")
        if unread_unix:
            continue  # each record is still checked (its fields, its kind of time), but not placed in time
        if src == dst:
            continue  # a contact of a node with itself carries nothing between nodes
        plan.ranges.append((float(t0_s), float(t1_s), src, dst, owlt, where))
        contact = (float(t0_s), float(t1_s), src, dst, rate_bps / 8.0, where)
        _hold_once(firsts, contact)
        plan.contacts.append(contact)
    del records
    if unread_unix:
        raise ContactError(f"{source}: the times are Unix times (every startTime after 2000-01-01); "
                           "set time.start to the plan start to read them")
    if not plan.contacts:
        raise ContactError(f"{source}: no contacts of a positive rate between two different nodes")
    return plan


def read_hdtn(path: str | Path, round_boundaries_s: Sequence[float] | None = None, acquisition_s: float = 0.0,
              start: _dt.datetime | None = None) -> ContactPlan:
    """Read an HDTN contact-plan file (JSON) into a :class:`ContactPlan`: the rules of
    :func:`read_ion` (a two-way window where both directions are up, at the smaller rate of the two, a
    one-way window where only one is), nodes
    named ``ipn-N``."""
    path = Path(path)
    text = read_text_file(path, ContactError, "contact plan file", MAX_PLAN_BYTES)
    return ion_to_plan(parse_hdtn(text, brief(path), start), str(path), round_boundaries_s, acquisition_s)


def read_plan(path: str | Path, round_boundaries_s: Sequence[float] | None = None, acquisition_s: float = 0.0,
              start: _dt.datetime | None = None) -> ContactPlan:
    """Read a contact-plan file by its name: ``.json`` is HDTN (:func:`read_hdtn`), anything else
    ION (:func:`read_ion`)."""
    reader = read_hdtn if Path(path).suffix.lower() == ".json" else read_ion
    return reader(path, round_boundaries_s, acquisition_s, start)


def read_ion(path: str | Path, round_boundaries_s: Sequence[float] | None = None, acquisition_s: float = 0.0,
             start: _dt.datetime | None = None) -> ContactPlan:
    """Read an ION contact-plan file into a :class:`ContactPlan` (see the module doc for the rules)."""
    path = Path(path)
    text = read_text_file(path, ContactError, "contact plan file", MAX_PLAN_BYTES)
    ion = parse_ion(text, brief(path), start)  # its refusals name the file as every message names one
    return ion_to_plan(ion, str(path), round_boundaries_s, acquisition_s)
