import os
import sys

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
if os.path.join(ROOT, "python") not in sys.path and "ANEFORGE_LIBRARY" in os.environ:
    sys.path.insert(0, os.path.join(ROOT, "python"))


@pytest.fixture
def rng():
    return np.random.default_rng(1234)
