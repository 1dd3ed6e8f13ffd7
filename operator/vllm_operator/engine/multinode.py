"""A model that spans nodes: how one vLLM runs as a group of pods, per release. Pure.

``spec.resources.nodes`` above 1 makes each replica a LeaderWorkerSet group
(``render/leaderworkerset.py``): the leader runs vLLM's API server and the workers join it.
vLLM runs across nodes itself; which way depends on the release, and the way is read from
the recorded parser of that release (``flagdata``), never assumed:

- **native** (every release whose parser has ``--nnodes``, ``--node-rank``,
  ``--master-addr``, ``--master-port`` and ``--headless``: 0.11.1 onwards in the recorded
  tables): every pod runs ``vllm serve`` with the same arguments plus ``--nnodes N
  --node-rank R --master-addr LEADER --master-port P``; the workers add ``--headless``
  (no API server). vLLM picks the multiprocessing executor itself when ``nnodes > 1`` on
  CUDA, and each node runs ``world_size / nnodes`` workers (``ParallelConfig.local_world_size``
  and ``MultiprocExecutor``'s assertion that the world size divides by the node count,
  vllm/config/parallel.py and vllm/v1/executor/multiproc_executor.py in 0.11.1 and 0.22.0),
  so tensor x pipeline parallel size must be exactly ``nodes x gpus``.
- **ray** (a release without them whose ``--distributed-executor-backend`` takes ``ray``:
  0.10.2 and 0.11.0): every pod is a node of a Ray cluster (``engine.ray_group``: the leader
  runs the Ray head, waits for the group, then ``vllm serve ... --distributed-executor-backend
  ray``; the workers run ``ray start --address=<leader> --block`` and no vLLM), and vLLM
  places one worker per GPU of the cluster. The same sizing rule holds: the Ray executor
  asks for a placement group of world-size one-GPU bundles (vllm/executor/ray_utils.py
  ``initialize_ray_cluster``, 0.11.0), which waits (up to 1800 s) while the group has fewer
  GPUs, and leaves GPUs idle when it has more.
- a release with neither is refused, saying which release to move to.

The leader's address and a worker's rank are not known when the manifests are rendered:
LeaderWorkerSet puts them in every pod's environment (``LWS_LEADER_ADDRESS``,
``LWS_WORKER_INDEX``; kubernetes-sigs/lws api/leaderworkerset/v1/leaderworkerset_types.go,
v0.10.0), and the kubelet substitutes ``$(VAR)`` in container args. These references are
the only unescaped ``$`` in the arguments: every user string is escaped before them
(``render.deployment.kube_literal``). Data parallelism across nodes (``--data-parallel-*``)
uses other flags and is refused for now, on both backends.
"""

from __future__ import annotations

from dataclasses import dataclass

from vllm_operator.engine.flagdata import FlagTable
from vllm_operator.errors import SpecError

NATIVE = "native"
RAY = "ray"
NATIVE_FLAGS = ("--nnodes", "--node-rank", "--master-addr", "--master-port", "--headless")
# vLLM's own default (ParallelConfig.master_port, 0.11.1 and 0.22.0): the port of the
# torch.distributed store on the leader; the API server listens on spec.service.port.
MASTER_PORT = 29501
LEADER_ADDRESS = "$(LWS_LEADER_ADDRESS)"
WORKER_INDEX = "$(LWS_WORKER_INDEX)"
# The argparse dests the operator sets on a group (extraArgs may not): spec.resources.nodes
# owns the first, the group's shape the others.
NODE_DESTS = ("nnodes", "node_rank", "master_addr", "master_port")
GROUP_DESTS = (*NODE_DESTS, "distributed_executor_backend")


# The leader listens only once every worker has joined, and the workers are scheduled and
# pull their image after it is created: its startup probe gets this much beyond the
# warm-up budget of one node (docs/multi-node.md).
GROUP_JOIN_SECONDS = 600

_WHY_EQUAL = {
    NATIVE: "vLLM runs world size / nnodes workers on each node",
    RAY: "vLLM's Ray executor places one worker per GPU of the group",
}


@dataclass(frozen=True)
class GroupLaunch:
    """What the pods of a multi-node group add to the revision's ``vllm serve`` arguments.

    The leader runs ``LaunchPlan.args`` + ``leader_args``, every worker ``LaunchPlan.args``
    + ``worker_args``; both hold kubelet ``$(VAR)`` references, so they are added after
    the user's arguments are escaped, never escaped themselves.
    """

    nodes: int
    leader_args: tuple[str, ...]
    worker_args: tuple[str, ...]
    # NATIVE: every pod runs `vllm serve`; RAY: the leader runs `vllm serve` after the Ray
    # head (engine.ray_group.leader_command) and ``worker_args`` are a worker's whole
    # arguments, the leader's address for engine.ray_group.worker_command.
    backend: str = NATIVE


def has_native_multinode(table: FlagTable) -> bool:
    """Whether the release recorded in ``table`` runs across nodes without Ray."""
    spellings = {s for option in table.options for s in option.spellings}
    return all(flag in spellings for flag in NATIVE_FLAGS)


def _enums(schema: object) -> set[str]:
    """Every string listed in an ``enum`` anywhere in a recorded JSON schema."""
    if isinstance(schema, dict):
        found = {v for v in schema.get("enum", ()) if isinstance(v, str)}
        for value in schema.values():
            found |= _enums(value)
        return found
    if isinstance(schema, list):
        return set().union(*(_enums(v) for v in schema))
    return set()


def has_ray_backend(table: FlagTable) -> bool:
    """Whether the release's ``--distributed-executor-backend`` takes ``ray``, as its
    recorded config field (``ParallelConfig.distributed_executor_backend``) lists it."""
    option = table.by_dest.get("distributed_executor_backend")
    if option is None or option.engine_field is None:
        return False
    return RAY in _enums(option.engine_field.get("schema"))


def group_backend(table: FlagTable) -> str | None:
    """How the release recorded in ``table`` spans nodes: NATIVE, RAY or None (it cannot)."""
    if has_native_multinode(table):
        return NATIVE
    return RAY if has_ray_backend(table) else None


def group_args(nodes: int, rank: str, address: str = LEADER_ADDRESS) -> tuple[str, ...]:
    """The arguments every pod of a group adds; ``rank`` "0" is the leader's."""
    args: tuple[str, ...] = ("--nnodes", str(nodes), "--node-rank", rank)
    args += ("--master-addr", address, "--master-port", str(MASTER_PORT))
    return args if rank == "0" else (*args, "--headless")


def group_launch(nodes: int, backend: str = NATIVE) -> GroupLaunch:
    """What the leader and the workers of a group of ``nodes`` pods add (or, for a Ray
    worker, run)."""
    if backend == RAY:
        return GroupLaunch(
            nodes=nodes,
            leader_args=("--distributed-executor-backend", RAY),
            worker_args=(LEADER_ADDRESS,),
            backend=RAY,
        )
    return GroupLaunch(
        nodes=nodes,
        leader_args=group_args(nodes, "0"),
        worker_args=group_args(nodes, WORKER_INDEX),
    )


def group_errors(
    *,
    nodes: int,
    gpus: int,
    tensor_parallel: int,
    pipeline_parallel: int,
    data_parallel: int,
    table: FlagTable,
) -> list[SpecError]:
    """Why a group of ``nodes`` pods with ``gpus`` each cannot run this release's vLLM."""
    backend = group_backend(table)
    if backend is None:
        return [
            SpecError(
                "spec.resources.nodes",
                f"is {nodes}, but vLLM {table.version} has neither native multi-node flags "
                "(--nnodes, --node-rank, --master-addr, --master-port, --headless; first in "
                "0.11.1) nor a ray choice for --distributed-executor-backend",
                "use vLLM >= 0.11.1, or spec.resources.nodes: 1",
            )
        ]
    errors: list[SpecError] = []
    if data_parallel > 1:
        errors.append(
            SpecError(
                "spec.engine.extraArgs",
                f"--data-parallel-size {data_parallel} with spec.resources.nodes {nodes}: data "
                "parallelism across nodes takes other flags, which the operator does not set",
                "drop --data-parallel-size and scale with spec.replicas (one group each)",
            )
        )
    world = tensor_parallel * pipeline_parallel
    if data_parallel == 1 and world != nodes * gpus:
        errors.append(
            SpecError(
                "spec.engine.tensorParallelSize",
                f"tensorParallelSize {tensor_parallel} x --pipeline-parallel-size "
                f"{pipeline_parallel} = {world} GPUs, but spec.resources.nodes {nodes} x "
                f"spec.resources.gpus {gpus} = {nodes * gpus}: {_WHY_EQUAL[backend]}, so the "
                "two must be equal",
                f"e.g. tensorParallelSize {gpus} with --pipeline-parallel-size {nodes} in "
                "spec.engine.extraArgs (tensor parallel inside a node, pipeline across)",
            )
        )
    return errors
