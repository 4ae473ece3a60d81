"""The rule every generated case is held to, as checks: a clear message naming what is wrong and exit 2 (bad input,
before work starts) or 1 (a fault during a run), never a traceback; no process, shared-memory segment, semaphore
or temporary file left behind; no existing file damaged. Each check counts the case (``tests.fuzz.cases``)
before it asserts, so a breach is counted as well as failed."""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import traceback
from pathlib import Path

from fastrl import cli
from fastrl.errors import ConfigError
from fastrl.process.faults import RunFailed
from tests.fuzz.cases import record
from tests.helpers.runs import live_children, own_segments


def breach(family: str, kind: str, message: str) -> AssertionError:
    record(family, kind)
    return AssertionError(f"{family}: {kind}: {message}")


def outcome(family: str, call, *, refused_names: str | None = None):
    """``call()`` in this process: ("accepted", its result), ("refused", the ConfigError) or ("run_failed", the
    RunFailed). Any other exception is a traceback the user would see: counted and raised. A refusal's message must
    not be empty and, given ``refused_names``, must name it."""
    try:
        result = call()
    except ConfigError as exc:
        if not str(exc).strip() or (refused_names is not None and refused_names not in str(exc)):
            raise breach(family, "unnamed", f"{refused_names!r} not in {str(exc)!r}") from exc
        record(family, "refused")
        return "refused", exc
    except RunFailed as exc:
        record(family, "run_failed")
        return "run_failed", exc
    except Exception as exc:
        raise breach(family, "traceback", "".join(traceback.format_exception(exc))) from exc
    record(family, "accepted")
    return "accepted", result


def command(family: str, *argv: str) -> tuple[int, str, str]:
    """The ``fastrl`` command's ``main`` in this process: (exit code, stdout, stderr). An exception out of it, or a
    traceback of fastrl's own in its output, is a breach."""
    out, err = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = cli.main(list(argv))
    except SystemExit as exc:  # argparse: a usage error names the argument, exit 2
        code = exc.code if isinstance(exc.code, int) else 2
    except Exception as exc:
        raise breach(family, "traceback", f"fastrl {argv}: " + "".join(traceback.format_exception(exc))) from exc
    text = err.getvalue()
    if "Traceback (most recent call last)" in text and 'fastrl/' in text.split("Traceback", 1)[1]:
        raise breach(family, "traceback", f"fastrl {argv} printed a traceback of fastrl's own:\n{text}")
    if code not in (0, 1, 2):
        raise breach(family, "exit", f"fastrl {argv}: exit {code}")
    if code and not text.strip():
        raise breach(family, "unnamed", f"fastrl {argv}: exit {code} with nothing said")
    record(family, f"exit_{code}")
    return code, out.getvalue(), text


def assert_nothing_left(family: str, shm_before: set[str] | None = None, wait_s: float = 5.0) -> None:
    """No worker process and no shared-memory segment of this process left. (`/dev/shm` entries of no process,
    the semaphores among them, cannot be told from other runs' on a shared machine case by case: the session's
    fixture in tests/conftest.py compares them before and after the whole session.)"""
    import time

    deadline = time.monotonic() + wait_s
    while (live_children() or own_segments()) and time.monotonic() < deadline:
        time.sleep(0.05)
    left = {"workers": live_children(), "segments": own_segments()}
    if any(left.values()):
        raise breach(family, "leftover", str(left))


def tree_digest(root: Path) -> dict[str, str]:
    """Every entry under ``root``: its kind and content digest (a file), target (a link) or mode (a folder)."""
    out = {}
    if not root.exists() and not root.is_symlink():
        return out
    for path in [root, *sorted(root.rglob("*"))]:
        rel = str(path.relative_to(root))
        try:
            if path.is_symlink():
                out[rel] = "link:" + os.readlink(path)
            elif path.is_dir():
                out[rel] = f"dir:{path.stat().st_mode:o}"
            else:
                out[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
        except OSError as exc:
            out[rel] = f"unreadable:{exc.errno}"
    return out


def assert_unchanged(family: str, before: dict[str, str], root: Path, what: str) -> None:
    after = tree_digest(root)
    if after != before:
        changed = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
        raise breach(family, "damaged", f"{what} changed: {changed[:10]}")
