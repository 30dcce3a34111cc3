"""``events:`` in the serve config (line-numbered errors, ${ENV} secrets never shown) and its
wiring: the serve outputs write every event of a real run (a real event stage on real
detections), the webhook gets them, the Server writes the table and counts in its summary."""

from __future__ import annotations

import csv
import json
import textwrap
import time
from pathlib import Path

import pytest

import vidpipe
from events.event_helpers import ClassAppears
from events.http_receiver import Receiver
from serve.serve_fixtures import clips  # noqa: F401 - the clips fixture (tests/serve)
from vidpipe.errors import ConfigError
from vidpipe.serve import load_config
from vidpipe.serve.config import EventsConfig, WebhookConfig
from vidpipe.sinks import metadata_path


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "serve.yaml"
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return path


def test_events_block_loads_with_env_secrets(tmp_path):
    path = write(tmp_path, """
        cameras:
          - {name: door, url: rtsp://cam/door}
        output: out/dets.csv
        events:
          table: ev/events.jsonl
          webhooks:
            - https://hook:${HOOK_PW}@hooks.example.com/v1
            - url: http://127.0.0.1:9/x
              headers: {Authorization: "Bearer ${TOKEN}"}
          mqtt: mqtt://vid:${MQTT_PW}@broker:1884/shop
    """)
    cfg = load_config(path, env={"HOOK_PW": "hp1", "TOKEN": "tk2", "MQTT_PW": "mp3"})
    ev = cfg.events
    assert ev.table == str(tmp_path / "ev/events.jsonl")
    assert ev.webhooks[0].url == "https://hook:hp1@hooks.example.com/v1"
    assert ev.webhooks[1].headers == {"Authorization": "Bearer tk2"}
    assert ev.mqtt == "mqtt://vid:mp3@broker:1884/shop"
    shown = repr(cfg) + repr(ev)
    assert "hp1" not in shown and "tk2" not in shown and "mp3" not in shown
    assert load_config(write(tmp_path, "cameras: [{name: a, url: x.mp4}]\n")).events == EventsConfig()


@pytest.mark.parametrize("block, line, words", [
    ("events:\n  tabel: x.csv\n", 4, "unknown key 'tabel'; did you mean 'table'"),
    ("events:\n  webhooks:\n    - ftp://u:${PW}@h/x\n", 5, "webhook URL 'ftp://***@h/x'"),
    ("events:\n  mqtt: mqtt://u:${PW}@h/a/#\n", 4, "MQTT URL"),
    ("events:\n  table: events.txt\n", 4, "extension"),
    ("events:\n  webhooks:\n    - url: http://h/x\n      headers: {X-N: 5}\n", 6, "header names to texts"),
])
def test_events_errors_name_file_line_and_key(tmp_path, block, line, words):
    path = write(tmp_path, "cameras:\n  - {name: a, url: x.mp4}\n" + block)
    with pytest.raises(ConfigError) as info:
        load_config(path, env={"PW": "sekrit9"})
    msg = str(info.value)
    assert f"serve.yaml:{line}" in msg and words in msg and "sekrit9" not in msg


def test_python_api_errors():
    with pytest.raises(ConfigError, match="events.format"):
        EventsConfig(format="xml")
    with pytest.raises(ConfigError) as info:
        WebhookConfig("gopher://u:pw4@h/")
    assert "pw4" not in str(info.value)


def test_serve_outputs_write_every_event_of_a_real_run(clips, tmp_path):
    from vidpipe.serve.config import CameraConfig, OutputConfig, ServeConfig
    from vidpipe.serve.outputs import CameraOutputs

    hook = Receiver().start()
    try:
        config = ServeConfig(
            cameras=(CameraConfig("front", str(clips["short"]), classes=("car",), conf=0.5),),
            output=OutputConfig(str(tmp_path / "tables") + "/"), imgsz=160,
            events=EventsConfig(webhooks=(hook.url(),)),
        )
        run = vidpipe.detect(str(clips["short"]), device="cpu", imgsz=160, batch_size=8, results_on_host=True,
                             stages=[ClassAppears("person")])
        outputs = CameraOutputs(config, run.detector.names, live_of=lambda cam: False)
        outputs.route(0, outputs.prepare(config.cameras[0]))
        outputs.attach_events(run, live_of=lambda sid: False)
        emitted = []
        for batch in run.batches():
            emitted += [e for r in batch for e in r.events]
            outputs.write(batch)
        summary = outputs.with_events(run.summary(outputs=outputs.outputs))
        outputs.close(summary)
        hook.wait_events(len(emitted))
    finally:
        hook.close()
    # a person comes and goes; the camera's classes (car) narrow its rows, not the events
    assert [(e.kind, e.frame) for e in emitted] == [("enter", 5), ("leave", 19)]
    table = tmp_path / "tables" / "events.csv"  # default: in the folder output
    rows = list(csv.DictReader(table.open(newline="")))
    assert [(r["kind"], int(r["frame"])) for r in rows] == [(e.kind, e.frame) for e in emitted]
    assert [(e["kind"], e["frame"]) for e in hook.events] == [(e.kind, e.frame) for e in emitted]
    assert summary.stats["events"]["webhooks"][0]["posted"] == len(emitted)
    assert json.loads(metadata_path(table).read_text())["status"] == "complete"


def test_server_with_an_events_block(clips, tmp_path):
    from vidpipe.serve.config import CameraConfig, OutputConfig, ServeConfig

    hook = Receiver().start()
    try:
        config = ServeConfig(
            cameras=(CameraConfig("front", str(clips["short"])),), output=OutputConfig(str(tmp_path / "d.csv")),
            imgsz=160, device="cpu",
            events=EventsConfig(table=str(tmp_path / "ev.jsonl"), webhooks=(hook.url(auth="a:pw6"),)),
        )
        with vidpipe.serve(config) as server:
            assert (tmp_path / "ev.jsonl").exists()  # an explicit table exists from the start
            deadline = time.monotonic() + 120
            while not server.idle and time.monotonic() < deadline:
                server.wait(0.1)
        summary = server.summary
    finally:
        hook.close()
    assert str(tmp_path / "ev.jsonl") in summary.outputs
    stats = summary.stats["events"]
    assert stats["tables"][0]["written"] == 0 and stats["webhooks"][0]["target"].startswith("http://***@")
    meta = json.loads(metadata_path(tmp_path / "ev.jsonl").read_text())
    assert meta["status"] == "complete" and meta["frames"] == 24
    assert "pw6" not in json.dumps(meta) + summary.format_text()
