#!/usr/bin/env bash
# third_party/NAME is github.com/gomlx/NAME as the Go module proxy serves it, plus the patch series
# in third_party/patches/NAME (its PATCHES.md says what each patch does and why), for each NAME
# with a series: compute (the Go backend) and go-xla (PJRT: the compilation cache). This script
# rebuilds a folder from those two, so that the patches can follow upstream instead of living only
# as edits inside a copy:
#
#   third_party/patches.sh check            for every series, upstream + the series must equal
#                                           third_party/NAME byte for byte (make test runs it: an
#                                           edit to a folder that is not in its series fails it)
#   third_party/patches.sh record "SUBJECT" write the folder's difference from upstream + the series
#                                           as the series' next patch (after editing the folder)
#   third_party/patches.sh port VERSION DIR apply the series to another release (e.g. v0.1.7) in DIR,
#                                           a git repository with one commit per patch; a patch that
#                                           does not apply stops with git am's three-way conflict
#                                           markers in DIR, to be resolved there and the series
#                                           written again with git format-patch
#
# record and port work on SERIES (default compute): SERIES=go-xla third_party/patches.sh record "…".
# The version a series applies to is in third_party/patches/NAME/UPSTREAM. Needs go (the module
# proxy or a module cache holding that version) and git.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)

# use NAME: the series, folder, module and upstream version of one patched module.
use() {
	name=$1
	series=$here/patches/$name
	folder=$here/$name
	module=github.com/gomlx/$name
	[ -f "$series/UPSTREAM" ] || die "$series/UPSTREAM is missing: it names the $module version the series applies to"
	base=$(tr -d ' \n' <"$series/UPSTREAM")
}

die() { echo "patches.sh: $*" >&2; exit 1; }

# upstream VERSION: the module's folder in the Go module cache, downloaded through the proxy if needed.
upstream() {
	local dir
	dir=$(cd "$(mktemp -d)" && GOFLAGS=-mod=mod go mod download -json "$module@$1" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p') ||
		die "go mod download $module@$1 failed: the module proxy (GOPROXY) or a module cache holding it is needed"
	[ -n "$dir" ] && [ -d "$dir" ] || die "go mod download $module@$1 gave no folder"
	echo "$dir"
}

# tree VERSION DIR [through]: DIR becomes a git repository holding upstream VERSION as its first
# commit and the series applied on top (one commit per patch); with "through", a failing patch is
# left for the caller (git am stops) instead of ending the script.
tree() {
	local version=$1 dir=$2 src
	src=$(upstream "$version")
	mkdir -p "$dir"
	cp -R "$src/." "$dir/"
	chmod -R u+w "$dir"
	local git=(git -C "$dir" -c user.name=patches.sh -c user.email=patches.sh@localhost -c commit.gpgsign=false -c core.autocrlf=false)
	"${git[@]}" init -q
	"${git[@]}" add -A
	"${git[@]}" commit -q -m "$module $version as published"
	shopt -s nullglob
	local patches=("$series"/[0-9][0-9][0-9][0-9]-*.patch)
	shopt -u nullglob
	[ ${#patches[@]} -gt 0 ] || return 0
	if ! "${git[@]}" am -q --3way --keep-cr --whitespace=nowarn "${patches[@]}"; then
		[ "${3:-}" = through ] && return 1
		die "the series does not apply to $module $version in $dir (git am stopped; see git -C $dir am --show-current-patch)"
	fi
}

case "${1:-check}" in
check)
	work=$(mktemp -d)
	trap 'rm -rf "$work"' EXIT
	for s in "$here"/patches/*/UPSTREAM; do
		use "$(basename "$(dirname "$s")")"
		tree "$base" "$work/$name"
		if ! diff -r --exclude=.git -q "$work/$name" "$folder" >"$work/diff"; then
			cat "$work/diff" >&2
			die "third_party/$name differs from $module $base + third_party/patches/$name (files above); after editing the folder, record the change: SERIES=$name third_party/patches.sh record \"what it does\""
		fi
		n=$(find "$series" -name '[0-9][0-9][0-9][0-9]-*.patch' | wc -l)
		echo "patches.sh: third_party/$name = $module $base + $n patches"
	done
	;;
record)
	use "${SERIES:-compute}"
	subject=${2:-}
	[ -n "$subject" ] || die "record needs a subject: third_party/patches.sh record \"what the patch does\""
	work=$(mktemp -d)
	trap 'rm -rf "$work"' EXIT
	tree "$base" "$work/$name"
	rsync -a --delete --exclude=.git "$folder/" "$work/$name/" 2>/dev/null || {
		find "$work/$name" -mindepth 1 -maxdepth 1 ! -name .git -exec rm -rf {} +
		cp -R "$folder/." "$work/$name/"
	}
	git=(git -C "$work/$name" -c user.name=patches.sh -c user.email=patches.sh@localhost -c commit.gpgsign=false)
	"${git[@]}" add -A
	"${git[@]}" diff --cached --quiet && die "third_party/$name has no change beyond the series"
	"${git[@]}" commit -q -m "$subject"
	n=$(find "$series" -name '[0-9][0-9][0-9][0-9]-*.patch' | wc -l)
	out=$("${git[@]}" format-patch -1 --start-number $((n + 1)) -o "$series" HEAD)
	echo "patches.sh: wrote ${out#"$here/"}"
	;;
port)
	use "${SERIES:-compute}"
	version=${2:-}
	dir=${3:-}
	[ -n "$version" ] && [ -n "$dir" ] || die "port needs a version and a folder: third_party/patches.sh port v0.1.7 /tmp/compute-v0.1.7"
	[ ! -e "$dir" ] || die "$dir exists; give a new folder"
	if tree "$version" "$dir" through; then
		echo "patches.sh: the series applies to $module $version: $dir (one commit per patch; git -C $dir log)"
	else
		echo "patches.sh: a patch does not apply to $module $version; resolve it in $dir (git -C $dir status), git -C $dir am --continue, then write the series again from $dir with git format-patch" >&2
		exit 1
	fi
	;;
*)
	die "unknown command $1: check, record SUBJECT, or port VERSION DIR"
	;;
esac
