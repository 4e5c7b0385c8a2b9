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

/** The minimal shape of a client the limiter can use when it is neither ioredis nor
 * node-redis: `send(args, key)` sends one command (args[0] is its name) and resolves to the
 * reply (integers as numbers or decimal strings, arrays as arrays). `key` routes it in a
 * cluster (undefined: any node). */
export interface CustomClient {
  send(args: string[], key: string | undefined): Promise<unknown>;
  cluster?: boolean;
  /** A cluster's primaries, for the commands every primary needs (`RL.POLICY`). Without it a
   * custom client is one node. */
  primaries?(): Promise<PrimaryNode[]> | PrimaryNode[];
  /** A new connection (or cluster client) of its own, for a call that may block in the server
   * (`WAIT`): the limiter sends one waiting call at a time on it, and closes it with
   * `close()`. Without it, waiting calls go through `send` as any other (then `send` must
   * not queue other calls behind a blocked one). */
  duplicate?(): Promise<CustomClient & { close?(): unknown }> | (CustomClient & { close?(): unknown });
}

/** A connection of its own for a call that may block in the server (`WAIT ms`): the limiter
 * sends at most one command at a time on it (a blocked command holds it until answered). */
export interface WaitConnection {
  send(args: string[], key: string | undefined): Promise<unknown>;
  /** Still connected (else the pool drops it instead of reusing it). */
  healthy(): boolean;
  /** Closes it (the server drops a call still blocked on it: nothing is spent). */
  close(): void;
}

/** One primary of the server or cluster: its name (`"host:port"`) and a way to send it a
 * command. */
export interface PrimaryNode {
  name: string;
  send(args: string[]): Promise<unknown>;
}

export type ClientKind = 'ioredis' | 'ioredis-cluster' | 'node-redis' | 'node-redis-cluster' | 'custom';

export interface Adapter {
  readonly kind: ClientKind;
  readonly cluster: boolean;
  /** Whether `exact` replies keep integers beyond 2^53 exact. */
  readonly exactIntegers: boolean;
  /** Sends args (args[0] = command). `key` routes in a cluster; `exact` decodes integers as
   * strings; `readonly` lets a cluster client read from a replica if it is set up to. */
  send(args: string[], key: string | undefined, opts?: { exact?: boolean; readonly?: boolean }): Promise<unknown>;
  /** Every primary (one on a single server), for the commands that have no key and must
   * reach each of them (`RL.POLICY`: policies are per node). */
  primaries(): Promise<PrimaryNode[]>;
  /** Opens a connection of its own (a duplicate of the application's client, with the same
   * options but no command or socket timeout, and no reconnection) for one waiting call at a
   * time; undefined when the client cannot be duplicated (a custom client without
   * `duplicate`): waiting calls then go through `send`. */
  openWait?(): Promise<WaitConnection>;
  /** Closes what the adapter itself opened (never the application's client). */
  close(): Promise<void>;
}

type AnyFn = (...args: any[]) => any;
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Loose = Record<string, any>;

const isFn = (v: unknown): v is AnyFn => typeof v === 'function';

/** node-redis's RESP type code of integers (':'), mapped to String for exact replies. */
const RESP_NUMBER = 58;

const address = (host: unknown, port: unknown): string => `${String(host ?? '127.0.0.1')}:${String(port ?? 6379)}`;

export function isCustomClient(c: unknown): c is CustomClient {
  return !!c && isFn((c as Loose).send) && !isFn((c as Loose).sendCommand);
}

export function createAdapter(client: unknown): Adapter {
  if (!client || typeof client !== 'object') {
    throw new TypeError('redis-ratelimit: expected an ioredis or node-redis client');
  }
  const c = client as Loose;
  if (isFn(c.call) && isFn(c.sendCommand)) return ioredisAdapter(c);
  if (isFn(c.sendCommand)) return nodeRedisAdapter(c);
  if (isCustomClient(c)) {
    return {
      kind: 'custom',
      cluster: !!c.cluster,
      exactIntegers: true,
      send: (args, key) => c.send(args, key),
      ...(isFn(c.duplicate) ? {
        async openWait(): Promise<WaitConnection> {
          const d = await (c.duplicate as () => unknown)() as Loose;
          let open = true;
          return {
            send: (args, key) => d.send(args, key),
            healthy: () => open && (!isFn(d.healthy) || d.healthy()),
            close: () => { open = false; if (isFn(d.close)) Promise.resolve(d.close()).catch(() => {}); },
          };
        },
      } : {}),
      async primaries() {
        if (isFn(c.primaries)) return c.primaries();
        return [{ name: 'server', send: (args: string[]) => c.send(args, undefined) }];
      },
      close: async () => {},
    };
  }
  throw new TypeError('redis-ratelimit: expected an ioredis or node-redis client (or { send(args, key) })');
}

/** `target.call(...args)`, routed by `key` on an ioredis Cluster. */
function callOn(target: Loose, args: string[], key: string | undefined): Promise<unknown> {
  const [name, ...rest] = args;
  if (target.isCluster === true && key !== undefined) {
    // ioredis Cluster routes by the keys it knows from its command table, which has no
    // module commands: without help it sends them to a random node and follows the MOVED.
    // Give the command its key before it is routed, as for a built-in command.
    const routed = Object.create(target) as Loose;
    routed.sendCommand = (cmd: Loose, ...more: unknown[]) => {
      if (cmd && (cmd.keys === undefined || (Array.isArray(cmd.keys) && cmd.keys.length === 0))) {
        cmd.keys = [key];
      }
      return target.sendCommand(cmd, ...more);
    };
    return routed.call(name, ...rest);
  }
  return target.call(name, ...rest);
}

function ioredisAdapter(client: Loose): Adapter {
  const cluster = client.isCluster === true;
  let exactClient: Loose | undefined = client.options?.stringNumbers ? client : undefined;
  let ownExact: Loose | undefined;
  const exact = (): Loose => {
    if (!exactClient) {
      if (cluster) {
        const redisOptions = { ...(client.options?.redisOptions ?? {}), stringNumbers: true };
        ownExact = client.duplicate(undefined, { redisOptions }) as Loose;
      } else {
        ownExact = client.duplicate({ stringNumbers: true }) as Loose;
      }
      // The application's client reports its own errors; this one fails its calls.
      ownExact.on?.('error', () => {});
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
    async openWait(): Promise<WaitConnection> {
      // No command or socket timeout (the limiter's own covers wait + timeout), no
      // reconnection and no resending after one (a lost connection is dropped by the pool:
      // the server forgot its blocked call).
      const noTimeouts = { commandTimeout: undefined, socketTimeout: undefined, autoResendUnfulfilledCommands: false };
      const d: Loose = cluster
        ? client.duplicate(undefined, { lazyConnect: true, enableAutoPipelining: false, clusterRetryStrategy: () => null,
          redisOptions: { ...(client.options?.redisOptions ?? {}), ...noTimeouts } })
        : client.duplicate({ ...noTimeouts, lazyConnect: true, retryStrategy: () => null, enableAutoPipelining: false });
      d.on?.('error', () => {});
      try {
        await d.connect();
      } catch (err) {
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
      if (!cluster) return [{ name: address(client.options?.host, client.options?.port), send: (args) => client.call(...args) }];
      const nodes: Loose[] = client.nodes('master');
      return nodes.map((n) => ({ name: address(n.options?.host, n.options?.port), send: (args: string[]) => n.call(...args) }));
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

function nodeRedisAdapter(client: Loose): Adapter {
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
      if (cluster) return client.sendCommand(key, !!opts?.readonly, args, options);
      return options ? client.sendCommand(args, options) : client.sendCommand(args);
    },
    async primaries() {
      if (!cluster) {
        const o = client.options ?? {};
        const name = o.socket?.host !== undefined || o.socket?.port !== undefined
          ? address(o.socket?.host, o.socket?.port) : (o.url ? String(o.url).replace(/^rediss?:\/\/(?:[^@/]*@)?/, '').replace(/\/.*$/, '') : 'server');
        return [{ name, send: (args) => client.sendCommand(args) }];
      }
      const masters: Loose[] = client.masters ?? client.getMasters();
      return Promise.all(masters.map(async (m) => {
        const node = await client.nodeClient(m);
        return { name: m.address ?? address(m.host, m.port), send: (args: string[]) => node.sendCommand(args) };
      }));
    },
    async openWait(): Promise<WaitConnection> {
      // Same options, without the socket idle timeout and command timeout (the limiter's own
      // covers wait + timeout) and without reconnection (a lost connection is dropped by the
      // pool: the server forgot its blocked call).
      let d: Loose;
      if (cluster) {
        d = client.duplicate();
      } else {
        const o: Loose = client.options ?? {};
        const overrides: Loose = { socket: { ...(o.socket ?? {}), socketTimeout: undefined, reconnectStrategy: false } };
        const co: Loose | undefined = client._commandOptions;
        if (co && co.timeout !== undefined) overrides.commandOptions = { ...co, timeout: undefined };
        d = client.duplicate(overrides);
      }
      d.on?.('error', () => {});
      try {
        await d.connect();
      } catch (err) {
        try { await d.disconnect?.(); } catch { /* not connected */ }
        throw err;
      }
      return {
        send: (args, key) => (cluster ? d.sendCommand(key, false, args) : d.sendCommand(args)),
        healthy: () => d.isReady !== false,
        close: () => { Promise.resolve().then(() => (isFn(d.destroy) ? d.destroy() : d.disconnect())).catch(() => {}); },
      };
    },
    async close() {},
  };
}
