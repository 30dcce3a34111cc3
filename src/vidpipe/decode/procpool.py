"""Decoder processes: a pool of ``python -m vidpipe.decode.procworker`` children per device.

Why processes: one Python process decoding with two dozen NVDEC sessions spends its GIL on the
sessions' per-frame work (every ``Decode`` call gives the GIL up and takes it back) and the
consumer (model, NMS) waits for the same lock; measured on an H200, one process tops out well
below what the NVDEC engines deliver to independent sessions. Spreading the sessions over a few
processes gives each its own GIL; the frames still never leave the GPU: the children copy them
into batch buffers the parent allocated and shared through CUDA IPC (CPU shared memory for the
CPU backend), and only frame numbers travel back.

The pool starts its children once (the interpreter and PyAV, on a GPU also its CUDA context, no
PyTorch: about 1.3 s on an H200) and keeps them for every later decode in the process, like the
NVDEC session pool; each child keeps its own pooled sessions. Decodes take its children in
disjoint leases (:meth:`DecoderProcessPool.lease`, :class:`~vidpipe.decode.proclease.Lease`): a
run of several files shares them out (each file ``ceil(processes / files at once)``,
``DecodeOptions.files_at_once``), and a decode that finds no child free uses threads.
:func:`start_in_background` starts a pool from a thread of its own (``vidpipe detect`` does,
beside its own start: :mod:`vidpipe.decode.prestart`); a decode that finds it starting begins with
threads and the children join it once ready (:class:`~vidpipe.decode.proclate.LateLease`), or
waits for it (``wait_s`` of :func:`get_pool`). Children are plain subprocesses, not
``multiprocessing`` workers, so a user's script is never re-imported.

Nothing of a pool has a name another run could collide with or that a killed parent leaves
behind: each child talks over its own socket pair (inherited, no socket file), the CPU ring is
an anonymous shared-memory file whose descriptor travels over that socket
(:mod:`vidpipe.decode.procring`), and the children exit when the parent closes the pool, exits
or dies by any signal (:mod:`vidpipe.lifetime`: a pipe they watch and a parent-death
signal; :mod:`vidpipe.decode.proclife`: what they clean up).
"""

from __future__ import annotations

import atexit
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from typing import TYPE_CHECKING, Any

from vidpipe.decode.procring import Ring, send_fds
from vidpipe.errors import DecodeError
from vidpipe.lifetime.keeper import Keeper, python_env, reap

if TYPE_CHECKING:
    import torch

    from vidpipe.decode.base import StreamInfo
    from vidpipe.decode.proclease import Lease

__all__ = [
    "DecoderProcessPool", "get_pool", "start_in_background", "is_starting", "is_up", "close_pools", "close_pool",
    "Ring", "DEFAULT_PROCESSES", "AUTO_START_FRAMES", "sessions_per_process",
]  # fmt: skip

logger = logging.getLogger(__name__)

#: seconds a child may take to start (its interpreter, CUDA, its NVDEC sessions, its hello) before
#: the pool gives up
START_TIMEOUT = 120.0

#: decoder processes the NVDEC sessions are spread over by default.
#: H200, 1080p H.264 end to end (YOLOv3-tiny b32, one call): 2 / 3 / 4 processes 3,600 /
#: 3,410-3,550 / 3,610-3,670 frames/s, threads in one process 2,560-2,600; an 8 GiB window no better
DEFAULT_PROCESSES = 4
#: ``processes=None`` starts the decoder processes (about 4 s, once per process) when a file has
#: at least this many frames to decode; a running pool is always used. Measured with ``vidpipe
#: bench startup CLIP --decoder-processes 0,4`` (fresh ``vidpipe detect`` processes, the real
#: street clip at 1080p H.264, one H200, medians of 2, ``docs/bench/h200/startup/crossover``): wall
#: seconds with threads / four processes started with the command: 4,800 frames 8.4 / 10.9, 7,500
#: 9.0 / 11.3, 10,000 9.9 / 11.2, 15,000 14.1 / 12.8, 30,000 18.6 / 16.3, 60,000 28.6 / 23.5. The
#: processes' start delays the first result by ~2.5 s; they then decode ~4,000 frames/s against
#: ~2,700: a line through the points crosses at 15,000-20,000 frames. Measured at 1080p only
AUTO_START_FRAMES = 15_000


def sessions_per_process(sessions: int, processes: int) -> int:
    """NVDEC sessions each of ``processes`` decoder processes runs for ``sessions`` in all (at
    least one): the share a pool warms (:meth:`DecoderProcessPool.warm`, or a child at its start
    for ``warm_for``) and a run dispatches to each live child."""
    return max(1, -(-sessions // max(1, processes)))


_pools: dict[str, "DecoderProcessPool"] = {}
_starting: dict[str, threading.Event] = {}  # pools being started by a thread of their own: set when done
_pools_lock = threading.Lock()


# ------------------------------------------------------------------------------------- pool


class DecoderProcessPool:
    """``processes`` decoder children for ``device`` (``"cuda:0"`` or ``"cpu"``). ``warm_for``: a
    video file the children start their share of NVDEC sessions for before they say hello (the
    driver creates sessions one at a time: ~2 s for the 24 of a 1080p H.264 file on an H200,
    otherwise paid at the file's decode).

    Raises:
        DecodeError: a child did not start or connect within :data:`START_TIMEOUT` seconds.
    """

    def __init__(self, device: str, processes: int, *, warm_for: str | None = None) -> None:
        self.device = device
        self.warm_for = warm_for  # a video file: the children start their NVDEC sessions for it
        self.procs: list[subprocess.Popen] = []
        self.conns: list[Any] = []
        self.alive: list[bool] = []
        self._send_locks: list[threading.Lock] = []
        self._lease_lock = threading.Lock()  # _busy, _rings, _ring_ids, retired
        self._busy: set[int] = set()  # children lent to a decode
        self._free_since: dict[int, float] = {}  # child -> when it was last given back (monotonic)
        self._rings: dict[tuple, Ring] = {}  # (children, layout) -> ring
        self._ring_ids = 0
        self._warm: set[tuple] = set()  # (child, session key, sessions)
        self.broken = False
        self.retired = False  # being replaced: lends no child any more
        self._keeper = Keeper("vidpipe-procs")  # starts the children; holds the pipe they watch
        self.closing = False  # close() began: children that go now were told to
        t0 = time.perf_counter()
        try:
            self._start(processes)
            self._hello()
        except BaseException:
            self.close()
            raise
        self.start_s = time.perf_counter() - t0
        logger.info("%d decoder processes for %s started in %.1f s", processes, device, self.start_s)

    def _start(self, n: int) -> None:
        """Start ``n`` children from the keeper's thread, which lives as long as the pool: Linux
        sends the parent-death signal when the thread that started a child ends (this one: when
        the pool is closed or the process dies), not the thread that asked for the pool (a
        decode thread of a pipeline that may end long before)."""
        from multiprocessing.connection import Connection

        env = python_env()
        if self.device.startswith("cuda"):  # the child opens its CUDA context before its hello
            env["VIDPIPE_PROC_DEVICE"] = self.device
            if self.warm_for:  # and its share of the file's NVDEC sessions (procworker._warm_at_start)
                env["VIDPIPE_PROC_WARM"] = self.warm_for
                env["VIDPIPE_PROC_COUNT"] = str(n)
        if logger.isEnabledFor(logging.DEBUG):
            env["VIDPIPE_PROC_LOG"] = "DEBUG"
        for _ in range(n):
            mine, theirs = socket.socketpair()
            try:
                env["VIDPIPE_PROC_FD"] = str(theirs.fileno())
                self.procs.append(self._keeper.popen(
                    [sys.executable, "-m", "vidpipe.decode.procworker"], python=True, env=env,
                    stdin=subprocess.DEVNULL, pass_fds=(theirs.fileno(),),
                ))  # fmt: skip
            except BaseException:
                mine.close()
                raise
            finally:
                theirs.close()
            self.conns.append(Connection(mine.detach()))
            self.alive.append(True)
            self._send_locks.append(threading.Lock())

    def _hello(self) -> None:
        """Wait until every child has started (its CUDA context and NVDEC sessions) and said hello."""
        from multiprocessing.connection import wait

        waiting = dict(zip(self.conns, self.procs))
        deadline = time.monotonic() + START_TIMEOUT
        while waiting:
            if time.monotonic() > deadline:
                raise DecodeError(f"decoder processes did not start: not ready after {START_TIMEOUT:.0f} s")
            for conn in wait(list(waiting), timeout=0.2):
                try:
                    hello = conn.recv()
                except (EOFError, OSError):
                    try:
                        code = waiting[conn].wait(timeout=5)
                    except subprocess.TimeoutExpired:
                        code = None
                    raise DecodeError(f"a decoder process exited while starting (exit code {code})") from None
                if hello[0] != "hello":
                    raise DecodeError(f"unexpected message from a decoder process: {hello!r}")
                del waiting[conn]
            dead = [p for p in waiting.values() if p.poll() is not None]
            if dead:
                raise DecodeError(f"a decoder process exited while starting (exit code {dead[0].returncode})")

    @property
    def size(self) -> int:
        return sum(self.alive)

    def send(self, i: int, msg: tuple, fds: tuple[int, ...] = ()) -> bool:
        """Send to child ``i`` (with open descriptors ``fds`` right after: see
        :func:`~vidpipe.decode.procring.open_slots`);
        ``False`` (and the child marked dead) when it is gone."""
        if not self.alive[i]:
            return False
        try:
            with self._send_locks[i]:
                self.conns[i].send(msg)
                if fds:
                    send_fds(self.conns[i], list(fds))
            return True
        except (OSError, EOFError, BrokenPipeError):
            self.mark_dead(i)
            return False

    def broadcast(self, msg: tuple, fds: tuple[int, ...] = ()) -> None:
        for i in range(len(self.conns)):
            self.send(i, msg, fds)

    def mark_dead(self, i: int) -> None:
        """Child ``i`` is gone (its socket closed): make sure it has exited (it writes into the
        ring no more: what it half wrote is rewritten by whoever decodes its segments again)
        and say so once, with its exit code."""
        if not self.alive[i]:
            return
        self.alive[i] = False
        self.broken = True
        if i >= len(self.procs) or self.closing:
            return
        p = self.procs[i]
        try:
            p.wait(timeout=2)
        except subprocess.TimeoutExpired:  # its socket is gone but it runs on: end it
            p.kill()
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        code = p.returncode
        how = ""
        if code is not None and code < 0:
            try:
                how = f", killed by {signal.Signals(-code).name}"
            except ValueError:
                how = f", killed by signal {-code}"
        logger.warning("decoder process %d (pid %d) died (exit code %s%s); the run goes on without it", i, p.pid,
                       code, how)  # fmt: skip

    def lease(self, *, among: int = 1) -> "Lease | None":
        """Lend ``ceil(live children / among)`` of the free children (fewer when fewer are free)
        to one decode; ``among``: the files decoding at the same time. ``None``: no child is free
        (the decode uses threads)."""
        from vidpipe.decode.proclease import Lease

        with self._lease_lock:
            if self.retired or self.closing:
                return None
            free = [i for i, up in enumerate(self.alive) if up and i not in self._busy]
            want = max(1, -(-self.size // max(1, among)))
            take = tuple(free[:want])
            if not take:
                return None
            self._busy.update(take)
        return Lease(self, take)

    @property
    def lent(self) -> int:
        """Children lent to decodes now."""
        with self._lease_lock:
            return len(self._busy)

    def give_back(self, children: tuple[int, ...]) -> None:
        """The end of a :class:`~vidpipe.decode.proclease.Lease`: its children are free again."""
        now = time.monotonic()
        with self._lease_lock:
            self._busy.difference_update(children)
            self._free_since.update((i, now) for i in children)

    def lend_idle(self, *, most: int, idle_s: float, since: float) -> tuple[int, ...]:
        """Up to ``most`` children given back at ``since`` (monotonic) or later and free for
        ``idle_s`` seconds or more, lent at once (:meth:`~vidpipe.decode.proclease.Lease.grow`:
        a decode still running takes what a file that ended gave back, once no new file has taken
        it meanwhile; never children no decode has had yet, which files still starting take)."""
        now = time.monotonic()
        with self._lease_lock:
            if self.retired or self.closing or most < 1:
                return ()
            back = self._free_since
            idle = [i for i, up in enumerate(self.alive)
                    if up and i not in self._busy and since <= back.get(i, -1.0) <= now - idle_s]  # fmt: skip
            take = tuple(idle[:most])
            self._busy.update(take)
        return take

    def retire(self) -> bool:
        """Stop lending (the pool is about to be replaced) if no child is lent now; ``False``:
        a decode is using some, the pool stays."""
        with self._lease_lock:
            if self._busy:
                return False
            self.retired = True
            return True

    def ring_for(self, lease: "Lease", shape: tuple[int, ...], dtype: "torch.dtype", slots: int,
                 device: "torch.device") -> Ring:  # fmt: skip
        """The shared batch buffers of this layout for ``lease``'s children, kept across decodes.
        A new one replaces the rings that any of those children hold (their decodes are over: a
        child is in one lease at a time), so memory stays at one ring per group of children."""
        key = (lease.children, tuple(shape), dtype, slots, str(device))
        with self._lease_lock:
            ring = self._rings.get(key)
            if ring is not None:
                return ring
            ident, old = self._new_ring_id(lease)
        for r in old:
            r.release()
        ring = Ring(lease, ident, tuple(shape), dtype, slots, device)
        with self._lease_lock:
            self._rings[key] = ring
        return ring

    def adopt_ring(self, ring: Ring, lease: "Lease") -> None:
        """``ring`` was made before any child had it (a run that started in the parent's threads
        while this pool started): it gets an id of this pool and is kept as :meth:`ring_for`'s
        rings are (the rings ``lease``'s children held are dropped). Before it is sent to them
        (:meth:`~vidpipe.decode.procring.Ring.join`)."""
        key = (lease.children, tuple(ring.shape), ring.dtype, ring.slots, str(ring.device))
        with self._lease_lock:
            ring.id, old = self._new_ring_id(lease)
            self._rings[key] = ring
        for r in old:
            r.release()

    def _new_ring_id(self, lease: "Lease") -> tuple[int, list[Ring]]:
        """A new ring id for ``lease``'s children, and the rings any of them hold, taken out (their
        decodes are over; the caller releases them once it no longer holds ``_lease_lock``)."""
        mine = set(lease.children)
        old = [self._rings.pop(k) for k in list(self._rings) if mine & set(k[0])]
        self._ring_ids += 1
        return self._ring_ids, old

    def ring_joined(self, ring: Ring, children: tuple[int, ...]) -> None:
        """``ring`` is now shared with ``children`` too (a lease that grew): a later ring for any
        of them replaces it, as for the children it was made for."""
        with self._lease_lock:
            for key, value in list(self._rings.items()):
                if value is ring:
                    del self._rings[key]
                    self._rings[(tuple(sorted(set(key[0]) | set(children))), *key[1:])] = ring

    def warm(self, info: "StreamInfo", sessions: int, *, children: "tuple[int, ...] | None" = None) -> None:
        """Create ``sessions`` pooled NVDEC sessions for this kind of stream in each of
        ``children`` (default: every child) that has not got them yet."""
        from vidpipe.decode.nvdec import session_key
        from vidpipe.device import resolve_device

        key = session_key(info, resolve_device(self.device))
        which = range(len(self.conns)) if children is None else children
        todo = [i for i in which if (i, key, sessions) not in self._warm]
        live = [i for i in todo if self.send(i, ("warm", info, self.device, sessions))]
        for i in live:
            try:
                msg = self.conns[i].recv()
            except (EOFError, OSError):
                self.mark_dead(i)
                continue
            if msg[0] == "warmed" and msg[2]:
                logger.warning("decoder process %d could not warm its sessions: %s", i, msg[2])
            self._warm.add((i, key, sessions))

    def close(self, *, wait: bool = True) -> None:
        """Stop the children (politely, then by force) and free the shared buffers. ``wait``
        false: tell them and return (each exits on its own: the message, or the lifeline that
        closes with this process)."""
        self.closing = True
        for ring in self._rings.values():
            ring.release()
        self._rings.clear()
        for i in range(len(self.conns)):
            self.send(i, ("exit",))
            try:
                self.conns[i].close()
            except OSError:
                pass
        if wait:
            reap(self.procs)
        self.alive = [False] * len(self.alive)
        self.procs = []
        self._keeper.close()  # the lifeline closes; the keeper's thread ends


def get_pool(
    device: "torch.device | str", processes: int | None, *, start: bool, wait_s: float = 0.0
) -> DecoderProcessPool | None:
    """The pool of ``device`` with ``processes`` live children (``None``: any running pool): the
    running one, or (``start``) a new one; ``None`` when none runs and ``start`` is false. A broken
    pool (a child died) is closed and, with ``start``, replaced. A pool that is being started in
    the background (:func:`start_in_background`) is waited for up to ``wait_s`` seconds (default:
    not at all, ``None`` comes back) and, with ``start``, until it is ready."""
    name = str(device)
    with _pools_lock:
        starting = _starting.get(name)
    if starting is not None and (start or wait_s > 0):
        starting.wait(None if start else wait_s)
    with _pools_lock:
        if name in _starting:  # still starting: not usable yet
            return None
        pool = _pools.get(name)
        if pool is not None and (pool.broken or (processes is not None and pool.size != processes)):
            if pool.retire():  # not in use: replace it
                _pools.pop(name)
                pool.close()
                pool = None
            elif pool.broken:
                return None
        if pool is None and start and processes:
            _register_exit()
            pool = _pools[name] = DecoderProcessPool(name, processes)
        return pool


def is_starting(device: "torch.device | str") -> bool:
    """Whether the pool of ``device`` is being started in the background."""
    with _pools_lock:
        return str(device) in _starting


def is_up(device: "torch.device | str") -> bool:
    """Whether a pool of ``device`` runs or is being started (:func:`start_in_background` then
    starts none). Looks only: a broken pool counts, until :func:`get_pool` replaces it."""
    with _pools_lock:
        return str(device) in _starting or str(device) in _pools


def start_in_background(device: "torch.device | str", processes: int, *, warm_for: str | None = None) -> bool:
    """Start ``processes`` decoder children for ``device`` from a thread of their own and return at
    once, so that their start (each child's interpreter, CUDA context and NVDEC sessions: about a
    second on an H200, without PyTorch since session 33)
    overlaps the caller's; a decode that finds the pool ready uses it, one that finds it starting
    begins with threads and the children join it once ready
    (:class:`~vidpipe.decode.proclate.LateLease`), or waits for it (:func:`get_pool`'s
    ``wait_s``); ``warm_for``: see :class:`DecoderProcessPool`.
    ``False``: a pool runs or starts already.
    A start that fails is logged (decoding then uses threads); it never raises here."""
    name = str(device)
    with _pools_lock:
        if name in _starting or name in _pools:  # is_up; a broken pool is replaced by get_pool(start=True)
            return False
        _register_exit()
        starting = _starting[name] = threading.Event()

    def start() -> None:
        pool = None
        try:
            pool = DecoderProcessPool(name, processes, warm_for=warm_for)
        except Exception as exc:  # noqa: BLE001 - the run decodes with threads instead
            logger.warning("decoder processes could not start (%s); decoding with threads", exc)
        with _pools_lock:
            forgotten = _starting.get(name) is not starting  # close_pools() ran meanwhile
            if not forgotten:
                del _starting[name]
                if pool is not None:
                    _pools[name] = pool
        if pool is not None and forgotten:
            pool.close()
        starting.set()

    threading.Thread(target=start, name=f"vidpipe-procs-start-{name}", daemon=True).start()
    return True


_exit_registered = False


def _register_exit() -> None:
    global _exit_registered
    if not _exit_registered:
        atexit.register(_close_at_exit)
        if hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=_forget_pools)
        _exit_registered = True


def _forget_pools() -> None:
    """In a process forked from this one: the pools are the parent's. Drop them without a word
    to the children, and close the inherited descriptors (a copy of the lifeline's write end
    kept here would keep the children alive after the parent died)."""
    global _pools_lock
    _pools_lock = threading.Lock()  # another thread may have held it at the fork
    _starting.clear()  # their threads are not in this process
    for pool in _pools.values():
        for conn in pool.conns:
            try:
                conn.close()
            except OSError:
                pass
        pool._keeper.forget()
        pool.procs = []
        pool.alive = [False] * len(pool.alive)
    _pools.clear()


def children_cpu_seconds() -> float:
    """CPU seconds used so far by the live decoder processes of this process (Linux; else 0)."""
    with _pools_lock:
        pids = [p.pid for pool in _pools.values() for p in pool.procs]
    return cpu_seconds(pids)


def cpu_seconds(pids: "list[int]") -> float:
    """CPU seconds used so far by the processes ``pids`` (Linux; else 0)."""
    total = 0.0
    tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / tick  # utime, stime
        except (OSError, IndexError, ValueError):
            pass
    return total


def describe() -> str:
    """The running pools, e.g. ``"3 on cuda:0 (started in 4.1 s)"``."""
    with _pools_lock:
        return "; ".join(f"{p.size} on {name} (started in {p.start_s:.1f} s)" for name, p in _pools.items())


def close_pools(*, wait: bool = True) -> None:
    """Stop every decoder process of this process (``wait``: until they have exited)."""
    with _pools_lock:
        pools = list(_pools.values())
        _pools.clear()
        _starting.clear()  # a pool still starting closes itself when it is ready
    _close(pools, wait=wait)


def close_pool(device: "torch.device | str", *, wait: bool = True) -> bool:
    """Stop the decoder processes of ``device`` (``wait``: until they have exited); one still
    starting closes itself when it is ready. ``False``: a decode is using them now, and they stay
    (they stop with this process)."""
    name = str(device)
    with _pools_lock:
        pool = _pools.get(name)
        if pool is not None and not pool.retire():
            return False
        _pools.pop(name, None)
        _starting.pop(name, None)
    _close([pool] if pool is not None else [], wait=wait)
    return True


def _close(pools: "list[DecoderProcessPool]", *, wait: bool) -> None:
    for pool in pools:
        try:
            pool.close(wait=wait)
        except Exception:  # noqa: BLE001
            logger.debug("closing a decoder pool failed", exc_info=True)


def _close_at_exit() -> None:
    """At interpreter exit: tell every decoder process to exit, without waiting for them (they
    exit on their own, and a child still running when this process is gone sees its lifeline
    end); waiting cost a fresh ``vidpipe detect`` 0.7 s of its wall time on an H100
    (``tools/bench-probes/cli_phases.py``, four processes)."""
    close_pools(wait=False)
