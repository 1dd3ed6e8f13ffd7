#!/usr/bin/env bash
# Install the Debian packages CI needs beyond Python: shellcheck (tests/unit/chart: every
# shell script and the rendered entrypoint), tmux (tests/integration/demo/test_screen.py: the
# demo in a real terminal), buildah and mmdebstrap (hack/image-test.sh), chromium
# (tests/integration/report: report pages opened in headless Chromium), gcc
# (tests/unit/bench/test_bench_sandbox_allowlist.py: the native extension an attacker
# would load from scratch, compiled by cc), prometheus (tests/integration/prometheus_real: the
# canary's analysis.prometheus read from a real Prometheus scraping simulators).
# Does nothing when they are present; without root or apt-get it says so and leaves the
# decision to the checks (the image test skips, saying why; the shellcheck test fails in CI).
set -euo pipefail
missing=()
for tool in shellcheck tmux buildah mmdebstrap chromium gcc prometheus; do
  command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
done
if ((${#missing[@]} == 0)); then
  exit 0
fi
if [[ $(id -u) != 0 ]] || ! command -v apt-get >/dev/null 2>&1; then
  echo "ci-tools: ${missing[*]} missing and not installable here (needs root and apt-get)" >&2
  exit 0
fi
echo "ci-tools: installing ${missing[*]}"
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
  shellcheck tmux buildah mmdebstrap chromium gcc libc6-dev prometheus >/dev/null
