export interface StartServerOptions {
    /** The module (.so). Default: $REDIS_RATELIMIT_MODULE, $RL_MODULE, then
     * target/release/libredis_ratelimit.so in the working directory or a parent of it, then
     * /usr/lib/redis/modules/ and /usr/local/lib/. */
    module?: string;
    /** The server binary. Default: $REDIS_SERVER, $RL_SERVER, then redis-server (or
     * valkey-server) on the PATH. */
    redisServer?: string;
    /** A fixed port (default: a free one). */
    port?: number;
    /** Load the module with `test-clock yes` (default true). */
    testClock?: boolean;
    /** More server arguments, e.g. ['--maxmemory', '10mb']. */
    args?: string[];
    /** More module arguments, e.g. ['max-wait-ms', '1000']. */
    moduleArgs?: string[];
    /** How long to wait for the server to answer (default 10000 ms). */
    startTimeoutMs?: number;
}
export interface TestServer {
    host: string;
    port: number;
    /** redis://127.0.0.1:<port> */
    url: string;
    /** The server's directory (its log: redis.log). */
    dir: string;
    /** The module and the server binary it was started with. */
    module: string;
    redisServer: string;
    /** One command on a connection of its own (replies: strings, numbers, arrays, null;
     * an error reply rejects). */
    command(...args: (string | number | bigint)[]): Promise<unknown>;
    /** The module's test clock (`RL.CLOCK`). */
    clock: {
        set(ms: number | bigint): Promise<unknown>;
        advance(ms: number | bigint): Promise<unknown>;
        get(): Promise<number>;
    };
    /** FLUSHALL (policies stay: RL.POLICY DEL them). */
    flush(): Promise<void>;
    /** Stops the server and removes its directory. */
    stop(): Promise<void>;
}
/** The module's path (see `StartServerOptions.module`); an Error saying where it looked. */
export declare function findModule(explicit?: string): string;
/** The server binary (see `StartServerOptions.redisServer`); an Error when none is found. */
export declare function findServer(explicit?: string): string;
/** One command to 127.0.0.1:port on a connection of its own. */
export declare function sendCommand(port: number, args: (string | number | bigint)[], timeoutMs?: number): Promise<unknown>;
/** Starts redis-server with the module on a free 127.0.0.1 port (see the top of this file). */
export declare function startServer(o?: StartServerOptions): Promise<TestServer>;
