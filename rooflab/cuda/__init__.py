"""CUDA backend: cupy kernel loading, GPU timing, device description and GPU ceilings.

Nothing here imports cupy at import time; every entry point probes for it and for a device and
raises DeviceUnavailable with the reason, so the CPU path works on machines without either.
"""
