#!/usr/bin/env bash
# The redis-cli suite: transcripts of redis-cli sessions, replayed against a real
# redis-server with the module and compared with what redis-cli prints.
#
# Usage: tests/cli/run.sh [FILE.cli ...]     (default: every tests/cli/*.cli, in name order)
#
# Servers. The suite starts its own, on free 127.0.0.1 ports (never 6379), logging into a
# temporary directory, and stops them when it exits:
#   clock  redis-server --loadmodule $RL_MODULE test-clock yes --save "" --appendonly no
#          RL.CLOCK is enabled. Every case file starts on this server.
#   conf   redis-server redis.conf, started from the repository root as `make run` does, with
#          only --port, --logfile, --save "" and --appendonly no added: the shipped config,
#          test clock off, module from ./target/release.
#
# Case file format (tests/cli/*.cli), one redis-cli session per file:
#   > COMMAND ARG ...   A command, typed as at the redis-cli prompt (same quoting rules:
#                       "a b" is one argument). A file's commands are piped into one
#                           redis-cli -h 127.0.0.1 -p PORT --no-raw
#                       (a new one where @server or @resp changes), each followed by an
#                       ECHO whose reply separates the outputs: the format a user sees at
#                       the interactive prompt, and a file runs in milliseconds, so no key's
#                       real TTL runs out between its commands however loaded the machine.
#   expected lines      The lines after a `>` line, up to the next `>` or `@` line, are the
#                       expected output, exactly (leading spaces count):
#                           (integer) 5    "text"    OK    (nil)    (error) ERR ...
#                           1) (integer) 1         (array elements; ` 1)` once there are 10+)
#                           1# "field" => (integer) 5          (RESP3 maps)
#   ~ REGEX             An expected line matched against a POSIX extended regex, anchored at
#                       both ends: for values that move with the real clock (PTTL, ttl_ms)
#                       or that the contract leaves open. Escape the parentheses of
#                       "(integer)" as \(integer\).
#   # ...               A comment (only at the start of a line). Blank lines are ignored
#                       (redis-cli --no-raw never prints an empty line).
#   @server clock|conf  Send the following commands to that server (see above).
#   @resp 2|3           Use RESP2 (default) or RESP3 (redis-cli -3) for the following commands.
# Directives last until the end of the file. Keys and the test clock are shared by all
# files (one server), so each file starts with FLUSHALL and RL.CLOCK SET.
#
# Each `>` command with its expected lines is one case: the suite prints PASS or FAIL for
# it (with a unified diff, expected vs got, on failure), and finally the line
#     N passed, M failed
# It exits 1 if any case failed, 2 if the suite could not run at all.
#
# Environment: RL_MODULE (the module, default target/release/libredis_ratelimit.so),
# RL_SERVER (default redis-server), RL_CLI (default redis-cli), RL_CLI_TIMEOUT (seconds
# per command, default 10).
set -uo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
MODULE=${RL_MODULE:-$ROOT/target/release/libredis_ratelimit.so}
SERVER=${RL_SERVER:-redis-server}
CLI=${RL_CLI:-redis-cli}
TIMEOUT=${RL_CLI_TIMEOUT:-10}

fatal() {
    printf 'cli: error: %s\n' "$*" >&2
    exit 2
}

command -v "$SERVER" >/dev/null 2>&1 || fatal "$SERVER not found (make deps installs redis-server)"
command -v "$CLI" >/dev/null 2>&1 || fatal "$CLI not found (make deps installs redis-tools)"
[[ "$MODULE" == /* ]] || MODULE="$PWD/$MODULE"
[[ -f "$MODULE" ]] || fatal "module not built: $MODULE (run: make build, or cargo build --release)"

if (($# > 0)); then
    FILES=("$@")
else
    shopt -s nullglob
    FILES=("$HERE"/*.cli)
    shopt -u nullglob
fi
((${#FILES[@]} > 0)) || fatal "no case files (*.cli) in $HERE"
for f in "${FILES[@]}"; do [[ -f "$f" ]] || fatal "no such case file: $f"; done

TMP=$(mktemp -d "${TMPDIR:-/tmp}/rl-cli.XXXXXX") || fatal "mktemp failed"
declare -A PORT=() PID=() LOG=()

cleanup() {
    local name
    for name in "${!PID[@]}"; do kill "${PID[$name]}" 2>/dev/null; done
    for name in "${!PID[@]}"; do wait "${PID[$name]}" 2>/dev/null; done
    rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# A port nothing listens on (bash connects to it to find out). A race with another
# process is possible; start_server then retries with another port.
pick_port() {
    local p i
    for ((i = 0; i < 100; i++)); do
        p=$((20000 + (RANDOM * 32768 + RANDOM) % 40000))
        if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
            echo "$p"
            return 0
        fi
    done
    return 1
}

# start_server NAME DIR ARGS...: start "$SERVER" ARGS... --port P in DIR, wait until
# it answers, and record PORT/PID/LOG[NAME].
start_server() {
    local name=$1 dir=$2 attempt port pid log i
    shift 2
    log="$TMP/$name.log"
    for ((attempt = 1; attempt <= 5; attempt++)); do
        port=$(pick_port) || fatal "no free port found"
        : >"$log"
        (cd "$dir" && exec "$SERVER" "$@" --port "$port" --bind 127.0.0.1 \
            --daemonize no --logfile "$log" --save "" --appendonly no) </dev/null >>"$log" 2>&1 &
        pid=$!
        for ((i = 0; i < 200; i++)); do
            if ! kill -0 "$pid" 2>/dev/null; then
                break
            fi
            # Ready when the server on that port is ours (not another one that took it).
            if "$CLI" -h 127.0.0.1 -p "$port" INFO server 2>/dev/null | tr -d '\r' |
                grep -qx "process_id:$pid"; then
                PORT[$name]=$port PID[$name]=$pid LOG[$name]=$log
                echo "cli: server '$name' (pid $pid) on 127.0.0.1:$port"
                return 0
            fi
            sleep 0.05
        done
        kill "$pid" 2>/dev/null
        wait "$pid" 2>/dev/null
        if grep -q 'Address already in use' "$log"; then
            continue
        fi
        echo "cli: server '$name' did not start; its log:" >&2
        tail -n 30 "$log" | sed 's/^/    /' >&2
        fatal "could not start server '$name'"
    done
    fatal "could not start server '$name': no port was free"
}

start_server clock "$TMP" --dir "$TMP" --loadmodule "$MODULE" test-clock yes
# The shipped redis.conf: relative loadmodule path, so it runs from the repository root.
# No --dir here: redis-server changes into `dir` before loading modules. With --save ""
# and --appendonly no it writes nothing there.
start_server conf "$ROOT" "$ROOT/redis.conf"

passed=0
failed=0
reported_dead=""

server_died() {
    local name=$1
    kill -0 "${PID[$name]}" 2>/dev/null && return 1
    if [[ " $reported_dead " != *" $name "* ]]; then
        reported_dead+=" $name"
        echo "cli: error: server '$name' is gone (crashed?); the end of its log:"
        tail -n 40 "${LOG[$name]}" | sed 's/^/    /'
    fi
    return 0
}

# The cases of one file, collected first: command, where it is, server, protocol, and the
# expected lines (joined by newlines). They then run in batches (run_file), one redis-cli
# per stretch of cases on the same server and protocol, so a file takes milliseconds and a
# key's real TTL never runs out between two of its commands however slow the machine.
c_cmd=() c_where=() c_server=() c_resp=() c_exp=() c_nexp=()
MARK=__rl_cli_case_end__

add_case() { # command where server resp
    c_cmd+=("$1") c_where+=("$2") c_server+=("$3") c_resp+=("$4") c_exp+=("") c_nexp+=(0)
}

add_expected() { # line
    local n=$((${#c_exp[@]} - 1))
    if ((c_nexp[n])); then c_exp[n]+=$'\n'"$1"; else c_exp[n]=$1; fi
    c_nexp[n]=$((c_nexp[n] + 1))
}

# check_case I OUTPUT: compares case I's expected lines with OUTPUT and reports.
check_case() {
    local i=$1 out=$2 ok=1 j e a re
    local exp=() act=()
    ((c_nexp[i])) && mapfile -t exp <<<"${c_exp[i]}"
    if [[ -n "$out" ]]; then mapfile -t act <<<"${out//$'\r'/}"; fi
    if ((${#exp[@]} == 0)) || ((${#exp[@]} != ${#act[@]})); then
        ok=0
    else
        for ((j = 0; j < ${#exp[@]}; j++)); do
            e=${exp[j]} a=${act[j]}
            if [[ "$e" == "~ "* ]]; then
                re=${e#"~ "}
                [[ "$a" =~ ^($re)$ ]] || { ok=0; break; }
            else
                [[ "$a" == "$e" ]] || { ok=0; break; }
            fi
        done
    fi
    if ((ok)); then
        passed=$((passed + 1))
        printf 'PASS %s  %s\n' "${c_where[i]}" "${c_cmd[i]}"
    else
        failed=$((failed + 1))
        printf 'FAIL %s  %s\n' "${c_where[i]}" "${c_cmd[i]}"
        if ((${#exp[@]} == 0)); then
            echo "    (case file error: no expected output under this command)"
        fi
        diff -u --label expected --label got \
            <(((${#exp[@]})) && printf '%s\n' "${exp[@]}") \
            <(((${#act[@]})) && printf '%s\n' "${act[@]}") | sed 's/^/    /'
        if ((${#exp[@]})) && printf '%s\n' "${exp[@]}" | grep -q '^~ '; then
            echo "    (expected lines starting with '~ ' are regexes; they show in the diff even when they match)"
        fi
        server_died "${c_server[i]}"
    fi
}

# run_batch FROM TO: cases FROM..TO-1 (same server and protocol) through one redis-cli,
# each followed by `ECHO $MARK`, whose reply separates the cases' outputs.
run_batch() {
    local from=$1 to=$2 i input="" out rc
    local args=(-h 127.0.0.1 -p "${PORT[${c_server[from]}]}" --no-raw)
    [[ "${c_resp[from]}" == 3 ]] && args+=(-3)
    for ((i = from; i < to; i++)); do input+="${c_cmd[i]}"$'\n'"ECHO $MARK"$'\n'; done
    out=$(printf '%s' "$input" | timeout "$((TIMEOUT * (to - from)))" "$CLI" "${args[@]}" 2>&1)
    rc=$?
    ((rc == 124)) && out+=$'\n'"<no reply within $((TIMEOUT * (to - from)))s>"
    local lines=() line cur="" have=0
    mapfile -t lines <<<"${out//$'\r'/}"
    i=$from
    for line in "${lines[@]}"; do
        if [[ "$line" == "\"$MARK\"" ]] && ((i < to)); then
            check_case "$i" "$cur"
            i=$((i + 1)) cur="" have=0
        elif ((have)); then
            cur+=$'\n'"$line"
        else
            cur=$line have=1
        fi
    done
    # Cases without their marker: the connection or the server went away (or timed out).
    for (( ; i < to; i++)); do
        check_case "$i" "$cur"
        cur=""
    done
}

# run_file: runs the collected cases in batches, then forgets them.
run_file() {
    local n=${#c_cmd[@]} from=0 i
    for ((i = 1; i <= n; i++)); do
        if ((i == n)) || [[ "${c_server[i]}/${c_resp[i]}" != "${c_server[from]}/${c_resp[from]}" ]]; then
            run_batch "$from" "$i"
            from=$i
        fi
    done
    c_cmd=() c_where=() c_server=() c_resp=() c_exp=() c_nexp=()
}

format_error() {
    failed=$((failed + 1))
    printf 'FAIL %s  (case file error: %s)\n' "$1" "$2"
}

for file in "${FILES[@]}"; do
    name=$(basename "$file")
    echo "== $name"
    server=clock resp=2
    lineno=0
    while IFS= read -r line || [[ -n "$line" ]]; do
        lineno=$((lineno + 1))
        line=${line%$'\r'}
        case "$line" in
        "> "*)
            add_case "${line#"> "}" "$name:$lineno" "$server" "$resp"
            ;;
        "#"* | "")
            ;;
        "@"*)
            read -r directive value extra <<<"${line#@}"
            case "$directive" in
            server)
                if [[ -n "$value" && -z "$extra" && -n "${PORT[$value]:-}" ]]; then server=$value; else
                    format_error "$name:$lineno" "unknown server in '$line' (clock or conf)"
                fi
                ;;
            resp)
                if [[ "$value" == 2 || "$value" == 3 ]] && [[ -z "$extra" ]]; then resp=$value; else
                    format_error "$name:$lineno" "bad '$line' (@resp 2 or @resp 3)"
                fi
                ;;
            *) format_error "$name:$lineno" "unknown directive '$line'" ;;
            esac
            ;;
        *)
            if ((${#c_cmd[@]})); then
                add_expected "$line"
            else
                format_error "$name:$lineno" "expected output before any '> command' line"
            fi
            ;;
        esac
    done <"$file"
    run_file
done

for name in "${!PID[@]}"; do
    if server_died "$name"; then failed=$((failed + 1)); fi
done

echo "$passed passed, $failed failed"
((failed == 0))
