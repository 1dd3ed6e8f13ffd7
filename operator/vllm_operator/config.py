"""The operator's configuration: one table of options, read once at start-up and passed down.

Each option of ``vllm-operator run`` is one row of ``OPTIONS``: its flags, its environment
variables, how its text is read (a ``Kind``) and what it does. The argument parser
(``build_parser``), the environment reading (``config_from_args``) and the table in
docs/rollout.md (``options_markdown``; a test keeps the document equal to it) all come from
those rows, and each default from the field of ``OperatorConfig`` the row sets, so no
default, spelling or boolean rule is written twice. The planner's settings (bench image,
Job TTL, Job start deadline, ...) and their defaults belong to ``rollout.Settings``:
``OperatorConfig`` extends it, and the reconciler hands the config to the planner as is.

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
import dataclasses
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from vllm_operator.booleans import ACCEPTED, parse_bool
from vllm_operator.election import ElectionSettingsError, Timings
from vllm_operator.rollout.context import Settings


@dataclass(frozen=True)
class OperatorConfig(Settings):
    """Everything ``vllm-operator run`` can be told: the planner's ``Settings`` and the shell's."""

    namespaces: tuple[str, ...] = ()  # empty: every namespace (cluster scope)
    metrics_port: int | None = 8080  # None: no metrics endpoint
    liveness_port: int | None = 8081  # None: no liveness endpoint
    resync_seconds: float = 300.0  # safety net: every resource is reconciled this often
    workers: int = 8  # resources reconciled at the same time
    # talk to this API URL without auth; set in code for an embedded dev cluster, not a flag
    api_url: str | None = None
    # (namespace, pod, pod IP, port) -> where to reach it (kube.scrape.PodAddress); None: the
    # pod's IP. Set in code for the embedded dev cluster (devcluster.pod_address), not a flag.
    pod_address: Callable[[str, str, str, int], Awaitable[tuple[str, int] | None]] | None = None
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
    def features(self) -> tuple[str, ...]:
        """The optional kinds this operator watches: its autoscalers, and LeaderWorkerSets
        with ``multi_node`` (``handlers.caches.cached_children``)."""
        return (*self.autoscaling_engines, *(("lws",) if self.multi_node else ()))

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


# -- how one value is read ----------------------------------------------------------------


class Kind:
    """How one value of an option is read from text (a flag's or an environment variable's).

    ``parse`` raises ``ValueError`` for text that is not of the kind at all (argparse then
    says "invalid NAME value", the environment reading "is not NOUN") and
    ``argparse.ArgumentTypeError`` with its own message for a value out of range.
    """

    def __init__(self, name: str, parse: Callable[[str], Any], noun: str) -> None:
        self.__name__ = name
        self.parse = parse
        self.noun = noun

    def __call__(self, text: str) -> Any:
        return self.parse(text)


def _text(text: str) -> str:
    if not text.strip():
        raise argparse.ArgumentTypeError("an empty value: leave the option out for its default")
    return text.strip()


def _at_least(low: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        value = int(text)
        if value < low:
            raise argparse.ArgumentTypeError(f"{value} must be >= {low}")
        return value

    return parse


def _positive(text: str) -> float:
    value = float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text} must be > 0")
    return value


def _port(text: str) -> int | None:
    value = int(text)
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"port {value} is not in 1..65535 (0 disables)")
    return None if value == 0 else value


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


LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")


def _log_level(text: str) -> str:
    if text.strip().upper() not in LOG_LEVELS:
        raise argparse.ArgumentTypeError(f"{text!r} is not one of {', '.join(LOG_LEVELS)}")
    return text.strip().upper()


BOOL = Kind("bool", parse_bool, f"a boolean: {ACCEPTED}")
TEXT = Kind("text", _text, "text")
COUNT = Kind("int", _at_least(1), "a whole number")
WHOLE_SECONDS = Kind("int", _at_least(0), "whole seconds")
SECONDS = Kind("seconds", _positive, "a number")
PORT = Kind("port", _port, "a port number")
SECRET = Kind("NS/NAME", _secret_pattern, "NAMESPACE/NAME")
ENGINES = Kind("engines", _engines, "a list of autoscalers")
ENV_PAIR = Kind("NAME=VALUE", _env_pair, "NAME=VALUE")
LOG_LEVEL = Kind("level", _log_level, "a log level")


# -- the table ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Option:
    """One option of ``vllm-operator run``: where it is read from and what it sets."""

    field: str  # the OperatorConfig field it sets (all_namespaces: namespaces, emptied)
    kind: Kind
    help: str
    flags: tuple[str, ...] = ()  # none: only from the environment
    env: tuple[str, ...] = ()  # read in this order, the first one set wins; none: flag only
    repeat: bool = False  # the flag repeats; the variable holds a comma-separated list
    metavar: str | None = None
    group: str = ""  # a section of --help (GROUPS)
    exclusive: str = ""  # flags sharing it exclude each other
    default: str | None = None  # how --help and the docs say the default; None: the field's


ENV_PREFIX = "VLLM_OPERATOR_"
GROUPS = {
    "high availability": "Run several replicas: only the one holding a coordination.k8s.io/v1 "
    "Lease reconciles; another takes over within about the lease duration when it dies, at "
    "once when it stops on SIGTERM.",
}
OPTIONS: tuple[Option, ...] = (
    Option("namespaces", TEXT, "watch only this namespace", ("-n", "--namespace"),
           (f"{ENV_PREFIX}NAMESPACES",), repeat=True, metavar="NS", exclusive="scope",
           default="every namespace"),
    Option("all_namespaces", BOOL, "watch every namespace", ("-A", "--all-namespaces"),
           (f"{ENV_PREFIX}ALL_NAMESPACES",), exclusive="scope",
           default="on when no namespace is given"),
    Option("metrics_port", PORT, "Prometheus metrics port, 0 disables", ("--metrics-port",),
           (f"{ENV_PREFIX}METRICS_PORT",)),
    Option("liveness_port", PORT, "kopf liveness endpoint /healthz port, 0 disables",
           ("--liveness-port",), (f"{ENV_PREFIX}LIVENESS_PORT",)),
    Option("bench_image", TEXT, "image of the benchmark Jobs: this operator's own image",
           ("--bench-image",), (f"{ENV_PREFIX}BENCH_IMAGE",), metavar="IMAGE"),
    Option("resync_seconds", SECONDS, "reconcile every resource at least this often",
           ("--resync-seconds",), (f"{ENV_PREFIX}RESYNC_SECONDS",)),
    Option("workers", COUNT, "resources reconciled concurrently", ("--workers",),
           (f"{ENV_PREFIX}WORKERS",)),
    Option("job_start_seconds", SECONDS, "a benchmark pod unschedulable or in image-pull "
           "back-off this long makes the gate an Error", ("--job-start-seconds",),
           (f"{ENV_PREFIX}JOB_START_SECONDS",)),
    Option("job_ttl_seconds", WHOLE_SECONDS, "ttlSecondsAfterFinished of benchmark Jobs",
           ("--job-ttl-seconds",), (f"{ENV_PREFIX}JOB_TTL_SECONDS",)),
    Option("job_env", ENV_PAIR, "extra environment variable for benchmark Jobs",
           ("--job-env",), repeat=True, metavar="NAME=VALUE"),
    Option("allowed_secrets", SECRET, "a Secret VLLMDeployments may reference in "
           "hfTokenSecret/apiKeySecret, as namespace/name with shell-style * and ?; when any "
           "is given, a reference to another Secret is an invalid spec", ("--allowed-secret",),
           (f"{ENV_PREFIX}ALLOWED_SECRETS",), repeat=True, metavar="NS/NAME",
           default="any Secret of the resource's namespace"),
    Option("autoscaling_engines", ENGINES, "autoscalers the operator may create for "
           "spec.autoscaling, as its RBAC allows: hpa, keda, hpa,keda or none; a spec asking "
           "for another engine is an invalid spec", ("--autoscaling-engines",),
           (f"{ENV_PREFIX}AUTOSCALING_ENGINES",), metavar="LIST"),
    Option("multi_node", BOOL, "LeaderWorkerSet (kubernetes-sigs/lws) is installed and its "
           "RBAC granted: roll out spec.resources.nodes > 1 as LeaderWorkerSet groups; off, "
           "such a spec is refused with MultiNodeUnavailable", ("--multi-node",),
           (f"{ENV_PREFIX}MULTI_NODE",), default="off"),
    Option("kubeconfig", TEXT, "kubeconfig file when not running in a cluster",
           ("--kubeconfig",), ("KUBECONFIG",), metavar="FILE",
           default="in-cluster service account"),
    Option("context", TEXT, "kubeconfig context to use", ("--context",),
           metavar="NAME", default="the kubeconfig's current context"),
    Option("log_level", LOG_LEVEL, "log level: " + ", ".join(LOG_LEVELS), ("--log-level",),
           (f"{ENV_PREFIX}LOG_LEVEL",), metavar="LEVEL"),
    Option("leader_election", BOOL, "reconcile only while holding the Lease",
           ("--leader-election",), (f"{ENV_PREFIX}LEADER_ELECTION",),
           group="high availability", default="off: a single replica"),
    Option("lease_name", TEXT, "name of the Lease", ("--lease-name",),
           (f"{ENV_PREFIX}LEASE_NAME",), metavar="NAME", group="high availability"),
    Option("lease_namespace", TEXT, "namespace of the Lease", ("--lease-namespace",),
           (f"{ENV_PREFIX}LEASE_NAMESPACE", "POD_NAMESPACE"), metavar="NS",
           group="high availability", default='"default"'),
    Option("lease_duration_seconds", WHOLE_SECONDS, "a standby takes over when the Lease has "
           "not been renewed for this long", ("--lease-duration-seconds",),
           (f"{ENV_PREFIX}LEASE_DURATION_SECONDS",), group="high availability"),
    Option("renew_deadline_seconds", SECONDS, "the leader stops writing when it could not "
           "renew for this long; less than the lease duration", ("--renew-deadline-seconds",),
           (f"{ENV_PREFIX}RENEW_DEADLINE_SECONDS",), group="high availability"),
    Option("retry_period_seconds", SECONDS, "how often the leader renews and a standby tries "
           "to acquire", ("--retry-period-seconds",), (f"{ENV_PREFIX}RETRY_PERIOD_SECONDS",),
           group="high availability"),
    Option("pod_name", TEXT, "the replica's identity in the Lease (plus a random suffix); "
           "the chart sets it from the downward API", env=("POD_NAME",),
           group="high availability"),
    Option("shutdown_grace_seconds", SECONDS, "on SIGTERM, let reconciles in flight finish "
           "for at most this long, then release the Lease and exit 0; keep it below the pod's "
           "terminationGracePeriodSeconds", ("--shutdown-grace-seconds",),
           (f"{ENV_PREFIX}SHUTDOWN_GRACE_SECONDS",)),
)  # fmt: skip

_FIELD_DEFAULTS = {f.name: f.default for f in dataclasses.fields(OperatorConfig)}


def default_text(option: Option) -> str:
    """The default as --help and the docs say it: the option's words, else the field's value."""
    if option.default is not None:
        return option.default
    value = _FIELD_DEFAULTS[option.field]
    if isinstance(value, tuple):
        return ",".join(str(v) for v in value) or "none"
    if value is None:
        return "none"
    return f"{value:g}" if isinstance(value, float) else str(value)


def metavar(option: Option) -> str:
    return option.metavar or option.kind.__name__.upper()


def _where(option: Option) -> str:
    """Where else the value comes from, and the default: the tail of an option's help."""
    parts = ["repeatable"] if option.repeat and option.flags else []
    if option.env:
        listed = ", else ".join(option.env)
        parts.append(f"env {listed}" + (", comma-separated" if option.repeat else ""))
    parts.append(f"default {default_text(option)}")
    return "; ".join(parts)


# -- the parser, the environment, the docs -------------------------------------------------


def build_parser(
    prog: str, parser_class: type[argparse.ArgumentParser] = argparse.ArgumentParser
) -> argparse.ArgumentParser:
    """``vllm-operator run``'s parser; a flag not given leaves its field out (argparse.SUPPRESS).
    ``parser_class``: the command passes its own (``commands.parsing``: "did you mean")."""
    parser = parser_class(
        prog=prog,
        description=(
            "Start the vllm-operator controller: reconcile VLLMDeployments into revisions, "
            "benchmark each candidate with a Job and promote or reject it. Configuration is "
            "read once at start-up: flags first, then the environment variables named below, "
            f"then defaults. Boolean variables take {ACCEPTED}."
        ),
        epilog="exit status: 0 stopped cleanly (SIGTERM), 2 usage error, 130 interrupted (Ctrl-C).",
    )
    groups: dict[str, Any] = {}
    exclusive: dict[str, Any] = {}
    for option in OPTIONS:
        if not option.flags:
            continue
        where: Any = parser
        if option.group:
            if option.group not in groups:
                groups[option.group] = parser.add_argument_group(option.group, GROUPS[option.group])
            where = groups[option.group]
        if option.exclusive:
            if option.exclusive not in exclusive:
                exclusive[option.exclusive] = where.add_mutually_exclusive_group()
            where = exclusive[option.exclusive]
        how: dict[str, Any] = {"dest": option.field, "default": argparse.SUPPRESS}
        if option.kind is BOOL:
            how["action"] = "store_true"
        else:
            how.update(type=option.kind, action="append" if option.repeat else "store")
            how["metavar"] = metavar(option)
        where.add_argument(*option.flags, help=f"{option.help} ({_where(option)})", **how)
    return parser


def _from_environment(
    environ: Mapping[str, str], parser: argparse.ArgumentParser
) -> dict[str, Any]:
    """Each option's value from the first of its variables that is set (and not blank)."""
    values: dict[str, Any] = {}
    for option in OPTIONS:
        name = next((n for n in option.env if environ.get(n, "").strip()), None)
        if name is None:
            continue
        text = environ[name]
        items = [t for t in text.split(",") if t.strip()] if option.repeat else [text]
        try:
            parsed = [option.kind.parse(item) for item in items]
        except argparse.ArgumentTypeError as exc:
            parser.error(f"{name}: {exc}")
        except ValueError:
            parser.error(f"{name}={text[:64]!r} is not {option.kind.noun}")
        values[option.field] = tuple(parsed) if option.repeat else parsed[0]
    return values


SCOPE = {"namespaces", "all_namespaces"}


def config_from_args(
    argv: Sequence[str],
    environ: Mapping[str, str],
    prog: str,
    parser_class: type[argparse.ArgumentParser] = argparse.ArgumentParser,
) -> OperatorConfig:
    """Parse flags with environment fallbacks into an ``OperatorConfig``."""
    parser = build_parser(prog, parser_class)
    flags = vars(parser.parse_args(list(argv)))
    from_env = _from_environment(environ, parser)
    if SCOPE & flags.keys():  # a scope flag overrides both scope variables
        from_env = {k: v for k, v in from_env.items() if k not in SCOPE}
    values = {**from_env, **{k: tuple(v) if isinstance(v, list) else v for k, v in flags.items()}}
    if values.pop("all_namespaces", False):
        values["namespaces"] = ()
    config = OperatorConfig(**values)
    try:
        config.timings.check()
    except ElectionSettingsError as exc:
        parser.error(
            f"--lease-duration-seconds/--renew-deadline-seconds/--retry-period-seconds: {exc}"
        )
    return config


def options_markdown() -> str:
    """The table of every option, as docs/rollout.md carries it (a test compares the two)."""
    rows = [
        "| Flag | Environment | Default | What it does |",
        "|---|---|---|---|",
    ]
    for option in OPTIONS:
        flag = ", ".join(
            f"`{f}`" if option.kind is BOOL else f"`{f} {metavar(option)}`" for f in option.flags
        )
        env = ", else ".join(f"`{n}`" for n in option.env)
        if option.repeat and option.flags:
            flag += " (repeatable)"
        if option.repeat and option.env:
            env += " (comma-separated)"
        what = option.help + (f" ({option.group})" if option.group else "")
        rows.append(f"| {flag or '-'} | {env or '-'} | {default_text(option)} | {what} |")
    rows.append("")
    rows.append(
        "A flag wins over its variable, a variable over the default; a blank variable counts "
        f"as unset. Boolean variables take {ACCEPTED}. A value an option cannot take, from a "
        "flag or a variable, stops the start with exit status 2 and a message naming it."
    )
    return "\n".join(rows) + "\n"
