"""Numba kernels with no C sources, each with a plain-numpy reference beside it."""
from .gae import gae, gae_reference
from .returns import nstep_returns, nstep_returns_reference
from .sampling import sample_from_u, sample_from_u_reference
from .vtrace import vtrace, vtrace_reference
