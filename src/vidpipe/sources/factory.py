"""Which :class:`~vidpipe.sources.base.Source` reads a :class:`SourceSpec`: :func:`make_source`.

- ``live`` specs (stream URLs, webcams), and ``file`` specs when ``config.live.realtime`` (a file
  played at its own frame rate, standing in for a camera) -> ``LiveSource`` (imported lazily from
  :mod:`vidpipe.sources.live`);
- ``file`` -> :class:`~vidpipe.sources.file.FileSource`;
- ``images`` -> :class:`~vidpipe.sources.images.ImageSource`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from vidpipe.errors import UnsupportedError

if TYPE_CHECKING:
    from vidpipe.pipeline_config import PipelineConfig
    from vidpipe.sources.base import Source
    from vidpipe.sources.spec import SourceSpec

__all__ = ["make_source", "is_live_spec"]


def is_live_spec(spec: "SourceSpec", config: "PipelineConfig") -> bool:
    """Whether ``spec`` is read as a live source under ``config`` (without creating it)."""
    return spec.kind == "live" or (spec.kind == "file" and config.live.realtime)


def make_source(spec: "SourceSpec", config: "PipelineConfig") -> "Source":
    """The source that reads ``spec`` (nothing is opened until its ``produce`` runs).

    Raises :class:`~vidpipe.errors.UnsupportedError` for a live input when this installation has
    no live reader (:mod:`vidpipe.sources.live`).
    """
    if is_live_spec(spec, config):
        try:
            from vidpipe.sources.live import LiveSource
        except ModuleNotFoundError as exc:
            if exc.name not in ("vidpipe.sources.live",):
                raise
            what = "a live stream" if spec.kind == "live" else "a file played in real time (realtime=True)"
            raise UnsupportedError(
                f"{spec.name}: {what} needs the live reader vidpipe.sources.live, which this installation "
                "lacks; pass files or image folders, or install a vidpipe with live-stream support"
            ) from None
        return LiveSource(spec, config.live)
    if spec.kind == "images":
        from vidpipe.sources.images import ImageSource

        return ImageSource(spec)
    from vidpipe.sources.file import FileSource

    return FileSource(spec)
