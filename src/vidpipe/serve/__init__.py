"""``vidpipe serve``: cameras from one YAML file through one detector into tables, with cameras
added and removed at run time, a status, Prometheus metrics and a clean stop.

::

    import vidpipe
    with vidpipe.serve("serve.yaml") as server:      # or a ServeConfig
        server.add_camera("door", "rtsp://cam9/stream")
        print(server.status()["streams"])

See :mod:`vidpipe.serve.config` for the options and ``examples/serve.yaml`` for a documented file.
``vidpipe.serve`` is both this package and the function :func:`serve` (calling the package calls
the function), so ``vidpipe.serve(...)`` works however the package was imported first.
"""

from __future__ import annotations

import sys
import types
from typing import Any

from vidpipe.serve.config import CameraConfig, MetricsConfig, OutputConfig, ServeConfig
from vidpipe.serve.load import load_config, parse_config
from vidpipe.serve.runner import Server, serve

__all__ = [
    "serve", "Server", "ServeConfig", "CameraConfig", "OutputConfig", "MetricsConfig", "load_config", "parse_config",
]


class _CallableModule(types.ModuleType):
    """``vidpipe.serve(...)`` is :func:`serve` even where ``vidpipe.serve`` is this package
    (Python sets a package's submodules as attributes of their parent when they are imported)."""

    def __call__(self, *args: Any, **kwargs: Any) -> Server:
        return serve(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
