import { type GuardOptions } from './guard.js';
type Done = (err?: Error) => void;
export type FastifyRateLimitOptions = GuardOptions;
export declare const fastifyRateLimit: (fastify: any, options: FastifyRateLimitOptions, done: Done) => void;
export {};
