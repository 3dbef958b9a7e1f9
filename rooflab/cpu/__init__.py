"""The CPU backend: how the driver times, probes the clock and limits threads on this CPU."""
