"""The shared-memory segment, its slots and weights (fastrl/buffers), and /dev/shm running out."""
