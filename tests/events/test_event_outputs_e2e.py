"""End to end: real detections of bikes.mp4 through a real event-emitting stage, to the events
table beside the detections and a webhook on loopback, as ``vidpipe detect`` wires them; the
events are checked against the detections table itself (an independent record of the same run);
counters in the summary and the metadata; the CLI flags."""

from __future__ import annotations

import argparse
import csv
import json
import subprocess
import sys

import pytest

import vidpipe
from events.event_helpers import ClassAppears
from events.http_receiver import Receiver
from vidpipe.sinks import metadata_path

FRAMES = 40


def _classes_per_frame(table):
    per: dict[int, set[str]] = {}
    for row in csv.DictReader(table.open(newline="")):
        per.setdefault(int(row["frame"]), set()).add(row["class_name"])
    return per


def test_detect_writes_events_beside_the_table_and_posts_them(bikes_path, tmp_path):
    from vidpipe.cli._event_args import detect_events
    from vidpipe.sinks.outputs import Outputs, OutputSpec

    hook = Receiver().start()
    try:
        stage = ClassAppears("car")
        run = vidpipe.detect(str(bikes_path), device="cpu", max_frames=FRAMES, batch_size=8, stages=[stage],
                             results_on_host=True)
        spec = OutputSpec("single", tmp_path / "out.csv", "auto")
        args = argparse.Namespace(events=None, webhook=[hook.url(auth="u:pw9")], mqtt=None,
                                  parser=argparse.ArgumentParser())
        outputs = Outputs(spec, run, names=run.detector.names, events=detect_events(args, run, spec))
        assert (tmp_path / "out.events.csv").exists()  # a stage declares emits_events: opened at the start
        emitted = []
        for batch in run.batches():
            emitted += [e for r in batch for e in r.events]
            outputs.write(batch)
        summary = outputs.close()
        posted = hook.wait_events(len(emitted))
    finally:
        hook.close()
    assert len(emitted) >= 3  # cars come and go in the first 40 frames of bikes.mp4
    rows = list(csv.DictReader((tmp_path / "out.events.csv").open(newline="")))
    assert [(r["kind"], int(r["frame"])) for r in rows] == [(e.kind, e.frame) for e in emitted]
    assert [(p["kind"], p["frame"]) for p in posted] == [(e.kind, e.frame) for e in emitted]
    # each event agrees with the detections table written by the same run
    per = _classes_per_frame(tmp_path / "out.csv")
    for r in rows:
        f = int(r["frame"])
        assert r["class_name"] == "car" and r["source"] == str(bikes_path) and r["stream_id"] == "0"
        if r["kind"] == "enter":
            assert "car" in per.get(f, set()) and "car" not in per.get(f - 1, set())
        else:
            assert "car" not in per.get(f, set()) and "car" in per.get(f - 1, set())
            assert float(r["dwell_s"]) > 0
    stats = summary.stats["events"]
    assert stats["emitted"] == len(emitted) and stats["tables"][0]["written"] == len(emitted)
    assert stats["webhooks"][0]["posted"] == len(emitted) and stats["webhooks"][0]["dropped"] == 0
    text = summary.format_text()
    assert f"events: {len(emitted)}" in text and "pw9" not in text
    assert str(tmp_path / "out.events.csv") in summary.outputs
    meta = json.loads(metadata_path(tmp_path / "out.events.csv").read_text())
    assert meta["status"] == "complete" and meta["events"] == len(emitted) and meta["frames"] == FRAMES
    assert meta["appears"] == {"emitted": len(emitted)}  # the stage's report at the top, as in the summary
    det_meta = json.loads(metadata_path(tmp_path / "out.csv").read_text())
    assert det_meta["summary"]["stats"]["events"]["webhooks"][0]["posted"] == len(emitted)
    assert "pw9" not in json.dumps(det_meta) + json.dumps(meta)


def vidpipe_cli(*args, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "vidpipe", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout)


def test_cli_flags_explicit_table_and_webhook(bikes_path, tmp_path):
    hook = Receiver().start()
    try:
        p = vidpipe_cli("detect", bikes_path, "--device", "cpu", "--imgsz", "160", "--max-frames", "6",
                        "-o", tmp_path / "d.jsonl", "--events", tmp_path / "ev.parquet", "--webhook",
                        hook.url(auth="user:pw77"))
    finally:
        hook.close()
    assert p.returncode == 0, p.stderr
    import pyarrow.parquet as pq

    assert pq.read_table(tmp_path / "ev.parquet").num_rows == 0  # no stage emits events here: an empty table
    meta = json.loads(metadata_path(tmp_path / "ev.parquet").read_text())
    assert meta["status"] == "complete" and meta["frames"] == 6
    assert "events: 0" in p.stdout and "http://***@127.0.0.1" in p.stdout
    assert "pw77" not in p.stdout + p.stderr
    assert not (tmp_path / "d.events.jsonl").exists()


@pytest.mark.parametrize("flag, value", [("--webhook", "ftp://bob:pw55@h/x"), ("--mqtt", "mqtt://bob:pw55@h/a/#"),
                                         ("--events", "ev.txt")])
def test_cli_bad_flags(flag, value):
    p = vidpipe_cli("detect", "x.mp4", flag, value, timeout=60)
    assert p.returncode == 2 and flag in p.stderr and "pw55" not in p.stderr
