"""One registry mechanism for every extension point: algorithms, models, env backends, layers and the parts a
layer is made of (learner extensions, row roles, plan hooks, metrics sections), modes and derived defaults.

Every point is a ``Registry`` and follows the same rules:

- **a value or its path**: ``register(name, value)`` takes the object, or ``"package.module:attr"``, imported
  (through ``fastrl.plugins.imported``, the one function that does) the first time the run needs it;
- **a name registered twice** is an error naming the point and the name, unless it is the same value again
  (a module imported twice, a worker re-importing its plug-ins) or ``replace=True`` says so;
- **one error type**: ``RegistryError`` (a ``ConfigError``: exit 2, before anything starts), naming the point,
  the name and what it allows;
- **one order**: ``order`` (a number, lower first; registrations of one order keep their registration order);
- **entry points**: a point with a ``group`` also holds what installed packages declare under that group in
  their metadata (``[project.entry-points."fastrl.algorithms"]``, ``name = "package.module:attr"``), so a plug-in
  installed with pip is found in every process of a run, with no import in the user's script.
  ``check_entry_points`` imports every one of them at the config check: a broken one is a named error there, not
  a traceback in a worker.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from fastrl.errors import ConfigError
from fastrl.plugins import imported

T = TypeVar("T")

# the entry-point groups a package registers its parts under (docs/extending.md, "Shipping a plug-in")
GROUPS = {
    "algorithm": "fastrl.algorithms",
    "env backend": "fastrl.env_backends",
    "model": "fastrl.models",
    "layer": "fastrl.layers",
}


# every extension point's registry by its point's name, for what stands below the registries and reads their names
# (the schema's engine.mode lists the registered modes without importing fastrl.modes)
POINTS: dict[str, Registry] = {}


def registered_names(point: str) -> tuple[str, ...]:
    """The names registered at ``point`` (``Registry.names``)."""
    if point not in POINTS:
        raise RuntimeError(f"no registry of {point}s was made: it is made when fastrl is imported")
    return POINTS[point].names()


def registered_summaries(point: str) -> str:
    """Each name registered at ``point`` with its value's ``summary`` where it has one, for a key's documentation."""
    if point not in POINTS:
        raise RuntimeError(f"no registry of {point}s was made: it is made when fastrl is imported")
    return ", ".join(
        f"{name!r} ({summary})" if (summary := getattr(value, "summary", "")) else repr(name)
        for name, value in POINTS[point].items()
    )


class RegistryError(ConfigError):
    """A name no registry point holds, registered twice, or whose registration is broken."""


@dataclass
class _Entry(Generic[T]):
    name: str
    value: T | str  # the object, or its "package.module:attr" until first used
    order: float
    source: str  # where it came from, for messages: "registered", or the entry point's distribution


class Registry(Generic[T]):
    """The named values of one extension point (``point``: how messages name it, e.g. ``"model"``).

    ``check(name, value)`` returns what is wrong with a value, or None; it runs when the value is registered or,
    for a path, first resolved. A registration that gives no ``order`` (an entry point's) is placed at 0."""

    def __init__(self, point: str, *, check: Callable[[str, Any], str | None] | None = None):
        self.point = point
        POINTS.setdefault(point, self)  # the first registry of a point is the one the config's keys read
        self.group = GROUPS.get(point)
        self._check = check
        self._entries: dict[str, _Entry[T]] = {}
        self._plugins_loaded = self.group is None

    # ------------------------------------------------------------------ registering

    def register(self, name: str, value: T | str, *, order: float | None = None, replace: bool = False) -> T | str:
        """Make ``value`` (or its ``"package.module:attr"``) known as ``name``; returns ``value``."""
        if not isinstance(name, str) or not name or name != name.strip() or ":" in name:
            raise RegistryError(f"{self.point} {name!r}: a name is a non-empty word without ':' or outer spaces")
        if not isinstance(value, str):
            self._validate(name, value)
        elif ":" not in value:
            raise RegistryError(f"{self.point} {name!r}: expected the object or 'package.module:attr', got {value!r}")
        known = self._entries.get(name)
        if known is not None and _being_imported(known):  # the entry point's module registers itself on import
            known.value = value
            return value
        if known is not None and not replace and not _same(known.value, value):
            raise RegistryError(
                f"{_article(self.point)} {self.point} named {name!r} is registered already ({known.source}); "
                "register it with replace=True to replace it"
            )
        where = order if order is not None else known.order if known is not None else 0.0
        self._entries[name] = _Entry(name, value, float(where), "registered")
        return value

    @contextlib.contextmanager
    def scoped(self) -> Iterator[Registry[T]]:
        """Registrations made inside the block are forgotten after it (a test's own)."""
        saved = dict(self._entries)
        try:
            yield self
        finally:
            self._entries = saved

    def unregister(self, name: str) -> None:
        """Forget ``name`` (a test's own registration, once it is done)."""
        self._entries.pop(name, None)

    # ------------------------------------------------------------------ finding

    def get(self, name: str) -> T:
        """The value registered as ``name`` (imported if it was registered by path)."""
        found = self.find(name)
        if found is None:
            raise RegistryError(f"no {self.point} named {name!r}; {self.allowed()}")
        return found

    def find(self, name: str) -> T | None:
        """The value registered as ``name``, or None."""
        self._load_plugins()
        entry = self._entries.get(name)
        return None if entry is None else self._resolved(entry)

    def __contains__(self, name: object) -> bool:
        self._load_plugins()
        return name in self._entries

    def names(self) -> tuple[str, ...]:
        """Every name, in order."""
        return tuple(entry.name for entry in self._ordered())

    def items(self) -> Iterator[tuple[str, T]]:
        """Every (name, value), in order, each imported where it was registered by path."""
        for entry in self._ordered():
            yield entry.name, self._resolved(entry)

    def values(self) -> Iterator[T]:
        for _, value in self.items():
            yield value

    def allowed(self) -> str:
        names = ", ".join(repr(name) for name in self.names())
        return f"registered {self.point}s: {names or 'none'}"

    # ------------------------------------------------------------------ entry points

    def _load_plugins(self) -> None:
        if self._plugins_loaded or self.group is None:
            return
        self._plugins_loaded = True
        for point in importlib.metadata.entry_points(group=self.group):
            if point.name in self._entries:
                raise RegistryError(
                    f"entry point {point.name!r} of {self.group!r} ({_dist(point)}) names {_article(self.point)} "
                    f"{self.point} that is registered already ({self._entries[point.name].source})"
                )
            self._entries[point.name] = _Entry(point.name, point.value, 0.0, f"from {_dist(point)}")

    # ------------------------------------------------------------------ internals

    def _ordered(self) -> list[_Entry[T]]:
        self._load_plugins()
        return sorted(self._entries.values(), key=lambda entry: entry.order)  # stable: registration order in ties

    def _resolved(self, entry: _Entry[T]) -> T:
        if isinstance(entry.value, str):
            what = f"{self.point} {entry.name!r}" + ("" if entry.source == "registered" else f" ({entry.source})")
            try:
                value = imported(entry.value, what)
            except RegistryError:
                raise
            except ConfigError as exc:  # the path does not import: the one error type of a registry
                raise RegistryError(str(exc)) from None
            if not isinstance(entry.value, str):  # its module registered it while importing: that value
                return entry.value
            self._validate(entry.name, value)
            entry.value = value
        return entry.value  # type: ignore[return-value]

    def _validate(self, name: str, value: Any) -> None:
        problem = self._check(name, value) if self._check is not None else None
        if problem:
            raise RegistryError(f"{self.point} {name!r} cannot be registered: {problem}")


def _dist(entry: importlib.metadata.EntryPoint) -> str:
    """The package that declares an entry point, for messages."""
    return getattr(entry.dist, "name", None) or "an installed package"


def _article(word: str) -> str:
    return "an" if word[0] in "aeiou" else "a"


def _being_imported(entry: _Entry) -> bool:
    """An entry point's value not yet imported (its module, registering its own name as it loads)."""
    return isinstance(entry.value, str) and entry.source != "registered"


def _same(a: Any, b: Any) -> bool:
    """The same registration again: the same object, an equal value, or the same path."""
    try:
        return a is b or a == b
    except Exception:  # an object whose == raises (arrays) is not the same registration
        return False


_entry_points_checked = False


def check_entry_points() -> None:
    """Every installed package's fastrl entry points (each group of ``GROUPS``), imported once a process: a broken
    one is a ``RegistryError`` naming the package, the group and the entry, raised at the config check
    (``fastrl.config.validate``) rather than as a traceback in a worker."""
    global _entry_points_checked
    if _entry_points_checked:
        return
    for point, group in GROUPS.items():
        for entry in importlib.metadata.entry_points(group=group):
            try:
                entry.load()
            except Exception as exc:  # the plug-in's own import failed: bad input, named
                raise RegistryError(
                    f"the {point} {entry.name!r} that {_dist(entry)} declares (entry point {entry.value!r} of group "
                    f"{group!r}) does not load: {type(exc).__name__}: {exc}"
                ) from None
    _entry_points_checked = True
