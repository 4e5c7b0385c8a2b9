import { type GuardOptions, type RequestContext, type RouteOverride } from './guard.js';
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
export declare function expressRateLimit(options: ExpressOptions): (req: Req, res: Res, next: Next) => void;
export {};
