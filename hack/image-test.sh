#!/usr/bin/env bash
# Build operator/Dockerfile and run every role of the image the way the cluster runs it.
#
# These machines have no Docker and cannot run full containers (podman fails on cgroups and
# rlimits) and cannot reach Docker Hub, but buildah's chroot isolation works. So:
#   1. install buildah, mmdebstrap and shellcheck from Debian's packages (when missing);
#   2. assemble a Debian bookworm base with Python 3.11 (mmdebstrap), cached under $CACHE;
#   3. build the Dockerfile on that base (buildah bud --isolation chroot); the host's CA
#      bundle reaches pip as a build secret (a TLS-intercepting proxy), never a layer;
#   4. print the image size and fail above the budget;
#   5. shellcheck the image's `vllm` shim; fail if the image carries the embedded cluster
#      (devcluster, vllm_operator_demo) or kmock;
#   6. run each role from the rendered manifests in the image as its user, with only the
#      declared volumes writable, and fail when a role writes anywhere else
#      (hack/image_roles.py).
# Any error fails. Skipped (exit 0, saying why) only where buildah cannot run.
#
# usage: hack/image-test.sh [--build-only]
# environment: CACHE (/var/cache/vllm-operator), IMAGE (localhost/vllm-operator:ci),
#              SIZE_BUDGET_MB (see below), PYTHON (.venv/bin/python, for step 6)
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CACHE=${CACHE:-/var/cache/vllm-operator}
IMAGE=${IMAGE:-localhost/vllm-operator:ci}
# The image measures 228 MB on this base (2026-11); the budget leaves a little room, no more.
SIZE_BUDGET_MB=${SIZE_BUDGET_MB:-250}
PYTHON=${PYTHON:-${ROOT}/.venv/bin/python}
BUILD_ONLY=0
for arg in "$@"; do
  case "$arg" in
    --build-only) BUILD_ONLY=1 ;;
    -h | --help)
      sed -n '2,20p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
      exit 0
      ;;
    *)
      echo "image-test: unknown argument: $arg (see --help)" >&2
      exit 2
      ;;
  esac
done

step() { printf '\n==> image-test: %s\n' "$*"; }
die() {
  echo "image-test: FAILED: $*" >&2
  exit 1
}
skip() {
  echo "image-test: SKIPPED: $* (the image is not built or tested on this machine)" >&2
  exit 0
}
elapsed() { printf '%s (%ss)\n' "$1" "$((SECONDS - $2))"; }

step "tools"
missing=()
for tool in buildah mmdebstrap shellcheck; do
  command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
done
if ((${#missing[@]})); then
  if [[ $(id -u) != 0 ]] || ! command -v apt-get >/dev/null 2>&1; then
    skip "${missing[*]} missing, and installing needs root and apt-get"
  fi
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    buildah mmdebstrap shellcheck >/dev/null
fi
buildah --version

mkdir -p "$CACHE/base" "$CACHE/tmp"
# buildah's temporary files and its RUN --mount=type=cache directories live under TMPDIR.
export TMPDIR="$CACHE/tmp"
export CONTAINERS_CONF="$CACHE/containers.conf"
# No rlimits: setting them is what fails in these sandboxes.
printf '[containers]\ndefault_ulimits = []\n' >"$CONTAINERS_CONF"
RUNROOT=${RUNROOT:-/run/vllm-operator-buildah}
BH=(buildah --root "$CACHE/storage" --runroot "$RUNROOT" --storage-driver overlay)
bh() { "${BH[@]}" "$@"; }
if ! probe=$(bh from scratch 2>&1); then
  skip "buildah cannot create a container here: ${probe}"
fi
bh rm "$probe" >/dev/null

# --- the base -----------------------------------------------------------------------------
# The Dockerfile's default base is python:3.11-slim-bookworm; this is its equivalent from
# Debian's own packages: Python 3.11 with venv, `python` on PATH, CA certificates.
# Documentation, manual pages and translations are not installed; merged /usr comes from
# mmdebstrap's hook, not the usrmerge package (which would pull in 47 MB of perl). Rebuilt
# weekly (security updates) or when this recipe changes.
MIRRORS=(
  "deb http://deb.debian.org/debian bookworm main"
  "deb http://deb.debian.org/debian bookworm-updates main"
  "deb http://deb.debian.org/debian-security bookworm-security main"
)
PACKAGES=python3,python3-venv,python-is-python3,ca-certificates
DPKG_OPTS=(
  --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr
  --dpkgopt='path-exclude=/usr/share/doc/*'
  --dpkgopt='path-include=/usr/share/doc/*/copyright'
  --dpkgopt='path-exclude=/usr/share/man/*'
  --dpkgopt='path-exclude=/usr/share/info/*'
  --dpkgopt='path-exclude=/usr/share/locale/*'
)
recipe="bookworm minbase ${PACKAGES} ${MIRRORS[*]} ${DPKG_OPTS[*]}"
key=$(printf '%s' "$recipe" | sha256sum | cut -c1-12)
week=$(date -u +%G-%V)
BASE_TAR="$CACHE/base/bookworm-py311-${key}-${week}.tar"
BASE_IMAGE="localhost/vllm-operator-base:bookworm-py311-${key}-${week}"

step "base ${BASE_IMAGE}"
start=$SECONDS
if bh inspect --type image "$BASE_IMAGE" >/dev/null 2>&1; then
  echo "cached in buildah's storage"
else
  if [[ ! -s "$BASE_TAR" ]]; then
    rm -rf "$CACHE"/base/bookworm-py311-*
    if ! mmdebstrap --quiet --format=tar --variant=minbase --include="$PACKAGES" \
      "${DPKG_OPTS[@]}" bookworm "$BASE_TAR.part" "${MIRRORS[@]}" >"$CACHE/base/log" 2>&1; then
      cat "$CACHE/base/log" >&2
      die "mmdebstrap could not assemble the base"
    fi
    mv "$BASE_TAR.part" "$BASE_TAR"
  fi
  ctr=$(bh from scratch)
  bh add --quiet "$ctr" "$BASE_TAR" /
  bh config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    --env LANG=C.UTF-8 --cmd python3 "$ctr"
  bh commit --quiet --rm "$ctr" "$BASE_IMAGE" >/dev/null
fi
# Older bases (last week's, another recipe) go; so do images left untagged by earlier builds.
bh images --noheading --format '{{.Name}}:{{.Tag}}' | grep '/vllm-operator-base:' \
  | grep -vxF "$BASE_IMAGE" | xargs -r "${BH[@]}" rmi >/dev/null || true
bh rmi --prune >/dev/null 2>&1 || true
elapsed "base ready" "$start"

# --- the image ----------------------------------------------------------------------------
step "build ${IMAGE} from operator/Dockerfile"
start=$SECONDS
build_args=(--build-arg "PYTHON_IMAGE=${BASE_IMAGE}")
# The host's package index settings, when it has its own (never baked into the image).
for var in PIP_INDEX_URL PIP_EXTRA_INDEX_URL; do
  if [[ -n "${!var:-}" ]]; then build_args+=(--build-arg "${var}=${!var}"); fi
done
secrets=()
for bundle in "${PIP_CERT:-}" "${SSL_CERT_FILE:-}" /etc/ssl/certs/ca-certificates.crt; do
  if [[ -n "$bundle" && -s "$bundle" ]]; then
    secrets=(--secret "id=ca-bundle,src=${bundle}")
    break
  fi
done
bh bud --quiet --isolation chroot --layers --pull=never "${build_args[@]}" "${secrets[@]}" \
  -f "${ROOT}/operator/Dockerfile" -t "$IMAGE" "$ROOT" >/dev/null
elapsed "built" "$start"

step "size, shellcheck of the image's vllm shim, no embedded cluster"
ctr=$(bh from --pull=never "$IMAGE")
trap 'bh rm "$ctr" >/dev/null 2>&1 || true' EXIT
mnt=$(bh mount "$ctr")
size_mb=$(($(du -sxb "$mnt" | cut -f1) / 1000000))
site="$mnt/opt/vllm-operator/lib/python3.11/site-packages"
echo "image size: ${size_mb} MB (budget ${SIZE_BUDGET_MB} MB); largest parts:"
for part in "$mnt/usr" "$mnt/opt/vllm-operator" "$site"/*; do du -sxm "$part"; done \
  | sort -rn | head -6 | sed "s#${mnt}##; s#^#  MB #"
shellcheck "$mnt/opt/vllm-operator/bin/vllm"
# The embedded cluster is a distribution of its own: neither it nor kmock may be in the image.
carried=()
for pattern in devcluster kmock vllm_operator_demo vllm_operator_devcluster; do
  for found in "$site/$pattern" "$site/$pattern"[-.]*; do
    if [[ -e "$found" ]]; then carried+=("${found#"$site"/}"); fi
  done
done
if ((${#carried[@]})); then
  die "the image carries the embedded cluster: ${carried[*]}"
fi
echo "no devcluster, kmock or demo in the image's site-packages"
bh umount "$ctr" >/dev/null
bh rm "$ctr" >/dev/null
trap - EXIT
((size_mb <= SIZE_BUDGET_MB)) || die "image is ${size_mb} MB, above its ${SIZE_BUDGET_MB} MB budget"

if ((BUILD_ONLY)); then
  exit 0
fi

step "run each role as the cluster runs it"
start=$SECONDS
"$PYTHON" "${ROOT}/hack/image_roles.py" --image "$IMAGE" --root "$CACHE/storage" \
  --runroot "$RUNROOT"
elapsed "roles passed" "$start"
