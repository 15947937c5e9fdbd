"""The process and Ray executors: results in order, errors raised as the task raised them and at
once, the other tasks stopped, and no file descriptor per tensor."""

from __future__ import annotations

import copy
import math
import os

import pytest
import torch

from fol.executors import make_executor

from _processes import repo_env


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_tensors_crossing_the_pool_leave_no_file_descriptors_open():
    # torch's multiprocessing reductions would keep one descriptor per tensor storage
    # sent or received open in this process (60 per item here): a few hundred nodes'
    # models and data then exhaust the limit ("Too many open files")
    items = [[torch.full((4,), float(i + k)) for k in range(30)] for i in range(40)]
    got = []
    with make_executor("process", workers=2, threads=1) as ex:
        ex.map(copy.deepcopy, items[:2])  # the workers are up
        before = _open_fds()
        out = ex.map(copy.deepcopy, items, on_result=lambda i, r: got.append(i))
        after = _open_fds()
    assert after - before < 20
    assert sorted(got) == list(range(40))
    assert all(torch.equal(a, b) for x, y in zip(out, items) for a, b in zip(x, y))  # in order


def test_a_failing_task_raises_in_the_caller_and_the_pool_still_works():
    import signal

    with make_executor("process", workers=2, threads=1) as ex:
        with pytest.raises(ValueError, match="math domain error"):
            ex.map(math.sqrt, [4.0, -1.0, 9.0, 16.0, 25.0, 36.0])
        assert ex.map(math.sqrt, [4.0, 9.0]) == [2.0, 3.0]
        # a terminal's Ctrl-C reaches the whole process group: each worker waiting for a task
        # printed a KeyboardInterrupt traceback above the parent's one line; the workers of
        # every pool (this one was started again after the failure) leave it to the parent
        assert ex.map(signal.getsignal, [signal.SIGINT, signal.SIGINT]) == [signal.SIG_IGN] * 2


def _fail_or_sleep(x: float) -> float:
    """A node's work: ``x`` seconds long, or a failure at once when ``x`` is negative."""
    import time

    if x < 0:
        raise ValueError("node failed")
    time.sleep(x)
    return x


def test_a_failing_task_is_raised_at_once_and_stops_the_other_workers():
    """One node's error must reach the user now, not after every other running
    (or already queued) node has finished: the workers are terminated, none is
    left behind, results already handed to on_result stay, and the executor
    runs tasks again afterwards."""
    import time

    got = []
    with make_executor("process", workers=2, threads=1) as ex:
        ex.map(_fail_or_sleep, [0, 0])  # the workers are up
        workers = [p.pid for p in ex._pool._processes.values()]
        t0 = time.monotonic()
        with pytest.raises(ValueError, match="node failed"):
            ex.map(_fail_or_sleep, [0, 20, -1, 20, 20], on_result=lambda i, r: got.append((i, r)))
        assert time.monotonic() - t0 < 15  # not after the 20 s nodes
        assert not any(_running(pid) for pid in workers)
        assert got == [(0, 0)]
        t0 = time.monotonic()
    assert time.monotonic() - t0 < 15  # nor when the executor is closed


def _running(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie (an orphan's zombie may
    wait for a reaper that a container's init never is)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_a_worker_ends_when_its_parent_is_killed():
    """A parent stopped by SIGKILL runs no clean-up; its worker, busy on a
    two-minute task, must not compute on unseen."""
    import subprocess
    import sys
    import time

    code = ("import time\n"
            "from fol.executors import ProcessExecutor\n"
            "ex = ProcessExecutor(workers=1)\n"
            "ex.map(time.sleep, [0])\n"
            "print(*[p.pid for p in ex._pool._processes.values()], flush=True)\n"
            "ex.map(time.sleep, [120])\n")
    parent = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        workers = [int(pid) for pid in parent.stdout.readline().split()]
        assert len(workers) == 1 and _running(workers[0])
        time.sleep(0.5)  # the worker is inside its two-minute task
        assert _running(workers[0])
    finally:
        parent.kill()
        parent.wait(timeout=10)
    deadline = time.monotonic() + 15
    while _running(workers[0]) and time.monotonic() < deadline:
        time.sleep(0.2)
    alive = _running(workers[0])
    if alive:
        os.kill(workers[0], 9)  # stop what the test started
    assert not alive


def _die_on_two(x: int) -> int:
    """A task whose worker is killed (as the out-of-memory killer would) on item 2."""
    import signal

    if x == 2:
        os.kill(os.getpid(), signal.SIGKILL)
    return x


def test_a_killed_worker_is_one_clear_error_not_a_traceback_or_a_hang():
    from fol.errors import FOLError

    with make_executor("process", workers=2, threads=1) as ex:
        with pytest.raises(FOLError, match=r"worker process .*ended abruptly .*signal") as info:
            ex.map(_die_on_two, [0, 1, 2, 3], desc="pretraining")
        assert "\n" not in str(info.value) and "pretraining" in str(info.value)
        with pytest.raises(FOLError, match="ended abruptly"):  # the pool stays broken: same line, at once
            ex.map(_die_on_two, [0])


def test_results_finished_with_a_failure_are_handed_over_before_it_is_raised(monkeypatch):
    """Tasks that end together (one wait returns several) with one failing:
    the successful ones still reach on_result (the runner checkpoints a node's
    model there, for --resume) before the failure is raised, whatever the
    order in which the wait lists them."""
    import concurrent.futures as cf

    real_wait = cf.wait

    def wait_all_failures_first(fs, timeout=None, return_when=None):
        done, not_done = real_wait(fs, timeout, cf.ALL_COMPLETED)
        return sorted(done, key=lambda f: f.exception() is None), not_done

    got = []
    with make_executor("process", workers=1, threads=1) as ex:
        monkeypatch.setattr(cf, "wait", wait_all_failures_first)
        with pytest.raises(ValueError, match="node failed"):
            ex.map(_fail_or_sleep, [0, -1], on_result=lambda i, r: got.append(i))
    assert got == [0]


# --------------------------------------------------------------------------- Ray


@pytest.mark.slow
def test_a_ray_executor_without_an_address_starts_its_own_instance(monkeypatch, capfd, tmp_path, request):
    """``address=None`` starts a local Ray instance (with ``num_cpus``), as
    documented; Ray's own lookup would join whatever RAY_ADDRESS names or a
    cluster that ``ray start`` runs on this machine (another user's, a test's),
    and then refuse ``num_cpus``. Runs before the tests that share one instance.
    Ray's notice that the instance uses token authentication (RAY_AUTH_MODE unset)
    stays off the terminal: it was one line amid fol simulate's log. The token Ray makes for a
    user who has none is readable by its owner only (Ray wrote ~/.ray/auth_token 0644)."""
    ray = pytest.importorskip("ray")
    from fol.executors import RayExecutor, _free_ports

    assert not ray.is_initialized()
    monkeypatch.setenv("RAY_ADDRESS", f"127.0.0.1:{_free_ports(1)[0]}")  # nothing there
    for name in ("RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))  # a user without a Ray token yet
    # Ray keeps the token it read for the rest of the process, and sets RAY_AUTH_MODE=token: the token read
    # afresh here and at the end, RAY_AUTH_MODE put back (a token cached by an earlier Ray test of the same
    # worker, or by this one for the next, made the instance refuse its driver: InvalidAuthToken)
    from ray._raylet import AuthenticationTokenLoader

    AuthenticationTokenLoader.instance().reset_cache()
    request.addfinalizer(AuthenticationTokenLoader.instance().reset_cache)
    monkeypatch.setenv("RAY_AUTH_MODE", "")  # recorded: the value before, or none, is what the end restores
    monkeypatch.delenv("RAY_AUTH_MODE")  # Ray's default then: token, with its notice
    with RayExecutor(threads=1, num_cpus=1) as ex:
        assert ex.map(abs, [-1, 2]) == [1, 2]
        assert ray.cluster_resources().get("CPU") == 1
        # every server of the instance (GCS, raylet, object manager, workers, agents) listens on 127.0.0.1
        # only; Ray's default, the machine's address as the node's, listened on every interface
        from _listening import descendants, listening

        heard = listening(descendants(os.getpid()) | {str(os.getpid())})
        gcs_port = int(ray.get_runtime_context().gcs_address.rpartition(":")[2])
        assert gcs_port in {port for _, _, port in heard} and len(heard) >= 3, heard
        assert all(on_loopback for on_loopback, _, _ in heard), heard
        assert [n["NodeManagerAddress"] for n in ray.nodes()] == ["127.0.0.1"]
    assert not ray.is_initialized()
    _, err = capfd.readouterr()
    assert "Token authentication" not in err, err[-2000:]
    token = tmp_path / ".ray" / "auth_token"
    assert token.stat().st_mode & 0o777 == 0o600 and (tmp_path / ".ray").stat().st_mode & 0o077 == 0
    assert len(token.read_text()) == 64 and int(token.read_text(), 16) >= 0  # Ray's form: 256 bits as hex


def test_a_users_own_ray_token_or_settings_are_left_alone(monkeypatch, tmp_path):
    """The private token is made only where Ray would make one: not over a token file that exists
    (its mode kept), not with RAY_AUTH_MODE=disabled or a token given in the environment."""
    from fol.executors import _private_ray_token

    monkeypatch.setenv("HOME", str(tmp_path))
    for name in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH"):
        monkeypatch.delenv(name, raising=False)
    token = tmp_path / ".ray" / "auth_token"
    for name, value in (("RAY_AUTH_MODE", "disabled"), ("RAY_AUTH_TOKEN", "abc"), ("RAY_AUTH_TOKEN_PATH", "/x")):
        with monkeypatch.context() as m:
            m.setenv(name, value)
            _private_ray_token()
        assert not token.exists(), name
    token.parent.mkdir()
    token.write_text("mine")
    token.chmod(0o640)
    _private_ray_token()
    assert token.read_text() == "mine" and token.stat().st_mode & 0o777 == 0o640
    token.unlink()
    _private_ray_token()
    assert token.stat().st_mode & 0o777 == 0o600 and len(token.read_text()) == 64


def test_a_ray_address_that_accepts_connections_but_is_no_ray_head_is_one_line_in_bounded_time(capfd):
    """Something that is not a Ray head listens at the address (or a head that gives an address
    this machine does not reach): Ray's driver retried for minutes, printing three C++ log lines
    every 40 s ('Failed to connect to GCS at address ...'; measured with fol simulate against a
    web server: still retrying when killed after 300 s, 21 lines). The check gives one line within
    its join timeout, and Ray's lines stay in the throw-away driver that tried."""
    import socket
    import time

    from fol.errors import ConfigError
    from fol.executors import check_ray_address

    with socket.socket() as listener:  # accepts connections (the kernel's backlog), says nothing
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        address = f"127.0.0.1:{listener.getsockname()[1]}"
        began = time.monotonic()
        with pytest.raises(ConfigError) as refused:
            check_ray_address(address, join_timeout_s=3.0)
        took_s = time.monotonic() - began
    line = str(refused.value)
    assert "\n" not in line and line.startswith(f"run.ray_address '{address}': something accepts connections at "
                                                 f"{address}, but "), line
    assert "is it the GCS port of a Ray head" in line
    assert took_s < 3.0 + 10, took_s
    out, err = capfd.readouterr()
    assert out == err == "", err[-2000:]


def test_a_long_ray_address_the_check_refuses_is_named_cut(monkeypatch):
    """The 'no Ray cluster answers' and 'something accepts connections' lines named the address
    with repr, whole (and its host:port as it is): an address of 5,000 characters made a line of
    over 10 kB. They name it as the check's malformed-address line does, cut (shown, brief)."""
    import fol.executors as ex
    from fol.errors import ConfigError

    address = "x" * 5000 + ":6379"  # a host no resolver takes (idna: label too long): refused at once
    with pytest.raises(ConfigError) as refused:
        ex.check_ray_address(address, timeout_s=1.0)
    line = str(refused.value)
    assert line.startswith("run.ray_address 'xxxx") and "no Ray cluster answers at 'xxxx" in line, line[:400]
    assert "\n" not in line and len(line) < 600, len(line)

    monkeypatch.setattr(ex, "_unreachable", lambda *a: None)  # something accepts connections there ...
    monkeypatch.setattr(ex, "_join_failure", lambda *a: "a driver could not join it: refused")  # ... no Ray head
    with pytest.raises(ConfigError) as refused:
        ex.check_ray_address(address)
    line = str(refused.value)
    assert line.startswith("run.ray_address 'xxxx") and "something accepts connections at 'xxxx" in line, line[:400]
    assert "but a driver could not join it: refused" in line and len(line) < 700, len(line)



def test_a_long_ray_address_ray_cannot_join_is_named_cut(monkeypatch):
    """The 'cannot join a Ray cluster there' line, given when ray.init fails on an address the check let
    through, named the address with repr, whole: an address of 5,000 characters made a line of over 5 kB. It
    names it as the check's lines beside it do, cut (shown); a short one reads as before."""
    import sys
    import types

    import fol.executors as ex
    from fol.errors import ConfigError
    from swarmbase.tomlcheck import shown

    def refused(**kwargs):
        raise ConnectionError("could not connect to the GCS")

    monkeypatch.setitem(sys.modules, "ray", types.SimpleNamespace(is_initialized=lambda: False, init=refused))
    monkeypatch.setattr(ex, "check_ray_address", lambda *a, **k: None)  # the address passed the check
    monkeypatch.setenv("RAY_AUTH_MODE", "token")  # no token hint: the line as it is
    long = "x" * 5000 + ":6379"
    for address, said in ((long, shown(long)), ("10.0.0.5:6379", "'10.0.0.5:6379'")):
        with pytest.raises(ConfigError) as info:
            ex.RayExecutor(address)
        assert str(info.value) == (f"run.ray_address {said}: cannot join a Ray cluster there (could not connect "
                                   f"to the GCS)")
    assert shown(long).startswith("'xxxx") and len(shown(long)) < 100

def test_a_long_ray_error_is_cut_in_the_one_line(monkeypatch):
    """The 'cannot join a Ray cluster there' and 'cannot start a local Ray instance' lines gave Ray's
    exception text whole: a message of 20,000 characters (a server's reply, a log quoted in it) made a
    line of over 20 kB. Cut as a read's error is (brief(e, 300)); a short one reads as before."""
    import sys
    import types

    import fol.executors as ex
    from fol.errors import ConfigError
    from swarmbase.tomlcheck import brief

    message = ["could not connect to the GCS"]

    def refused(**kwargs):
        raise ConnectionError(message[0])

    monkeypatch.setitem(sys.modules, "ray", types.SimpleNamespace(is_initialized=lambda: False, init=refused))
    monkeypatch.setattr(ex, "check_ray_address", lambda *a, **k: None)
    monkeypatch.setattr(ex, "_private_ray_token", lambda: None)
    monkeypatch.setenv("RAY_AUTH_MODE", "token")  # no token hint: the line as it is
    for address, line in (("10.0.0.5:6379", "run.ray_address '10.0.0.5:6379': cannot join a Ray cluster there ({})"),
                          (None, "executor 'ray': cannot start a local Ray instance ({})")):
        message[0] = "could not connect to the GCS"
        with pytest.raises(ConfigError) as info:
            ex.RayExecutor(address)
        assert str(info.value) == line.format(message[0])
        message[0] = "GCS said: " + "y" * 20_000 + " (end)"
        with pytest.raises(ConfigError) as info:
            ex.RayExecutor(address)
        text = str(info.value)
        assert text == line.format(brief(message[0], 300)) and brief(message[0], 300).startswith("'GCS said: yyy")
        assert len(text) < 400 and "(end)" not in text


@pytest.fixture(scope="module")
def local_ray():
    """One small Ray instance on 127.0.0.1 for the Ray tests here (started by the
    caller, as a driver that joins a cluster: the executor's close() does not shut it
    down, so whatever a failed map leaves running would stay running), shut down at the end."""
    ray = pytest.importorskip("ray")  # in the dev extra: CI runs these
    import sys

    assert not ray.is_initialized()
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # Ray's workers cannot import this file
    from fol.executors import _loopback_kept

    with _loopback_kept():
        ray.init(address="local", num_cpus=2, _node_ip_address="127.0.0.1", include_dashboard=False,
                 log_to_driver=False, configure_logging=False)
    try:
        yield ray
    finally:
        ray.shutdown()
        ray.cloudpickle.unregister_pickle_by_value(sys.modules[__name__])


def _pid_then_fail_or_sleep(args: tuple[str, float]) -> float:
    """:func:`_fail_or_sleep`, after writing this worker's pid into the folder ``args[0]``."""
    folder, x = args
    with open(os.path.join(folder, f"{x}-{os.getpid()}"), "w"):
        pass
    return _fail_or_sleep(x)


def test_a_failing_ray_task_is_raised_at_once_and_cancels_the_other_tasks(local_ray, tmp_path):
    """On a cluster the executor joined, one node's error must stop the node work
    still queued or running (it would otherwise hold the cluster's CPUs after the
    user saw the error), after the results finished before it reached on_result;
    the executor runs tasks again afterwards."""
    import time

    from fol.executors import RayExecutor

    got = []
    ex = RayExecutor(threads=1)
    try:
        assert ex.map(_fail_or_sleep, [0, 0]) == [0, 0]  # workers are up
        t0 = time.monotonic()
        with pytest.raises(ValueError, match="node failed"):
            ex.map(_pid_then_fail_or_sleep, [(str(tmp_path), x) for x in (0, 30, -1, 30, 30)],
                   on_result=lambda i, r: got.append((i, r)))
        assert time.monotonic() - t0 < 20  # not after the 30 s nodes
        assert got == [(0, 0)]
        assert any(p.name.startswith("30") for p in tmp_path.iterdir())  # a 30 s node ran beside the failure
        time.sleep(3)  # a cancelled task that was starting meanwhile has started (and is stopped) by now
        deadline = time.monotonic() + 10
        while (alive := [p.name for p in tmp_path.iterdir() if p.name.startswith("30")
                         and _running(int(p.name.split("-")[-1]))]) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not alive  # no 30 s node left computing
        assert ex.map(_fail_or_sleep, [0, 0]) == [0, 0]
    finally:
        ex.close()


def _listening(port: int = 0):
    """A TCP socket listening on 127.0.0.1 (the stand-in of a head's GCS port)."""
    import socket

    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", port))
    s.listen()
    return s


def test_a_head_that_stops_accepting_connections_is_lost_after_the_grace_period():
    """The driver's look at the cluster's head: however long the wait, a head that accepts
    connections is there; one that accepts none for ``lost_after_s`` in a row is lost, in one
    line naming it; a connection accepted in between starts the count again."""
    from fol.errors import FOLError
    from fol.executors import _HeadWatch

    now = [100.0]
    head = _listening()
    port = head.getsockname()[1]
    watch = _HeadWatch("127.0.0.1", port, lost_after_s=10, clock=lambda: now[0])
    try:
        assert watch.check("pretraining") is None
        head.close()
        assert watch.check("pretraining") is None  # silent since 100
        now[0] = 109.9
        assert watch.check("pretraining") is None
        head = _listening(port)  # back before the grace ran out
        now[0] = 111.0
        assert watch.check("pretraining") is None
        head.close()
        for now[0] in (112.0, 121.9):
            assert watch.check("pretraining") is None
        now[0] = 122.0
        lost = watch.check("pretraining")
    finally:
        head.close()
    assert isinstance(lost, FOLError)
    line = str(lost)
    assert "\n" not in line and line.startswith(f"the Ray cluster's head at 127.0.0.1:{port} stopped answering "
                                                "during pretraining (Connection refused for 10 s); "), line
    assert line.endswith("continue it with fol simulate --resume OUT")


def test_a_ray_map_ends_in_one_line_when_the_head_stops_answering_and_not_for_a_long_task(local_ray):
    """A map waiting for a task looks at the head while nothing finishes: a head that no
    longer accepts connections ends it once ``HEAD_LOST_AFTER_S`` has passed (Ray's own
    driver waits 60 s, then ends the process from its C++ code), and a task that takes
    longer than that, with the head there, is no failure."""
    import time

    from fol.errors import FOLError
    from fol.executors import RayExecutor, _free_ports, _HeadWatch

    ex = RayExecutor(threads=1)
    try:
        gcs = local_ray.get_runtime_context().gcs_address
        assert ex._head is not None and f"{ex._head.host}:{ex._head.port}" == gcs
        ex._head.lost_after_s = 0.5
        assert ex.map(_fail_or_sleep, [1.5, 0]) == [1.5, 0]
        gone = _free_ports(1)[0]
        ex._head = _HeadWatch("127.0.0.1", gone, lost_after_s=1.0)
        got = []
        t0 = time.monotonic()
        with pytest.raises(FOLError, match=rf"^the Ray cluster's head at 127\.0\.0\.1:{gone} stopped answering "
                                           r"during pretraining \(Connection refused for 1 s\)"):
            ex.map(_fail_or_sleep, [0, 30], desc="pretraining", on_result=lambda i, r: got.append(i))
        assert time.monotonic() - t0 < 15  # not after the 30 s task
        assert got == [0]
    finally:
        ex.close()


def _read_missing(path: str) -> str:
    with open(path) as fh:
        return fh.read()


def test_a_ray_call_whose_node_connection_broke_ends_in_one_line_naming_the_head(local_ray, monkeypatch, tmp_path):
    """When the driver's own node died with the head, Ray's next call raised an OSError of its
    own ("Broken pipe"), which ``fol simulate`` printed as a file's error ("error: Broken pipe").
    It is one line naming the head (or, with the head there, the broken connection); a task's
    own OSError still reaches the caller as itself."""
    import errno

    from fol.errors import FOLError
    from fol.executors import RayExecutor, _free_ports, _HeadWatch

    real_wait = local_ray.wait
    broken = []

    def wait_broken_once(*args, **kw):
        if not broken:
            broken.append(1)
            raise OSError(errno.EPIPE, "Broken pipe")
        return real_wait(*args, **kw)

    ex = RayExecutor(threads=1)
    try:
        with pytest.raises(FileNotFoundError):
            ex.map(_read_missing, [str(tmp_path / "missing.txt")])
        monkeypatch.setattr(local_ray, "wait", wait_broken_once)
        with pytest.raises(FOLError, match=r"^this driver lost its connection to its Ray node during pretraining "
                                           r"\(Broken pipe\); what the run saved so far is kept"):
            ex.map(_fail_or_sleep, [0], desc="pretraining")
        gone = _free_ports(1)[0]
        ex._head = _HeadWatch("127.0.0.1", gone)
        broken.clear()
        with pytest.raises(FOLError, match=rf"^the Ray cluster's head at 127\.0\.0\.1:{gone} stopped answering during "
                                           r"pretraining \(Connection refused; this driver's connection to its node: "
                                           r"Broken pipe\); "):
            ex.map(_fail_or_sleep, [0], desc="pretraining")
    finally:
        ex.close()


def test_ray_results_finished_with_a_failure_are_handed_over_before_it_is_raised(local_ray, monkeypatch):
    """As the process executor: tasks that ended with a failing one still reach
    on_result (the runner's checkpoints) even when the wait lists the failure first."""
    from fol.executors import RayExecutor

    real_wait = local_ray.wait

    def wait_all_failure_first(refs, num_returns=1, timeout=None, **kw):
        if num_returns != 1:
            return real_wait(refs, num_returns=num_returns, timeout=timeout, **kw)
        real_wait(refs, num_returns=len(refs))
        return [refs[-1]], list(refs[:-1])  # the last item is the failing one

    got = []
    ex = RayExecutor(threads=1)
    try:
        monkeypatch.setattr(local_ray, "wait", wait_all_failure_first)
        with pytest.raises(ValueError, match="node failed"):
            ex.map(_fail_or_sleep, [0, 0, -1], on_result=lambda i, r: got.append(i))
    finally:
        ex.close()
    assert sorted(got) == [0, 1]


def _raise_data_error(x: int) -> int:
    from fol.errors import DataError

    if x:
        raise DataError(f"node {x}: bad shard")
    return x


def test_a_ray_task_error_reaches_the_caller_as_itself_in_one_line(local_ray):
    """A task's exception is raised as the task raised it (the CLI prints a
    FOLError as one line), not as Ray's RayTaskError with the remote traceback
    in colour; a task whose worker died is one FOLError line naming the stage,
    as with the process executor. The process executor gives the same."""
    from fol.errors import DataError
    from fol.executors import RayExecutor

    with make_executor("process", workers=1, threads=1) as pex:
        with pytest.raises(DataError) as by_process:
            pex.map(_raise_data_error, [0, 3])
    ex = RayExecutor(threads=1)
    try:
        with pytest.raises(DataError) as by_ray:
            ex.map(_raise_data_error, [0, 3])
        assert type(by_ray.value) is type(by_process.value) is DataError
        assert str(by_ray.value) == str(by_process.value) == "node 3: bad shard"
    finally:
        ex.close()


def test_a_ray_task_without_an_exception_of_its_own_is_one_folerror_line():
    """A worker killed (Ray's retries spent), or the task's code missing on a
    cluster machine: one FOLError line naming the stage, as the process
    executor's killed worker, not Ray's multi-line message as a traceback."""
    ray = pytest.importorskip("ray")
    from fol.errors import FOLError
    from fol.executors import _ray_failure

    crashed = _ray_failure(ray.exceptions.WorkerCrashedError(), "pretraining")
    missing = _ray_failure(ray.exceptions.RayTaskError(
        "_run_on_ray", "Traceback (most recent call last):\n  ...", ray.exceptions.RaySystemError(
            "No module named 'fol'")).as_instanceof_cause(), "pretraining")
    for error in (crashed, missing):
        assert type(error) is FOLError and "\n" not in str(error) and "\x1b" not in str(error)
        assert str(error).startswith("a Ray task during pretraining ended without a result: ")
    assert "The worker died unexpectedly" in str(crashed) and "WorkerCrashedError" in str(crashed)
    assert "No module named 'fol'" in str(missing)


def _train_size(data) -> int:
    return len(data.train)


def test_ray_node_data_of_a_finished_seed_is_released(local_ray):
    """Each node's data is put once and reused while the driver holds it; once
    the driver drops it (the runner's next seed builds new nodes), the executor
    must not keep it alive, in the driver or, through its reference, in the
    object store, until the whole run ends (one more copy of every node's data
    per seed)."""
    import gc
    import weakref

    import numpy as np

    from fol.data import make_synthetic, split_node
    from fol.executors import _DRIVER_BY_REF, _DRIVER_SHARED, RayExecutor

    ex = RayExecutor(threads=1)
    try:
        pool = make_synthetic("hurricane", 80, seed=0, image_size=8)
        datas = [split_node(pool.subset(np.arange(i * 40, (i + 1) * 40)), seed=i) for i in range(2)]
        before = ex.shared_puts
        assert ex.map(_train_size, datas * 2) == [len(d.train) for d in datas * 2]
        assert ex.map(_train_size, datas) == [len(d.train) for d in datas]
        assert ex.shared_puts - before == 2  # once per object, while it lives
        gone = [weakref.ref(d) for d in datas]
        del pool, datas
        gc.collect()
        assert all(w() is None for w in gone)
        assert not _DRIVER_SHARED and not _DRIVER_BY_REF  # nor their refs, which pin the store's copies
    finally:
        ex.close()


class _TwoArgError(Exception):
    """An exception Ray cannot rebuild in the driver (its __init__ needs two arguments)."""

    def __init__(self, node: int, what: str) -> None:
        super().__init__(f"node {node}: {what}")


def _raise_unsendable(kind: str) -> None:
    import threading

    if kind == "lock":  # cannot be pickled in the worker
        exc = RuntimeError("shard 7 is empty")
        exc.lock = threading.Lock()
        raise exc
    raise _TwoArgError(4, "bad labels")  # pickled, but cannot be unpickled in the driver


def test_a_ray_task_exception_that_cannot_cross_still_names_what_the_task_raised(local_ray):
    """A task's exception that Ray cannot carry back (not picklable, or not
    rebuildable from its pickle) is one FOLError line that still says what
    the task raised, not only Ray's 'isn't serializable' or 'Failed to
    deserialize exception' with a link to its documentation; Ray's whole
    message is kept as a note (shown with --debug)."""
    from fol.errors import FOLError
    from fol.executors import RayExecutor

    ex = RayExecutor(threads=1)
    try:
        for kind, raised in (("lock", "RuntimeError: shard 7 is empty"), ("two-args", "node 4: bad labels")):
            with pytest.raises(FOLError) as got:
                ex.map(_raise_unsendable, [kind], desc="pretraining")
            line = str(got.value)
            assert type(got.value) is FOLError and "\n" not in line and "\x1b" not in line
            assert line.startswith("a Ray task during pretraining raised ") and raised in line, line
            assert any("Original exception" in note for note in got.value.__notes__)
    finally:
        ex.close()


def test_a_process_task_exception_that_cannot_cross_names_what_the_task_raised():
    """The same two exceptions under the process executor: one that cannot be pickled came back as the
    pickling error, and one that cannot be rebuilt broke the pool ("a worker process ... ended abruptly
    (killed by a signal, e.g. the out-of-memory killer ...)", which no worker was). Each is now one
    FOLError line saying what the task raised, and the pool runs the next map."""
    from fol.errors import FOLError

    with make_executor("process", workers=1, threads=1) as ex:
        for kind, raised in (("lock", "RuntimeError: shard 7 is empty"), ("two-args", "_TwoArgError: node 4: bad labels")):
            with pytest.raises(FOLError) as got:
                ex.map(_raise_unsendable, [kind])
            line = str(got.value)
            assert "\n" not in line and line.startswith(f"a task raised {raised}, which its worker process could not "
                                                        "pass back"), line
        assert ex.map(abs, [-3]) == [3]


def test_the_loopback_patch_is_undone_and_skipped_on_a_ray_without_it(monkeypatch) -> None:
    """_loopback_kept swaps Ray's resolve_ip_for_localhost only while a node starts, puts Ray's own back
    afterwards (also after an error), and does nothing on a Ray release that has no such function."""
    pytest.importorskip("ray")
    from ray._private import services

    from fol.executors import _loopback_kept

    original = services.resolve_ip_for_localhost
    with pytest.raises(KeyError):
        with _loopback_kept():
            assert services.resolve_ip_for_localhost("127.0.0.1") == "127.0.0.1"
            raise KeyError("start failed")
    assert services.resolve_ip_for_localhost is original
    monkeypatch.delattr(services, "resolve_ip_for_localhost")
    with _loopback_kept():
        assert not hasattr(services, "resolve_ip_for_localhost")


def test_a_workers_task_runs_with_its_thread_count_and_gives_the_workers_back() -> None:
    """A process-pool or Ray task runs with the executor's torch thread count and, as every other caller
    of fol.threads.torch_threads, gives the worker's own count back (before, it was left set)."""
    from fol.executors import _run_with_threads

    before = torch.get_num_threads()
    try:
        assert _run_with_threads((lambda _: torch.get_num_threads(), None, before + 1)) == before + 1
        assert torch.get_num_threads() == before
        assert _run_with_threads((lambda _: torch.get_num_threads(), None, None)) == before
    finally:
        torch.set_num_threads(before)


def test_a_failed_map_leaves_no_semaphore_of_its_workers_behind(tmp_path):
    """A worker's progress bar (fit() makes one, disabled or not) created tqdm's default lock, a named
    multiprocessing semaphore in a spawned process, unlinked only at a normal exit: the workers a failed
    map terminates left theirs, and after 'fol simulate' stopped on one node's error (e.g. a diverging
    fol.distill_lr) the resource tracker printed "There appear to be 2 leaked semaphore objects" under
    the error line. The parent's stderr is now that one line."""
    import subprocess
    import sys

    (tmp_path / "bar_task.py").write_text(
        "import time\n"
        "from tqdm.auto import tqdm\n"
        "def run(x):\n"
        "    for _ in tqdm(range(2), disable=True):\n"
        "        pass\n"
        "    if x < 0:\n"
        "        raise ValueError('node failed')\n"
        "    time.sleep(x)\n")
    code = ("import sys\n"
            "from bar_task import run\n"
            "from fol.executors import ProcessExecutor\n"
            "if __name__ == '__main__':\n"
            "    with ProcessExecutor(workers=2) as ex:\n"
            "        try:\n"
            "            ex.map(run, [20, -1, 20])\n"
            "        except ValueError as exc:\n"
            "            print(f'error: {exc}', file=sys.stderr)\n")
    env = repo_env(tmp_path)
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0 and done.stderr.splitlines() == ["error: node failed"], done.stderr
