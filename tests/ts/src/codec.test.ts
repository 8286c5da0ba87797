/**
 * The codec path: a TypeScript codec implementing the documented byte format passes the
 * published test vectors, talks to the Python codec server both ways, and starts a
 * generation with an inline input whose text, and the reply it asks for, stay ciphertext
 * in Temporal history.
 */
import { strict as assert } from 'node:assert';
import { readFileSync } from 'node:fs';
import { after, before, describe, test } from 'node:test';
import { Client, WorkflowIdConflictPolicy } from '@temporalio/client';
import type { Payload } from '@temporalio/common';
import { CruxEncryptionCodec, ENCODING, parseKeys } from './codec';
import { api, connect, env } from './env';
import { made } from './report';

interface JsonPayload {
  metadata: Record<string, string>;
  data: string;
}

interface Vectors {
  keys: { id: string; key: string; current: boolean }[];
  vectors: { name: string; key_id: string; nonce: string; payload: JsonPayload; encoded: JsonPayload }[];
  invalid: { name: string; encoded: JsonPayload }[];
}

function fromJson(payload: JsonPayload): Payload {
  const metadata: Record<string, Uint8Array> = {};
  for (const [key, value] of Object.entries(payload.metadata)) metadata[key] = Buffer.from(value, 'base64');
  return { metadata, data: Buffer.from(payload.data, 'base64') };
}

function toJson(payload: Payload): JsonPayload {
  const metadata: Record<string, string> = {};
  for (const [key, value] of Object.entries(payload.metadata ?? {})) {
    metadata[key] = Buffer.from(value ?? new Uint8Array()).toString('base64');
  }
  return { metadata, data: Buffer.from(payload.data ?? new Uint8Array()).toString('base64') };
}

function sorted(payload: JsonPayload): JsonPayload {
  return { metadata: Object.fromEntries(Object.entries(payload.metadata).sort()), data: payload.data };
}

describe('the encryption codec', () => {
  const vectors: Vectors = JSON.parse(readFileSync(env.vectors, 'utf8'));
  const ring = () => vectors.keys.map((key) => `${key.id}:${key.key}`).join(',');

  test('decrypts and encrypts the published test vectors, and rejects the invalid ones', () => {
    const decoder = new CruxEncryptionCodec(parseKeys(ring()));
    for (const vector of vectors.vectors) {
      assert.deepEqual(sorted(toJson(decoder.decrypt(fromJson(vector.encoded)))), sorted(vector.payload), vector.name);
      const key = vectors.keys.find((candidate) => candidate.id === vector.key_id)!;
      const encoder = new CruxEncryptionCodec(parseKeys(`${key.id}:${key.key}`), () =>
        Buffer.from(vector.nonce, 'base64'),
      );
      assert.deepEqual(sorted(toJson(encoder.encrypt(fromJson(vector.payload)))), sorted(vector.encoded), vector.name);
    }
    for (const invalid of vectors.invalid) {
      assert.throws(() => decoder.decrypt(fromJson(invalid.encoded)), invalid.name);
    }
  });

  test('agrees with the codec server of `crux serve` both ways', async () => {
    const codec = new CruxEncryptionCodec(parseKeys(env.codecKeys));
    const plain: Payload = {
      metadata: { encoding: Buffer.from('json/plain') },
      data: Buffer.from(JSON.stringify({ text: `grüße ${env.canary}` })),
    };
    const decoded = await api<{ payloads: JsonPayload[] }>('POST', '/codec/decode', {
      payloads: [toJson(codec.encrypt(plain))],
    });
    assert.equal(decoded.status, 200);
    assert.deepEqual(decoded.body.payloads, [toJson(plain)]);
    const encoded = await api<{ payloads: JsonPayload[] }>('POST', '/codec/encode', { payloads: [toJson(plain)] });
    assert.equal(encoded.status, 200);
    const [sealed] = encoded.body.payloads.map(fromJson);
    assert.equal(Buffer.from(sealed.metadata!.encoding!).toString(), ENCODING);
    assert.deepEqual(toJson(codec.decrypt(sealed)), toJson(plain));
  });

  describe('a client with the codec', () => {
    let client: Client;

    before(async () => {
      client = await connect(true);
    });

    after(async () => {
      await client.connection.close();
    });

    test('sends an inline input and gets the reply in the outcome, ciphertext in history', async () => {
      const thread = `ts-enc-${Math.random().toString(36).slice(2, 8)}`;
      const workflowId = `crux/gen/${encodeURIComponent(thread)}/e1`;
      const options = {
        args: [{ generation_id: 'e1', thread_id: thread, input: `Say ${env.canary}`, include_reply: true }],
        workflowId,
        taskQueue: env.encryptedTaskQueue,
        workflowIdConflictPolicy: WorkflowIdConflictPolicy.USE_EXISTING,
      };
      const outcome: { reply?: string; replayed: boolean } = await client.workflow.execute(
        'ManagedGenerationWorkflow',
        options,
      );
      made({ workflowId, threadId: thread, generationId: 'e1', commits: true });
      assert.ok(outcome.reply?.includes(env.canary));
      const replay: { reply?: string; replayed: boolean } = await client.workflow.execute(
        'ManagedGenerationWorkflow',
        options,
      );
      assert.equal(replay.replayed, true);
      assert.equal(replay.reply, outcome.reply);
      // The history as the service holds it: every payload of the start is ciphertext.
      const raw = await connect();
      try {
        const history = await raw.workflow.getHandle(workflowId).fetchHistory();
        const started = history.events![0].workflowExecutionStartedEventAttributes!;
        for (const payload of started.input!.payloads!) {
          assert.equal(Buffer.from(payload.metadata!.encoding!).toString(), ENCODING);
          assert.ok(!Buffer.from(payload.data!).toString('latin1').includes(env.canary));
        }
      } finally {
        await raw.connection.close();
      }
    });
  });
});
