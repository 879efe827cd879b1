"""`reproduce.sh`, the bash script of `kbisect reproduce`: both kernels built from a kernel
repository, the guest's initramfs made as kbisect makes it, each kernel booted with
kbisect's own QEMU argv, the testcase's metric printed boot by boot.

Nothing in it is written from others' words: the values are kbisect's (40-hex hashes,
numbers, a metric name checked against the testcase's), each quoted by shlex.quote, and
QEMU's argv is kbisect's (`QemuMachine.boot_argv`) with its three paths (kernel, initramfs,
run folder) given as placeholders and turned into the script's variables here.
"""

import math
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass

from kbisect.builders.kernel_build import REPRO_ENV, SCRUBBED_ENV
from kbisect.infra.initramfs import GUEST_DIRS
from kbisect.infra.qemu import PANIC_MARKERS, PROBE_TIMEOUT, QEMU, RECORD_PREFIX

# Placeholder paths in kbisect's argv, and the script's variables that replace them
SLOTS = {"/KBISECT@KERNEL": "KERNEL", "/KBISECT@INITRD": "INITRD", "/KBISECT@RUN": "RUN"}
_SLOT = re.compile("(" + "|".join(re.escape(s) for s in SLOTS) + ")")
ACCELS = ("kvm", "tcg")
# kbisect's probe of KVM (QemuMachine.probe_accel): a real boot of the kernel, which
# says done at once; KVM only where it works (some hosts' QEMU aborts under KVM)
PROBE, PROBE_CMDLINE = "kvm-probe", "kbisect.probe=1"
NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")  # a metric's or a disk's name, as the script uses it
HASH = re.compile(r"[0-9a-f]{40}")
BUILD_TOOLS = ("git", "tar", "make", "gcc", "flex", "bison", "bc", "perl", "cpio", "timeout")


@dataclass(frozen=True)
class ScriptPlan:
    """What the script does, every value kbisect's."""

    job: str
    old: str  # the kernel that behaves as before (a culprit's parent, a sweep's old one)
    new: str  # the one that changed it (the culprit, the sweep's new one)
    names: tuple[str, str]  # their words, old's then new's: parent and culprit, old and new
    adjacent: bool  # new's first parent is old: the script checks it in LINUX
    metric: str  # the metric the job judged (a pass/fail job: its boots pass or fail)
    pass_fail: bool
    boots: int  # each kernel's boots, by default
    warmup: int  # a boot's first repetitions, not scored
    timeout: int  # seconds a boot may take
    tools: tuple[str, ...]  # the testcase's guest tools
    host_root: bool  # the guest runs the script on the host's root (9p), as kbisect's
    disks: tuple[tuple[str, int], ...]  # each disk's name and MiB
    fragments: int  # config/fragment-N.config, in merge order
    accel: str  # the site's KBISECT_ACCEL ("": KVM where /dev/kvm is usable)
    argv: dict[str, list[str]]  # accel -> kbisect's argv, its paths the SLOTS


def word(arg: str) -> str:
    """One argv element as a shell word: kbisect's text quoted, each placeholder path the
    script's variable, double-quoted."""
    parts = _SLOT.split(arg)
    words = [f'"${{{SLOTS[p]}}}"' if i % 2 else shlex.quote(p) for i, p in enumerate(parts) if p]
    return "".join(words) or "''"


def argv_lines(argv: Sequence[str]) -> str:
    return " \\\n\t\t\t".join(word(a) for a in argv)


def check(plan: ScriptPlan) -> None:
    """The values the script is written from, checked again (a ValueError is a bug)."""
    for value in (plan.old, plan.new):
        if not HASH.fullmatch(value):
            raise ValueError(f"not a full commit hash: {value!r}")
    for name in (plan.metric, *plan.names, *plan.tools, *(d for d, _ in plan.disks)):
        if not NAME.fullmatch(name):
            raise ValueError(f"not a plain name: {name!r}")
    if not all(re.fullmatch(r"[A-Za-z :]+", m) for m in PANIC_MARKERS):
        raise ValueError("a panic marker grep -E would read as a pattern")
    if plan.accel not in ("", *ACCELS) or set(plan.argv) != {*ACCELS, PROBE}:
        raise ValueError(f"accelerators: {plan.accel!r}, {sorted(plan.argv)}")


def script(plan: ScriptPlan) -> str:
    check(plan)
    q = shlex.quote
    env = "\n\t\t".join(f"export {k}={q(v)}" for k, v in sorted(REPRO_ENV.items()))
    disks = (
        "\n".join(f'\ttruncate -s {mib}M "$run"/{q(name)}.img' for name, mib in plan.disks) or "\t:"
    )
    argv = "\n".join(
        f"\t{accel})\n\t\tQEMU_ARGV=({argv_lines(plan.argv[accel])})\n\t\t;;"
        for accel in (*ACCELS, PROBE)
    )
    panic = "|".join(PANIC_MARKERS)
    return _TEMPLATE.format(
        job=q(plan.job),
        old=plan.old,
        new=plan.new,
        old_name=plan.names[0],
        new_name=plan.names[1],
        adjacent=int(plan.adjacent),
        metric=q(plan.metric),
        pass_fail=int(plan.pass_fail),
        boots=plan.boots,
        warmup=plan.warmup,
        timeout=plan.timeout,
        tools=" ".join(q(t) for t in plan.tools),
        host_root=int(plan.host_root),
        fragments=plan.fragments,
        accel=q(plan.accel),
        env=env,
        scrubbed=" ".join(sorted(SCRUBBED_ENV)),
        build_tools=" ".join(BUILD_TOOLS),
        qemu=QEMU,
        dirs=" ".join(GUEST_DIRS),
        disks=disks,
        argv=argv,
        record=q(RECORD_PREFIX),
        panic=q(panic),
        probe=PROBE,
        probe_timeout=math.ceil(PROBE_TIMEOUT),
    )


# Doubled braces are the shell's; single ones are filled in by script().
_TEMPLATE = r"""#!/usr/bin/env bash
# Reproduces kbisect job {job} without kbisect:
# builds the {old_name} and the {new_name} kernel from LINUX (a git repository of the kernel
# that has both), boots each one BOOTS times with the same QEMU command line and guest as
# kbisect, and prints the metric of every boot.
# Usage: ./reproduce.sh LINUX   (BOOTS=N, ACCEL=kvm|tcg, JOBS=N, WORK=DIR to change them)
set -euo pipefail
HERE=$(cd "$(dirname "${{BASH_SOURCE[0]}}")" && pwd)
OLD={old}  # the {old_name}
NEW={new}  # the {new_name}
ADJACENT={adjacent}  # 1: the {old_name} is the {new_name}'s first parent
METRIC={metric}
PASS_FAIL={pass_fail}  # 1: each boot passes (1) or fails (0), as kbisect judged them
BOOTS=${{BOOTS:-{boots}}}
WARMUP={warmup}  # a boot's first repetitions warm up: not scored, as kbisect's
TIMEOUT={timeout}  # seconds a boot may take: a guest still running then hung
TOOLS=({tools})
HOST_ROOT={host_root}  # 1: the script runs on this host's root, read-only over 9p
FRAGMENTS={fragments}
ACCEL=${{ACCEL:-{accel}}}

die() {{ echo "reproduce.sh: $*" >&2; exit 2; }}

# kbisect's QEMU command line for one boot: sets QEMU_ARGV.
qemu_argv() {{  # ACCEL KERNEL INITRD RUN
	local accel=$1 KERNEL=$2 INITRD=$3 RUN=$4
	case $accel in
{argv}
	*) die "ACCEL=$accel: give kvm or tcg" ;;
	esac
}}

# make as kbisect runs it: its fixed build identity, none of the caller's make settings.
kmake() {{  # SRC OUT TARGET...
	local src=$1 out=$2
	shift 2
	(
		unset {scrubbed}
		{env}
		export LC_ALL=C
		make -C "$src" O="$out" ARCH=x86_64 -j"$JOBS" CC="$CC" "$@"
	)
}}

# One commit's kernel: its files from git archive (LINUX is not touched), then kbisect's
# .config for it where the job's build is shipped, else tinyconfig and the fragments.
build_kernel() {{  # NAME COMMIT
	local name=$1 commit=$2 src="$WORK/$1/src" out="$WORK/$1/build"
	local frags=() i
	[ -f "$out/arch/x86/boot/bzImage" ] && {{ echo "kernel $name: built before, in $out"; return; }}
	mkdir -p "$src" "$out"
	echo "kernel $name: $commit: sources"
	git -C "$LINUX" -c core.autocrlf=false archive --format=tar "$commit" | tar -x -C "$src"
	if [ -f "$HERE/config/$name.config" ] && [ "${{FROM_FRAGMENTS:-0}}" != 1 ]; then
		cp "$HERE/config/$name.config" "$out/.config"
		kmake "$src" "$out" olddefconfig > "$out/make.log" 2>&1
	else
		for ((i = 0; i < FRAGMENTS; i++)); do frags+=("$HERE/config/fragment-$i.config"); done
		kmake "$src" "$out" tinyconfig > "$out/make.log" 2>&1
		(cd "$src" && ./scripts/kconfig/merge_config.sh -m -O "$out" "$out/.config" \
			"${{frags[@]}}") >> "$out/make.log" 2>&1
		kmake "$src" "$out" olddefconfig >> "$out/make.log" 2>&1
	fi
	local job="$HERE/config/$name.config"
	if [ -f "$job" ] && ! cmp -s "$job" "$out/.config"; then
		echo "kernel $name: note: its .config differs from the job's (diff $job $out/.config)"
	fi
	echo "kernel $name: compiling (log $out/make.log)"
	kmake "$src" "$out" bzImage >> "$out/make.log" 2>&1 ||
		die "kernel $name does not build: see $out/make.log"
}}

# The guest's initramfs as kbisect makes it: busybox and its applets, the testcase's tools
# with their libraries (none with the host's root: they run from there), the guest files.
make_initramfs() {{  # IMAGE
	local root="$WORK/initramfs" tool path lib applet
	rm -rf "$root"
	mkdir -p "$root/bin"
	for d in {dirs}; do mkdir -p "$root/$d"; done
	cp -R "$HERE/guest/." "$root/"
	cp /bin/busybox "$root/bin/busybox"
	for applet in $(/bin/busybox --list); do
		[ "$applet" = busybox ] || [ -e "$root/bin/$applet" ] || ln -s busybox "$root/bin/$applet"
	done
	for tool in "${{TOOLS[@]}}"; do
		path=$(command -v "$tool") || die "guest tool $tool is not on this host: see README.md"
		[ "$HOST_ROOT" = 1 ] && continue
		cp -L "$path" "$root/usr/sbin/$tool"
		for lib in $( (ldd "$path" 2> /dev/null || true) | grep -o '/[^ ]* (0x[0-9a-f]*)' |
			cut -d' ' -f1); do
			mkdir -p "$root/$(dirname "${{lib#/}}")"
			cp -L "$lib" "$root/${{lib#/}}"
			chmod 755 "$root/${{lib#/}}"  # as kbisect stores them
		done
	done
	(cd "$root" && find . -mindepth 1 | sed 's|^\./||' | LC_ALL=C sort |
		cpio -o -H newc -R 0:0 --quiet) > "$1"
}}

# One boot's figure: the metric's median over the scored repetitions (kbisect's score),
# or for a pass/fail job 1 (the script ended with 0, no panic) or 0; "-" without one
# (a panic, a hang or a failed script: each boot's console.log says which).
figure() {{  # RUN
	local run=$1 status
	status=$( (grep -a '^'{record}'{{"event":"done"' "$run/results.log" 2> /dev/null || true) |
		sed -n 's/.*"status":\([0-9-]*\).*/\1/p' | tail -n 1)
	if [ "$PASS_FAIL" = 1 ]; then
		if [ "$status" = 0 ] && ! grep -aEq {panic} "$run/console.log"; then echo 1; else echo 0; fi
		return
	fi
	[ "$status" = 0 ] || {{ echo "-"; return; }}  # a panic, a hang, the script failed
	(grep -a '^'{record}'{{"event":"metric"' "$run/results.log" 2> /dev/null || true) |
		awk -v want="$METRIC" -v warm="$WARMUP" '
			{{
				if (!match($0, /"rep":[0-9]+/)) next
				rep = substr($0, RSTART + 6, RLENGTH - 6) + 0
				if (!match($0, /"name":"[^"]*"/)) next
				name = substr($0, RSTART + 8, RLENGTH - 9)
				if (!match($0, /"value":[-+0-9.eE]+/)) next
				if (name == want && rep > warm) print substr($0, RSTART + 8, RLENGTH - 8)
			}}' |
		sort -g | awk '{{ v[NR] = $1 }} END {{
			if (NR == 0) print "-"
			else if (NR % 2) printf "%.6g\n", v[(NR + 1) / 2]
			else printf "%.6g\n", (v[NR / 2] + v[NR / 2 + 1]) / 2
		}}'
}}

# KVM where a probe boot of the {old_name} kernel under it says done, else TCG, as kbisect.
probe_accel() {{
	local run="$WORK/runs/probe"
	rm -rf "$run"
	mkdir -p "$run"
	if [ -r /dev/kvm ] && [ -w /dev/kvm ]; then
		qemu_argv {probe} "$WORK/{old_name}/build/arch/x86/boot/bzImage" "$WORK/initramfs.cpio" \
			"$run"
		timeout --signal=KILL {probe_timeout} "${{QEMU_ARGV[@]}}" > "$run/qemu.stderr" 2>&1 \
			< /dev/null || true
		if grep -aq '"event":"done","status":0' "$run/results.log"; then
			echo kvm
			return
		fi
	fi
	echo tcg
}}

boot() {{  # NAME N: prints the boot's figure
	local run="$WORK/runs/$1-$2"
	rm -rf "$run"
	mkdir -p "$run"
{disks}
	qemu_argv "$ACCEL" "$WORK/$1/build/arch/x86/boot/bzImage" "$WORK/initramfs.cpio" "$run"
	printf '%s\n' "${{QEMU_ARGV[@]}}" > "$run/qemu.argv"
	timeout --signal=KILL "$TIMEOUT" "${{QEMU_ARGV[@]}}" > "$run/qemu.stderr" 2>&1 < /dev/null ||
		true
	rm -f "$run"/*.img
	figure "$run"
}}

main() {{
	[ $# -eq 1 ] || die "usage: ./reproduce.sh LINUX (a git repository of the kernel)"
	LINUX=$1
	[[ "$BOOTS" =~ ^[1-9][0-9]{{0,2}}$ ]] || die "BOOTS=$BOOTS: give 1 to 999"
	for t in {build_tools} {qemu}; do
		command -v "$t" > /dev/null || die "$t is missing: see README.md"
	done
	[ -x /bin/busybox ] || die "/bin/busybox is missing: see README.md"
	for c in "$OLD" "$NEW"; do
		git -C "$LINUX" cat-file -e "$c^{{commit}}" 2> /dev/null ||
			die "$LINUX has no commit $c: fetch the tree the job ran on"
	done
	[ "$ADJACENT" = 0 ] || [ "$(git -C "$LINUX" rev-parse "$NEW^")" = "$OLD" ] ||
		die "$OLD is not $NEW's parent in $LINUX"
	JOBS=${{JOBS:-$(nproc)}}
	CC=gcc
	command -v ccache > /dev/null && CC="ccache gcc"
	WORK=${{WORK:-$(mktemp -d "${{TMPDIR:-/tmp}}/kbisect-reproduce.XXXXXX")}}
	mkdir -p "$WORK"
	echo "work folder: $WORK (sources, builds, each boot's console.log; remove it after)"
	build_kernel {old_name} "$OLD"
	build_kernel {new_name} "$NEW"
	make_initramfs "$WORK/initramfs.cpio"
	[ -n "$ACCEL" ] || ACCEL=$(probe_accel)
	echo "booting each kernel $BOOTS times ($ACCEL), in turns: $METRIC of each boot"
	printf '%-6s %-14s %-14s\n' boot {old_name} {new_name}
	local i p c ps=() cs=()
	for ((i = 1; i <= BOOTS; i++)); do
		p=$(boot {old_name} "$i")
		c=$(boot {new_name} "$i")
		ps+=("$p")
		cs+=("$c")
		printf '%-6s %-14s %-14s\n' "$i" "$p" "$c"
	done
	printf '%-6s %-14s %-14s\n' mean "$(mean "${{ps[@]}}")" "$(mean "${{cs[@]}}")"
	echo "{old_name} $OLD"
	echo "{new_name} $NEW"
	echo "consoles: $WORK/runs/*/console.log"
}}

mean() {{  # the mean of the figures that are numbers ("-" without any)
	printf '%s\n' "$@" |
		awk '$1 != "-" {{ s += $1; n++ }} END {{ if (n) printf "%.6g\n", s / n; else print "-" }}'
}}

if [[ "${{BASH_SOURCE[0]}}" == "$0" ]]; then
	main "$@"
fi
"""
