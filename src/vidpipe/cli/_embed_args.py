"""The embedding flags of ``vidpipe detect``: ``--embeddings FILE.parquet`` and its options.

``--embeddings`` switches on the ``embed`` stage (crops of the detections on the device, an
embedding model on them: :class:`vidpipe.crops.EmbedStage`) and writes one row per embedded
detection to the Parquet file (:class:`vidpipe.crops.parquet.EmbeddingsParquet`). The stage
order is ``embed``, then the other stages (a tracker reads the embeddings), then the writer
(which sees the track ids), then one that drops the frames the command does not need:
:func:`with_embed_stages`.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["add_embed_args", "with_embed_stages"]


def _size(text: str) -> tuple[int, int]:
    parts = text.lower().replace("x", ",").split(",")
    try:
        h, w = (int(p) for p in parts) if len(parts) == 2 else (int(parts[0]),) * 2
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected HEIGHTxWIDTH in pixels, e.g. 256x128, got {text!r}") from None
    if not (1 <= h <= 4096 and 1 <= w <= 4096):
        raise argparse.ArgumentTypeError(f"expected sizes from 1 to 4096 pixels, got {text!r}")
    return h, w


def _fraction(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a fraction, e.g. 0.1, got {text!r}") from None
    if not -0.9 <= value <= 10:
        raise argparse.ArgumentTypeError(f"expected a fraction from -0.9 to 10, got {text}")
    return value


def add_embed_args(parser: argparse.ArgumentParser) -> None:
    """Add the embedding flags (``--embeddings`` off by default)."""
    g = parser.add_argument_group("crops and embeddings")
    g.add_argument("--embeddings", default=None, metavar="FILE.parquet",
                   help="embed each detection's crop and write the vectors to this Parquet file")
    g.add_argument("--embed-model", default=None, metavar="MODEL",
                   help="embedding model: .onnx, TorchScript .pt/.torchscript or torch.export .pt2, taking "
                        "(N, 3, H, W) RGB crops in [0, 1] (default: built-in mean colour on a 4x2 grid)")
    g.add_argument("--embed-size", type=_size, default=(256, 128), metavar="HxW",
                   help="crop size fed to the embedding model (default: 256x128)")
    g.add_argument("--embed-classes", default=None, metavar="NAMES",
                   help="comma-separated classes to embed, e.g. person (default: all)")
    g.add_argument("--embed-expand", type=_fraction, default=0.0, metavar="FRACTION",
                   help="grow each box by this fraction of its size before cropping (default: 0)")


def with_embed_stages(args: argparse.Namespace, stages: "Sequence[Any]" = ()) -> list[Any]:
    """``stages`` with the ``embed`` stage before them and the Parquet writer after them when
    ``--embeddings`` is given, else ``stages`` unchanged."""
    if not getattr(args, "embeddings", None):
        return list(stages)
    from pathlib import Path

    from vidpipe.crops.parquet import EmbeddingsParquet
    from vidpipe.crops.stage import EmbedStage
    from vidpipe.errors import ConfigError

    if Path(args.embeddings).suffix.lower() != ".parquet":
        raise ConfigError(f"--embeddings {args.embeddings}: expected a .parquet file")
    if args.embed_model is not None and not Path(args.embed_model).is_file():
        raise ConfigError(f"--embed-model {args.embed_model}: no such file")
    try:
        embed = EmbedStage(args.embed_model, size=args.embed_size, classes=args.embed_classes,
                           expand=args.embed_expand)  # fmt: skip
        embed.classes_option = "--embed-classes"
        writer = EmbeddingsParquet(args.embeddings)
    except ConfigError as exc:
        raise ConfigError(f"--embeddings: {exc}") from None
    return [embed, *stages, writer, _ReleaseFrames()]


class _ReleaseFrames:
    """The last stage of the command: the command writes tables, which need no pixels, and may
    hold results back for input order; dropping ``image`` frees each frame at once."""

    name = "release_frames"
    needs_frames = False

    def process(self, results):
        import dataclasses

        return [r if r.image is None else dataclasses.replace(r, image=None) for r in results]

    def reset(self, stream_id: int) -> None:
        pass

    def report(self) -> dict:
        return {}

    def close(self) -> None:
        pass
