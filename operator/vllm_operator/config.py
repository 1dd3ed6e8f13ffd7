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
from dataclasses import dataclass

from vllm_operator.election import ElectionSettingsError, Timings

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
    "autoscaling_engines": "VLLM_OPERATOR_AUTOSCALING_ENGINES",
    "kubeconfig": "KUBECONFIG",
    "log_level": "VLLM_OPERATOR_LOG_LEVEL",
    "leader_election": "VLLM_OPERATOR_LEADER_ELECTION",
    "lease_name": "VLLM_OPERATOR_LEASE_NAME",
    "lease_namespace": "VLLM_OPERATOR_LEASE_NAMESPACE",
    "lease_duration_seconds": "VLLM_OPERATOR_LEASE_DURATION_SECONDS",
    "renew_deadline_seconds": "VLLM_OPERATOR_RENEW_DEADLINE_SECONDS",
    "retry_period_seconds": "VLLM_OPERATOR_RETRY_PERIOD_SECONDS",
    "shutdown_grace_seconds": "VLLM_OPERATOR_SHUTDOWN_GRACE_SECONDS",
    "pod_name": "POD_NAME",
    "pod_namespace": "POD_NAMESPACE",
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
    # Autoscalers the operator may manage (what its RBAC grants): "hpa", "keda".
    autoscaling_engines: tuple[str, ...] = ("hpa",)
    # talk to this API URL without auth; set in code for an embedded dev cluster, not a flag
    api_url: str | None = None
    kubeconfig: str | None = None
    context: str | None = None
    log_level: str = "INFO"
    kube_workers: int = 16  # threads for the synchronous kubernetes client
    # High availability (docs/rollout.md "High availability"): with leader_election, only
    # the replica holding the Lease reconciles; the others watch and wait.
    leader_election: bool = False
    lease_name: str = "vllm-operator"
    lease_namespace: str = "default"  # run: --lease-namespace, else POD_NAMESPACE, else this
    lease_duration_seconds: int = 15
    renew_deadline_seconds: float = 10.0
    retry_period_seconds: float = 2.0
    pod_name: str | None = None  # the replica's identity in the Lease (plus a random suffix)
    # SIGTERM: reconciles in flight may finish for this long, then the Lease is released.
    shutdown_grace_seconds: float = 20.0

    @property
    def clusterwide(self) -> bool:
        return not self.namespaces

    @property
    def timings(self) -> Timings:
        return Timings(
            lease_duration=self.lease_duration_seconds,
            renew_deadline=self.renew_deadline_seconds,
            retry_period=self.retry_period_seconds,
        )

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


AUTOSCALING_ENGINES = ("hpa", "keda")


def _engines(text: str) -> tuple[str, ...]:
    """``hpa``, ``hpa,keda``, ``keda`` or ``none``: the autoscalers the operator may manage."""
    items = [t.strip() for t in text.split(",") if t.strip()]
    if items == ["none"]:
        return ()
    unknown = [t for t in items if t not in AUTOSCALING_ENGINES]
    if unknown or not items:
        raise argparse.ArgumentTypeError(
            f"{text!r}: list of {', '.join(AUTOSCALING_ENGINES)} (comma-separated), or none"
        )
    return tuple(sorted(set(items)))


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
        epilog="exit status: 0 stopped cleanly (SIGTERM), 2 usage error, 130 interrupted (Ctrl-C).",
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
        "--autoscaling-engines",
        type=_engines,
        default=None,
        metavar="LIST",
        help="autoscalers the operator may create for spec.autoscaling, as its RBAC allows: "
        "hpa, keda, hpa,keda or none (env "
        f"{env['autoscaling_engines']}; default hpa); a spec asking for another engine is "
        "an invalid spec",
    )
    parser.add_argument(
        "--kubeconfig",
        default=None,
        help=f"kubeconfig file when not running in a cluster (env {env['kubeconfig']})",
    )
    parser.add_argument("--context", default=None, help="kubeconfig context to use")
    election = parser.add_argument_group(
        "high availability",
        "Run several replicas: only the one holding a coordination.k8s.io/v1 Lease "
        "reconciles; another takes over within about the lease duration when it dies, at "
        "once when it stops on SIGTERM.",
    )
    election.add_argument(
        "--leader-election",
        action="store_true",
        default=None,
        help=f"reconcile only while holding the Lease (env {env['leader_election']}=1; "
        "default off: a single replica)",
    )
    election.add_argument(
        "--lease-name",
        default=None,
        help=f"name of the Lease (env {env['lease_name']}; default vllm-operator)",
    )
    election.add_argument(
        "--lease-namespace",
        default=None,
        help=f"namespace of the Lease (env {env['lease_namespace']}; default the pod's "
        f"namespace from {env['pod_namespace']}, else default)",
    )
    election.add_argument(
        "--lease-duration-seconds",
        type=int,
        default=None,
        help="a standby takes over when the Lease has not been renewed for this long "
        f"(env {env['lease_duration_seconds']}; default 15)",
    )
    election.add_argument(
        "--renew-deadline-seconds",
        type=_positive,
        default=None,
        help="the leader stops writing when it could not renew for this long; less than "
        f"the lease duration (env {env['renew_deadline_seconds']}; default 10)",
    )
    election.add_argument(
        "--retry-period-seconds",
        type=_positive,
        default=None,
        help="how often the leader renews and a standby tries to acquire "
        f"(env {env['retry_period_seconds']}; default 2)",
    )
    parser.add_argument(
        "--shutdown-grace-seconds",
        type=_positive,
        default=None,
        help="on SIGTERM, let reconciles in flight finish for at most this long, then "
        "release the Lease and exit 0; keep it below the pod's "
        f"terminationGracePeriodSeconds (env {env['shutdown_grace_seconds']}; default 20)",
    )
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
        try:
            return convert(text) if convert is not None else text
        except ValueError:
            build_parser(prog).error(f"{ENV[key]}={text[:64]!r} is not a number")

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
    leader_election = bool(args.leader_election) or environ.get(
        ENV["leader_election"], ""
    ).strip().lower() in ("1", "true", "yes")
    lease_duration = number(
        args.lease_duration_seconds, "lease_duration_seconds", base.lease_duration_seconds
    )
    timings = Timings(
        lease_duration=int(lease_duration),
        renew_deadline=number(
            args.renew_deadline_seconds, "renew_deadline_seconds", base.renew_deadline_seconds
        ),
        retry_period=number(
            args.retry_period_seconds, "retry_period_seconds", base.retry_period_seconds
        ),
    )
    try:
        if lease_duration != int(lease_duration):
            raise ElectionSettingsError("lease duration must be whole seconds")
        timings.check()
    except ElectionSettingsError as exc:
        build_parser(prog).error(
            f"--lease-duration-seconds/--renew-deadline-seconds/--retry-period-seconds: {exc}"
        )
    engines = args.autoscaling_engines
    if engines is None and environ.get(ENV["autoscaling_engines"], "").strip():
        try:
            engines = _engines(environ[ENV["autoscaling_engines"]])
        except argparse.ArgumentTypeError as exc:
            build_parser(prog).error(f"{ENV['autoscaling_engines']}: {exc}")
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
        autoscaling_engines=base.autoscaling_engines if engines is None else engines,
        kubeconfig=str(pick(args.kubeconfig, "kubeconfig") or "") or None,
        context=args.context,
        log_level=str(pick(args.log_level, "log_level") or base.log_level),
        leader_election=leader_election,
        lease_name=str(pick(args.lease_name, "lease_name") or base.lease_name),
        lease_namespace=str(
            pick(args.lease_namespace, "lease_namespace")
            or environ.get(ENV["pod_namespace"])
            or "default"
        ),
        lease_duration_seconds=timings.lease_duration,
        renew_deadline_seconds=timings.renew_deadline,
        retry_period_seconds=timings.retry_period,
        pod_name=environ.get(ENV["pod_name"]) or None,
        shutdown_grace_seconds=number(
            args.shutdown_grace_seconds, "shutdown_grace_seconds", base.shutdown_grace_seconds
        ),
    )
