"""``vidpipe serve``'s YAML config: valid files load into the dataclasses; every bad file gives a
ConfigError naming the file, the LINE and the key; ``${NAME}`` comes from the environment and
never shows in messages or reprs."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from vidpipe.errors import ConfigError
from vidpipe.serve import CameraConfig, OutputConfig, ServeConfig, load_config, parse_config
from vidpipe.sources.options import LiveOptions

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "serve.yaml"


def write(tmp_path: Path, text: str, name: str = "serve.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return path


def error_of(tmp_path: Path, text: str, env: dict | None = None) -> str:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        load_config(path, env=env or {})
    assert isinstance(info.value, ValueError)
    return str(info.value)


def test_full_config_loads(tmp_path: Path) -> None:
    path = write(tmp_path, """
        model: yolov3-tiny
        device: cpu
        batch_size: 8
        conf: 0.3
        classes: [person, car]
        live:
          rtsp_transport: udp
          stall_timeout: 20
          realtime: true
          batch_timeout: 0.05
        output: {path: out/, format: jsonl, rotate: hourly}
        metrics: {port: 9100}
        cameras:
          - name: front
            url: rtsp://admin:${CAM_PASSWORD}@10.0.0.5/stream
            conf: 0.5
            classes: person
          - name: back
            url: rtsp://10.0.0.6/stream
            output: back.parquet
          - name: spare
            url: rtsp://10.0.0.7/stream
            enabled: false
    """)
    c = load_config(path, env={"CAM_PASSWORD": "s3cr3t"})
    assert c.device == "cpu" and c.batch_size == 8 and c.conf == 0.3 and c.classes == ("person", "car")
    assert c.live == LiveOptions(rtsp_transport="udp", stall_timeout=20, realtime=True, batch_timeout=0.05)
    assert c.output == OutputConfig(str(tmp_path / "out") + "/", "jsonl", "hourly")  # relative to the file
    assert c.output.folder and c.output.table_for("front") == (tmp_path / "out" / "front.detections.jsonl", "jsonl")
    assert c.metrics.port == 9100 and c.metrics.host == "127.0.0.1"
    front, back, spare = c.cameras
    assert front.url == "rtsp://admin:s3cr3t@10.0.0.5/stream"  # expanded for the reader...
    assert "s3cr3t" not in repr(front) and "s3cr3t" not in repr(c)  # ...never shown
    assert front.source_name == "rtsp://***@10.0.0.5/stream"
    assert front.classes == ("person",) and front.conf == 0.5
    assert c.output_of(back) == OutputConfig(str(tmp_path / "back.parquet"))
    assert not c.output_of(back).folder
    assert spare.enabled is False and c.camera("spare") is spare


def test_defaults_and_example_file(tmp_path: Path) -> None:
    c = load_config(write(tmp_path, "cameras:\n  - {name: a, url: rtsp://h/s}\n"), env={})
    assert c.model == "yolov3-tiny" and c.live == LiveOptions() and c.metrics.port is None
    assert c.output.table_for("a") == (tmp_path / "detections" / "a.detections.csv", "csv")
    example = load_config(EXAMPLE, env={"CAM_PASSWORD": "pw"})  # the documented example stays valid
    assert [cam.name for cam in example.cameras] == ["entrance", "yard", "street", "desk"]


def test_env_expansion_forms(tmp_path: Path) -> None:
    c = load_config(write(tmp_path, """
        model: ${MODEL:-yolov3-tiny}
        cameras:
          - name: a
            url: rtsp://${USER_}:${PW}@h/s?x=$$1
          - name: b
            url: ${EMPTY:-rtsp://fallback/s}
    """), env={"USER_": "bob", "PW": "p@ss", "EMPTY": ""})
    assert c.model == "yolov3-tiny"
    assert c.cameras[0].url == "rtsp://bob:p@ss@h/s?x=$1"
    assert c.cameras[1].url == "rtsp://fallback/s"


@pytest.mark.parametrize(
    ("text", "line", "key", "words"),
    [
        ("conf: high\ncameras:\n  - {name: a, url: x}\n", 1, "conf", "expected a number from 0 to 1, got 'high'"),
        ("cameras:\n  - name: a\n    url: x\n    confidance: 0.3\n", 4, "cameras[0].confidance",
         "unknown key 'confidance'; did you mean 'conf'?"),
        ("cameras:\n  - name: a\n    url: x\n  - name: a\n    url: y\n", 4, "cameras[1].name", "taken by cameras[0]"),
        ("live:\n  stall_timout: 3\ncameras:\n  - {name: a, url: x}\n", 2, "live.stall_timout",
         "did you mean 'stall_timeout'?"),
        ("live:\n  rtsp_transport: http\ncameras:\n  - {name: a, url: x}\n", 2, "live.rtsp_transport",
         "expected one of tcp, udp"),
        ("live:\n  decode_latency: fast\ncameras:\n  - {name: a, url: x}\n", 2, "live.decode_latency",
         "expected one of auto, native, low, zero"),
        ("live:\n  processes: -1\ncameras:\n  - {name: a, url: x}\n", 2, "live.processes", "from 0 to 64"),
        ("batch_size: 0\ncameras:\n  - {name: a, url: x}\n", 1, "batch_size", "from 1 to 4096"),
        ("cameras:\n  - {name: a, url: x}\nmetrics:\n  port: 99999\n", 4, "metrics.port", "from 0 to 65535"),
        ("conf: 0.5\ncameras:\n  - name: a\n    url: x\n    conf: 0.2\n", 5, "cameras[0].conf",
         "below the top-level conf"),
        ("classes: [person]\ncameras:\n  - name: a\n    url: x\n    classes: [car]\n", 5, "cameras[0].classes",
         "not among the top-level classes"),
        ("cameras:\n  - name: a b\n    url: x\n", 2, "cameras[0].name", "letters, digits"),
        ("cameras:\n  - name: a\n", 2, "cameras[0]", "camera without 'url:'"),
        ("cameras: []\n", 1, "cameras", "an empty list"),
        ("model: tiny\n", 1, "", "no 'cameras:' list"),
        ("cameras:\n  - {name: a, url: x}\noutput: dets.txt\n", 3, "output.path", "cannot tell the output format"),
        ("cameras:\n  - {name: a, url: x}\nlive:\n  reconnect_min: 20\n", 4, "live", "reconnect_max"),
        ("device: gpu\ncameras:\n  - {name: a, url: x}\n", 1, "device", "expected auto, cpu, cuda or cuda:N"),
        ("decoder: fancy\ncameras:\n  - {name: a, url: x}\n", 1, "decoder", "'fancy'"),
        ("conf: 0.5\nconf: 0.6\ncameras:\n  - {name: a, url: x}\n", 2, "conf", "given twice (first on line 1)"),
        ("cameras:\n  - {name: a, url: x}\n  - [1, 2\n", 4, "", "not valid YAML"),
        ("cameras:\n  - name: a\n    url: rtsp://u:${CAM_PW}@h/s\n", 3, "cameras[0].url",
         "environment variable CAM_PW is not set"),
        ("cameras:\n  - {name: a, url: x, enabled: yes please}\n", 2, "cameras[0].enabled", "true or false"),
        ("cameras:\n  - {name: a, url: x}\noutput:\n  path: out/\n  rotate: daily\n", 5, "output.rotate",
         "expected one of none, hourly"),
        ("cameras:\n  - {name: a, url: x}\nagnostic: !!python/object:os.system ls\n", 3, "agnostic",
         "cannot read this value"),
    ],
)
def test_errors_name_file_line_and_key(tmp_path: Path, text: str, line: int, key: str, words: str) -> None:
    message = error_of(tmp_path, text)
    head = f"{tmp_path / 'serve.yaml'}:{line}: " + (f"{key}: " if key else "")
    assert message.startswith(head), message
    assert words in message, message


def test_secret_values_never_in_errors(tmp_path: Path) -> None:
    message = error_of(tmp_path, "cameras:\n  - name: a\n    url: rtsp://u:${PW}@h/s\n    conf: ${PW}\n",
                       env={"PW": "hunter2"})  # fmt: skip
    assert ":4: cameras[0].conf" in message and "hunter2" not in message
    assert "expected a number" in message


def test_missing_and_unreadable_files(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no such config file"):
        load_config(tmp_path / "nope.yaml")
    with pytest.raises(ConfigError, match="is a folder"):
        load_config(tmp_path)
    with pytest.raises(ConfigError, match="the file is empty"):
        load_config(write(tmp_path, "# nothing\n"))


def test_python_api_errors_speak_python_names() -> None:
    with pytest.raises(ConfigError, match=r"invalid batch_size=0: expected a whole number from 1 to 4096"):
        ServeConfig(batch_size=0)
    with pytest.raises(ConfigError, match=r"invalid camera 'a' conf=2: expected a number from 0 to 1"):
        CameraConfig("a", "rtsp://h/s", conf=2)
    with pytest.raises(ConfigError, match="the name 'a' is taken"):
        ServeConfig(cameras=(CameraConfig("a", "x"), CameraConfig("a", "y")))
    with pytest.raises(ConfigError, match="below the top-level conf"):
        ServeConfig(conf=0.5, cameras=(CameraConfig("a", "x", conf=0.3),))
    assert "pw" not in repr(CameraConfig("a", "rtsp://u:pw@h/s"))
    cfg = parse_config("cameras:\n  - {name: a, url: x}\n", file="inline.yaml", env={})
    with pytest.raises(ConfigError, match=r"^inline.yaml:1: model: "):
        with cfg.located(("model",)):
            raise ConfigError("no such model")


def test_import_is_light_and_vidpipe_serve_is_callable_either_way() -> None:
    """``import vidpipe`` loads neither PyYAML nor prometheus_client; ``vidpipe.serve`` is the
    function even when the ``vidpipe.serve`` package was imported first (Python then sets the
    package as the attribute)."""
    import subprocess
    import sys

    src = str(Path(__file__).resolve().parents[2] / "src")
    code = (
        "import sys, vidpipe\n"
        "assert 'yaml' not in sys.modules and 'prometheus_client' not in sys.modules, 'heavy import'\n"
        "import vidpipe.serve.config\n"
        "from vidpipe.serve import Server\n"
        "assert callable(vidpipe.serve), type(vidpipe.serve)\n"
        "s = vidpipe.serve(vidpipe.serve.ServeConfig(cameras=()), start=False)\n"
        "assert isinstance(s, Server)\n"
        "print('ok')\n"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                       env={**__import__("os").environ, "PYTHONPATH": src}, check=False)  # fmt: skip
    assert p.returncode == 0 and p.stdout.strip() == "ok", p.stderr[-2000:]


def test_a_camera_blur_is_checked_against_the_model_with_its_line(tmp_path):
    from vidpipe.errors import ConfigError
    from vidpipe.serve import load_config
    from vidpipe.serve.annotate import CameraRender

    path = write(tmp_path, "cameras:\n  - name: a\n    url: rtsp://h/s\n    blur: [person, car]\n")
    cfg = load_config(path)
    cam = cfg.camera("a")
    assert cam.blur == ("person", "car")
    render = CameraRender(lambda sid: cam)
    assert render._annotator(0).blur == ("person", "car")
    bad = write(tmp_path, "cameras:\n  - name: a\n    url: rtsp://h/s\n    blur: 7\n", name="bad.yaml")
    with pytest.raises(ConfigError, match=r"bad.yaml:4: .*blur"):
        load_config(bad)
