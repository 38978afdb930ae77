"""`--ray ADDRESS`: shard the files over a Ray cluster, one engine per worker.

Each worker is a Ray actor holding its own engine client (one GPU each when
the cluster has enough GPUs, else one CPU) and runs the same
`refactor_files` pipeline on its shard; results come back to the driver for
the diff, the report and the exit code. With `--apply` the workers write the
files, so the paths must be the same on every node (a shared checkout).
`ADDRESS` is passed to `ray.init` ("auto", "ray://host:10001", ...);
"local" starts a throwaway local cluster with one CPU per worker.

Ray is optional (`pip install ray`); without it `--ray` is a usage error.
"""

from __future__ import annotations

import asyncio
from typing import Any

from dllm_lsp.refactor.recipes import Recipe
from dllm_lsp.refactor.runner import FileResult, RunOptions, refactor_files


class RayUnavailable(RuntimeError):
    pass


class ShardWorker:
    """The actor body: one engine for the actor's lifetime, then one pipeline run per shard."""

    def __init__(self, engine: dict[str, Any]) -> None:
        self.engine = engine

    def run(self, files: list[str], recipe: Recipe, options: RunOptions) -> list[FileResult]:
        from dllm_lsp.refactor.session import make_client

        async def go() -> list[FileResult]:
            client = make_client(self.engine["engine"], self.engine["model"], self.engine["socket"])
            try:
                return await refactor_files(files, recipe, client, options)
            finally:
                await client.close()

        return asyncio.run(go())


def shard(files: list[str], workers: int) -> list[list[str]]:
    """Round-robin shards (neighbouring files, often of similar size, go to different workers)."""
    shards = [files[i::workers] for i in range(max(1, workers))]
    return [s for s in shards if s]


def run_on_ray(address: str, workers: int, files: list[str], recipe: Recipe, options: RunOptions,
               engine: dict[str, Any]) -> list[FileResult]:
    try:
        import ray
    except ImportError:
        raise RayUnavailable("--ray needs Ray: pip install ray") from None
    started_here = not ray.is_initialized()
    if started_here:
        if address == "local":
            ray.init(num_cpus=workers, include_dashboard=False, log_to_driver=False)
        else:
            ray.init(address=address, log_to_driver=False)
    try:
        gpus = ray.cluster_resources().get("GPU", 0)
        resources = {"num_gpus": 1} if gpus >= workers else {"num_cpus": 1}
        actor_cls = ray.remote(**resources)(ShardWorker)
        options = RunOptions(**{**options.__dict__, "progress": False, "jobs": 1})
        parts = shard(files, workers)
        actors = [actor_cls.remote(engine) for _ in parts]
        refs = [actor.run.remote(part, recipe, options) for actor, part in zip(actors, parts)]
        try:
            by_path = {r.path: r for chunk in ray.get(refs) for r in chunk}
        except KeyboardInterrupt:
            for actor in actors:
                ray.kill(actor)
            raise
        return [by_path[f] for f in files]
    finally:
        if started_here:
            ray.shutdown()
