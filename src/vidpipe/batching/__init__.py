"""Per-source bounded queues (:mod:`~vidpipe.batching.queues`) and the batcher that forms model
batches across sources (:mod:`~vidpipe.batching.batcher`)."""

from vidpipe.batching.batcher import END, Batcher
from vidpipe.batching.queues import QueuedChunk, SourceQueue

__all__ = ["Batcher", "END", "QueuedChunk", "SourceQueue"]
