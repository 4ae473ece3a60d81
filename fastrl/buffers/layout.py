"""Where every array of a run lives inside its one shared-memory segment.

A layout is computed once by the main process from the config and handed (pickled, a few
hundred bytes) to every worker, which maps the same segment and gets the same views.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

ALIGN = 64  # cache-line aligned fields: no false sharing between neighbouring arrays


@dataclass(frozen=True)
class FieldSpec:
    name: str
    shape: tuple[int, ...]
    dtype: str
    offset: int

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * np.dtype(self.dtype).itemsize


@dataclass(frozen=True)
class Layout:
    fields: tuple[FieldSpec, ...]
    nbytes: int

    @classmethod
    def plan(cls, arrays: list[tuple[str, tuple[int, ...], str]]) -> Layout:
        fields, offset = [], 0
        for name, shape, dtype in arrays:
            spec = FieldSpec(name, tuple(int(s) for s in shape), np.dtype(dtype).str, offset)
            fields.append(spec)
            offset += -(-spec.nbytes // ALIGN) * ALIGN
        return cls(tuple(fields), max(offset, ALIGN))

    def field(self, name: str) -> FieldSpec:
        for spec in self.fields:
            if spec.name == name:
                return spec
        raise KeyError(name)
