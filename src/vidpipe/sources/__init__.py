"""What is read: classification of user inputs into files, live streams and image folders."""

from vidpipe.sources.spec import IMAGE_EXTENSIONS, LIVE_SCHEMES, VIDEO_EXTENSIONS, SourceSpec, classify_inputs

__all__ = ["SourceSpec", "classify_inputs", "IMAGE_EXTENSIONS", "VIDEO_EXTENSIONS", "LIVE_SCHEMES"]
