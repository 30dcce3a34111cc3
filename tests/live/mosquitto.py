"""Debian's ``mosquitto`` MQTT broker on a free loopback port, for the MQTT output's tests.

``Mosquitto(workdir=..., users={"bob": "pw"}).start()`` writes a config (one listener on
127.0.0.1, persistence in the workdir so queued QoS 1 messages of persistent sessions survive a
restart, a password file made with ``mosquitto_passwd`` when ``users`` are given, anonymous
clients refused then), starts the broker and waits until it accepts TCP connections;
``restart()`` keeps the port. :func:`mosquitto_missing_reason` says why it cannot run
(``apt-get install mosquitto``; ``.ci/run`` installs it).
"""

from __future__ import annotations

import getpass
import os
import shutil
import subprocess
import time
from pathlib import Path

from live.procs import LOOPBACK, ServerProcess, free_port, port_open

__all__ = ["Mosquitto", "mosquitto_missing_reason", "MOSQUITTO", "paho_missing_reason"]

MOSQUITTO = shutil.which("mosquitto") or "/usr/sbin/mosquitto"
MOSQUITTO_PASSWD = shutil.which("mosquitto_passwd") or "/usr/bin/mosquitto_passwd"


def mosquitto_missing_reason() -> str | None:
    """``None`` when the mosquitto broker and mosquitto_passwd are installed, else why not."""
    for tool in (MOSQUITTO, MOSQUITTO_PASSWD):
        if not os.access(tool, os.X_OK):
            return f"{tool} not found: apt-get install mosquitto"
    return None


def paho_missing_reason() -> str | None:
    """``None`` when paho-mqtt imports (the ``test`` extra installs it)."""
    try:
        import paho.mqtt.client  # noqa: F401
    except ImportError as exc:
        return f"paho-mqtt is not installed ({exc}); pip install -e '.[test]'"
    return None


class Mosquitto(ServerProcess):
    """The broker (see the module docstring); ``url(prefix, user=, password=)``."""

    name = "mosquitto"

    def __init__(self, *, users: dict[str, str] | None = None, port: int | None = None, **kwargs) -> None:
        super().__init__(**kwargs)
        self.users = dict(users or {})
        self.port = port or free_port()
        self.config = self.workdir / "mosquitto.conf"
        self.data = self.workdir / "data"

    def new_ports(self) -> None:
        self.port = free_port()

    def prepare(self) -> None:
        self.data.mkdir(exist_ok=True)
        lines = [
            f"listener {self.port} {LOOPBACK}",
            "persistence true",
            f"persistence_location {self.data}/",
            "log_dest stderr",
            "log_type error",
            "log_type warning",
            "log_type notice",
        ]
        if os.geteuid() == 0:
            lines.append(f"user {getpass.getuser()}")  # as root it would switch to user mosquitto
        if self.users:
            pw = self.workdir / "passwords"
            pw.unlink(missing_ok=True)
            for i, (user, password) in enumerate(self.users.items()):
                args = [MOSQUITTO_PASSWD, "-b", *([] if i else ["-c"]), str(pw), user, password]
                subprocess.run(args, check=True, capture_output=True, timeout=30)
            pw.chmod(0o600)
            lines += [f"password_file {pw}", "allow_anonymous false"]
        else:
            lines.append("allow_anonymous true")
        self.config.write_text("\n".join(lines) + "\n")

    def command(self):
        return [MOSQUITTO, "-c", str(self.config)]

    def ready(self) -> bool:
        return port_open(self.port)

    def url(self, prefix: str = "vidpipe", *, user: str | None = None, password: str | None = None) -> str:
        auth = f"{user}:{password}@" if user is not None else ""
        return f"mqtt://{auth}{LOOPBACK}:{self.port}/{prefix}"

    def restart(self, *, down_s: float = 0.0) -> "Mosquitto":
        """SIGTERM (mosquitto saves its persistent sessions), ``down_s`` seconds away, start again
        on the same port."""
        self.stop(graceful=True)
        if down_s > 0:
            time.sleep(down_s)
        return self.start()  # type: ignore[return-value]


def log_of(server: Mosquitto) -> str:
    return Path(server.log_path).read_text(errors="replace") if Path(server.log_path).exists() else ""
