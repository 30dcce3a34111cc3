"""``vidpipe bench startup``: what a user waits for from typing the command to its last line, each
time in a fresh process, beside PyTorch's own start on the same machine (the floor).

Rows (each run ``repeat`` times, alternating, medians reported):

- ``floor``: ``python -c "import torch; torch.zeros(1, device=D)"`` (on a GPU: importing PyTorch
  and starting CUDA, which every PyTorch program pays);
- ``vidpipe-detect``: ``vidpipe detect INPUT --device D`` (the bundled street clip unless an input
  is given), a table written to a temporary folder: its wall time, and from its summary the time
  to the first result (from ``vidpipe.detect``'s call), the GPU warm-up, the run's own seconds and
  the decoder ``auto`` chose.

- ``vidpipe.detect`` (with ``--api``): the same input through the Python API in a fresh process,
  as the README's quick start uses it (``for frame in vidpipe.detect(INPUT, device=D): ...``),
  its summary written to a file: the same columns.

``--decoder-processes 0,4`` makes one ``vidpipe-detect`` series per value (``auto``: the default);
``--copies K`` gives each run K copies of the input at once (files sharing the decoder processes);
``--versus-bench`` adds ``bench e2e``'s ``vidpipe-gpu`` rate on the same file (``bench-e2e``).
``--lengths 4800,15000,30000`` measures real footage (INPUT, default the bundled street clip) scaled
to ``--size`` (1920x1080) and looped to each length, all in one report, whose targets name the
fastest series per length: where decoder processes start to pay
(:data:`~vidpipe.decode.procpool.AUTO_START_FRAMES` was set so, ``docs/bench/h200/startup/crossover``).

Targets (issue 10, on a GPU, medians): the command's wall time within the floor + 2 s; with
``--versus-bench`` (a long file), within the floor + 2 s + frames / (0.9 x the bench's rate), and
the command's rate (its summary's frames/s) at least 0.9x the bench's. The same for the API's
series.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from vidpipe.bench.report import VideoBenchResult
from vidpipe.errors import SourceError, VidpipeError

__all__ = ["run_startup_bench", "run_startup_lengths", "StartupResult", "STARTUP_TARGET_S"]

#: the most copies of the input one command decodes (``--copies``: one command line of them)
MAX_COPIES = 256
#: seconds over the floor the command may take (issue 10: ``bikes.mp4`` within floor + 2 s)
STARTUP_TARGET_S = 2.0
COLUMNS = ["input", "peer", "wall_s", "over_floor_s", "first_result_s", "warmup_s", "run_s", "rate_fps", "frames",
           "decoder", "decoder_processes", "runs_s", "runs_fps"]
HEADERS = {"wall_s": "wall s (median)", "over_floor_s": "over the floor s", "first_result_s": "first result s",
           "warmup_s": "GPU warm-up s", "run_s": "run s", "rate_fps": "frames/s (summary)",
           "decoder_processes": "decoder processes", "runs_s": "each run's wall s",
           "runs_fps": "each run's frames/s"}


#: ``vidpipe.detect`` from a script, as the README's quick start: argv = summary file, device,
#: decoder, decoder processes ("" for the default), inputs
_API_SCRIPT = """
import json, sys
import vidpipe
out, device, decoder, processes, *inputs = sys.argv[1:]
options = {} if processes == "" else {"decoder_processes": int(processes)}
run = vidpipe.detect(inputs if len(inputs) > 1 else inputs[0], device=device, decoder=decoder, **options)
for frame in run:
    pass
with open(out, "w") as f:
    json.dump(run.summary().to_dict(), f)
"""


def _timed(cmd: list[str], *, timeout_s: float, env: dict[str, str]) -> tuple[float, subprocess.CompletedProcess]:
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, env=env)
    return time.perf_counter() - t0, p


def run_startup_bench(input_path: str | os.PathLike | None = None, *, device: str = "auto", repeat: int = 3,
                      decoder: str = "auto", processes: Sequence[int | None] = (None,), versus_bench: bool = False,
                      copies: int = 1, api: bool = False, timeout_s: float = 300.0) -> VideoBenchResult:  # fmt: skip
    """Measure the floor and ``vidpipe detect`` on ``input_path`` in fresh processes.

    ``processes``: one series of ``vidpipe detect`` runs per value of ``--decoder-processes``
    (``None``: the default, automatic), runs alternating with the floor's; ``api``: each also
    through ``vidpipe.detect`` from a script (a ``vidpipe.detect`` series). ``copies``: each run
    decodes that many copies of the input at once (links to it; the rates are of all its frames,
    the bench's of one copy). ``versus_bench``: also
    the ``bench e2e`` rate of ``vidpipe-gpu`` on the same input, measured afterwards in this process
    (warmed up, as the bench does), for issue 10's targets on a long input: each series' rate (the
    summary's frames/s: the run's clock, which starts after the model's load, and after the GPU
    warm-up or, for video files decoded by NVDEC, with their decode inside it) at
    least :data:`RATE_TARGET` of it, and its wall time within the floor + 2 s
    + frames / (:data:`RATE_TARGET` x that rate).

    Raises:
        SourceError: ``input_path`` is not a file.
        VidpipeError: a command failed (its stderr's last lines in the message).
    """
    from vidpipe.data import sample_video
    from vidpipe.device import resolve_device
    from vidpipe.lifetime.keeper import python_env

    dev = resolve_device(device)
    path = Path(input_path) if input_path is not None else sample_video()
    if not path.is_file():
        raise SourceError(f"bench startup: no such file: {path}")
    if not isinstance(copies, int) or not 1 <= copies <= MAX_COPIES:
        raise ValueError(f"bench startup: copies must be an integer from 1 to {MAX_COPIES}, not {copies!r}")
    env = python_env()
    floor_cmd = [sys.executable, "-c", f"import torch; torch.zeros(1, device={str(dev)!r})"]
    floors: list[float] = []
    runs: dict[tuple[bool, int | None], list[dict[str, Any]]] = {}
    with tempfile.TemporaryDirectory(prefix="vidpipe-startup-") as tmp:
        inputs = [str(path)]
        for k in range(1, copies):  # other names for the same file: inputs of their own
            link = Path(tmp) / f"copy{k}-{path.name}"
            link.symlink_to(path.resolve())
            inputs.append(str(link))
        for i in range(repeat):
            wall, p = _timed(floor_cmd, timeout_s=timeout_s, env=env)
            _check(p, "the floor")
            floors.append(wall)
            for n in processes:
                out = Path(tmp) / f"run{i}-{n}.csv"
                cmd = [sys.executable, "-m", "vidpipe", "detect", *inputs, "--device", str(dev), "--decoder", decoder,
                       "--progress", "off", "-o", str(out)] + ([] if n is None else ["--decoder-processes", str(n)])
                wall, p = _timed(cmd, timeout_s=timeout_s, env=env)
                _check(p, "vidpipe detect")
                summary = json.loads(Path(f"{out}.meta.json").read_text())["summary"]
                runs.setdefault((False, n), []).append({"wall": wall, "summary": summary})
                if api:
                    out = Path(tmp) / f"api{i}-{n}.json"
                    cmd = [sys.executable, "-c", _API_SCRIPT, str(out), str(dev), decoder, "" if n is None else str(n),
                           *inputs]  # fmt: skip
                    wall, p = _timed(cmd, timeout_s=timeout_s, env=env)
                    _check(p, "vidpipe.detect from a script")
                    runs.setdefault((True, n), []).append({"wall": wall, "summary": json.loads(out.read_text())})
    floor = statistics.median(floors)
    name = path.name if copies == 1 else f"{path.name} x{copies}"
    rows = [{"input": name, "peer": "floor", "wall_s": round(floor, 2), "over_floor_s": 0.0,
             "runs_s": " / ".join(f"{w:.2f}" for w in floors), "note": "python -c 'import torch; torch.zeros(1)'"}]
    bench_fps = _bench_rate(path, dev) if versus_bench and dev.type == "cuda" else None
    targets: dict[str, Any] = {}
    for (from_api, n), series in sorted(runs.items(), key=lambda kv: kv[0][0]):  # the command's rows first
        row = _series_row(name, n, series, floor, dev, api=from_api)
        rows.append(row)
        targets[row["peer"]] = _series_targets(row, bench_fps)
    if bench_fps is not None:
        rows.append({"input": name, "peer": "bench-e2e", "rate_fps": round(bench_fps, 1),
                     "note": "vidpipe-gpu of bench e2e on this input (warmed up, in one process)"})
    machine = _machine(dev)
    return StartupResult(rows=rows, inputs=[{"name": name, "path": str(path), "describe": str(path)}],
                         machine=machine, targets={name: targets},
                         title="Start-up: a user's command against PyTorch's floor",
                         columns=COLUMNS, headers=HEADERS, formats={}, highlight=("vidpipe-detect",),
                         name="bench_startup")  # fmt: skip


#: issue 10: the command's rate (its summary's frames/s) at least this share of the bench's on the same file
RATE_TARGET = 0.9


def run_startup_lengths(lengths: Sequence[int], *, source: str | os.PathLike | None = None,
                        size: tuple[int, int] = (1920, 1080), cache_dir: str | os.PathLike | None = None,
                        **options: Any) -> VideoBenchResult:  # fmt: skip
    """:func:`run_startup_bench` (``options``: its keywords) once per length in ``lengths``, on
    ``source`` (default: the bundled street clip) scaled to ``size`` (width, height) and looped to
    that many frames (:func:`~vidpipe.bench.realclip.build_real_clip`, 30 fps, a keyframe a second,
    in ``cache_dir`` or a temporary folder), every row in one report. Each length's targets also
    name its ``fastest`` ``vidpipe-detect`` series by median wall time.

    Raises:
        ValueError: an empty ``lengths``, or a length or size below 1.
        SourceError, VidpipeError: as :func:`run_startup_bench`.
    """
    from vidpipe.bench.realclip import build_real_clip
    from vidpipe.bench.workdir import media_folder

    if not lengths or min(lengths) < 1 or min(size) < 1:
        raise ValueError(f"bench startup: lengths and size must be positive, not {list(lengths)} and {size}")
    if source is not None and not Path(source).is_file():
        raise SourceError(f"bench startup: no such file: {source}")
    results = []
    with media_folder(cache_dir) as folder:
        for n in lengths:
            clip = build_real_clip(folder, source=source, width=size[0], height=size[1], frames=n)
            results.append(run_startup_bench(clip, **options))
    targets: dict[str, Any] = {}
    for result in results:
        walls = {r["peer"]: r["wall_s"] for r in result.rows if r["peer"].startswith("vidpipe-detect")}
        for name, series in result.targets.items():
            targets[name] = {**series, "fastest": min(walls, key=walls.__getitem__)}
    first = results[0]
    return StartupResult(rows=[r for res in results for r in res.rows], inputs=[i for res in results for i in res.inputs],
                         machine=first.machine, targets=targets,
                         title="Start-up by file length: a user's command against PyTorch's floor",
                         columns=first.columns, headers=first.headers, formats={}, highlight=first.highlight,
                         name="bench_startup")  # fmt: skip


def _series_row(name: str, processes: int | None, series: list[dict[str, Any]], floor: float, dev: Any, *,
                api: bool = False) -> dict:  # fmt: skip
    stats = [r["summary"]["stats"] for r in series]
    wall = statistics.median(r["wall"] for r in series)
    sources = [s for r in series for s in r["summary"]["sources"]]
    decoders = sorted({s["decoder"] for s in sources if s.get("decoder")})
    procs = sorted({(s.get("extra") or {}).get("decoder_processes", 0) for s in sources})
    rates = [r["summary"]["fps"] for r in series if r["summary"].get("fps")]  # the summary's: the run's clock
    if api:
        peer, note = "vidpipe.detect", f"for frame in vidpipe.detect(INPUT, device={str(dev)!r}"
        note += ")" if processes is None else f", decoder_processes={processes})"
    else:
        peer = "vidpipe-detect"
        note = f"vidpipe detect --device {dev}" + ("" if processes is None else f" --decoder-processes {processes}")
    return {"input": name, "peer": peer + (f" ({processes} processes)" if processes is not None else ""),
            "wall_s": round(wall, 2), "over_floor_s": round(wall - floor, 2),
            "first_result_s": _median(s.get("first_result_s") for s in stats),
            "warmup_s": _median(s.get("warmup_s") for s in stats),
            "run_s": _median(r["summary"].get("seconds") for r in series),
            "rate_fps": _median(rates), "frames": series[-1]["summary"].get("frames"),
            "detections": series[-1]["summary"].get("detections"), "decoder": ",".join(decoders),
            "decoder_processes": "/".join(str(p) for p in procs),
            "runs_s": " / ".join(f"{r['wall']:.2f}" for r in series),
            "runs_fps": " / ".join(f"{r['summary'].get('fps') or 0:,.0f}" + ("*" if _before_processes(r) else "")
                                   for r in series),
            "note": note}


def _before_processes(run: dict) -> bool:
    """Whether a run's decode started before its decoder processes were ready (it began with
    threads in its own process: the summary's ``frames_before_processes``)."""
    return any((s.get("extra") or {}).get("frames_before_processes") is not None for s in run["summary"]["sources"])


def _series_targets(row: dict, bench_fps: float | None) -> dict:
    over = row["over_floor_s"]
    got: dict[str, Any] = {"over_floor_s": over, "target_s": STARTUP_TARGET_S,
                           "within_floor_plus_2s": over <= STARTUP_TARGET_S}
    if bench_fps:
        allowed = STARTUP_TARGET_S + (row["frames"] or 0) / (RATE_TARGET * bench_fps)
        got.update({"bench_fps": round(bench_fps, 1), "allowed_over_floor_s": round(allowed, 2),
                    "within_floor_plus_2s_plus_frames": over <= allowed,
                    "rate_over_bench": round((row["rate_fps"] or 0.0) / bench_fps, 3),
                    "rate_target_0.9x": (row["rate_fps"] or 0.0) >= RATE_TARGET * bench_fps})
    return got


def _bench_rate(path: Path, dev: Any) -> float:
    """``bench e2e``'s vidpipe-gpu frames/s on ``path`` (its warm-up included, as the bench does)."""
    from vidpipe.bench.e2e import run_e2e_bench

    result = run_e2e_bench([str(path)], device=str(dev), peers=("vidpipe-gpu",))
    return float(result.rows[0]["fps"])


class StartupResult(VideoBenchResult):
    """The start-up report; its chart is the wall seconds of each row."""

    def write(self, out_dir: str | Path, name: str | None = None) -> dict[str, Path]:
        from vidpipe.bench.report import write_report

        notes = [f"{k}: {v}" for k, v in self.machine.items()] + [f"targets {k}: {v}" for k, v in self.targets.items()]
        if any("*" in str(r.get("runs_fps", "")) for r in self.rows):
            notes.append("* a run whose decode started before its decoder processes were ready (it began with "
                         "threads in its own process; they joined it later)")
        return write_report(out_dir, name or self.name, [{**r, "label": r["peer"]} for r in self.rows],
                            title=self.title, label="label", value="wall_s", unit="s", columns=self.columns,
                            headers=self.headers, notes=notes, highlight=list(self.highlight),
                            meta={"inputs": self.inputs, "machine": self.machine, "targets": self.targets})


def _median(values: Any) -> float | None:
    got = [float(v) for v in values if isinstance(v, (int, float))]
    return round(statistics.median(got), 3) if got else None


def _check(p: subprocess.CompletedProcess, what: str) -> None:
    if p.returncode != 0:
        tail = " | ".join(p.stderr.strip().splitlines()[-3:])
        raise VidpipeError(f"bench startup: {what} failed (exit code {p.returncode}): {tail}")


def _machine(dev: Any) -> dict[str, Any]:
    import platform

    import torch

    info: dict[str, Any] = {"python": platform.python_version(), "torch": torch.__version__,
                            "cpu_count": os.cpu_count()}  # fmt: skip
    if dev.type == "cuda":
        info["gpu"] = torch.cuda.get_device_name(dev)
    return info
