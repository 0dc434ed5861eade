"""The judge machinery every backend shares: the arena of memory shared with a sandboxed runner, the instances
(keyed seeds, references, placed sets), the judge's core (events, phases, limits, failures), the verdicts of a
case, fresh contents for timed calls, and the resources of a job. The cpu, ascend and triton backends are peers
above it: each imports this package, none imports another backend."""
