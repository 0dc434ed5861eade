"""The options that send a command's streams to a Ray cluster (docs/scale.md); Ray loads only when given."""

from __future__ import annotations

from dataclasses import dataclass

import typer

RayOption = typer.Option(
    None, "--ray", envvar="RAY_ADDRESS",
    help="Run the streams in parallel on Ray: local (a cluster started for this command), auto (the running "
         "cluster), or an address host:port. Env: RAY_ADDRESS. Needs pip install 'kernelsage[ray]'.")
RayCpusOption = typer.Option(None, "--ray-cpus", min=1, help="CPUs of the cluster --ray local starts "
                                                             "(default: all of this machine's).")
EvalSlotsOption = typer.Option(1, "--eval-slots", min=1, help="With --ray and the cpu backend: evaluator slots "
                                                             "(each times one kernel at a time on its own CPU).")
RayInsecureOption = typer.Option(
    False, "--ray-insecure", envvar="KERNELSAGE_RAY_INSECURE",
    help="Join a Ray cluster that checks no token (anyone who reaches it can run code as its user); refused "
         "without this. Env: KERNELSAGE_RAY_INSECURE=1.")
MaxModelCallsOption = typer.Option(
    None, "--max-model-calls", min=1, help="With --ray: at most N model calls in flight per endpoint across the "
                                           "cluster (hosted models' rate limits). Without --ray one call is in "
                                           "flight at a time anyway.")


@dataclass(frozen=True, kw_only=True)
class ScaleOptions:
    ray: str | None = None
    ray_cpus: int | None = None
    ray_insecure: bool = False
    eval_slots: int = 1
    max_model_calls: int | None = None

    def target(self):
        """The cluster the options name (checked, and Ray importable), or None to run sequentially."""
        from kernelsage.scale.cluster import import_ray, ray_target

        target = ray_target(self.ray, self.ray_cpus, self.ray_insecure)
        if target is None and self.ray_cpus is not None:
            from kernelsage.errors import ConfigurationError

            raise ConfigurationError("--ray-cpus sizes the cluster of --ray local: give --ray local too")
        if target is not None:
            import_ray()
        return target
