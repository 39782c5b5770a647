"""One process of a multi-process run, as torchrun starts it:
``python -m archfit.train RUN_DIR [--restart] [--no-memory-check]`` (:func:`worker.worker`)."""

import sys

from archfit.train.worker import worker

sys.exit(worker(sys.argv[1], "--restart" in sys.argv[2:], "--no-memory-check" not in sys.argv[2:]))
