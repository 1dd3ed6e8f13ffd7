"""``python -m vllm_operator.sim MODEL [flags]``: the simulator without the dispatcher."""

from __future__ import annotations

import sys

from vllm_operator.commands.sim import main

if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:], "vllm serve"))
