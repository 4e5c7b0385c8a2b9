import { type Guard, type GuardOptions, type RequestContext, type RouteOverride } from './guard.js';
interface Req {
    method: string;
    url: string;
    /** Express: the path of `url` (inside `app.use('/api', mw)`, without the mount). */
    path?: string;
    originalUrl?: string;
    headers: RequestContext['headers'];
    socket: {
        remoteAddress?: string;
    };
}
interface Res {
    statusCode: number;
    setHeader(name: string, value: string): unknown;
    end(body?: string): unknown;
    headersSent?: boolean;
}
type Next = (err?: unknown) => void;
export interface ExpressOptions extends GuardOptions {
    /** Per-request override (e.g. from `req.route`), in addition to `routes`. */
    route?: (req: any) => RouteOverride | false | undefined;
}
export declare function pathOf(url: string | undefined): string;
/** The middleware, with `close()` (gives back the leases it holds) and its `guard`. */
export type ExpressMiddleware = ((req: Req, res: Res, next: Next) => void) & {
    close(): Promise<void>;
    guard: Guard;
};
export declare function expressRateLimit(options: ExpressOptions): ExpressMiddleware;
export {};
