#!/usr/bin/env bash
# Regenerate the VLLMDeployment CRD (crds/ and the Helm chart's byte-identical copy) from the
# pydantic models. `hack/update-crds.sh --check` only verifies (exit 1 when stale), as CI does.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
if [[ -x .venv/bin/vllm-operator ]]; then
  exec .venv/bin/vllm-operator crds "$@"
fi
exec vllm-operator crds "$@"
