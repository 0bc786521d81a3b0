// Synthesises one stack per model in tables.json offline (bundling skipped)
// and asserts on each template against the model's definition: nothing here
// names a model, so a model added to the registry is covered without change.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { chmodSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { describe, test } from 'node:test';

import { App, Aspects, Stack } from 'aws-cdk-lib';
import { Annotations, Match, Template } from 'aws-cdk-lib/assertions';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import * as sqs from 'aws-cdk-lib/aws-sqs';
import { AwsSolutionsChecks } from 'cdk-nag';
import type { IConstruct } from 'constructs';

import {
  BUNDLED_MODEL_FILE,
  JobstreamStack,
  MAX_STREAM_CONSUMERS,
  QUEUE_CONSUMER_MEMORY_MB,
  modelFileHooks,
  stackResourceName,
  validateModel,
  type JobstreamStackProps,
} from '../lib/jobstream-stack.ts';
import { constructName, loadTableDefs, modelDef, queueEnv, tableDefsOfModelFile, type ModelDef, type TableDefs } from '../lib/tables.ts';

type Resource = { Type: string; Properties: Record<string, any> };
type Statement = { Action: string | string[]; Resource: unknown; Effect: string };

interface Synth {
  stack: JobstreamStack;
  template: Template;
  resources: (type: string) => Resource[];
  ref: (c: IConstruct) => { Ref: string };
  arn: (c: IConstruct, attr?: string) => { 'Fn::GetAtt': [string, string] };
}

function synth(props: JobstreamStackProps = {}): Synth {
  const app = new App({ context: { 'aws:cdk:bundling-stacks': [] } });
  const stack = new JobstreamStack(app, 'Test', props);
  Aspects.of(stack).add(new AwsSolutionsChecks());
  // Annotations are added when the app is prepared: synthesise first.
  app.synth();
  const template = Template.fromStack(stack);
  const id = (c: IConstruct): string => stack.getLogicalId(c.node.defaultChild as any);
  return {
    stack,
    template,
    resources: (type) => Object.values(template.findResources(type)) as Resource[],
    ref: (c) => ({ Ref: id(c) }),
    arn: (c, attr = 'Arn') => ({ 'Fn::GetAtt': [id(c), attr] }),
  };
}

function nagFindings(stack: Stack): unknown[] {
  const a = Annotations.fromStack(stack);
  return [
    ...a.findError('*', Match.stringLikeRegexp('AwsSolutions-.*')),
    ...a.findWarning('*', Match.stringLikeRegexp('AwsSolutions-.*')),
  ].map((e) => e.entry.data);
}

/** The policy statements attached to a function's role. */
function statementsOf(s: Synth, fn: lambda.IFunction): Statement[] {
  const roleRef = s.ref(fn.role!);
  const policies = s.resources('AWS::IAM::Policy').filter((p) => JSON.stringify(p.Properties.Roles) === JSON.stringify([roleRef]));
  assert.equal(policies.length, 1, `one policy for ${fn.node.id}`);
  return policies[0].Properties.PolicyDocument.Statement;
}

/** Actions granted per resource (resources keyed by their JSON). */
function grants(statements: Statement[]): Map<string, string[]> {
  const out = new Map<string, string[]>();
  for (const st of statements) {
    assert.equal(st.Effect, 'Allow');
    for (const r of [st.Resource].flat()) {
      const key = JSON.stringify(r);
      out.set(key, [...(out.get(key) ?? []), ...[st.Action].flat()].sort());
    }
  }
  return out;
}

const sorted = (xs: string[]): string[] => [...xs].sort();
const defs = loadTableDefs();
const indexArn = (tableArn: unknown): string => JSON.stringify({ 'Fn::Join': ['', [tableArn, '/index/*']] });

test('tables.json defines models, the default one first-class', () => {
  assert.ok(defs.models.length > 0);
  assert.equal(new Set(defs.models.map((m) => m.name)).size, defs.models.length, 'model names are unique');
  const s = synth();
  assert.ok(defs.models.some((m) => m.name === defs.defaultModel), 'the default model is defined');
  assert.equal(s.stack.model.name, defs.defaultModel, 'the default model');
  for (const f of s.resources('AWS::Lambda::Function')) {
    assert.equal(f.Properties.Environment.Variables.MODEL, defs.defaultModel);
  }
});

test('an unknown model is rejected with the known names', () => {
  const known = defs.models.map((m) => m.name);
  assert.throws(() => modelDef('no-such-model'), (e: Error) => known.every((n) => e.message.includes(n)) && e.message.includes('no-such-model'));
  assert.throws(() => synth({ model: 'no-such-model' }), /no-such-model/);
});

test('model definitions the stack cannot deploy are rejected', () => {
  const base = defs.models.find((m) => m.streamConsumers.length > 0)!;
  const sc = base.streamConsumers[0];
  const tooMany: ModelDef = {
    ...base,
    streamConsumers: Array.from({ length: MAX_STREAM_CONSUMERS + 1 }, (_, i) => ({ ...sc, name: `c${i}` })),
    queueConsumers: [],
  };
  assert.throws(() => validateModel(tooMany), /at most 2/);
  const unknownQueue: ModelDef = { ...base, streamConsumers: [{ ...sc, grant: { ...sc.grant, sendsTo: ['nowhere'] } }], queueConsumers: [] };
  assert.throws(() => validateModel(unknownQueue), /nowhere/);
  const clash: ModelDef = { ...base, streamConsumers: [sc, { ...sc }], queueConsumers: [] };
  assert.throws(() => validateModel(clash), /not unique/);
});

test('queue URL variables follow shared::lambda::queue_env', () => {
  assert.equal(queueEnv('work'), 'QUEUE_URL_WORK');
  assert.equal(queueEnv('timeline-fanout'), 'QUEUE_URL_TIMELINE_FANOUT');
  assert.equal(constructName('timeline-fanout'), 'TimelineFanout');
});

test('cdk-nag is really checking: a non-compliant queue is reported', () => {
  const app = new App();
  const probe = new Stack(app, 'Probe');
  new sqs.Queue(probe, 'Plain');
  Aspects.of(probe).add(new AwsSolutionsChecks());
  app.synth();
  const errors = Annotations.fromStack(probe).findError('*', Match.stringLikeRegexp('AwsSolutions-SQS4.*'));
  assert.ok(errors.length > 0, 'SQS4 (TLS) reported on a plain queue');
});

// A model shaped unlike the registered ones (no GSIs, no TTL, an unfiltered
// stream consumer, a hyphenated queue), so those branches stay covered
// whatever tables.json holds.
const probeModel: ModelDef = {
  name: 'probe-model',
  about: 'test only',
  table: {
    name: 'probe-table',
    pk: 'id',
    sk: 'kind',
    // One index per projection a model file declares (`project:` all, keys, a list).
    gsis: [
      { name: 'byAll', pk: 'g1pk', sk: 'g1sk', projection: { projectionType: 'ALL' } },
      { name: 'byKeys', pk: 'g2pk', sk: 'g2sk', projection: { projectionType: 'KEYS_ONLY' } },
      { name: 'bySome', pk: 'g3pk', sk: 'g3sk', projection: { projectionType: 'INCLUDE', nonKeyAttributes: ['amount', 'name'] } },
    ],
    ttlAttribute: null,
    stream: true,
  },
  streamConsumers: [
    {
      name: 'fan-out',
      binary: 'derive',
      filters: [],
      settings: {
        batchSize: 50,
        batchingWindowSecs: 2,
        maxRetries: 4,
        bisectOnError: true,
        maxRecordAgeSecs: 3600,
        timeoutSecs: 40,
        parallelizationFactor: 1,
        startingPosition: 'TRIM_HORIZON',
        memoryMb: 512,
      },
      grant: { tableActions: ['dynamodb:UpdateItem'], indexActions: [], ledgerActions: [], sendsTo: ['timeline-fanout'] },
    },
  ],
  queueConsumers: [
    {
      name: 'timeline',
      binary: 'worker',
      queue: {
        logical: 'timeline-fanout',
        name: 'probe-timeline-fanout',
        dlqName: 'probe-timeline-fanout-dlq',
        consumer: 'timeline',
        consumerTimeoutSecs: 20,
        visibilityTimeoutSecs: 120,
        maxReceiveCount: 6,
        retentionSecs: 86400,
        dlqRetentionSecs: 1209600,
        batchSize: 5,
        maxConcurrency: 3,
      },
      grant: { tableActions: ['dynamodb:Query', 'dynamodb:PutItem'], indexActions: ['dynamodb:Query'], ledgerActions: ['dynamodb:PutItem'], sendsTo: ['timeline-fanout'] },
    },
  ],
  runner: {
    tableActions: ['dynamodb:DescribeTable', 'dynamodb:DescribeTimeToLive', 'dynamodb:UpdateItem', 'dynamodb:Query', 'dynamodb:PutItem'],
    indexActions: ['dynamodb:Query'],
    streamActions: ['dynamodb:DescribeStream', 'dynamodb:GetShardIterator', 'dynamodb:GetRecords'],
    ledgerActions: ['dynamodb:DescribeTable', 'dynamodb:DescribeTimeToLive', 'dynamodb:UpdateItem', 'dynamodb:Query', 'dynamodb:GetItem', 'dynamodb:PutItem'],
    queueActions: ['sqs:GetQueueUrl', 'sqs:GetQueueAttributes', 'sqs:ReceiveMessage', 'sqs:DeleteMessage', 'sqs:ChangeMessageVisibility'],
    sendsTo: ['timeline-fanout'],
    deadLetterActions: ['sqs:GetQueueUrl'],
    onFailureActions: ['sqs:GetQueueAttributes', 'sqs:SendMessage'],
  },
};
const probeDefs: TableDefs = { ...defs, models: [...defs.models, probeModel] };

test('a stack name that would make a queue name too long for SQS is rejected, naming the queue', () => {
  const app = new App({ context: { 'aws:cdk:bundling-stacks': [] } });
  assert.throws(
    () => new JobstreamStack(app, 'S'.repeat(60), { model: probeModel.name, defs: probeDefs }),
    /queue name 'S{60}-probe-timeline-fanout.*choose a shorter stackName/u,
  );
});
test('every RunnerPolicy lets `run` read a lease back (GetItem on the ledger), as it does when a lease write\'s answer was lost', () => {
  for (const m of defs.models) {
    assert.ok(m.runner.ledgerActions.includes('dynamodb:GetItem'), `${m.name}: ledger GetItem`);
    assert.ok(!m.runner.tableActions.includes('dynamodb:GetItem') || [...m.streamConsumers, ...m.queueConsumers].some((c) => c.grant.tableActions.includes('dynamodb:GetItem')), `${m.name}: GetItem on the model table only if a function has it`);
  }
});

const cases: [string, ModelDef, TableDefs | undefined][] = [
  ...defs.models.map((m): [string, ModelDef, undefined] => [`model ${m.name}`, m, undefined]),
  ['a probe model (not in tables.json)', probeModel, probeDefs],
];

for (const [label, def, modelDefs] of cases) {
  describe(label, () => {
    const s = synth({ model: def.name, defs: modelDefs });
    const { stack, template, resources } = s;
    const consumers = [...def.streamConsumers, ...def.queueConsumers];
    const fnOf = (name: string): lambda.IFunction => {
      const fn = stack.functions[name];
      assert.ok(fn, `function for ${name}`);
      return fn;
    };
    const tableArn = s.arn(stack.table);
    const ledgerArn = s.arn(stack.ledger);

    test('the model table comes from tables.json: keys, GSIs, stream, PITR, deletion protection, TTL', () => {
      const t = def.table;
      const props: Record<string, unknown> = {
        TableName: t.name,
        KeySchema: [
          { AttributeName: t.pk, KeyType: 'HASH' },
          { AttributeName: t.sk, KeyType: 'RANGE' },
        ],
        GlobalSecondaryIndexes:
          t.gsis.length > 0
            ? t.gsis.map((g) => ({
                IndexName: g.name,
                KeySchema: [
                  { AttributeName: g.pk, KeyType: 'HASH' },
                  ...(g.sk ? [{ AttributeName: g.sk, KeyType: 'RANGE' }] : []),
                ],
                Projection:
                  g.projection.projectionType === 'INCLUDE'
                    ? { ProjectionType: 'INCLUDE', NonKeyAttributes: g.projection.nonKeyAttributes }
                    : { ProjectionType: g.projection.projectionType },
              }))
            : Match.absent(),
        StreamSpecification: t.stream ? { StreamViewType: 'NEW_AND_OLD_IMAGES' } : Match.absent(),
        TimeToLiveSpecification: t.ttlAttribute ? { AttributeName: t.ttlAttribute, Enabled: true } : Match.absent(),
        PointInTimeRecoverySpecification: { PointInTimeRecoveryEnabled: true },
        DeletionProtectionEnabled: true,
        BillingMode: 'PAY_PER_REQUEST',
      };
      template.hasResourceProperties('AWS::DynamoDB::Table', props);
      assert.equal(resources('AWS::DynamoDB::Table').length, 2, 'the model table and the ledger');
    });

    test('the ledger has TTL and no stream', () => {
      const ledgers = resources('AWS::DynamoDB::Table').filter((t) => t.Properties.TableName === 'Test-ledger');
      assert.equal(ledgers.length, 1);
      const ledger = ledgers[0].Properties;
      assert.deepEqual(ledger.KeySchema, [
        { AttributeName: defs.ledger.pk, KeyType: 'HASH' },
        { AttributeName: defs.ledger.sk, KeyType: 'RANGE' },
      ]);
      assert.deepEqual(ledger.TimeToLiveSpecification, { AttributeName: defs.ledger.ttlAttribute, Enabled: true });
      assert.equal(ledger.StreamSpecification, undefined);
      assert.deepEqual(ledger.PointInTimeRecoverySpecification, { PointInTimeRecoveryEnabled: true });
      assert.equal(ledger.DeletionProtectionEnabled, true);
    });

    test('every stream mapping setting is the definition\'s (the one the local runtime builds its mappings from)', () => {
      const mappings = resources('AWS::Lambda::EventSourceMapping').filter((m) => m.Properties.StartingPosition);
      const fns = template.findResources('AWS::Lambda::Function');
      for (const c of def.streamConsumers) {
        const p = mappings.find((m) => JSON.stringify(m.Properties.FunctionName) === JSON.stringify(s.ref(fnOf(c.name))))!.Properties;
        const st = c.settings;
        assert.equal(p.BatchSize, st.batchSize, `${c.name}: batch size`);
        assert.equal(p.MaximumBatchingWindowInSeconds, st.batchingWindowSecs > 0 ? st.batchingWindowSecs : undefined, `${c.name}: window`);
        assert.equal(p.MaximumRetryAttempts, st.maxRetries);
        assert.equal(p.BisectBatchOnFunctionError, st.bisectOnError);
        assert.equal(p.MaximumRecordAgeInSeconds, st.maxRecordAgeSecs);
        assert.equal(p.ParallelizationFactor, st.parallelizationFactor);
        assert.equal(p.StartingPosition, st.startingPosition);
        const f = fns[s.ref(fnOf(c.name)).Ref].Properties;
        assert.equal(f.Timeout, st.timeoutSecs);
        assert.equal(f.MemorySize, st.memoryMb);
        const patterns = (p.FilterCriteria?.Filters ?? []).map((x: { Pattern: string }) => JSON.parse(x.Pattern));
        assert.deepEqual(patterns, c.filters, `${c.name}: the definition's patterns, verbatim`);
      }
    });

    test('at most two event source mappings read the stream, each as SPEC §2.9 requires, filtered as defined', () => {
      const mappings = resources('AWS::Lambda::EventSourceMapping').filter((m) => m.Properties.StartingPosition);
      assert.equal(mappings.length, def.streamConsumers.length);
      assert.ok(mappings.length <= 2);
      for (const c of def.streamConsumers) {
        const found = mappings.filter((m) => JSON.stringify(m.Properties.FunctionName) === JSON.stringify(s.ref(fnOf(c.name))));
        assert.equal(found.length, 1, `one mapping for ${c.name}`);
        const p = found[0].Properties;
        assert.deepEqual(p.FunctionResponseTypes, ['ReportBatchItemFailures']);
        assert.equal(p.BisectBatchOnFunctionError, true);
        assert.ok(p.MaximumRetryAttempts > 0 && p.MaximumRetryAttempts <= 10, 'bounded retries');
        assert.ok(p.MaximumRecordAgeInSeconds > 0, 'bounded record age');
        assert.equal(p.StartingPosition, 'TRIM_HORIZON');
        assert.equal(p.ParallelizationFactor, 1);
        assert.deepEqual(p.DestinationConfig.OnFailure.Destination, s.arn(stack.onFailureQueues[c.name]));
        assert.deepEqual(p.EventSourceArn, s.arn(stack.table, 'StreamArn'));
        if (c.filters.length === 0) {
          assert.equal(p.FilterCriteria, undefined, `${c.name}: no filter`);
        }
      }
    });

    test('queue consumers: one SQS mapping each, batch size from tables.json, partial batch responses', () => {
      const mappings = resources('AWS::Lambda::EventSourceMapping').filter((m) => !m.Properties.StartingPosition);
      assert.equal(mappings.length, def.queueConsumers.length);
      for (const c of def.queueConsumers) {
        const found = mappings.filter((m) => JSON.stringify(m.Properties.FunctionName) === JSON.stringify(s.ref(fnOf(c.name))));
        assert.equal(found.length, 1, `one mapping for ${c.name}`);
        assert.deepEqual(found[0].Properties.EventSourceArn, s.arn(stack.queues[c.queue.logical]));
        assert.deepEqual(found[0].Properties.FunctionResponseTypes, ['ReportBatchItemFailures']);
        assert.equal(found[0].Properties.BatchSize, c.queue.batchSize);
        assert.deepEqual(found[0].Properties.ScalingConfig, { MaximumConcurrency: c.queue.maxConcurrency });
      }
    });

    test('every work queue: DLQ, maxReceiveCount >= 5, visibility >= 6 x consumer timeout, DLQ outlives the queue', () => {
      const queues = Object.entries(template.findResources('AWS::SQS::Queue')) as [string, Resource][];
      const work = queues.filter(([, q]) => q.Properties.RedrivePolicy);
      assert.equal(work.length, def.queueConsumers.length);
      assert.equal(queues.length, def.streamConsumers.length + 2 * def.queueConsumers.length, 'on-failure queues, work queues, DLQs');
      const fns = template.findResources('AWS::Lambda::Function');
      const mappings = resources('AWS::Lambda::EventSourceMapping');
      for (const [id, q] of work) {
        const consumer = mappings.filter((m) => JSON.stringify(m.Properties.EventSourceArn) === JSON.stringify({ 'Fn::GetAtt': [id, 'Arn'] }));
        assert.equal(consumer.length, 1, `${id} has one consumer`);
        const timeout = fns[consumer[0].Properties.FunctionName.Ref].Properties.Timeout;
        assert.ok(q.Properties.RedrivePolicy.maxReceiveCount >= 5);
        assert.ok(q.Properties.VisibilityTimeout >= 6 * timeout, `${id}: visibility ${q.Properties.VisibilityTimeout} >= 6 x ${timeout}`);
        const dlqId = q.Properties.RedrivePolicy.deadLetterTargetArn['Fn::GetAtt'][0];
        const dlq = queues.find(([qid]) => qid === dlqId);
        assert.ok(dlq, 'DLQ in the stack');
        assert.ok(dlq[1].Properties.MessageRetentionPeriod > q.Properties.MessageRetentionPeriod);
      }
      for (const c of def.queueConsumers) {
        const q = c.queue;
        template.hasResourceProperties('AWS::SQS::Queue', {
          VisibilityTimeout: q.visibilityTimeoutSecs,
          MessageRetentionPeriod: q.retentionSecs,
          RedrivePolicy: { maxReceiveCount: q.maxReceiveCount, deadLetterTargetArn: s.arn(stack.deadLetterQueues[q.logical]) },
        });
        template.hasResourceProperties('AWS::SQS::Queue', { MessageRetentionPeriod: q.dlqRetentionSecs, RedrivePolicy: Match.absent() });
      }
      for (const c of def.streamConsumers) {
        const id = s.arn(stack.onFailureQueues[c.name])['Fn::GetAtt'][0];
        assert.equal(template.findResources('AWS::SQS::Queue')[id].Properties.MessageRetentionPeriod, 1209600, 'on-failure: 14 days');
      }
    });

    test('the ledger and every work queue and DLQ are named after the stack, as `jobstream run --stack` finds them', () => {
      const tables = s.resources('AWS::DynamoDB::Table').map((t) => t.Properties.TableName);
      assert.ok(tables.includes(stackResourceName(defs.stackNames.ledger, 'Test')), `ledger Test-ledger among ${tables.join(', ')}`);
      assert.equal(stackResourceName(defs.stackNames.ledger, 'Test'), 'Test-ledger');
      const names = s.resources('AWS::SQS::Queue').map((q) => q.Properties.QueueName);
      for (const c of def.queueConsumers) {
        for (const n of [c.queue.name, c.queue.dlqName]) {
          const want = stackResourceName(defs.stackNames.queue, 'Test', n);
          assert.equal(want, `Test-${n}`);
          assert.ok(names.includes(want), `queue ${want} among ${names.join(', ')}`);
        }
      }
    });

    test('every queue: SSE, TLS only', () => {
      const queues = resources('AWS::SQS::Queue');
      for (const q of queues) assert.equal(q.Properties.SqsManagedSseEnabled, true);
      const policies = resources('AWS::SQS::QueuePolicy');
      assert.equal(policies.length, queues.length);
      for (const p of policies) {
        const deny = p.Properties.PolicyDocument.Statement.find((st: any) => st.Effect === 'Deny');
        assert.deepEqual(deny.Condition, { Bool: { 'aws:SecureTransport': 'false' } });
      }
    });

    test('functions: provided.al2023, x86_64 by default, JSON logs with 30-day retention, timeouts', () => {
      const fns = resources('AWS::Lambda::Function');
      assert.equal(fns.length, consumers.length);
      const all = template.findResources('AWS::Lambda::Function');
      for (const c of consumers) {
        const f = all[s.ref(fnOf(c.name)).Ref];
        assert.ok(f, c.name);
        assert.equal(f.Properties.Runtime, 'provided.al2023');
        assert.deepEqual(f.Properties.Architectures, ['x86_64']);
        assert.equal(f.Properties.LoggingConfig.LogFormat, 'JSON');
        assert.ok(f.Properties.LoggingConfig.LogGroup.Ref.startsWith(`${constructName(c.name)}Logs`), 'its own log group');
        assert.ok(f.Properties.Description.includes(c.binary), 'the binary is named in the description');
        assert.equal(f.Properties.Timeout, 'queue' in c ? c.queue.consumerTimeoutSecs : c.settings.timeoutSecs);
        assert.equal(f.Properties.MemorySize, 'queue' in c ? QUEUE_CONSUMER_MEMORY_MB : c.settings.memoryMb);
      }
      const groups = resources('AWS::Logs::LogGroup');
      assert.equal(groups.length, consumers.length);
      for (const g of groups) assert.equal(g.Properties.RetentionInDays, 30);
    });

    test('function environment: MODEL, TABLE_NAME, LEDGER_TABLE_NAME, QUEUE_URL_* per sendsTo, QUEUE for workers', () => {
      const all = template.findResources('AWS::Lambda::Function');
      for (const c of consumers) {
        const vars = all[s.ref(fnOf(c.name)).Ref].Properties.Environment.Variables;
        const expected: Record<string, unknown> = {
          MODEL: def.name,
          TABLE_NAME: s.ref(stack.table),
          LEDGER_TABLE_NAME: s.ref(stack.ledger),
        };
        for (const q of c.grant.sendsTo) expected[queueEnv(q)] = s.ref(stack.queues[q]);
        if ('queue' in c) expected.QUEUE = c.queue.logical;
        assert.deepEqual(vars, expected, c.name);
      }
    });

    test('RunnerPolicy: exactly the definition\'s runner grant on this stack\'s own resources, its ARN an output', () => {
      const policies = resources('AWS::IAM::ManagedPolicy');
      assert.equal(policies.length, 1, 'one managed policy: the runner\'s');
      const uniq = (xs: string[]): string[] => sorted([...new Set(xs)]);
      const got = new Map([...grants(policies[0].Properties.PolicyDocument.Statement)].map(([k, v]) => [k, uniq(v)]));
      const r = def.runner;
      const want = new Map<string, string[]>();
      const add = (resource: unknown, actions: string[]): void => {
        if (actions.length === 0) return;
        const key = JSON.stringify(resource);
        want.set(key, uniq([...(want.get(key) ?? []), ...actions]));
      };
      add(tableArn, r.tableActions);
      if (def.table.gsis.length > 0) add({ 'Fn::Join': ['', [tableArn, '/index/*']] }, r.indexActions);
      add(s.arn(stack.table, 'StreamArn'), r.streamActions);
      add(ledgerArn, r.ledgerActions);
      for (const q of Object.values(stack.queues)) add(s.arn(q), r.queueActions);
      for (const logical of r.sendsTo) add(s.arn(stack.queues[logical]), ['sqs:SendMessage']);
      for (const q of Object.values(stack.deadLetterQueues)) add(s.arn(q), r.deadLetterActions);
      for (const q of Object.values(stack.onFailureQueues)) add(s.arn(q), r.onFailureActions);
      assert.deepEqual(got, want);
      // Never wider than the functions and their mappings together.
      for (const c of consumers) {
        for (const a of c.grant.tableActions) assert.ok(r.tableActions.includes(a), `${c.name}: ${a} in the runner's table actions`);
        for (const a of c.grant.ledgerActions) assert.ok(r.ledgerActions.includes(a), `${c.name}: ${a} in the runner's ledger actions`);
      }
      template.hasOutput('RunnerPolicyArn', { Value: s.ref(stack.runnerPolicy) });
    });

    test('least privilege: each role gets exactly what its definition lists, no wildcard actions', () => {
      for (const role of resources('AWS::IAM::Role')) {
        assert.equal(role.Properties.ManagedPolicyArns, undefined, 'no managed policies');
      }
      const statements = resources('AWS::IAM::Policy').flatMap((p) => p.Properties.PolicyDocument.Statement as Statement[]);
      assert.ok(statements.length > 0);
      for (const st of statements) {
        const actions = [st.Action].flat();
        for (const a of actions) assert.ok(!a.includes('*'), `wildcard action ${a}`);
        if ([st.Resource].flat().includes('*')) {
          assert.deepEqual(actions, ['dynamodb:ListStreams'], 'only ListStreams may use Resource *');
        }
      }
      for (const c of consumers) {
        const fn = fnOf(c.name);
        assert.ok(s.ref(fn.role!).Ref.startsWith(`${constructName(c.name)}Role`), 'role id from the consumer name');
        const g = grants(statementsOf(s, fn));
        const take = (resource: unknown): string[] | undefined => {
          const key = typeof resource === 'string' && resource.startsWith('{') ? resource : JSON.stringify(resource);
          const v = g.get(key);
          g.delete(key);
          return v;
        };
        assert.deepEqual(take(tableArn), sorted(c.grant.tableActions), `${c.name}: table actions`);
        assert.deepEqual(take(ledgerArn), c.grant.ledgerActions.length > 0 ? sorted(c.grant.ledgerActions) : undefined, `${c.name}: ledger actions`);
        const indexes = def.table.gsis.length > 0 && c.grant.indexActions.length > 0 ? sorted(c.grant.indexActions) : undefined;
        assert.deepEqual(take(indexArn(tableArn)), indexes, `${c.name}: index/* actions`);
        const logGroup = template.findResources('AWS::Lambda::Function')[s.ref(fn).Ref].Properties.LoggingConfig.LogGroup.Ref;
        assert.deepEqual(take({ 'Fn::GetAtt': [logGroup, 'Arn'] }), ['logs:CreateLogStream', 'logs:PutLogEvents']);
        const send = ['sqs:GetQueueAttributes', 'sqs:GetQueueUrl', 'sqs:SendMessage'];
        const receive = ['sqs:ChangeMessageVisibility', 'sqs:DeleteMessage', 'sqs:GetQueueAttributes', 'sqs:GetQueueUrl', 'sqs:ReceiveMessage'];
        const queueGrants = new Map<string, string[]>();
        for (const q of c.grant.sendsTo) queueGrants.set(q, [...send]);
        if ('queue' in c) {
          queueGrants.set(c.queue.logical, [...(queueGrants.get(c.queue.logical) ?? []), ...receive].sort());
        } else {
          assert.deepEqual(take(s.arn(stack.onFailureQueues[c.name])), send, `${c.name}: on-failure destination`);
          assert.deepEqual(take(s.arn(stack.table, 'StreamArn')), ['dynamodb:DescribeStream', 'dynamodb:GetRecords', 'dynamodb:GetShardIterator']);
          assert.deepEqual(take('*'), ['dynamodb:ListStreams']);
        }
        for (const [q, actions] of queueGrants) {
          assert.deepEqual(take(s.arn(stack.queues[q])), actions, `${c.name}: queue ${q}`);
        }
        assert.deepEqual([...g.keys()], [], `${c.name}: nothing else`);
      }
    });

    test('alarms: errors, throttles and bad input per function, iterator age and on-failure depth per stream consumer, DLQ depth per queue', () => {
      const alarms = resources('AWS::CloudWatch::Alarm');
      const metrics = alarms.map((a) => a.Properties.MetricName).sort();
      const expected = [
        ...consumers.flatMap(() => ['Errors', 'Throttles', defs.metrics.badInput]),
        ...def.streamConsumers.flatMap(() => ['IteratorAge', 'ApproximateNumberOfMessagesVisible']),
        ...def.queueConsumers.map(() => 'ApproximateNumberOfMessagesVisible'),
      ].sort();
      assert.deepEqual(metrics, expected);
      const topic = s.ref(stack.alarmTopic);
      for (const a of alarms) {
        assert.deepEqual(a.Properties.AlarmActions, [topic]);
        assert.equal(a.Properties.ComparisonOperator, 'GreaterThanThreshold');
      }
      for (const c of consumers) {
        const bad = alarms.filter(
          (a) => a.Properties.MetricName === defs.metrics.badInput && JSON.stringify(a.Properties.Dimensions) === JSON.stringify([{ Name: defs.metrics.dimension, Value: c.name }]),
        );
        assert.equal(bad.length, 1, `${c.name}: one BadInput alarm on its processor's metric`);
        assert.equal(bad[0].Properties.Namespace, defs.metrics.namespace);
        assert.equal(bad[0].Properties.Statistic, 'Sum');
        assert.equal(bad[0].Properties.Threshold, 0);
      }
      assert.ok(!metrics.includes('FailedRecord'), 'FailedRecord counts retried failures too: no alarm on it');
    });

    test('alarms are deliverable: the topic uses a customer-managed key whose policy lets CloudWatch use it', () => {
      const topic = resources('AWS::SNS::Topic')[0].Properties;
      assert.deepEqual(topic.KmsMasterKeyId, s.arn(stack.alarmKey));
      const keys = resources('AWS::KMS::Key');
      assert.equal(keys.length, 1);
      assert.equal(keys[0].Properties.EnableKeyRotation, true);
      const st = (keys[0].Properties.KeyPolicy.Statement as any[]).find((x) => JSON.stringify(x.Principal) === JSON.stringify({ Service: 'cloudwatch.amazonaws.com' }));
      assert.ok(st, 'a key policy statement for CloudWatch');
      assert.deepEqual([st.Action].flat().sort(), ['kms:Decrypt', 'kms:GenerateDataKey*']);
      const topicPolicies = resources('AWS::SNS::TopicPolicy');
      const publish = topicPolicies.flatMap((p) => p.Properties.PolicyDocument.Statement as any[]).find((x) => x.Effect === 'Allow' && JSON.stringify(x.Principal) === JSON.stringify({ Service: 'cloudwatch.amazonaws.com' }));
      assert.ok(publish, 'the topic policy lets CloudWatch publish');
      assert.equal(publish.Action, 'sns:Publish');
      assert.equal(JSON.stringify(resources('AWS::SNS::Topic')).includes('alias/aws/sns'), false);
    });

    test('cdk-nag AwsSolutions: no unsuppressed finding', () => {
      assert.deepEqual(nagFindings(stack), []);
    });

    test('arm64 is a parameter; deletion protection can be turned off', () => {
      const arm = synth({ model: def.name, defs: modelDefs, architecture: lambda.Architecture.ARM_64, deletionProtection: false });
      const fns = arm.resources('AWS::Lambda::Function');
      assert.equal(fns.length, consumers.length);
      for (const f of fns) assert.deepEqual(f.Properties.Architectures, ['arm64']);
      for (const t of arm.resources('AWS::DynamoDB::Table')) assert.equal(t.Properties.DeletionProtectionEnabled, false);
    });

    test('attaching to an existing table creates no model table and reads its stream', () => {
      const streamArn = 'arn:aws:dynamodb:eu-west-1:123456789012:table/apps/stream/2026-01-01T00:00:00.000';
      const t = synth({ model: def.name, defs: modelDefs, existingTable: { tableName: 'apps', streamArn } });
      const tables = t.resources('AWS::DynamoDB::Table');
      assert.equal(tables.length, 1, 'only the ledger');
      assert.equal(tables[0].Properties.TableName, 'Test-ledger');
      const streamMappings = t.resources('AWS::Lambda::EventSourceMapping').filter((m) => m.Properties.StartingPosition);
      assert.equal(streamMappings.length, def.streamConsumers.length);
      for (const m of streamMappings) assert.equal(m.Properties.EventSourceArn, streamArn);
      for (const c of consumers) {
        const policyText = JSON.stringify(statementsOf(t, t.stack.functions[c.name]));
        if (c.grant.tableActions.length > 0) assert.ok(policyText.includes(':table/apps"'), `${c.name}: policy names the existing table`);
      }
      for (const f of t.resources('AWS::Lambda::Function')) assert.equal(f.Properties.Environment.Variables.TABLE_NAME, 'apps');
      assert.deepEqual(nagFindings(t.stack), [], 'cdk-nag clean when attached');
    });

    test('redeploy after cdk destroy: the retained table and ledger are attached, nothing is created under a taken name', () => {
      // `cdk destroy` retains both tables (RemovalPolicy.RETAIN); a second
      // deploy creating them again would fail with "already exists".
      const tables = resources('AWS::DynamoDB::Table');
      assert.ok(tables.length > 0);
      for (const t of Object.values(template.findResources('AWS::DynamoDB::Table')) as any[]) {
        assert.equal(t.DeletionPolicy, 'Retain');
        assert.equal(t.UpdateReplacePolicy, 'Retain');
      }
      const streamArn = 'arn:aws:dynamodb:eu-west-1:123456789012:table/apps/stream/2026-01-01T00:00:00.000';
      const r = synth({ model: def.name, defs: modelDefs, existingTable: { tableName: 'apps', streamArn }, existingLedgerTableName: 'Test-ledger' });
      assert.equal(r.resources('AWS::DynamoDB::Table').length, 0, 'no table created');
      for (const c of consumers) {
        const policyText = JSON.stringify(statementsOf(r, r.stack.functions[c.name]));
        if (c.grant.ledgerActions.length > 0) assert.ok(policyText.includes(':table/Test-ledger"'), `${c.name}: policy names the retained ledger`);
      }
      for (const f of r.resources('AWS::Lambda::Function')) assert.equal(f.Properties.Environment.Variables.LEDGER_TABLE_NAME, 'Test-ledger');
      assert.deepEqual(nagFindings(r.stack), [], 'cdk-nag clean when redeployed onto retained tables');
    });
  });
}

describe('a model file (-c modelFile=PATH)', () => {
  // The definition comes from `jobstream tables --model-file PATH`; a stand-in
  // binary prints a definition here, so the test needs no Rust build.
  const defs = loadTableDefs();
  const fileDef: ModelDef = { ...defs.models[0], name: 'from-file', about: 'a model file' };
  const printed: TableDefs = { ...defs, defaultModel: fileDef.name, models: [fileDef] };
  const dir = mkdtempSync(path.join(tmpdir(), 'jobstream-'));
  const bin = path.join(dir, 'jobstream');
  writeFileSync(path.join(dir, 'defs.json'), JSON.stringify(printed));
  writeFileSync(
    bin,
    `#!/bin/sh\n[ "$1" = tables ] && [ "$2" = --model-file ] && [ -n "$3" ] || exit 2\ncat ${JSON.stringify(path.join(dir, 'defs.json'))}\n`,
  );
  chmodSync(bin, 0o755);

  test('the definition is what `jobstream tables --model-file` prints, never parsed from YAML here', () => {
    const saved = process.env.JOBSTREAM_BIN;
    process.env.JOBSTREAM_BIN = bin;
    try {
      assert.deepEqual(tableDefsOfModelFile('../models/hr.yaml'), printed);
    } finally {
      if (saved === undefined) delete process.env.JOBSTREAM_BIN;
      else process.env.JOBSTREAM_BIN = saved;
    }
  });

  test('an index keyed by its partition key alone (`sk` absent) deploys without a sort key', () => {
    // As `jobstream tables --model-file` prints `gsis: - { name: byEmail, pk: emailKey, project: keys }`.
    const lookup: ModelDef = {
      ...fileDef,
      table: {
        ...fileDef.table,
        gsis: [{ name: 'byEmail', pk: 'emailKey', projection: { projectionType: 'KEYS_ONLY' } }],
      },
    };
    const s = synth({ model: lookup.name, defs: { ...printed, models: [lookup] } });
    s.template.hasResourceProperties('AWS::DynamoDB::Table', {
      TableName: lookup.table.name,
      GlobalSecondaryIndexes: [
        {
          IndexName: 'byEmail',
          KeySchema: [{ AttributeName: 'emailKey', KeyType: 'HASH' }],
          Projection: { ProjectionType: 'KEYS_ONLY' },
        },
      ],
    });
    const table = s.resources('AWS::DynamoDB::Table').find((t) => t.Properties.TableName === lookup.table.name)!;
    const defined = table.Properties.AttributeDefinitions.map((a: { AttributeName: string }) => a.AttributeName);
    assert.deepEqual(sorted(defined), sorted([lookup.table.pk, lookup.table.sk, 'emailKey']));
  });

  test('every function gets MODEL_FILE naming the bundled file', () => {
    const s = synth({ model: fileDef.name, defs: printed, modelFile: '../models/hr.yaml' });
    const fns = s.resources('AWS::Lambda::Function').filter((f) => f.Properties.Environment?.Variables?.TABLE_NAME);
    assert.ok(fns.length > 0);
    for (const f of fns) {
      assert.equal(f.Properties.Environment.Variables.MODEL_FILE, `/var/task/${BUNDLED_MODEL_FILE}`);
      assert.equal(f.Properties.Environment.Variables.MODEL, fileDef.name);
    }
    assert.equal(s.stack.modelFile, path.resolve('../models/hr.yaml'));
  });

  test('the model file reaches the package without a host path, as under Docker bundling', () => {
    // cargo-lambda-cdk runs the hooks in its image with the workspace at
    // /asset-input and the package at /asset-output; a host path of the
    // model file does not exist there. Run the command the hook gives for
    // Docker (its output dir swapped for a temporary one), from an empty
    // directory: the file arrives byte for byte.
    const modelFile = path.resolve('../models/hr.yaml');
    const hooks = modelFileHooks(modelFile);
    assert.deepEqual(hooks.beforeBundling('/asset-input', '/asset-output'), []);
    const docker = hooks.afterBundling('/asset-input', '/asset-output');
    assert.ok(docker.length > 0);
    for (const cmd of docker) {
      assert.ok(!cmd.includes(modelFile) && !cmd.includes('models/hr.yaml'), `no host path in: ${cmd.slice(0, 120)}`);
      assert.ok(cmd.includes(`/asset-output/${BUNDLED_MODEL_FILE}`));
    }
    const out = mkdtempSync(path.join(tmpdir(), 'jobstream-asset-output-'));
    const empty = mkdtempSync(path.join(tmpdir(), 'jobstream-asset-input-'));
    for (const cmd of docker) {
      execFileSync('bash', ['-c', cmd.replaceAll('/asset-output', out)], { cwd: empty });
    }
    assert.deepEqual(readFileSync(path.join(out, BUNDLED_MODEL_FILE)), readFileSync(modelFile));
  });
});
