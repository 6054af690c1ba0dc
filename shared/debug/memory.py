"""Peak CPU memory of a call, counted from torch's own allocations (torch.profiler's memory events).

The profiler records every allocation and free of torch's CPU allocator with a timestamp; summing them in time
order gives the memory the call held at each moment, above what was allocated before it. It sees tensors only
(not the interpreter or the allocator's cached pages), which is what differs between attention implementations.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from torch._C._profiler import _EventType
from torch.profiler import ProfilerActivity, profile


@dataclass
class MemoryReport:
    """peak: the most bytes held at once during the call; large: (op name, bytes) of allocations >= `threshold`."""

    peak: int
    allocated: int
    large: list[tuple[str, int]] = field(default_factory=list)


def _walk(nodes):
    for node in nodes:
        yield node
        yield from _walk(node.children)


def peak_cpu_memory(fn: Callable[[], object], threshold: int = 1 << 20) -> MemoryReport:
    """Call fn() under torch.profiler -> its peak bytes above the start, bytes allocated in all, large allocations."""
    if not callable(fn):
        raise TypeError(f"fn must be a callable taking no arguments, got {type(fn).__name__}")
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        fn()
    nodes = list(_walk(prof.profiler.kineto_results.experimental_event_tree()))
    allocations = sorted((n for n in nodes if n.tag == _EventType.Allocation and n.extra_fields.device.type == "cpu"),
                         key=lambda n: n.start_time_ns)
    held = peak = allocated = 0
    large = []
    for node in allocations:
        size = node.extra_fields.alloc_size  # negative for a free
        held += size
        peak = max(peak, held)
        if size > 0:
            allocated += size
            if size >= threshold:
                large.append((node.parent.name if node.parent is not None else "?", size))
    return MemoryReport(peak, allocated, large)
