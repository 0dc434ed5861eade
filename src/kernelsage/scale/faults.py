"""A failure of the cluster rather than of the run's own code, said in one line with how to go on.

Ray retries a stream whose worker or node died; what still fails after that (a node lost with the only
copy of a result, an actor gone, every retry spent) reaches the driver as one of Ray's system errors, whose
text is a page of traceback. The command ends instead with what was lost and the --run-id that resumes the
run: finished episodes are in their JSONL files and the episode in progress has its checkpoint.
"""

from __future__ import annotations

from typing import Any

from kernelsage.errors import ClusterError

# What each of Ray's system errors lost, in words (the first class in an error's ancestry that is named here)
LOST = {
    "NodeDiedError": "a node",
    "LocalRayletDiedError": "the driver's own Ray node",
    "WorkerCrashedError": "a stream's worker (its process or its node died)",
    "OutOfMemoryError": "a stream's worker (Ray killed it for want of memory)",
    "OwnerDiedError": "the owner of a result",
    "ObjectLostError": "a stream's result (the node that held it)",
    "ActorDiedError": "one of the run's actors (the board, the device pool, an evaluator or a gate)",
    "RayActorError": "one of the run's actors (the board, the device pool, an evaluator or a gate)",
    "TaskUnschedulableError": "every node a stream could run on",
    "ActorUnschedulableError": "every node an actor of the run could run on",
    "RaySystemError": "part of its system",
}


def _system_error(ray: Any, error: BaseException | None) -> BaseException | None:
    """The Ray system error behind `error` (itself, or what a stream's code met, e.g. calling the device
    pool), or None for an error of the run's own."""
    if isinstance(error, ray.exceptions.RayTaskError):
        return _system_error(ray, getattr(error, "cause", None))
    if not isinstance(error, ray.exceptions.RayError) or isinstance(error, ray.exceptions.TaskCancelledError):
        return None
    return error


def cluster_failure(ray: Any, error: BaseException, *, run_id: str | None = None) -> ClusterError | None:
    """The one-line error a command ends with when `error` says the cluster lost something past Ray's
    retries, naming what and how to go on; None when `error` is not the cluster's."""
    system = _system_error(ray, error)
    if system is None:
        return None
    what = next((LOST[c.__name__] for c in type(system).__mro__ if c.__name__ in LOST), "part of its system")
    resume = (f"run the command again with --run-id {run_id} and the same options: finished episodes are kept "
              "and the one in progress goes on from its last step") if run_id else "run the command again"
    return ClusterError(f"the Ray cluster lost {what} ({type(system).__name__}) and Ray's retries did not "
                        f"recover it; {resume}")
