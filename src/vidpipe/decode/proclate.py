"""The decoder processes of a run that starts before they are ready: :class:`LateLease`.

``vidpipe detect`` and ``vidpipe.detect`` start the decoder processes beside their own start
(:func:`~vidpipe.decode.procpool.start_in_background`): each child imported PyTorch, seconds
(now it does not: about 1.3 s on an H200, ``docs/bench/h200/torch-free-children``). When
the command's own start is the faster one, its decode used to wait for them inside the run's
clock (on an H200, 0.28 s and 0.69 s in 2 of 8 cold commands of a 4,800-frame file). Now such
a run starts with threads in the parent, and the children join it once they are ready
(:mod:`vidpipe.decode.procrun`); this object is what the run polls for them.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

    from vidpipe.decode.base import StreamInfo
    from vidpipe.decode.proclease import Lease

__all__ = ["LateLease"]

logger = logging.getLogger(__name__)


class LateLease:
    """A lease of ``device``'s decoder processes, taken once the pool that is being started is
    ready; each child then gets its share of ``sessions`` NVDEC sessions for ``info`` (``None``:
    no NVDEC). ``among``: the files decoding at the same time (they share the children);
    ``here``: the threads (sessions) the run decodes with in the parent meanwhile."""

    def __init__(self, device: "torch.device | str", *, among: int, info: "StreamInfo | None", sessions: int,
                 here: int) -> None:  # fmt: skip
        self.device = device
        self.among = among
        self.info = info
        self.sessions = sessions
        self.here = max(1, here)
        self.lease: "Lease | None" = None
        self.gone = False  # the pool did not start, or had no child free: the run stays in threads

    def poll(self) -> "Lease | None":
        """The lease once the pool is ready (taken, and its sessions warmed, at the first call
        that finds it so); ``None`` while the pool starts, or when it will not come (``gone``).
        Never waits for the pool; warming waits for the children's answers (milliseconds: they
        started the file's sessions at their start)."""
        from vidpipe.decode.procpool import get_pool, is_starting, sessions_per_process

        if self.lease is not None or self.gone:
            return self.lease
        if is_starting(self.device):
            return None
        pool = get_pool(self.device, None, start=False)
        lease = pool.lease(among=self.among) if pool is not None else None
        if lease is None:
            self.gone = True
            logger.info("the decoder processes did not start or none is free; decoding on with threads")
            return None
        if self.info is not None:
            try:
                lease.warm(self.info, sessions_per_process(self.sessions, lease.size))
            except Exception as exc:  # noqa: BLE001 - the threads go on
                lease.release()
                self.gone = True
                logger.warning("the decoder processes could not start their sessions (%s); decoding on with threads",
                               exc)  # fmt: skip
                return None
        self.lease = lease
        return lease

    @property
    def size(self) -> int:
        """Children of the lease still running (0 before it is taken)."""
        return self.lease.size if self.lease is not None else 0

    def release(self) -> None:
        """Give the children back (if they were taken)."""
        if self.lease is not None:
            self.lease.release()
