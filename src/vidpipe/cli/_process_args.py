"""Command-line values of decoder-process counts (``--decoder-processes``, ``--live-processes``)."""

from __future__ import annotations

import argparse

__all__ = ["process_count", "process_count_or_auto"]


def process_count(text: str, *, auto: bool = False) -> int:
    """``0`` (threads) to :data:`~vidpipe.decode.base.MAX_DECODER_PROCESSES` decoder processes
    (``auto``: the message of a bad value names ``auto`` too)."""
    from vidpipe.decode.base import MAX_DECODER_PROCESSES

    try:
        value = int(text)
    except ValueError:
        value = -1
    if not 0 <= value <= MAX_DECODER_PROCESSES:
        raise argparse.ArgumentTypeError(
            f"expected {'auto or ' if auto else ''}0 (threads) to {MAX_DECODER_PROCESSES} decoder processes, "
            f"got {text!r}"
        )
    return value


def process_count_or_auto(text: str) -> int | None:
    """:func:`process_count`, or ``None`` for ``auto`` (the library decides)."""
    return None if text.strip() == "auto" else process_count(text, auto=True)
