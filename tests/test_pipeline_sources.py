"""Sources behind the :class:`~vidpipe.sources.base.Source` protocol: which class reads which
spec (:func:`make_source`), live inputs without a live reader, registered decoders accepted by
the pipeline's config."""

from __future__ import annotations

import sys

import pytest
from paced_source import PacedFileSource

import vidpipe
from vidpipe.decode import registry
from vidpipe.errors import ConfigError, UnsupportedError
from vidpipe.pipeline import PipelineConfig
from vidpipe.sources.base import Source
from vidpipe.sources.factory import is_live_spec, make_source
from vidpipe.sources.file import FileSource
from vidpipe.sources.images import ImageSource
from vidpipe.sources.options import LiveOptions
from vidpipe.sources.spec import SourceSpec


@pytest.fixture
def no_live_reader(monkeypatch):
    """This installation without vidpipe.sources.live (an import of it fails as if absent)."""
    monkeypatch.setitem(sys.modules, "vidpipe.sources.live", None)


def test_finite_specs_get_file_and_image_sources():
    f = make_source(SourceSpec("file", "a.mp4"), PipelineConfig())
    i = make_source(SourceSpec("images", "photos/"), PipelineConfig())
    assert isinstance(f, FileSource) and not f.live and isinstance(f, Source)
    assert isinstance(i, ImageSource) and not i.live and isinstance(i, Source)
    assert isinstance(PacedFileSource("x.mp4"), Source)


def test_live_specs_and_realtime_files_are_live():
    cam, clip = SourceSpec("live", "rtsp://u:p@cam/1"), SourceSpec("file", "a.mp4")
    assert is_live_spec(cam, PipelineConfig()) and not is_live_spec(clip, PipelineConfig())
    assert is_live_spec(clip, PipelineConfig(live=LiveOptions(realtime=True)))
    assert not is_live_spec(SourceSpec("images", "d/"), PipelineConfig(live=LiveOptions(realtime=True)))


def test_without_a_live_reader_live_inputs_fail_clearly(no_live_reader, make_clip):
    with pytest.raises(UnsupportedError, match=r"rtsp://\*\*\*@cam/1: a live stream needs the live reader"):
        make_source(SourceSpec("live", "rtsp://u:p@cam/1"), PipelineConfig())
    with pytest.raises(UnsupportedError, match="realtime=True"):
        make_source(SourceSpec("file", "a.mp4"), PipelineConfig(live=LiveOptions(realtime=True)))
    clip = make_clip(width=160, height=96, frames=8, fps=10, gop=4)
    run = vidpipe.detect(["rtsp://u:secret@cam.invalid/1", str(clip.path)], device="cpu", batch_size=4)
    assert len(list(run)) == 8
    cam, f = run.summary().sources
    assert (cam.status, cam.kind, f.status) == ("failed", "live", "ok")
    assert "live reader" in cam.error and "secret" not in cam.error and cam.source == "rtsp://***@cam.invalid/1"


def test_registered_decoder_is_accepted_by_the_pipeline(make_clip, monkeypatch):
    """A backend added with register_backend() is a valid PipelineConfig.decoder and runs."""
    from vidpipe.decode.pyav import PyAVDecoder

    monkeypatch.setattr(registry, "_registered", dict(registry._registered))
    with pytest.raises(ConfigError, match="decoder"):
        PipelineConfig(decoder="my-pyav")
    registry.register_backend(
        "my-pyav", lambda info, *, device, options: PyAVDecoder(info, device=device, options=options),
        lambda info, device: None, gpu=False,
    )
    assert PipelineConfig(decoder="my-pyav").decoder == "my-pyav"
    clip = make_clip(width=160, height=96, frames=9, fps=10, gop=3)
    run = vidpipe.detect(clip.path, device="cpu", decoder="my-pyav", batch_size=4)
    assert [r.index for r in run] == list(range(9))
    assert run.summary().sources[0].decoder == "my-pyav"
