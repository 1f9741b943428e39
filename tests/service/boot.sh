#!/bin/bash
# Boots the host's systemd as PID 1 of fresh namespaces, for tests/it/service.rs.
#
#   boot.sh WORKDIR
#
# The root is an overlay: the host's / below, a tmpfs above, so whatever the test installs
# (units, users, packages) is written to memory and never to the host. /proc is fresh, /sys
# read-only but for cgroup hierarchies of the container's own, /dev minimal. systemd runs
# inside new child cgroups of every host hierarchy (WORKDIR/cgroup names them), so the test
# can remove them after killing it. The script execs into `unshare`; killing that process's
# child (systemd, PID 1 of the new PID namespace) with SIGKILL ends every process inside.
set -euo pipefail
work=$1
name=jqjail-sd-$$
for h in /sys/fs/cgroup/*/; do
    h=${h%/}
    [ -e "$h/cgroup.procs" ] || continue
    mkdir -p "$h/$name"
    if [ "${h##*/}" = cpuset ]; then
        cat "$h/cpuset.cpus" >"$h/$name/cpuset.cpus"
        cat "$h/cpuset.mems" >"$h/$name/cpuset.mems"
    fi
    echo $$ >"$h/$name/cgroup.procs"
done
echo "$name" >"$work/cgroup"
exec unshare --pid --fork --mount --uts --ipc --net --cgroup --propagation private \
    bash -euo pipefail -c '
r=$1/root
mount -t tmpfs -o mode=0755 tmpfs "$1/layers"
mkdir -p "$1/layers/upper" "$1/layers/work"
mount -t overlay overlay -o "lowerdir=/,upperdir=$1/layers/upper,workdir=$1/layers/work" "$r"
mount -t proc proc "$r/proc"
mount --rbind /sys "$r/sys"
mount -t tmpfs -o mode=0755 tmpfs "$r/sys/fs/cgroup"
for h in /sys/fs/cgroup/*/; do
    h=$(basename "$h")
    mkdir -p "$r/sys/fs/cgroup/$h"
    case $h in
        unified) mount -t cgroup2 cgroup2 "$r/sys/fs/cgroup/$h" ;;
        systemd) mount -t cgroup -o none,name=systemd cgroup "$r/sys/fs/cgroup/$h" ;;
        *) mount -t cgroup -o "$h" cgroup "$r/sys/fs/cgroup/$h" ;;
    esac
done
mount -o remount,bind,ro "$r/sys"
mount -t tmpfs -o mode=0755,nosuid tmpfs "$r/dev"
for d in null zero full random urandom tty; do
    touch "$r/dev/$d"
    mount --bind "/dev/$d" "$r/dev/$d"
done
mkdir -p "$r/dev/pts" "$r/dev/shm"
mount -t devpts -o newinstance,ptmxmode=0666,mode=620 devpts "$r/dev/pts"
ln -s pts/ptmx "$r/dev/ptmx"
mount -t tmpfs -o mode=1777 tmpfs "$r/dev/shm"
ln -s /proc/self/fd "$r/dev/fd"
mount -t tmpfs -o mode=0755 tmpfs "$r/run"
mount -t tmpfs -o mode=1777 tmpfs "$r/tmp"
hostname jqjail-test
mkdir -p "$r/oldroot"
cd "$r"
pivot_root . oldroot
umount -l /oldroot
rmdir /oldroot
exec env -i container=jqjail-test /lib/systemd/systemd
' boot "$work"
