"""The Ray cluster under a multi-node group of a release without native multi-node flags.

vLLM 0.10.2 and 0.11.0 span nodes only through Ray: a Ray cluster is started first, one
Ray node per pod, and ``vllm serve --distributed-executor-backend ray`` on the head places
one worker per GPU of the cluster. vLLM's own LeaderWorkerSet example does it with its
helper script (vllm-project/vllm ``docs/deployment/frameworks/lws.md``, commit 051f9b87,
and ``examples/online_serving/multi-node-serving.sh``, commit 2584e94b):

- leader: ``multi-node-serving.sh leader --ray_cluster_size=$(LWS_GROUP_SIZE)`` (``ray start
  --head --port=6379``, then polls ``ray.nodes()`` until that many nodes are alive, for at
  most 300 s), then the API server;
- worker: ``multi-node-serving.sh worker --ray_address=$(LWS_LEADER_ADDRESS)`` (``ray start
  --address=<leader>:6379 --block``, retried every 5 s while the head is not up, for at most
  300 s).

The operator renders the same steps itself rather than calling that script: its path in the
image moved between releases (``examples/online_serving/`` then ``examples/ray_serving/``),
and the pods must run the library-path fix (``engine.entrypoint``) before Ray starts, since
Ray's workers inherit the environment of ``ray start``. Both scripts are constants like the
one-node entrypoint (no ``$(`` and no ``$$``, so the kubelet's expansion cannot alter them);
what varies arrives as argv: the leader's ``vllm serve`` arguments, and the workers' leader
address (``$(LWS_LEADER_ADDRESS)``, which the kubelet substitutes). The group size comes in
``VLLMOP_RAY_NODES``. What differs from the example, on purpose: the leader stops with an
error when the group has not joined in ``JOIN_SECONDS`` (the example starts vLLM anyway,
which then waits for GPUs that never come); a worker waits until the head's port answers and
then execs ``ray start --block`` (one attempt, no shell loop around it, so the container ends
with Ray and the group is recreated); ``--disable-usage-stats`` keeps Ray from reporting to
its project (both ``ray start`` flags checked in ray 2.48.0's ``ray/scripts/scripts.py``,
the oldest Ray those releases accept: their wheels require ``ray[cgraph]>=2.48.0``).

Ray comes with those releases: ``vllm`` 0.10.2 and 0.11.0 list ``ray[cgraph]>=2.48.0`` in
their wheels' ``Requires-Dist``, so ``pip install vllm`` and the ``vllm/vllm-openai`` images
have the ``ray`` command; an image built without vLLM's dependencies needs it added.
"""

from __future__ import annotations

from vllm_operator.engine.entrypoint import LIBRARY_PATH_FIX
from vllm_operator.engine.multinode import GROUP_JOIN_SECONDS

# vLLM's example's default (ray_port=6379), Ray's own default GCS port.
RAY_PORT = 6379
NODES_ENV = "VLLMOP_RAY_NODES"
# How long the head waits for the other Ray nodes, and a worker for the head (seconds):
# what the leader's startup probe allows beyond one node's warm-up.
JOIN_SECONDS = GROUP_JOIN_SECONDS
POLL_SECONDS = 5
LEADER_ARGV0 = "vllm-ray-leader"
WORKER_ARGV0 = "vllm-ray-worker"

_WAIT = f"""\
import sys, time
import ray
want = int(sys.argv[1])
deadline = time.monotonic() + {JOIN_SECONDS}
ray.init(address="auto", logging_level="ERROR")
while True:
    alive = sum(1 for node in ray.nodes() if node["Alive"])
    if alive >= want:
        print(f"vllm-ray-leader: {{alive}}/{{want}} Ray nodes alive", file=sys.stderr)
        break
    if time.monotonic() > deadline:
        print(f"vllm-ray-leader: {{alive}}/{{want}} Ray nodes after {JOIN_SECONDS} s",
              file=sys.stderr)
        sys.exit(1)
    time.sleep({POLL_SECONDS})
ray.shutdown()
"""

LEADER_SCRIPT = (
    LIBRARY_PATH_FIX
    + f"""\
nodes="${{{NODES_ENV}:?}}"
ray start --head --port={RAY_PORT} --disable-usage-stats
python3 -c '{_WAIT}' "$nodes"
exec vllm serve "$@"
"""
)

_REACH = f"""\
import socket, sys, time
host, port = sys.argv[1], {RAY_PORT}
deadline = time.monotonic() + {JOIN_SECONDS}
while True:
    try:
        socket.create_connection((host, port), timeout={POLL_SECONDS}).close()
        break
    except OSError as exc:
        if time.monotonic() > deadline:
            print(f"vllm-ray-worker: no Ray head at {{host}}:{{port}} after {JOIN_SECONDS} s:",
                  exc, file=sys.stderr)
            sys.exit(1)
        time.sleep({POLL_SECONDS})
"""

WORKER_SCRIPT = (
    LIBRARY_PATH_FIX
    + f"""\
leader="${{1:?the leader address}}"
python3 -c '{_REACH}' "$leader"
exec ray start --address="$leader:{RAY_PORT}" --block --disable-usage-stats
"""
)


def leader_command() -> list[str]:
    """The leader's ``command``: Ray head, wait for the group, ``vllm serve "$@"``."""
    return ["/bin/sh", "-c", LEADER_SCRIPT, LEADER_ARGV0]


def worker_command() -> list[str]:
    """A worker's ``command``: join the leader's Ray cluster and block; ``args`` hold the
    leader's address."""
    return ["/bin/sh", "-c", WORKER_SCRIPT, WORKER_ARGV0]
