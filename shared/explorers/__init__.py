"""Interactive explorers: ipywidgets controls wired to plain callbacks that draw a figure or return text.

Every callback (`softmax_scaling_figure`, `positional_encoding_figure`, `attention_figure`, `sample_text`)
works without widgets: given values it returns a matplotlib Figure (or text), and for bad values a message
string instead of raising. An `*_explorer(...)` wires sliders and dropdowns to its callback. Displayed, an
explorer carries the live widget and a static picture of its current view, so front-ends without widgets
(GitHub, nbconvert, nbval) still show the default figure. The live area draws only once a front-end shows the
widget, so a saved notebook stores that picture once (in the output), not twice (output + widget state).
"""

from .base import Explorer, figure_png
from .basics import (  # 01, 04
    positional_encoding_explorer,
    positional_encoding_figure,
    softmax_scaling_explorer,
    softmax_scaling_figure,
)
from .models import (  # 06, 08: attention maps and sampling
    attention_example,
    attention_explorer,
    attention_figure,
    sample_text,
    sampling_explorer,
)

__all__ = [
    "Explorer", "figure_png", "positional_encoding_explorer", "positional_encoding_figure", "softmax_scaling_explorer",
    "softmax_scaling_figure", "attention_example", "attention_explorer", "attention_figure", "sample_text",
    "sampling_explorer",
]
