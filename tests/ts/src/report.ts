/** What the suite made, for the Python side to check: every turn once, no text in history. */
import { appendFileSync } from 'node:fs';
import { env } from './env';

export interface Made {
  workflowId: string;
  /** The Thread's storage id (`t/<tenant>/...` over the API), or null for an ad-hoc run. */
  threadId: string | null;
  generationId: string;
  /** Whether the run was to commit a turn (a refused start commits none). */
  commits: boolean;
}

export function made(entry: Made): void {
  appendFileSync(env.report, `${JSON.stringify(entry)}\n`);
}
