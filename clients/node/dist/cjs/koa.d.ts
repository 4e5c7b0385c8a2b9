import { type Guard, type GuardOptions, type RouteOverride } from './guard.js';
type KoaContext = any;
type KoaNext = () => Promise<unknown>;
export interface KoaOptions extends GuardOptions {
    /** Per-request override (e.g. from the matched route), in addition to `routes`. */
    route?: (ctx: KoaContext) => RouteOverride | false | undefined;
}
/** The middleware, with `close()` (gives back the leases it holds) and its `guard`. */
export type KoaMiddleware = ((ctx: KoaContext, next: KoaNext) => Promise<void>) & {
    close(): Promise<void>;
    guard: Guard;
};
export declare function koaRateLimit(options: KoaOptions): KoaMiddleware;
export {};
