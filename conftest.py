"""pytest configuration shared by the unit tests and the notebook runs (nbval).

`pytest` on its own runs everything in fast mode: notebooks shrink their sizes but keep every code
path and still assert their results. Set COURSE_SIZE=cpu (or gpu) to execute the notebooks at that size instead.
"""

import os
import pathlib

ROOT = pathlib.Path(__file__).resolve().parent
CHINESE = ROOT / "notebooks" / "zh"
# The Chinese edition's code is the English notebooks' code (tests/test_translation.py proves it), so one Chinese
# notebook runs under nbval, to show that a generated file executes; the others are not collected.
CHINESE_EXECUTED = {CHINESE / "01_scaled_dot_product_attention.ipynb"}

if not os.environ.get("COURSE_SIZE", "").strip():  # unset or empty (`COURSE_SIZE= pytest`): fast mode
    os.environ["COURSE_SIZE"] = "fast"  # kernels started by nbval inherit this
# pytest runs two test files at a time (-n 2 in pyproject.toml): one thread each keeps two kernels from
# fighting over the same cores (two threads per kernel on a busy 2-core machine run many times slower).
os.environ.setdefault("OMP_NUM_THREADS", "1")


def pytest_collectstart(collector):
    """Stored stderr (tqdm bars, warnings) and HTML differ run to run; compare only text outputs."""
    if collector.fspath and collector.fspath.ext == ".ipynb":
        collector.skip_compare += ("text/html", "application/javascript", "stderr",
                                   "application/vnd.jupyter.widget-view+json")


def pytest_ignore_collect(collection_path, config):
    """Collect no notebook of notebooks/zh/ but CHINESE_EXECUTED, unless it is named on the command line."""
    path = pathlib.Path(collection_path).resolve()
    if path.suffix != ".ipynb" or CHINESE not in path.parents or path in CHINESE_EXECUTED:
        return None
    named = {pathlib.Path(arg.split("::")[0]).resolve() for arg in config.args}
    return None if path in named else True
