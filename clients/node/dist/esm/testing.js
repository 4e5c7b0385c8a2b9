// Tests without mocks: a real redis-server with the module, on a free 127.0.0.1 port, for
// your own tests (and this package's).
//
//   import { startServer } from 'redis-ratelimit-module/testing';
//   const server = await startServer();                    // finds redis-server and the module
//   const redis = new Redis(server.port);                  // your client, your app
//   await server.clock.set(1_900_000_000_000);             // the module's test clock
//   await server.clock.advance(60_000);                    // a minute passes, no sleep
//   await server.stop();
//
// The module is loaded with `test-clock yes` (RL.CLOCK), persistence off, in a temporary
// directory removed by stop().
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
const MODULE_FILE = 'libredis_ratelimit.so';
function onPath(name) {
    for (const dir of (process.env.PATH ?? '').split(path.delimiter)) {
        if (!dir)
            continue;
        const p = path.join(dir, name);
        try {
            fs.accessSync(p, fs.constants.X_OK);
            return p;
        }
        catch { /* next */ }
    }
    return undefined;
}
/** The module's path (see `StartServerOptions.module`); an Error saying where it looked. */
export function findModule(explicit) {
    const tried = [];
    const candidates = [explicit, process.env.REDIS_RATELIMIT_MODULE, process.env.RL_MODULE].filter((x) => !!x);
    if (candidates.length) {
        const p = path.resolve(candidates[0]);
        if (fs.existsSync(p))
            return p;
        throw new Error(`redis-ratelimit testing: the module ${p} does not exist (from ${explicit ? 'the module option' : process.env.REDIS_RATELIMIT_MODULE ? 'REDIS_RATELIMIT_MODULE' : 'RL_MODULE'})`);
    }
    for (let dir = process.cwd();; dir = path.dirname(dir)) {
        const p = path.join(dir, 'target', 'release', MODULE_FILE);
        tried.push(p);
        if (fs.existsSync(p))
            return p;
        if (path.dirname(dir) === dir)
            break;
    }
    for (const p of [path.join('/usr/lib/redis/modules', MODULE_FILE), path.join('/usr/local/lib', MODULE_FILE)]) {
        tried.push(p);
        if (fs.existsSync(p))
            return p;
    }
    throw new Error(`redis-ratelimit testing: the module (${MODULE_FILE}) was not found; give startServer({ module }) or set REDIS_RATELIMIT_MODULE (looked at ${tried.join(', ')})`);
}
/** The server binary (see `StartServerOptions.redisServer`); an Error when none is found. */
export function findServer(explicit) {
    const given = explicit ?? process.env.REDIS_SERVER ?? process.env.RL_SERVER;
    if (given) {
        const p = given.includes(path.sep) ? given : onPath(given);
        if (p && fs.existsSync(p))
            return p;
        throw new Error(`redis-ratelimit testing: the server ${given} was not found`);
    }
    const p = onPath('redis-server') ?? onPath('valkey-server');
    if (p)
        return p;
    throw new Error('redis-ratelimit testing: redis-server was not found on the PATH; install it (Debian: apt-get install redis-server), or give startServer({ redisServer }) or REDIS_SERVER');
}
/** Parses one RESP2 reply from buf at i: [reply, next index], or undefined if incomplete. */
function parse(buf, i) {
    const eol = buf.indexOf('\r\n', i);
    if (eol < 0)
        return undefined;
    const line = buf.toString('utf8', i + 1, eol);
    const next = eol + 2;
    switch (String.fromCharCode(buf[i])) {
        case '+': return [line, next];
        case '-': return [new Error(line), next];
        case ':': {
            const n = Number(line);
            return [Number.isSafeInteger(n) ? n : line, next];
        }
        case '$': {
            const len = Number(line);
            if (len < 0)
                return [null, next];
            if (buf.length < next + len + 2)
                return undefined;
            return [buf.toString('utf8', next, next + len), next + len + 2];
        }
        case '*': {
            const len = Number(line);
            if (len < 0)
                return [null, next];
            const out = [];
            let j = next;
            for (let k = 0; k < len; k++) {
                const r = parse(buf, j);
                if (!r)
                    return undefined;
                out.push(r[0]);
                j = r[1];
            }
            return [out, j];
        }
        default: throw new Error(`redis-ratelimit testing: unexpected reply ${JSON.stringify(buf.toString('utf8', i, eol))}`);
    }
}
function encode(args) {
    return `*${args.length}\r\n${args.map((a) => { const s = String(a); return `$${Buffer.byteLength(s)}\r\n${s}\r\n`; }).join('')}`;
}
/** One command to 127.0.0.1:port on a connection of its own. */
export function sendCommand(port, args, timeoutMs = 5000) {
    return new Promise((resolve, reject) => {
        const sock = net.connect(port, '127.0.0.1');
        let buf = Buffer.alloc(0);
        const fail = (err) => { sock.destroy(); reject(err); };
        sock.setTimeout(timeoutMs, () => fail(new Error(`redis-ratelimit testing: no reply from ${port} within ${timeoutMs} ms`)));
        sock.on('error', fail);
        sock.on('connect', () => sock.write(encode(args)));
        sock.on('data', (d) => {
            buf = Buffer.concat([buf, d]);
            let r;
            try {
                r = parse(buf, 0);
            }
            catch (err) {
                fail(err);
                return;
            }
            if (!r)
                return;
            sock.destroy();
            if (r[0] instanceof Error)
                reject(r[0]);
            else
                resolve(r[0]);
        });
    });
}
function freePort() {
    return new Promise((resolve, reject) => {
        const s = net.createServer();
        s.on('error', reject);
        s.listen(0, '127.0.0.1', () => {
            const { port } = s.address();
            s.close(() => resolve(port));
        });
    });
}
const sleep = (ms) => new Promise((r) => { setTimeout(r, ms); });
class PortTaken extends Error {
}
/** Starts redis-server with the module on a free 127.0.0.1 port (see the top of this file). */
export async function startServer(o = {}) {
    const module = findModule(o.module);
    const redisServer = findServer(o.redisServer);
    for (let attempt = 0;; attempt++) {
        try {
            return await startOn(o, module, redisServer, o.port ?? await freePort());
        }
        catch (err) {
            // another process took the port between freePort() and the bind: another one
            if (!(err instanceof PortTaken) || o.port !== undefined || attempt >= 9)
                throw err;
        }
    }
}
async function startOn(o, module, redisServer, port) {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'redis-ratelimit-test-'));
    const log = path.join(dir, 'redis.log');
    const moduleArgs = [...(o.testClock === false ? [] : ['test-clock', 'yes']), ...(o.moduleArgs ?? [])];
    const proc = spawn(redisServer, ['--port', String(port), '--bind', '127.0.0.1', '--save', '',
        '--appendonly', 'no', '--dir', dir, '--logfile', log, ...(o.args ?? []), '--loadmodule', module, ...moduleArgs], { stdio: 'ignore' });
    let exited = false;
    proc.once('exit', () => { exited = true; });
    proc.once('error', () => { exited = true; });
    const stop = async () => {
        if (!exited) {
            const gone = new Promise((r) => proc.once('exit', r));
            proc.kill('SIGTERM');
            await gone;
        }
        fs.rmSync(dir, { recursive: true, force: true });
    };
    const deadline = Date.now() + (o.startTimeoutMs ?? 10_000);
    for (;;) {
        let dirReply;
        try {
            dirReply = await sendCommand(port, ['CONFIG', 'GET', 'dir'], 1000);
        }
        catch {
            dirReply = undefined;
        }
        if (Array.isArray(dirReply)) {
            if (dirReply[1] === fs.realpathSync(dir))
                break;
            await stop();
            throw new PortTaken(`another server answered on ${port}`);
        }
        if (exited || Date.now() > deadline) {
            const text = fs.existsSync(log) ? fs.readFileSync(log, 'utf8').slice(-2000) : '';
            await stop();
            throw new Error(`redis-ratelimit testing: ${redisServer} did not start on ${port} with ${module}: ${text}`);
        }
        await sleep(20);
    }
    const command = (...args) => sendCommand(port, args);
    return {
        host: '127.0.0.1',
        port,
        url: `redis://127.0.0.1:${port}`,
        dir,
        module,
        redisServer,
        command,
        clock: {
            set: (ms) => command('RL.CLOCK', 'SET', ms),
            advance: (ms) => command('RL.CLOCK', 'ADVANCE', ms),
            get: async () => Number(await command('RL.CLOCK', 'GET')),
        },
        flush: async () => { await command('FLUSHALL'); },
        stop,
    };
}
