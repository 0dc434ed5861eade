"""Experience mined from known-good kernels: remove one named optimization at a time, keep the removals that
measurably slow the kernel as cold experience items (provenance "mined"). See docs/memory.md, "Mined experience"."""
