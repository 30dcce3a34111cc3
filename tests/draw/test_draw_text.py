"""Labels as text: the glyph atlas blit against Pillow's own rendering of the whole string (its
layout engine places the glyphs, not ours), and the label codes built on the device."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from PIL import Image, ImageDraw

from vidpipe.draw.labels import label_codes, name_table
from vidpipe.draw.text import FIRST, _font, build_atlas, encode, render_codes

NAMES = ("person", "bicycle", "traffic light")


def _decode(row) -> str:
    return "".join(chr(c - 1 + FIRST) for c in row if c)


@pytest.mark.parametrize("size", [10, 18, 27])
@pytest.mark.parametrize("text", ["person 0.87 #12", "traffic light 1.00 #4096", "Wj@|_,qy!"])
def test_atlas_blit_matches_pillow_string_rendering(size, text):
    atlas = build_atlas(size)
    alpha, width = render_codes(atlas, torch.tensor([encode(text)]), x0=atlas.pad)
    font = _font(size)
    ref = Image.new("L", (alpha.shape[2], alpha.shape[1]), 0)
    ImageDraw.Draw(ref).text((atlas.pad, 0), text, fill=255, font=font)
    ref, ours = np.asarray(ref).astype(int), alpha[0].numpy().astype(int)
    assert abs(int(width) - font.getlength(text)) <= 1
    # the same glyphs at the same places: coverage within a small tolerance
    assert np.abs(ref - ours).mean() < 2.0
    ink_r, ink_o = ref > 127, ours > 127
    assert ink_o.sum() > 0
    assert (ink_r & ink_o).sum() / (ink_r | ink_o).sum() >= 0.9


def test_label_codes_spell_the_labels():
    table = name_table(NAMES, torch.device("cpu"))
    cls = torch.tensor([0, 2, 1, 7])
    scores = torch.tensor([0.87, 0.996, 0.004, 0.5])
    tracks = torch.tensor([12, 4096, -1, 0])
    codes = label_codes(cls, scores, tracks, table, show_names=True, show_scores=True, show_tracks=True)
    assert [_decode(r) for r in codes.tolist()] == [
        "person 0.87 #12", "traffic light 1.00 #4096", "bicycle 0.00", "7 0.50 #0",
    ]  # fmt: skip
    only = label_codes(cls, scores, tracks, table, show_names=False, show_scores=True, show_tracks=False)
    assert [_decode(r) for r in only.tolist()] == ["0.87", "1.00", "0.00", "0.50"]
    untracked = label_codes(cls, scores, None, table, show_names=True, show_scores=False, show_tracks=True)
    assert [_decode(r) for r in untracked.tolist()] == ["person", "traffic light", "bicycle", "7"]
    none = label_codes(cls, scores, tracks, table, show_names=False, show_scores=False, show_tracks=False)
    assert none.shape == (4, 0)


def test_non_ascii_names_are_drawn_as_question_marks():
    assert _decode(encode("café")) == "caf?"
