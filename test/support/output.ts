/**
 * What a process writes: the handlers' log lines (Powertools' Logger writes JSON lines to
 * stdout and stderr through a console of its own, not the global one, so tests read the
 * streams), and the Lambda worker threads' output, which Node forwards to the main thread's.
 */

export interface OutputCapture {
  /** Everything written to stdout and stderr since the capture began. */
  text(): string;
  restore(): void;
}

/**
 * Records what this process writes to stdout and stderr (console calls, and the output of the
 * Lambda worker threads, which Node forwards to the main thread's streams), still passing it on.
 */
export function captureOutput(): OutputCapture {
  const chunks: string[] = [];
  const streams = [process.stdout, process.stderr];
  const originals = streams.map((stream) => stream.write);
  streams.forEach((stream, i) => {
    const original = originals[i]!;
    stream.write = function (this: NodeJS.WriteStream, chunk: unknown, ...rest: unknown[]) {
      chunks.push(typeof chunk === 'string' ? chunk : Buffer.from(chunk as Uint8Array).toString('utf8'));
      return (original as (...args: unknown[]) => boolean).call(this, chunk, ...rest);
    } as typeof stream.write;
  });
  return {
    text: () => chunks.join(''),
    restore: () =>
      streams.forEach((stream, i) => {
        stream.write = originals[i]!;
      }),
  };
}

/** One log line as the Logger writes it: JSON with `message` and `level`, the keys and the fields. */
export type LogLine = Record<string, unknown> & { message: string; level: string };

/**
 * The JSON log lines in captured text, in order. Other output is skipped, also where it runs into
 * a log line (the test runner's own messages in a test file's process have no line ends); the
 * Logger writes `level` first.
 */
export function logLines(text: string): LogLine[] {
  const lines: LogLine[] = [];
  for (const line of text.split('\n')) {
    const start = line.indexOf('{"level":');
    if (start < 0) continue;
    try {
      const parsed = JSON.parse(line.slice(start)) as unknown;
      if (parsed && typeof parsed === 'object' && typeof (parsed as LogLine).message === 'string' && typeof (parsed as LogLine).level === 'string')
        lines.push(parsed as LogLine);
    } catch {
      // Not a whole JSON line (another writer's output): skipped.
    }
  }
  return lines;
}
