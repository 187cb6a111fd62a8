// Starts two real servers for the package's tests, each on a free port bound to 127.0.0.1:
// one with the trafikey module (fence installed) and a plain one (no module), and stops both
// by their pid. TRAFIKEY_SO names the module (default: the repo's release build).
import { install, modulePath, startServer, stopServer } from './server.js';

export default async function setup({ provide }: { provide: (k: string, v: unknown) => void }) {
  const mod = await startServer(['--loadmodule', modulePath()]);
  const plain = await startServer([]);
  await install(mod.port);
  provide('port', mod.port);
  provide('plainPort', plain.port);
  return async () => {
    await stopServer(mod);
    await stopServer(plain);
  };
}

declare module 'vitest' {
  export interface ProvidedContext {
    port: number;
    plainPort: number;
  }
}
