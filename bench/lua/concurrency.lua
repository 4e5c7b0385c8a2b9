-- Concurrency limit with expiring leases in a sorted set: member = lease token,
-- score = the lease's expiry (integer microseconds). Expired leases are trimmed on
-- each call; the key lives as long as the last lease.
--   EVALSHA sha 1 key limit lease_ms
-- Reply: allowed, limit, remaining, retry_after_ms, reset_after_ms, token (like RL.ACQUIRE).
local key = KEYS[1]
local limit = tonumber(ARGV[1])
local lease_ms = tonumber(ARGV[2])

local t = redis.call('TIME')
local now = t[1] * 1000000 + t[2]

redis.call('ZREMRANGEBYSCORE', key, '-inf', string.format('%d', now))
local n = redis.call('ZCARD', key)
if n >= limit then
  local first = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
  local last = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
  return {0, limit, 0, math.ceil((first[2] - now) / 1000), math.ceil((last[2] - now) / 1000), false}
end
-- token: time plus the set's size (unique: the set only grows within one microsecond)
local token = string.format('%d-%d', now, n)
redis.call('ZADD', key, string.format('%d', now + lease_ms * 1000), token)
local pttl = redis.call('PTTL', key)
if pttl < lease_ms then redis.call('PEXPIRE', key, lease_ms) end
return {1, limit, limit - n - 1, 0, math.max(pttl, lease_ms), token}
