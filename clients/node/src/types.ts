// The shapes of the module's commands and replies (see the module's README, "Command
// reference"). Numbers a caller passes may be numbers (safe integers) or bigints; they are
// sent as decimal strings.

/** An integer argument: a safe integer `number` or a `bigint`. */
export type Int = number | bigint;

/** `RL.GCRA key burst count period_ms`: `burst` at once, then `count` per `periodMs`. */
export interface GcraRule {
  algorithm: 'gcra';
  burst: Int;
  count: Int;
  periodMs: Int;
}

/** `RL.TOKENBUCKET key capacity refill_tokens refill_period_ms`. */
export interface TokenBucketRule {
  algorithm: 'tokenbucket';
  capacity: Int;
  refillTokens: Int;
  refillPeriodMs: Int;
}

/** `RL.SLIDING key limit window_ms` (sliding window counter). */
export interface SlidingRule {
  algorithm: 'sliding';
  limit: Int;
  windowMs: Int;
  /** `STAGGER`: windows offset by the key's hash slot. */
  stagger?: boolean;
}

/** `RL.FIXED key limit window_ms` (fixed window counter). */
export interface FixedRule {
  algorithm: 'fixed';
  limit: Int;
  windowMs: Int;
  /** `STAGGER`: windows offset by the key's hash slot. */
  stagger?: boolean;
}

/** `RL.LOG key limit window_ms` (exact sliding log). */
export interface LogRule {
  algorithm: 'log';
  limit: Int;
  windowMs: Int;
}

/** `RL.QUEUE key capacity interval_ms` (leaky bucket as a queue: tells the caller to wait). */
export interface QueueRule {
  algorithm: 'queue';
  capacity: Int;
  intervalMs: Int;
}

/** A rate rule: one of the six rate commands with its numbers (also an `RL.ALL` rule). */
export type Rule = GcraRule | TokenBucketRule | SlidingRule | FixedRule | LogRule | QueueRule;

/** `CONCURRENCY limit lease_ms`: a policy's rule for leases (`RL.ACQUIRE`'s numbers). */
export interface ConcurrencyRule {
  algorithm: 'concurrency';
  limit: Int;
  leaseMs: Int;
}

/** A policy's rule (`RL.POLICY SET name <rule>`): a rate rule or CONCURRENCY, with the
 * policy's `BLOCK ms` (not CONCURRENCY). `stagger` of SLIDING and FIXED is the rule's. */
export type PolicyRule = (Rule | ConcurrencyRule) & { blockMs?: Int };

/** A policy version's mode: enforced, or in shadow (decides and spends, never refuses). */
export type PolicyMode = 'enforce' | 'shadow';

/** `RL.POLICY GET`: the current version and the candidate (if any). Rules are the module's
 * text, e.g. `"GCRA 20 20 60000"` (`parsePolicyRule` reads one). */
export interface PolicyInfo {
  name: string;
  version: number;
  rule: string;
  mode: PolicyMode;
  /** 16 hex digits over the current version (number, rule, mode) and the candidate with its
   * share: nodes with the same digest hold the same policy. */
  digest: string;
  /** 0 when there is no candidate. */
  candidateVersion: number;
  /** null when there is no candidate. */
  candidateRule: string | null;
  candidateMode: PolicyMode | null;
  /** The candidate's share of keys, 1 to 99 (0 without a candidate). */
  rollout: number;
}

/** One entry of `RL.POLICY LIST`. */
export interface PolicySummary {
  name: string;
  version: number;
  digest: string;
  mode: PolicyMode;
  candidateVersion: number;
  rollout: number;
}

/** One entry of `RL.POLICY HISTORY` (the candidate first, then newest first). */
export interface PolicyVersion {
  version: number;
  rule: string;
  mode: PolicyMode;
  /** When it was set, on the module's clock (ms). */
  setMs: number;
  status: 'candidate' | 'current' | 'previous';
}

/** `RL.POLICY STATS` (the node's own, since the last reset). */
export interface PolicyStats {
  requests: number;
  admitted: number;
  refused: number;
  shadowRefusals: number;
  unitsSpent: number;
  /** Up to 10 `[key, count]`, most refused first (a Space-Saving sketch: a count is at most
   * `topErrorBound` above the true one). */
  topRefused: [string, number][];
  topErrorBound: number;
}

/** Options of `RL.ALLOW` (the policy sets STAGGER and BLOCK). */
export interface AllowOptions {
  /** `COST n` (default 1; 0 peeks). */
  cost?: Int;
  /** `REFUND n` instead of cost. */
  refund?: Int;
  /** `PARTIAL`: take up to `cost`; the decision's `granted` says how many. */
  partial?: boolean;
  /** `RESERVE r`. */
  reserve?: Int;
  /** `DRYRUN`. */
  dryrun?: boolean;
  /** `WAIT ms` (0 to 86400000): when the request would be refused, the server holds the call
   * until it is admitted (the waiters of a key in arrival order) or `ms` pass, then answers
   * (admitted, or the refusal of that instant). The decision gains `waitedMs`. The call goes
   * on a connection of its own (see the limiter's `waitConnections`), and its timeout is
   * `waitMs` + `timeoutMs`. */
  waitMs?: Int;
  /** `PROBE`: on a key paused with `RL.PAUSE ... PROBE probe_ms`, after the pause this request
   * may be the one probe let through (`probe: true` in the decision; then report with
   * `resume(key)` or `pause(key, ...)` again). The decision gains `probe`. */
  probe?: boolean;
  timeoutMs?: number;
}

/** Each primary's answer to an `RL.POLICY` command sent to every primary of a cluster. */
export interface NodeAnswers<T> {
  /** `"host:port"` -> its reply, or the Error it answered. */
  nodes: Record<string, T | Error>;
  /** Every primary answered without an error. */
  ok: boolean;
  /** The reply when every primary gave the same one (e.g. the same version), else undefined. */
  reply: T | undefined;
}

/** A policy over the primaries of a cluster. `drift`: its (version, digest) differs between
 * primaries, or some do not have it; `nodes` holds each primary's value (null: missing). */
export interface ClusterPolicy<T> {
  name: string;
  drift: boolean;
  nodes: Record<string, T | null>;
}

/** Options of every rate command. */
export interface RateOptions {
  /** `COST n`: units this request spends (default 1). `0` is a peek (needs the module's
   * "beyond yes or no" options; older modules answer an error). */
  cost?: Int;
  /** `REFUND n` (instead of COST): give back n units charged for work that did not happen. */
  refund?: Int;
  /** `PARTIAL` (with `cost`): take up to `cost`; the decision's `granted` says how many. */
  partial?: boolean;
  /** `RESERVE r`: admit only if at least r units remain afterwards. */
  reserve?: Int;
  /** `BLOCK ms`: when refused, refuse everything on this key for `ms`. */
  blockMs?: Int;
  /** `DRYRUN`: answer as if the request were made, change nothing. */
  dryrun?: boolean;
  /** `WAIT ms` (0 to 86400000): when the request would be refused, the server holds the call
   * until it is admitted (the waiters of a key in arrival order) or `ms` pass, then answers
   * (admitted, or the refusal of that instant). The decision gains `waitedMs`. The call goes
   * on a connection of its own (see the limiter's `waitConnections`), and its timeout is
   * `waitMs` + `timeoutMs`. Not with `blockMs` (the module answers `ERR syntax error`). */
  waitMs?: Int;
  /** `PROBE`: on a key paused with `RL.PAUSE ... PROBE probe_ms`, after the pause this request
   * may be the one probe let through (`probe: true` in the decision; then report with
   * `resume(key)` or `pause(key, ...)` again). The decision gains `probe`. */
  probe?: boolean;
  /** Reject with a TimeoutError if no reply within this many ms (default: the limiter's). */
  timeoutMs?: number;
}

/** The standard reply of every rate command (its first five fields), plus what some add. */
export interface Decision {
  /** Admitted (cost spent). With `dryrun`: would it be admitted. */
  allowed: boolean;
  /** The most cost-1 requests a fresh key admits at once (burst, capacity or window limit). */
  limit: number;
  /** Cost-1 requests still admitted right now, after this one. */
  remaining: number;
  /** 0 if admitted, else ms (rounded up) until this same request would be admitted. */
  retryAfterMs: number;
  /** ms (rounded up) until the key is back to its fresh state (its PTTL). */
  resetAfterMs: number;
  /** RL.QUEUE: how long the admitted request must wait before it proceeds. */
  delayMs?: number;
  /** RL.ACQUIRE: the lease token (`<unix_ms>-<seq>`), null when refused. */
  token?: string | null;
  /** With `partial`: units spent (0 when refused). */
  granted?: number;
  /** With `probe`: this request is the probe of a paused key (see `RL.PAUSE ... PROBE`). */
  probe?: boolean;
  /** With `waitMs`: how long the server held the call, on the module's clock (0: answered at
   * once). */
  waitedMs?: number;
}

/** `CL.THROTTLE`'s reply (redis-cell's), in seconds as redis-cell gives it. */
export interface ThrottleReply {
  /** `limited` is 0. */
  allowed: boolean;
  /** max_burst + 1. */
  limit: number;
  remaining: number;
  /** Seconds (rounded up) until a retry would be admitted; -1 when allowed. */
  retryAfterS: number;
  /** Seconds (rounded up) until the key is fresh. */
  resetAfterS: number;
}

/** One entry of `RL.ALL` with its rule's numbers. */
export interface AllRuleEntry {
  key: string;
  rule: Rule;
  /** `COST n` for this rule (0 = peek, with the module's "beyond yes or no" options). */
  cost?: Int;
  /** `RESERVE r` for this rule. */
  reserve?: Int;
}

/** One entry of `RL.ALL` naming a policy stored in the server (`POLICY name [COST n]
 * [RESERVE r]`; not a CONCURRENCY policy). */
export interface AllPolicyEntry {
  key: string;
  policy: string;
  cost?: Int;
  reserve?: Int;
}

/** One entry of `RL.ALL`: a rule, or a policy by name. */
export type AllEntry = AllRuleEntry | AllPolicyEntry;

/** `RL.ALL`'s reply. */
export interface AllDecision {
  allowed: boolean;
  /** 1-based index of the first rule that refused, 0 when admitted. */
  refusedBy: number;
  /** Each rule's own decision, in the order given. When refused, a rule that would have
   * admitted counted the request in its `remaining` (as with DRYRUN). */
  decisions: Decision[];
}

/** `RL.INFO`: the algorithm, its stored state and `ttl_ms`, field names as the module names
 * them. Fields ending in `_ns` or `_us` (time since the epoch in ns or µs, beyond 2^53) are
 * bigints; other integers are numbers (bigints if beyond 2^53); strings stay strings. */
export interface Info {
  algorithm: 'gcra' | 'tokenbucket' | 'sliding' | 'fixed' | 'log' | 'queue' | 'concurrency' | string;
  ttl_ms: number;
  [field: string]: string | number | bigint;
}
