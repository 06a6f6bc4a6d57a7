/**
 * The HTTP side of the tests' fake Messages APIs (fake-labeler.ts, fake-explainer.ts): a server on
 * loopback that reads each request's body and hands it to the fake's `answer`, counting requests
 * in flight (the peak is what a concurrency test reads). `close` clears the fake's pending timers
 * (answers delayed to model latency) and drops open connections.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface MessagesServer {
  readonly url: string;
  readonly inFlight: number;
  readonly peakInFlight: number;
  close(): Promise<void>;
}

export async function listenMessagesServer(
  answer: (req: IncomingMessage, res: ServerResponse, raw: string) => void,
  timers: Set<NodeJS.Timeout>,
): Promise<MessagesServer> {
  let inFlight = 0;
  let peakInFlight = 0;
  const server = createServer((req, res) => {
    inFlight++;
    peakInFlight = Math.max(peakInFlight, inFlight);
    res.on('close', () => inFlight--);
    let raw = '';
    req.on('data', (chunk: Buffer) => (raw += chunk.toString('utf8')));
    req.on('end', () => answer(req, res, raw));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    get inFlight() {
      return inFlight;
    },
    get peakInFlight() {
      return peakInFlight;
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const timer of timers) clearTimeout(timer);
        timers.clear();
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
