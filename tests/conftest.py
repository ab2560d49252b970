"""Settings for the whole test run."""

from __future__ import annotations

import os

# Set before any test loads the local embedding engine: its OpenMP threads otherwise spin
# between calls and slow everything else on a 2-core machine.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
# Every workflow run in the tests checks that each worker reads and writes only what it declares
# (memoryscope.workflow.io_check); `MEMORYSCOPE_CHECK_WORKER_IO=0 pytest` turns it off.
os.environ.setdefault("MEMORYSCOPE_CHECK_WORKER_IO", "1")
