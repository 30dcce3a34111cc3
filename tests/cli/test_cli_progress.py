"""The progress bar's clock starts at the first batch, so start-up (model load, warm-up, first
decode) never makes the first estimate read hours."""

from __future__ import annotations

import time
from types import SimpleNamespace

from vidpipe.cli._progress import progress


def fake_run(*expected):
    return SimpleNamespace(states=[SimpleNamespace(expected_frames=e) for e in expected])


def test_first_estimate_ignores_start_up():
    run = fake_run(2000, 1000)
    bar = progress(run, enabled=True)
    time.sleep(0.6)  # start-up before the first batch (10 s in real life)
    bar.update(32)
    tq = bar._bar
    assert tq.total == 3000 and tq.n == 32
    assert tq.format_dict["elapsed"] < 0.3  # the clock starts with the first batch
    for _ in range(5):
        time.sleep(0.02)
        bar.update(32)
    d = tq.format_dict
    rate = d["rate"] or (d["n"] - 32) / d["elapsed"]
    eta = (d["total"] - d["n"]) / rate
    assert eta < 60, f"estimate {eta:.0f} s for frames coming at {rate:.0f}/s"  # ~2 s, not hours
    bar.close()


def test_total_unknown_until_every_input_reports():
    run = fake_run(100, None)
    bar = progress(run, enabled=True)
    bar.update(4)
    assert bar._bar.total is None
    run.states[1].expected_frames = 50
    bar.update(4)
    assert bar._bar.total == 150 and bar._bar.n == 8
    bar.close()


def test_disabled_is_a_no_op():
    bar = progress(fake_run(10), enabled=False)
    bar.update(3)
    bar.close()
