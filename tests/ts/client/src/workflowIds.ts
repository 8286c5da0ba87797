/**
 * The workflow-id rule of Crux, for a client in TypeScript: a reference implementation,
 * checked against the published test vectors (schemas/workflow-ids.test-vectors.json).
 *
 * A generation must be started under the id its input determines; a run under another id
 * is refused (`ConfigurationError`, code `workflow_id_mismatch`).
 */
import { createHash } from 'node:crypto';

const KEPT = /[A-Za-z0-9\-._~:]/;

/** One id component: each UTF-8 byte kept if it is `A-Za-z0-9-._~:`, else `%XX`. */
export function encode(component: string): string {
  let encoded = '';
  for (const byte of Buffer.from(component, 'utf8')) {
    const character = String.fromCharCode(byte);
    encoded += byte < 0x80 && KEPT.test(character)
      ? character
      : '%' + byte.toString(16).toUpperCase().padStart(2, '0');
  }
  return encoded;
}

/** The storage key of a generation: `<thread>/<generation>`, or `<generation>` ad hoc. */
export function generationKey(generationId: string, threadId: string | null): string {
  return threadId === null ? encode(generationId) : `${encode(threadId)}/${encode(generationId)}`;
}

/** The workflow id of a generation (`ManagedGenerationWorkflow`). */
export function workflowIdFor(generationId: string, threadId: string | null): string {
  return `crux/gen/${generationKey(generationId, threadId)}`;
}

const PARALLEL_ID_BUDGET = 600;
const MEMBER_SEGMENT_BUDGET = 1000 - PARALLEL_ID_BUDGET - 1;
const MAX_GENERATION_ID_LENGTH = 256;

/** A JSON array of strings as Python's `json.dumps` writes it (`, `, non-ASCII as \uXXXX). */
function pythonJson(parts: string[]): string {
  const asciiOnly = (text: string): string => {
    let out = '';
    for (let index = 0; index < text.length; index++) {
      const unit = text.charCodeAt(index);
      out += unit < 0x20 || unit > 0x7e
        ? '\\u' + unit.toString(16).padStart(4, '0')
        : text[index];
    }
    return out;
  };
  // JSON.stringify escapes `"`, `\` and the control characters as Python does (\n, \t, ...,
  // else \u00xx); everything else beyond printable ASCII is escaped here, code unit by unit.
  return '[' + parts.map((part) => asciiOnly(JSON.stringify(part))).join(', ') + ']';
}

function digest(...parts: string[]): string {
  return 'sha256-' + createHash('sha256').update(pythonJson(parts), 'utf8').digest('hex');
}

/** The workflow id of a parallel run (`ParallelGenerationWorkflow`). */
export function parallelWorkflowId(parallelId: string): string {
  const encoded = encode(parallelId);
  const readable = `crux/parallel/${encoded}`;
  if (Buffer.byteLength(readable) <= PARALLEL_ID_BUDGET && !encoded.startsWith('sha256-')) {
    return readable;
  }
  return `crux/parallel/${digest(parallelId)}`;
}

/** The workflow id of one member of a parallel run (read-only for clients: its child). */
export function memberWorkflowId(parallelId: string, member: string): string {
  let segment = encode(member);
  if (Buffer.byteLength(segment) > MEMBER_SEGMENT_BUDGET || segment.startsWith('sha256-')) {
    segment = digest(member);
  }
  return `${parallelWorkflowId(parallelId)}/${segment}`;
}

/** The generation id of one member of a parallel run. */
export function memberGenerationId(parallelId: string, member: string): string {
  const readable = `${encode(parallelId)}/${encode(member)}`;
  if (readable.length <= MAX_GENERATION_ID_LENGTH && !readable.startsWith('parallel-sha256-')) {
    return readable;
  }
  return `parallel-${digest(parallelId, member)}`;
}
