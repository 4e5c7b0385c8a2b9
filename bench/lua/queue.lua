-- Leaky bucket as a queue (shaping) in one string key: the time (integer microseconds)
-- at which the queue is empty again. Each admitted request is scheduled one interval
-- after the previous one and told how long to wait.
--   EVALSHA sha 1 key capacity interval_ms [cost]
-- Reply: allowed, limit, remaining, retry_after_ms, reset_after_ms, delay_ms (like RL.QUEUE).
local key = KEYS[1]
local capacity = tonumber(ARGV[1])
local interval_ms = tonumber(ARGV[2])
local cost = tonumber(ARGV[3] or '1')

local t = redis.call('TIME')
local now = t[1] * 1000000 + t[2]
local interval = interval_ms * 1000

local tat = tonumber(redis.call('GET', key) or '0')
if tat < now then tat = now end
local delay = tat - now
local waiting = math.ceil(delay / interval)
if waiting + cost > capacity then
  return {0, capacity, 0, math.ceil((delay - (capacity - cost) * interval) / 1000),
          math.ceil(delay / 1000), 0}
end
local new_tat = tat + interval * cost
local ttl = math.ceil((new_tat - now) / 1000)
redis.call('SET', key, string.format('%d', new_tat), 'PX', ttl)
return {1, capacity, capacity - math.ceil((new_tat - now) / interval), 0, ttl,
        math.ceil(delay / 1000)}
