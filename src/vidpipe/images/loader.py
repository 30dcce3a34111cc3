"""The image loader: files -> read-ahead threads -> batched decode -> resize -> ImageBatch.

Three stages run at once, each on its own threads:

- a pool of reader threads reads files ahead (and CPU-decodes and resizes what the GPU decoder
  does not take: other formats, progressive/CMYK JPEGs, everything on the CPU path);
- a GPU decoder worker decodes the JPEGs of the next chunks, one batched call per chunk, up to
  ``_DECODE_AHEAD`` chunks ahead, on a CUDA stream of its own (the hardware-engine decoder
  returns as soon as a batch is queued; torchvision's waits until it is decoded);
- one producer thread orients and resizes each decoded chunk into a batch (two Triton kernels on
  CUDA) while the caller consumes earlier ones (``prefetch`` batches ahead, bounded).

Order is the listing order (or the ``order`` given).
"""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING

from vidpipe.errors import ConfigError, SourceError
from vidpipe.images.batch import ImageBatch, SkippedImage
from vidpipe.images.decode_cpu import decode_cpu, error_text, quiet_torchvision_deprecation
from vidpipe.images.formats import ImageFormatError
from vidpipe.images.reader import Prepared, ReadAhead, ReadOptions, read_image
from vidpipe.images.resize import resize_images, to_dtype
from vidpipe.images.threads import single_threaded_torch
from vidpipe.images.transfer import to_device

if TYPE_CHECKING:
    import torch

    from vidpipe.images.cache import ImageCache
    from vidpipe.images.config import ImageConfig
    from vidpipe.images.decode_gpu import GpuJpegDecoder

__all__ = ["ImageLoader", "LoaderStats", "all_skipped_error"]

logger = logging.getLogger(__name__)

_END = object()

#: Chunks whose GPU decode runs ahead of the batch being assembled.
_DECODE_AHEAD = 2
#: Batches whose decoder outputs stay referenced until their resize has run (see _hold_until_used).
_HELD_BATCHES = 2


@dataclass
class LoaderStats:
    """Counters of the last pass (updated while it runs)."""

    images: int = 0
    skipped: int = 0
    decoded_gpu: int = 0
    decoded_cpu: int = 0
    gpu_fallbacks: int = 0
    cache_hits: int = 0
    mislabelled: int = 0
    seconds: float = 0.0

    @property
    def decoded(self) -> int:
        return self.decoded_gpu + self.decoded_cpu

    def add(self, other: LoaderStats) -> None:
        """Accumulate ``other`` into these counters."""
        for f in fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))


class ImageLoader:
    """An iterable of :class:`ImageBatch` over image files; each ``iter()`` is one pass.

    Build it with :func:`vidpipe.images.load` (or :meth:`ImageDataset.batches`). Batches hold the
    next ``batch_size`` *listed* files minus those skipped, so a batch can be shorter than
    ``batch_size`` (the last one, or one with bad files); an all-bad batch is not yielded, its
    skips are reported with the next batch. Attributes, updated during a pass:

    - ``skipped``: :class:`SkippedImage` of every file skipped so far, in order;
    - ``stats``: :class:`LoaderStats`; ``decoder``: which decoder runs (e.g. ``"nvjpeg on cuda:0"``);
    - ``total``: how many files the pass covers (for a progress bar).

    CUDA tensors are produced on the producer thread's current stream (the device's default
    stream unless you changed it); a consumer on another stream should wait for that one.
    Breaking out of the loop stops the producer and the readers.
    """

    def __init__(
        self,
        paths: Sequence[str],
        cfg: ImageConfig,
        *,
        batch_size: int,
        gpu_decoder: GpuJpegDecoder | None,
        decoder_desc: str,
        order: Sequence[int] | None = None,
        cache: ImageCache | None = None,
        prefetch: int = 2,
        stream_id: int = 0,
        on_skip: Callable[[SkippedImage], None] | None = None,
        totals: LoaderStats | None = None,
        keep_images: bool = False,
    ) -> None:
        if keep_images and cache is not None:
            raise ConfigError("keep_images cannot be used with an image cache (it holds resized images only)")
        self.keep_images = bool(keep_images)
        self.paths = list(paths)
        self.cfg = cfg
        self.batch_size = batch_size
        self.order = list(range(len(self.paths))) if order is None else list(order)
        self.total = len(self.order)
        self.decoder = decoder_desc
        self.prefetch = prefetch
        self.stream_id = stream_id
        self.skipped: list[SkippedImage] = []
        self.stats = LoaderStats()
        self._gpu = gpu_decoder
        self._cache = cache
        self._on_skip = on_skip
        self._totals = totals
        self._held: deque = deque()  # (CUDA event, decoder outputs): see _hold_until_used

    def __iter__(self) -> Iterator[ImageBatch]:
        if self.prefetch <= 0:
            return self._batches()
        return self._threaded()

    @property
    def decoder_name(self) -> str:
        """The JPEG decoder's short name (``"nvjpeg-hw"``, ``"nvjpeg"``, ``"cpu"``); :attr:`decoder`
        describes the choice in words."""
        return self._gpu.name if self._gpu is not None else "cpu"

    def __repr__(self) -> str:
        return f"ImageLoader(files={self.total}, batch_size={self.batch_size}, decoder={self.decoder!r})"

    def failure(self, location: str | None = None) -> SourceError | None:
        """After a finished pass: a :class:`~vidpipe.errors.SourceError` when not one listed file
        could be read (every one was skipped), else ``None``.

        One file: ``"<path>: cannot read this image (<reason>: <detail>); ..."``; several: the input
        (``location``, e.g. the folder; default: the first file's folder), how many files, the
        reasons and the first file's problem. A pass that stopped early is not judged.
        """
        if self.stats.images or not self.skipped or len(self.skipped) < self.total:
            return None
        return all_skipped_error(self.skipped, location)

    # -- the producer -----------------------------------------------------------------------

    def _batches(self) -> Iterator[ImageBatch]:
        cfg = self.cfg
        self.skipped, self.stats = [], LoaderStats()
        quiet_torchvision_deprecation()
        t0 = time.perf_counter()
        opts = ReadOptions(
            gpu_jpeg=self._gpu is not None,
            max_pixels=cfg.max_pixels,
            # keep_images: CPU decodes stay at full size (kept), resized with the GPU-decoded ones
            target=None if cfg.size is None or self.keep_images else (cfg.size, cfg.mode),
        )
        cache = self._cache
        ahead = max(_DECODE_AHEAD, int(getattr(self._gpu, "concurrency", 1))) if self._gpu is not None else 0
        reader = ReadAhead(
            ((i, self.paths[i]) for i in self.order),
            lambda job: read_image(job[0], job[1], opts),
            threads=cfg.num_threads,
            depth=(ahead + 1) * self.batch_size + 2 * cfg.num_threads,
            bypass=(lambda job: job[0] in cache) if cache is not None else None,
            initializer=single_threaded_torch,
        )
        chunks = _chunks(reader, self.batch_size)
        stage = self._decoded(chunks, ahead) if self._gpu is not None else ((c, {}, None) for c in chunks)
        carried: list[SkippedImage] = []
        try:
            for chunk, decoded, ready in stage:
                batch, carried = self._assemble(chunk, decoded, ready, carried)
                if batch is not None:
                    yield batch
        finally:
            stage.close()
            reader.close()
            self._release_held(keep=0)
            self.stats.seconds = time.perf_counter() - t0
            s = self.stats
            if self._totals is not None:
                self._totals.add(s)
            logger.info(
                "images: %d delivered, %d skipped in %.2f s (%d decoded on GPU, %d on CPU, %d from cache; %s)",
                s.images, s.skipped, s.seconds, s.decoded_gpu, s.decoded_cpu, s.cache_hits, self.decoder,
            )  # fmt: skip

    def _decoded(self, chunks: Iterator[list], ahead: int) -> Iterator[tuple[list, dict, object]]:
        """GPU-decode each chunk's JPEGs on worker threads, ``ahead`` chunks in flight, in order.

        Yields ``(chunk, {index: decoded (3, h, w) uint8 tensor or exception}, ready)``. Each worker
        decodes with its own CUDA stream current: the decoder allocates its outputs and makes them
        ready on that stream, and ``ready`` is an event on it the assembling stream waits for. So
        the decoder never writes into memory the assembling stream freed with work still queued
        (torchvision's nvJPEG writes on a stream of its own), and a decode runs while earlier
        batches are resized and handed over.
        """
        import torch

        dev = self.cfg.device
        local = threading.local()
        gpu = self._gpu

        def job(chunk: list) -> tuple[list, dict, object]:
            items = [p for p in chunk if isinstance(p, Prepared) and p.encoded is not None]
            if not items:
                return chunk, {}, None
            if dev.type != "cuda":  # torchvision's batched CPU decode (tests exercise this path)
                outs = gpu.decode([p.encoded for p in items], [p.jpeg for p in items])
                return chunk, {p.index: out for p, out in zip(items, outs)}, None
            stream = getattr(local, "stream", None)
            if stream is None:
                stream = local.stream = torch.cuda.Stream(dev)
            with torch.cuda.device(dev), torch.cuda.stream(stream):
                outs = gpu.decode([p.encoded for p in items], [p.jpeg for p in items])
                ready = torch.cuda.Event()
                ready.record(stream)
            return chunk, {p.index: out for p, out in zip(items, outs)}, ready

        workers = max(1, int(getattr(gpu, "concurrency", 1)))
        pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="vidpipe-nvjpeg")
        pending: deque = deque()
        try:
            for chunk in chunks:
                pending.append(pool.submit(job, chunk))
                if len(pending) > ahead:
                    yield pending.popleft().result()
            while pending:
                yield pending.popleft().result()
        finally:
            for fut in pending:
                fut.cancel()
            pool.shutdown(wait=True)  # decodes in progress finish before their memory can go

    def _assemble(
        self, chunk: list, decoded: dict, ready, carried: list[SkippedImage]
    ) -> tuple[ImageBatch | None, list[SkippedImage]]:
        """Orient and resize one chunk of read results (listing order kept); ``decoded`` holds the
        GPU decoder's outputs by index, ready once the current stream has waited for ``ready``."""
        import torch

        cfg, stats = self.cfg, self.stats
        skipped = [r for r in chunk if isinstance(r, SkippedImage)]
        fresh: dict[int, tuple[torch.Tensor, int]] = {}  # index -> (decoded image, orientation to apply)
        prepared = [r for r in chunk if isinstance(r, Prepared)]
        if ready is not None:
            torch.cuda.current_stream(cfg.device).wait_event(ready)
        for p in prepared:
            if p.encoded is not None:
                out = decoded[p.index]
                if isinstance(out, Exception):
                    img = self._cpu_fallback(p, out, skipped)
                    if img is not None:
                        fresh[p.index] = (to_device(img, cfg.device), 1)
                else:
                    stats.decoded_gpu += 1
                    fresh[p.index] = (out, p.jpeg.orientation)
            elif p.image is not None:
                stats.decoded_cpu += 1
                fresh[p.index] = (to_device(p.image, cfg.device), 1)
            if p.mislabelled:
                stats.mislabelled += 1
                logger.debug("%s: content is %s, not what its extension says", p.path, p.format.upper())
        rows: list[tuple[int, str, tuple[int, int], bool]] = []  # (index, path, size, cached)
        for r in chunk:
            if isinstance(r, tuple):
                index, path = r[0]
                rows.append((index, path, self._cache.meta(index)[0], True))
            elif isinstance(r, Prepared) and r.index in fresh:
                rows.append((r.index, r.path, r.size, False))
        skipped.sort(key=lambda s: s.index)
        self._record(skipped)
        if not rows:
            return None, carried + skipped
        data, scale, pad = self._resize(rows, fresh)
        kept = self._kept(rows, fresh) if self.keep_images else None
        if decoded and cfg.device.type == "cuda":
            self._hold_until_used(list(decoded.values()))
            self._release_held(keep=_HELD_BATCHES)
        stats.images += len(rows)
        batch = ImageBatch(
            data=data,
            paths=tuple(r[1] for r in rows),
            indices=tuple(r[0] for r in rows),
            sizes=tuple(r[2] for r in rows),
            scale=to_device(scale, cfg.device),
            pad=to_device(pad, cfg.device),
            skipped=tuple(carried + skipped),
            mode=cfg.mode,  # type: ignore[arg-type]
            stream_id=self.stream_id,
            images=kept,
        )
        return batch, []

    def _kept(self, rows, fresh) -> tuple[torch.Tensor, ...]:
        """The rows' decoded images, oriented, at their source size (``keep_images``). On CUDA a
        copy made on this (the assembling) stream: the GPU decoder's own outputs are released as
        soon as their resize has run (see :meth:`_hold_until_used`)."""
        import torch

        from vidpipe.images.decode_cpu import apply_orientation

        out = []
        for index, _path, _size, _cached in rows:
            img, orientation = fresh[index]
            img = apply_orientation(img, orientation)
            out.append(img.clone(memory_format=torch.contiguous_format) if img.is_cuda else img.contiguous())
        return tuple(out)

    def _resize(self, rows, fresh):
        import torch

        cfg, cache = self.cfg, self._cache
        new = [r for r in rows if not r[3]]
        imgs = [fresh[r[0]][0] for r in new]
        orients = [fresh[r[0]][1] for r in new]
        sizes = [r[2] for r in new]
        if cache is None:
            return resize_images(
                imgs, sizes, size=cfg.size, mode=cfg.mode, dtype=cfg.dtype, device=cfg.device, orientations=orients
            )
        # Cached path: everything goes through uint8 canvases, so a cache hit and a fresh decode
        # give identical tensors.
        out = torch.empty((len(rows), 3, *cfg.size), dtype=torch.uint8, device=cfg.device)
        scale = torch.empty((len(rows), 2), dtype=torch.float32)
        pad = torch.empty((len(rows), 2), dtype=torch.float32)
        if new:
            canv, sc, pd = resize_images(
                imgs, sizes, size=cfg.size, mode=cfg.mode, dtype=torch.uint8, device=cfg.device, orientations=orients
            )
            metas = [(s, tuple(a.tolist()), tuple(b.tolist())) for s, a, b in zip(sizes, sc, pd)]
            cache.put([r[0] for r in new], canv, metas)
            at = [k for k, r in enumerate(rows) if not r[3]]
            out.index_copy_(0, to_device(torch.tensor(at, dtype=torch.int64), cfg.device), canv)
            scale[at], pad[at] = sc, pd
        hits = [r[0] for r in rows if r[3]]
        if hits:
            self.stats.cache_hits += len(hits)
            at = [k for k, r in enumerate(rows) if r[3]]
            out.index_copy_(0, to_device(torch.tensor(at, dtype=torch.int64), cfg.device), cache.get(hits))
            scale[at] = torch.tensor([cache.meta(i)[1] for i in hits], dtype=torch.float32)
            pad[at] = torch.tensor([cache.meta(i)[2] for i in hits], dtype=torch.float32)
        return to_dtype(out, cfg.dtype), scale, pad

    def _hold_until_used(self, decoded: list) -> None:
        """Keep the decoder's output tensors alive until the stream that resizes them has done so.

        torchvision's nvJPEG writes on its own CUDA stream into memory it allocates as if on the
        current stream, without waiting for that stream: memory freed here and handed straight to
        the next decode could still be being read by queued resize kernels (the current stream may
        be far behind when the caller queues model work on it). An event marks the point; the
        tensors are released once it has passed.
        """
        import torch

        event = torch.cuda.Event()
        event.record()
        self._held.append((event, decoded))

    def _release_held(self, *, keep: int) -> None:
        """Drop held decoder outputs whose resize is done; wait for the oldest beyond ``keep``."""
        while self._held and (self._held[0][0].query() or len(self._held) > keep):
            event, _ = self._held.popleft()
            event.synchronize()

    def _cpu_fallback(self, p: Prepared, error: Exception, skipped: list[SkippedImage]) -> torch.Tensor | None:
        """Decode on the CPU a JPEG the GPU decoder refused; record a skip if that fails too."""
        self.stats.gpu_fallbacks += 1
        try:
            img = decode_cpu(bytearray(p.encoded.numpy().tobytes()), "jpeg", jpeg=p.jpeg)
        except ImageFormatError as exc:
            skipped.append(
                SkippedImage(p.path, p.index, exc.kind, f"{exc} (GPU decoder: {error_text(error)})")  # type: ignore[arg-type]
            )
            return None
        self.stats.decoded_cpu += 1
        logger.debug("%s: GPU decoder failed (%s), decoded on the CPU", p.path, error_text(error))
        return img

    def _record(self, skipped: list[SkippedImage]) -> None:
        self.skipped.extend(skipped)
        self.stats.skipped += len(skipped)
        if self._on_skip is not None:
            for s in skipped:
                self._on_skip(s)

    # -- the thread around it ----------------------------------------------------------------

    def _threaded(self) -> Iterator[ImageBatch]:
        """Run :meth:`_batches` on a producer thread, ``prefetch`` batches ahead.

        On CUDA the producer works on its own stream; each batch is handed over with an event,
        and the consumer's current stream waits for it (no CPU wait) and is recorded on the
        batch's tensors, so consuming on any stream is safe, as is freeing the batch there.
        """
        q: queue.Queue = queue.Queue(maxsize=self.prefetch)
        stop = threading.Event()

        def put(item) -> bool:
            while not stop.is_set():
                try:
                    q.put(item, timeout=0.1)
                    return True
                except queue.Full:
                    continue
            return False

        def produce() -> None:
            import torch

            try:
                single_threaded_torch()  # its CPU copies must not spin up OpenMP teams next to the readers
                on_cuda = self.cfg.device.type == "cuda"
                with contextlib.ExitStack() as scope:
                    stream = None
                    if on_cuda:
                        scope.enter_context(torch.cuda.device(self.cfg.device))
                        stream = torch.cuda.Stream(self.cfg.device)
                        scope.enter_context(torch.cuda.stream(stream))
                    gen = self._batches()
                    try:
                        for batch in gen:
                            ready = None
                            if stream is not None:
                                ready = torch.cuda.Event()
                                ready.record(stream)
                            if not put((batch, ready)):
                                return
                    finally:
                        gen.close()
                put(_END)
            except BaseException as exc:  # noqa: BLE001 - handed to the consumer, raised there
                put(exc)

        thread = threading.Thread(target=produce, name="vidpipe-images", daemon=True)
        thread.start()
        try:
            while True:
                item = q.get()
                if item is _END:
                    return
                if isinstance(item, BaseException):
                    raise item
                batch, ready = item
                if ready is not None:
                    _adopt(batch, ready)
                yield batch
        finally:
            stop.set()
            thread.join()


def all_skipped_error(skipped: Sequence[SkippedImage], location: str | None = None) -> SourceError:
    """The one-line error of an image input none of whose files could be read."""
    first = skipped[0]
    if len(skipped) == 1:
        return SourceError(
            f"{first.path}: cannot read this image ({first.reason.replace('_', ' ')}: {first.detail}); "
            "check the file or save it again"
        )
    where = location or os.path.dirname(first.path) or "."
    counts = Counter(s.reason for s in skipped)
    reasons = ", ".join(f"{n} {reason.replace('_', ' ')}" for reason, n in counts.most_common())
    return SourceError(
        f"{where}: none of its {len(skipped)} image files could be read ({reasons}); "
        f"first: {first.path}: {first.detail}"
    )


def _chunks(items: Iterable, size: int) -> Iterator[list]:
    """``items`` in lists of ``size`` (the last one shorter)."""
    chunk: list = []
    for item in items:
        chunk.append(item)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _adopt(batch: ImageBatch, ready) -> None:
    """Make the caller's current CUDA stream wait for ``ready`` and own the batch's tensors."""
    import torch

    stream = torch.cuda.current_stream(batch.device)
    stream.wait_event(ready)
    tensors = [*batch.data] if isinstance(batch.data, tuple) else [batch.data]
    for t in (*tensors, *(batch.images or ()), batch.scale, batch.pad):
        t.record_stream(stream)
