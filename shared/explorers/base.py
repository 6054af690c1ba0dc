"""The Explorer widget (controls + live area + static view) and small helpers every explorer uses.

`basics` (01, 04) and `models` (06, 08) build on this module; it imports neither.
"""

from __future__ import annotations

import base64
import io
import math
from collections.abc import Callable

import ipywidgets as widgets
from IPython.display import Image, display
from matplotlib.figure import Figure


class Explorer:
    """Controls + a live output area; `render(**values)` calls the callback, display shows widget + static view."""

    PLACEHOLDER = "The figure is drawn here when a Jupyter front-end shows the controls; move one to redraw."

    def __init__(self, callback: Callable, controls: dict[str, widgets.Widget], title: str = "") -> None:
        self.callback, self.controls, self.title = callback, controls, title
        # Until a front-end shows the widget, the live area holds one line of text, not the figure: a notebook
        # executed headless (nbconvert) then saves the figure once, in the static view, not also in widget state.
        self.output = widgets.Output(outputs=({"output_type": "stream", "name": "stdout",
                                               "text": self.PLACEHOLDER + "\n"},))
        self._last = None  # (values, result) of the latest render
        self.displayed = False  # whether the explorer has been displayed (its static view computed)
        self.drawn = False  # whether the live area shows the callback's result yet
        self.widget = widgets.VBox([widgets.HBox(list(controls.values()), layout={"flex_flow": "row wrap"}),
                                    self.output])
        self.widget._view_count = 0  # the front-end counts the views it shows (ipywidgets' view tracking)
        self.widget.observe(self._shown, names="_view_count")
        for control in controls.values():
            control.observe(self.refresh, names="value")

    def _shown(self, change) -> None:
        """A front-end displayed the widget: draw the live area the first time."""
        if (change["new"] or 0) > 0 and not self.drawn:
            self.refresh()

    def values(self) -> dict:
        """The current value of every control, by the callback's argument names."""
        return {name: control.value for name, control in self.controls.items()}

    def render(self, **overrides):
        """The callback's result (Figure or text) for the current values, with `overrides` applied."""
        return self.callback(**{**self.values(), **overrides})

    def current(self):
        """The callback's result for the current values (computed once per set of values)."""
        values = self.values()
        if self._last is None or self._last[0] != values:
            self._last = (values, self.callback(**values))
        return self._last[1]

    def refresh(self, change=None) -> None:
        """Redraw the live area: when a front-end first shows it, and on every control change after display."""
        if change is not None and not (self.displayed or self.drawn):
            return  # a control set before display: the display draws the new values
        result = self.current()
        self.output.clear_output(wait=True)
        with self.output:
            if isinstance(result, Figure):
                display(Image(data=figure_png(result)))
            else:
                print(result)
        self.drawn = True

    def _repr_mimebundle_(self, include=None, exclude=None) -> dict:
        bundle = self.widget._repr_mimebundle_(include=include, exclude=exclude)
        self.displayed = True
        result = self.current()
        bundle["text/plain"] = f"{self.title} (interactive in JupyterLab; static view of the settings shown)"
        if isinstance(result, Figure):
            bundle["image/png"] = base64.b64encode(figure_png(result)).decode("ascii")
        else:
            bundle["text/plain"] = str(result)
        return bundle


def figure_png(fig: Figure, dpi: int = 80) -> bytes:
    """PNG bytes of a figure (kept small for notebooks)."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi, bbox_inches="tight")
    return buffer.getvalue()


def bad_int(name: str, value, low: int, high: int | None = None, meaning: str = "") -> str | None:
    """A message when `value` is not an int in [low, high], else None."""
    if isinstance(value, bool) or not isinstance(value, int) or value < low or (high is not None and value > high):
        span = f"between {low} and {high}" if high is not None else f">= {low}"
        return f"{name} must be an integer {span}{f' ({meaning})' if meaning else ''}, got {value!r}."
    return None


def bad_positive(name: str, value, meaning: str = "") -> str | None:
    """A message when `value` is not a finite number > 0, else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        return f"{name} must be a number > 0{f' ({meaning})' if meaning else ''}, got {value!r}."
    return None


def slider(cls, value, description, **kwargs):
    """An ipywidgets slider of class `cls` that updates on release (continuous_update=False)."""
    return cls(value=value, description=description, continuous_update=False, style={"description_width": "initial"},
               **kwargs)


# ---------------------------------------------------------------- 01: why divide by sqrt(d_k)
