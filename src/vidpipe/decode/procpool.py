"""Decoder processes: a pool of ``python -m vidpipe.decode.procworker`` children per device.

Why processes: one Python process decoding with two dozen NVDEC sessions spends its GIL on the
sessions' per-frame work (every ``Decode`` call gives the GIL up and takes it back) and the
consumer (model, NMS) waits for the same lock; measured on an H200, one process tops out well
below what the NVDEC engines deliver to independent sessions. Spreading the sessions over a few
processes gives each its own GIL; the frames still never leave the GPU: the children copy them
into batch buffers the parent allocated and shared through CUDA IPC (CPU shared memory for the
CPU backend), and only frame numbers travel back.

The pool starts its children once (a few seconds: interpreter, PyTorch, CUDA context) and keeps
them for every later decode in the process, like the NVDEC session pool; each child keeps its own
pooled sessions. One decode uses the pool at a time (:meth:`DecoderProcessPool.try_lock`); a
second decoder running meanwhile uses threads. Children are plain subprocesses, not
``multiprocessing`` workers, so a user's script is never re-imported; they exit when the parent
closes the pool, exits or dies.
"""

from __future__ import annotations

import atexit
import logging
import os
import secrets
import subprocess
import sys
import tempfile
import threading
import time
from typing import TYPE_CHECKING, Any

from vidpipe.errors import DecodeError
from vidpipe.ops.pool import _use_count

if TYPE_CHECKING:
    import torch

    from vidpipe.decode.base import StreamInfo

__all__ = ["DecoderProcessPool", "get_pool", "close_pools", "share_slot", "open_slot", "Ring"]

logger = logging.getLogger(__name__)

#: seconds a child may take to start (import PyTorch, connect) before the pool gives up
START_TIMEOUT = 120.0

_pools: dict[str, "DecoderProcessPool"] = {}
_pools_lock = threading.Lock()


# ------------------------------------------------------------------------------ shared buffers


def share_slot(tensor: "torch.Tensor", path: str | None = None) -> Any:
    """What a child needs to map ``tensor``: the CUDA tensor itself (pickled as a CUDA IPC handle
    by PyTorch's reducers) or, for a CPU tensor mapped from the file ``path``, the file."""
    if tensor.device.type == "cuda":
        return ("cuda", tensor)
    return ("file", path, tuple(tensor.shape), str(tensor.dtype).removeprefix("torch."))


def open_slot(handle: Any) -> "torch.Tensor":
    """The child's view of a shared batch buffer (see :func:`share_slot`)."""
    if handle[0] == "cuda":
        return handle[1]
    _, path, shape, dtype = handle
    return _map_file(path, shape, dtype)


def _map_file(path: str, shape: tuple[int, ...], dtype: str) -> "torch.Tensor":
    """A CPU tensor over the shared file ``path``; the mapping lives as long as the tensor (and
    its views), whatever happens to the file's name."""
    import mmap

    import numpy as np
    import torch

    fd = os.open(path, os.O_RDWR)
    try:
        m = mmap.mmap(fd, os.fstat(fd).st_size)
    finally:
        os.close(fd)
    n = int(np.prod(shape))
    return torch.from_numpy(np.frombuffer(m, dtype=getattr(np, dtype), count=n).reshape(shape))


class Ring:
    """``slots`` batch buffers ``(B, *row)`` shared with every child; batch ``b`` lives in slot
    ``b % slots``."""


    def __init__(self, pool: "DecoderProcessPool", ident: int, shape: tuple[int, ...], dtype: "torch.dtype",
                 slots: int, device: "torch.device") -> None:  # fmt: skip
        self.pool = pool
        self.id = ident
        self.shape = shape
        self.dtype = dtype
        self.device = device
        self.tensors: list[torch.Tensor] = []
        self._files: list[str | None] = []
        for _ in range(slots):
            t, path = self._alloc()
            self.tensors.append(t)
            self._files.append(path)
        self._base = [_use_count(t) for t in self.tensors]  # the ring's own references to each slot
        pool.broadcast(("ring", ident, [share_slot(t, p) for t, p in zip(self.tensors, self._files)]))

    def _alloc(self) -> tuple["torch.Tensor", str | None]:
        """A new slot: CUDA memory, or a CPU tensor mapped from a file in shared memory."""
        import torch

        if self.device.type == "cuda":
            return torch.empty(self.shape, dtype=self.dtype, device=self.device), None
        n = self.dtype.itemsize
        for s in self.shape:
            n *= s
        shm_dir = "/dev/shm" if os.path.isdir("/dev/shm") else None
        fd, path = tempfile.mkstemp(prefix="vidpipe-ring-", dir=shm_dir)
        try:
            os.ftruncate(fd, max(1, n))
        finally:
            os.close(fd)
        return _map_file(path, self.shape, str(self.dtype).removeprefix("torch.")), path

    @property
    def slots(self) -> int:
        return len(self.tensors)

    @property
    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in self.tensors)

    def renew_if_kept(self, i: int) -> None:
        """Give slot ``i`` a new buffer when something outside the ring still references the old
        one (the caller kept a batch, or a view of it): the kept one leaves the ring, as a pool
        buffer would. Undecidable without PyTorch's storage use count: then nothing is renewed."""
        n, base = _use_count(self.tensors[i]), self._base[i]
        if n is None or base is None or n <= base:
            return
        t, path = self._alloc()
        self.tensors[i], old = t, self._files[i]
        self._files[i] = path
        self._base[i] = _use_count(t)
        self.pool.broadcast(("slot", self.id, i, share_slot(t, path)))
        _unlink(old)  # the caller's tensor keeps its mapping

    def release(self) -> None:
        self.pool.broadcast(("drop", self.id))
        self.tensors = []
        for path in self._files:
            _unlink(path)
        self._files = []


def _unlink(path: str | None) -> None:
    if path is not None:
        try:
            os.unlink(path)
        except OSError:
            pass


# ------------------------------------------------------------------------------------- pool


class DecoderProcessPool:
    """``processes`` decoder children for ``device`` (``"cuda:0"`` or ``"cpu"``).

    Raises:
        DecodeError: a child did not start or connect within :data:`START_TIMEOUT` seconds.
    """

    def __init__(self, device: str, processes: int) -> None:
        from multiprocessing.connection import Listener

        import torch.multiprocessing  # noqa: F401 - CUDA tensors pickle as IPC handles

        self.device = device
        self.procs: list[subprocess.Popen] = []
        self.conns: list[Any] = []
        self.alive: list[bool] = []
        self._send_locks: list[threading.Lock] = []
        self._run_lock = threading.Lock()
        self._rings: dict[tuple, Ring] = {}
        self._ring_ids = 0
        self._warm: set[tuple] = set()
        self.broken = False
        key = secrets.token_bytes(16)
        self._dir = tempfile.mkdtemp(prefix="vidpipe-dec-")
        address = os.path.join(self._dir, "sock")
        listener = Listener(address, family="AF_UNIX", authkey=key)
        env = dict(os.environ, VIDPIPE_PROC_ADDRESS=address, VIDPIPE_PROC_KEY=key.hex(),
                   PYTHONPATH=os.pathsep.join(p for p in sys.path if p))  # fmt: skip
        if logger.isEnabledFor(logging.DEBUG):
            env["VIDPIPE_PROC_LOG"] = "DEBUG"
        t0 = time.perf_counter()
        try:
            for _ in range(processes):
                self.procs.append(
                    subprocess.Popen([sys.executable, "-m", "vidpipe.decode.procworker"], env=env, stdin=subprocess.DEVNULL)
                )
            self._accept(listener, processes)
        except BaseException:
            self.close()
            raise
        finally:
            listener.close()
        self.start_s = time.perf_counter() - t0
        logger.info("%d decoder processes for %s started in %.1f s", processes, device, self.start_s)

    def _accept(self, listener: Any, n: int) -> None:
        result: list[Any] = []
        error: list[BaseException] = []

        def accept() -> None:
            try:
                for _ in range(n):
                    conn = listener.accept()
                    hello = conn.recv()
                    if hello[0] != "hello":
                        raise DecodeError(f"unexpected message from a decoder process: {hello!r}")
                    result.append(conn)
            except BaseException as exc:  # noqa: BLE001
                error.append(exc)

        t = threading.Thread(target=accept, daemon=True)
        t.start()
        deadline = time.monotonic() + START_TIMEOUT
        while t.is_alive() and time.monotonic() < deadline:
            t.join(0.2)
            dead = [p for p in self.procs if p.poll() is not None]
            if dead:
                raise DecodeError(f"a decoder process exited while starting (exit code {dead[0].returncode})")
        if t.is_alive() or error or len(result) < n:
            why = error[0] if error else f"not connected after {START_TIMEOUT:.0f} s"
            raise DecodeError(f"decoder processes did not start: {why}")
        self.conns = result
        self.alive = [True] * n
        self._send_locks = [threading.Lock() for _ in range(n)]

    @property
    def size(self) -> int:
        return sum(self.alive)

    def send(self, i: int, msg: tuple) -> bool:
        """Send to child ``i``; ``False`` (and the child marked dead) when it is gone."""
        if not self.alive[i]:
            return False
        try:
            with self._send_locks[i]:
                self.conns[i].send(msg)
            return True
        except (OSError, EOFError, BrokenPipeError):
            self.mark_dead(i)
            return False

    def broadcast(self, msg: tuple) -> None:
        for i in range(len(self.conns)):
            self.send(i, msg)

    def mark_dead(self, i: int) -> None:
        if self.alive[i]:
            self.alive[i] = False
            self.broken = True
            code = self.procs[i].poll() if i < len(self.procs) else None
            logger.warning("decoder process %d is gone (exit code %s)", i, code)

    def try_lock(self) -> bool:
        """Take the pool for one decode (``False``: another decode is using it)."""
        return self._run_lock.acquire(blocking=False)

    def unlock(self) -> None:
        self._run_lock.release()

    def ring(self, shape: tuple[int, ...], dtype: "torch.dtype", slots: int, device: "torch.device") -> Ring:
        """The shared batch buffers for this layout (kept across decodes; one ring per pool: a
        new layout replaces the last one)."""
        key = (tuple(shape), dtype, slots, str(device))
        ring = self._rings.get(key)
        if ring is None:
            for old in self._rings.values():
                old.release()
            self._rings.clear()
            self._ring_ids += 1
            ring = self._rings[key] = Ring(self, self._ring_ids, tuple(shape), dtype, slots, device)
        return ring

    def warm(self, info: "StreamInfo", sessions: int) -> None:
        """Create ``sessions`` pooled NVDEC sessions in every child for this kind of stream."""
        from vidpipe.decode.nvdec import session_key
        from vidpipe.device import resolve_device

        key = session_key(info, resolve_device(self.device))
        if (key, sessions) in self._warm:
            return
        live = [i for i in range(len(self.conns)) if self.send(i, ("warm", info, self.device, sessions))]
        for i in live:
            try:
                msg = self.conns[i].recv()
            except (EOFError, OSError):
                self.mark_dead(i)
                continue
            if msg[0] == "warmed" and msg[2]:
                logger.warning("decoder process %d could not warm its sessions: %s", i, msg[2])
        self._warm.add((key, sessions))

    def close(self) -> None:
        """Stop the children (politely, then by force) and free the shared buffers."""
        for ring in self._rings.values():
            ring.release()
        self._rings.clear()
        for i in range(len(self.conns)):
            self.send(i, ("exit",))
            try:
                self.conns[i].close()
            except OSError:
                pass
        for p in self.procs:
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=5)
        self.alive = [False] * len(self.alive)
        self.procs = []
        try:
            os.rmdir(self._dir)
        except OSError:
            pass


def get_pool(device: "torch.device", processes: int | None, *, start: bool) -> DecoderProcessPool | None:
    """The pool of ``device`` with ``processes`` live children (``None``: any running pool): the
    running one, or (``start``) a new one; ``None`` when none runs and ``start`` is false. A broken pool (a child died) is closed and, with ``start``, replaced."""
    name = str(device)
    with _pools_lock:
        pool = _pools.get(name)
        if pool is not None and (pool.broken or (processes is not None and pool.size != processes)):
            if pool.try_lock():  # not in use: replace it
                _pools.pop(name)
                pool.unlock()
                pool.close()
                pool = None
            elif pool.broken:
                return None
        if pool is None and start and processes:
            _register_exit()
            pool = _pools[name] = DecoderProcessPool(name, processes)
        return pool


_exit_registered = False


def _register_exit() -> None:
    global _exit_registered
    if not _exit_registered:
        atexit.register(close_pools)
        _exit_registered = True


def children_cpu_seconds() -> float:
    """CPU seconds used so far by the live decoder processes of this process (Linux; else 0)."""
    total = 0.0
    tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    with _pools_lock:
        pids = [p.pid for pool in _pools.values() for p in pool.procs]
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


def close_pools() -> None:
    """Stop every decoder process of this process (also run at exit)."""
    with _pools_lock:
        pools = list(_pools.values())
        _pools.clear()
    for pool in pools:
        try:
            pool.close()
        except Exception:  # noqa: BLE001
            logger.debug("closing a decoder pool failed", exc_info=True)


