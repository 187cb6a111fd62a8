#!/usr/bin/env python3
"""ChasquiMQ's stand-in in `scripts/bench --short` when the driver (src/main.rs) is not built:
building it takes minutes on a cold cache, and the short mode checks the tool, not speed.

It takes the driver's arguments and prints the driver's JSON lines (tests/bench/driver.rs reads
them), so every ChasquiMQ path of the tool runs, and it sends the requests the patched
ChasquiMQ 1.3.0 sends on Valkey per job (valkey.patch; seen with MONITOR from the driver), as
plain commands, so the server is checked to take them:
  producer   XADD {chasqui:<q>}:stream MAXLEN ~ 1000000 * d <job>
  consumer   XGROUP CREATE <stream> default 0 MKSTREAM at its start, then
             XREADGROUP GROUP default <consumer> COUNT 256 BLOCK 5000 STREAMS <stream> >
             per job (events on) XADD {chasqui:<q>}:events MAXLEN ~ 100000 * e active|completed …
             per batch XACK <stream> default <ids…> + XDEL <stream> <ids…> in one pipeline
What it does not do, and the driver does: run ChasquiMQ's own code (its Producer, Consumer and
their connection pool), its delayed-job promoter and scheduler (their locks and Lua scripts),
and run 50 tasks at once: here one connection takes the jobs in turn. Its figures are its own.
"""
import json
import socket
import sys
import time

QUEUE = 'bench'
STREAM = '{chasqui:%s}:stream' % QUEUE
EVENTS = '{chasqui:%s}:events' % QUEUE
GROUP = 'default'
CONSUMER = 'c-standin'
# ChasquiMQ's job as its producer encodes it (msgpack: id, payload, created, attempt), in size.
JOB = b'\x94\xba01STANDIN0000000000000000000\x91\xcd\x00\x00\xcf' + bytes(8) + b'\x00'


class Conn:
    def __init__(self, port):
        self.s = socket.create_connection(('127.0.0.1', port))
        self.s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.f = self.s.makefile('rb')

    def send(self, cmds):
        out = []
        for a in cmds:
            out.append(b'*%d\r\n' % len(a))
            for x in a:
                x = x if isinstance(x, bytes) else str(x).encode()
                out.append(b'$%d\r\n%s\r\n' % (len(x), x))
        self.s.sendall(b''.join(out))

    def reply(self):
        line = self.f.readline()
        if not line:
            raise RuntimeError('the server closed the connection')
        kind, rest = line[:1], line[1:-2]
        if kind == b'+':
            return rest.decode()
        if kind == b'-':
            raise RuntimeError(rest.decode())
        if kind == b':':
            return int(rest)
        if kind == b'$':
            n = int(rest)
            return None if n < 0 else self.f.read(n + 2)[:-2]
        if kind == b'*':
            n = int(rest)
            return None if n < 0 else [self.reply() for _ in range(n)]
        raise RuntimeError('bad reply line %r' % line)

    def pipe(self, cmds):
        self.send(cmds)
        return [self.reply() for _ in cmds]

    def call(self, *a):
        return self.pipe([a])[0]

    def info(self, section, field):
        for l in self.call('INFO', section).decode().splitlines():
            if l.startswith(field + ':'):
                return float(l.split(':', 1)[1])
        return float('nan')

    def cpu_us(self):
        return (self.info('cpu', 'used_cpu_sys') + self.info('cpu', 'used_cpu_user')) * 1e6


def parse(argv):
    o = {'port': 0, 'n': 10000, 'mem': 100000, 'conns': 50, 'batch': 32, 'deadline': 120.0,
         'only': [], 'events': True, 'replica': None}
    it = iter(argv)
    for k in it:
        v = next(it, None)
        if v is None:
            raise ValueError('%s needs a value' % k)

        def num():
            if not v.isdigit():
                raise ValueError('%s: not a number: %s' % (k, v))
            return int(v)

        if k == '--port': o['port'] = num()
        elif k == '--n': o['n'] = num()
        elif k == '--mem': o['mem'] = num()
        elif k == '--conns': o['conns'] = max(num(), 1)
        elif k == '--batch': o['batch'] = max(num(), 1)
        elif k == '--deadline-s': o['deadline'] = float(max(num(), 1))
        elif k == '--only': o['only'] = v.split(',')
        elif k == '--events': o['events'] = v != 'off'
        elif k == '--replica-port': o['replica'] = num()
        else: raise ValueError('unknown argument %s' % k)
    if not o['port']:
        raise ValueError('--port is required')
    return o


class Cx:
    def __init__(self, o):
        self.o = o
        self.ctl = Conn(o['port'])
        self.rep = Conn(o['replica']) if o['replica'] else None
        self.epoch = time.monotonic()

    def us(self):
        return int((time.monotonic() - self.epoch) * 1e6)

    def synced(self):
        if not self.rep:
            return
        t0 = time.monotonic()
        while True:
            p = self.ctl.info('replication', 'master_repl_offset')
            r = self.rep.info('replication', 'master_repl_offset')
            if r >= p:
                return
            if time.monotonic() - t0 > 60:
                raise RuntimeError('the replica did not catch up (offset %s of %s)' % (r, p))
            time.sleep(0.001)

    def fresh(self):
        self.ctl.call('FLUSHALL', 'SYNC')
        self.synced()

    def cpu(self):
        return (self.ctl.cpu_us(), self.rep.cpu_us() if self.rep else None)

    def cpu_end(self):
        self.synced()
        return self.cpu()

    def deadline(self, t0, what):
        if time.monotonic() - t0 > self.o['deadline']:
            raise RuntimeError('%s: ran past its time limit' % what)


def add(n):
    return [('XADD', STREAM, 'MAXLEN', '~', 1000000, '*', 'd', JOB) for _ in range(n)]


def percentile(lat, p):
    if not lat:
        return None
    lat = sorted(lat)
    rank = max(1, min(len(lat), -(-len(lat) * p // 100)))
    return lat[int(rank) - 1]


def figure(workload, mode, jobs, secs, c0, c1, lat):
    return {'workload': workload, 'mode': mode, 'jobs': jobs, 'seconds': secs, 'cpu_us': c1[0] - c0[0],
            'replica_cpu_us': c1[1] - c0[1] if c0[1] is not None and c1[1] is not None else None,
            'p50_us': percentile(lat, 50) if lat else None, 'p99_us': percentile(lat, 99) if lat else None}


def enqueue(cx, mode):
    cx.fresh()
    n = cx.o['n']
    step = 1 if mode == 'c50' else cx.o['batch']
    lat = []
    c0, t0 = cx.cpu(), time.monotonic()
    left = n
    while left:
        cx.deadline(t0, 'enqueue %s' % mode)
        m = min(step, left)
        s = time.monotonic()
        cx.ctl.pipe(add(m))
        lat += [int((time.monotonic() - s) * 1e6)] * m
        left -= m
    secs = time.monotonic() - t0
    c1 = cx.cpu_end()
    length = cx.ctl.call('XLEN', STREAM)
    if length != n:
        raise RuntimeError('enqueue %s: the stream holds %d entries, expected %d' % (mode, length, n))
    if mode == 'bulk':
        return figure('bulk add', 'add_bulk %d' % cx.o['batch'], n, secs, c0, c1, lat)
    return figure('enqueue', mode, n, secs, c0, c1, lat)


# The lifecycle's add times (µs on the epoch) by entry id: the driver carries them in the job.
ADDED = {}


def consume(cx, lat):
    """One read of the group, its jobs handled (events on: `active`, then `completed`) and
    acked and deleted in one pipeline. With `lat`, each job's add → handled time goes in it.
    Returns how many jobs it handled."""
    got = cx.ctl.call('XREADGROUP', 'GROUP', GROUP, CONSUMER, 'COUNT', 256, 'BLOCK', 5000, 'STREAMS', STREAM, '>')
    if not got:
        return 0
    ids = [e[0] for e in got[0][1]]
    now = int(time.time() * 1000)
    ev = []
    if cx.o['events']:
        for i in ids:
            ev.append(('XADD', EVENTS, 'MAXLEN', '~', 100000, '*', 'e', 'active', 'id', i, 'ts', now, 'attempt', 1))
            ev.append(('XADD', EVENTS, 'MAXLEN', '~', 100000, '*', 'e', 'completed', 'id', i, 'ts', now,
                       'attempt', 1, 'duration_us', 0))
    if lat is not None:
        t = cx.us()
        lat.extend(t - ADDED.pop(i, t) for i in ids)
    cx.ctl.pipe(ev + [('XACK', STREAM, GROUP, *ids), ('XDEL', STREAM, *ids)])
    return len(ids)


def process(cx):
    cx.fresh()
    n = cx.o['n']
    left = n
    while left:
        m = min(left, 1000)
        cx.ctl.pipe(add(m))
        left -= m
    cx.synced()
    c0, t0 = cx.cpu(), time.monotonic()
    cx.ctl.call('XGROUP', 'CREATE', STREAM, GROUP, 0, 'MKSTREAM')
    done = 0
    while done < n or cx.ctl.call('XLEN', STREAM) != 0:
        cx.deadline(t0, 'process')
        done += consume(cx, None)
    secs = time.monotonic() - t0
    c1 = cx.cpu_end()
    return figure('claim+complete', 'p32', n, secs, c0, c1, None)


def lifecycle(cx):
    cx.fresh()
    n = cx.o['n']
    cx.ctl.call('XGROUP', 'CREATE', STREAM, GROUP, 0, 'MKSTREAM')
    cx.synced()
    lat = []
    c0, t0 = cx.cpu(), time.monotonic()
    left, done = n, 0
    while left or done < n or cx.ctl.call('XLEN', STREAM) != 0:
        cx.deadline(t0, 'lifecycle')
        if left:
            m = min(cx.o['batch'], left)
            t = cx.us()
            for i in cx.ctl.pipe(add(m)):
                ADDED[i] = t
            left -= m
        done += consume(cx, lat)
    secs = time.monotonic() - t0
    c1 = cx.cpu_end()
    return figure('lifecycle', 'p32', n, secs, c0, c1, lat)


def memory(cx):
    cx.fresh()
    m0 = cx.ctl.info('memory', 'used_memory')
    left = cx.o['mem']
    while left:
        m = min(left, 1000)
        cx.ctl.pipe(add(m))
        left -= m
    m1 = cx.ctl.info('memory', 'used_memory')
    return {'workload': 'memory', 'jobs': cx.o['mem'], 'bytes': m1 - m0}


def main():
    try:
        o = parse(sys.argv[1:])
        cx = Cx(o)
    except (ValueError, OSError) as e:
        print(json.dumps({'error': str(e)}), flush=True)
        sys.exit(2 if isinstance(e, ValueError) else 1)
    wanted = lambda w: not o['only'] or w in o['only']
    steps = [w for w in ('enqueue', 'process', 'lifecycle', 'memory') if wanted(w)]
    # The bulk add runs only when asked for by name, as in the driver.
    if 'bulk' in o['only']:
        steps = [w for w in steps if w in o['only']] + ['bulk']
    runs = {'enqueue': [lambda: enqueue(cx, 'c50'), lambda: enqueue(cx, 'p32')], 'process': [lambda: process(cx)],
            'lifecycle': [lambda: lifecycle(cx)], 'memory': [lambda: memory(cx)], 'bulk': [lambda: enqueue(cx, 'bulk')]}
    failed = False
    for step in steps:
        for run in runs[step]:
            try:
                v = run()
                print('chasquimq stand-in: %s %s done' % (v['workload'], v.get('mode', '')), file=sys.stderr)
                print(json.dumps(v), flush=True)
            except (RuntimeError, OSError) as e:
                failed = True
                print(json.dumps({'error': str(e)}), flush=True)
    try:
        cx.fresh()
    except (RuntimeError, OSError):
        pass
    sys.exit(1 if failed else 0)


if __name__ == '__main__':
    main()
