# Sourced by the test scripts that need one redis-server with the module: free_port, and
# start_module_server DIR, which starts "$SERVER" with "$MODULE" and the test clock on a free
# 127.0.0.1 port, its files in DIR, and sets PORT and SERVER_PID (ready: it answers with
# its own dir). Needs SERVER, MODULE and PYTHON; the caller stops SERVER_PID.

free_port() {
    "$PYTHON" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

start_module_server() {
    local dir=$1 i attempt
    mkdir -p "$dir"
    for ((attempt = 0; attempt < 5; attempt++)); do
        PORT=$(free_port)
        "$SERVER" --port "$PORT" --bind 127.0.0.1 --save "" --appendonly no --dir "$dir" \
            --logfile "$dir/redis.log" --loadmodule "$MODULE" test-clock yes &
        SERVER_PID=$!
        for ((i = 0; i < 100; i++)); do
            if [[ "$(redis-cli -h 127.0.0.1 -p "$PORT" CONFIG GET dir 2>/dev/null | sed -n 2p)" == "$(cd "$dir" && pwd -P)" ]]; then
                return 0
            fi
            # Ours exited (e.g. another job's server took the port first): another port.
            kill -0 "$SERVER_PID" 2>/dev/null || break
            sleep 0.05
        done
        kill "$SERVER_PID" 2>/dev/null
        wait "$SERVER_PID" 2>/dev/null
        SERVER_PID=
    done
    echo "error: redis-server did not start on port $PORT:" >&2
    cat "$dir/redis.log" >&2
    return 1
}
