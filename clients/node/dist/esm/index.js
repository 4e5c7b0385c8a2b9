export * from './types.js';
export { createLimiter, Limiter, TimeoutError, isUnsupportedOption, parseDecision, parseInfo, ruleArgs, optionArgs } from './limiter.js';
export { rateLimitHeaders, emissionInterval, nextQuotaMs, resetParameter, windowSeconds, quota, sfString, tightest } from './headers.js';
export { addressKey, clientAddress, formatAddress, parseAddress, Networks } from './ip.js';
export { MemoryLimiter } from './memory.js';
export { CircuitOpenError, UNAVAILABLE_REPLIES, createGuard, isUnavailable, keys } from './guard.js';
export { expressRateLimit } from './express.js';
export { fastifyRateLimit } from './fastify.js';
export { RedisRateLimitStore } from './store.js';
