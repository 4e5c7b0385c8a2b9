// ASP.NET Core (.NET 8, `dotnet new web`) on StackExchange.Redis 2.x: per client IP, 10 at once,
// then 5 per second.
using StackExchange.Redis;

var redis = ConnectionMultiplexer.Connect("127.0.0.1:6379,syncTimeout=50,asyncTimeout=50,abortConnect=false");
var app = WebApplication.CreateBuilder(args).Build();

app.Use(async (context, next) =>
{
    RedisKey key = $"rl:ip:{context.Connection.RemoteIpAddress}";
    RedisResult reply;
    try
    {
        // RL.GCRA key burst count period_ms; a RedisKey argument routes the call in a cluster
        reply = await redis.GetDatabase().ExecuteAsync("RL.GCRA", key, 10, 5, 1000);
    }
    catch (Exception e) when (e is RedisConnectionException or RedisTimeoutException)
    {
        await next(context); // Redis down or slow: fail open (an ERR reply still throws)
        return;
    }
    var r = ((long[])reply)!; // allowed, limit, remaining, retry_after_ms, reset_after_ms
    var (allowed, limit, remaining, retryAfterMs) = (r[0] == 1, r[1], r[2], r[3]);
    context.Response.Headers["RateLimit-Limit"] = limit.ToString();
    context.Response.Headers["RateLimit-Remaining"] = remaining.ToString();
    if (!allowed)
    {
        context.Response.Headers.RetryAfter = ((retryAfterMs + 999) / 1000).ToString(); // s, rounded up
        context.Response.StatusCode = StatusCodes.Status429TooManyRequests;
        await context.Response.WriteAsync("Too Many Requests\n");
        return;
    }
    await next(context);
});

app.MapGet("/", () => "hello\n");
app.Run();
