"use strict";
// Sending a command through whichever client the application already has: ioredis (Redis or
// Cluster, v5 and v6) or node-redis (createClient / createCluster, v4 to v6). Nothing is
// imported from them: the client is recognised by its methods. Every argument goes out as a
// string (node-redis's sendCommand throws on numbers).
//
// Exact integers: RL.INFO's `tat_ns` and `*_us` fields are above 2^53, where a JavaScript
// number rounds. The reply must therefore be decoded as strings:
//  - node-redis v5+: the call passes the type mapping NUMBER -> String (per command, same
//    connection);
//  - ioredis: its decoder makes every integer a number unless the connection was created with
//    `stringNumbers: true`; for such calls the adapter uses the client itself if it has that
//    option, else one duplicate connection with it, created on the first such call and closed
//    by `close()`;
//  - node-redis v4: its RESP2 decoder computes integers in doubles whatever the options, so
//    those fields are exact only up to 2^53 there (`exactIntegers` is false).
Object.defineProperty(exports, "__esModule", { value: true });
exports.isCustomClient = isCustomClient;
exports.createAdapter = createAdapter;
const isFn = (v) => typeof v === 'function';
/** node-redis's RESP type code of integers (':'), mapped to String for exact replies. */
const RESP_NUMBER = 58;
const address = (host, port) => `${String(host ?? '127.0.0.1')}:${String(port ?? 6379)}`;
function isCustomClient(c) {
    return !!c && isFn(c.send) && !isFn(c.sendCommand);
}
function createAdapter(client) {
    if (!client || typeof client !== 'object') {
        throw new TypeError('redis-ratelimit: expected an ioredis or node-redis client');
    }
    const c = client;
    if (isFn(c.call) && isFn(c.sendCommand))
        return ioredisAdapter(c);
    if (isFn(c.sendCommand))
        return nodeRedisAdapter(c);
    if (isCustomClient(c)) {
        return {
            kind: 'custom',
            cluster: !!c.cluster,
            exactIntegers: true,
            send: (args, key) => c.send(args, key),
            ...(isFn(c.duplicate) ? {
                async openWait() {
                    const d = await c.duplicate();
                    let open = true;
                    return {
                        send: (args, key) => d.send(args, key),
                        healthy: () => open && (!isFn(d.healthy) || d.healthy()),
                        close: () => { open = false; if (isFn(d.close))
                            Promise.resolve(d.close()).catch(() => { }); },
                    };
                },
            } : {}),
            async primaries() {
                if (isFn(c.primaries))
                    return c.primaries();
                return [{ name: 'server', send: (args) => c.send(args, undefined) }];
            },
            close: async () => { },
        };
    }
    throw new TypeError('redis-ratelimit: expected an ioredis or node-redis client (or { send(args, key) })');
}
/** `target.call(...args)`, routed by `key` on an ioredis Cluster. */
function callOn(target, args, key) {
    const [name, ...rest] = args;
    if (target.isCluster === true && key !== undefined) {
        // ioredis Cluster routes by the keys it knows from its command table, which has no
        // module commands: without help it sends them to a random node and follows the MOVED.
        // Give the command its key before it is routed, as for a built-in command.
        const routed = Object.create(target);
        routed.sendCommand = (cmd, ...more) => {
            if (cmd && (cmd.keys === undefined || (Array.isArray(cmd.keys) && cmd.keys.length === 0))) {
                cmd.keys = [key];
            }
            return target.sendCommand(cmd, ...more);
        };
        return routed.call(name, ...rest);
    }
    return target.call(name, ...rest);
}
function ioredisAdapter(client) {
    const cluster = client.isCluster === true;
    let exactClient = client.options?.stringNumbers ? client : undefined;
    let ownExact;
    const exact = () => {
        if (!exactClient) {
            if (cluster) {
                const redisOptions = { ...(client.options?.redisOptions ?? {}), stringNumbers: true };
                ownExact = client.duplicate(undefined, { redisOptions });
            }
            else {
                ownExact = client.duplicate({ stringNumbers: true });
            }
            // The application's client reports its own errors; this one fails its calls.
            ownExact.on?.('error', () => { });
            exactClient = ownExact;
        }
        return exactClient;
    };
    return {
        kind: cluster ? 'ioredis-cluster' : 'ioredis',
        cluster,
        exactIntegers: true,
        send(args, key, opts) {
            return callOn(opts?.exact ? exact() : client, args, key);
        },
        async openWait() {
            // No command or socket timeout (the limiter's own covers wait + timeout), no
            // reconnection and no resending after one (a lost connection is dropped by the pool:
            // the server forgot its blocked call).
            const noTimeouts = { commandTimeout: undefined, socketTimeout: undefined, autoResendUnfulfilledCommands: false };
            const d = cluster
                ? client.duplicate(undefined, { lazyConnect: true, enableAutoPipelining: false, clusterRetryStrategy: () => null,
                    redisOptions: { ...(client.options?.redisOptions ?? {}), ...noTimeouts } })
                : client.duplicate({ ...noTimeouts, lazyConnect: true, retryStrategy: () => null, enableAutoPipelining: false });
            d.on?.('error', () => { });
            try {
                await d.connect();
            }
            catch (err) {
                d.disconnect();
                throw err;
            }
            return {
                send: (args, key) => callOn(d, args, key),
                healthy: () => d.status === 'ready',
                close: () => d.disconnect(),
            };
        },
        async primaries() {
            if (!cluster)
                return [{ name: address(client.options?.host, client.options?.port), send: (args) => client.call(...args) }];
            const nodes = client.nodes('master');
            return nodes.map((n) => ({ name: address(n.options?.host, n.options?.port), send: (args) => n.call(...args) }));
        },
        async close() {
            if (ownExact) {
                const c = ownExact;
                ownExact = undefined;
                exactClient = client.options?.stringNumbers ? client : undefined;
                c.disconnect();
            }
        },
    };
}
function nodeRedisAdapter(client) {
    const cluster = isFn(client.getSlotMaster);
    // node-redis v5 and later decode through type mappings (v4 has none).
    const mapping = isFn(client.withTypeMapping);
    const exactOptions = mapping ? { typeMapping: { [RESP_NUMBER]: String } } : undefined;
    return {
        kind: cluster ? 'node-redis-cluster' : 'node-redis',
        cluster,
        exactIntegers: mapping,
        send(args, key, opts) {
            const options = opts?.exact ? exactOptions : undefined;
            if (cluster)
                return client.sendCommand(key, !!opts?.readonly, args, options);
            return options ? client.sendCommand(args, options) : client.sendCommand(args);
        },
        async primaries() {
            if (!cluster) {
                const o = client.options ?? {};
                const name = o.socket?.host !== undefined || o.socket?.port !== undefined
                    ? address(o.socket?.host, o.socket?.port) : (o.url ? String(o.url).replace(/^rediss?:\/\/(?:[^@/]*@)?/, '').replace(/\/.*$/, '') : 'server');
                return [{ name, send: (args) => client.sendCommand(args) }];
            }
            const masters = client.masters ?? client.getMasters();
            return Promise.all(masters.map(async (m) => {
                const node = await client.nodeClient(m);
                return { name: m.address ?? address(m.host, m.port), send: (args) => node.sendCommand(args) };
            }));
        },
        async openWait() {
            // Same options, without the socket idle timeout and command timeout (the limiter's own
            // covers wait + timeout) and without reconnection (a lost connection is dropped by the
            // pool: the server forgot its blocked call).
            let d;
            if (cluster) {
                d = client.duplicate();
            }
            else {
                const o = client.options ?? {};
                const overrides = { socket: { ...(o.socket ?? {}), socketTimeout: undefined, reconnectStrategy: false } };
                const co = client._commandOptions;
                if (co && co.timeout !== undefined)
                    overrides.commandOptions = { ...co, timeout: undefined };
                d = client.duplicate(overrides);
            }
            d.on?.('error', () => { });
            try {
                await d.connect();
            }
            catch (err) {
                try {
                    await d.disconnect?.();
                }
                catch { /* not connected */ }
                throw err;
            }
            return {
                send: (args, key) => (cluster ? d.sendCommand(key, false, args) : d.sendCommand(args)),
                healthy: () => d.isReady !== false,
                close: () => { Promise.resolve().then(() => (isFn(d.destroy) ? d.destroy() : d.disconnect())).catch(() => { }); },
            };
        },
        async close() { },
    };
}
