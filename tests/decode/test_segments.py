"""Segment planning: frame numbering from the demux scan, kept frames, GOP skipping, packet ranges."""

from __future__ import annotations

from fractions import Fraction

import pytest

from vidpipe.decode.base import DecodeOptions
from vidpipe.decode.segments import StreamIndex, plan_decode, scan_stream


def _index(pts, keys, tb=Fraction(1, 25), start=0):
    return StreamIndex("synthetic", tb, start, tuple(pts), tuple(keys))


def _tile(plan):
    """Segments' positions tile [0, total) in order."""
    pos = 0
    for seg in plan.segments:
        assert seg.positions[0] == pos
        pos = seg.positions[1]
    assert pos == plan.total


def test_scan_lists_packets_and_keyframes(make_clip):
    clip = make_clip(".mp4", frames=40, gop=10, bframes=2)
    index = scan_stream(clip.path)
    assert index.packets == 40 and index.error is None
    assert len(index.keyframes) == 4
    # B-frames: decode order is not presentation order, but the timestamps are all there
    assert sorted(index.seconds(p) for p in index.pts) == pytest.approx(list(clip.pts), abs=1e-6)
    assert list(index.pts) != sorted(index.pts)


def test_every_frame_one_segment(make_clip):
    clip = make_clip(".mp4", frames=40, gop=10, bframes=2)
    plan = plan_decode(scan_stream(clip.path))
    assert plan.exact and plan.total == 40 and len(plan.segments) == 1
    seg = plan.segments[0]
    assert (seg.first_packet, seg.last_packet, seg.positions) == (0, 39, (0, 40))
    assert seg.lo_pts is None and seg.hi_pts is None
    # frame index = rank in presentation order
    assert [plan.index_of[p] for p in plan.frame_pts] == list(range(40))
    assert plan.wanted == tuple(range(40))


def test_segments_are_keyframe_aligned_and_balanced(make_clip):
    clip = make_clip(".mp4", frames=40, gop=10, bframes=2)
    index = scan_stream(clip.path)
    plan = plan_decode(index, target_frames=10)
    assert len(plan.segments) == 4
    _tile(plan)
    for seg in plan.segments:
        assert seg.first_packet in index.keyframes
        assert seg.count == 10
    # consecutive segments: each ends where the next one's keyframe starts (closed GOPs)
    for a, b in zip(plan.segments, plan.segments[1:]):
        assert a.last_packet == b.first_packet - 1
        assert a.hi_pts == b.lo_pts == b.key_pts
    assert plan.decoded_packets == 40
    # bigger target: whole GOPs, a short tail folded into the previous piece
    assert [s.count for s in plan_decode(index, target_frames=15).segments] == [20, 20]
    assert [s.count for s in plan_decode(index, target_frames=25).segments] == [40]


def test_large_stride_skips_whole_gops(make_clip):
    clip = make_clip(".mp4", frames=60, gop=10, bframes=0)
    index = scan_stream(clip.path)
    plan = plan_decode(index, DecodeOptions(frame_skip=25), target_frames=10)
    assert plan.wanted == (0, 25, 50)
    # GOPs 0, 2, 5 hold the kept frames; GOPs 1, 3, 4 are never decoded
    assert [s.first_packet for s in plan.segments] == [0, 20, 50]
    assert plan.decoded_packets == 30 < index.packets
    _tile(plan)
    # a stride shorter than the GOP still decodes everything (frames depend on each other)
    plan = plan_decode(index, DecodeOptions(frame_skip=3))
    assert plan.decoded_packets == 60 and plan.total == 20


def test_time_range_plans_only_needed_keyframes(make_clip):
    clip = make_clip(".mp4", frames=60, gop=10, fps=25)
    index = scan_stream(clip.path)
    plan = plan_decode(index, DecodeOptions(start=1.0, end=1.6))  # frames 25..39 of the file
    assert plan.wanted == tuple(range(15))  # numbered within the range
    assert [index.seconds(p) for p in sorted(plan.position_of, key=plan.position_of.get)][0] == 1.0
    assert plan.segments[0].first_packet == 20  # the keyframe before frame 25
    assert plan.decoded_packets == 20  # GOPs 2 and 3 only
    plan = plan_decode(index, DecodeOptions(max_frames=5, frame_skip=2))
    assert plan.wanted == (0, 2, 4, 6, 8) and plan.decoded_packets == 10


def test_start_after_the_end_plans_nothing(make_clip):
    clip = make_clip(".mp4", frames=20, gop=10, fps=25)
    plan = plan_decode(scan_stream(clip.path), DecodeOptions(start=100.0))
    assert plan.total == 0 and plan.segments == ()


def test_open_gop_leading_pictures_extend_the_previous_segment():
    # decode order: I0 P3 B1 B2 P6 B4 B5 | I9(key) B7 B8 P12 B10 B11
    # frames 7, 8 are shown before keyframe 9 but decoded after it: they belong to GOP 0
    pts = [0, 3, 1, 2, 6, 4, 5, 9, 7, 8, 12, 10, 11]
    index = _index(pts, keys=[0, 7])
    plan = plan_decode(index, target_frames=1)
    a, b = plan.segments
    assert (a.first_packet, a.last_packet) == (0, 9)  # through B8, feeding I9 as a reference
    assert (b.first_packet, b.last_packet) == (7, 12)
    assert a.positions == (0, 9) and b.positions == (9, 13)
    assert a.owns(8) and not a.owns(9) and b.owns(9)


def test_missing_or_repeated_timestamps_give_an_inexact_plan():
    plan = plan_decode(_index([0, None, 2], keys=[0]))
    assert not plan.exact and plan.total is None and len(plan.segments) == 1
    plan = plan_decode(_index([0, 1, 1, 2], keys=[0]))
    assert not plan.exact
    plan = plan_decode(_index([], keys=[]))
    assert plan.exact and plan.total == 0


def test_variable_frame_rate_numbers_by_rank(make_clip):
    # index = rank of the timestamp within the range, whatever the spacing
    pts = [0, 1, 5, 6, 20, 21]
    plan = plan_decode(_index(pts, keys=[0, 4], tb=Fraction(1, 10)))
    assert plan.wanted == (0, 1, 2, 3, 4, 5)
    plan = plan_decode(_index(pts, keys=[0, 4], tb=Fraction(1, 10)), DecodeOptions(start=0.5, frame_skip=2))
    assert plan.wanted == (0, 2)
    assert [plan.index_of[p] for p in pts] == [-2, -1, 0, 1, 2, 3]


@pytest.mark.parametrize("suffix,codec,ranges", [(".mp4", "h264", True), (".mov", "h264", True),
                                                  (".mkv", "hevc", True), (".webm", "vp9", True),
                                                  (".ts", "h264", False), (".avi", "mpeg4", False)])  # fmt: skip
def test_scan_records_verified_byte_ranges(make_clip, suffix, codec, ranges):
    import os

    from vidpipe.decode.demux import Demuxer
    from vidpipe.decode.fileread import block_header_size

    clip = make_clip(suffix, codec=codec, frames=30, gop=10)
    index = scan_stream(clip.path)
    assert index.codec == codec and index.packets == 30
    assert index.byte_ranges == ranges  # MP4/MOV and Matroska only; TS splits packets
    if not index.byte_ranges:
        assert index.pos == () and index.size == ()
        return
    with Demuxer(clip.path) as dmx, open(clip.path, "rb") as f:
        for n, pkt in enumerate(dmx.raw_packets()):  # every packet, not just the sampled ones
            f.seek(index.pos[n])
            head = f.read(16)
            skip = block_header_size(head) if index.block_headers else 0
            f.seek(index.pos[n] + skip)
            assert f.read(index.size[n]) == bytes(pkt)
    assert index.block_headers == (suffix in (".mkv", ".webm")) and os.path.getsize(clip.path) > max(index.pos)


def test_discarded_packets_are_fed_but_not_frames():
    """An MP4 edit list that starts mid-GOP: the packets before its start are flagged discarded
    (FFmpeg decodes them as references and drops their frames). They are not numbered or
    delivered, but the segment that needs them still feeds them."""
    # decode order: I(-4) P(-1) B(-3) B(-2) P(2) B(0) B(1) | I(3) P(6) B(4) B(5)
    pts = [-4, -1, -3, -2, 2, 0, 1, 3, 6, 4, 5]
    index = StreamIndex("synthetic", Fraction(1, 25), 0, tuple(pts), (0, 7), discarded=frozenset({0, 1, 2, 3}))
    plan = plan_decode(index, target_frames=1)
    assert plan.exact and plan.total == 7 and plan.wanted == tuple(range(7))
    assert plan.frame_pts == (0, 1, 2, 3, 4, 5, 6)
    a, b = plan.segments
    assert a.first_packet == 0 and a.positions == (0, 3)  # fed from the discarded keyframe
    assert b.first_packet == 7 and b.positions == (3, 7)
