export interface LocalRefusal {
    /** When the refusal ends (package clock, ms). */
    until: number;
    /** The cost refused: a request of at least this cost is refused locally. */
    cost: number;
}
export declare class LocalRefusals {
    readonly maxKeys: number;
    private readonly entries;
    constructor(maxKeys?: number);
    get size(): number;
    /** The entry refusing a request of `cost` on `key` at `now` (an ended entry is dropped). */
    find(key: string, cost: number, now: number): LocalRefusal | undefined;
    /** The server refused `cost` on `key` for `retryAfterMs` from `now`. */
    refused(key: string, cost: number, retryAfterMs: number, now: number): void;
    /** The server admitted a request on `key`. */
    admitted(key: string): void;
    clear(): void;
}
