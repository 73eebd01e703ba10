#!/usr/bin/env bash
# scripts/release.sh: give every module of the workspace one version, and tag it.
#
#   scripts/release.sh VERSION       dry run (the default): print the edits and the tags
#   scripts/release.sh -w VERSION    write the edits: in every module's go.mod, each
#                                    requirement on another module of this repository
#                                    becomes VERSION; go.work's replace directives (the
#                                    only ones: go.mod files have none) point VERSION of
#                                    each published module at its directory, so that the
#                                    workspace keeps building from the working tree
#   scripts/release.sh -t VERSION    create the tags at HEAD (after the edits are
#                                    committed): VERSION for the core and DIR/VERSION for
#                                    a nested module (serde/avro/v0.2.0, ...), the names Go
#                                    looks up for a module in a subdirectory; never pushes
#   scripts/release.sh -c VERSION    check that the workspace is at VERSION: every go.mod
#                                    requires this repository's modules at VERSION and has
#                                    no replace directive, and go.work replaces VERSION of
#                                    each published module with its directory (make test
#                                    runs this, through scripts/installcheck.sh)
#   scripts/release.sh -l            list the published modules: directory, path, tag prefix
#   scripts/release.sh -a            list every module directory of the workspace
#
# The modules are the `use` directories of go.work, minus the development-only ones
# (UNPUBLISHED below): those get their requirements edited but no tag. Check a version
# before tagging it with scripts/installcheck.sh VERSION (it packs the modules into a
# local module proxy and installs them from there).
#
# A release: scripts/release.sh -w v0.2.0 && go build work && scripts/installcheck.sh v0.2.0
# && git commit -am 'release v0.2.0' && scripts/release.sh -t v0.2.0 && git push origin <tags>.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# Modules that no user imports: the lint tools, the console's browser tests and the
# randomized fault runs.
UNPUBLISHED="tools console/e2e chaos"

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' >&2; exit 2; }

# modules prints the `use` directories of go.work, without the leading "./".
modules() {
  awk '
    /^use[ \t]*\(/ { inuse = 1; next }
    inuse && /^\)/ { inuse = 0; next }
    inuse && NF { print $1; next }
    /^use[ \t]+[^(]/ { print $2 }
  ' go.work | sed -e 's#^\./##' -e 's#^\.$#.#' -e 's#/$##'
}

published() { case " $UNPUBLISHED " in *" $1 "*) return 1 ;; esac; }

modpath() { awk '$1 == "module" { print $2; exit }' "$1/go.mod"; }

# tag prints the tag of module directory $1 at version $2.
tag() { if [ "$1" = . ]; then echo "$2"; else echo "$1/$2"; fi; }

# requires prints the paths and versions that go.mod $1 requires.
requires() {
  awk '
    /^require[ \t]*\(/ { inreq = 1; next }
    inreq && /^\)/ { inreq = 0; next }
    inreq && NF && $1 !~ /^\/\// { print $1, $2; next }
    /^require[ \t]+[^(]/ { print $2, $3 }
  ' "$1"
}

# replaces prints go.work's replace directives: old path, old version (- for all), new path.
replaces() {
  go work edit -json | awk '
    /"Old": \{/ { side = "old"; next }
    /"New": \{/ { side = "new"; next }
    side == "old" && /"Path":/ { gsub(/[",]/, "", $2); op = $2; ov = "-" }
    side == "old" && /"Version":/ { gsub(/[",]/, "", $2); ov = $2 }
    side == "new" && /"Path":/ { gsub(/[",]/, "", $2); print op, ov, $2 }
    /\}/ { side = "" }
  '
}

mode=dry
case "${1:-}" in
  -w) mode=write; shift ;;
  -t) mode=tag; shift ;;
  -c) mode=check; shift ;;
  -n) shift ;;
  -l)
    for d in $(modules); do published "$d" && printf '%s\t%s\t%s\n' "$d" "$(modpath "$d")" "$(tag "$d" "")"; done
    exit 0 ;;
  -a) modules; exit 0 ;;
  -h|--help|"") usage ;;
esac
[ $# = 1 ] || usage
VERSION="$1"
[[ "$VERSION" =~ ^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$ ]] || { echo "VERSION must look like v1.2.3 or v1.2.3-rc.1, not $VERSION" >&2; exit 2; }

# Paths of every module of the workspace, published or not.
declare -A ours=()
for d in $(modules); do ours["$(modpath "$d")"]="$d"; done

run() { if [ "$mode" = write ]; then "$@"; else echo "  $*"; fi; }

# check fails unless every go.mod requires our modules at VERSION, with no
# replace directive, and go.work replaces each published module at VERSION
# with its directory.
check() {
  local bad=0 d p v
  for d in $(modules); do
    while read -r p v; do
      if [ -n "${ours[$p]:-}" ] && [ "$v" != "$VERSION" ]; then
        echo "$d/go.mod requires $p $v, not $VERSION: run scripts/release.sh -w $VERSION" >&2; bad=1
      fi
    done < <(requires "$d/go.mod")
    if [ "$(go mod edit -json "$d/go.mod" | awk '/"Replace": \[/ { print "yes" }')" = yes ]; then
      echo "$d/go.mod has a replace directive: the workspace's replaces live in go.work only" >&2; bad=1
    fi
  done
  local current; current="$(replaces)"
  for d in $(modules); do
    published "$d" || continue
    p="$(modpath "$d")"
    grep -qxF "$p $VERSION $(rdir "$d")" <<<"$current" ||
      { echo "go.work does not replace $p $VERSION with $(rdir "$d"): run scripts/release.sh -w $VERSION" >&2; bad=1; }
  done
  return "$bad"
}

rdir() { if [ "$1" = . ]; then echo .; else echo "./$1"; fi; }

if [ "$mode" = check ]; then
  check && echo "every module is at $VERSION, and only go.work replaces them"
  exit
fi

if [ "$mode" = tag ]; then
  [ -z "$(git status --porcelain)" ] || { echo "the working tree has changes: commit them first" >&2; exit 1; }
  check || exit 1
  tags=()
  for d in $(modules); do
    published "$d" || continue
    t="$(tag "$d" "$VERSION")"
    ! git rev-parse -q --verify "refs/tags/$t" >/dev/null || { echo "tag $t exists already" >&2; exit 1; }
    tags+=("$t")
  done
  for d in $(modules); do
    published "$d" || continue
    t="$(tag "$d" "$VERSION")"
    git tag -a "$t" -m "$(modpath "$d") $VERSION"
    echo "tagged $t"
  done
  echo "push them with: git push origin ${tags[*]}"
  exit 0
fi

[ "$mode" = dry ] && echo "dry run (-w writes these edits, -t tags):"
for d in $(modules); do
  while read -r p v; do
    if [ -n "${ours[$p]:-}" ] && [ "$v" != "$VERSION" ]; then
      run go mod edit -require="$p@$VERSION" "$d/go.mod"
    fi
  done < <(requires "$d/go.mod")
done
# go.work: one replace per published module, VERSION => its directory; a replace
# of one of our modules at another version, or to another place, goes.
current="$(replaces)"
while read -r p v n; do
  [ -n "$p" ] && [ -n "${ours[$p]:-}" ] || continue
  if [ "$v" != "$VERSION" ] || [ "$n" != "$(rdir "${ours[$p]}")" ] || ! published "${ours[$p]}"; then
    if [ "$v" = - ]; then run go work edit -dropreplace="$p"; else run go work edit -dropreplace="$p@$v"; fi
  fi
done <<<"$current"
for d in $(modules); do
  published "$d" || continue
  p="$(modpath "$d")"
  grep -qxF "$p $VERSION $(rdir "$d")" <<<"$current" || run go work edit -replace="$p@$VERSION=$(rdir "$d")"
done
[ "$mode" = write ] && go work edit -fmt
echo "tags at $VERSION:"
for d in $(modules); do published "$d" && echo "  $(tag "$d" "$VERSION")"; done
exit 0
