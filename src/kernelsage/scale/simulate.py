"""`simulate` on Ray: each simulated (policy, order, seed) stream is one Ray task on the shared store.

The simulator's study takes a dispatch (evals/simulator/dispatch.py): this one hands every stream of a study
to Ray at once and yields the outcomes as they end; the study puts them in its own order, so the figures are
those of the sequential study. A cluster without a node that holds one stream is refused before any is sent
(capacity.py); streams are spread over the nodes, and what the cluster lost past Ray's retries ends the
command in one line (faults.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

from kernelsage.errors import ConfigurationError
from kernelsage.evals.simulator.dispatch import Dispatch, StreamOutcome, run_one
from kernelsage.evals.simulator.run import StreamSpec
from kernelsage.scale.capacity import alive_nodes, capacity_problem
from kernelsage.scale.cluster import import_ray
from kernelsage.scale.faults import cluster_failure
from kernelsage.scale.placement import SPREAD

SIMULATED_STREAM_CPUS = 1  # a simulated stream computes (numpy, the store) rather than waits
STREAM_RETRIES = 3  # a stream whose worker died runs again from its start, in a fresh namespace


def ray_dispatch(database_url: str, keep: Callable[[StreamSpec], bool]) -> Dispatch:
    """Run the streams as Ray tasks on the cluster already joined, each on its own store at `database_url`;
    `keep(stream)` says whether its whole result comes back (for the plots)."""
    def dispatch(specs: Sequence[StreamSpec]) -> Iterator[StreamOutcome]:
        ray = import_ray()
        problem = capacity_problem(alive_nodes(ray.nodes()), None, SIMULATED_STREAM_CPUS)
        if problem:
            raise ConfigurationError(problem)
        task: Any = ray.remote(num_cpus=SIMULATED_STREAM_CPUS, max_retries=STREAM_RETRIES,
                               scheduling_strategy=SPREAD)(run_one)
        pending = [task.remote(spec, database_url, keep(spec)) for spec in specs]
        try:
            while pending:
                ready, pending = ray.wait(pending, num_returns=1)
                yield _outcome(ray, ready[0])
        finally:  # stopped early (Ctrl-C, a failed stream): the rest would run for nothing
            for ref in pending:
                ray.cancel(ref, force=True)
    return dispatch


def _outcome(ray: Any, ref: Any) -> StreamOutcome:
    """A stream's outcome; what the cluster lost past Ray's retries is said in one line."""
    try:
        return ray.get(ref)
    except ray.exceptions.RayError as exc:
        failure = cluster_failure(ray, exc)
        if failure is None:
            raise
        raise failure from None
