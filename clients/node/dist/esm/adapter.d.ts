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
    /** Closes what the adapter itself opened (never the application's client). */
    close(): Promise<void>;
}
export declare function isCustomClient(c: unknown): c is CustomClient;
export declare function createAdapter(client: unknown): Adapter;
