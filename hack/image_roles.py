"""Run each role of the built image as the cluster runs it; fail when one writes outside its mounts.

Called by ``hack/image-test.sh`` after the build. Every role runs in its own buildah working
container (``buildah run --isolation chroot``, which shares the host network), as the pod's
user, with the command, args, env and volumes of the rendered manifest:

- the Helm chart's operator container (helm-python-sdk render, default values) against the
  embedded API (devcluster on 127.0.0.1): it must answer its probes and reconcile a
  VLLMDeployment into a Deployment;
- the simulator pod of ``hack/kind/vllmd-sim.yaml`` (the operator's render: entrypoint script,
  ``vllm serve`` args, env), as a vLLM stand-in; it must become healthy;
- every container of the benchmark Job the operator renders for that resource (native
  sidecars included), against the simulator; each must exit 0, the bench container with a
  summary in its termination message.

Read-only root: buildah cannot mount the root read-only, so each container's overlay upper
directory (everything written outside a bind mount) is listed after a no-op run and after the
role; anything new fails. Declared volumes are host directories bind-mounted read-write
(emptyDir, PVC) or read-only (configMap, secret). What a role wrote in them is printed.

The deviations from a kubelet, each forced by the machine and each named here: ports are
rewritten to free ones and Service URLs to 127.0.0.1 (shared host network, as the devcluster
kubelet does); the termination message file moves from ``/dev`` (the host's read-only /dev in
a chroot) to ``/run/termination/log``; the operator gets a kubeconfig (``KUBECONFIG``) instead
of a service-account token, because the embedded API speaks plain HTTP.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import select
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import helm_python
import httpx
import yaml

from devcluster import DevCluster
from devcluster.kubelet_launch import (
    expand_vars,
    free_port,
    rewrite_port,
    rewrite_service_urls,
)
from vllm_operator.api import parse_vllm_deployment
from vllm_operator.api.crd import CRD_FILENAME
from vllm_operator.engine.policy import plan_launch
from vllm_operator.render import render_all, revision_hash
from vllm_operator.render.job import render_job

ROOT = Path(__file__).resolve().parents[1]
CHART = ROOT / "charts" / "vllm-operator"
EXAMPLE = ROOT / "hack" / "kind" / "vllmd-sim.yaml"
TERMINATION_DIR = "/run/termination"
Obj = dict[str, Any]


class RoleFailed(Exception):
    """A role did not do its job in the image, or wrote outside its mounts."""


class Watch:
    """Every path created under some directories, even if deleted again (inotify, recursive).

    A listing after the run misses what a role creates and removes (a temporary directory);
    inotify sees the creation. A file created inside a brand-new directory before the watch
    on that directory is added can be missed, but the directory itself is always seen.
    """

    _IN_CREATE, _IN_MOVED_TO, _IN_ISDIR = 0x100, 0x80, 0x40000000

    def __init__(self) -> None:
        self._libc = ctypes.CDLL(None, use_errno=True)
        self._fd = self._libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        if self._fd < 0:
            raise OSError(ctypes.get_errno(), "inotify_init1")
        self._dirs: dict[int, Path] = {}
        self.created: dict[Path, set[str]] = {}
        self._roots: dict[Path, Path] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def add(self, root: Path) -> None:
        self.created.setdefault(root, set())
        self._add(root, root)

    def _add(self, path: Path, root: Path) -> None:
        wd = self._libc.inotify_add_watch(
            self._fd, os.fsencode(path), self._IN_CREATE | self._IN_MOVED_TO
        )
        if wd >= 0:
            self._dirs[wd] = path
            self._roots[path] = root

    def start(self) -> None:
        self._thread.start()

    def _loop(self) -> None:
        header = struct.Struct("iIII")
        while not self._stop.is_set():
            ready, _, _ = select.select([self._fd], [], [], 0.1)
            if not ready:
                continue
            data = os.read(self._fd, 65536)
            offset = 0
            while offset < len(data):
                wd, mask, _, length = header.unpack_from(data, offset)
                name = data[offset + header.size : offset + header.size + length].rstrip(b"\0")
                offset += header.size + length
                parent = self._dirs.get(wd)
                if parent is None:
                    continue
                path = parent / os.fsdecode(name)
                root = self._roots[parent]
                self.created[root].add(str(path.relative_to(root)))
                if mask & self._IN_ISDIR:
                    self._add(path, root)
                    self._scan(path, root)  # what appeared before the watch did

    def _scan(self, path: Path, root: Path) -> None:
        try:
            children = list(path.iterdir())
        except OSError:
            return
        for child in children:
            self.created[root].add(str(child.relative_to(root)))
            if child.is_dir() and not child.is_symlink():
                self._add(child, root)
                self._scan(child, root)

    def stop(self) -> None:
        time.sleep(0.3)  # let the last events arrive
        self._stop.set()
        self._thread.join()
        os.close(self._fd)


class Buildah:
    def __init__(self, root: str, runroot: str) -> None:
        self.base = ["buildah", "--root", root, "--runroot", runroot, "--storage-driver", "overlay"]

    def out(self, *args: str) -> str:
        return subprocess.run(
            [*self.base, *args], check=True, capture_output=True, text=True
        ).stdout.strip()

    def popen(self, args: list[str], log: Path) -> subprocess.Popen[bytes]:
        with log.open("wb") as sink:
            return subprocess.Popen(
                [*self.base, *args], stdout=sink, stderr=subprocess.STDOUT, start_new_session=True
            )


class Role:
    """One container of a rendered pod, in its own working container with its volumes."""

    def __init__(
        self, bh: Buildah, image: str, name: str, *, pod: Obj, container: Obj, work: Path
    ) -> None:
        self.bh, self.name, self.pod, self.container = bh, name, pod, container
        self.dir = work / name
        self.dir.mkdir(parents=True)
        self.ctr = bh.out(
            "from", "--pull=never", "--name", f"vllmop-role-{name}-{os.getpid()}", image
        )
        self.upper = Path(bh.out("mount", self.ctr)).parent / "diff"
        inspected = json.loads(bh.out("inspect", "--type", "image", image))
        config = inspected["OCIv1"]["config"]
        self.image_config: Obj = config
        self.mounts: dict[str, Path] = {}
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = self.dir / "log"

    def _user(self) -> str:
        ctx = {
            **(self.pod.get("securityContext") or {}),
            **(self.container.get("securityContext") or {}),
        }
        user = ctx.get("runAsUser")
        group = ctx.get("runAsGroup")
        if user is None:  # the image's USER, as the kubelet does
            return str(self.image_config.get("User") or "0")
        return f"{user}:{group if group is not None else user}"

    def _volume_args(self, shared: dict[str, Path]) -> list[str]:
        volumes = {v["name"]: v for v in self.pod.get("volumes") or []}
        args: list[str] = []
        for mount in self.container.get("volumeMounts") or []:
            volume = volumes[mount["name"]]
            if mount["mountPath"].startswith("/dev/"):
                continue  # a chroot has the host's /dev; its /dev/shm is a writable tmpfs
            if "emptyDir" not in volume and "persistentVolumeClaim" not in volume:
                raise RoleFailed(f"{self.name}: volume {mount['name']} {volume} not emulated here")
            host = shared.setdefault(mount["name"], self.dir.parent / "volumes" / mount["name"])
            if not host.exists():
                host.mkdir(parents=True)
                host.chmod(0o777)  # emptyDir and fresh PVCs are world-writable
            mode = "ro" if mount.get("readOnly") else "rw"
            self.mounts[mount["mountPath"]] = host
            args += ["--mount", f"type=bind,src={host},dst={mount['mountPath']},{mode}"]
        term = self.dir / "termination"
        term.mkdir()
        term.chmod(0o777)
        self.mounts[TERMINATION_DIR] = term
        args += ["--mount", f"type=bind,src={term},dst={TERMINATION_DIR},rw"]
        return args

    def _written(self) -> set[str]:
        return {str(p.relative_to(self.upper)) for p in self.upper.rglob("*")}

    def start(
        self,
        env: dict[str, str],
        argv_fix: Callable[[list[str]], list[str]],
        shared: dict[str, Path],
        extra_mounts: tuple[str, ...] = (),
    ) -> None:
        # A no-op run first: what buildah itself creates in the container is not the role's.
        subprocess.run(
            [
                *self.bh.base,
                "run",
                "--isolation",
                "chroot",
                "--user",
                self._user(),
                self.ctr,
                "--",
                "true",
            ],
            check=True,
        )
        self.baseline = self._written()
        command = list(self.container.get("command") or self.image_config.get("Entrypoint") or [])
        args = list(
            self.container.get("args")
            if "args" in self.container
            else self.image_config.get("Cmd") or []
        )
        argv = [expand_vars(a, env) for a in [*command, *args]]
        argv = argv_fix(argv)
        volume_args = self._volume_args(shared)
        mount_args = [*volume_args, *extra_mounts]
        # The mount points buildah creates in the container are not the role's writes.
        self.mountpoints = {
            str(parent)
            for arg in mount_args
            if "dst=" in arg
            for dst in [Path(arg.split("dst=", 1)[1].split(",", 1)[0].lstrip("/"))]
            for parent in [dst, *dst.parents]
            if str(parent) != "."
        }
        self.watch = Watch()
        self.watch.add(self.upper)
        for host in self.mounts.values():
            self.watch.add(host)
        self.watch.start()
        run = ["run", "--isolation", "chroot", "--user", self._user(), *mount_args]
        for key, value in env.items():
            run += ["-e", f"{key}={value}"]
        if self.container.get("workingDir"):
            run += ["--workingdir", self.container["workingDir"]]
        self.argv = argv
        self.proc = self.bh.popen([*run, self.ctr, "--", *argv], self.log)

    def wait(self, timeout: float) -> int:
        assert self.proc is not None
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.stop()
            raise RoleFailed(
                f"{self.name}: still running after {timeout:.0f}s\n{self.tail()}"
            ) from None

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(5)

    def tail(self, lines: int = 40) -> str:
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        return "\n".join(text.splitlines()[-lines:])

    def check_writes(self) -> list[str]:
        """Paths written outside the mounts (must be none); prints what went into each mount."""
        self.watch.stop()
        written = self._written() | self.watch.created[self.upper]
        outside = sorted(written - self.baseline - self.mountpoints)
        for path, host in sorted(self.mounts.items()):
            now = {str(p.relative_to(host)) for p in host.rglob("*")}
            seen = sorted(now | self.watch.created[host])
            shown = ", ".join(seen[:6]) + (f", ... ({len(seen)} paths)" if len(seen) > 6 else "")
            gone = len(set(seen) - now)
            print(
                f"  {self.name}: wrote in {path}: {shown or 'nothing'}"
                + (f" ({gone} removed again)" if gone else "")
            )
        return outside

    def remove(self) -> None:
        subprocess.run([*self.bh.base, "rm", self.ctr], check=False, capture_output=True)


def pod_env(container: Obj, fields: dict[str, str]) -> dict[str, str]:
    """The container's env as the kubelet resolves it (values, fieldRefs, $(VAR) expansion)."""
    env: dict[str, str] = {}
    for item in container.get("env") or []:
        if "value" in item:
            env[item["name"]] = expand_vars(str(item["value"]), env)
        elif "fieldRef" in (item.get("valueFrom") or {}):
            env[item["name"]] = fields[item["valueFrom"]["fieldRef"]["fieldPath"]]
        else:
            raise RoleFailed(
                f"env {item['name']}: source {item.get('valueFrom')} not emulated here"
            )
    return env


def shorten(argv: list[str]) -> str:
    """The argv for the log, long items (the entrypoint script, JSON) cut."""
    return " ".join(a if len(a) < 60 else a[:40].replace("\n", " ") + "..." for a in argv)


def wait_http(url: str, role: Role, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if role.proc is not None and role.proc.poll() is not None:
            raise RoleFailed(f"{role.name} exited with {role.proc.returncode}\n{role.tail()}")
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise RoleFailed(f"{role.name}: {url} not answering after {timeout:.0f}s\n{role.tail()}")


def chart_operator(image: str) -> tuple[Obj, Obj, int, int]:
    """The chart's operator pod and container (default values but the image and two free ports)."""
    metrics, liveness = free_port(), free_port()
    repo, _, tag = image.rpartition(":")
    values = {
        "image": {"repository": repo, "tag": tag},
        "operator": {"metricsPort": metrics, "livenessPort": liveness},
    }
    rendered = helm_python.Chart.load(CHART).render(
        values, name="vllm-operator", namespace="vllm-system"
    )
    docs = [
        d
        for path, text in sorted(rendered.items())
        if path.endswith(".yaml")
        for d in yaml.safe_load_all(text)
        if d
    ]
    (deployment,) = [d for d in docs if d["kind"] == "Deployment"]
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    return pod, container, metrics, liveness


@contextmanager
def roles_cleanup(roles: list[Role]) -> Iterator[None]:
    try:
        yield
    finally:
        for role in roles:
            role.stop()
            role.remove()


def run_operator(bh: Buildah, image: str, work: Path) -> list[str]:
    pod, container, metrics, liveness = chart_operator(image)
    crd = ROOT / "crds" / CRD_FILENAME
    with DevCluster(crds=[crd], namespaces=("default", "vllm-system", "vllm-demo")) as cluster:
        kubeconfig = cluster.write_kubeconfig(work / "kubeconfig")
        kubeconfig.chmod(0o644)
        role = Role(bh, image, "operator", pod=pod, container=container, work=work)
        roles = [role]
        with roles_cleanup(roles):
            env = pod_env(
                container, {"metadata.name": "vllm-operator-0", "metadata.namespace": "vllm-system"}
            )
            env["KUBECONFIG"] = "/run/kubeconfig/config"
            mounts = ("--mount", f"type=bind,src={kubeconfig},dst=/run/kubeconfig/config,ro")
            role.start(env, lambda argv: argv, {}, mounts)
            print(f"  operator: {' '.join(role.argv)}")
            wait_http(f"http://127.0.0.1:{liveness}/healthz", role, 120)
            wait_http(f"http://127.0.0.1:{metrics}/metrics", role, 30)
            resource = yaml.safe_load(EXAMPLE.read_text())
            cluster.create(resource)
            name, ns = resource["metadata"]["name"], resource["metadata"]["namespace"]
            try:
                cluster.wait_for(
                    lambda: cluster.list("apps/v1", "deployments", ns), timeout=60, interval=0.2
                )
            except Exception as e:
                raise RoleFailed(
                    f"operator: no Deployment for {name} within 60s ({e})\n{role.tail()}"
                ) from e
            print(f"  operator: reconciled {ns}/{name} into a Deployment; probes answer")
            role.stop()
            return [f"operator: {p}" for p in role.check_writes()]


def run_bench_against_sim(bh: Buildah, image: str, work: Path) -> list[str]:
    resource = yaml.safe_load(EXAMPLE.read_text())
    resource["spec"]["engine"]["image"] = image
    vd = parse_vllm_deployment(resource)
    (deployment,) = [m for m in render_all(vd) if m["kind"] == "Deployment"]
    sim_pod = deployment["spec"]["template"]["spec"]
    (sim_container,) = sim_pod["containers"]
    port = free_port()
    sim = Role(bh, image, "simulator", pod=sim_pod, container=sim_container, work=work)
    roles = [sim]
    with roles_cleanup(roles):
        env = pod_env(sim_container, {})
        sim.start(env, lambda argv: rewrite_port(argv, port)[0], {})
        print(f"  simulator: {shorten(sim.argv)}")
        wait_http(f"http://127.0.0.1:{port}/health", sim, 120)
        print("  simulator: healthy")
        job = render_job(vd, revision_hash(vd.spec, plan_launch(vd.spec)), 1, image=image)
        job_pod = job["spec"]["template"]["spec"]
        resolve = lambda _ns, _svc, _port: f"127.0.0.1:{port}"  # noqa: E731
        shared: dict[str, Path] = {}
        # Native sidecars (initContainers with restartPolicy Always) start first and are
        # stopped once the regular containers have exited, as the kubelet does.
        sidecars = [
            c for c in job_pod.get("initContainers") or [] if c.get("restartPolicy") == "Always"
        ]
        side_roles = [
            Role(bh, image, f"job-{c['name']}", pod=job_pod, container=c, work=work)
            for c in sidecars
        ]
        job_roles = [
            Role(bh, image, f"job-{c['name']}", pod=job_pod, container=c, work=work)
            for c in job_pod["containers"]
        ]
        roles += side_roles + job_roles
        ns = vd.metadata.namespace
        for role in side_roles + job_roles:
            term = role.container.get("terminationMessagePath", "/dev/termination-log")

            def fix(argv: list[str], term: str = term) -> list[str]:
                moved = [a.replace(term, f"{TERMINATION_DIR}/log") for a in argv]
                return [rewrite_service_urls(a, ns, resolve) for a in moved]

            role.start(pod_env(role.container, {}), fix, shared)
            print(f"  {role.name}: {shorten(role.argv)}")
        failures: list[str] = []
        for role in job_roles:
            rc = role.wait(600)
            summary = role.mounts[TERMINATION_DIR] / "log"
            if rc != 0:
                raise RoleFailed(f"{role.name} exited with {rc}\n{role.tail()}")
            if role.name == "job-bench":
                data = json.loads(summary.read_text()) if summary.exists() else None
                if not data:
                    raise RoleFailed(
                        f"{role.name}: no summary in its termination message\n{role.tail()}"
                    )
                size = len(summary.read_bytes())
                print(f"  {role.name}: exit 0, summary {size} bytes, verdict {data.get('verdict')}")
            failures += [f"{role.name}: {p}" for p in role.check_writes()]
        for role in side_roles:
            role.stop()
            failures += [f"{role.name}: {p}" for p in role.check_writes()]
        sim.stop()
        failures += [f"simulator: {p}" for p in sim.check_writes()]
        return failures


def check_the_check(bh: Buildah, image: str, work: Path) -> None:
    """A container that writes outside its mounts (and removes it again) must be caught."""
    pod = {"volumes": [{"name": "tmp", "emptyDir": {}}]}
    script = "mkdir /home/nonroot/x && rm -r /home/nonroot/x && touch /tmp/y"
    container = {
        "name": "canary",
        "command": ["/bin/sh", "-c", script],
        "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}],
    }
    role = Role(bh, image, "canary", pod=pod, container=container, work=work)
    with roles_cleanup([role]):
        role.start({}, lambda argv: argv, {})
        if role.wait(60) != 0:
            raise RoleFailed(f"canary exited with {role.proc and role.proc.returncode}")
        outside = role.check_writes()
    # The directories on the way are copied up, so they show too; x itself may be gone
    # before its parent's watch exists (it lived for microseconds).
    if not outside or not set(outside) <= {"home", "home/nonroot", "home/nonroot/x"}:
        raise RoleFailed(f"the write check is blind: expected home/nonroot/x, saw {outside}")
    print(f"  canary: a write outside the mounts is caught ({', '.join(outside)})")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--image", required=True)
    parser.add_argument("--root", required=True, help="buildah storage root")
    parser.add_argument("--runroot", required=True, help="buildah run root")
    opts = parser.parse_args()
    bh = Buildah(opts.root, opts.runroot)
    work = Path(tempfile.mkdtemp(prefix="vllmop-roles-"))
    try:
        check_the_check(bh, opts.image, work / "canary")
        failures = run_operator(bh, opts.image, work / "operator")
        failures += run_bench_against_sim(bh, opts.image, work / "bench")
    except RoleFailed as e:
        print(f"image-roles: FAILED: {e}", file=sys.stderr)
        return 1
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if failures:
        print("image-roles: FAILED: written outside the declared mounts:", file=sys.stderr)
        for line in failures:
            print(f"  {line}", file=sys.stderr)
        return 1
    print("image-roles: every role ran as its pod's user and wrote only into its mounts")
    return 0


if __name__ == "__main__":
    sys.exit(main())
