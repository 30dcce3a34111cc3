"""Reading a YAML file into plain values while remembering where each came from.

:func:`load_marked` parses with PyYAML's ``SafeLoader`` only (no Python objects, no code), then
walks the composed node tree so every value has a location: ``Where.line(("cameras", 1, "conf"))``
is the line of that value, ``Where.key_line(...)`` the line of its key. Duplicate keys (which
PyYAML silently lets the last one win) are an error here, as are non-string keys.

``${NAME}`` in string values is replaced by the environment variable ``NAME`` (``${NAME:-text}``
uses ``text`` when it is unset or empty; ``$$`` is a literal ``$``), so passwords need not sit in
the file. A missing variable is an error naming the line and the key, never the value.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from vidpipe.errors import ConfigError

__all__ = ["Where", "load_marked", "path_text", "expand_env"]

#: A location inside the document: mapping keys and sequence indices from the root.
Path_ = tuple  # tuple[str | int, ...]

_ENV = re.compile(r"\$(?:\$|\{(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?::-(?P<default>[^}]*))?\})")


def path_text(path: Path_) -> str:
    """``("cameras", 1, "conf")`` -> ``cameras[1].conf``."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


@dataclass(frozen=True)
class Where:
    """Lines of the values and keys of one parsed file (1-based; ``None`` when unknown).

    Attributes:
        file: the file name as given (for messages).
    """

    file: str
    _values: Mapping[Path_, int] = field(default_factory=dict, repr=False)
    _keys: Mapping[Path_, int] = field(default_factory=dict, repr=False)
    _from_env: set = field(default_factory=set, repr=False)

    def from_env(self, path: Path_) -> bool:
        """Whether the value at ``path`` holds an environment variable (never shown)."""
        return path in self._from_env

    def line(self, path: Path_) -> int | None:
        """Line of the value at ``path`` (or of its closest enclosing value)."""
        while True:
            if path in self._values:
                return self._values[path]
            if not path:
                return None
            path = path[:-1]

    def key_line(self, path: Path_) -> int | None:
        """Line of the key naming ``path`` (the value's line for sequence items)."""
        return self._keys.get(path) or self.line(path)

    def at(self, path: Path_, *, key: bool = False) -> str:
        """``file:LINE: key`` for messages."""
        line = self.key_line(path) if key else self.line(path)
        head = f"{self.file}:{line}" if line is not None else self.file
        return f"{head}: {path_text(path)}" if path else head

    def error(self, path: Path_, message: str, *, key: bool = False) -> ConfigError:
        """A :class:`ConfigError` ``file:LINE: key: message``."""
        return ConfigError(f"{self.at(path, key=key)}: {message}")


def expand_env(text: str, where: Where, path: Path_, env: Mapping[str, str]) -> str:
    """``text`` with ``${NAME}``, ``${NAME:-default}`` and ``$$`` expanded from ``env``."""

    def sub(m: re.Match) -> str:
        if m.group(0) == "$$":
            return "$"
        name, default = m.group("name"), m.group("default")
        value = env.get(name)
        if value:
            return value
        if default is not None:
            return default
        raise where.error(
            path,
            f"environment variable {name} is not set (the value says ${{{name}}}); set it, "
            f"or write ${{{name}:-default}} for a default",
        )

    return _ENV.sub(sub, text) if "$" in text else text


def load_marked(text: str, file: str, *, env: Mapping[str, str] | None = None) -> tuple[Any, Where]:
    """Parse one YAML document (``SafeLoader``) into plain dicts/lists/scalars and its :class:`Where`.

    Raises:
        ConfigError: a syntax error, several documents, a duplicate or non-string key, an
            unknown YAML tag, or an unset environment variable (each naming the file and line).
    """
    import yaml

    env = os.environ if env is None else env
    loader = yaml.SafeLoader(text)
    try:
        try:
            node = loader.get_single_node()
        except yaml.MarkedYAMLError as exc:
            mark = exc.problem_mark or exc.context_mark
            line = f":{mark.line + 1}" if mark is not None else ""
            problem = "; ".join(p for p in (exc.context, exc.problem) if p)
            raise ConfigError(f"{file}{line}: not valid YAML: {problem}") from None
        except yaml.YAMLError as exc:
            raise ConfigError(f"{file}: not valid YAML: {exc}") from None
        values: dict[Path_, int] = {}
        keys: dict[Path_, int] = {}
        where = Where(file, values, keys, set())
        if node is None:
            return None, where
        return _build(node, (), loader, where, values, keys, env), where
    finally:
        loader.dispose()


def _build(node: Any, path: Path_, loader: Any, where: Where, values: dict, keys: dict, env: Mapping[str, str]) -> Any:
    import yaml

    values[path] = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        try:
            loader.flatten_mapping(node)  # YAML merge keys (<<: *defaults)
        except yaml.MarkedYAMLError as exc:
            raise where.error(path, f"bad merge key: {exc.problem}") from None
        out: dict[str, Any] = {}
        for knode, vnode in node.value:
            try:
                key = loader.construct_object(knode, deep=True)
            except yaml.YAMLError as exc:
                raise where.error(path, f"bad key: {exc}") from None
            if not isinstance(key, str):
                raise ConfigError(f"{where.file}:{knode.start_mark.line + 1}: {path_text(path)}: "
                                  f"keys must be names, got {key!r}")
            kpath = path + (key,)
            if key in out:
                raise ConfigError(
                    f"{where.file}:{knode.start_mark.line + 1}: {path_text(kpath)}: given twice "
                    f"(first on line {keys[kpath]})"
                )
            keys[kpath] = knode.start_mark.line + 1
            out[key] = _build(vnode, kpath, loader, where, values, keys, env)
        return out
    if isinstance(node, yaml.SequenceNode):
        return [_build(item, path + (i,), loader, where, values, keys, env) for i, item in enumerate(node.value)]
    try:
        value = loader.construct_object(node, deep=True)
    except yaml.YAMLError as exc:
        problem = getattr(exc, "problem", None) or str(exc)
        raise where.error(path, f"cannot read this value: {problem}") from None
    if isinstance(value, str):
        expanded = expand_env(value, where, path, env)
        if expanded != value:
            where._from_env.add(path)  # noqa: SLF001 - filled while parsing, read-only after
        value = expanded
    return value
