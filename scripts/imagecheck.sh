#!/usr/bin/env bash
# scripts/imagecheck.sh [VERSION]: the image of `make image` is what it says.
#
#  1. builds it (scripts/image.sh VERSION; default VERSION: the one the modules
#     require each other at, as for scripts/installcheck.sh);
#  2. reads it back with go-containerregistry (tools/ociimage check): runs
#     /antidote as 65532:65532, has the OCI labels, the version label equal to
#     the binary's module version, /etc/passwd with uid 65532, the CA
#     certificates, every file owned by root, a static binary; prints its size;
#  3. with podman: loads the docker-archive, checks `podman image inspect`
#     (user, entrypoint, labels), then runs `antidote demo -o json` in it with
#     no network and a read-only root file system, and checks the demo's
#     summary: every record produced is processed or dead-lettered, none lost,
#     none twice, none dead-lettered by the outage.
#
# podman is a Debian package: with CI=true it is installed when missing
# (with runc, see below); otherwise a missing podman skips step 3 with a note.
# A machine may not let podman start containers (no CAP_SYS_RESOURCE for its
# default rlimits, cgroups v1 with a cgroup2 hierarchy beside it, which crun
# refuses, no user namespaces): the container is first started with
# `--version`; if that fails, the script says why, keeps steps 1-2 as the
# check and exits 0, except with CI=true, where the demo must run: there it
# fails, unless IMAGECHECK_NO_RUN names why the machine cannot run containers.
# Once a container has started, a failing demo fails the script. The image is removed from podman's storage at the end.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
step() { printf '\n==> %s\n' "$*"; }

# The version the modules require each other at, as scripts/installcheck.sh
# packs them: a fixed version lets the build cache serve every package that
# did not change (a pseudo-version per commit would rebuild them all).
VERSION="${1:-$(awk -v p=github.com/antidote-kafka/antidote '$1 == p { print $2; exit }' cmd/antidote/go.mod)}"

step "build the image at $VERSION"
scripts/image.sh "$VERSION"
ref="$(cat .cache/image/ref)"
version="$(cat .cache/image/version)"

step "check the image with go-containerregistry"
go run ./tools/ociimage check -layout .cache/image/oci -version "$version"

if ! command -v podman >/dev/null 2>&1; then
  if [ "${CI:-}" = true ]; then
    echo "podman missing: installing the Debian packages podman and runc"
    SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
    $SUDO apt-get update -qq && $SUDO apt-get install -y -qq podman runc >/dev/null ||
      { echo "could not install podman (apt-get install podman runc)"; exit 1; }
  else
    echo
    echo "podman missing: the image was checked with go-containerregistry only (apt-get install podman runc)"
    exit 0
  fi
fi

step "podman load and inspect $ref"
podman load -q -i .cache/image/antidote.tar
trap 'podman rmi -f "localhost/$ref" >/dev/null 2>&1 || true' EXIT
inspect="$(podman image inspect "localhost/$ref")"
jq -e --arg v "$version" '
  .[0].Config as $c
  | $c.User == "65532:65532"
  and $c.Entrypoint == ["/antidote"]
  and $c.Labels["org.opencontainers.image.version"] == $v
  and ($c.Labels["org.opencontainers.image.revision"] | length > 0)
  and ($c.Labels["org.opencontainers.image.source"] | length > 0)
  and $c.Labels["org.opencontainers.image.title"] == "antidote"
' <<<"$inspect" >/dev/null || { echo "podman image inspect: unexpected config:"; jq '.[0].Config' <<<"$inspect"; exit 1; }
echo "user, entrypoint and labels as built; $(jq -r '.[0].Size' <<<"$inspect") bytes in podman's storage"

# podman (as root) asks for rlimits of 1M open files, which a machine without
# CAP_SYS_RESOURCE refuses: ask for limits under the current ones. crun refuses
# a hybrid cgroup layout that runc accepts: prefer runc when it is there.
lim() { local n; n="$(ulimit "$1")"; [ "$n" = unlimited ] && n=4096; echo $((n < 4096 ? n : 4096)); }
run=(podman)
command -v runc >/dev/null 2>&1 && run+=(--runtime runc)
run+=(run --rm --network=none --read-only --ulimit "nofile=$(lim -n):$(lim -n)" --ulimit "nproc=$(lim -u):$(lim -u)")

step "${run[*]} $ref --version"
if ! out="$("${run[@]}" "localhost/$ref" --version 2>&1)"; then
  echo "$out"
  echo
  echo "podman cannot start containers on this machine (above): the image was checked"
  echo "with go-containerregistry and podman image inspect, not run."
  if [ "${CI:-}" = true ] && [ -z "${IMAGECHECK_NO_RUN:-}" ]; then
    echo "CI=true: the demo must run in the image (set IMAGECHECK_NO_RUN to the reason this machine cannot)"
    exit 1
  fi
  [ -z "${IMAGECHECK_NO_RUN:-}" ] || echo "not run: $IMAGECHECK_NO_RUN"
  exit 0
fi
echo "$out"
grep -qF "antidote $version " <<<"$out" || { echo "antidote --version in the image does not name $version"; exit 1; }

step "${run[*]} $ref demo -o json"
start=$(date +%s)
"${run[@]}" "localhost/$ref" demo -o json >.cache/image/demo.json
jq -e '
  .produced > 0 and .lost == 0 and .duplicates == 0 and .produce_errors == 0
  and .processed + .dead_lettered + .skipped == .produced
  and .dead_lettered > 0 and .outage.dead_lettered == 0 and .cluster == "kfake"
' .cache/image/demo.json >/dev/null || { echo "the demo in the image did not pass:"; cat .cache/image/demo.json; exit 1; }
jq -c '{produced, processed, dead_lettered, lost, duplicates}' .cache/image/demo.json
echo "the demo passed in the container ($(($(date +%s) - start))s)"
