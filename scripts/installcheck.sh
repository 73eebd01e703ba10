#!/usr/bin/env bash
# scripts/installcheck.sh [VERSION]: the modules install from outside the repository,
# as a user gets them, before anything is tagged or published.
#
# Without VERSION, it first checks that the workspace is at its version: every go.mod
# requires this repository's modules at it, with no replace (scripts/release.sh -c),
# and runs scripts/release.sh -w and -t on a copy of the go.mod files in a scratch
# repository (every module moved to a new version, a dirty tree refused, the tags).
# Then it packs every published module (scripts/release.sh -l) at VERSION into a file-based
# module proxy (tools/modproxy, with golang.org/x/mod/zip; default VERSION: the one the
# modules require each other at), then, with GOWORK=off and that proxy first:
#  1. `go install github.com/antidote-kafka/antidote/cmd/antidote@VERSION` into a
#     temporary GOBIN; the binary must have been built with our modules at VERSION
#     (`go version -m`) and `antidote --version` must name VERSION;
#  2. a fresh module in a temporary directory requires consumer, serde/avro,
#     metrics/prom and trace/otel at VERSION and runs README's "Use it" example on kfake
#     (scripts/testdata/installcheck/main.go): the good orders must be charged, the
#     poison pills dead-lettered byte for byte, counted in Prometheus and traced.
#
# No network once the caches are warm: other modules come from the machine's module
# cache (GOPROXY=file://$(go env GOMODCACHE)/cache/download), then from `go env GOPROXY`
# if missing; the fresh module's go.sum starts from the repository's go.sum files. Our
# modules are never looked up in the checksum database (GONOSUMDB; not GOPRIVATE, which
# would also bypass the proxy), others are checked as usual. The packed versions are
# rebuilt on every run, so they must never stay in a module cache: the check has a module
# cache of its own (INSTALLCHECK_MODCACHE, default next to GOCACHE), from which it removes
# github.com/antidote-kafka/* before each run. Takes ~1 min with warm caches.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
repo="$PWD"

core=github.com/antidote-kafka/antidote
VERSION="${1:-$(awk -v p="$core" '$1 == p { print $2; exit }' cmd/antidote/go.mod)}"
[ -n "$VERSION" ] || { echo "no VERSION given and none found in cmd/antidote/go.mod" >&2; exit 2; }
step() { printf '\n==> %s\n' "$*"; }

tmp="$(mktemp -d)"
trap 'chmod -R u+w "$tmp" 2>/dev/null; rm -rf "$tmp"' EXIT
modcache="${INSTALLCHECK_MODCACHE:-$(dirname "$(go env GOCACHE)")/antidote-installcheck/mod}"
mkdir -p "$modcache"
if command -v flock >/dev/null; then exec 9>"$modcache.lock"; flock 9; fi
for d in "$modcache/github.com/antidote-kafka" "$modcache/cache/download/github.com/antidote-kafka"; do
  [ -e "$d" ] && chmod -R u+w "$d" && rm -rf "$d"
done

if [ $# = 0 ]; then
  step "the workspace is at $VERSION: go.mod files require it, only go.work replaces"
  scripts/release.sh -c "$VERSION"

  step "scripts/release.sh -w and -t, in a copy of the workspace's go.mod files"
  rel="$tmp/release"
  mkdir -p "$rel/scripts"
  cp go.work scripts/release.sh "$rel/" && mv "$rel/release.sh" "$rel/scripts/"
  for d in $(scripts/release.sh -a); do mkdir -p "$rel/$d" && cp "$d/go.mod" "$rel/$d/"; done
  (
    cd "$rel"
    git init -q && git add -A && git -c user.name=check -c user.email=check@localhost commit -qm base
    scripts/release.sh -w v0.98.7 >/dev/null
    scripts/release.sh -c v0.98.7
    if scripts/release.sh -t v0.98.7 2>"$rel.err"; then echo "release.sh -t tagged a tree with changes" >&2; exit 1; fi
    grep -q "commit them first" "$rel.err" || { cat "$rel.err" >&2; exit 1; }
    git -c user.name=check -c user.email=check@localhost commit -qam "release v0.98.7"
    scripts/release.sh -t v0.98.7 >/dev/null
    want="$(scripts/release.sh -l | awk '{ print ($1 == "." ? "" : $1 "/") "v0.98.7" }' | sort)"
    got="$(git tag -l | sort)"
    [ "$got" = "$want" ] || { printf 'tags:\n%s\nwant:\n%s\n' "$got" "$want" >&2; exit 1; }
    if scripts/release.sh -t v0.98.7 2>"$rel.err"; then echo "release.sh -t tagged v0.98.7 twice" >&2; exit 1; fi
    echo "release.sh wrote v0.98.7 into every go.mod and go.work and tagged: $(echo $got)"
  )
fi

step "README's \"Use it\" example is the one the fresh module runs"
# From its Key to the end of its Handler, line for line (indentation aside).
trimmed() { sed -e 's/^[[:space:]]*//' -e 's/[[:space:]]*$//'; }
readme="$(awk '/^## Use it/ { on = 1 } on && /^\t*Key:/ { go = 1 } go { print } go && /^\t},$/ { exit }' README.md | trimmed)"
program="$(trimmed <scripts/testdata/installcheck/main.go)"
if [ "$(wc -l <<<"$readme")" -lt 5 ] || [[ "$program" != *"$readme"* ]]; then
  echo "README's \"Use it\" handler is not the one in scripts/testdata/installcheck/main.go:" >&2
  echo "$readme" >&2
  exit 1
fi

step "pack the modules at $VERSION into a file-based module proxy"
go build -o "$tmp/modproxy" ./tools/modproxy
# shellcheck disable=SC2046 # one argument per module directory
"$tmp/modproxy" -version "$VERSION" -out "$tmp/proxy" $(scripts/release.sh -l | cut -f1)

machine_modcache="$(go env GOMODCACHE)"
machine_proxy="$(go env GOPROXY)"
# GODEBUG=goindex=0: the go command indexes module-cache folders in GOCACHE
# by module and version alone (a published version never changes); ours is
# packed again from the work tree at each run, so its index must not be kept.
export GOWORK=off GOFLAGS=-mod=mod GOTOOLCHAIN=local GOMODCACHE="$modcache" GODEBUG=goindex=0
export GOPROXY="file://$tmp/proxy,file://$machine_modcache/cache/download,$machine_proxy"
export GONOSUMDB="github.com/antidote-kafka/*"

step "go install $core/cmd/antidote@$VERSION"
GOBIN="$tmp/bin" go install "$core/cmd/antidote@$VERSION"
go version -m "$tmp/bin/antidote" | awk -v p="$core" -v v="$VERSION" '
  ($1 == "mod" || $1 == "dep") && index($2, p) == 1 {
    print; n++
    if ($3 != v) { print "  want " v > "/dev/stderr"; bad = 1 }
  }
  $1 == "=>" { print "replaced: " $0 > "/dev/stderr"; bad = 1 }
  END { if (bad || n < 2) exit 1 }'
out="$("$tmp/bin/antidote" --version)"
echo "$out"
case "$out" in *"$VERSION"*) ;; *) echo "antidote --version does not name $VERSION" >&2; exit 1 ;; esac

step "a fresh module: consumer, serde/avro, metrics/prom and trace/otel at $VERSION, README's example on kfake"
mkdir "$tmp/app"
cp scripts/testdata/installcheck/main.go "$tmp/app/"
cd "$tmp/app"
go mod init example.com/installcheck >/dev/null 2>&1
go mod edit -require="$core@$VERSION" -require="$core/serde/avro@$VERSION" -require="$core/metrics/prom@$VERSION" -require="$core/trace/otel@$VERSION"
cat $(git -C "$repo" ls-files ':(glob)**/go.sum' | sed "s#^#$repo/#") | grep -v "^github.com/antidote-kafka/" | sort -u >go.sum
go mod tidy
go list -m -f '{{.Path}} {{.Version}}{{with .Replace}} => {{.Path}}{{end}}' all | awk -v p="$core" -v v="$VERSION" '
  index($1, p) == 1 { print; if ($2 != v || NF > 2) bad = 1 }
  END { exit bad }'
go vet .
go run .
