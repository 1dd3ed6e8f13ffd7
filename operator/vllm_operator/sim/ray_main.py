"""``python -m vllm_operator.sim.ray_main``: the simulated ``ray`` command.

A module of its own because ``python -m`` of ``sim.ray_cluster`` would run a second copy of
a module the ``sim`` package has already imported; the command is ``ray_cluster.main``.
"""

from __future__ import annotations

import sys

from vllm_operator.sim.ray_cluster import main

if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
