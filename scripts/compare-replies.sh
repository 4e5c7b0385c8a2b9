#!/usr/bin/env bash
# Issue 25's check that a change keeps every reply byte for byte: the module of BASE_REV
# and the module of this working tree answer scripts/replies.py's fixed transcript (RESP2
# and RESP3: COMMAND DOCS/INFO, every command and option, errors, rule changes, clock moves,
# PTTL, DUMP/RESTORE, DEBUG RELOAD, INFO ratelimit) with the same bytes.
#
# Usage: scripts/compare-replies.sh [BASE_REV [NEW_REV]]
#   BASE_REV  default f5839bb (the commit before the algorithm-trait refactor)
#   NEW_REV   default: the working tree as it is (built with `cargo build --release` in the
#             repository root, into ./target); given, that commit is built like BASE_REV.
# BASE_REV is checked out in a temporary `git worktree` under /tmp (removed on exit) and
# built with CARGO_TARGET_DIR=/tmp/rl-base-target (NEW_REV: /tmp/rl-new-target), so the
# repository's own target/ is not touched by it. Builds run one after the other.
#
# Both modules run under the same server: RL_SERVER (default redis-server; e.g.
# RL_SERVER=~/.cache/redis-ratelimit/servers/bin/redis-8.6.3, see scripts/servers.sh).
# replies.py runs its transcript twice per module and fails if the two runs differ.
# The transcripts are kept in /tmp/rl-replies/{base,new}.txt.
#
# Exit 0 iff the replies are identical (prints how many commands were compared); 1 if they
# differ (prints each command whose reply differs, with the old and the new bytes); 2 if
# the comparison could not run.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BASE=${1:-f5839bb}
NEW=${2:-}
SERVER=${RL_SERVER:-redis-server}
OUT=/tmp/rl-replies
SO=libredis_ratelimit.so
mkdir -p "$OUT"

fail() {
    echo "compare-replies: $*" >&2
    exit 2
}

WORKTREES=()
cleanup() {
    for wt in "${WORKTREES[@]}"; do
        git -C "$ROOT" worktree remove --force "$wt" 2>/dev/null || rm -rf "$wt"
    done
    git -C "$ROOT" worktree prune 2>/dev/null || true
}
trap cleanup EXIT

# build_rev REV TARGET_DIR: the module of REV, built in a temporary worktree.
build_rev() {
    local rev=$1 target=$2 wt
    git -C "$ROOT" rev-parse --verify -q "$rev^{commit}" >/dev/null || fail "no commit $rev"
    wt=$(mktemp -d /tmp/rl-replies-wt.XXXXXX)
    WORKTREES+=("$wt")
    git -C "$ROOT" worktree add -q --detach "$wt" "$rev" || fail "git worktree add $rev"
    echo "==> cargo build --release of $rev ($(git -C "$ROOT" rev-parse --short "$rev")) in $wt, target $target" >&2
    (cd "$wt" && CARGO_TARGET_DIR=$target cargo build --release -q) || fail "build of $rev failed"
}

build_rev "$BASE" /tmp/rl-base-target
BASE_SO=/tmp/rl-base-target/release/$SO
if [ -n "$NEW" ]; then
    build_rev "$NEW" /tmp/rl-new-target
    NEW_SO=/tmp/rl-new-target/release/$SO
    NEW_NAME=$NEW
else
    echo "==> cargo build --release of the working tree ($ROOT)" >&2
    (cd "$ROOT" && cargo build --release -q) || fail "build of the working tree failed"
    NEW_SO=$ROOT/target/release/$SO
    NEW_NAME="the working tree"
fi

echo "==> scripts/replies.py on $SERVER: $BASE" >&2
python3 "$ROOT/scripts/replies.py" "$BASE_SO" --server "$SERVER" >"$OUT/base.txt" ||
    fail "replies.py failed on $BASE's module"
echo "==> scripts/replies.py on $SERVER: $NEW_NAME" >&2
python3 "$ROOT/scripts/replies.py" "$NEW_SO" --server "$SERVER" >"$OUT/new.txt" ||
    fail "replies.py failed on the module of $NEW_NAME"

# Compare command by command: a block is a `> command` line and the reply lines after it.
python3 - "$OUT/base.txt" "$OUT/new.txt" "$BASE" "$NEW_NAME" <<'PY'
import difflib, re, sys

def blocks(path):
    out, cur = [], None
    for line in open(path, encoding="utf-8").read().splitlines():
        if line.startswith("> ") or line.startswith("==="):
            cur = [line]
            out.append(cur)
        elif cur is not None:
            cur.append(line)
    return out

old, new = blocks(sys.argv[1]), blocks(sys.argv[2])
base, newname = sys.argv[3], sys.argv[4]
counts = [l.strip("= ") for l in open(sys.argv[1]).read().splitlines() if re.match(r"=== RESP\d: ", l)]
total = sum(1 for b in old if b[0].startswith("> "))
if len(old) != len(new):
    # Not the same commands (e.g. COMMAND LIST found other commands): the whole diff.
    print("the transcripts do not have the same commands; unified diff (first 400 lines):")
    d = difflib.unified_diff(open(sys.argv[1]).read().splitlines(),
                             open(sys.argv[2]).read().splitlines(), base, newname, lineterm="")
    print("\n".join(list(d)[:400]))
    print(f"compare-replies: DIFFERENT ({sys.argv[1]} vs {sys.argv[2]})")
    sys.exit(1)
proto, group, differ = "", "", 0
for a, b in zip(old, new):
    if a[0].startswith("==="):
        proto = a[0].strip("= ").split(":")[0]
        continue
    m = re.match(r"> MULTI +\[group (\S+)\]", a[0])
    if m:
        group = f"group {m.group(1)}"
    elif not a[0].startswith("> EXEC"):
        group = group if " queued: " in "".join(a[1:2]) else ""
    if a != b:
        differ += 1
        print(f"--- {proto} {group} {a[0]}" + ("" if a[0] == b[0] else f"\n    new command: {b[0]}"))
        print(f"  old ({base}):")
        print("\n".join("  " + l for l in a[1:]))
        print(f"  new ({newname}):")
        print("\n".join("  " + l for l in b[1:]))
if differ:
    print(f"compare-replies: {differ} of {total} commands answer differently ({'; '.join(counts)})")
    sys.exit(1)
print(f"compare-replies: identical: {total} commands compared, every reply byte for byte "
      f"({'; '.join(counts)})")
PY
