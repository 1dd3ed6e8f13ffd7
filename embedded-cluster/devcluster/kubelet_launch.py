"""Turn a Pod's first container into a local process: argv, environment, files, port.

A container sees paths and names that do not exist on a laptop. The kubelet maps them into
the pod's own directory (``<workdir>/<namespace>/<pod>/fs``) and rewrites every argv item and
env value that names them, so the rendered manifest runs unchanged:

=================================  ==========================================================
container                          local
=================================  ==========================================================
``volumeMounts[].mountPath``       ``fs/<mountPath>`` (emptyDir: empty; configMap/secret: keys
                                   written as files; PVC: ``<workdir>/pvc/<ns>/<claim>``,
                                   shared by pods and kept across restarts)
``terminationMessagePath``         ``fs/dev/termination-log`` (read back as the message)
``/dev/shm``, ``/root`` (HOME)     ``fs/dev/shm``, ``fs/root``: so HF_HOME and VLLM_CACHE_ROOT
                                   under ``/root/.cache`` land in the pod directory
``--port N`` / ``--port=N``        a free local port; the pod's address is 127.0.0.1:port
``http://svc[.ns[.svc[.cluster     ``http://127.0.0.1:<proxy>``, the kubelet's proxy of that
.local]]]:port``                   Service port
``PATH``                           the image hooks' stand-in programs (``ImageHooks.install``),
                                   then this Python's bin dir
an env value or argv item that is  that pod's own loopback address ``127.a.b.c``
exactly a pod's DNS name           (``pod_dns``; LeaderWorkerSet's ``LWS_LEADER_ADDRESS``:
``POD.SUB[.NS[.svc[...]]]``        a group's vLLM rendezvous and Ray head, port unchanged)
``--master-addr POD.SUB[.NS]``     ``127.0.0.1`` and a local port per leader pod for
``--master-port P``                ``P`` (``GroupPorts``: a name written in the args)
=================================  ==========================================================

Kubernetes' ``$(VAR)`` references in command, args and env values are expanded the way the
real kubelet does (``$$`` escapes). Image defaults (the env a real image bakes in) come from
the product's ``ImageHooks.env`` (``devcluster.images``), under the pod's own env.

Every path taken from the pod spec (mountPath, subPath, claimName, key and item paths,
terminationMessagePath, workingDir, the container name of the log file) is joined through
``hostpaths.inside`` and the environment through ``hostpaths.host_env``: a pod spec cannot
make the kubelet write outside the pod's directory or steer the host's interpreters.
"""

from __future__ import annotations

import base64
import re
import socket
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from devcluster import hostpaths
from devcluster.pod_dns import PodAddresses, PodLookup, resolve_pod_name

Obj = dict[str, Any]
ServiceResolver = Callable[[str, str, int], "str | None"]  # (namespace, host, port) -> host:port

DEFAULT_TERMINATION_PATH = "/dev/termination-log"
_FIXED_ROOTS = ("/dev/shm", "/root")
_VAR_RE = re.compile(r"\$\$|\$\(([-._a-zA-Z][-._a-zA-Z0-9]*)\)")
_URL_RE = re.compile(r"(https?)://([a-z0-9]([-a-z0-9.]*[a-z0-9])?):(\d+)")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def expand_vars(text: str, env: Mapping[str, str]) -> str:
    """Kubernetes ``$(VAR)`` expansion: defined names are replaced, ``$$`` becomes ``$``."""

    def repl(m: re.Match[str]) -> str:
        if m.group(0) == "$$":
            return "$"
        name = m.group(1)
        return env[name] if name in env else m.group(0)

    return _VAR_RE.sub(repl, text)


class PathMap:
    """Container path prefixes -> local directories, applied to argv items and env values."""

    def __init__(self, roots: Mapping[str, Path]) -> None:
        self.roots = dict(sorted(roots.items(), key=lambda kv: -len(kv[0])))
        if self.roots:
            alt = "|".join(re.escape(r.rstrip("/")) for r in self.roots)
            self._re: re.Pattern[str] | None = re.compile(
                rf"(?:^|(?<=[=:,\s\"']))({alt})(?=/|$|[:,\s\"'])"
            )
        else:
            self._re = None

    def local(self, container_path: str) -> Path:
        return Path(self.apply(container_path))

    def apply(self, text: str) -> str:
        if self._re is None:
            return text
        return self._re.sub(lambda m: str(self.roots[m.group(1)]), text)


def rewrite_service_urls(text: str, namespace: str, resolve: ServiceResolver) -> str:
    """``http://<svc>[.<ns>[.svc[.cluster.local]]]:<port>`` -> the kubelet's proxy address."""

    def repl(m: re.Match[str]) -> str:
        host, port = m.group(2), int(m.group(4))
        parts = host.split(".")
        ns = namespace
        if len(parts) >= 2:
            ns = parts[1]
            if parts[2:] not in ([], ["svc"], ["svc", "cluster", "local"]):
                return m.group(0)
        target = resolve(ns, parts[0], port)
        return f"{m.group(1)}://{target}" if target else m.group(0)

    return _URL_RE.sub(repl, text)


def rewrite_port(argv: list[str], port: int) -> tuple[list[str], int | None]:
    """Replace the value of ``--port`` with ``port``; also return the port it asked for."""
    out = list(argv)
    for i, item in enumerate(out):
        if item == "--port" and i + 1 < len(out):
            asked = int(out[i + 1]) if out[i + 1].isdigit() else None
            out[i + 1] = str(port)
            return out, asked
        if item.startswith("--port="):
            value = item.split("=", 1)[1]
            out[i] = f"--port={port}"
            return out, int(value) if value.isdigit() else None
    return out, None


@dataclass
class Launch:
    """Everything needed to start (and restart) one container instance."""

    argv: list[str]
    env: dict[str, str]
    cwd: Path
    port: int | None  # local port the process listens on
    container_ports: dict[str, int]  # named and numbered container ports -> local port
    termination_path: Path
    log_path: Path


@dataclass
class LaunchContext:
    """What the kubelet knows besides the pod: cluster objects and local conventions."""

    workdir: Path
    shim_dir: Path | None  # ImageHooks.install: first on PATH
    python_bin: Path
    secret: Callable[[str, str], Obj | None]  # (namespace, name) -> Secret
    config_map: Callable[[str, str], Obj | None]
    resolve_service: ServiceResolver
    image_env: Callable[[str], Mapping[str, str]]  # ImageHooks.env
    extra_env: Mapping[str, str]
    pod_port: Callable[[str, str, int], int] | None = None  # GroupPorts.get
    pod_dns: PodLookup | None = None  # a pod's DNS name -> its loopback address (pod_dns)


class GroupPorts:
    """One local port per (namespace, pod, port) that pods dial by the pod's DNS name.

    A multi-node group's workers (torch.distributed) reach the leader at ``--master-addr
    <leader>.<subdomain>.<namespace> --master-port P``; on one host network every group
    would want the same ``P``, so each leader gets its own port, shared by its group, and a
    new one when it is recreated. That holds for a name written in the args: one that comes
    from ``$(LWS_LEADER_ADDRESS)`` is already the leader's own loopback address
    (``pod_dns``), where ``P`` is free.
    """

    def __init__(self, pods: Callable[[], Iterable[Obj]] | None = None) -> None:
        self._ports: dict[tuple[str, str, int], int] = {}
        self.addresses = PodAddresses(pods)  # the pods' own loopback addresses (pod_dns)

    def get(self, namespace: str, pod: str, port: int) -> int:
        key = (namespace, pod, port)
        if key not in self._ports:
            self._ports[key] = free_port()
        return self._ports[key]

    def forget(self, namespace: str, pod: str) -> None:
        for key in [k for k in self._ports if k[:2] == (namespace, pod)]:
            del self._ports[key]
        self.addresses.forget(namespace, pod)


def _flag_value(argv: list[str], flag: str) -> int | None:
    """The index of ``flag``'s value in ``argv`` (``--flag V`` only), or None."""
    for i, item in enumerate(argv[:-1]):
        if item == flag:
            return i + 1
    return None


def rewrite_master(
    argv: list[str], namespace: str, pod_port: Callable[[str, str, int], int] | None
) -> list[str]:
    """``--master-addr <pod>.<subdomain>[.<ns>[.svc[.cluster.local]]] --master-port P`` ->
    ``127.0.0.1`` and that pod's local port for ``P`` (``GroupPorts``)."""
    addr, port = _flag_value(argv, "--master-addr"), _flag_value(argv, "--master-port")
    if pod_port is None or addr is None or port is None or not argv[port].isdigit():
        return argv
    parts = argv[addr].split(".")
    if (
        len(parts) < 2
        or parts[0].isdigit()
        or parts[3:] not in ([], ["svc"], ["svc", "cluster", "local"])
    ):
        return argv
    out = list(argv)
    ns = parts[2] if len(parts) > 2 else namespace
    out[port] = str(pod_port(ns, parts[0], int(argv[port])))
    out[addr] = "127.0.0.1"
    return out


def _key_value(obj: Obj | None, key: str, encoded: bool) -> str | None:
    if obj is None:
        return None
    if encoded:
        raw = (obj.get("data") or {}).get(key)
        if raw is not None:
            return base64.b64decode(raw).decode(errors="replace")
        string = (obj.get("stringData") or {}).get(key)
        return None if string is None else str(string)
    value = (obj.get("data") or {}).get(key)
    return None if value is None else str(value)


def _write_items(target: Path, obj: Obj | None, encoded: bool, items: list[Obj] | None) -> None:
    target.mkdir(parents=True, exist_ok=True)
    if obj is None:
        return
    keys = list((obj.get("data") or {}).keys()) + list((obj.get("stringData") or {}).keys())
    wanted = (
        [(i["key"], i.get("path") or i["key"]) for i in items] if items else [(k, k) for k in keys]
    )
    for key, rel in wanted:
        value = _key_value(obj, key, encoded)
        if value is not None:
            # A key or item path never leaves the volume's directory (see hostpaths).
            dest = hostpaths.inside(target, str(rel), "key path")
            dest.parent.mkdir(parents=True, exist_ok=True)
            hostpaths.write_text(dest, value)


def _mounts(pod: Obj, container: Obj, poddir: Path, ctx: LaunchContext) -> dict[str, Path]:
    ns = str(pod["metadata"].get("namespace") or "default")
    volumes = {v.get("name"): v for v in (pod.get("spec") or {}).get("volumes") or []}
    roots: dict[str, Path] = {}
    for mount in container.get("volumeMounts") or []:
        path = str(mount.get("mountPath") or "").rstrip("/")
        if not path.startswith("/"):
            continue
        vol = volumes.get(mount.get("name")) or {}
        local = hostpaths.inside(poddir / "fs", path.lstrip("/") or ".", "mountPath")
        if "persistentVolumeClaim" in vol:
            claim = str(vol["persistentVolumeClaim"].get("claimName") or "claim")
            claims = ctx.workdir / "pvc" / ns
            claims.mkdir(parents=True, exist_ok=True)
            local = hostpaths.inside(claims, claim, "claimName")
        if mount.get("subPath"):
            local.mkdir(parents=True, exist_ok=True)
            local = hostpaths.inside(local, str(mount["subPath"]), "subPath")
        if "configMap" in vol:
            cm = vol["configMap"]
            _write_items(local, ctx.config_map(ns, cm.get("name", "")), False, cm.get("items"))
        elif "secret" in vol:
            sec = vol["secret"]
            _write_items(local, ctx.secret(ns, sec.get("secretName", "")), True, sec.get("items"))
        local.mkdir(parents=True, exist_ok=True)
        roots[path] = local
    return roots


def _pod_env(pod: Obj, container: Obj, ctx: LaunchContext, base: dict[str, str]) -> dict[str, str]:
    ns = str(pod["metadata"].get("namespace") or "default")
    env = dict(base)
    for item in container.get("env") or []:
        name = str(item.get("name"))
        if "value" in item or "valueFrom" not in item:
            env[name] = expand_vars(str(item.get("value") or ""), env)
            continue
        ref = item["valueFrom"]
        value: str | None = None
        if "secretKeyRef" in ref:
            r = ref["secretKeyRef"]
            value = _key_value(ctx.secret(ns, r.get("name", "")), r.get("key", ""), True)
        elif "configMapKeyRef" in ref:
            r = ref["configMapKeyRef"]
            value = _key_value(ctx.config_map(ns, r.get("name", "")), r.get("key", ""), False)
        elif "fieldRef" in ref:
            field_path = ref["fieldRef"].get("fieldPath", "")
            value = {
                "metadata.name": pod["metadata"].get("name"),
                "metadata.namespace": ns,
                "status.podIP": "127.0.0.1",
                "status.hostIP": "127.0.0.1",
                "spec.nodeName": "devcluster",
            }.get(field_path)
        if value is not None:  # an absent Secret key leaves the variable unset
            env[name] = value
    return env


def prepare_launch(
    pod: Obj, poddir: Path, ctx: LaunchContext, container: Obj | None = None
) -> Launch:
    """Build the local launch of the pod's first container, or of ``container`` (a sidecar).

    Volumes are shared by mount path; a sidecar's termination message file is its own.
    """
    spec = pod.get("spec") or {}
    sidecar = container is not None
    if container is None:
        container = (spec.get("containers") or [{}])[0]
    ns = str(pod["metadata"].get("namespace") or "default")
    (poddir / "logs").mkdir(parents=True, exist_ok=True)
    roots, term_path = _roots(pod, container, poddir, ctx, sidecar=sidecar)
    paths = PathMap(roots)
    for fixed in _FIXED_ROOTS:
        roots[fixed].mkdir(parents=True, exist_ok=True)
    env = _launch_env(pod, container, poddir, ctx, roots, paths)
    argv = [*(container.get("command") or []), *(container.get("args") or [])]
    argv = [
        rewrite_service_urls(paths.apply(expand_vars(str(a), env)), ns, ctx.resolve_service)
        for a in argv
    ]
    argv = rewrite_master(argv, ns, ctx.pod_port)
    argv = [resolve_pod_name(a, ns, ctx.pod_dns) for a in argv]
    argv, port, container_ports = _ports(argv, container)
    cwd = _workdir(container, paths, poddir, roots)
    name = str(container.get("name") or "main")
    hostpaths.inside(poddir / "logs", f"{name}.log", "container name")
    return Launch(
        argv=argv,
        env=env,
        cwd=cwd,
        port=port,
        container_ports=container_ports,
        termination_path=roots[term_path],
        log_path=poddir / "logs" / f"{name}.log",
    )


def _roots(
    pod: Obj, container: Obj, poddir: Path, ctx: LaunchContext, *, sidecar: bool
) -> tuple[dict[str, Path], str]:
    """The container's path roots (its mounts, its termination message file, the fixed
    roots) under ``poddir``, and the termination message path."""
    roots = _mounts(pod, container, poddir, ctx)
    term_path = str(container.get("terminationMessagePath") or DEFAULT_TERMINATION_PATH)
    if term_path not in roots:
        own = f"fs-{container.get('name')}" if sidecar else "fs"
        fs = hostpaths.inside(poddir, own, "container name")
        fs.mkdir(parents=True, exist_ok=True)
        roots[term_path] = hostpaths.inside(fs, term_path.lstrip("/"), "terminationMessagePath")
    roots[term_path].parent.mkdir(parents=True, exist_ok=True)
    for fixed in _FIXED_ROOTS:
        roots.setdefault(fixed, poddir / "fs" / fixed.lstrip("/"))
    return roots, term_path


def _launch_env(  # noqa: PLR0917 - private, one call site
    pod: Obj,
    container: Obj,
    poddir: Path,
    ctx: LaunchContext,
    roots: dict[str, Path],
    paths: PathMap,
) -> dict[str, str]:
    """The process's environment: the image's, the pod's (paths and Service URLs mapped to
    the host), confined by ``hostpaths.host_env``, and a PATH of the host's interpreters."""
    ns = str(pod["metadata"].get("namespace") or "default")
    tmp = poddir / "fs" / "tmp"
    tmp.mkdir(parents=True, exist_ok=True)
    base = {
        "HOSTNAME": str(pod["metadata"].get("name")),
        "LANG": "C.UTF-8",
        "PYTHONUNBUFFERED": "1",
        "KUBERNETES_SERVICE_HOST": "127.0.0.1",
    }
    base.update(ctx.image_env(str(container.get("image") or "")))
    base.update(ctx.extra_env)
    env = _pod_env(pod, container, ctx, base)
    env = {
        k: resolve_pod_name(
            rewrite_service_urls(paths.apply(v), ns, ctx.resolve_service), ns, ctx.pod_dns
        )
        for k, v in env.items()
    }
    # The image's user is root unless set; HOME and TMPDIR stay inside the pod, and
    # nothing in the pod's env may steer the host's interpreters (see hostpaths).
    env = hostpaths.host_env(
        env,
        workdir=ctx.workdir,
        home=roots["/root"],
        tmp=tmp,
        roots=[poddir, *roots.values()],
    )
    search = [str(ctx.python_bin), "/usr/local/bin", "/usr/bin", "/bin"]
    if ctx.shim_dir is not None:
        search.insert(0, str(ctx.shim_dir))
    env["PATH"] = ":".join(search)
    return env


def _ports(argv: list[str], container: Obj) -> tuple[list[str], int | None, dict[str, int]]:
    """One free host port for a server container (``--port`` rewritten or added: one host
    network), and the container's declared ports (number and name) mapped to it."""
    port = None
    container_ports: dict[str, int] = {}
    declared = [p for p in container.get("ports") or [] if p.get("containerPort")]
    if any(a == "--port" or a.startswith("--port=") for a in argv) or declared:
        port = free_port()
        argv, asked = rewrite_port(argv, port)
        if asked is None and declared:
            argv.extend(["--port", str(port)])  # a default port would collide: one host network
        for p in declared:
            container_ports[str(p["containerPort"])] = port
            if p.get("name"):
                container_ports[str(p["name"])] = port
        if asked is not None:
            container_ports[str(asked)] = port
    return argv, port, container_ports


def _workdir(container: Obj, paths: PathMap, poddir: Path, roots: dict[str, Path]) -> Path:
    """The container's working directory on the host, kept inside the pod's directories."""
    workdir = container.get("workingDir")
    cwd = paths.local(str(workdir)) if workdir else poddir / "fs"
    if workdir and not any(hostpaths.within(cwd, r) for r in [poddir, *roots.values()]):
        cwd = hostpaths.inside(poddir / "fs", str(workdir).lstrip("/") or ".", "workingDir")
    cwd.mkdir(parents=True, exist_ok=True)
    return cwd
