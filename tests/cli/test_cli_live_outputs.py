"""The CLI's outputs with a live input in the run (vidpipe.sinks.outputs): nothing is held back for
input order (a live input never ends), and the table has the capture-time columns.

Real components: a real ``DetectionRun`` (its inputs classified as the CLI does; not iterated,
so the camera URL is never opened) and real results of the bundled sample, handed to
``Outputs.write`` in the order a run delivers them when the second input is faster.
"""

from __future__ import annotations

import csv
import dataclasses

import pytest

from vidpipe.sinks.outputs import Outputs, OutputSpec
from vidpipe.sinks import CAPTURE_COLUMNS, COLUMNS


@pytest.fixture(scope="module")
def second_input_results():
    """Real results of the bundled sample, labelled as the run's second input (stream 1)."""
    import vidpipe
    from vidpipe.data import sample_video

    run = vidpipe.detect(str(sample_video()), device="cpu", batch_size=4, max_frames=12, imgsz=160, conf=0.05,
                         results_on_host=True)
    results = [r for b in run.batches() for r in b]
    run.close()
    out = [dataclasses.replace(r, meta=dataclasses.replace(r.meta, stream_id=1)) for r in results]
    assert sum(len(r.detections) for r in out) > 0
    return out


def _rows(path):
    return list(csv.DictReader(path.read_text().splitlines()))


@pytest.mark.parametrize("first, live", [("rtsp://admin:pw@127.0.0.1:9/cam", True), (None, False)],
                         ids=["live-first-input", "file-first-input"])
def test_rows_of_a_later_input_wait_only_without_a_live_input(second_input_results, tmp_path, first, live):
    import vidpipe
    from vidpipe.data import sample_video

    first = first or str(sample_video())
    run = vidpipe.detect([first, str(sample_video())], device="cpu", imgsz=160, results_on_host=True)
    out = tmp_path / "all.csv"
    outputs = Outputs(OutputSpec("single", out, "auto"), run, names=run.detector.names)
    try:
        outputs.write(second_input_results)  # the first input has delivered nothing yet
        rows = _rows(out)
        header = out.read_text().splitlines()[0].split(",")
        if live:
            assert header == list(COLUMNS + CAPTURE_COLUMNS)
            assert len(rows) == sum(len(r.detections) for r in second_input_results)  # on disk now
        else:
            assert header == list(COLUMNS)
            assert rows == []  # held until the first input is done (input order)
    finally:
        outputs.abort("test over")
        run.close()
    assert len(_rows(out)) == sum(len(r.detections) for r in second_input_results)  # never lost
