"""The live flags of ``vidpipe detect`` / ``vidpipe serve``: parsed into LiveOptions, checked by
the command with one-line errors naming the flag, and over a config file's values for serve."""

from __future__ import annotations

from pathlib import Path

import pytest

from vidpipe.cli import build_parser
from vidpipe.cli._live_args import live_options
from vidpipe.sources.options import LiveOptions


def test_flags_to_live_options() -> None:
    args = build_parser().parse_args(
        ["detect", "x.mp4", "--rtsp-transport", "udp", "--stall-timeout", "20", "--realtime", "--batch-timeout", "0.1",
         "--queue-frames", "6", "--decode-latency", "low"]
    )
    assert live_options(args) == LiveOptions(rtsp_transport="udp", stall_timeout=20.0, realtime=True, batch_timeout=0.1,
                                             queue_frames=6, decode_latency="low")  # fmt: skip
    assert live_options(build_parser().parse_args(["detect", "x.mp4"])) == LiveOptions()  # nothing given: defaults


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["--stall-timeout", "0"], "--stall-timeout: expected seconds from 0.01 to 3600, got 0"),
        (["--batch-timeout", "soon"], "--batch-timeout: expected seconds, got 'soon'"),
        (["--rtsp-transport", "http"], "--rtsp-transport: invalid choice: 'http'"),
        (["--metrics-port", "70000"], "--metrics-port: expected a port from 0 to 65535"),
        (["--queue-frames", "0"], "--queue-frames: expected a whole number from 1 to 1024, got 0"),
        (["--queue-frames", "two"], "--queue-frames: expected a whole number, got 'two'"),
        (["--decode-latency", "fast"], "--decode-latency: invalid choice: 'fast'"),
    ],
)
def test_bad_flags_are_one_line_errors(argv: list[str], words: str, capsys) -> None:
    with pytest.raises(SystemExit) as info:
        build_parser().parse_args(["detect", "x.mp4", *argv])
    assert info.value.code == 2
    assert words in capsys.readouterr().err


def test_serve_flags_override_the_file(tmp_path: Path) -> None:
    from vidpipe.cli.serve import _config

    cfg = tmp_path / "serve.yaml"
    cfg.write_text("live:\n  stall_timeout: 30\n  rtsp_transport: udp\nmetrics: {port: 9100}\n"
                   "cameras:\n  - {name: a, url: rtsp://h/s}\n")  # fmt: skip
    args = build_parser().parse_args(["serve", str(cfg), "--stall-timeout", "5", "--metrics-host", "0.0.0.0"])
    config = _config(args)
    assert config.live == LiveOptions(stall_timeout=5.0, rtsp_transport="udp")  # the flag wins, the rest stays
    assert (config.metrics.port, config.metrics.host) == (9100, "0.0.0.0")
    plain = build_parser().parse_args(["serve", str(cfg)])
    assert _config(plain).live == LiveOptions(stall_timeout=30.0, rtsp_transport="udp")
