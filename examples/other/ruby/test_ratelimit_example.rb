# Runs examples/other/ruby/ratelimit_example.rb (the README's Ruby snippet, byte for byte)
# against a real redis-server with the module loaded with `test-clock yes`, and checks every
# reply against the contract (docs/commands.md). No mocks, no sleeps: time moves with
# RL.CLOCK SET/ADVANCE, and the blocking WAIT is released by RL.CLOCK ADVANCE from a second
# connection once INFO ratelimit shows the client waiting.
#
#   RL_REDIS_PORT=6390 ruby examples/other/ruby/test_ratelimit_example.rb
#
# Prints one line per check and `ruby examples: N passed, M failed`; exits 1 on any failure.
require "socket"
require_relative "ratelimit_example"

PORT = Integer(ENV.fetch("RL_REDIS_PORT"))
T0 = 1_700_000_040_000 # a fixed instant for the test clock (ms since the epoch)

def client(**opts)
  Redis.new(host: "127.0.0.1", port: PORT, **opts)
end

# Assertions raise, so a check stops at its first mismatch and says what it got.
class Mismatch < StandardError; end

def expect(what, got, want)
  raise Mismatch, "#{what}: got #{got.inspect}, want #{want.inspect}" unless got == want
end

$passed = 0
$failed = 0

def check(name)
  yield
  $passed += 1
  puts "ok   #{name}"
rescue StandardError, ScriptError => e
  $failed += 1
  puts "FAIL #{name}: #{e.class}: #{e.message}"
  e.backtrace.first(3).each { |l| puts "       #{l}" } unless e.is_a?(Mismatch)
end

# Polls INFO ratelimit until `field` reads `value` (bounded: 10 s of real time, reached only on
# a failure), so the test releases a waiter only once the server holds it, without sleeping.
def await_info(redis, field, value)
  deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 10.0
  loop do
    line = redis.info("ratelimit")[field]
    return if line.to_s == value.to_s
    if Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline
      raise Mismatch, "INFO ratelimit #{field}: got #{line.inspect}, want #{value} within 10 s"
    end
    Thread.pass
  end
end

redis = client
redis.call("RL.CLOCK", "SET", T0)
redis.flushall

APP = ->(_env) { [200, { "content-type" => "text/plain" }, ["hello\n"]] }

check "middleware: 10 admitted with headers, the 11th gets 429 and Retry-After 1, room 200 ms later" do
  redis.call("RL.CLOCK", "SET", T0)
  mw = RateLimit.new(APP, redis: redis)
  env = { "REMOTE_ADDR" => "203.0.113.7" }
  10.times do |i|
    status, headers, body = mw.call(env)
    expect("request #{i + 1} status", status, 200)
    expect("request #{i + 1} body", body, ["hello\n"])
    expect("request #{i + 1} ratelimit-limit", headers["ratelimit-limit"], "10")
    expect("request #{i + 1} ratelimit-remaining", headers["ratelimit-remaining"], (9 - i).to_s)
    expect("request #{i + 1} retry-after", headers.key?("retry-after"), false)
  end
  status, headers, body = mw.call(env)
  expect("11th status", status, 429)
  # 5 per second: one unit every 200 ms, so Retry-After = ceil(200 / 1000) = 1
  expect("11th retry-after", headers["retry-after"], "1")
  expect("11th ratelimit-remaining", headers["ratelimit-remaining"], "0")
  expect("11th body", body, ["Too Many Requests\n"])
  # the refusal spent nothing: the key still says 200 ms to the next unit
  expect("RL.GCRA DRYRUN after the refusal",
         redis.call("RL.GCRA", "rl:ip:203.0.113.7", 10, 5, 1000, "DRYRUN"), [0, 10, 0, 200, 2000])
  redis.call("RL.CLOCK", "ADVANCE", 199)
  expect("status at +199 ms", mw.call(env)[0], 429)
  redis.call("RL.CLOCK", "ADVANCE", 1)
  status, headers, = mw.call(env)
  expect("status at +200 ms", status, 200)
  expect("ratelimit-remaining at +200 ms", headers["ratelimit-remaining"], "0")
  # another client IP has its own key
  expect("another IP", mw.call("REMOTE_ADDR" => "198.51.100.1")[1]["ratelimit-remaining"], "9")
end

check "middleware: Redis unreachable fails open (the app answers, no rate headers)" do
  free = TCPServer.new("127.0.0.1", 0)
  port = free.addr[1]
  free.close # nothing listens there now
  down = Redis.new(host: "127.0.0.1", port: port, timeout: 0.05, reconnect_attempts: 0)
  status, headers, = RateLimit.new(APP, redis: down).call("REMOTE_ADDR" => "203.0.113.7")
  expect("status", status, 200)
  expect("headers", headers, { "content-type" => "text/plain" })
end

check "WAIT 0 answers at once; WAIT admitted at once has waited_ms 0" do
  redis.call("RL.CLOCK", "SET", T0)
  d = wait_for_room(redis, "vendor:zero", wait_ms: 0)
  expect("first call (fresh key)", d, { allowed: 1, limit: 1, remaining: 0, retry_after_ms: 0,
                                        reset_after_ms: 1000, waited_ms: 0 })
  d = wait_for_room(redis, "vendor:zero", wait_ms: 0)
  expect("second call, WAIT 0: refused at once", d, { allowed: 0, limit: 1, remaining: 0,
                                                       retry_after_ms: 1000, reset_after_ms: 1000,
                                                       waited_ms: 0 })
  expect("INFO ratelimit_waiting_clients", redis.info("ratelimit")["ratelimit_waiting_clients"], "0")
end

check "WAIT 5000 blocks in the server and is admitted when RL.CLOCK ADVANCE 1000 frees room" do
  redis.call("RL.CLOCK", "SET", T0)
  expect("the unit taken", wait_for_room(redis, "vendor:openai")[:allowed], 1)
  # Its own connection. The wait runs on the test clock, not in real time: the read timeout
  # only bounds a failure (a real app sets it above the wait, as the snippet says).
  waiter = client(read_timeout: 30)
  started = redis.info("ratelimit")["ratelimit_waits_started"].to_i
  th = Thread.new { wait_for_room(waiter, "vendor:openai", wait_ms: 5000) }
  await_info(redis, "ratelimit_waiting_clients", 1)
  expect("waits started", redis.info("ratelimit")["ratelimit_waits_started"].to_i, started + 1)
  expect("still waiting", th.alive?, true)
  redis.call("RL.CLOCK", "ADVANCE", 1000)
  d = th.join(30)&.value or raise Mismatch, "the waiter was not answered after RL.CLOCK ADVANCE 1000"
  expect("the waiter's reply", d, { allowed: 1, limit: 1, remaining: 0, retry_after_ms: 0,
                                     reset_after_ms: 1000, waited_ms: 1000 })
  expect("INFO ratelimit_waiting_clients", redis.info("ratelimit")["ratelimit_waiting_clients"], "0")
  waiter.close
end

redis.call("RL.CLOCK", "REAL")
puts "ruby examples: #{$passed} passed, #{$failed} failed"
exit($failed.zero? ? 0 : 1)
