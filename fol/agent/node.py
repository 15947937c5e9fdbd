"""The node agent: one long-running process per drone / flight computer.

:class:`Agent` owns

* a ROUTER socket (``[node] listen``) receiving models from peers
  (:class:`fol.agent.transfer.Receiver`),
* one DEALER per configured peer (:class:`fol.agent.transfer.PeerLink`) offering
  this node's current model,
* a control ROUTER (``[node] control``) for ``fol agent ctl``, admitted only
  to the node's own key pair,
* a ZAP authenticator (pyzmq's :class:`zmq.auth.thread.ThreadAuthenticator`)
  admitting exactly the keys of the trust store (re-read when it changes),
* the persisted state (:class:`fol.agent.inbox.Inbox`),
* a worker thread that runs a FOL round (:func:`fol.personalize.personalize`)
  when the trigger fires, while the poll loop keeps serving transfers.

Round bookkeeping: the node's round-0 model is its pretrained model. In
collection round ``e`` (1-based) it offers its current model (card round
``e - 1``) to its peers and collects their card-round ``e - 1`` models. When Q
of them are in the inbox (``[trigger] models``), when ``[trigger] deadline_s``
has passed since the round started, or on ``fol agent ctl <node> personalize``,
it runs FOL round ``e``, writes ``models/round-<e>.safetensors`` (the previous
model file is kept) and ``reports/round-<e>.json``, and only then switches the
state's current model and round (one atomic state write). After
``[fol] rounds`` rounds the node keeps serving but stops collecting.

A crash at any point loses nothing: received models are in the inbox before
they are counted, transfers in progress resume from their confirmed offset, an
interrupted personalization runs again from the same inputs, and unanswered
offers are repeated after a restart.

Example (three agents on loopback, see :mod:`fol.agent.loopback`)::

    agent = Agent(AgentConfig.from_toml("node.toml"))
    agent.start()                    # poll loop in a thread; agent.run() blocks instead
    agent.request("status")          # same commands as 'fol agent ctl'
    agent.stop()
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import copy
import logging
import math
import os
import queue
import shutil
import stat
import threading
import time
from pathlib import Path
from typing import Any

import zmq
from zmq.auth.thread import ThreadAuthenticator

from fol.agent import protocol as P
from fol.agent.config import AgentConfig
from fol.agent.inbox import Inbox
from fol.agent.keys import KeyPair, TrustStore, ZapKeyCheck, load_keypair, load_public_key
from fol.agent.position import PositionLog, open_source
from fol.agent.systemd import Watchdog, notify
from fol.agent.protocol import ProtocolError
from fol.agent.transfer import (
    OutgoingTransfer,
    PeerLink,
    Receiver,
    ReceiverSettings,
    _send,
    recv_waiting,
    secure_client,
    secure_server,
    tune_socket,
)
from fol.errors import CheckpointError, ConfigError, FOLError
from fol.fileio import atomic_write_bytes, atomic_writer, fsync_dir, make_dirs, publish_gate, write_json_atomic
from swarmbase.cli import os_failure_line
from swarmbase.safejson import loads as bounded_loads
from swarmbase.tomlcheck import brief, read_text_file, shown
from swarmbase.units import format_seconds

__all__ = ["Agent", "control_request", "COMMANDS"]

log = logging.getLogger(__name__)

COMMANDS = ("status", "personalize", "send", "reload", "stop")
RUNTIME_FILE = "agent.json"
#: ``agent.json`` is a flat object of a few fields: the largest one read (bytes), its nesting and values.
MAX_RUNTIME_BYTES = 64 * 1024
MAX_RUNTIME_DEPTH = 4
MAX_RUNTIME_ITEMS = 256
#: Interval (s) at which a node waiting for a round's deadline saves the round's age (see AgentState).
ROUND_CLOCK_SAVE_S = 60.0
#: Longest wait for an answer of the running agent (s); ``zmq`` polls take whole milliseconds.
MAX_CONTROL_TIMEOUT_S = 86400.0
#: Shortest (s): an agent on the same machine answers within milliseconds, but a wait of less than a tenth
#: of a second (1e-300 polled 0 ms) reports a running agent as one that "did not answer".
MIN_CONTROL_TIMEOUT_S = 0.1


class RoundAbandoned(FOLError):
    """Raised in the personalization worker instead of publishing a file of a round its stop abandoned."""


class Agent:
    """A node agent built from an :class:`AgentConfig` (see the module docstring).

    The constructor validates everything (keys, trust store, model, FOL settings,
    and the node's data, which it loads for the first round, checking its classes
    against the model's), restores or initializes the state folder and binds both
    ROUTER sockets (``listen_endpoint`` / ``control_endpoint`` hold the bound
    addresses, useful with ``tcp://127.0.0.1:*``). :meth:`run` is the poll loop
    (blocking); :meth:`start` runs it in a thread; :meth:`stop` ends it.
    """

    def __init__(self, config: AgentConfig, *, load_fol: bool = True) -> None:
        self.cfg = config
        self.node_id = config.node_id
        self.keys: KeyPair = _config_key(load_keypair, config.secret_key, f"{config.source}: node.secret_key",
                                         f"'fol keys gen {config.node_id} --dir <folder>' writes it")
        self.trust = TrustStore(config.trust_dir)
        self.trust.reload()
        self.peer_keys = {
            p.id: _config_key(load_public_key, p.public_key, f"{config.source}: peers[{i}].public_key",
                              f"'fol keys trust {p.id}.key --store {brief(config.trust_dir)}' adds it"
                              if p.public_key == str(config.trust_dir / f"{p.id}.key") else None)
            for i, p in enumerate(config.peers)}
        self.peer_addresses = {p.id: p.address for p in config.peers}
        self.fol_cfg = config.fol_config() if load_fol else None
        self.rounds = self.fol_cfg.rounds if self.fol_cfg is not None else 1
        self.expected = config.expected_models(self.fol_cfg.max_neighbours if self.fol_cfg is not None else 5)
        self._data_spec = None
        if config.trigger.on_board:
            from fol.nodedata import parse_node_data

            assert config.data is not None
            # node.data_root with a synthetic dataset refused as fol pretrain / personalize refuse --data-root
            self._data_spec = parse_node_data(config.data, root=config.data_root, where=f"{config.source}: node.data",
                                              root_where=f"{config.source}: node.data_root")
        self._watchdog = Watchdog()
        self._stop = threading.Event()
        self._abandon = threading.Event()  # stop without waiting for a running personalization
        self._started_at: float | None = None  # agent.json's "started": set by its first write, kept after
        self._publish_lock = threading.Lock()  # the worker publishes a file, or a stop abandons its round: not both
        self.abandoned_round: int | None = None  # the round whose personalization a stop abandoned
        self._commands: queue.Queue = queue.Queue()
        self._commands_lock = threading.Lock()
        self._accepting = True  # False once the loop has ended: request() then fails at once
        self._thread: threading.Thread | None = None
        self._in_run = False
        self._job: concurrent.futures.Future | None = None
        self._job_info: dict[str, Any] = {}
        self._executor: concurrent.futures.ThreadPoolExecutor | None = None
        self._force = False
        self.last_error: str | None = None
        self.failed_attempts = 0  # consecutive failed personalization attempts of the current round
        self._retry_at = 0.0  # monotonic: no automatic trigger before this (back-off after a failure)
        self._node_data: Any = None
        self._split_rule: str | None = None  # the split rule the round-0 model's card records (fol.nodedata)
        self.links: dict[str, PeerLink] = {}
        self.closed = False
        self._lock_fd: int | None = _lock_state_dir(config.state_dir, config.node_id)
        self._position: PositionLog | None = None
        try:  # from here on, a failure releases what was acquired (in reverse order) before it is raised
            self._open(config)
        except BaseException:
            self._close_sockets()
            if self._position is not None:
                self._position.close()
            self._release_lock()
            raise
        log.info("%s: listening on %s (control %s), round %d, %d peers, trust store %s (%d keys)", self.node_id,
                 brief(self.listen_endpoint), brief(self.control_endpoint), self.inbox.state.round, len(config.peers),
                 brief(config.trust_dir), len(self.trust.peers))

    # ------------------------------------------------------------------ setup

    def _open(self, config: AgentConfig) -> None:
        """Everything the constructor does once the state folder is locked: the state, the position
        source, the sockets with their ZAP thread, and last the adoption of the model as round 0 (a
        first start) and the runtime file. Every check comes before the adoption; a failure after it
        takes it back, so a refused start leaves the state folder as it found it."""
        self.inbox = Inbox(config.state_dir, config.node_id, config.limits.max_payload_bytes,
                           accept_any_round=not config.trigger.on_board)
        first = self._init_state()
        if config.position is not None:
            try:
                source = open_source(config.position)
            except ConfigError as exc:  # its line names the [position] field; the file is the config's
                raise ConfigError(f"{config.source}: {exc}") from None
            self._position = PositionLog(source, config.state_dir, config.node_id)
        self.ctx = zmq.Context()
        self._setup_sockets()
        undo = self._adopt(first) if first is not None else None
        try:
            # The round's age is counted on the monotonic clock and saved with every state write (with the wall
            # time of the count, see AgentState): a clock step while the agent runs (a companion computer without
            # RTC syncing its time from GPS / NTP after boot) neither fires the deadline at once nor postpones
            # it, now or after a restart. A restart adds the downtime by the wall clock, never a negative one.
            state = self.inbox.state
            assert state.round_age_at is not None
            self._round_clock = (time.monotonic(), state.round_age_s + max(0.0, time.time() - state.round_age_at))
            self.inbox.round_clock = lambda: (round(self._round_age_s(), 3), time.time())
            self._write_runtime()
        except BaseException:
            if undo is not None:
                undo()
            raise

    def _init_state(self) -> Any:
        """Check the state folder's models (or, on a first start, the configured model) and the node's data;
        returns the loaded model to adopt as round 0 when the folder holds no state yet, else None."""
        state = self.inbox.state
        first = None
        if state.current_model:
            self.inbox.model_file("current_model")
        else:
            from fol.checkpoint import load_model

            try:
                first = load_model(self.cfg.model, max_bytes=self.cfg.limits.max_payload_bytes)
            except CheckpointError as exc:
                raise ConfigError(f"{self.cfg.source}: node.model: {exc}") from None
        if self.cfg.trigger.on_board:
            from fol.checkpoint import read_card

            if first is not None:
                card = local_card = first.card
                model = local = Path(self.cfg.model)
            else:
                model, local = self.inbox.model_file("current_model"), self.inbox.model_file("local_model")
                card = read_card(model, max_bytes=self.cfg.limits.max_payload_bytes)
                local_card = card if local == model else read_card(local, max_bytes=self.cfg.limits.max_payload_bytes)
            self._check_finetune_freeze(card, first.model if first is not None else None)
            # the rule the node's data is split by, read from a card's header on every start: refused now even
            # when the data is not loaded now (all rounds done), never later in a round's log
            self._split_rule = self._card_split_rule(local_card, local)
            if first is not None or not state.finished:
                self._node_data = self._checked_node_data(card, model, local_card, local)
            self.inbox.compatible = (tuple(card.class_names), tuple(card.input_shape or ()))
            self.inbox.last_round = self.rounds - 1
        if first is None:  # after `compatible` is set: a model found in the inbox passes a received one's check
            notes = self.inbox.recover()
            if notes:
                log.warning("%s: recovered after a crash (%d fixes)", self.node_id, len(notes))
        return first

    def _check_finetune_freeze(self, card: Any, model: Any) -> None:
        """Refuse a ``fol.finetune_freeze`` past the convolution / linear layers of the node's own model (its
        card ``card``; ``model`` when loaded, else built untrained from the card's spec): peers given the same
        ``[fol]`` table would each skip this node's model, and every neighbour of this architecture would be
        skipped here (``fol simulate --check`` refuses the same count). ``variant = "local"`` uses
        no neighbour model: nothing to check."""
        if self.fol_cfg is None or not self.fol_cfg.finetune_freeze or self.cfg.variant == "local":
            return
        from fol.models import build_model
        from fol.stages import finetune_freeze_problem

        own = model if model is not None else build_model(card.spec)
        if problem := finetune_freeze_problem(self.fol_cfg.finetune_freeze, {"the node's model": own},
                                              f"a {card.spec.arch}"):
            raise ConfigError(f"{self.cfg.source}: {problem}")

    def _checked_node_data(self, card: Any, model: Path, local_card: Any, local: Path) -> Any:
        """The node's data, loaded at start-up (the first round reads it: a missing, empty or unreadable
        folder, a corrupt image, a shard the dataset cannot give or classes other than the model's are
        refused now, not at the first personalization, maybe hours into a flight). ``card`` is the
        current model's (at ``model``), ``local_card`` the node's round-0 model's (at ``local``)."""
        from fol.nodedata import load_node_data, pretraining_spec, split_fields

        where = f"{self.cfg.source}: node.data"
        trained_on = local_card.extra.get("data")  # fol pretrain's --data
        earlier = pretraining_spec(trained_on)
        if earlier is not None and split_fields(earlier) != split_fields(self._data_spec):
            raise ConfigError(f"{where}: the model ({local}) was pretrained on --data {trained_on}, and this spec "
                              f"gives another shard or split, whose validation and test images may be ones the "
                              f"model trained on; give the spec it was pretrained on")
        try:
            data = load_node_data(self._data_spec, where=where, rule=self._split_rule)  # as the model was trained
        except FOLError as exc:  # the loaders' own messages name the folder or file, not the config field
            text = str(exc)
            raise ConfigError(text if text.startswith(where) else f"{where}: {text}") from None
        except OSError as exc:  # e.g. a folder it may not list
            raise ConfigError(f"{where}: {exc.filename or self.cfg.data}: {exc.strerror or exc}") from None
        names, shape = list(data.train.class_names), list(data.train.images.shape[1:])
        if names != list(card.class_names):
            raise ConfigError(f"{where}: the data's classes {names} differ from the model's {list(card.class_names)} "
                              f"({model}); give the data the model was trained on")
        if card.input_shape and list(card.input_shape) != shape:
            raise ConfigError(f"{where}: the data's images are {shape} (C, H, W), the model ({model}) takes "
                              f"{list(card.input_shape)}")
        return data

    def _card_split_rule(self, card: Any, path: Path) -> str:
        """The split rule the node's round-0 model's card (``card``, of the model at ``path``) records
        (:func:`fol.nodedata.recorded_split_rule`), the one reading of it: the node's data is split as
        that model was trained on it. A rule this toolkit does not know is one config error line."""
        from fol.nodedata import recorded_split_rule

        try:
            return recorded_split_rule(card.extra, str(path))
        except CheckpointError as exc:
            raise ConfigError(f"{self.cfg.source}: node.model: {exc}") from None

    def _adopt(self, loaded: Any) -> Any:
        """Copy the configured model (``loaded``, checked) into the state folder as the node's round-0 model
        and write the first state; returns a function that takes the adoption back (the state folder as
        it was before, for a start that fails after this)."""
        state = self.inbox.state
        target = self.inbox.root / "models" / f"round-{loaded.card.round}.safetensors"
        state_path = self.inbox.state_path
        had_target = target.exists()
        old_state = state_path.read_bytes() if state_path.exists() else None

        def undo() -> None:
            try:
                if old_state is None:
                    state_path.unlink(missing_ok=True)
                else:
                    atomic_write_bytes(state_path, old_state)
                if not had_target:
                    target.unlink(missing_ok=True)
                fsync_dir(self.inbox.root)
                fsync_dir(target.parent)
            except OSError as exc:  # the error that made the start fail is the one reported
                log.error("%s: could not take back the adoption of %s: %s", self.node_id, brief(self.cfg.model),
                          os_failure_line(exc))  # the file that failed, named as every message names one

        try:
            _copy_atomic(Path(self.cfg.model), target)
            model_id = self.inbox.register_own_model(target, loaded.card.round)
            rel = self.inbox.relative(target)
            state.current_model = state.local_model = rel
            state.round = loaded.card.round + 1
            state.round_started = state.round_age_at = time.time()
            state.round_age_s = 0.0
            if self.cfg.trigger.auto_send:
                for peer in self.cfg.peers:
                    self._queue_outbox(peer.id, model_id)
            self.inbox.save()
        except BaseException:
            undo()
            raise
        log.info("%s: initialized %s from %s (model %s)", self.node_id, brief(self.inbox.root), brief(self.cfg.model),
                 model_id)
        return undo

    def _setup_sockets(self) -> None:
        self.auth = ThreadAuthenticator(self.ctx, log=logging.getLogger("fol.agent.zap"))
        self.auth.start()
        # ZAP answers from the trust store the messages are checked against (one set of trusted keys,
        # whatever a reload did), and admits only the node's own key to the control socket.
        self.auth.configure_curve_callback(P.ZAP_DOMAIN_PEERS, ZapKeyCheck(lambda key: key in self.trust.peers))
        self.auth.configure_curve_callback(P.ZAP_DOMAIN_CONTROL, ZapKeyCheck(lambda key: key == self.keys.public))
        shutil.rmtree(self.inbox.root / "control_keys", ignore_errors=True)  # written by earlier versions

        settings = ReceiverSettings.from_limits(self.cfg.limits)
        self.router = self.ctx.socket(zmq.ROUTER)
        Receiver.configure(self.router, settings)
        secure_server(self.router, self.keys, P.ZAP_DOMAIN_PEERS)
        _bind(self.router, self.cfg.listen, f"{self.cfg.source}: node.listen")
        self.listen_endpoint = self.router.last_endpoint.decode()
        self.control = self.ctx.socket(zmq.ROUTER)
        tune_socket(self.control)
        self.control.maxmsgsize = P.MAX_HEADER_BYTES + 1024
        secure_server(self.control, self.keys, P.ZAP_DOMAIN_CONTROL)
        _bind(self.control, self.cfg.control, f"{self.cfg.source}: node.control")
        self.control_endpoint = self.control.last_endpoint.decode()
        self.receiver = Receiver(self.router, self.inbox, settings, self.trust, on_stored=self._on_stored)

    def _write_runtime(self, stopping: bool = False) -> None:
        """``agent.json``: where 'fol agent ctl' finds the running agent; ``stopping`` (the time the stop
        began) while a stop waits for a running personalization and commands go unanswered."""
        if self._started_at is None:
            self._started_at = time.time()
        info = {"node": self.node_id, "pid": os.getpid(), "listen": self.listen_endpoint,
                "control": self.control_endpoint, "public_key": self.keys.public.decode(), "started": self._started_at}
        if stopping:
            info["stopping"] = time.time()
        write_json_atomic(self.inbox.root / RUNTIME_FILE, info)

    def set_peer_address(self, peer: str, address: str) -> None:
        """Change where a configured peer is reached (before :meth:`start`; e.g. an ephemeral loopback port)."""
        if peer not in self.peer_addresses:
            raise ConfigError(f"{peer!r} is not a configured peer of {self.node_id}")
        if self._thread is not None:
            raise RuntimeError("set_peer_address must be called before start()")
        self.peer_addresses[peer] = address

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> "Agent":
        """Run the poll loop in a background thread."""
        if self._thread is not None:
            raise RuntimeError("agent already started")
        self._thread = threading.Thread(target=self.run, name=f"fol-agent-{self.node_id}", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout: float = 10.0, *, abandon: bool = False) -> None:
        """Ask the loop to end and wait up to ``timeout`` s for it (and a running
        personalization) to finish. The loop releases the sockets and the state
        folder as it ends: a personalization still running after ``timeout`` holds
        them until it finishes (the loop thread goes on; :attr:`running` tells).
        An agent that was never started is released at once.

        ``abandon=True`` (also after a plain stop, while the loop waits for the
        personalization: a second Ctrl-C) ends the loop without waiting: the
        round is not recorded (the state keeps its previous model and round, and
        the round runs again at the next start), the sockets and ``agent.json``
        are released at once, and the state folder stays locked until the
        abandoned worker ends or the process exits (what ``fol agent`` does).
        The abandoned worker publishes nothing once this returns: each of its
        files is dropped at its final rename (its temporary file removed), and
        it creates no folder and removes nothing."""
        if abandon:
            with self._publish_lock:  # waits for a rename the worker is making (never for a whole write)
                self._abandon.set()
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)
            if self._thread.is_alive():
                log.warning("%s: agent loop did not stop within %s", self.node_id, format_seconds(timeout))
        elif self._thread is None and not self._in_run:
            self._shutdown()  # never started: just release the sockets
        # else: called from inside run() (signal handler, 'stop' command): the loop ends by itself

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def request(self, command: str, timeout: float = 10.0, **args: Any) -> dict[str, Any]:
        """Run a control command (:data:`COMMANDS`) in the loop thread and return its answer.

        Every failure is a :class:`fol.errors.FOLError`: the command's own, the
        agent not running (or stopping while the command waited), or no answer
        within ``timeout`` s.
        """
        fut: concurrent.futures.Future = concurrent.futures.Future()
        with self._commands_lock:  # the loop cannot end between this check and the put
            if not self.running or not self._accepting:
                raise ConfigError(f"agent {self.node_id} is not running")
            self._commands.put((command, args, fut))
        try:
            return fut.result(timeout)
        except concurrent.futures.TimeoutError:
            raise ConfigError(f"agent {self.node_id} did not answer {command!r} within {timeout:g} s") from None

    def run(self) -> None:
        """The poll loop; returns after :meth:`stop` (or a ``stop`` command)."""
        self._in_run = True
        self._executor = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"fol-fol-{self.node_id}")
        try:
            self._loop()
        finally:
            self._refuse_commands()
            self._shutdown()

    def _refuse_commands(self) -> None:
        """Stop accepting commands and answer every queued one with an error."""
        with self._commands_lock:
            self._accepting = False
        while True:
            try:
                command, _, fut = self._commands.get_nowait()
            except queue.Empty:
                return
            fut.set_exception(ConfigError(f"agent {self.node_id} stopped before running {command!r}"))

    def _loop(self) -> None:
        for peer in self.cfg.peers:
            self.links[peer.id] = PeerLink(self.ctx, peer.id, self.peer_addresses[peer.id], self.keys,
                                           self.peer_keys[peer.id], window_chunks=self.cfg.limits.window_chunks,
                                           max_transfers=self.cfg.limits.max_concurrent_transfers)
        self._restore_outbox()
        poller = zmq.Poller()
        poller.register(self.router, zmq.POLLIN)
        poller.register(self.control, zmq.POLLIN)
        by_socket = {}
        for link in self.links.values():
            poller.register(link.sock, zmq.POLLIN)
            by_socket[link.sock] = link
        next_trust_check = 0.0
        next_clock_save = time.monotonic() + ROUND_CLOCK_SAVE_S
        notify("READY=1")
        while not self._stop.is_set():
            events = dict(poller.poll(50))
            now = time.monotonic()
            self._watchdog.ping(now)
            if self.router in events:
                for frames in recv_waiting(self.router):
                    self._guarded(self.receiver.handle, frames, time.monotonic())
            for sock, link in by_socket.items():
                if sock in events:
                    for frames in recv_waiting(sock):
                        done = self._guarded(link.handle, frames, time.monotonic())
                        if done is not None:
                            self._guarded(self._on_sent, done)
            if self.control in events:
                for frames in recv_waiting(self.control, budget=16):
                    self._guarded(self._on_control, frames)
            while True:
                try:
                    command, args, fut = self._commands.get_nowait()
                except queue.Empty:
                    break
                try:
                    fut.set_result(self._command(command, args))
                except Exception as exc:  # noqa: BLE001 - every command gets an answer, the loop goes on
                    fut.set_exception(self._command_error(command, exc))
            self._guarded(self.receiver.tick, now)
            for link in self.links.values():
                for done in self._guarded(link.tick, now) or []:
                    self._guarded(self._on_sent, done)
            if now >= next_trust_check:
                next_trust_check = now + 1.0
                self._guarded(self._check_trust)
            if now >= next_clock_save:
                next_clock_save = now + ROUND_CLOCK_SAVE_S
                if self._counts_round_age():
                    self._guarded(self.inbox.save)  # a crash loses at most this much of the round's age
            self._guarded(self._check_job)
            self._guarded(self._check_trigger)

    def _command_error(self, command: str, exc: Exception) -> FOLError:
        """The project error a failed command answers with (a non-project one is logged in full)."""
        if isinstance(exc, FOLError):
            return exc
        if isinstance(exc, OSError):  # a disk error: one line naming the file
            detail = os_failure_line(exc)
            log.error("%s: command %r failed: %s", self.node_id, command, detail)
        else:
            log.error("%s: command %r failed", self.node_id, command, exc_info=exc)
            detail = str(exc) or type(exc).__name__
        return ConfigError(f"command {command!r} failed ({type(exc).__name__}: {detail}); "
                           f"the agent keeps running")

    def _guarded(self, fn: Any, *args: Any) -> Any:
        """Run one handler; an unexpected failure (a bug, a full disk) is logged
        and the agent keeps serving instead of dying mid-flight. A disk error (a
        full, read-only or forbidden folder) is one line naming the file: every
        file is written through the crash-safe writer, so what was saved before
        stays as it was, and what failed is saved again at the next change."""
        try:
            return fn(*args)
        except OSError as exc:
            log.error("%s: %s failed: %s; files saved before are intact, the agent keeps running", self.node_id,
                      getattr(fn, "__name__", fn), os_failure_line(exc))
            return None
        except Exception:  # noqa: BLE001 - the loop must survive anything a single message causes
            log.exception("%s: error in %s", self.node_id, getattr(fn, "__name__", fn))
            return None

    def _shutdown(self) -> None:
        if self.closed:
            return
        self.closed = True
        notify("STOPPING=1")
        job = self._job
        if self._executor is not None:
            self._executor.shutdown(wait=False)  # no new round; the running one is waited for below
        if job is not None and not job.done() and not self._abandon.is_set():
            log.info("%s: waiting for the running personalization of round %s to finish (stop again, e.g. a "
                     "second Ctrl-C, to abandon it)", self.node_id, self._job_info.get("round"))
            self._guarded(self._write_runtime, True)  # 'ctl' then says why no command is answered
            while not job.done() and not self._abandon.is_set():  # short waits: a signal handler can abandon
                concurrent.futures.wait([job], timeout=0.1)
        if job is not None and (not job.done() or isinstance(job.exception(), RoundAbandoned)):
            # abandoned (also one that ended at a refused rename): nothing of it is recorded
            self._job = None
            self._abandoned(self._job_info)
        else:
            if self._executor is not None:
                self._executor.shutdown(wait=True)  # its thread has ended
            self._guarded(self._check_job)  # a round it cannot record (a full disk) runs again after a restart
            job = None
        try:
            self.receiver.flush()
            if self._counts_round_age():
                self.inbox.save()  # the round's age so far
        except OSError as exc:  # pragma: no cover - disk trouble at shutdown
            log.warning("%s: could not flush transfers or save the state: %s", self.node_id, exc)
        for link in self.links.values():
            link.close()
        self._close_sockets()
        if self._position is not None:
            self._position.close()
        try:
            (self.inbox.root / RUNTIME_FILE).unlink(missing_ok=True)
        except OSError as exc:  # a disk remounted read-only: 'ctl' then finds no agent answering
            log.warning("%s: could not remove %s: %s", self.node_id, brief(self.inbox.root / RUNTIME_FILE),
                        exc.strerror or exc)
        if job is None:
            self._release_lock()  # last: a new agent on this folder finds no stale runtime file of this one
        else:  # the abandoned worker may still write its round's files: the folder stays locked until it ends
            job.add_done_callback(lambda _job: self._release_lock())
        log.info("%s: stopped", self.node_id)

    def _close_sockets(self) -> None:
        """Close the ROUTER sockets, stop the ZAP thread and end the context (whichever exist)."""
        for name in ("router", "control"):
            sock = getattr(self, name, None)
            if sock is not None:
                sock.close(linger=0)
        auth = getattr(self, "auth", None)
        if auth is not None:
            auth.stop()
        ctx = getattr(self, "ctx", None)
        if ctx is not None:
            ctx.term()

    def _release_lock(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # releases the state folder lock
            self._lock_fd = None

    # ------------------------------------------------------------------ trust

    def _check_trust(self, force: bool = False) -> str | None:
        """Re-read the trust store if it changed (or ``force``; ZAP answers from it, see
        :class:`fol.agent.keys.ZapKeyCheck`); returns why the store could not be read, None when it was (or had not changed)."""
        if not force and not self.trust.changed():
            return None
        try:
            before = set(self.trust.peers.values())
            self.trust.reload()
        except ConfigError as exc:
            revoked = self.trust.drop_missing()
            log.error("%s: trust store not reloaded: %s (revoked all the same: %s)", self.node_id, exc,
                      ", ".join(revoked) or "none")
            return str(exc)
        after = set(self.trust.peers.values())
        log.info("%s: trust store reloaded (added %s, revoked %s)", self.node_id, sorted(after - before) or "none",
                 sorted(before - after) or "none")
        return None

    # ------------------------------------------------------------------ sending

    def _queue_outbox(self, peer: str, model_id: str) -> None:
        self.inbox.state.outbox[f"{peer}|{model_id}"] = {"peer": peer, "model_id": model_id, "status": "pending",
                                                         "detail": ""}

    def _start_send(self, peer: str, model_id: str) -> None:
        link = self.links.get(peer)
        if link is None:
            return
        offer, path = self.inbox.own_offer(model_id, self.cfg.limits.chunk_bytes)
        lim = self.cfg.limits
        link.add(OutgoingTransfer(peer, offer, path, offer_retry_s=lim.offer_retry_s,
                                  transfer_timeout_s=lim.transfer_timeout_s))

    def _restore_outbox(self) -> None:
        for entry in self.inbox.state.outbox.values():
            if entry["status"] == "pending" and entry["model_id"] in self.inbox.state.models:
                self._start_send(entry["peer"], entry["model_id"])

    def _on_sent(self, transfer: OutgoingTransfer) -> None:
        entry = self.inbox.state.outbox.get(f"{transfer.peer}|{transfer.offer.model_id}")
        if entry is None:
            return
        entry["status"] = transfer.status
        entry["detail"] = transfer.detail
        self.inbox.save()
        if self._position is not None:
            self._position.record(f"sent ({transfer.status})", transfer.peer, transfer.offer.model_id)

    # ------------------------------------------------------------------ receiving

    def _on_stored(self, record: dict[str, Any]) -> None:
        if self._position is not None:
            self._position.record("received", str(record.get("sender")), str(record.get("model_id")))
        log.info("%s: %d/%d models of round %d in the inbox", self.node_id,
                 len(self._senders(self.inbox.state.round - 1)), self.expected, self.inbox.state.round)

    def _senders(self, model_round: int) -> list[str]:
        return list(dict.fromkeys(r["sender"] for r in self.inbox.state.received_for(model_round)))

    # ------------------------------------------------------------------ personalization

    def _round_age_s(self) -> float:
        """Seconds since the current round started (see ``_round_clock``)."""
        since, age_then = self._round_clock
        return age_then + time.monotonic() - since

    def _counts_round_age(self) -> bool:
        """The round's age matters: a deadline is waiting."""
        return bool(self.cfg.trigger.on_board and self.cfg.trigger.deadline_s and not self.inbox.state.finished)

    def _check_trigger(self) -> None:
        state = self.inbox.state
        if not self.cfg.trigger.on_board or state.finished or self._job is not None:
            return
        trigger = None
        if self._force:
            trigger = "command"
        elif time.monotonic() >= self._retry_at:  # after a failed attempt: only once the back-off has passed
            if len(self._senders(state.round - 1)) >= self.expected:
                trigger = "models"
            elif self.cfg.trigger.deadline_s and self._round_age_s() >= self.cfg.trigger.deadline_s:
                trigger = "deadline"
        if trigger is None:
            return
        if self.failed_attempts and trigger != "command":
            trigger = f"{trigger} (retry {self.failed_attempts})"
        self._force = False
        records = state.received_for(state.round - 1)
        info = {"round": state.round, "trigger": trigger, "received": [r["model_id"] for r in records],
                "current_model": state.current_model, "local_model": state.local_model}
        log.info("%s: personalization round %d triggered by %s with %d model(s)", self.node_id, state.round, trigger,
                 len(records))
        assert self._executor is not None
        self._job_info = info
        self._job = self._executor.submit(self._personalize_job, info, records)

    def _check_job(self) -> None:
        if self._job is None or not self._job.done():
            return
        job, info = self._job, self._job_info
        self._job = None
        try:
            result = job.result()
        except RoundAbandoned:  # it ended at a refused rename before the shutdown looked at it
            self._abandoned(info)
            return
        except Exception as exc:  # noqa: BLE001 - report any failure of the round, keep serving, retry later
            self._round_failed(info, exc)
            return
        state = self.inbox.state
        if state.round != info["round"]:  # pragma: no cover - rounds only advance here
            return
        before, clock = copy.deepcopy(state), self._round_clock
        try:
            model_path = self.inbox.path(result["model"])
            model_id = self.inbox.register_own_model(model_path, info["round"])
            result["model_id"] = model_id
            state.history.append(result)
            state.current_model = result["model"]
            state.round += 1
            state.round_started = time.time()
            self._round_clock = (time.monotonic(), 0.0)
            state.finished = state.round > self.rounds
            if not state.finished and self.cfg.trigger.auto_send:
                for peer in self.cfg.peers:
                    self._queue_outbox(peer.id, model_id)
            self.inbox.save()  # the commit point of the round
        except Exception as exc:  # noqa: BLE001 - e.g. a full disk: the state stays as on disk, the round runs again
            vars(state).update(vars(before))
            self._round_clock = clock
            self._round_failed(info, exc, "could not be recorded")
            return
        self.failed_attempts = 0
        self._retry_at = 0.0
        self.last_error = None
        if not state.finished and self.cfg.trigger.auto_send:
            for peer in self.cfg.peers:
                self._start_send(peer.id, model_id)
        log.info("%s: round %d done (%s); deployed %s", self.node_id, info["round"], result.get("accuracy_line", ""),
                 result["model"])

    def _abandoned(self, info: dict[str, Any]) -> None:
        self.abandoned_round = info.get("round")
        log.warning("%s: personalization of round %s abandoned; the state keeps model %s and the round runs "
                    "again at the next start", self.node_id, self.abandoned_round, self.inbox.state.current_model)

    def _round_failed(self, info: dict[str, Any], exc: Exception, what: str = "failed") -> None:
        """Record a failed attempt at a round and when the next one is due (doubling back-off)."""
        self.failed_attempts += 1
        lim = self.cfg.limits
        # the exponent is capped: 2 ** 1024 is past any float (30 min apart, the 1025th failure came after
        # three weeks, and its OverflowError left _retry_at behind: a retry at every turn of the loop)
        delay = min(lim.round_retry_s * 2.0 ** min(self.failed_attempts - 1, 64), lim.round_retry_max_s)
        self._retry_at = time.monotonic() + delay
        detail = os_failure_line(exc) if isinstance(exc, OSError) else str(exc)
        self.last_error = f"round {info['round']} {what} (attempt {self.failed_attempts}): {detail}"
        log.error("%s: personalization %s; retrying in %s", self.node_id, self.last_error, format_seconds(delay),
                  exc_info=not isinstance(exc, (FOLError, OSError)))  # a disk error: the line names the file

    def _load_node_data(self) -> Any:
        if self._node_data is None:  # not loaded at start-up (all rounds done): split by the rule read then
            from fol.nodedata import load_node_data

            assert self._split_rule is not None
            self._node_data = load_node_data(self._data_spec, where=f"{self.cfg.source}: node.data",
                                             rule=self._split_rule)
        return self._node_data

    @contextlib.contextmanager
    def _publish(self) -> Any:
        """The worker's :func:`fol.fileio.publish_gate`: a file or folder an abandoned round would write or
        remove is refused."""
        with self._publish_lock:
            self._check_abandoned()
            yield

    def _check_abandoned(self) -> None:
        if self._abandon.is_set():
            raise RoundAbandoned(f"round {self._job_info.get('round')} was abandoned by the stop")

    def _personalize_job(self, info: dict[str, Any], records: list[dict[str, Any]]) -> dict[str, Any]:
        """One FOL round in the worker thread; writes the model and the report, touches no state.
        Every file it publishes passes :meth:`_publish` (a stop that abandons the round stops them)."""
        with publish_gate(self._publish):
            return self._run_round(info, records)

    def _run_round(self, info: dict[str, Any], records: list[dict[str, Any]]) -> dict[str, Any]:
        from fol.checkpoint import ModelCard, load_model, save_model
        from fol.nodedata import SPLIT_SEED_KEY
        from fol.personalize import NodeState, Received, load_pool, personalize, save_ensemble, save_pool_round

        round_ = info["round"]
        limit = self.cfg.limits.max_payload_bytes
        data = self._load_node_data()
        local = load_model(self.inbox.path(info["local_model"]), max_bytes=limit)
        current = load_model(self.inbox.path(info["current_model"]), max_bytes=limit)
        received, unreadable = [], []
        for rec in records:
            try:
                loaded = load_model(self.inbox.path(rec["file"]), max_bytes=limit)
            except CheckpointError as exc:  # the inbox was verified; a disk fault is still possible
                unreadable.append({"file": rec["file"], "reason": str(exc)})
                continue
            received.append(Received(name=rec["sender"], model=loaded.model, card=loaded.card))
        spec, names = current.card.spec, list(current.card.class_names)
        state = NodeState(self.node_id, spec, names, data, local_model=local.model, current_model=current.model,
                          deployed=current.model, round=round_ - 1)
        assert self.fol_cfg is not None
        models = self.inbox.root / "models"
        keep = self.fol_cfg.keep_received == "all"  # earlier rounds' aligned neighbours, kept on disk
        if keep:
            state.pool = load_pool(models / "pool", state, round_, limit)
        report = personalize(state, received, round_, self.fol_cfg, self.cfg.variant)
        self._check_abandoned()  # abandoned while it trained: not even the pool folder below is touched
        if keep:  # read back only by later rounds, after this one commits
            save_pool_round(models / "pool", state, round_, received)

        out = models / f"round-{round_}.safetensors"
        card = ModelCard(spec=spec, class_names=names, input_shape=current.card.input_shape, producer=self.node_id,
                         round=round_, extra={"variant": self.cfg.variant, "personalized_from": info["current_model"],
                                              "received": [r.name for r in received],
                                              SPLIT_SEED_KEY: self._split_rule})
        save_model(out, state.current_model, card)
        files: dict[str, Any] = {"model": self.inbox.relative(out)}
        if self.cfg.variant in ("fol-a", "fol-an") and not report.kept_local:
            ensemble_json = save_ensemble(models / f"round-{round_}-ensemble", state, report, received)
            files["ensemble"] = self.inbox.relative(ensemble_json)
        report_path = self.inbox.root / "reports" / f"round-{round_}.json"
        full = {"node": self.node_id, "variant": self.cfg.variant, "round": round_, "trigger": info["trigger"],
                "config": self.fol_cfg.to_dict(), "received_models": info["received"], "unreadable": unreadable,
                "outputs": files, **report.to_dict()}
        write_json_atomic(report_path, full)
        acc = report.accuracy.get("deployed", {})
        line = f"deployed val {100 * acc.get('val', 0):.1f} %, test {100 * acc.get('test', 0):.1f} %" if acc else ""
        return {"round": round_, "trigger": info["trigger"], "model": files["model"],
                "report": self.inbox.relative(report_path), "received": info["received"],
                "used": [r["name"] for r in report.received if r["used"]], "kept_local": report.kept_local,
                "accuracy_line": line, "time": time.time()}

    # ------------------------------------------------------------------ commands

    def status(self) -> dict[str, Any]:
        """A JSON-ready snapshot (the answer to ``ctl status``)."""
        state = self.inbox.state
        return {
            "node": self.node_id, "pid": os.getpid(), "listen": self.listen_endpoint, "round": state.round,
            "rounds": self.rounds, "round_age_s": round(self._round_age_s(), 1), "finished": state.finished,
            "current_model": state.current_model, "expected_models": self.expected, "received_this_round": self._senders(state.round - 1),
            "inbox": len(state.received), "outbox": list(state.outbox.values()),
            "incoming": self.receiver.status(), "personalizing": self._job is not None,
            "last_error": self.last_error, "failed_attempts": self.failed_attempts,
            "retry_in_s": max(0.0, self._retry_at - time.monotonic()) if self.failed_attempts else None,
            "history": state.history, "refused_messages": self.receiver.refused,
            "events": self.receiver.events[-20:], "trusted_peers": sorted(self.trust.peers.values()),
        }

    def _command(self, command: str, args: dict[str, Any]) -> dict[str, Any]:
        if command == "status":
            return self.status()
        if command == "personalize":
            if not self.cfg.trigger.on_board:
                raise ConfigError("on-board personalization is off ([trigger] on_board = false)")
            if self.inbox.state.finished:
                raise ConfigError(f"all {self.rounds} round(s) are done")
            if self._job is not None:
                return {"started": False, "detail": "a personalization is already running"}
            self._force = True
            return {"started": True, "round": self.inbox.state.round}
        if command == "send":
            peer = args.get("peer")
            if peer not in self.links:
                raise ConfigError(f"unknown peer {shown(peer)}; configured peers: "
                                  f"{', '.join(self.links) or 'none'}")
            model_id = self.inbox.own_model_id(self.inbox.state.current_model)
            assert model_id is not None
            self._queue_outbox(peer, model_id)
            self.inbox.save()
            self._start_send(peer, model_id)
            return {"queued": model_id, "peer": peer}
        if command == "reload":
            error = self._check_trust(force=True)
            if error is not None:
                raise ConfigError(f"trust store not reloaded: {error}; still trusted: "
                                  f"{', '.join(sorted(self.trust.peers.values())) or 'none'}")
            return {"trusted_peers": sorted(self.trust.peers.values())}
        if command == "stop":
            self._stop.set()
            return {"stopping": True}
        raise ConfigError(f"unknown command {command!r}; expected one of {', '.join(COMMANDS)}")

    def _on_control(self, frames: list[Any]) -> None:
        identity = frames[0].bytes
        try:
            kind, header, _ = P.decode(frames[1:])
            user = frames[1].get("User-Id")
            if user != self.keys.public.decode():
                raise ProtocolError("control commands need this node's own key")
            if kind != P.CTL:
                raise ProtocolError(f"expected CTL, got {kind.decode()}")
            args = {k: v for k, v in header.items() if k != "command"}
            command = str(header.get("command"))
            try:
                answer = self._command(command, args)
            except Exception as exc:  # noqa: BLE001 - every command gets an answer, the loop goes on
                raise self._command_error(command, exc) from None
            _send(self.control, [identity, *P.encode(P.CTL_OK, answer)])
        except FOLError as exc:
            _send(self.control, [identity, *P.encode(P.CTL_ERR, {"reason": str(exc)})])


def _config_key(load: Any, path: Any, where: str, hint: str | None) -> Any:
    """``load(path)`` (a key pair or a public key); a key file that is missing or cannot be read is one
    line naming the config field it came from (and, when missing, the command that makes it)."""
    try:
        return load(path)
    except ConfigError as exc:
        missing = hint is not None and str(exc).endswith("file not found")
        raise ConfigError(f"{where}: {exc}" + (f" ({hint})" if missing else "")) from None


def _lock_state_dir(state_dir: Path, node_id: str) -> int:
    """Hold an exclusive lock on ``<state_dir>/agent.lock`` for the agent's lifetime
    (two agents on one state folder would corrupt it). The OS drops it when the
    process dies, so a crash never leaves a stale lock."""
    import fcntl

    try:
        make_dirs(state_dir)
        fd = os.open(state_dir / "agent.lock", os.O_RDWR | os.O_CREAT, 0o600)
    except OSError as exc:
        raise ConfigError(f"{brief(state_dir)}: cannot be used as the state folder of node {node_id} "
                          f"({exc.strerror}); expected a writable folder") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise ConfigError(f"{brief(state_dir)}: another agent is already running on this state folder "
                          f"(node {node_id}); stop it first") from None
    return fd


def _bind(sock: zmq.Socket, endpoint: str, where: str) -> None:
    """Bind ``sock``; an address that cannot be bound (in use, not local, no such host) is a :class:`ConfigError`.
    An ``ipc://`` path that exists and is not a socket is refused (ZeroMQ would delete the file to bind), and
    so is one whose socket a running process still listens on (ZeroMQ would take the path from it: another
    agent configured with the same path would go on running, unreachable)."""
    path = endpoint[len("ipc://"):] if endpoint.startswith("ipc://") else ""
    if path and not path.startswith("@") and os.path.lexists(path):
        if not stat.S_ISSOCK(os.lstat(path).st_mode):
            raise ConfigError(f"{where}: {brief(path)} exists and is not a socket; binding {brief(endpoint)} would replace it "
                              f"(expected a new path or an old agent's socket)")
        if _socket_answers(path):
            raise ConfigError(f"{where}: {brief(endpoint)} is in use: a running process (another agent?) listens on "
                              f"{brief(path)}; stop it or give this node another path")
    try:
        sock.bind(endpoint)
    except zmq.ZMQError as exc:
        raise ConfigError(f"{where}: cannot bind {brief(endpoint)} ({zmq.strerror(exc.errno)})") from None


def _socket_answers(path: str) -> bool:
    """Whether a process accepts connections on the Unix socket ``path`` (a left-over socket file of an
    agent that ended refuses them). The probe connects and closes at once, before any byte."""
    import socket

    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        probe.settimeout(1.0)
        try:
            probe.connect(path)
        except (TimeoutError, BlockingIOError):  # a listener too busy to accept: alive
            return True
        except OSError:  # ECONNREFUSED: nobody listens (a permission error: the bind will say so)
            return False
    return True


def _copy_atomic(src: Path, dst: Path) -> None:
    """Copy ``src`` to ``dst`` through the one crash-safe writer (normal permissions)."""
    with atomic_writer(dst) as out, open(src, "rb") as inp:
        shutil.copyfileobj(inp, out, 1 << 20)


def control_request(config: AgentConfig, command: str, timeout_s: float = 10.0, **args: Any) -> dict[str, Any]:
    """Send one control command to the running agent of ``config`` (over its
    CURVE control socket, with the node's own key pair) and return the answer."""
    if (isinstance(timeout_s, bool) or not isinstance(timeout_s, (int, float)) or not math.isfinite(timeout_s)
            or not MIN_CONTROL_TIMEOUT_S <= timeout_s <= MAX_CONTROL_TIMEOUT_S):
        raise ConfigError(f"control timeout (--timeout): expected a number of seconds in [{MIN_CONTROL_TIMEOUT_S:g}, "
                          f"{MAX_CONTROL_TIMEOUT_S:.0f}], got {timeout_s!r}")
    runtime = config.state_dir / RUNTIME_FILE
    try:  # bounded: a damaged file nested deep or grown huge is this one line too
        info = bounded_loads(read_text_file(runtime, ConfigError, "agent runtime file", MAX_RUNTIME_BYTES),
                             max_depth=MAX_RUNTIME_DEPTH, max_items=MAX_RUNTIME_ITEMS)
        endpoint = info["control"]
        if not isinstance(endpoint, str):
            raise TypeError(endpoint)
    except (ConfigError, ValueError, KeyError, TypeError):
        raise ConfigError(f"{brief(runtime)}: no running agent for node {config.node_id} "
                          "(start it with 'fol agent --config')") from None
    keys = load_keypair(config.secret_key)
    ctx = zmq.Context()
    sock = ctx.socket(zmq.DEALER)
    try:
        tune_socket(sock)
        sock.maxmsgsize = P.MAX_CONTROL_REPLY_BYTES + 1024
        secure_client(sock, keys, keys.public)
        try:
            sock.connect(endpoint)
        except zmq.ZMQError as exc:
            raise ConfigError(f"{brief(runtime)}: control address {shown(endpoint)} of node {config.node_id} cannot be "
                              f"connected ({zmq.strerror(exc.errno)})") from None
        sock.send_multipart(P.encode(P.CTL, {"command": command, **args}))
        if not sock.poll(int(timeout_s * 1000)):
            if info.get("stopping"):
                raise ConfigError(f"agent {config.node_id} (pid {shown(info.get('pid'))}) is stopping: it waits for its "
                                  f"running personalization to finish and answers no command (a second Ctrl-C "
                                  f"or SIGTERM stops it at once)")
            # the address and the pid as agent.json holds them: named as every value read from a file is
            raise ConfigError(f"agent {config.node_id} at {brief(endpoint)} did not answer within {timeout_s:g} s "
                              f"(not running, or pid {shown(info.get('pid'))} crashed)")
        kind, header, _ = P.decode(sock.recv_multipart(), max_header_bytes=P.MAX_CONTROL_REPLY_BYTES,
                                   max_items=P.MAX_CONTROL_REPLY_ITEMS)
    finally:
        sock.close(linger=0)
        ctx.term()
    if kind == P.CTL_ERR:
        raise ConfigError(f"agent {config.node_id}: {header.get('reason')}")
    return header
