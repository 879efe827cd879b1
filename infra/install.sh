#!/usr/bin/env bash
# Installs what kbisect needs to run on Debian 12: the kernel build toolchain, QEMU, guest
# tools (fio, perf, blktrace and iostat run in guests from the host's root filesystem, and
# the stock benchmarks kbisect names as testcase kinds: stress-ng, rt-tests' hackbench and
# cyclictest, sysbench; e2fsprogs for the file stressors' ext4 disk; iperf3, the host's peer
# for network throughput),
# Debian's kernel source, libvirt (the second Machine backend: its daemon, virsh, and what
# building its Python binding needs), and a virtualenv at .venv/ with pinned Python
# packages.
# --tests: also what only the test suite needs (never a kbisect dependency, never
# shipped): pytest, ruff and mypy; nginx and openssl (the tests' TLS front to Temporal and
# WebDAV store); Chromium and its driver with Selenium (the results page's browser test);
# a Synapse homeserver (the chat tests); versitygw (the S3 store's test), where Go is.
# Safe to run again: it installs only what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
tests=false
case "${1:-}" in
  --tests) tests=true ;;
  "") ;;
  *) echo "usage: infra/install.sh [--tests]   (--tests: also what the test suite needs)" >&2
     exit 2 ;;
esac

packages=(
  qemu-system-x86 gcc make flex bison bc libelf-dev libssl-dev cpio ccache perl
  busybox-static dmsetup fio linux-source-6.1 xz-utils git python3 python3-venv
  linux-perf blktrace sysstat kmod squashfs-tools stress-ng rt-tests sysbench e2fsprogs iperf3
  libvirt-daemon-system libvirt-clients libvirt-dev pkg-config python3-dev
)
! $tests || packages+=(nginx openssl chromium chromium-driver)
sudo=()
[ "$(id -u)" -eq 0 ] || sudo=(sudo)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "installing Debian packages: ${missing[*]}"
  "${sudo[@]}" apt-get update -q
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -q "${missing[@]}"
fi

# The host lock's shared folder (KBISECT_LOCK_DIR's default): root's and sticky like
# /run/lock itself, so every user's workers share it and none can swap another's lock files.
# /run is a tmpfs: tmpfiles.d makes it again at each boot.
echo "d /run/lock/kbisect 1777 root root -" | "${sudo[@]}" tee /etc/tmpfiles.d/kbisect.conf >/dev/null
"${sudo[@]}" install -d -o root -g root -m 1777 /run/lock/kbisect

python=python3
"$python" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' || {
  echo "kbisect needs Python 3.11 as python3 (Debian 12 has it)" >&2; exit 1; }
[ -x .venv/bin/python ] || "$python" -m venv .venv
.venv/bin/pip install -q --upgrade pip
if ! $tests; then
  .venv/bin/pip install -q -c requirements.lock -e '.[libvirt]'
  echo "kbisect installed: .venv/bin/kbisect"
  exit 0
fi
.venv/bin/pip install -q -c requirements.lock -e '.[dev,libvirt]'
# A Synapse homeserver for the chat tests, in a virtualenv of its own (AGPL).
[ -x .venv-synapse/bin/python ] || "$python" -m venv .venv-synapse
.venv-synapse/bin/pip install -q --upgrade pip
.venv-synapse/bin/pip install -q -r tests/chat/synapse.lock
# versitygw, a real S3 server for the store's tests (Apache-2.0), built from the Go module
# proxy where a Go toolchain is installed; without one those tests are skipped.
versitygw=github.com/versity/versitygw/cmd/versitygw@v1.8.0
if [ ! -x .venv/bin/versitygw ] && command -v go >/dev/null; then
  echo "building versitygw (the tests' S3 server)"
  GOBIN="$PWD/.venv/bin" go install "$versitygw" ||
    echo "versitygw did not build: kbisect works, the S3 test will fail until it does" >&2
fi
echo "kbisect and its tests installed: .venv/bin/kbisect, .venv/bin/pytest"
