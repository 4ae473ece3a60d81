"""``python -m fastrl``: the ``fastrl`` command, so ``torchrun ... -m fastrl train CONFIG`` launches ranks."""

import sys

from fastrl.cli import main

sys.exit(main())
