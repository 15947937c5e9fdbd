"""CURVE key pairs and the trust store of a node.

A node has one key pair, two files written by :func:`zmq.auth.create_certificates`
(the ZeroMQ certificate format):
``<name>.key`` (public, give it to peers) and ``<name>.key_secret`` (public +
secret, mode 0600, never leaves the drone).

The *trust store* is a folder of peer public keys, one ``<peer-id>.key`` file per
peer: the file name (without ``.key``) is the peer's id, and only these keys are
admitted by the node's ZAP authenticator. ``fol keys trust peer.key`` copies a
key in; deleting the file (``fol keys revoke <peer-id>``) revokes it: a running
agent notices the change within a second and refuses the key from then on, even
on connections opened before (and even when another file of the store cannot be
read: the store is then not re-read, but keys whose files are gone are dropped).

Example::

    >>> import tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> pub, sec = generate_keypair(d / "keys", "drone-1")
    >>> store = d / "trusted"
    >>> _ = trust_key(store, pub)
    >>> TrustStore(store).reload()[load_keypair(sec).public]
    'drone-1'
"""

from __future__ import annotations

import logging
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import zmq
import zmq.auth

from fol.agent.protocol import ProtocolError, check_name
from fol.errors import ConfigError
from fol.fileio import atomic_write_text

__all__ = [
    "KeyPair",
    "generate_keypair",
    "load_keypair",
    "load_public_key",
    "trust_key",
    "revoke_key",
    "TrustStore",
    "ZapKeyCheck",
]

log = logging.getLogger(__name__)

PUBLIC_SUFFIX = ".key"
SECRET_SUFFIX = ".key_secret"


@dataclass(frozen=True)
class KeyPair:
    """A CURVE key pair, both keys Z85-encoded (40 ASCII characters)."""

    public: bytes
    secret: bytes


def _check_z85(key: bytes, what: str) -> bytes:
    try:
        raw = zmq.utils.z85.decode(key)
    except Exception:  # noqa: BLE001 - z85.decode raises several types on bad input
        raw = b""
    if len(key) != 40 or len(raw) != 32:
        raise ConfigError(f"{what}: not a CURVE key (expected 40 Z85 characters)")
    return key


def generate_keypair(folder: str | os.PathLike[str], name: str, overwrite: bool = False) -> tuple[Path, Path]:
    """Create ``<folder>/<name>.key`` and ``<folder>/<name>.key_secret``; return both paths.

    Refuses to overwrite an existing key pair unless ``overwrite`` is set (losing
    a drone's secret key locks it out of its swarm).
    """
    try:
        check_name(name, "key name")
    except ProtocolError as exc:
        raise ConfigError(str(exc)) from None
    folder = Path(folder)
    public, secret = folder / f"{name}{PUBLIC_SUFFIX}", folder / f"{name}{SECRET_SUFFIX}"
    if not overwrite and (public.exists() or secret.exists()):
        raise ConfigError(f"{secret if secret.exists() else public}: key file already exists (pass --force to replace it)")
    old_umask = os.umask(0o077)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        pub_name, sec_name = zmq.auth.create_certificates(str(folder), name, metadata={"node": name})
    except OSError as exc:
        raise ConfigError(f"{folder}: cannot write the key pair there ({_folder_failure(exc)})") from None
    finally:
        os.umask(old_umask)
    os.chmod(sec_name, 0o600)
    os.chmod(pub_name, 0o644)
    return Path(pub_name), Path(sec_name)


def _folder_failure(exc: OSError) -> str:
    """Why a key folder could not be made: a file in its place, or the system's reason."""
    return "exists and is not a folder" if isinstance(exc, FileExistsError) else str(exc.strerror or exc)


#: A ZeroMQ certificate file is a few hundred bytes; anything larger is not one (refused unread).
MAX_CERTIFICATE_BYTES = 64 * 1024


def _read_certificate(path: str | os.PathLike[str], kind: str) -> tuple[bytes, bytes | None]:
    """``(public, secret or None)`` as written in a ZeroMQ certificate file (not yet checked as
    Z85); a missing, unreadable or malformed file is one :class:`ConfigError` line."""
    if not os.path.exists(path):  # pyzmq says "Invalid certificate file" for a missing one
        raise ConfigError(f"{path}: {kind} file not found")
    try:  # pyzmq reads line by line: a FIFO or /dev/zero would block or grow without bound
        info = os.stat(path)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read {kind} file ({exc.strerror or exc})") from None
    if not stat.S_ISDIR(info.st_mode):  # a folder: the OSError below
        if not stat.S_ISREG(info.st_mode):
            raise ConfigError(f"{path}: not a regular file; expected a {kind} file")
        if info.st_size > MAX_CERTIFICATE_BYTES:
            raise ConfigError(f"{path}: {info.st_size} bytes, too large for a {kind} file "
                              f"(at most {MAX_CERTIFICATE_BYTES})")
    try:
        return zmq.auth.load_certificate(path)
    except OSError as exc:  # a folder, no permission
        raise ConfigError(f"{path}: cannot read {kind} file ({exc.strerror or exc})") from None
    except (ValueError, IndexError):  # no public-key line, or a key line without '=' (pyzmq indexes the split)
        raise ConfigError(f"{path}: not a ZeroMQ certificate "
                          f"(expected a line public-key = \"<40 Z85 characters>\")") from None


def load_keypair(path: str | os.PathLike[str]) -> KeyPair:
    """The key pair in a ``.key_secret`` certificate file."""
    public, secret = _read_certificate(path, "key")
    if secret is None:
        raise ConfigError(f"{path}: holds no secret key; expected the node's <name>{SECRET_SUFFIX} file")
    mode = os.stat(path).st_mode & 0o777
    if mode & 0o077:
        log.warning("%s: the secret key is readable by other users (mode %o); 'chmod 600 %s' as "
                    "'fol keys gen' writes it", path, mode, path)
    return KeyPair(_check_z85(public, f"{path} public-key"), _check_z85(secret, f"{path} secret-key"))


def load_public_key(path_or_key: str | os.PathLike[str]) -> bytes:
    """A public key from a certificate file, or given directly as 40 Z85 characters."""
    text = os.fspath(path_or_key)
    if len(text) == 40 and not os.path.exists(text):
        return _check_z85(text.encode("ascii", "replace"), "public key")
    public, _ = _read_certificate(text, "public key")
    return _check_z85(public, f"{text} public-key")


def trust_key(trust_dir: str | os.PathLike[str], key_file: str | os.PathLike[str], name: str | None = None) -> Path:
    """Add a peer's public key to a trust store; returns the stored file.

    The peer id is ``name`` or the key file's stem. Only the public key is
    stored, even if a secret certificate was given by mistake.
    """
    src = Path(key_file)
    peer = name or src.name.removesuffix(SECRET_SUFFIX).removesuffix(PUBLIC_SUFFIX)
    try:
        check_name(peer, "peer id")
    except ProtocolError as exc:
        raise ConfigError(f"{src}: {exc}") from None
    public = load_public_key(src)
    store = Path(trust_dir)
    try:
        store.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"{store}: cannot be used as a trust store folder ({_folder_failure(exc)})") from None
    existing = TrustStore(store).reload()
    if public in existing and existing[public] != peer:
        raise ConfigError(f"{src}: this key is already trusted as {existing[public]!r}")
    target = store / f"{peer}{PUBLIC_SUFFIX}"
    try:  # crash-safe: the old key file or the whole new one, never a torn one
        atomic_write_text(target, "#   ZeroMQ CURVE public key of a trusted FOL peer\n"
                          f"metadata\n    node = {peer}\ncurve\n    public-key = \"{public.decode()}\"\n")
    except OSError as exc:
        raise ConfigError(f"{target}: cannot write the trusted key ({exc.strerror or exc})") from None
    log.info("trusted %s (%s) in %s", peer, public.decode(), store)
    return target


def revoke_key(trust_dir: str | os.PathLike[str], peer: str) -> Path:
    """Remove a peer's key from a trust store; returns the removed file."""
    try:
        check_name(peer, "peer id")  # no path separators: only a file of the store is removed
    except ProtocolError as exc:
        raise ConfigError(str(exc)) from None
    store = Path(trust_dir)
    if not store.is_dir():
        raise ConfigError(f"{store}: trust store folder "
                          f"{'exists and is not a folder' if store.exists() else 'does not exist'}")
    target = store / f"{peer}{PUBLIC_SUFFIX}"
    if not target.is_file():
        raise ConfigError(f"{target}: no trusted key for peer {peer!r}")
    target.unlink()
    return target


class ZapKeyCheck:
    """A ZAP credentials provider (pyzmq's ``configure_curve_callback``) that admits a client's
    Z85 public key when ``admits(key)`` is true; called in the authenticator's thread.

    The agent's peer domain asks its :class:`TrustStore` (``key in store.peers``), so the keys
    admitted to a CURVE handshake are always the keys the agent trusts at the message level,
    after any reload, successful or failed.
    """

    def __init__(self, admits: Callable[[bytes], bool]) -> None:
        self.admits = admits

    def callback(self, domain: str, key: bytes) -> bool:
        return bool(self.admits(key))


class TrustStore:
    """The folder of trusted peer keys, as a map Z85 public key -> peer id.

    :meth:`changed` is a cheap test (folder listing and modification times) used
    by the agent to re-read the store about once a second.
    """

    def __init__(self, folder: str | os.PathLike[str]) -> None:
        self.folder = Path(folder)
        self.peers: dict[bytes, str] = {}
        self._signature: tuple = ()

    def _current_signature(self) -> tuple:
        try:
            entries = sorted(
                (e.name, e.stat().st_mtime_ns, e.stat().st_size)
                for e in os.scandir(self.folder)
                if e.name.endswith(PUBLIC_SUFFIX) and e.is_file()
            )
        except FileNotFoundError:
            return ("missing",)
        return tuple(entries)

    def changed(self) -> bool:
        return self._current_signature() != self._signature

    def reload(self) -> dict[bytes, str]:
        """Read every ``*.key`` file; a malformed one is a :class:`ConfigError`."""
        if self.folder.exists() and not self.folder.is_dir():
            raise ConfigError(f"{self.folder}: trust store folder exists and is not a folder")
        if not self.folder.is_dir():
            raise ConfigError(f"{self.folder}: trust store folder does not exist (create it with 'fol keys trust')")
        signature = self._current_signature()
        peers: dict[bytes, str] = {}
        for path in sorted(self.folder.glob(f"*{PUBLIC_SUFFIX}")):
            peer = path.name[: -len(PUBLIC_SUFFIX)]
            try:
                check_name(peer, "peer id")
            except ProtocolError as exc:
                raise ConfigError(f"{path}: {exc}") from None
            peers[load_public_key(path)] = peer
        self.peers = peers
        self._signature = signature
        return dict(peers)

    def drop_missing(self) -> list[str]:
        """After a failed :meth:`reload`: forget the peers whose key file is gone or no longer
        holds their key (a revocation must not wait until another file's mistake is fixed), and
        take the folder as seen (no new attempt until it changes again); returns their ids."""
        gone = []
        for key, peer in list(self.peers.items()):
            try:
                kept = load_public_key(self.folder / f"{peer}{PUBLIC_SUFFIX}") == key
            except ConfigError:
                kept = False
            if not kept:
                del self.peers[key]
                gone.append(peer)
        self._signature = self._current_signature()
        return gone
