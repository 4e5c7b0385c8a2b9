export * from './types.js';
export { createLimiter, Limiter, TimeoutError, isUnsupportedOption, parseDecision, parseInfo, parsePolicyDecision, ruleArgs, optionArgs } from './limiter.js';
export {
  ClusterPolicies, Policies, PolicyRuleCache, parsePolicyHistory, parsePolicyInfo, parsePolicyList,
  parsePolicyRule, parsePolicyStats, policyRuleArgs,
} from './policy.js';
export type { CachedPolicy, CachedVersion, PolicySetOptions } from './policy.js';
export type { LimiterOptions, ReplyFields } from './limiter.js';
export type { Adapter, ClientKind, CustomClient, PrimaryNode, WaitConnection } from './adapter.js';
export { rateLimitHeaders, emissionInterval, nextQuotaMs, resetParameter, windowSeconds, quota, sfString, tightest } from './headers.js';
export type { HeaderItem, HeaderOptions } from './headers.js';
export { addressKey, clientAddress, formatAddress, parseAddress, Networks } from './ip.js';
export type { Address, TrustedProxies } from './ip.js';
export { MemoryLimiter } from './memory.js';
export type { MemoryLimiterOptions } from './memory.js';
export { CircuitOpenError, UNAVAILABLE_REPLIES, createGuard, isUnavailable, isUnknownPolicy, keys } from './guard.js';
export type {
  DecisionEvent, Guard, GuardOptions, GuardResult, KeyFunction, LimitOutcome, LimitSpec, Matcher,
  RequestContext, RouteLimits, RouteOverride, RuleSpec,
} from './guard.js';
export { parseLimitString } from './limits.js';
export type { StringAlgorithm } from './limits.js';
export { Leases, LEASABLE } from './lease.js';
export type { LeaseOptions, LeaseResult, LeaseState, LeasesOptions } from './lease.js';
export { LocalRefusals } from './local.js';
export { expressRateLimit } from './express.js';
export type { ExpressMiddleware, ExpressOptions } from './express.js';
export { fastifyRateLimit } from './fastify.js';
export type { FastifyRateLimitOptions } from './fastify.js';
export { RedisRateLimitStore } from './store.js';
export type { ClientRateLimitInfo, StoreOptions } from './store.js';
export { koaRateLimit } from './koa.js';
export type { KoaMiddleware, KoaOptions } from './koa.js';
export { RateLimit, RateLimitGuard, RATE_LIMIT_METADATA } from './nest.js';
export type { NestGuardOptions } from './nest.js';
export { RateLimitedError, createRateLimiter } from './consume.js';
export type { ConsumeResult, RateLimiter, RateLimiterOptions } from './consume.js';
