"""Before/after runs of a script and what they show: counts, times, numerics, and which change did what."""
