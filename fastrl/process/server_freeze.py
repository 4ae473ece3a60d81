"""Imported by the fork server alone, last of ``fork_server.PRELOAD``: the objects of every preloaded module
(torch's above all) are moved out of the garbage collector's reach (``gc.freeze``).

A worker forked from the server shares the server's memory copy-on-write. The collector's first full pass
in a worker walked every object torch had made and wrote to each one's header, so the worker copied
hundreds of MB of pages it never used and spent ~0.4 s of its start-up doing it (three workers on two
cores: most of a small run's start-up). Frozen objects are never walked; they are the server's modules,
which live as long as the process anyway. Python's own docs give this use of ``gc.freeze`` before a fork.
"""

import gc

gc.freeze()
