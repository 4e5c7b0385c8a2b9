// Connections for calls that may block in the server (`WAIT ms`).
//
// ioredis and node-redis multiplex one connection: a command the server blocks (as it blocks
// BLPOP) holds every command queued behind it on that connection. So a waiting call never
// goes on the application's client: it takes a connection of its own from this pool (a
// duplicate of the client: same server, options and credentials), one call at a time, and
// gives it back when answered. At most `max` such connections are open; a waiting call
// beyond them waits here for one (within its own timeout). A call that times out on the
// client closes its connection (the server then drops its blocked call: nothing is spent
// unless the admission crossed on the wire).

import type { WaitConnection } from './adapter.js';

export class WaitPool {
  private readonly idle: WaitConnection[] = [];
  private readonly queue: { resolve: (c: WaitConnection) => void; reject: (e: unknown) => void }[] = [];
  private open = 0;
  private closed = false;

  constructor(private readonly factory: () => Promise<WaitConnection>, readonly max: number) {
    if (!Number.isSafeInteger(max) || max < 1) throw new RangeError('redis-ratelimit: waitConnections must be an integer >= 1');
  }

  /** Connections open now (idle or in use). */
  get size(): number { return this.open; }
  /** Idle connections. */
  get idleCount(): number { return this.idle.length; }

  acquire(): Promise<WaitConnection> {
    if (this.closed) return Promise.reject(new Error('redis-ratelimit: the limiter was closed'));
    while (this.idle.length) {
      const c = this.idle.pop()!;
      if (c.healthy()) return Promise.resolve(c);
      this.drop(c);
    }
    if (this.open < this.max) return this.create();
    return new Promise((resolve, reject) => this.queue.push({ resolve, reject }));
  }

  /** Back to the pool (`reuse`: it answered and is still connected), else closed. */
  release(c: WaitConnection, reuse: boolean): void {
    if (!reuse || this.closed || !c.healthy()) {
      this.drop(c);
      const next = this.queue.shift();
      if (next && !this.closed) this.create().then(next.resolve, next.reject);
      return;
    }
    const next = this.queue.shift();
    if (next) next.resolve(c); else this.idle.push(c);
  }

  /** Closes the idle connections now and the others when their call ends; later calls fail. */
  close(): void {
    this.closed = true;
    for (const c of this.idle.splice(0)) this.drop(c);
    for (const q of this.queue.splice(0)) q.reject(new Error('redis-ratelimit: the limiter was closed'));
  }

  private create(): Promise<WaitConnection> {
    this.open++;
    return this.factory().then((c) => {
      if (this.closed) { this.drop(c); throw new Error('redis-ratelimit: the limiter was closed'); }
      return c;
    }, (err) => {
      this.open--;
      throw err;
    });
  }

  private drop(c: WaitConnection): void {
    this.open--;
    try { c.close(); } catch { /* already closed */ }
  }
}
