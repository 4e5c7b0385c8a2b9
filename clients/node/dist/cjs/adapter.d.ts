/** The minimal shape of a client the limiter can use when it is neither ioredis nor
 * node-redis: `send(args, key)` sends one command (args[0] is its name) and resolves to the
 * reply (integers as numbers or decimal strings, arrays as arrays). `key` routes it in a
 * cluster (undefined: any node). */
export interface CustomClient {
    send(args: string[], key: string | undefined): Promise<unknown>;
    cluster?: boolean;
    /** A cluster's primaries, for the commands every primary needs (`RL.POLICY`). Without it a
     * custom client is one node. */
    primaries?(): Promise<PrimaryNode[]> | PrimaryNode[];
    /** A new connection (or cluster client) of its own, for a call that may block in the server
     * (`WAIT`): the limiter sends one waiting call at a time on it, and closes it with
     * `close()`. Without it, waiting calls go through `send` as any other (then `send` must
     * not queue other calls behind a blocked one). */
    duplicate?(): Promise<CustomClient & {
        close?(): unknown;
    }> | (CustomClient & {
        close?(): unknown;
    });
}
/** A connection of its own for a call that may block in the server (`WAIT ms`): the limiter
 * sends at most one command at a time on it (a blocked command holds it until answered). */
export interface WaitConnection {
    send(args: string[], key: string | undefined): Promise<unknown>;
    /** Still connected (else the pool drops it instead of reusing it). */
    healthy(): boolean;
    /** Closes it (the server drops a call still blocked on it: nothing is spent). */
    close(): void;
}
/** One primary of the server or cluster: its name (`"host:port"`) and a way to send it a
 * command. */
export interface PrimaryNode {
    name: string;
    send(args: string[]): Promise<unknown>;
}
export type ClientKind = 'ioredis' | 'ioredis-cluster' | 'node-redis' | 'node-redis-cluster' | 'custom';
export interface Adapter {
    readonly kind: ClientKind;
    readonly cluster: boolean;
    /** Whether `exact` replies keep integers beyond 2^53 exact. */
    readonly exactIntegers: boolean;
    /** Sends args (args[0] = command). `key` routes in a cluster; `exact` decodes integers as
     * strings; `readonly` lets a cluster client read from a replica if it is set up to. */
    send(args: string[], key: string | undefined, opts?: {
        exact?: boolean;
        readonly?: boolean;
    }): Promise<unknown>;
    /** Every primary (one on a single server), for the commands that have no key and must
     * reach each of them (`RL.POLICY`: policies are per node). */
    primaries(): Promise<PrimaryNode[]>;
    /** Opens a connection of its own (a duplicate of the application's client, with the same
     * options but no command or socket timeout, and no reconnection) for one waiting call at a
     * time; undefined when the client cannot be duplicated (a custom client without
     * `duplicate`): waiting calls then go through `send`. */
    openWait?(): Promise<WaitConnection>;
    /** Closes what the adapter itself opened (never the application's client). */
    close(): Promise<void>;
}
export declare function isCustomClient(c: unknown): c is CustomClient;
export declare function createAdapter(client: unknown): Adapter;
