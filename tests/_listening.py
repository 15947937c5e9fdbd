"""Which TCP addresses a set of processes listens on (from /proc, Linux), for the tests
that check a local Ray node listens on 127.0.0.1 only."""

from __future__ import annotations

import os

_LOOPBACK = {"0100007F", "0000000000000000FFFF00000100007F", "00000000000000000000000001000000"}  # 127.0.0.1, ::1


def _inodes(pid: str) -> set[str]:
    found = set()
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
            if target.startswith("socket:["):
                found.add(target[8:-1])
    except OSError:  # ended meanwhile
        pass
    return found


def listening(pids: set[str]) -> list[tuple[bool, str, int]]:
    """``(on loopback, address in /proc's hex, port)`` of each TCP socket ``pids`` listen on."""
    inodes = set().union(*(_inodes(p) for p in pids)) if pids else set()
    out = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as fh:
            for line in fh.read().splitlines()[1:]:
                f = line.split()
                if f[3] == "0A" and f[9] in inodes:  # LISTEN
                    host, port = f[1].split(":")
                    out.append((host in _LOOPBACK, host, int(port, 16)))
    return out


def _stat(pid: str) -> list[str]:
    with open(f"/proc/{pid}/stat") as fh:
        return fh.read().rpartition(")")[2].split()  # state, ppid, pgrp, ...


def in_groups(pgids: set[int]) -> set[str]:
    """The processes of the process groups ``pgids``."""
    found = set()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if int(_stat(pid)[2]) in pgids:
                found.add(pid)
        except (OSError, IndexError):
            pass
    return found


def descendants(root: int) -> set[str]:
    """The processes below ``root`` (its children, theirs, ...)."""
    parent = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            parent[pid] = _stat(pid)[1]
        except (OSError, IndexError):
            pass
    found, todo = set(), [str(root)]
    while todo:
        p = todo.pop()
        kids = [c for c, pp in parent.items() if pp == p and c not in found]
        found.update(kids)
        todo.extend(kids)
    return found
