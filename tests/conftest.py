"""Shared test settings.

matplotlib is imported here, so the commands a test runs in its process draw their learning
curves there (ppo.runs.plotting.CurveDrawer) instead of starting a helper process each;
tests/test_learning_curve.py tests the helper.
"""

import matplotlib.figure  # noqa: F401
import pytest
import torch


@pytest.fixture(autouse=True, scope="session")
def one_torch_thread():
    """Tiny tensors run fastest on one thread, and far slower on two when other processes share the cores."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
