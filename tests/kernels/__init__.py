"""The numba kernels (csrc_free_kernels), each against its plain-numpy reference."""
