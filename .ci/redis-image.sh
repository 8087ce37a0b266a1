#!/usr/bin/env bash
# Builds the Docker image relock/redis:local from this machine's redis-server,
# without any image registry: the binary, the libraries ldd lists and the
# dynamic loader are packed into a root filesystem and imported with
# `docker import`. The image is rebuilt only when the redis-server binary (or
# this recipe) changed: both are recorded in image labels. Every run ends by
# starting a container from the image and PINGing it.
#
# Environment: REDIS_SERVER (default: the redis-server on PATH),
# RELOCK_REDIS_IMAGE (default relock/redis:local).
set -euo pipefail

image=${RELOCK_REDIS_IMAGE:-relock/redis:local}
recipe=1 # bump when the rootfs layout below changes
label_sha=org.relockgo.redis.sha256
label_recipe=org.relockgo.redis.recipe

die() { echo "redis-image: $*" >&2; exit 1; }

command -v docker >/dev/null || die "docker not found"
command -v redis-cli >/dev/null || die "redis-cli not found (apt-get install redis-tools)"
server=${REDIS_SERVER:-$(command -v redis-server || true)}
[ -n "$server" ] || die "redis-server not found (apt-get install redis-server)"
# Debian's redis-server is a symlink to redis-check-rdb, which acts as the
# server when its argv[0] names redis-server: copy the real file under that name.
real=$(readlink -f "$server")
sha=$(sha256sum "$real" | cut -d' ' -f1)

built_sha=$(docker image inspect -f "{{ index .Config.Labels \"$label_sha\" }}" "$image" 2>/dev/null || true)
built_recipe=$(docker image inspect -f "{{ index .Config.Labels \"$label_recipe\" }}" "$image" 2>/dev/null || true)
if [ "$built_sha" = "$sha" ] && [ "$built_recipe" = "$recipe" ]; then
	echo "redis-image: $image is up to date (redis-server sha256 ${sha:0:12})"
else
	echo "redis-image: building $image from $real (sha256 ${sha:0:12})"
	work=$(mktemp -d)
	trap 'rm -rf "$work"' EXIT
	root=$work/rootfs
	mkdir -p "$root/usr/bin" "$root/tmp" "$root/data"
	chmod 1777 "$root/tmp"
	cp "$real" "$root/usr/bin/redis-server"
	# Libraries ("name => /path (addr)") and the loader ("/path (addr)").
	libs=$(ldd "$real" | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }')
	[ -n "$libs" ] || die "ldd listed no libraries for $real"
	for lib in $libs; do
		mkdir -p "$root$(dirname "$lib")"
		cp -L "$lib" "$root$lib"
	done
	tar -C "$root" -cf "$work/rootfs.tar" .
	docker import \
		--change 'ENTRYPOINT ["/usr/bin/redis-server"]' \
		--change 'WORKDIR /data' \
		--change 'EXPOSE 6379/tcp' \
		--change "LABEL $label_sha=$sha" \
		--change "LABEL $label_recipe=$recipe" \
		"$work/rootfs.tar" "$image" >/dev/null
fi

# Prove the image serves: run it on a free loopback port and PING it.
cid=$(docker run --rm -d -p 127.0.0.1::6379 "$image" --protected-mode no --save '' --appendonly no)
trap 'docker rm -f "$cid" >/dev/null 2>&1 || true; rm -rf "${work:-}"' EXIT
hostport=$(docker port "$cid" 6379/tcp | head -n1)
port=${hostport##*:}
for _ in $(seq 1 50); do
	if [ "$(redis-cli -h 127.0.0.1 -p "$port" ping 2>/dev/null)" = PONG ]; then
		echo "redis-image: $image answers PING ($(docker run --rm "$image" --version))"
		exit 0
	fi
	sleep 0.1
done
docker logs "$cid" >&2 || true
die "a container from $image did not answer PING on 127.0.0.1:$port"
