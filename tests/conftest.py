import pytest
import torch


@pytest.fixture(autouse=True, scope="session")
def one_thread():
    """Unit tests use tiny tensors: one thread avoids waiting on a busy second core (restored afterwards)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="session")
def playwright():
    """One Playwright driver per test process, shared by the browser tests of every file. Its sync API runs an
    event loop in this thread, so a second sync_playwright() while one is open would fail ("using Playwright Sync
    API inside the asyncio loop") whenever two browser test files land on the same pytest-xdist worker."""
    from tests.test_browser import _missing

    reason = _missing()
    if reason:
        pytest.skip(reason)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as driver:  # its event loop runs in this thread until the session ends (nbval's kernels
        yield driver  # still run: jupyter_core's run_sync copes with a running loop)
