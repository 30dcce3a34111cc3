"""Images: :class:`ImageSource`, a finite :class:`~vidpipe.sources.base.Source` over an image
file, a folder of images or a glob (nvJPEG on CUDA), batched and letterboxed on the device.

Unreadable files are skipped and listed in ``state.extra["skipped"]`` (the run summary and the
output metadata carry them); they never stop the source. Every file skipped: the source fails.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterator
from typing import TYPE_CHECKING

from vidpipe.sources.drive import drive

if TYPE_CHECKING:
    from vidpipe.pipeline_config import SourceState
    from vidpipe.sources.base import Chunk, SourceContext
    from vidpipe.sources.spec import SourceSpec

logger = logging.getLogger(__name__)

__all__ = ["ImageSource"]


class ImageSource:
    """The images of one file, folder or pattern, in path order."""

    live = False

    def __init__(self, spec: "SourceSpec") -> None:
        self.spec = spec

    def __repr__(self) -> str:
        return f"ImageSource({self.spec.name!r})"

    def produce(self, state: "SourceState", ctx: "SourceContext") -> Iterator["Chunk"]:
        """``(ModelInput, ready_event)`` chunks of up to ``batch_size`` images of one size."""
        import vidpipe.images as vi

        detector = ctx.detector
        loader = vi.load(
            self.spec.location,
            device=detector.device,
            batch_size=ctx.config.batch_size,
            size=detector.input_size,
            mode="letterbox",
            dtype=detector.dtype,
            stream_id=state.stream_id,
            keep_images=ctx.config.keep_frames,
        )
        state.decoder, state.decoder_reason = loader.decoder_name, loader.decoder
        state.expected_frames = loader.total
        try:
            yield from drive(
                iter(loader), lambda b: b.to_model_input(), device=detector.device, stop=ctx.stop, stats=ctx.stats,
                state=state,
            )
            failure = None if ctx.stop.is_set() else loader.failure(self.spec.location)
            if failure is not None:  # every file skipped: the source failed (a clear error, exit 2)
                raise failure
        finally:
            state.extra["skipped"] = [s.to_dict() for s in loader.skipped]
            state.extra["loader"] = dataclasses.asdict(loader.stats)
            if loader.skipped:
                logger.warning("%s: skipped %d unreadable file(s)", self.spec.name, len(loader.skipped))
