"""`vllm-operator run`: start the operator against a cluster.

Reads its configuration once (flags, then ``VLLM_OPERATOR_*`` environment variables), serves
Prometheus metrics on their own registry and kopf's liveness endpoint, and runs kopf with
the registry ``handlers.registry.build_registry`` makes. On SIGINT/SIGTERM (kopf's signal
handlers set its stop flag, then run the cleanup handler): no new reconcile starts, those in
flight finish within ``--shutdown-grace-seconds``, the Lease is released when leader
election is on (``handlers/leader.py``), and the process exits 0.
"""

from __future__ import annotations

import asyncio
import logging
import os

import kopf
from prometheus_client import CollectorRegistry, start_http_server

from vllm_operator.commands.parsing import Parser
from vllm_operator.config import OperatorConfig, config_from_args
from vllm_operator.handlers.registry import build_registry, configure
from vllm_operator.metrics import OperatorMetrics


async def run(config: OperatorConfig, metrics: OperatorMetrics) -> None:
    registry = build_registry(config, metrics=metrics)
    settings = kopf.OperatorSettings()
    configure(settings, config)
    await kopf.operator(
        registry=registry,
        settings=settings,
        clusterwide=config.clusterwide,
        namespaces=list(config.namespaces),
        liveness_endpoint=config.liveness_endpoint,
        standalone=True,
    )


def main(argv: list[str], prog: str) -> int:
    config = config_from_args(argv, os.environ, prog, Parser)
    logging.basicConfig(
        level=getattr(logging, config.log_level, logging.INFO),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    prometheus = CollectorRegistry()
    metrics = OperatorMetrics(prometheus)
    if config.metrics_port is not None:
        start_http_server(config.metrics_port, registry=prometheus)
    scope = ", ".join(config.namespaces) if config.namespaces else "all namespaces"
    logging.getLogger(__name__).info(
        "vllm-operator watching %s; bench image %s", scope, config.bench_image
    )
    try:
        asyncio.run(run(config, metrics))
    except KeyboardInterrupt:
        return 130
    return 0
