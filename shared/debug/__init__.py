"""Debugging aids: find the first module that made a NaN, per-layer statistics, and a stage-by-stage attention trace.

- `shared.debug.nonfinite` (notebook 07): `FirstNonFinite`, `layer_stats`, `nonfinite_parameters`, `anomaly_origin`.
- `shared.debug.attention_trace` (notebook 02): `attention_stages` and `trace_attention` for any attention module.
- `shared.debug.memory` (notebook 15): `peak_cpu_memory`, the peak bytes a call allocates, from torch.profiler.
- `shared.debug.shapes` (notebooks 05, 06, 08): `print_shapes`, every named module's output shape in a forward pass.
"""

from .attention_trace import STAGES, attention_stages, trace_attention
from .memory import MemoryReport, peak_cpu_memory
from .nonfinite import (
    Anomaly,
    FirstNonFinite,
    LayerStat,
    NonFinite,
    NonFiniteError,
    anomaly_origin,
    format_stats,
    layer_stats,
    nonfinite_parameters,
)
from .shapes import print_shapes

__all__ = [
    "STAGES", "attention_stages", "trace_attention", "Anomaly", "FirstNonFinite", "LayerStat", "NonFinite",
    "NonFiniteError", "anomaly_origin", "format_stats", "layer_stats", "nonfinite_parameters", "print_shapes",
    "MemoryReport", "peak_cpu_memory",
]
