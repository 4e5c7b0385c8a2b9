import type { WaitConnection } from './adapter.js';
export declare class WaitPool {
    private readonly factory;
    readonly max: number;
    private readonly idle;
    private readonly queue;
    private open;
    private closed;
    constructor(factory: () => Promise<WaitConnection>, max: number);
    /** Connections open now (idle or in use). */
    get size(): number;
    /** Idle connections. */
    get idleCount(): number;
    acquire(): Promise<WaitConnection>;
    /** Back to the pool (`reuse`: it answered and is still connected), else closed. */
    release(c: WaitConnection, reuse: boolean): void;
    /** Closes the idle connections now and the others when their call ends; later calls fail. */
    close(): void;
    private create;
    private drop;
}
