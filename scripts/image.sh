#!/usr/bin/env bash
# scripts/image.sh [VERSION]: the OCI image of antidote (`make image`), built
# without a container daemon and without a base image.
#
# The binary is the one a user gets from
# `go install github.com/antidote-kafka/antidote/cmd/antidote@VERSION`: every
# published module is packed at VERSION into a file-based module proxy
# (tools/modproxy, as scripts/installcheck.sh does) and installed from there
# with GOWORK=off, CGO_ENABLED=0 and -trimpath, so `antidote --version` in the
# image names VERSION and the modules it was built with. VERSION defaults to
# the tag at HEAD, else the pseudo-version Go gives the commit (after the
# latest v* tag, or v0.0.0-... without one). Uncommitted edits are packed too;
# the revision label then ends in +dirty.
#
# tools/ociimage then writes the image (go-containerregistry): the binary at
# /antidote, the machine's CA certificates (CA_CERTS, default
# /etc/ssl/certs/ca-certificates.crt), the user nonroot (65532) in
# /etc/passwd, the OCI labels; every file dated at the commit's time, so one
# binary always gives the same digest. Output, replaced at each run:
#   .cache/image/oci          an OCI image layout (skopeo, crane, podman: oci:DIR)
#   .cache/image/antidote.tar a docker-archive (podman load -i, docker load -i)
#   .cache/image/ref          the image's name:tag
# Uses the module cache of scripts/installcheck.sh (INSTALLCHECK_MODCACHE), under
# its lock. The network is needed only for modules missing from the machine's cache.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

core=github.com/antidote-kafka/antidote
out=.cache/image
rev="$(git rev-parse HEAD)"
commit_time="$(git log -1 --format=%ct HEAD)"
dirty=""
[ -z "$(git status --porcelain --untracked-files=no)" ] || dirty="+dirty"

# pseudo prints the pseudo-version of HEAD, as the go command computes it.
pseudo() {
  local ts base
  ts="$(TZ=UTC git log -1 --date=format-local:%Y%m%d%H%M%S --format=%cd HEAD)"
  base="$(git describe --tags --abbrev=0 --match 'v[0-9]*' HEAD 2>/dev/null || true)"
  case "$base" in
    "") echo "v0.0.0-$ts-${rev:0:12}" ;;
    *-*) echo "$base.0.$ts-${rev:0:12}" ;;
    *) echo "$base" | awk -F. -v s="0.$ts-${rev:0:12}" '{ printf "%s.%s.%d-%s\n", $1, $2, $3 + 1, s }' ;;
  esac
}
VERSION="${1:-${VERSION:-$(git describe --tags --exact-match --match 'v[0-9]*' HEAD 2>/dev/null || pseudo)}}"
[ -n "$dirty" ] && echo "note: uncommitted edits go into the image; its revision label is $rev$dirty" >&2

tmp="$(mktemp -d)"
trap 'chmod -R u+w "$tmp" 2>/dev/null; rm -rf "$tmp"' EXIT
go build -o "$tmp/modproxy" ./tools/modproxy
go build -o "$tmp/ociimage" ./tools/ociimage
# shellcheck disable=SC2046 # one argument per module directory
"$tmp/modproxy" -version "$VERSION" -out "$tmp/proxy" $(scripts/release.sh -l | cut -f1)

# The packed versions change with the work tree: they must not stay in a
# module cache (see scripts/installcheck.sh, whose cache and lock this shares).
modcache="${INSTALLCHECK_MODCACHE:-$(dirname "$(go env GOCACHE)")/antidote-installcheck/mod}"
mkdir -p "$modcache"
if command -v flock >/dev/null; then exec 9>"$modcache.lock"; flock 9; fi
for d in "$modcache/github.com/antidote-kafka" "$modcache/cache/download/github.com/antidote-kafka"; do
  [ -e "$d" ] && chmod -R u+w "$d" && rm -rf "$d"
done
machine_modcache="$(go env GOMODCACHE)"
machine_proxy="$(go env GOPROXY)"
echo "go install $core/cmd/antidote@$VERSION (CGO_ENABLED=0, -trimpath)"
(
  export GOWORK=off GOFLAGS=-mod=mod GOTOOLCHAIN=local GOMODCACHE="$modcache" GODEBUG=goindex=0
  export GOPROXY="file://$tmp/proxy,file://$machine_modcache/cache/download,$machine_proxy"
  export GONOSUMDB="github.com/antidote-kafka/*" CGO_ENABLED=0 GOOS=linux
  GOBIN="$tmp/bin" go install -trimpath "$core/cmd/antidote@$VERSION"
)
exec 9>&-

mkdir -p "$out"
"$tmp/ociimage" build -binary "$tmp/bin/antidote" -out "$out/oci" -tar "$out/antidote.tar" \
  -certs "${CA_CERTS:-/etc/ssl/certs/ca-certificates.crt}" \
  -revision "$rev$dirty" -time "$commit_time" | tee "$tmp/built"
awk '{ print $1 }' "$tmp/built" >"$out/ref"
echo "$VERSION" >"$out/version"
