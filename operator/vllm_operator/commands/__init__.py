"""`vllm-operator`: one entry point, one subcommand per job.

Each subcommand is a module of this package exposing ``main(argv, prog) -> int``: argument
parsing and the file, stdin and clock of the command live here, never in the pure core it
drives. This module only dispatches, lazily, so importing the CLI never pulls kopf into
``bench`` or ``sim`` and each subcommand owns its complete ``--help``. ``demo`` lives in
the separate devcluster distribution (``embedded-cluster/``): the product never imports it,
this table names it by string and says what to install when it is absent.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Sequence
from typing import NamedTuple

from vllm_operator import __version__


class Command(NamedTuple):
    module: str
    summary: str
    missing: str = ""  # what to install when ``module`` comes from another distribution


COMMANDS: dict[str, Command] = {
    "run": Command("vllm_operator.commands.run", "start the operator (kopf) against a cluster"),
    "render": Command(
        "vllm_operator.commands.render",
        "print the manifests a VLLMDeployment becomes (no cluster)",
    ),
    "crds": Command(
        "vllm_operator.commands.crds", "write the CustomResourceDefinition from the API models"
    ),
    "bench": Command(
        "vllm_operator.commands.bench",
        "benchmark and quality-gate an OpenAI-compatible vLLM server",
    ),
    "judge": Command(
        "vllm_operator.commands.judge",
        "re-judge a stored benchmark summary with the gate's own code (offline)",
    ),
    "calibrate": Command(
        "vllm_operator.commands.calibrate",
        "fit floors and a gate plan from your own A/A reports (offline)",
    ),
    "report": Command(
        "vllm_operator.commands.report",
        "write a benchmark report as one self-contained HTML page (charts, verdict, quality)",
    ),
    "sandbox": Command(
        "vllm_operator.commands.sandbox",
        "run python-tests code apart from bench (the benchmark Job's sandbox container)",
    ),
    "sim": Command(
        "vllm_operator.commands.sim",
        "run the vLLM simulator (accepts `vllm serve` flags of a version)",
    ),
    "demo": Command(
        "vllm_operator_demo.demo",
        "the upgrade story on an embedded cluster, no GPU needed",
        missing="the demo ships in the devcluster distribution: pip install -e ./embedded-cluster",
    ),
}

USAGE = """usage: vllm-operator COMMAND [options]

Run vLLM on Kubernetes with flags that match its version, probes sized for its warm-up,
and a benchmark that must pass before a new revision serves traffic.

commands:
{commands}

`vllm-operator COMMAND --help` describes each command.
"""


def usage() -> str:
    width = max(len(n) for n in COMMANDS)
    lines = [f"  {name.ljust(width)}  {cmd.summary}" for name, cmd in COMMANDS.items()]
    return USAGE.format(commands="\n".join(lines))


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args:
        # As argparse tools do: no command is a usage error, not a success.
        sys.stderr.write(usage())
        return 2
    if args[0] in ("-h", "--help", "help"):
        sys.stdout.write(usage())
        return 0
    if args[0] in ("-V", "--version"):
        sys.stdout.write(f"vllm-operator {__version__}\n")
        return 0
    name, rest = args[0], args[1:]
    command = COMMANDS.get(name)
    if command is None:
        # Here, not at the top: importing ``vllm_operator.api`` builds every pydantic model
        # (about 0.25 CPU s), and ``python -m vllm_operator.sim`` (every simulated pod) needs none.
        from vllm_operator.api.text import did_you_mean, printable  # noqa: PLC0415

        close = did_you_mean(name, COMMANDS)
        hint = f"; {close}" if close else ""
        sys.stderr.write(printable(f"vllm-operator: unknown command {name!r}{hint}") + "\n\n")
        sys.stderr.write(usage())
        return 2
    try:
        module = importlib.import_module(command.module)
    except ModuleNotFoundError as error:
        package = command.module.partition(".")[0]
        missing = error.name is not None and (error.name + ".").startswith(package + ".")
        if not command.missing or not missing:
            raise  # a dependency of an installed command: a real error, not an absence
        sys.stderr.write(f"vllm-operator {name}: not installed; {command.missing}\n")
        return 2
    entry: Callable[[list[str], str], int] = module.main
    return entry(rest, f"vllm-operator {name}")
