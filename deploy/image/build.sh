#!/usr/bin/env bash
# Builds the volley worker image with podman: build.sh VOLLEY_BINARY [TAG]
#
# The base is Debian's libc6 and libgcc-s1 (the only libraries volley links, see `ldd`),
# unpacked by mmdebstrap from the same Debian release as the build machine, so the binary finds
# the C library it was linked against.
set -euo pipefail

binary=${1:?usage: build.sh VOLLEY_BINARY [TAG]}
tag=${2:-localhost/volley:latest}
here=$(cd "$(dirname "$0")" && pwd)
suite=${VOLLEY_IMAGE_SUITE:-$(. /etc/os-release && echo "$VERSION_CODENAME")}

context=$(mktemp -d)
trap 'rm -rf "$context"' EXIT

# --variant=extract unpacks exactly the named packages (and what they depend on) and runs no
# maintainer script, so no shell is needed or left; docs, locales, apt's and dpkg's files are
# dropped: nothing in the image reads them.
mmdebstrap --quiet --variant=extract --include=libc6,libgcc-s1 \
    --customize-hook='rm -rf "$1"/usr/share "$1"/var/lib/dpkg "$1"/var/lib/apt "$1"/var/cache "$1"/var/log "$1"/etc/apt' \
    "$suite" "$context/base.tar"
# Debug info (the release profile keeps it for profiling) is most of the binary's size.
strip --strip-debug -o "$context/volley" "$binary"
chmod 0755 "$context/volley"
cp "$here/Containerfile" "$context/Containerfile"
podman build --quiet --tag "$tag" --file "$context/Containerfile" "$context" >/dev/null
echo "$tag"
