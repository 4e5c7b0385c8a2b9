import { type Limiter } from './limiter.js';
export interface StoreOptions {
    limiter: Limiter;
    /** Key prefix (default "rl:erl:"). */
    prefix?: string;
    /** The limit, when the middleware's `limit` is not a number. */
    limit?: number;
    /** The window, when the store is used without the middleware's init. */
    windowMs?: number;
    /** Windows offset per key (STAGGER, with the module's "beyond yes or no" options). */
    stagger?: boolean;
    logger?: {
        warn(msg: string): void;
    };
}
export interface ClientRateLimitInfo {
    totalHits: number;
    resetTime: Date | undefined;
}
export declare class RedisRateLimitStore {
    readonly prefix: string;
    readonly localKeys = false;
    private limit;
    private windowMs;
    private readonly limiter;
    private readonly stagger;
    private readonly logger;
    private refundUnsupported;
    /** Refused hits per key not yet matched by a decrement, with when they stop mattering. */
    private readonly refused;
    constructor(o: StoreOptions);
    init(options: {
        windowMs?: number;
        limit?: unknown;
        max?: unknown;
    }): void;
    private rule;
    increment(key: string): Promise<ClientRateLimitInfo>;
    decrement(key: string): Promise<void>;
    get(key: string): Promise<ClientRateLimitInfo | undefined>;
    resetKey(key: string): Promise<void>;
}
