"""What the GPU says about itself through NVML, read by the trusted process: clocks, temperature,
throttle reasons, and the memory bandwidth its memory clock and bus width allow.

A timing means little without the state of the machine it was taken on: a GPU throttled for
heat or power runs a kernel slower, and a regrade on a cooler GPU could decide otherwise. So each
timed test records a `snapshot()` before and after. NVML comes from the `nvidia-ml-py` wheel
(module `pynvml`, in the GPU profiles); without it, or without a driver, every function here
says so in its result instead of failing: a missing reading is recorded, never guessed.
"""

from __future__ import annotations

import contextlib
from typing import Any

# nvmlClocksEventReasons / nvmlClocksThrottleReasons bits, named as NVML names them
THROTTLE_REASONS = {
    0x1: "gpu_idle",
    0x2: "applications_clocks_setting",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}
# Reasons that mean the GPU ran slower than it could for reasons of its own (not idling)
SLOWDOWNS = {
    "sw_power_cap",
    "hw_slowdown",
    "sw_thermal_slowdown",
    "hw_thermal_slowdown",
    "hw_power_brake_slowdown",
}


def _nvml() -> tuple[Any, str]:
    """pynvml, initialised, and "" or None and why not."""
    try:
        import pynvml  # lazy: the nvidia-ml-py wheel of the GPU profiles, absent elsewhere
    except ImportError:
        return None, "NVML not readable: the nvidia-ml-py wheel is not installed"
    try:
        pynvml.nvmlInit()
    except Exception as exc:  # noqa: BLE001 - pynvml's errors are its own classes
        return None, f"NVML not readable: nvmlInit failed ({exc})"
    return pynvml, ""


def _read(reading: dict, key: str, call: Any, *args: Any) -> None:
    with contextlib.suppress(Exception):
        value = call(*args)
        reading[key] = value.decode() if isinstance(value, bytes) else value


def snapshot(index: int = 0) -> dict:
    """The GPU's clocks (MHz), temperature (C), power (W) and throttle reasons now; with
    `available: False` and `why` where NVML cannot be read."""
    nvml, why = _nvml()
    if nvml is None:
        return {"available": False, "why": why}
    out: dict[str, Any] = {"available": True}
    try:
        h = nvml.nvmlDeviceGetHandleByIndex(index)
        _read(out, "name", nvml.nvmlDeviceGetName, h)
        _read(out, "driver", nvml.nvmlSystemGetDriverVersion)
        _read(out, "sm_clock_mhz", nvml.nvmlDeviceGetClockInfo, h, nvml.NVML_CLOCK_SM)
        _read(out, "mem_clock_mhz", nvml.nvmlDeviceGetClockInfo, h, nvml.NVML_CLOCK_MEM)
        _read(out, "max_sm_clock_mhz", nvml.nvmlDeviceGetMaxClockInfo, h, nvml.NVML_CLOCK_SM)
        _read(out, "max_mem_clock_mhz", nvml.nvmlDeviceGetMaxClockInfo, h, nvml.NVML_CLOCK_MEM)
        _read(out, "memory_bus_width_bits", nvml.nvmlDeviceGetMemoryBusWidth, h)
        _read(out, "temperature_c", nvml.nvmlDeviceGetTemperature, h, nvml.NVML_TEMPERATURE_GPU)
        _read(out, "power_w", lambda: nvml.nvmlDeviceGetPowerUsage(h) / 1000)
        _read(out, "throttle_mask", nvml.nvmlDeviceGetCurrentClocksThrottleReasons, h)
    except Exception as exc:  # noqa: BLE001 - recorded, never fatal
        out["why"] = f"NVML read failed: {exc}"
    finally:
        with contextlib.suppress(Exception):
            nvml.nvmlShutdown()
    mask = out.get("throttle_mask")
    if isinstance(mask, int):
        out["throttle_reasons"] = reasons(mask)
    return out


def reasons(mask: int) -> list[str]:
    """The names of the throttle-reason bits set in `mask`."""
    return [name for bit, name in THROTTLE_REASONS.items() if mask & bit]


def slowed(reading: dict) -> list[str]:
    """The reasons in a snapshot that slow the GPU down (power, heat), if any."""
    return [r for r in reading.get("throttle_reasons", []) if r in SLOWDOWNS]


def peak_bandwidth(reading: dict) -> float | None:
    """Bytes/s the memory can move at most: max memory clock x 2 (double data rate) x bus
    width; None when NVML did not give both. (A T4: 5001 MHz x 2 x 256 bits = 320 GB/s; an
    H100 SXM: 2619 MHz x 2 x 5120 bits = 3.35 TB/s.)"""
    clock, width = reading.get("max_mem_clock_mhz"), reading.get("memory_bus_width_bits")
    if not (isinstance(clock, (int, float)) and isinstance(width, int)) or clock <= 0:
        return None
    return clock * 1e6 * 2 * width / 8


# The NVML clock-event counters (nvmlDeviceGetViolationStatus) that grow while the GPU is held
# below its clocks for power or heat: NVML_PERF_POLICY_POWER, NVML_PERF_POLICY_THERMAL.
VIOLATION_POLICIES = {0: "power", 1: "thermal"}


class RoundWatch:
    """`grader.core.timing.Watch` on NVML: a round is spoiled when, between `start()` and
    `spoiled()`, the SM or memory clock changed, a power or thermal violation counter grew, or
    a slowdown reason is set at its end. Without NVML it spoils nothing (and says so once in
    `why`). NVML is opened once, closed by `close()`."""

    def __init__(self, index: int = 0) -> None:
        self.nvml, self.why = _nvml()
        self.handle: Any = None
        if self.nvml is not None:
            try:
                self.handle = self.nvml.nvmlDeviceGetHandleByIndex(index)
            except Exception as exc:  # noqa: BLE001 - recorded, never fatal
                self.why = f"NVML handle failed: {exc}"
        self.before: dict = {}

    def _state(self) -> dict:
        n, h = self.nvml, self.handle
        out: dict[str, Any] = {}
        if h is None:
            return out
        _read(out, "sm_clock_mhz", n.nvmlDeviceGetClockInfo, h, n.NVML_CLOCK_SM)
        _read(out, "mem_clock_mhz", n.nvmlDeviceGetClockInfo, h, n.NVML_CLOCK_MEM)
        _read(out, "throttle_mask", n.nvmlDeviceGetCurrentClocksThrottleReasons, h)
        for policy, name in VIOLATION_POLICIES.items():
            _read(out, name, lambda p=policy: n.nvmlDeviceGetViolationStatus(h, p).violationTime)
        return out

    def start(self) -> None:
        self.before = self._state()

    def spoiled(self) -> str | None:
        return spoiled(self.before, self._state())

    def close(self) -> None:
        if self.nvml is not None:
            with contextlib.suppress(Exception):
                self.nvml.nvmlShutdown()
            self.nvml, self.handle = None, None


def spoiled(before: dict, after: dict) -> str | None:
    """Why a round between two `RoundWatch` states must be discarded, or None."""
    for key in ("sm_clock_mhz", "mem_clock_mhz"):
        if key in before and key in after and before[key] != after[key]:
            return f"{key} changed from {before[key]} to {after[key]} during the round"
    for name in VIOLATION_POLICIES.values():
        if isinstance(before.get(name), int) and after.get(name, 0) > before[name]:
            return f"the GPU was held below its clocks for {name} during the round"
    mask = after.get("throttle_mask")
    slow = slowed({"throttle_reasons": reasons(mask)}) if isinstance(mask, int) else []
    return f"throttled ({', '.join(slow)}) at the round's end" if slow else None
