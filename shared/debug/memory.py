"""Peak CPU memory of a call, counted from torch's own allocations (torch.profiler's memory events).

The profiler records every allocation and free of torch's CPU allocator with a timestamp; summing them in time
order gives the memory the call held at each moment, above what was allocated before it. It sees tensors only
(not the interpreter or the allocator's cached pages), which is what differs between attention implementations.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from torch._C._profiler import _EventType
from torch.profiler import ProfilerActivity, profile


@dataclass
class MemoryReport:
    """peak: the most bytes held at once during the call; allocated: all bytes allocated; large: (operation,
    bytes) of each allocation >= `threshold`, named by the outermost operation ("backward: X" in autograd's X);
    operations: the names of every torch operation the call ran (e.g. which attention kernel)."""

    peak: int
    allocated: int
    large: list[tuple[str, int]] = field(default_factory=list)
    operations: set[str] = field(default_factory=set)


def _walk(nodes):
    for node in nodes:
        yield node
        yield from _walk(node.children)


@contextmanager
def _quiet_stderr() -> Iterator[None]:
    """Silence file descriptor 2 (the profiler's C++ start/stop log lines) for the `with` block."""
    sys.stderr.flush()
    saved, devnull = os.dup(2), os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


def _operation(node) -> str:
    """The outermost operation above an allocation: 'aten::softmax', or 'backward: SoftmaxBackward0'."""
    name = "?"
    while node.parent is not None:
        node = node.parent
        name = node.name
    engine = "autograd::engine::evaluate_function: "
    return "backward: " + name.removeprefix(engine) if name.startswith(engine) else name


def peak_cpu_memory(fn: Callable[[], object], threshold: int = 1 << 20) -> MemoryReport:
    """Call fn() under torch.profiler -> its peak bytes above the start, bytes allocated in all, large allocations."""
    if not callable(fn):
        raise TypeError(f"fn must be a callable taking no arguments, got {type(fn).__name__}")
    prof = profile(activities=[ProfilerActivity.CPU], profile_memory=True)
    with _quiet_stderr():
        prof.start()
    try:
        fn()
    finally:
        with _quiet_stderr():
            prof.stop()
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
                large.append((_operation(node), size))
    operations = {n.name for n in nodes if n.tag == _EventType.TorchOp}
    return MemoryReport(peak, allocated, large, operations)
