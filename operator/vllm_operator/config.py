"""The operator's configuration, read once at start-up and passed down.

Flags first, then environment variables (``VLLM_OPERATOR_*``, what a Helm chart sets), then
defaults. Nothing reads the environment anywhere else, and nothing at import time, so a
test builds an ``OperatorConfig`` directly and two operators in one process never share
hidden settings.

``vllm-operator run`` offers only what a cluster needs. Two fields exist for the embedded
development cluster and are set in code by whoever runs the operator there (the demo, the
test harnesses), never from the command line or the environment: ``api_url`` (a plain URL
without credentials) and ``deadline_scale`` (shrinks every deadline). A real cluster is
reached through ``--kubeconfig``/``KUBECONFIG`` or the in-cluster service account.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

DEFAULT_BENCH_IMAGE = "ghcr.io/vllm-operator/vllm-operator:0.1.0"

ENV = {
    "namespaces": "VLLM_OPERATOR_NAMESPACES",
    "all_namespaces": "VLLM_OPERATOR_ALL_NAMESPACES",
    "metrics_port": "VLLM_OPERATOR_METRICS_PORT",
    "liveness_port": "VLLM_OPERATOR_LIVENESS_PORT",
    "bench_image": "VLLM_OPERATOR_BENCH_IMAGE",
    "resync_seconds": "VLLM_OPERATOR_RESYNC_SECONDS",
    "workers": "VLLM_OPERATOR_WORKERS",
    "job_start_seconds": "VLLM_OPERATOR_JOB_START_SECONDS",
    "job_ttl_seconds": "VLLM_OPERATOR_JOB_TTL_SECONDS",
    "allowed_secrets": "VLLM_OPERATOR_ALLOWED_SECRETS",
    "kubeconfig": "KUBECONFIG",
    "log_level": "VLLM_OPERATOR_LOG_LEVEL",
}


@dataclass(frozen=True)
class OperatorConfig:
    """Everything ``vllm-operator run`` can be told."""

    namespaces: tuple[str, ...] = ()  # empty: every namespace (cluster scope)
    metrics_port: int | None = 8080  # None: no metrics endpoint
    liveness_port: int | None = 8081  # None: no liveness endpoint
    bench_image: str = DEFAULT_BENCH_IMAGE
    resync_seconds: float = 300.0  # safety net: every resource is reconciled this often
    workers: int = 8  # resources reconciled at the same time
    job_start_seconds: float = 300.0  # benchmark pod may stay unschedulable/pulling this long
    job_ttl_seconds: int = 3600
    # < 1 shrinks every deadline; set in code by the demo and test harnesses, not a flag
    deadline_scale: float = 1.0
    job_env: tuple[tuple[str, str], ...] = ()  # extra env for benchmark Jobs (demos, proxies)
    # "<namespace>/<secret>" patterns a VLLMDeployment may reference; None: any Secret of its
    # namespace (creating a VLLMDeployment is creating pods; docs/security.md).
    allowed_secrets: tuple[str, ...] | None = None
    # talk to this API URL without auth; set in code for an embedded dev cluster, not a flag
    api_url: str | None = None
    kubeconfig: str | None = None
    context: str | None = None
    log_level: str = "INFO"
    kube_workers: int = 16  # threads for the synchronous kubernetes client
    extra: Mapping[str, str] = field(default_factory=dict)

    @property
    def clusterwide(self) -> bool:
        return not self.namespaces

    @property
    def liveness_endpoint(self) -> str | None:
        port = self.liveness_port
        return None if port is None else f"http://0.0.0.0:{port}/healthz"


def _port(text: str) -> int:
    value = int(text)
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"port {value} is not in 1..65535 (0 disables)")
    return value


def _port_or_off(flag: int | None, env_text: str | None, default: int | None) -> int | None:
    """A port from the flag, else the environment, else ``default``; 0 means off."""
    if flag is None and env_text:
        flag = _port(env_text)
    if flag is None:
        return default
    return None if flag == 0 else flag


def _positive(text: str) -> float:
    value = float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text} must be > 0")
    return value


def _secret_pattern(text: str) -> str:
    namespace, sep, name = text.strip().partition("/")
    if not sep or not namespace or not name or "/" in name:
        raise argparse.ArgumentTypeError(f"{text!r} is not NAMESPACE/NAME (wildcards * and ?)")
    return f"{namespace}/{name}"


def _env_pair(text: str) -> tuple[str, str]:
    name, sep, value = text.partition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"{text!r} is not NAME=VALUE")
    return name, value


def build_parser(prog: str) -> argparse.ArgumentParser:
    env = ENV
    parser = argparse.ArgumentParser(
        prog=prog,
        description=(
            "Start the vllm-operator controller: reconcile VLLMDeployments into revisions, "
            "benchmark each candidate with a Job and promote or reject it. Configuration is "
            "read once at start-up: flags first, then the environment variables named below, "
            "then defaults."
        ),
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    scope = parser.add_mutually_exclusive_group()
    scope.add_argument(
        "-n",
        "--namespace",
        action="append",
        dest="namespaces",
        metavar="NS",
        help=f"watch only this namespace (repeatable; env {env['namespaces']}, comma-separated)",
    )
    scope.add_argument(
        "-A",
        "--all-namespaces",
        action="store_true",
        default=None,
        help=f"watch every namespace (the default; env {env['all_namespaces']}=1)",
    )
    parser.add_argument(
        "--metrics-port",
        type=_port,
        default=None,
        help=f"Prometheus metrics port, 0 disables (env {env['metrics_port']}; default 8080)",
    )
    parser.add_argument(
        "--liveness-port",
        type=_port,
        default=None,
        help=f"kopf liveness endpoint /healthz port, 0 disables (env {env['liveness_port']}; "
        "default 8081)",
    )
    parser.add_argument(
        "--bench-image",
        default=None,
        help=f"image of the benchmark Jobs: this operator's own image (env {env['bench_image']}; "
        f"default {DEFAULT_BENCH_IMAGE})",
    )
    parser.add_argument(
        "--resync-seconds",
        type=_positive,
        default=None,
        help=f"reconcile every resource at least this often (env {env['resync_seconds']}; "
        "default 300)",
    )
    parser.add_argument(
        "--workers",
        type=int,
        default=None,
        help=f"resources reconciled concurrently (env {env['workers']}; default 8)",
    )
    parser.add_argument(
        "--job-start-seconds",
        type=_positive,
        default=None,
        help="a benchmark pod unschedulable or in image-pull back-off this long makes the gate "
        f"an Error (env {env['job_start_seconds']}; default 300)",
    )
    parser.add_argument(
        "--job-ttl-seconds",
        type=int,
        default=None,
        help=f"ttlSecondsAfterFinished of benchmark Jobs (env {env['job_ttl_seconds']}; "
        "default 3600)",
    )
    parser.add_argument(
        "--job-env",
        action="append",
        type=_env_pair,
        default=None,
        metavar="NAME=VALUE",
        help="extra environment variable for benchmark Jobs (repeatable)",
    )
    parser.add_argument(
        "--allowed-secret",
        action="append",
        type=_secret_pattern,
        default=None,
        metavar="NS/NAME",
        help="a Secret VLLMDeployments may reference in hfTokenSecret/apiKeySecret, as "
        "namespace/name with shell-style * and ? (repeatable; env "
        f"{env['allowed_secrets']}, comma-separated); when any is given, a reference to "
        "another Secret is an invalid spec; by default any Secret of the resource's namespace",
    )
    parser.add_argument(
        "--kubeconfig",
        default=None,
        help=f"kubeconfig file when not running in a cluster (env {env['kubeconfig']})",
    )
    parser.add_argument("--context", default=None, help="kubeconfig context to use")
    parser.add_argument(
        "--log-level",
        default=None,
        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
        help=f"log level (env {env['log_level']}; default INFO)",
    )
    return parser


def config_from_args(argv: Sequence[str], environ: Mapping[str, str], prog: str) -> OperatorConfig:
    """Parse flags with environment fallbacks into an ``OperatorConfig``."""
    args = build_parser(prog).parse_args(list(argv))

    def pick(flag: object, key: str, convert: type | None = None) -> object:
        if flag is not None:
            return flag
        text = environ.get(ENV[key])
        if text is None or text == "":
            return None
        return convert(text) if convert is not None else text

    namespaces: tuple[str, ...] = ()
    all_ns = args.all_namespaces or environ.get(ENV["all_namespaces"], "") in ("1", "true")
    if args.namespaces:
        namespaces = tuple(args.namespaces)
    elif not all_ns and environ.get(ENV["namespaces"]):
        namespaces = tuple(n.strip() for n in environ[ENV["namespaces"]].split(",") if n.strip())
    base = OperatorConfig()
    metrics_port = _port_or_off(
        args.metrics_port, environ.get(ENV["metrics_port"]), base.metrics_port
    )
    liveness_port = _port_or_off(
        args.liveness_port, environ.get(ENV["liveness_port"]), base.liveness_port
    )

    def number(flag: object, key: str, default: float) -> float:
        value = pick(flag, key, float)
        return default if value is None else float(str(value))

    allowed_secrets: tuple[str, ...] | None = None
    if args.allowed_secret:
        allowed_secrets = tuple(args.allowed_secret)
    elif environ.get(ENV["allowed_secrets"], "").strip():
        try:
            allowed_secrets = tuple(
                _secret_pattern(p) for p in environ[ENV["allowed_secrets"]].split(",") if p.strip()
            )
        except argparse.ArgumentTypeError as exc:
            build_parser(prog).error(f"{ENV['allowed_secrets']}: {exc}")
    return OperatorConfig(
        namespaces=namespaces,
        metrics_port=metrics_port,
        liveness_port=liveness_port,
        bench_image=str(pick(args.bench_image, "bench_image") or base.bench_image),
        resync_seconds=number(args.resync_seconds, "resync_seconds", base.resync_seconds),
        workers=int(number(args.workers, "workers", base.workers)),
        job_start_seconds=number(
            args.job_start_seconds, "job_start_seconds", base.job_start_seconds
        ),
        job_ttl_seconds=int(number(args.job_ttl_seconds, "job_ttl_seconds", base.job_ttl_seconds)),
        job_env=tuple(args.job_env or ()),
        allowed_secrets=allowed_secrets,
        kubeconfig=str(pick(args.kubeconfig, "kubeconfig") or "") or None,
        context=args.context,
        log_level=str(pick(args.log_level, "log_level") or base.log_level),
    )
