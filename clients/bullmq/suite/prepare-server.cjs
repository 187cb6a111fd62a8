// Waits for the suite's server, empties it and, unless in reference mode, installs the
// module's fence: node prepare-server.cjs <port> [reference]
const { Redis } = require('ioredis');

(async () => {
  const port = Number(process.argv[2]);
  const reference = process.argv[3] === 'reference';
  for (let i = 0; i < 100; i++) {
    const c = new Redis({
      host: '127.0.0.1',
      port,
      lazyConnect: true,
      maxRetriesPerRequest: 0,
      retryStrategy: () => null,
    });
    c.on('error', () => undefined);
    try {
      await c.connect();
      await c.flushall();
      if (!reference) {
        await c.call('EMQ.INSTALL', 1, '{emq}:version');
      }
      c.disconnect();
      return;
    } catch (err) {
      c.disconnect();
      if (i === 99) throw err;
      await new Promise(r => setTimeout(r, 100));
    }
  }
})().catch(err => {
  console.error(`prepare-server: ${err.message}`);
  process.exit(1);
});
