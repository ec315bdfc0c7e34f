"""Shared test settings."""

import pytest
import torch


@pytest.fixture(autouse=True, scope="session")
def one_torch_thread():
    """Tiny tensors run fastest on one thread, and far slower on two when other processes share the cores."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
