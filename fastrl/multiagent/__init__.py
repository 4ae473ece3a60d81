"""Multi-agent play as a layer on the core: agent rows, the self-play pool, named policies. Importing this package
registers its parts (light: the implementations are named by path and imported when a run needs them)."""

from __future__ import annotations
