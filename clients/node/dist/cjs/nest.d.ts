import { type Guard, type GuardOptions, type RouteOverride } from './guard.js';
/** The metadata key of `@RateLimit(...)`. */
export declare const RATE_LIMIT_METADATA = "redis-ratelimit:route";
/** Per-handler (or per-controller) limits: added to the guard's as a route's (`replace:
 * true` replaces them); `false` exempts. A method or class decorator; without TypeScript
 * decorators, call it by hand: `RateLimit(o)(Cls.prototype, 'method', descriptor)`. */
export declare function RateLimit(override: RouteOverride | false): (target: any, key?: string | symbol, descriptor?: PropertyDescriptor) => any;
export interface NestGuardOptions extends GuardOptions {
    /** Per-request override, in addition to `routes` and `@RateLimit`. */
    route?: (context: any) => RouteOverride | false | undefined;
}
/** Nest's `CanActivate`: decides each request, sets the headers, and throws Nest's
 * `HttpException` (429, 403 or 503, with the problem body) when refused. */
export declare class RateLimitGuard {
    private readonly options;
    readonly guard: Guard;
    constructor(options: NestGuardOptions);
    canActivate(context: any): Promise<boolean>;
    /** Gives back the leases this guard holds. */
    close(): Promise<void>;
    /** Nest calls it on shutdown for a guard given as a provider. */
    onApplicationShutdown(): Promise<void>;
}
