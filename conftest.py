"""pytest configuration shared by the unit tests and the notebook runs (nbval).

`pytest` on its own runs everything in fast mode: notebooks shrink their sizes but keep every code
path and still assert their results. Set COURSE_FAST=0 to execute the notebooks at CPU size (GPU size on CUDA).
"""

import os

os.environ.setdefault("COURSE_FAST", "1")  # kernels started by nbval inherit this
# pytest runs two test files at a time (-n 2 in pyproject.toml): one thread each keeps two kernels from
# fighting over the same cores (two threads per kernel on a busy 2-core machine run many times slower).
os.environ.setdefault("OMP_NUM_THREADS", "1")


def pytest_collectstart(collector):
    """Stored stderr (tqdm bars, warnings) and HTML differ run to run; compare only text outputs."""
    if collector.fspath and collector.fspath.ext == ".ipynb":
        collector.skip_compare += ("text/html", "application/javascript", "stderr",
                                   "application/vnd.jupyter.widget-view+json")
