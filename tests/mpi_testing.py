"""What the tests that start several processes share: the ``mpiexec`` to start them with
(the one beside this Python, else on the PATH) and the skip mark without one."""
import importlib.util
import os
import shutil
import sys

import pytest


def mpiexec():
    beside = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    return beside if os.path.exists(beside) else shutil.which("mpiexec")


needs_mpi = pytest.mark.skipif(
    importlib.util.find_spec("mpi4py") is None or mpiexec() is None,
    reason="needs mpi4py and mpiexec: pip install fnx[distributed]")
