import jakarta.servlet.Filter;
import jakarta.servlet.FilterChain;
import jakarta.servlet.ServletException;
import jakarta.servlet.ServletRequest;
import jakarta.servlet.ServletResponse;
import jakarta.servlet.http.HttpServletResponse;
import java.io.IOException;
import java.util.List;
import redis.clients.jedis.JedisPooled;
import redis.clients.jedis.commands.ProtocolCommand;
import redis.clients.jedis.exceptions.JedisConnectionException;
import redis.clients.jedis.util.SafeEncoder;

/**
 * Servlet filter (Jakarta Servlet 5+, Java 17) on Jedis 4.x or 5.x: per client IP, 10 at once,
 * then 5 per second.
 */
public final class RateLimitFilter implements Filter {
    /** RL.* are module commands: Jedis sends them as a ProtocolCommand. */
    enum RL implements ProtocolCommand {
        GCRA("RL.GCRA");

        private final byte[] raw;

        RL(String name) { raw = SafeEncoder.encode(name); }

        @Override public byte[] getRaw() { return raw; }
    }

    /** The standard reply's five fields, in order. */
    record Decision(boolean allowed, long limit, long remaining, long retryAfterMs, long resetAfterMs) {
        static Decision of(Object reply) { // RESP2 and RESP3 alike: a List of Long
            List<?> r = (List<?>) reply;
            return new Decision((Long) r.get(0) == 1, (Long) r.get(1), (Long) r.get(2),
                    (Long) r.get(3), (Long) r.get(4));
        }
    }

    // e.g. new JedisPooled(new HostAndPort("127.0.0.1", 6379),
    //          DefaultJedisClientConfig.builder().socketTimeoutMillis(50).build())
    private final JedisPooled jedis;

    public RateLimitFilter(JedisPooled jedis) { this.jedis = jedis; }

    @Override
    public void doFilter(ServletRequest req, ServletResponse res, FilterChain chain)
            throws IOException, ServletException {
        String key = "rl:ip:" + req.getRemoteAddr();
        Decision d;
        try {
            // sendCommand(sampleKey, ...) also routes by the key on a JedisCluster
            d = Decision.of(jedis.sendCommand(key, RL.GCRA, key, "10", "5", "1000"));
        } catch (JedisConnectionException e) { // Redis down or slow: fail open
            chain.doFilter(req, res);
            return;
        }
        HttpServletResponse http = (HttpServletResponse) res;
        http.setHeader("RateLimit-Limit", Long.toString(d.limit()));
        http.setHeader("RateLimit-Remaining", Long.toString(d.remaining()));
        if (!d.allowed()) {
            http.setHeader("Retry-After", Long.toString((d.retryAfterMs() + 999) / 1000)); // s, rounded up
            http.setStatus(429);
            http.setContentType("text/plain");
            http.getWriter().write("Too Many Requests\n");
            return;
        }
        chain.doFilter(req, res);
    }
}
