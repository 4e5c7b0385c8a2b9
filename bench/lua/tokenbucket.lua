-- Token bucket in a hash: fields `tokens` (a float) and `ts` (last refill, integer
-- microseconds), with a TTL of the time until the bucket is full again.
--   EVALSHA sha 1 key capacity refill_tokens refill_period_ms [cost]
-- Reply: allowed, limit, remaining, retry_after_ms, reset_after_ms (like RL.TOKENBUCKET).
local key = KEYS[1]
local capacity = tonumber(ARGV[1])
local refill_tokens = tonumber(ARGV[2])
local refill_period_ms = tonumber(ARGV[3])
local cost = tonumber(ARGV[4] or '1')

local t = redis.call('TIME')
local now = t[1] * 1000000 + t[2]

local rate = refill_tokens / (refill_period_ms * 1000) -- tokens per microsecond
local st = redis.call('HMGET', key, 'tokens', 'ts')
local tokens = tonumber(st[1]) or capacity
local ts = tonumber(st[2]) or now
local elapsed = now - ts
if elapsed < 0 then elapsed = 0 end
tokens = math.min(capacity, tokens + elapsed * rate)
if tokens < cost then
  return {0, capacity, math.floor(tokens), math.ceil((cost - tokens) / rate / 1000),
          math.ceil((capacity - tokens) / rate / 1000)}
end
tokens = tokens - cost
local ttl = math.ceil((capacity - tokens) / rate / 1000)
if ttl < 1 then ttl = 1 end
redis.call('HSET', key, 'tokens', tokens, 'ts', string.format('%d', now))
redis.call('PEXPIRE', key, ttl)
return {1, capacity, math.floor(tokens), 0, ttl}
