"""The run directory: resolved config, metrics.jsonl, checkpoints/, summary.json.

A run directory belongs to one run at a time. A new run gets a directory no run has used: the
default name is created here, exclusively (``-2``, ``-3``... on a clash), and a ``--run-dir`` that
already holds files is refused unless the run is resumed. While a run is up its main process holds
an exclusive lock on the directory (``flock``, released by the kernel when the process ends, however
it ends), so a second run, new or resumed, is refused there rather than mixing its checkpoints,
``config.toml`` and ``summary.json`` with the first's. The directory is ``0o750`` and its files
``0o640``: ``env.kwargs`` may hold secrets, and the env-state pickles are read back on resume.
"""

from __future__ import annotations

import errno
import fcntl
import itertools
import json
import logging
import math
import os
import time
from pathlib import Path
from typing import IO

from fastrl.config import Config, ConfigError
from fastrl.runs.checkpoint import atomic_write

log = logging.getLogger(__name__)
RANKS_FILE = "ranks.json"
DIR_MODE = 0o750  # a run's directory: env.kwargs may hold secrets; no one outside the group reads it


def _drop_cut_line(path: Path, block: int = 65536) -> None:
    """Cut ``path`` after its last newline, if anything follows it."""
    try:
        f = open(path, "rb+")
    except FileNotFoundError:
        return
    with f:
        size = end = f.seek(0, os.SEEK_END)
        while end > 0:
            start = max(0, end - block)
            f.seek(start)
            newline = f.read(end - start).rfind(b"\n")
            if newline >= 0:
                end = start + newline + 1
                break
            end = start
        if end < size:
            f.truncate(end)
            log.warning("%s ended in a cut line (%d bytes, a run killed while writing it): dropped", path, size - end)


def _toml_value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        if math.isnan(value):
            return "nan"
        return repr(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return _toml_string(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{_toml_string(k)} = {_toml_value(v)}" for k, v in value.items()) + " }"
    raise TypeError(f"cannot write {value!r} as TOML")


_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}


def _toml_string(text: str) -> str:
    """A TOML basic string: control characters escaped, everything else (any Unicode) as is."""
    out = []
    for ch in text:
        if ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def to_toml(data: dict, prefix: str = "") -> str:
    """A small TOML writer for config dicts (tables of scalars, lists and inline tables)."""
    scalars = [(k, v) for k, v in data.items() if not (isinstance(v, dict) and _is_table(k, v))]
    tables = [(k, v) for k, v in data.items() if isinstance(v, dict) and _is_table(k, v)]
    lines = [f"{k} = {_toml_value(v)}" for k, v in scalars]
    for key, table in tables:
        name = f"{prefix}{key}"
        lines += ["", f"[{name}]", to_toml(table, f"{name}.")]
    return "\n".join(lines).strip("\n") + "\n"


def _is_table(key: str, value: dict) -> bool:
    return key not in ("kwargs",)  # free-form dicts stay inline


def default_run_dir(config: Config) -> Path:
    """``run.dir/<time>_<env>_<mode>_seed<seed>``: a name, not yet a directory (``new_run_dir`` makes one)."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    env = config.env.id.replace("/", "-").replace(":", "-")
    return Path(config.run.dir).expanduser() / f"{stamp}_{env}_{config.engine.mode}_seed{config.run.seed}"


def new_run_dir(config: Config) -> Path:
    """A default run directory made now, exclusively: runs started in the same second (seeds in a shell
    loop) each get their own, the later ones suffixed ``-2``, ``-3``..."""
    base = default_run_dir(config)
    base.parent.mkdir(parents=True, exist_ok=True)
    for n in itertools.count(1):
        path = base if n == 1 else base.with_name(f"{base.name}-{n}")
        try:
            path.mkdir(mode=DIR_MODE)
        except FileExistsError:
            continue
        return path
    raise AssertionError("unreachable")


class RunDir:
    def __init__(self, path: str | Path):
        self.path = Path(path)
        self._lock: int | None = None  # the directory's fd while this process holds its lock

    @classmethod
    def create(
        cls, config: Config, path: str | Path, ranks: int = 1, resumed: bool = False, own: tuple[str, ...] = ()
    ) -> RunDir:
        """Claim ``path`` for this run and write its ``config.toml``. ``resumed``: the run goes on there; else
        the directory must hold nothing but ``own`` (what this launch made there itself: a torchrun root's
        ``logs``, ``ranks``). ``ranks``: how many torchrun ranks make the run (a resumed run needs as many),
        in ``ranks.json``. Raises ``ConfigError`` for a directory in use or holding another run's files."""
        run = cls(path)
        run.path.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
        run._claim()
        try:
            if not resumed:
                run._check_unused(own)
            run.checkpoints.mkdir(exist_ok=True)
            atomic_write(run.path / "config.toml", lambda f: f.write(to_toml(config.to_dict()).encode()))
            if ranks > 1:
                atomic_write(run.path / RANKS_FILE, lambda f: f.write((json.dumps({"ranks": ranks}) + "\n").encode()))
            else:
                (run.path / RANKS_FILE).unlink(missing_ok=True)
        except BaseException:
            run.release()
            raise
        return run

    @classmethod
    def check_free(cls, path: Path, resumed: bool = False) -> None:
        """Refuse at once, before anything starts, what ``create`` would refuse (``create`` still decides:
        another run may take the directory in between)."""
        if not path.is_dir():
            return
        run = cls(path)
        run._claim()
        try:
            if not resumed:
                run._check_unused(())
        finally:
            run.release()

    def _claim(self) -> None:
        """Hold the directory's lock for the rest of the run, or refuse: another run is using it."""
        fd = os.open(self.path, os.O_RDONLY)  # not inherited by workers (Python's fds are close-on-exec)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                raise
            raise ConfigError(
                f"run directory {str(self.path)!r} is in use by another run{self._holder()}; two runs in one "
                "directory overwrite each other's checkpoints, config.toml and summary.json: give this one "
                "another --run-dir (or none: each run then gets a new one)"
            ) from None
        self._lock = fd

    def _holder(self) -> str:
        try:
            return f" (main process pid {json.loads((self.path / 'pids.json').read_text())['main']})"
        except (OSError, ValueError, KeyError, TypeError):  # a damaged pids.json: the message goes without it
            return ""

    def _check_unused(self, own: tuple[str, ...]) -> None:
        found = sorted(name for name in os.listdir(self.path) if name not in own)
        if found:
            shown = ", ".join(found[:5]) + (", ..." if len(found) > 5 else "")
            raise ConfigError(
                f"run directory {str(self.path)!r} is not empty ({shown}); a new run never writes into another's: "
                f"to go on with the run there, fastrl train --resume {self.path}; else give an empty or new "
                "--run-dir (or none: each run then gets a new one)"
            )

    def release(self) -> None:
        """Let another run use the directory (the run has ended)."""
        if self._lock is not None:
            os.close(self._lock)  # closing the fd drops the lock
            self._lock = None

    def ranks(self) -> int:
        """The torchrun ranks that made this run (1: one engine)."""
        path = self.path / RANKS_FILE
        if not path.is_file():
            return 1
        try:
            return int(json.loads(path.read_text())["ranks"])
        except (OSError, ValueError, TypeError, KeyError):  # a damaged file: no guess at how many ranks made the run
            raise ConfigError(
                f'{path} cannot be read: it should hold {{"ranks": N}}, the torchrun ranks that made this run'
            ) from None

    @property
    def metrics(self) -> Path:
        return self.path / "metrics.jsonl"

    def open_metrics(self) -> IO[str]:
        """``metrics.jsonl`` for appending, line-buffered. A run killed mid-line (or on a full disk) left its
        last line cut: it is dropped first, so every line stays one JSON object (``fastrl plot`` reads each)."""
        _drop_cut_line(self.metrics)
        return open(self.metrics, "a", buffering=1, encoding="utf-8")

    @property
    def checkpoints(self) -> Path:
        return self.path / "checkpoints"

    def write_summary(self, summary: dict) -> None:
        atomic_write(self.path / "summary.json", lambda f: f.write((json.dumps(summary, indent=2) + "\n").encode()))
