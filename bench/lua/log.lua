-- Exact sliding log in a sorted set: one member per unit of admitted cost, scored by
-- its time in microseconds; entries older than the window are trimmed on each call.
--   EVALSHA sha 1 key limit window_ms [cost]
-- Reply: allowed, limit, remaining, retry_after_ms, reset_after_ms (like RL.LOG).
local key = KEYS[1]
local limit = tonumber(ARGV[1])
local window_ms = tonumber(ARGV[2])
local cost = tonumber(ARGV[3] or '1')

local t = redis.call('TIME')
local now = t[1] * 1000000 + t[2]
local window = window_ms * 1000

redis.call('ZREMRANGEBYSCORE', key, '-inf', string.format('%d', now - window))
local n = redis.call('ZCARD', key)
if n + cost > limit then
  local i = n + cost - limit - 1
  local oldest = redis.call('ZRANGE', key, i, i, 'WITHSCORES')
  local newest = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
  return {0, limit, math.max(limit - n, 0), math.ceil((oldest[2] + window - now) / 1000),
          math.ceil((newest[2] + window - now) / 1000)}
end
-- members must be unique: time plus the set's size (it only grows within one microsecond)
local args = {}
for i = 1, cost do
  args[#args + 1] = string.format('%d', now)
  args[#args + 1] = string.format('%d-%d', now, n + i - 1)
end
redis.call('ZADD', key, unpack(args))
redis.call('PEXPIRE', key, window_ms)
return {1, limit, limit - n - cost, 0, window_ms}
