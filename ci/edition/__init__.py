"""The Chinese edition's tool, by job: common (paths, the translation file), guard (what a translation keeps),
build, check, skeleton, sources (the English each block was translated from) and bump. ci/translate.py is its
command line; see its docstring for the file format."""

import pathlib
import sys

_CI = str(pathlib.Path(__file__).resolve().parents[1])
if _CI not in sys.path:
    sys.path.insert(0, _CI)  # the other ci/ scripts (notebook_header, clean_notebook)
