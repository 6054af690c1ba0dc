import pytest
import torch


@pytest.fixture(autouse=True, scope="session")
def one_thread():
    """Unit tests use tiny tensors: one thread avoids waiting on a busy second core (restored afterwards)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
