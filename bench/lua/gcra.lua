-- GCRA in one string key: the theoretical arrival time (TAT), integer microseconds
-- since the epoch, stored as a plain integer string with a TTL (the layout people
-- ship today, e.g. the redis-gcra / throttled family of scripts).
--   EVALSHA sha 1 key burst count period_ms [cost]
-- Reply: allowed, limit, remaining, retry_after_ms, reset_after_ms (like RL.GCRA).
local key = KEYS[1]
local burst = tonumber(ARGV[1])
local count = tonumber(ARGV[2])
local period_ms = tonumber(ARGV[3])
local cost = tonumber(ARGV[4] or '1')

local t = redis.call('TIME')
local now = t[1] * 1000000 + t[2]

local emission = period_ms * 1000 / count -- microseconds per request
local tolerance = emission * burst

local tat = tonumber(redis.call('GET', key) or '0')
if tat < now then tat = now end
local new_tat = tat + emission * cost
local diff = now - (new_tat - tolerance)
if diff < 0 then
  -- refused: nothing is written
  local remaining = math.floor((now - (tat - tolerance)) / emission)
  if remaining < 0 then remaining = 0 end
  return {0, burst, remaining, math.ceil(-diff / 1000), math.ceil((tat - now) / 1000)}
end
local ttl = math.ceil((new_tat - now) / 1000)
-- %d, not the default number conversion (%.14g would drop the last digits of a
-- microsecond timestamp)
redis.call('SET', key, string.format('%d', new_tat), 'PX', ttl)
return {1, burst, math.floor(diff / emission), 0, ttl}
