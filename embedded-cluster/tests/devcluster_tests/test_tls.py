"""HTTPS: the embedded API is verified against its own CA, by every client a project uses.

The ``devcluster`` fixture serves HTTPS, so kopf's login, the ``kubernetes`` client and
kubectl verify a chain in every test that uses it; these tests make sure they really do
(a client without the CA, or with another cluster's, is refused) and that plain HTTP
stays available for whoever asks for it.
"""

from __future__ import annotations

import base64
import ssl
import subprocess
from pathlib import Path

import httpx
import kubernetes
import pytest
import urllib3
import yaml
from cryptography import x509

from devcluster import DevCluster
from devcluster.tls import serving_certificate

from .test_clients import kubectl_binary


def test_the_fixture_serves_https_verified_by_its_own_ca(devcluster: DevCluster) -> None:
    assert devcluster.url.startswith("https://127.0.0.1:")
    with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
        httpx.get(devcluster.url + "/version")
    assert devcluster.http.get("/version").status_code == 200
    context = ssl.create_default_context(cadata=(devcluster.ca_pem or b"").decode())
    assert httpx.get(devcluster.url + "/version", verify=context).json()["major"] == "1"


def test_kubeconfig_carries_the_ca_for_the_kubernetes_client(
    devcluster: DevCluster, kubeconfig: Path, tmp_path: Path
) -> None:
    config = yaml.safe_load(kubeconfig.read_text())
    cluster = config["clusters"][0]["cluster"]
    assert base64.b64decode(cluster["certificate-authority-data"]) == devcluster.ca_pem
    client_config = kubernetes.client.Configuration()
    kubernetes.config.load_kube_config(str(kubeconfig), client_configuration=client_config)
    with kubernetes.client.ApiClient(client_config) as api:
        names = [n.metadata.name for n in kubernetes.client.CoreV1Api(api).list_namespace().items]
    assert names == ["default"]
    # Another cluster's CA: the same client refuses the server.
    with DevCluster(tls=True, host="localhost") as other:
        assert other.ca_pem != devcluster.ca_pem
        cluster["certificate-authority-data"] = base64.b64encode(other.ca_pem or b"").decode()
    wrong = tmp_path / "wrong-ca"
    wrong.write_text(yaml.safe_dump(config))
    wrong_config = kubernetes.client.Configuration()
    kubernetes.config.load_kube_config(str(wrong), client_configuration=wrong_config)
    wrong_config.retries = 0
    with (
        kubernetes.client.ApiClient(wrong_config) as api,
        pytest.raises(urllib3.exceptions.MaxRetryError, match="CERTIFICATE_VERIFY_FAILED"),
    ):
        kubernetes.client.CoreV1Api(api).list_namespace(_request_timeout=5)
    done = subprocess.run(
        [kubectl_binary(), "--kubeconfig", str(wrong), "get", "namespaces"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1
    assert "certificate signed by unknown authority" in done.stderr


def test_plain_http_stays_available() -> None:
    with DevCluster() as cluster:
        assert cluster.url.startswith("http://")
        assert cluster.ca_pem is None
        assert httpx.get(cluster.url + "/version").status_code == 200


def test_the_serving_certificate_names_loopback_and_localhost() -> None:
    issued = serving_certificate("127.0.0.1")
    cert = x509.load_pem_x509_certificate(issued.cert_pem)
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "localhost" in names.get_values_for_type(x509.DNSName)
    assert [str(ip) for ip in names.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
