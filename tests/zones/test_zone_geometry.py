"""Geometry: sides of a line, segment crossing, point in polygon and anchors, against hand-computed
cases, OpenCV's pointPolygonTest and supervision's anchors."""

from __future__ import annotations

import numpy as np
import pytest

from vidpipe.errors import ConfigError
from vidpipe.zones.geometry import ANCHORS, Line, Zone, anchor_points, line_array, line_sides, points_in_zones, segments_cross


def test_sides_follow_supervision_convention_left_of_a_to_b_is_in():
    # a line drawn left to right at y=100: above it (smaller y) is on its left as drawn -> in
    segs = line_array([Line("h", (0, 100), (200, 100)), Line("v", (50, 0), (50, 300))])
    pts = np.array([[10.0, 50.0], [10.0, 150.0], [100.0, 100.0], [60.0, 10.0]])
    s = line_sides(pts, segs)
    assert s[:, 0].tolist() == [1, -1, 0, 1]
    # a line drawn downwards at x=50: its left as drawn (y down) is x > 50
    assert s[:, 1].tolist() == [-1, -1, 1, 1]


def test_segment_crossing_only_on_the_segment_not_the_infinite_line():
    seg = np.array([[0.0, 100.0, 200.0, 100.0]])
    p = np.array([[100.0, 50.0], [250.0, 50.0], [200.0, 50.0], [0.0, 0.0]])
    q = np.array([[100.0, 150.0], [250.0, 150.0], [200.0, 150.0], [400.0, 200.0]])
    got = segments_cross(p, q, np.repeat(seg, 4, axis=0))
    # through the middle; beside the end; through the end point exactly; diagonal crossing at x=200
    assert got.tolist() == [True, False, True, True]
    p2, q2 = np.array([[0.0, 0.0]]), np.array([[500.0, 200.0]])  # crosses y=100 at x=250: beyond the end
    assert segments_cross(p2, q2, seg).tolist() == [False]


def test_points_in_polygon_hand_cases_convex_and_concave():
    square = Zone("sq", [(0, 0), (10, 0), (10, 10), (0, 10)])
    ell = Zone("ell", [(0, 0), (10, 0), (10, 4), (4, 4), (4, 10), (0, 10)])  # an L, concave
    pts = np.array([[5, 5], [11, 5], [-1, -1], [2, 8], [8, 8], [8, 2], [5.0, 9.99]])
    got = points_in_zones(pts.astype(float), [square, ell])
    assert got[:, 0].tolist() == [True, False, False, True, True, True, True]
    assert got[:, 1].tolist() == [False, False, False, True, False, True, False]


def test_points_in_polygon_match_opencv_on_random_polygons():
    cv2 = pytest.importorskip("cv2")
    rng = np.random.default_rng(3)
    for _ in range(20):
        k = int(rng.integers(3, 12))
        ang = np.sort(rng.uniform(0, 2 * np.pi, k))
        rad = rng.uniform(50, 200, k)  # star-shaped, often concave
        poly = np.stack([320 + rad * np.cos(ang), 240 + rad * np.sin(ang)], 1)
        zone = Zone("z", [tuple(p) for p in poly])
        pts = rng.uniform(0, 640, (2000, 2))
        ours = points_in_zones(pts, [zone])[:, 0]
        contour = poly.astype(np.float32).reshape(-1, 1, 2)
        dist = np.array([cv2.pointPolygonTest(contour, (float(x), float(y)), True) for x, y in pts])
        clear = np.abs(dist) > 1e-3  # on an edge either answer is right
        assert clear.sum() > 1900
        assert np.array_equal(ours[clear], dist[clear] > 0)


def test_anchors_match_supervision():
    sv = pytest.importorskip("supervision")
    rng = np.random.default_rng(0)
    xy = rng.uniform(0, 500, (50, 2))
    boxes = np.concatenate([xy, xy + rng.uniform(1, 100, (50, 2))], 1)
    dets = sv.Detections(xyxy=boxes)
    for name in ANCHORS:
        want = dets.get_anchors_coordinates(sv.Position[name.upper()])
        np.testing.assert_allclose(anchor_points(boxes, name), want, atol=1e-9, err_msg=name)


def test_bad_shapes_are_config_errors():
    with pytest.raises(ConfigError, match="same point"):
        Line("a", (1, 1), (1, 1))
    with pytest.raises(ConfigError, match="at least 3 points"):
        Zone("z", [(0, 0), (1, 1)])
    with pytest.raises(ConfigError, match="encloses no area"):
        Zone("z", [(0, 0), (1, 1), (2, 2)])
    with pytest.raises(ConfigError, match="dwell"):
        Zone("z", [(0, 0), (1, 0), (1, 1)], dwell=0)
    with pytest.raises(ConfigError, match="finite"):
        Line("a", (0, 0), (float("nan"), 1))
