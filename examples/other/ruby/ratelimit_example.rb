require "redis" # redis-rb 4.x or 5.x (Debian: ruby-redis)

# The standard reply's five fields, in order (then any extra field, e.g. waited_ms).
FIELDS = %i[allowed limit remaining retry_after_ms reset_after_ms].freeze

# Rack middleware (Rails, Sinatra, any Rack app): per client IP, 10 at once, then 5 per second.
#   use RateLimit, redis: Redis.new(url: "redis://127.0.0.1:6379", timeout: 0.05)
class RateLimit
  def initialize(app, redis:, burst: 10, count: 5, period_ms: 1000)
    @app, @redis, @rule = app, redis, [burst, count, period_ms]
  end

  def call(env)
    reply = begin
      @redis.call("RL.GCRA", "rl:ip:#{env["REMOTE_ADDR"]}", *@rule)
    rescue Redis::BaseConnectionError
      return @app.call(env) # Redis down or slow: fail open (an ERR reply still raises)
    end
    d = FIELDS.zip(reply).to_h
    headers = { "ratelimit-limit" => d[:limit].to_s, "ratelimit-remaining" => d[:remaining].to_s }
    if d[:allowed] == 0
      headers["retry-after"] = ((d[:retry_after_ms] + 999) / 1000).to_s # seconds, rounded up
      return [429, headers.merge("content-type" => "text/plain"), ["Too Many Requests\n"]]
    end
    status, app_headers, body = @app.call(env)
    [status, app_headers.merge(headers), body]
  end
end

# WAIT: wait in the server (as BLPOP does) for room, up to wait_ms, instead of sleeping and
# retrying. A waiting call holds its connection: give it a client of its own whose read timeout
# outlasts the wait, e.g. Redis.new(url: ..., read_timeout: 6) for WAIT 5000.
def wait_for_room(waiter, key, wait_ms: 5000)
  reply = waiter.call("RL.GCRA", key, 1, 1, 1000, "WAIT", wait_ms)
  FIELDS.zip(reply).to_h.merge(waited_ms: reply.last) # admitted: allowed 1; out of time: 0
end
