-- Sliding window counter in two keys: one INCRBY counter per fixed window, named
-- <key>:<window number>, windows aligned to multiples of window_ms since the epoch.
-- estimate = previous * (1 - elapsed fraction) + current.
--   EVALSHA sha 1 key limit window_ms [cost]
-- Reply: allowed, limit, remaining, retry_after_ms, reset_after_ms (like RL.SLIDING).
local key = KEYS[1]
local limit = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local cost = tonumber(ARGV[3] or '1')

local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000) -- milliseconds

local w = math.floor(now / window)
local cur_key = key .. ':' .. string.format('%d', w)
local prev_key = key .. ':' .. string.format('%d', w - 1)
local v = redis.call('MGET', cur_key, prev_key)
local cur = tonumber(v[1]) or 0
local prev = tonumber(v[2]) or 0
local elapsed = now - w * window
local estimate = prev * (window - elapsed) / window + cur
if estimate + cost > limit then
  local retry = window - elapsed
  if prev > 0 and cur + cost <= limit then
    -- the estimate leaves room inside this window, once enough of `prev` has slid out
    retry = math.ceil(window - (limit - cur - cost) * window / prev) - elapsed
  end
  local reset = window - elapsed
  if cur > 0 then reset = reset + window end
  return {0, limit, 0, retry, reset}
end
cur = redis.call('INCRBY', cur_key, cost)
local reset = 2 * window - elapsed
if cur == cost then redis.call('PEXPIRE', cur_key, reset) end
return {1, limit, math.floor(limit - estimate - cost), 0, reset}
