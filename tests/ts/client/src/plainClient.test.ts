/**
 * What a plain TypeScript Temporal client meets, with nothing of Crux but its published
 * contract (schemas/): the workflow-id rule, every example input started under the id the
 * rule gives, retried starts attached with `USE_EXISTING`, typed failures with their details,
 * refused runs that say `failed`, current details the default converter decodes, and
 * approval decisions refused typed. The pytest test beside this folder starts the worker.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, test } from 'node:test';

import {
  ApplicationFailure,
  Client,
  Connection,
  WorkflowFailedError,
  WorkflowHandle,
  WorkflowUpdateFailedError,
} from '@temporalio/client';

import {
  generationKey,
  memberGenerationId,
  memberWorkflowId,
  parallelWorkflowId,
  workflowIdFor,
} from './workflowIds';

function required(name: string): string {
  const value = process.env[name];
  if (!value) throw new Error(`set ${name} (the pytest test beside this suite does)`);
  return value;
}

const schemas = required('CRUX_SCHEMAS');
const run = required('CRUX_RUN');
const taskQueue = required('CRUX_TASK_QUEUE');

type Json = Record<string, any>;

function published(stem: string): Json {
  return JSON.parse(readFileSync(join(schemas, stem), 'utf8'));
}

function example(stem: string): Json {
  return structuredClone(published(`${stem}.schema.json`).examples[0]);
}

let connection: Connection;
let client: Client;

before(async () => {
  connection = await Connection.connect({ address: required('CRUX_TEMPORAL_ADDRESS') });
  client = new Client({ connection, namespace: required('CRUX_NAMESPACE') });
});

after(async () => {
  await connection?.close();
});

async function refusal(handle: WorkflowHandle): Promise<ApplicationFailure> {
  const error = await handle.result().then(
    () => assert.fail('the run should have failed'),
    (caught: unknown) => caught,
  );
  assert.ok(error instanceof WorkflowFailedError, String(error));
  assert.ok(error.cause instanceof ApplicationFailure, String(error.cause));
  return error.cause;
}

async function currentDetails(handle: WorkflowHandle): Promise<string> {
  // The built-in metadata query: plain JSON, which the default converter decodes.
  const metadata = (await handle.query('__temporal_workflow_metadata')) as Json;
  return metadata.currentDetails as string;
}

async function stageBecomes(handle: WorkflowHandle, stage: string): Promise<void> {
  for (let waited = 0; waited < 300; waited++) {
    if ((await handle.query('get_stage')) === stage) return;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  assert.fail(`stage never became ${stage}`);
}

test('the workflow-id rule gives every published test vector', () => {
  const vectors = published('workflow-ids.test-vectors.json');
  for (const vector of vectors.generations) {
    assert.equal(generationKey(vector.generation_id, vector.thread_id), vector.generation_key);
    assert.equal(workflowIdFor(vector.generation_id, vector.thread_id), vector.workflow_id);
  }
  for (const vector of vectors.parallel) {
    assert.equal(parallelWorkflowId(vector.parallel_id), vector.workflow_id);
    assert.equal(memberWorkflowId(vector.parallel_id, vector.member), vector.member_workflow_id);
    assert.equal(memberGenerationId(vector.parallel_id, vector.member), vector.member_generation_id);
  }
});

test('the example generation runs once, however often its start is retried', async () => {
  const input = example('generation-input');
  input.generation_id = `${run}/example`;
  input.thread_id = `${run}:support`;
  const options = {
    args: [input],
    taskQueue,
    workflowId: workflowIdFor(input.generation_id, input.thread_id),
    workflowIdConflictPolicy: 'USE_EXISTING' as const,
  };
  const first = await client.workflow.start('ManagedGenerationWorkflow', options);
  // A retried start (the caller's request timed out, say) attaches to the same run.
  const retried = await client.workflow.start('ManagedGenerationWorkflow', options);
  assert.equal(retried.firstExecutionRunId, first.firstExecutionRunId);
  const outcome = (await first.result()) as Json;
  assert.equal(outcome.generation_id, input.generation_id);
  assert.equal(outcome.thread_commit.status, 'selected');
  assert.equal(outcome.replayed, false);
  assert.equal(await first.query('get_stage'), 'completed');
  assert.equal(((await first.query('describe')) as Json).stage, 'completed');
  assert.match(await currentDetails(first), /^stage: completed\n/);

  // Started again after it completed: a new run that returns the stored turn.
  const again = await client.workflow.start('ManagedGenerationWorkflow', options);
  assert.notEqual(again.firstExecutionRunId, first.firstExecutionRunId);
  const replayed = (await again.result()) as Json;
  assert.equal(replayed.replayed, true);
  assert.equal(replayed.output_message_id, outcome.output_message_id);
});

test('the example parallel run goes by the ids the rule gives', async () => {
  const input = example('parallel-input');
  input.parallel_id = `${run}-review`;
  for (const member of input.members) {
    member.generation.generation_id = memberGenerationId(input.parallel_id, member.name);
    if (member.generation.thread_id) member.generation.thread_id = `${run}:${member.name}`;
  }
  const outcome = (await client.workflow.execute('ParallelGenerationWorkflow', {
    args: [input],
    taskQueue,
    workflowId: parallelWorkflowId(input.parallel_id),
  })) as Json;
  for (const member of outcome.members) {
    assert.equal(member.failure, null);
    assert.equal(member.workflow_id, memberWorkflowId(input.parallel_id, member.name));
    assert.equal(member.generation_id, memberGenerationId(input.parallel_id, member.name));
    const child = await client.workflow.getHandle(member.workflow_id).describe();
    assert.equal(child.status.name, 'COMPLETED');
  }
});

test('an invalid input fails typed, with its field, and the run says failed', async () => {
  const generationId = `${run}/invalid`;
  const handle = await client.workflow.start('ManagedGenerationWorkflow', {
    args: [{ generation_id: generationId, input: 'Hello', max_tool_rounds: -1 }],
    taskQueue,
    workflowId: workflowIdFor(generationId, null),
  });
  const failure = await refusal(handle);
  assert.equal(failure.type, 'ConfigurationError');
  assert.equal(failure.nonRetryable, true);
  const [details] = failure.details as Json[];
  assert.equal(details.crux_details, 1);
  assert.equal(details.code, 'invalid_input');
  assert.deepEqual(details.fields, ['max_tool_rounds']);
  assert.equal(await handle.query('get_stage'), 'failed');
  assert.equal(((await handle.query('describe')) as Json).stage, 'failed');
  assert.equal(
    await currentDetails(handle),
    'stage: failed\nerror: ConfigurationError (invalid_input)',
  );
});

test('a run under another id is refused with the id to use', async () => {
  const generationId = `${run}/elsewhere`;
  const handle = await client.workflow.start('ManagedGenerationWorkflow', {
    args: [{ generation_id: generationId, input: 'Hello' }],
    taskQueue,
    workflowId: `my-own-id/${run}`,
  });
  const failure = await refusal(handle);
  assert.equal(failure.type, 'ConfigurationError');
  const [details] = failure.details as Json[];
  assert.equal(details.code, 'workflow_id_mismatch');
  assert.deepEqual(details.diagnostics, {
    expected_workflow_id: workflowIdFor(generationId, null),
  });
  assert.equal(await handle.query('get_stage'), 'failed');
});

test('approval decisions with a wrong argument are refused typed', async () => {
  // The worker's model answers this run slowly, so that it is running while we decide.
  const generationId = `${run}/decide`;
  const handle = await client.workflow.start('ManagedGenerationWorkflow', {
    args: [{ generation_id: generationId, model: 'openai:gpt-4o-mini', input: 'Hello' }],
    taskQueue,
    workflowId: workflowIdFor(generationId, null),
  });
  await stageBecomes(handle, 'invoking');
  assert.deepEqual(await handle.query('pending_approvals'), []);
  const refused: Json[] = [];
  for (const [update, decision] of [
    ['deny', { call_id: 'call_1', reason_code: 'Not A Code' }],
    ['approve', { call_id: 'call_1', extra: 'x' }],
    ['approve', { call_id: 'call_1' }],
  ] as const) {
    const error = await handle.executeUpdate(update, { args: [decision] }).then(
      () => assert.fail(`${update} should have been refused`),
      (caught: unknown) => caught,
    );
    assert.ok(error instanceof WorkflowUpdateFailedError, String(error));
    assert.ok(error.cause instanceof ApplicationFailure, String(error.cause));
    assert.equal(error.cause.type, 'ConfigurationError');
    refused.push((error.cause.details as Json[])[0]);
  }
  assert.deepEqual(
    refused.map((details) => [details.code, details.fields]),
    [
      ['invalid_input', ['reason_code']],
      ['invalid_input', undefined],
      ['invalid_input', ['call_id']],
    ],
  );
  const outcome = (await handle.result()) as Json;
  assert.equal(outcome.thread_commit, null);
});
