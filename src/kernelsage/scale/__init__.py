"""Scale-out on Ray (the `ray` extra): streams as Ray tasks, an evaluator actor per device, one memory database.

Nothing below this package imports Ray; the commands import this package only when `--ray` is given.

- cluster.py: what `--ray` names, joining or starting the cluster (secrets kept out of the runtime
  environment), the database the workers share
- access.py: who can reach the cluster: loopback only for one started here, tokens for one joined
- probe.py: whether a cluster answers at an address, and takes this driver's token, in bounded time
- capacity.py: whether the cluster holds the evaluators and a stream, and why a stream waits
- placement.py: the run's actors on the driver's node, streams spread over the nodes
- faults.py: what the cluster lost past Ray's retries, in one line with the --run-id that goes on
- devices.py: the evaluator actors (one per device) and the backend that sends jobs to them
- gate.py: the per-endpoint bound on model calls in flight
- board.py: the progress the streams report and the driver's live display
- streams.py: `run` and `compare` with one Ray task per (policy, order, seed) stream
- simulate.py: `simulate` with one Ray task per simulated stream
"""
