"""The demo kubelet keeps a pod spec inside the pod's own directory on the host.

Once, a ConfigMap key with an absolute path became a host file (as root, in the demo), and
a pod's PYTHONPATH was honoured by the host's Python. Each path a pod spec names is now
joined by ``hostpaths.inside`` (no absolute paths, no '..', no escaping symlink), files the
kubelet writes or reads refuse symlinks, and the env of a host process is scrubbed.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest

from devcluster import DevCluster
from devcluster.hostpaths import HostPathError, host_env, read_text, write_text
from devcluster.kubelet import Kubelet
from devcluster.kubelet_launch import LaunchContext, prepare_launch

from .helpers import container_status, job, pods_of, wait

Obj = dict[str, Any]


def context(workdir: Path, config_maps: dict[str, Obj] | None = None) -> LaunchContext:
    maps = config_maps or {}
    return LaunchContext(
        workdir=workdir,
        shim_dir=None,
        python_bin=Path(sys.executable).parent,
        secret=lambda ns, name: None,
        config_map=lambda ns, name: maps.get(name),
        resolve_service=lambda ns, name, port: None,
        image_env=lambda image: {},
        extra_env={},
    )


def pod(container: Obj, volumes: list[Obj] | None = None) -> Obj:
    base: Obj = {"name": "main", "image": "example/app:1", "command": ["true"]}
    return {
        "metadata": {"name": "p", "namespace": "default"},
        "spec": {"containers": [{**base, **container}], "volumes": volumes or []},
    }


def config_map_pod(items: list[Obj] | None = None, mount: str = "/etc/suite") -> Obj:
    volume: Obj = {"name": "suite", "configMap": {"name": "suite"}}
    if items is not None:
        volume["configMap"]["items"] = items
    return pod({"volumeMounts": [{"name": "suite", "mountPath": mount}]}, [volume])


def files_under(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


@pytest.fixture
def host(tmp_path: Path) -> Path:
    """A directory standing for the rest of the host: nothing may appear in it."""
    path = tmp_path / "host"
    path.mkdir()
    return path


def test_a_plain_config_map_key_is_written_in_the_pod(tmp_path: Path) -> None:
    ctx = context(tmp_path / "kubelet", {"suite": {"data": {"suite.yaml": "tests: []"}}})
    poddir = tmp_path / "kubelet/default/p"
    prepare_launch(config_map_pod(), poddir, ctx)
    assert (poddir / "fs/etc/suite/suite.yaml").read_text() == "tests: []"


@pytest.mark.parametrize(
    "items",
    [
        [{"key": "k", "path": "ABSOLUTE"}],
        [{"key": "k", "path": "../../../../host/x"}],
        [{"key": "k", "path": "a/../../../../../host/x"}],
    ],
)
def test_item_paths_outside_the_volume_are_refused(
    tmp_path: Path, host: Path, items: list[Obj]
) -> None:
    for item in items:
        item["path"] = item["path"].replace("ABSOLUTE", str(host / "x"))
    ctx = context(tmp_path / "kubelet", {"suite": {"data": {"k": "owned"}}})
    with pytest.raises(HostPathError):
        prepare_launch(config_map_pod(items), tmp_path / "kubelet/default/p", ctx)
    assert files_under(host) == set()


def test_a_key_that_is_an_absolute_path_is_refused(tmp_path: Path, host: Path) -> None:
    key = str(host / "cron")
    ctx = context(tmp_path / "kubelet", {"suite": {"data": {key: "* * * * * root x"}}})
    with pytest.raises(HostPathError, match="absolute"):
        prepare_launch(config_map_pod(), tmp_path / "kubelet/default/p", ctx)
    assert files_under(host) == set()


def test_a_symlink_planted_in_the_pod_is_not_followed(tmp_path: Path, host: Path) -> None:
    poddir = tmp_path / "kubelet/default/p"
    (poddir / "fs/etc").mkdir(parents=True)
    (poddir / "fs/etc/suite").symlink_to(host)  # the volume directory points outside
    ctx = context(tmp_path / "kubelet", {"suite": {"data": {"k": "owned"}}})
    with pytest.raises(HostPathError, match="symlink"):
        prepare_launch(config_map_pod(), poddir, ctx)
    assert files_under(host) == set()


@pytest.mark.parametrize(
    ("container", "volumes"),
    [
        ({"volumeMounts": [{"name": "v", "mountPath": "/../../../../host"}]}, [{"name": "v"}]),
        (
            {"volumeMounts": [{"name": "v", "mountPath": "/data", "subPath": "../../../../host"}]},
            [{"name": "v", "emptyDir": {}}],
        ),
        (
            {"volumeMounts": [{"name": "v", "mountPath": "/data"}]},
            [{"name": "v", "persistentVolumeClaim": {"claimName": "../../../host"}}],
        ),
        ({"terminationMessagePath": "/../../../../host/log"}, []),
        ({"workingDir": "/root/../../../../../host"}, []),
        ({"name": "../../../../host/x"}, []),
    ],
    ids=["mountPath", "subPath", "claimName", "terminationMessagePath", "workingDir", "name"],
)
def test_spec_paths_cannot_leave_the_pod(
    tmp_path: Path, host: Path, container: Obj, volumes: list[Obj]
) -> None:
    with pytest.raises(HostPathError):
        prepare_launch(
            pod(container, volumes), tmp_path / "kubelet/default/p", context(tmp_path / "kubelet")
        )
    assert files_under(host) == set()


def test_the_env_of_a_host_process_is_scrubbed(tmp_path: Path) -> None:
    workdir = tmp_path / "kubelet"
    env = [
        {"name": n, "value": v}
        for n, v in {
            "PYTHONPATH": "/evil",
            "PYTHONSTARTUP": "/evil/s.py",
            "PYTHONHOME": "/evil",
            "PYTHONBREAKPOINT": "os.system",
            "LD_PRELOAD": "/evil/x.so",
            "LD_AUDIT": "/evil/x.so",
            "BASH_ENV": "/evil/rc",
            "BASH_FUNC_ls%%": "() { id; }",
            "GCONV_PATH": "/evil",
            "PYTHONUNBUFFERED": "1",
            "HOME": "/etc",
            "TMPDIR": "/",
            "LD_LIBRARY_PATH": f"/usr/local/cuda/lib64::rel:/root/lib:{workdir}/x",
            "VLLMOP_SIM_TIME_SCALE": "0.01",
        }.items()
    ]
    poddir = workdir / "default/p"
    launch = prepare_launch(pod({"env": env}), poddir, context(workdir))
    got = launch.env
    for name in (
        "PYTHONPATH",
        "PYTHONSTARTUP",
        "PYTHONHOME",
        "PYTHONBREAKPOINT",
        "LD_PRELOAD",
        "LD_AUDIT",
        "BASH_ENV",
        "BASH_FUNC_ls%%",
        "GCONV_PATH",
    ):
        assert name not in got, name
    assert got["PYTHONUNBUFFERED"] == "1"
    assert got["VLLMOP_SIM_TIME_SCALE"] == "0.01"
    assert got["HOME"] == str(poddir / "fs/root")
    assert got["TMPDIR"] == str(poddir / "fs/tmp")
    # /root/lib was mapped into the pod (writable by it): dropped, like '' and relative.
    assert got["LD_LIBRARY_PATH"] == "/usr/local/cuda/lib64"
    assert got["PYTHONNOUSERSITE"] == "1"
    assert got["PYTHONSAFEPATH"] == "1"


def test_home_and_tmpdir_inside_the_pod_are_kept(tmp_path: Path) -> None:
    env = host_env(
        {"HOME": str(tmp_path / "pod/fs/tmp"), "TMPDIR": str(tmp_path / "pod/fs/tmp/t")},
        workdir=tmp_path,
        home=tmp_path / "pod/fs/root",
        tmp=tmp_path / "pod/fs/tmp",
        roots=[tmp_path / "pod"],
    )
    assert env["HOME"] == str(tmp_path / "pod/fs/tmp")
    assert env["TMPDIR"] == str(tmp_path / "pod/fs/tmp/t")


def test_file_helpers_refuse_symlinks(tmp_path: Path, host: Path) -> None:
    secret = host / "shadow"
    secret.write_text("root:x")
    link = tmp_path / "termination-log"
    link.symlink_to(secret)
    with pytest.raises(HostPathError):
        write_text(link, "")
    with pytest.raises(HostPathError):
        read_text(link)
    assert secret.read_text() == "root:x"
    plain = tmp_path / "plain"
    write_text(plain, "x" * 10)
    assert read_text(plain, limit=4) == "xxxx"


def test_pythonpath_of_a_pod_does_not_reach_the_host_python(
    devcluster: DevCluster, kubelet: Kubelet, tmp_path: Path
) -> None:
    evil = tmp_path / "evil"
    evil.mkdir()
    marker = tmp_path / "owned"
    (evil / "sitecustomize.py").write_text(f"open({str(marker)!r}, 'w').write('owned')\n")
    (evil / "startup.py").write_text(f"open({str(marker)!r}, 'w').write('owned')\n")
    body = job("env-probe", ["python", "-c", "import sys; print(sys.path)"])
    body["spec"]["template"]["spec"]["containers"][0]["env"] = [
        {"name": "PYTHONPATH", "value": str(evil)},
        {"name": "PYTHONSTARTUP", "value": str(evil / "startup.py")},
        {"name": "PYTHONINSPECT", "value": "1"},
    ]
    devcluster.create(body)

    def finished() -> Obj | None:
        pods = pods_of(devcluster, **{"job-name": "env-probe"})
        state = container_status(pods[0]).get("state", {}) if pods else {}
        return state.get("terminated")

    terminated = wait(finished, 30, "the probe pod to finish")
    assert terminated["exitCode"] == 0
    assert not marker.exists()
    log = kubelet.pod_log(
        "default", pods_of(devcluster, **{"job-name": "env-probe"})[0]["metadata"]["name"]
    )
    assert str(evil) not in log


def test_a_config_map_key_with_an_absolute_path_never_becomes_a_host_file(
    devcluster: DevCluster, kubelet: Kubelet, host: Path
) -> None:
    target = host / "planted"
    devcluster.create(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "suite", "namespace": "default"},
            "data": {"k": "owned"},
        }
    )
    body = job("cm-probe", ["true"])
    spec = body["spec"]["template"]["spec"]
    spec["volumes"] = [
        {"name": "s", "configMap": {"name": "suite", "items": [{"key": "k", "path": str(target)}]}}
    ]
    spec["containers"][0]["volumeMounts"] = [{"name": "s", "mountPath": "/etc/suite"}]
    devcluster.create(body)

    def refused() -> str | None:
        pods = pods_of(devcluster, **{"job-name": "cm-probe"})
        waiting = container_status(pods[0]).get("state", {}).get("waiting") if pods else None
        if waiting and waiting.get("reason") == "CreateContainerConfigError":
            return str(waiting.get("message"))
        return None

    message = wait(refused, 30, "CreateContainerConfigError")
    assert "absolute" in message
    assert not target.exists()
    assert os.listdir(host) == []
