"""``python -m vllm_operator.commands COMMAND ...``: the ``vllm-operator`` console script."""

from __future__ import annotations

from vllm_operator.commands import main

if __name__ == "__main__":
    raise SystemExit(main())
