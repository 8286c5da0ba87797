/**
 * A TypeScript backend starting Crux generations with the plain `@temporalio/client`:
 * staged turns (the message text goes to PostgreSQL through the HTTP API, never into
 * Temporal history), retried starts and replays, an invalid input, tool approvals by
 * update, visibility queries on the Crux search attributes, and the reply read over HTTP.
 */
import { strict as assert } from 'node:assert';
import { after, before, describe, test } from 'node:test';
import {
  ApplicationFailure,
  Client,
  WorkflowFailedError,
  WorkflowIdConflictPolicy,
} from '@temporalio/client';
import { api, connect, env, eventually } from './env';
import { made } from './report';

const WORKFLOW = 'ManagedGenerationWorkflow';
const run = Math.random().toString(36).slice(2, 8);

interface StagedInput {
  input_ref: string;
  workflow_id: string;
  start: Record<string, unknown> & { generation_id: string; thread_id: string | null };
  replayed: boolean;
}

interface Outcome {
  generation_id: string;
  thread_id: string | null;
  output_message_id: string;
  replayed: boolean;
  reply?: string;
}

async function stage(body: Record<string, unknown>): Promise<StagedInput> {
  const staged = await api<StagedInput>('POST', '/v1/staged-inputs', body);
  assert.equal(staged.status, 200, JSON.stringify(staged.body));
  return staged.body;
}

/** The typed failure of a run: the first ApplicationFailure down its cause chain. */
function typed(error: unknown): ApplicationFailure {
  let cause: unknown = error;
  while (cause instanceof Error && !(cause instanceof ApplicationFailure)) cause = cause.cause;
  assert.ok(cause instanceof ApplicationFailure, `untyped failure: ${String(error)}`);
  return cause;
}

describe('a plain TypeScript client', () => {
  let client: Client;

  before(async () => {
    client = await connect();
  });

  after(async () => {
    await client.connection.close();
  });

  test('starts a staged turn, retries the start, replays it, and reads the reply over HTTP', async () => {
    const thread = `ts-orders-${run}`;
    const message = `Where is parcel ${env.canary}?`;
    const plan = await stage({ thread_id: thread, generation_id: 's1', message });
    assert.equal(plan.start.thread_id, `t/acme/${thread}`);
    assert.equal(plan.replayed, false);
    const options = {
      args: [{ ...plan.start, model: 'offline:echo' }],
      workflowId: plan.workflow_id,
      taskQueue: env.taskQueue,
      workflowIdConflictPolicy: WorkflowIdConflictPolicy.USE_EXISTING,
    };
    // A retried start (a timeout, a redeployed backend) attaches to the same run.
    const first = await client.workflow.start(WORKFLOW, options);
    const retried = await client.workflow.start(WORKFLOW, options);
    assert.equal(retried.firstExecutionRunId, first.firstExecutionRunId);
    const outcome: Outcome = await first.result();
    made({ workflowId: plan.workflow_id, threadId: plan.start.thread_id, generationId: 's1', commits: true });
    assert.equal(outcome.thread_id, `t/acme/${thread}`);
    assert.equal(outcome.replayed, false);
    assert.equal(outcome.reply, undefined, 'no text in the outcome without include_reply');

    const read = await api('GET', `/v1/generations/s1?thread_id=${thread}`);
    assert.equal(read.status, 200);
    assert.ok(String(read.body.text).includes(env.canary), 'the reply is read over HTTP');

    // The same generation again, after it completed: the same turn, never a second one.
    const again = await stage({ thread_id: thread, generation_id: 's1', message });
    assert.equal(again.replayed, true);
    const replay: Outcome = await client.workflow.execute(WORKFLOW, options);
    assert.equal(replay.replayed, true);
    assert.equal(replay.output_message_id, outcome.output_message_id);
    // Other text under a used generation id is refused before anything is staged.
    const other = await api('POST', '/v1/staged-inputs', { thread_id: thread, generation_id: 's1', message: 'other' });
    assert.equal(other.status, 409);
    assert.equal(other.body.error.code, 'identity_conflict');

    // A second turn, then the Thread as the API shows it: two turns, each once.
    const next = await stage({ thread_id: thread, generation_id: 's2', message: `And ${env.canary}?` });
    await client.workflow.execute(WORKFLOW, {
      ...options,
      args: [next.start],
      workflowId: next.workflow_id,
    });
    made({ workflowId: next.workflow_id, threadId: next.start.thread_id, generationId: 's2', commits: true });
    const shown = await api('GET', `/v1/threads/${thread}`);
    assert.equal(shown.status, 200);
    const roles = (shown.body.entries as { role: string }[]).map((entry) => entry.role);
    assert.deepEqual(roles, ['user', 'assistant', 'user', 'assistant']);
  });

  test('an ad-hoc staged turn keeps its reply until the client erased it', async () => {
    const plan = await stage({ generation_id: `adhoc-${run}`, message: `Summarize ${env.canary}` });
    assert.equal(plan.start.thread_id, null);
    await client.workflow.execute(WORKFLOW, {
      args: [plan.start],
      workflowId: plan.workflow_id,
      taskQueue: env.taskQueue,
      workflowIdConflictPolicy: WorkflowIdConflictPolicy.USE_EXISTING,
    });
    made({ workflowId: plan.workflow_id, threadId: null, generationId: `adhoc-${run}`, commits: true });
    const read = await api('GET', `/v1/generations/adhoc-${run}`);
    assert.ok(String(read.body.text).includes(env.canary));
    assert.equal((await api('DELETE', `/v1/generations/adhoc-${run}`)).status, 204);
    assert.equal((await api('GET', `/v1/generations/adhoc-${run}`)).body.text, null);
  });

  test('an invalid input fails typed, names the field, and commits nothing', async () => {
    const thread = `ts-invalid-${run}`;
    const plan = await stage({ thread_id: thread, generation_id: 'bad', message: `Never ${env.canary}` });
    const handle = await client.workflow.start(WORKFLOW, {
      args: [{ ...plan.start, max_output_tokens: 0 }],
      workflowId: plan.workflow_id,
      taskQueue: env.taskQueue,
      workflowIdConflictPolicy: WorkflowIdConflictPolicy.USE_EXISTING,
    });
    made({ workflowId: plan.workflow_id, threadId: plan.start.thread_id, generationId: 'bad', commits: false });
    const failed = await handle.result().then(
      () => assert.fail('an invalid input completed'),
      (error: unknown) => error,
    );
    assert.ok(failed instanceof WorkflowFailedError);
    const cause = typed(failed);
    assert.equal(cause.type, 'ConfigurationError');
    assert.ok(cause.message.includes('max_output_tokens'), cause.message);
    assert.ok(!cause.message.includes(env.canary));
    assert.equal(cause.nonRetryable, true);
    const shown = await api('GET', `/v1/threads/${thread}`);
    assert.equal(shown.status, 404, 'nothing was committed');
  });

  for (const decision of ['approve', 'deny'] as const) {
    test(`waits for an operator, who decides by the update \`${decision}\``, async () => {
      const thread = `ts-pay-${decision}-${run}`;
      const plan = await stage({ thread_id: thread, generation_id: 'pay', message: `Pay ${env.canary}` });
      const handle = await client.workflow.start(WORKFLOW, {
        // `pay` requires approval on the worker: it waits even when the start does not say so.
        args: [{ ...plan.start, model: 'openai:gpt-4o', tools: ['pay'] }],
        workflowId: plan.workflow_id,
        taskQueue: env.taskQueue,
        workflowIdConflictPolicy: WorkflowIdConflictPolicy.USE_EXISTING,
      });
      made({ workflowId: plan.workflow_id, threadId: plan.start.thread_id, generationId: 'pay', commits: true });
      const pending = await eventually(
        () => handle.query<{ call_id: string; tool: string }[]>('pending_approvals'),
        (calls) => calls.length > 0,
      );
      assert.equal(pending.length, 1);
      assert.equal(pending[0].tool, 'pay');
      assert.equal(await handle.query('get_stage'), 'awaiting_approval');
      const described = await handle.query<Record<string, unknown>>('describe');
      assert.equal(described.stage, 'awaiting_approval');
      // Visibility: the Crux search attributes find the waiting run.
      const waiting = await eventually(
        async () => {
          const found: string[] = [];
          for await (const info of client.workflow.list({
            query: `CruxThreadId = "${plan.start.thread_id}" AND CruxStage = "awaiting_approval"`,
          })) {
            found.push(info.workflowId);
          }
          return found;
        },
        (found) => found.length > 0,
      );
      assert.deepEqual(waiting, [plan.workflow_id]);
      // A call the run does not wait on is refused by the update's validator.
      await assert.rejects(handle.executeUpdate(decision, { args: [{ call_id: 'call_unknown' }] }));
      const argument = decision === 'deny' ? { call_id: pending[0].call_id, reason_code: 'policy' } : { call_id: pending[0].call_id };
      await handle.executeUpdate(decision, { args: [argument] });
      const outcome: Outcome = await handle.result();
      assert.equal(outcome.replayed, false);
      const reply = await api('GET', `/v1/generations/pay?thread_id=${thread}`);
      assert.equal(reply.body.text, decision === 'approve' ? 'Paid.' : 'Not paid.');
      const committed = await eventually(
        async () => {
          const found: string[] = [];
          for await (const info of client.workflow.list({
            query: `CruxThreadId = "${plan.start.thread_id}" AND CruxGenerationId = "pay" AND ExecutionStatus = "Completed"`,
          })) {
            found.push(info.workflowId);
          }
          return found;
        },
        (found) => found.length > 0,
      );
      assert.deepEqual(committed, [plan.workflow_id]);
    });
  }
});
