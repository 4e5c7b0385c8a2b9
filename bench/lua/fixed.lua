-- Fixed window counter: INCRBY + PEXPIRE on one key, the expiry set at the end of the
-- window (windows aligned to multiples of window_ms since the epoch).
--   EVALSHA sha 1 key limit window_ms [cost]
-- Reply: allowed, limit, remaining, retry_after_ms, reset_after_ms (like RL.FIXED).
local key = KEYS[1]
local limit = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local cost = tonumber(ARGV[3] or '1')

local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000) -- milliseconds

local reset = window - now % window
local c = tonumber(redis.call('GET', key) or '0')
if c + cost > limit then
  -- refused requests spend nothing (the naive INCR-first script would count them)
  local remaining = limit - c
  if remaining < 0 then remaining = 0 end
  return {0, limit, remaining, reset, reset}
end
c = redis.call('INCRBY', key, cost)
if c == cost then redis.call('PEXPIRE', key, reset) end
return {1, limit, limit - c, 0, reset}
