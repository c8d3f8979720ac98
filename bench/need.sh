# Sourced by the bench scripts: install the tools the benchmarks drive, from apt, where missing.
need=()
for p in fio:fio fuse-overlayfs:fuse-overlayfs bindfs:bindfs fusermount3:fuse3 git:git python3:python3 findmnt:util-linux; do
    command -v "${p%%:*}" >/dev/null || need+=("${p#*:}")
done
if [ ${#need[@]} -gt 0 ]; then
    echo "installing ${need[*]}" >&2
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi
