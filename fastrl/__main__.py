"""``python -m fastrl``: the ``fastrl`` command, so ``torchrun ... -m fastrl train CONFIG`` launches ranks."""

from fastrl.cli import run

run()
