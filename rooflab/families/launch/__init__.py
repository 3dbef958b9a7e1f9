"""Family `launch`: the GPU launch and dispatch paths, the floor of the roofline on a GPU (cuda.py).
The CPU dispatch paths are the `latency` family (rooflab/families/latency.py), which also holds the
plain empty-kernel launch the GPU ceilings suite times three ways."""
