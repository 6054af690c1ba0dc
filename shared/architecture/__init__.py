"""The whole-architecture map: the 2017 encoder-decoder, the GPT-2 decoder and a Llama-style block, drawn by code.

Each kind is one small table (`DIAGRAMS`, in `diagrams`): boxes on a grid of columns and rows, each with the paper's
name, the course object that implements it (a dotted name inside `shared`, e.g. "attention.MultiHeadAttention"), the
notebook that builds it, and the parts it belongs to (what `highlight` shades). `plot_architecture` (in `drawing`)
draws a table.
"""

from .diagrams import DIAGRAMS, KINDS, Box, Diagram, Frame, Link, parts_of
from .drawing import FRAME_LIT, HIGHLIGHT, plot_architecture

__all__ = ["DIAGRAMS", "FRAME_LIT", "HIGHLIGHT", "KINDS", "Box", "Diagram", "Frame", "Link", "parts_of",
           "plot_architecture"]
