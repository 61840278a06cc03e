#!/usr/bin/env bash
# build-stand-ins.sh builds local stand-ins for the base images that
# deploy/Dockerfile and deploy/compose.yaml name, for machines that cannot
# reach a registry (CI here). Each is assembled with `buildah from scratch`
# from what the host has installed, under the exact name and tag the files
# use, so `podman build --pull=never` and `podman-compose up` find them:
#
#   golang:1.26                               /usr/local/go, CA certificates, a static shell
#   gcr.io/distroless/static-debian12:nonroot passwd/group with nonroot (65532), CA certificates
#   redis:7-alpine                            Debian's redis-server and the libraries ldd lists
#   prom/prometheus:<tag in compose.yaml>     Debian's prometheus and its libraries
#
# They are stand-ins, not copies: the Prometheus inside is Debian's version,
# whatever the tag says. Where a registry is reachable, do not run this:
# pull the real images.
#
# Idempotent: an image that already exists is left alone (FORCE=1 rebuilds).
# Needs root (or a user buildah can run as), buildah, and on the host: Go in
# /usr/local/go, ca-certificates, busybox-static (or any shell, copied with
# its libraries), redis-server and prometheus.
set -euo pipefail

here="$(cd "$(dirname "$0")/.." && pwd)"
prom_image="$(sed -n 's/^ *image: *\(prom\/prometheus:[^ ]*\).*/\1/p' "$here/compose.yaml" | head -n1)"
redis_image="$(sed -n 's/^ *image: *\(redis:[^ ]*\).*/\1/p' "$here/compose.yaml" | head -n1)"
go_image="$(sed -n 's/^FROM *\(golang:[^ ]*\).*/\1/p' "$here/Dockerfile" | head -n1)"
run_image="$(sed -n 's/^FROM *\(gcr.io\/distroless[^ ]*\).*/\1/p' "$here/Dockerfile" | head -n1)"
for v in prom_image redis_image go_image run_image; do
  [ -n "${!v}" ] || { echo "build-stand-ins: cannot find the ${v%_image} image name in deploy/" >&2; exit 1; }
done

# qualify NAME spells a short name as Docker reads it (golang:1.26 is
# docker.io/library/golang:1.26), so that podman finds the stand-in under
# the short name in the Dockerfile and compose file.
qualify() {
  local name=$1 first=${1%%/*}
  case $name in
    */*) case $first in *.*|*:*|localhost) echo "$name" ;; *) echo "docker.io/$name" ;; esac ;;
    *) echo "docker.io/library/$name" ;;
  esac
}

exists() { [ "${FORCE:-0}" != 1 ] && podman image exists "$1"; }

# copy_with_libs ROOT BIN DEST copies BIN to ROOT/DEST and every shared
# library ldd lists for it (and the dynamic loader) to the same path in ROOT.
copy_with_libs() {
  local root=$1 bin=$2 dest=$3 lib
  install -D -m 0755 "$(readlink -f "$bin")" "$root$dest"
  for lib in $(ldd "$bin" 2>/dev/null | grep -o '/[^ ]*' || true); do
    mkdir -p "$root$(dirname "$lib")"
    cp -L "$lib" "$root$lib"
  done
}

# base_files ROOT writes what every stand-in needs: /tmp, CA certificates,
# and passwd/group with root, nonroot (65532) and nobody.
base_files() {
  local root=$1
  install -d -m 1777 "$root/tmp"
  install -d "$root/etc/ssl/certs"
  cp -L /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/ca-certificates.crt"
  cat >"$root/etc/passwd" <<'EOF'
root:x:0:0:root:/root:/sbin/nologin
nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin
nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin
EOF
  cat >"$root/etc/group" <<'EOF'
root:x:0:
nobody:x:65534:
nonroot:x:65532:
EOF
  install -d -o 65532 -g 65532 "$root/home/nonroot"
}

# build NAME FUNC runs FUNC ROOT in a mounted scratch container and commits
# it as NAME. FUNC prints buildah config flags on its stdout.
build() {
  local name fill=$2 ctr root
  name=$(qualify "$1")
  if exists "$name"; then echo "build-stand-ins: $name exists"; return; fi
  echo "build-stand-ins: building $name"
  ctr=$(buildah from scratch)
  building=$ctr
  root=$(buildah mount "$ctr")
  base_files "$root"
  local -a cfg
  mapfile -t cfg < <("$fill" "$root")
  buildah umount "$ctr" >/dev/null
  buildah config "${cfg[@]}" "$ctr"
  buildah commit -q --rm "$ctr" "$name" >/dev/null
  building=
}

# A failed build leaves no working container behind.
building=
trap '[ -z "$building" ] || buildah rm "$building" >/dev/null 2>&1 || true' EXIT

shell_into() {
  local root=$1
  if [ -x /bin/busybox ] && ! ldd /bin/busybox >/dev/null 2>&1; then
    install -D -m 0755 /bin/busybox "$root/bin/busybox"
    local app
    for app in $(/bin/busybox --list); do
      [ -e "$root/bin/$app" ] || ln -s busybox "$root/bin/$app"
    done
  else
    copy_with_libs "$root" "$(command -v sh)" /bin/sh
  fi
}

fill_go() {
  local root=$1
  shell_into "$root" >&2
  mkdir -p "$root/usr/local"
  cp -a /usr/local/go "$root/usr/local/go"
  install -d "$root/go/bin" "$root/go/pkg/mod" "$root/root"
  printf '%s\n' --env PATH=/go/bin:/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    --env GOPATH=/go --env GOTOOLCHAIN=local --env HOME=/root --workingdir /go --cmd '["/bin/sh"]'
}

fill_run() {
  printf '%s\n' --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    --env HOME=/home/nonroot --user 65532:65532 --workingdir /home/nonroot
}

# The official image runs its command through docker-entrypoint.sh and
# turns protected mode off (Redis refuses clients from other containers
# otherwise when no password is set); the stand-in does the same.
fill_redis() {
  local root=$1
  shell_into "$root" >&2
  copy_with_libs "$root" "$(command -v redis-server)" /usr/local/bin/redis-server
  install -d "$root/data"
  cat >"$root/usr/local/bin/docker-entrypoint.sh" <<'EOF'
#!/bin/sh
set -e
case "$1" in -*) set -- redis-server "$@" ;; esac
if [ "$1" = redis-server ]; then shift; set -- redis-server "$@" --protected-mode no; fi
exec "$@"
EOF
  chmod 0755 "$root/usr/local/bin/docker-entrypoint.sh"
  printf '%s\n' --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    --workingdir /data --port 6379 --entrypoint '["docker-entrypoint.sh"]' --cmd '["redis-server"]'
}

fill_prometheus() {
  local root=$1
  copy_with_libs "$root" "$(command -v prometheus)" /bin/prometheus
  install -d -o 65534 -g 65534 "$root/prometheus"
  install -d "$root/etc/prometheus"
  printf '%s\n' --user 65534:65534 --workingdir /prometheus --port 9090 \
    --entrypoint '["/bin/prometheus"]' \
    --cmd '["--config.file=/etc/prometheus/prometheus.yml", "--storage.tsdb.path=/prometheus"]'
}

for tool in buildah podman ldd; do
  command -v "$tool" >/dev/null || { echo "build-stand-ins: $tool is not installed" >&2; exit 1; }
done
[ -x /usr/local/go/bin/go ] || { echo "build-stand-ins: no Go toolchain in /usr/local/go" >&2; exit 1; }
command -v redis-server >/dev/null || { echo "build-stand-ins: redis-server is not installed" >&2; exit 1; }
command -v prometheus >/dev/null || { echo "build-stand-ins: prometheus is not installed (Debian: prometheus)" >&2; exit 1; }

build "$go_image" fill_go
build "$run_image" fill_run
build "$redis_image" fill_redis
build "$prom_image" fill_prometheus
