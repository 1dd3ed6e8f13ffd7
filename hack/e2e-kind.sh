#!/usr/bin/env bash
# Try vllm-operator on a laptop, end to end, without a GPU:
#
#   1. create a kind cluster (or reuse it) and advertise a fake GPU resource on its nodes;
#   2. build the project image (operator + benchmark + vLLM simulator) and load it into kind;
#   3. install the Helm chart (CRD, operator, RBAC) with that image;
#   4. apply hack/kind/vllmd-sim.yaml: a VLLMDeployment whose "vLLM" is the simulator,
#      emulating the vLLM version the resource names (spec.engine.version, 0.17.0; also
#      VLLMOP_SIM_VERSION in its env: the stand-in never guesses);
#   5. wait until its first revision is gated and serves, then change the performance mode
#      and wait until the new revision is benchmarked and promoted;
#   6. print the status.
#
# Needs docker, kind, kubectl and helm on PATH. Not run in CI (no container runtime there).
#
# usage: hack/e2e-kind.sh [--skip-build] [--delete]
#   --skip-build  reuse the image already loaded into kind
#   --delete      delete the kind cluster at the end (default: keep it to explore)
# environment: CLUSTER (vllm-operator), IMAGE_REPO (vllm-operator), IMAGE_TAG (dev),
#              OPERATOR_NAMESPACE (vllm-system), TIMEOUT seconds per wait (900)
set -euo pipefail

CLUSTER=${CLUSTER:-vllm-operator}
IMAGE_REPO=${IMAGE_REPO:-vllm-operator}
IMAGE_TAG=${IMAGE_TAG:-dev}
IMAGE="${IMAGE_REPO}:${IMAGE_TAG}"
OPERATOR_NAMESPACE=${OPERATOR_NAMESPACE:-vllm-system}
DEMO_NAMESPACE=vllm-demo
NAME=sim-qwen
TIMEOUT=${TIMEOUT:-900}
FAKE_GPU=vllm-operator.dev/sim-gpu

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=1
DELETE=0
for arg in "$@"; do
  case "$arg" in
    --skip-build) BUILD=0 ;;
    --delete) DELETE=1 ;;
    -h | --help)
      sed -n '2,20p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
      exit 0
      ;;
    *)
      echo "e2e-kind: unknown argument: $arg (see --help)" >&2
      exit 2
      ;;
  esac
done

step() { printf '\n==> %s\n' "$*"; }
die() {
  echo "e2e-kind: $*" >&2
  exit 1
}
k() { kubectl --context "kind-${CLUSTER}" "$@"; }

for tool in docker kind kubectl helm; do
  command -v "$tool" >/dev/null 2>&1 || die "$tool is required on PATH"
done

cleanup() {
  if [[ "$DELETE" == 1 ]]; then
    step "Deleting kind cluster ${CLUSTER}"
    kind delete cluster --name "$CLUSTER"
  fi
}
trap cleanup EXIT

step "kind cluster ${CLUSTER}"
if kind get clusters 2>/dev/null | grep -qx "$CLUSTER"; then
  echo "reusing the existing cluster"
else
  kind create cluster --name "$CLUSTER" --wait 180s
fi

step "Advertising a fake GPU (${FAKE_GPU}) on every node"
# Extended resources that no device plugin manages are set once on the node status and
# kept by the kubelet (Kubernetes docs: "Advertise Extended Resources for a Node").
escaped=${FAKE_GPU//\//~1}
for node in $(k get nodes -o name); do
  k patch "$node" --subresource=status --type=json \
    -p "[{\"op\":\"add\",\"path\":\"/status/capacity/${escaped}\",\"value\":\"8\"}]"
done

if [[ "$BUILD" == 1 ]]; then
  step "Building ${IMAGE}"
  docker build -f "${ROOT}/operator/Dockerfile" -t "$IMAGE" "$ROOT"
fi
step "Loading ${IMAGE} into kind"
kind load docker-image "$IMAGE" --name "$CLUSTER"

step "Installing the Helm chart into ${OPERATOR_NAMESPACE}"
helm upgrade --install vllm-operator "${ROOT}/charts/vllm-operator" \
  --kube-context "kind-${CLUSTER}" \
  --namespace "$OPERATOR_NAMESPACE" --create-namespace \
  --set image.repository="$IMAGE_REPO" \
  --set image.tag="$IMAGE_TAG" \
  --wait --timeout 5m
# Helm installs CRDs only on first install; keep the cluster's copy current on re-runs.
k apply --server-side --force-conflicts -f "${ROOT}/crds/"
k -n "$OPERATOR_NAMESPACE" rollout status deployment/vllm-operator --timeout=300s

step "Applying ${NAME} (vLLM = the simulator in ${IMAGE})"
k create namespace "$DEMO_NAMESPACE" --dry-run=client -o yaml | k apply -f -
sed "s#image: vllm-operator:dev#image: ${IMAGE}#" "${ROOT}/hack/kind/vllmd-sim.yaml" | k apply -f -

field() { k -n "$DEMO_NAMESPACE" get vllmd "$NAME" -o "jsonpath=$1" 2>/dev/null || true; }

show_status() {
  k -n "$DEMO_NAMESPACE" get vllmd "$NAME" -o wide || true
  echo
  k -n "$DEMO_NAMESPACE" get deployments,services,jobs,pods \
    -l app.kubernetes.io/managed-by=vllm-operator || true
  echo
  k -n "$DEMO_NAMESPACE" get vllmd "$NAME" -o jsonpath='{.status.lastGate}' || true
  echo
}

# Wait until the resource serves a revision other than $1 (empty: any revision).
wait_for_promotion() {
  local previous=$1 deadline=$((SECONDS + TIMEOUT)) phase stable generation observed
  while true; do
    phase=$(field '{.status.phase}')
    stable=$(field '{.status.stable.revision}')
    generation=$(field '{.metadata.generation}')
    observed=$(field '{.status.observedGeneration}')
    printf '  %s  phase=%-12s stable=%-10s candidate=%-10s %s\n' "$(date +%H:%M:%S)" \
      "${phase:-?}" "${stable:--}" "$(field '{.status.candidate.revision}')" \
      "$(field '{.status.message}')"
    if [[ "$observed" == "$generation" && "$phase" == "Serving" && -n "$stable" \
      && "$stable" != "$previous" ]]; then
      return 0
    fi
    if [[ "$observed" == "$generation" && ("$phase" == "Degraded" || "$phase" == "Failed") ]]; then
      show_status
      die "${NAME} ended in phase ${phase}"
    fi
    if ((SECONDS > deadline)); then
      show_status
      k -n "$OPERATOR_NAMESPACE" logs deployment/vllm-operator --tail=50 || true
      die "timed out after ${TIMEOUT}s waiting for a promotion"
    fi
    sleep 5
  done
}

step "Waiting for the first revision to be benchmarked and serve"
wait_for_promotion ""
first=$(field '{.status.stable.revision}')

step "Changing performanceMode to throughput: a new candidate revision"
k -n "$DEMO_NAMESPACE" patch vllmd "$NAME" --type=merge \
  -p '{"spec":{"engine":{"performanceMode":"throughput"}}}'
wait_for_promotion "$first"

step "Promoted: ${first} -> $(field '{.status.stable.revision}')"
show_status
k -n "$DEMO_NAMESPACE" wait vllmd "$NAME" --for=condition=Ready --timeout=60s
echo "Try: kubectl --context kind-${CLUSTER} -n ${DEMO_NAMESPACE} port-forward svc/${NAME} 8000"
