/** What the Python side of the suite hands over: where the servers are, whom to be. */
import { Client, Connection } from '@temporalio/client';
import { CruxEncryptionCodec, parseKeys } from './codec';

function required(name: string): string {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set: run this suite through pytest tests/ts`);
  return value;
}

export const env = {
  temporalAddress: required('TEMPORAL_ADDRESS'),
  namespace: process.env.TEMPORAL_NAMESPACE ?? 'default',
  taskQueue: required('CRUX_TASK_QUEUE'),
  encryptedTaskQueue: required('CRUX_ENCRYPTED_TASK_QUEUE'),
  apiUrl: required('CRUX_API_URL'),
  apiKey: required('CRUX_API_KEY'),
  codecKeys: required('CRUX_CODEC_KEYS'),
  canary: required('CRUX_CANARY'),
  report: required('CRUX_TS_REPORT'),
  vectors: required('CRUX_CODEC_VECTORS'),
};

/** A plain client (the default data converter) or one whose payloads are encrypted. */
export async function connect(encrypted = false): Promise<Client> {
  const connection = await Connection.connect({ address: env.temporalAddress });
  const dataConverter = encrypted
    ? { payloadCodecs: [new CruxEncryptionCodec(parseKeys(env.codecKeys))] }
    : undefined;
  return new Client({ connection, namespace: env.namespace, dataConverter });
}

/** Calls of the Crux HTTP API with this tenant's API key. */
export async function api<T = Record<string, any>>(
  method: string,
  path: string,
  body?: unknown,
): Promise<{ status: number; body: T }> {
  const response = await fetch(`${env.apiUrl}${path}`, {
    method,
    headers: {
      Authorization: `Bearer ${env.apiKey}`,
      ...(body === undefined ? {} : { 'Content-Type': 'application/json' }),
    },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  return { status: response.status, body: (text ? JSON.parse(text) : null) as T };
}

/** Retry `probe` until `done` holds (visibility and queries are eventually consistent). */
export async function eventually<T>(probe: () => Promise<T>, done: (value: T) => boolean): Promise<T> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    let value: T | undefined;
    try {
      value = await probe();
      if (done(value)) return value;
    } catch (error) {
      if (Date.now() > deadline) throw error;
    }
    if (Date.now() > deadline) throw new Error(`gave up waiting; last value ${JSON.stringify(value)}`);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}
