/**
 * The Crux encryption payload codec in TypeScript: what a team writes to read and write
 * the payloads of a Crux deployment whose workers run with `CRUX_CODEC_KEYS`.
 *
 * Byte format (docs/how-to/encryption.md, schemas/codec.test-vectors.json):
 * - plaintext: the original `temporal.api.common.v1.Payload`, serialized as protobuf;
 * - metadata: `encoding: binary/encrypted` and `encryption-key-id: <kid>`, nothing else;
 * - data: a 12-byte random nonce, then the AES-256-GCM ciphertext with its 16-byte tag
 *   appended; no associated data.
 * The first key of the ring encrypts; every key decrypts (rotation).
 */
import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import type { Payload, PayloadCodec } from '@temporalio/common';
import { temporal } from '@temporalio/proto';

export const ENCODING = 'binary/encrypted';
export const KEY_ID_METADATA = 'encryption-key-id';
const NONCE_BYTES = 12;
const TAG_BYTES = 16;

const ProtoPayload = temporal.api.common.v1.Payload;

export interface CodecKey {
  id: string;
  secret: Buffer;
}

/** A ring from `kid:base64key` entries separated by commas (the format of CRUX_CODEC_KEYS). */
export function parseKeys(text: string): CodecKey[] {
  const keys = text
    .split(/[,\n]/)
    .map((entry) => entry.trim())
    .filter((entry) => entry && !entry.startsWith('#'))
    .map((entry) => {
      const at = entry.indexOf(':');
      const secret = Buffer.from(entry.slice(at + 1).trim(), 'base64');
      if (at < 1 || secret.length !== 32) {
        throw new Error('a codec key is not kid:base64key with 32 key bytes');
      }
      return { id: entry.slice(0, at).trim(), secret };
    });
  if (keys.length === 0) throw new Error('the codec key ring is empty');
  return keys;
}

export class CruxEncryptionCodec implements PayloadCodec {
  constructor(
    private readonly keys: CodecKey[],
    private readonly nonce: () => Buffer = () => randomBytes(NONCE_BYTES),
  ) {}

  async encode(payloads: Payload[]): Promise<Payload[]> {
    return payloads.map((payload) => this.encrypt(payload));
  }

  async decode(payloads: Payload[]): Promise<Payload[]> {
    return payloads.map((payload) => this.decrypt(payload));
  }

  encrypt(payload: Payload): Payload {
    if (text(payload.metadata?.encoding) === ENCODING) return payload;
    const [key] = this.keys;
    const nonce = this.nonce();
    const cipher = createCipheriv('aes-256-gcm', key.secret, nonce);
    const plaintext = ProtoPayload.encode(payload).finish();
    const sealed = Buffer.concat([cipher.update(plaintext), cipher.final(), cipher.getAuthTag()]);
    return {
      metadata: {
        encoding: Buffer.from(ENCODING),
        [KEY_ID_METADATA]: Buffer.from(key.id),
      },
      data: Buffer.concat([nonce, sealed]),
    };
  }

  decrypt(payload: Payload): Payload {
    if (text(payload.metadata?.encoding) !== ENCODING) return payload;
    const kid = text(payload.metadata?.[KEY_ID_METADATA]);
    const key = this.keys.find((candidate) => candidate.id === kid);
    if (key === undefined) throw new Error('the payload was encrypted with a key the ring does not hold');
    const data = Buffer.from(payload.data ?? new Uint8Array());
    if (data.length < NONCE_BYTES + TAG_BYTES) throw new Error('an encrypted payload is too short');
    const decipher = createDecipheriv('aes-256-gcm', key.secret, data.subarray(0, NONCE_BYTES));
    decipher.setAuthTag(data.subarray(data.length - TAG_BYTES));
    const plaintext = Buffer.concat([
      decipher.update(data.subarray(NONCE_BYTES, data.length - TAG_BYTES)),
      decipher.final(),
    ]);
    const decoded = ProtoPayload.decode(plaintext);
    return { metadata: { ...decoded.metadata }, data: decoded.data };
  }
}

function text(bytes: Uint8Array | null | undefined): string | undefined {
  return bytes == null ? undefined : Buffer.from(bytes).toString('utf8');
}
