"""``lines:`` / ``zones:`` / ``anchor:`` per camera in ``vidpipe serve``'s YAML: loaded into Line and
Zone objects, every bad value a ConfigError naming the file, the line and the key; the serve
zones stage gives each camera's stream its own lines."""

from __future__ import annotations

import textwrap

import pytest

from vidpipe.errors import ConfigError
from vidpipe.serve import CameraConfig, ServeConfig, parse_config
from vidpipe.serve.zones import needs_tracking, serve_zone_stages
from vidpipe.stages import StageRunner
from vidpipe.zones import Line, Zone
from zone_scene import events, frame


def _parse(text: str) -> ServeConfig:
    return parse_config(textwrap.dedent(text).lstrip("\n"), file="serve.yaml")


GOOD = """
    cameras:
      - name: front
        url: rtsp://cam1/stream
        anchor: center
        lines:
          door: [100, 200, 500, 200]
          gate: {points: [[0, 300], [200, 300]], classes: [person]}
        zones:
          bay: {points: [100, 100, 300, 100, 300, 300, 100, 300], dwell: 30}
      - name: back
        url: rtsp://cam2/stream
"""


def test_lines_and_zones_load_per_camera():
    config = _parse(GOOD)
    front, back = config.cameras
    assert front.lines == (Line("door", (100, 200), (500, 200)), Line("gate", (0, 300), (200, 300), classes=("person",)))
    assert front.zones == (Zone("bay", ((100, 100), (300, 100), (300, 300), (100, 300)), dwell=30.0),)
    assert front.anchor == "center" and back.lines == () and back.zones == ()
    assert needs_tracking(config)
    assert not needs_tracking(_parse("cameras: [{name: a, url: rtsp://x/y}]"))


@pytest.mark.parametrize(
    "snippet, where, words",
    [
        ("lines: [1, 2, 3, 4]", "serve.yaml:4: cameras[0].lines", "expected a mapping of names to points"),
        ("lines:\n      door: [1, 2, 3]", "serve.yaml:5: cameras[0].lines.door", "a line is x1,y1,x2,y2 (4 numbers), got 3"),
        ("zones:\n      bay: [0, 0, 1, 1]", "serve.yaml:5: cameras[0].zones.bay", "a zone is x1,y1,x2,y2,x3,y3"),
        ("zones:\n      bay: {points: [0, 0, 4, 0, 4, 4], dwel: 3}", "serve.yaml:5: cameras[0].zones.bay",
         "unknown key 'dwel'"),
        ("zones:\n      bay: {points: [0, 0, 4, 0, 4, 4], dwell: -3}", "serve.yaml:5: cameras[0].zones.bay",
         "dwell must be a number of seconds > 0"),
        ("lines:\n      door: [a, 2, 3, 4]", "serve.yaml:5: cameras[0].lines.door", "expected a list of numbers"),
        ("anchor: feet", "serve.yaml:4: cameras[0].anchor", "expected one of bottom_center, center"),
        ("lnes: {}", "serve.yaml:4: cameras[0]", "did you mean 'lines'?"),
    ],
)
def test_bad_values_name_the_file_line_and_key(snippet, where, words):
    text = "cameras:\n  - name: front\n    url: rtsp://cam1/stream\n    " + snippet.replace("\n      ", "\n      ")
    with pytest.raises(ConfigError) as info:
        parse_config(text + "\n", file="serve.yaml")
    msg = str(info.value)
    assert msg.startswith(where) and words in msg, msg


def test_python_camera_config_takes_objects_texts_or_a_mapping():
    a = CameraConfig("a", "rtsp://x/y", lines=["door=1,2,3,4"], zones={"bay": [0, 0, 4, 0, 4, 4]})
    assert a.lines == (Line("door", (1, 2), (3, 4)),) and a.zones[0].name == "bay"
    with pytest.raises(ConfigError, match="camera 'a' lines 'door=1,2'"):
        CameraConfig("a", "rtsp://x/y", lines=["door=1,2"])
    with pytest.raises(ConfigError, match="the name 'door' is used twice"):
        CameraConfig("a", "rtsp://x/y", lines=["door=1,2,3,4", "door=5,6,7,8"])


def test_serve_stage_gives_each_camera_its_own_lines_and_passes_others_through():
    config = _parse(GOOD)
    names = {0: "front", 1: "back"}
    (stage,) = serve_zone_stages(config, lambda sid: config.camera(names.get(sid, "")))
    runner = StageRunner([stage])
    batch = []
    for i in range(20):
        batch.append(frame(i, [(1, 0, 300, 160 + 10 * i - 20)], stream_id=0))  # centre anchor: 20 px up
        batch.append(frame(i, [(1, 0, 300, 160 + 10 * i)], stream_id=1, tracked=False))  # no lines: untouched
    out = runner(batch)
    got = [(e.stream_id, e.frame, e.kind, e.name, e.direction) for e in events(out)]
    # the camera's centre anchor (20 px above the bottom) is on the line at frame 8: confirmed at 11
    # (hysteresis 3); the bottom centre would have crossed at 6
    assert (0, 11, "cross", "door", "out") in got
    assert all(sid == 0 for sid, *_ in got)
    assert set(stage.report()["lines"]) == {"door", "gate"}
    assert serve_zone_stages(_parse("cameras: [{name: a, url: rtsp://x/y}]"), lambda sid: None) == []
