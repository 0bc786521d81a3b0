// Synthesises the stack offline (bundling skipped) and asserts on the template.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { App, Aspects } from 'aws-cdk-lib';
import { Annotations, Match, Template } from 'aws-cdk-lib/assertions';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import { AwsSolutionsChecks } from 'cdk-nag';

import { JobstreamStack, type JobstreamStackProps } from '../lib/jobstream-stack.ts';
import { loadTableDefs } from '../lib/tables.ts';

function synth(props: JobstreamStackProps = {}): { stack: JobstreamStack; template: Template } {
  const app = new App({ context: { 'aws:cdk:bundling-stacks': [] } });
  const stack = new JobstreamStack(app, 'Test', props);
  Aspects.of(stack).add(new AwsSolutionsChecks());
  // Annotations are added when the app is prepared: synthesise first.
  app.synth();
  return { stack, template: Template.fromStack(stack) };
}

const { stack, template } = synth();
const defs = loadTableDefs();

type Resource = { Type: string; Properties: Record<string, any> };
const resources = (type: string): Resource[] => Object.values(template.findResources(type)) as Resource[];

test('the model table comes from tables.json: keys, GSIs, stream, PITR, deletion protection', () => {
  template.hasResourceProperties('AWS::DynamoDB::Table', {
    TableName: defs.tracker.name,
    KeySchema: [
      { AttributeName: 'PK', KeyType: 'HASH' },
      { AttributeName: 'SK', KeyType: 'RANGE' },
    ],
    GlobalSecondaryIndexes: defs.tracker.gsis.map((g) =>
      Match.objectLike({
        IndexName: g.name,
        KeySchema: [
          { AttributeName: g.pk, KeyType: 'HASH' },
          { AttributeName: g.sk, KeyType: 'RANGE' },
        ],
        Projection: { ProjectionType: 'ALL' },
      }),
    ),
    StreamSpecification: { StreamViewType: 'NEW_AND_OLD_IMAGES' },
    PointInTimeRecoverySpecification: { PointInTimeRecoveryEnabled: true },
    DeletionProtectionEnabled: true,
    BillingMode: 'PAY_PER_REQUEST',
  });
});

test('the ledger has TTL and no stream', () => {
  const ledgers = resources('AWS::DynamoDB::Table').filter((t) => t.Properties.TableName === 'Test-ledger');
  assert.equal(ledgers.length, 1);
  const ledger = ledgers[0].Properties;
  assert.deepEqual(ledger.TimeToLiveSpecification, { AttributeName: 'ttl', Enabled: true });
  assert.equal(ledger.StreamSpecification, undefined);
  assert.deepEqual(ledger.PointInTimeRecoverySpecification, { PointInTimeRecoveryEnabled: true });
});

test('at most two event source mappings read the stream, each as SPEC §2.9 requires', () => {
  const mappings = resources('AWS::Lambda::EventSourceMapping');
  assert.equal(mappings.length, 2);
  for (const m of mappings) {
    const p = m.Properties;
    assert.deepEqual(p.FunctionResponseTypes, ['ReportBatchItemFailures']);
    assert.equal(p.BisectBatchOnFunctionError, true);
    assert.equal(p.MaximumRetryAttempts, 10);
    assert.equal(p.MaximumRecordAgeInSeconds, 86400);
    assert.equal(p.StartingPosition, 'TRIM_HORIZON');
    assert.equal(p.BatchSize, 100);
    assert.ok(p.DestinationConfig.OnFailure.Destination['Fn::GetAtt'][0].includes('OnFailure'));
    assert.deepEqual(p.EventSourceArn, { 'Fn::GetAtt': [stack.getLogicalId((stack.table as any).node.defaultChild), 'StreamArn'] });
  }
  const patterns = mappings.map((m) => m.Properties.FilterCriteria.Filters.map((f: { Pattern: string }) => JSON.parse(f.Pattern)));
  const prefixes = patterns.map((ps) => ps.map((p: any) => p.dynamodb.Keys.SK.S[0].prefix).sort());
  assert.deepEqual(prefixes.sort(), [['APP#'], ['APP#', 'STAGE#']]);
});

test('functions: provided.al2023, x86_64 by default, JSON logs with retention, table names in env', () => {
  const fns = resources('AWS::Lambda::Function');
  assert.equal(fns.length, 2);
  for (const f of fns) {
    assert.equal(f.Properties.Runtime, 'provided.al2023');
    assert.deepEqual(f.Properties.Architectures, ['x86_64']);
    assert.equal(f.Properties.LoggingConfig.LogFormat, 'JSON');
    assert.deepEqual(Object.keys(f.Properties.Environment.Variables).sort(), ['LEDGER_TABLE_NAME', 'MODEL', 'TABLE_NAME']);
    assert.equal(f.Properties.Environment.Variables.MODEL, 'tracker');
    assert.equal(f.Properties.Timeout, 60);
  }
  for (const g of resources('AWS::Logs::LogGroup')) {
    assert.equal(g.Properties.RetentionInDays, 30);
  }
});

test('arm64 is a parameter', () => {
  const { template: arm } = synth({ architecture: lambda.Architecture.ARM_64 });
  for (const f of Object.values(arm.findResources('AWS::Lambda::Function')) as Resource[]) {
    assert.deepEqual(f.Properties.Architectures, ['arm64']);
  }
});

test('least privilege: named actions, named resources, no managed policies', () => {
  for (const role of resources('AWS::IAM::Role')) {
    assert.equal(role.Properties.ManagedPolicyArns, undefined, 'no managed policies');
  }
  const statements = resources('AWS::IAM::Policy').flatMap((p) => p.Properties.PolicyDocument.Statement);
  assert.ok(statements.length > 0);
  for (const s of statements) {
    const actions: string[] = [s.Action].flat();
    for (const a of actions) {
      assert.ok(!a.includes('*'), `wildcard action ${a}`);
    }
    const res = [s.Resource].flat();
    if (res.includes('*')) {
      assert.deepEqual(actions, ['dynamodb:ListStreams'], 'only ListStreams may use Resource *');
    }
  }
  const actionsOf = (fnName: string): string[] => {
    const policy = resources('AWS::IAM::Policy').find((p) => JSON.stringify(p.Properties.Roles).includes(`${fnName}Role`));
    assert.ok(policy, fnName);
    return policy.Properties.PolicyDocument.Statement.flatMap((s: any) => [s.Action].flat()).sort();
  };
  assert.ok(!actionsOf('Derive').includes('dynamodb:BatchWriteItem'), 'derive never batch-writes');
  assert.ok(!actionsOf('Derive').includes('dynamodb:Query'));
  assert.ok(actionsOf('History').includes('dynamodb:BatchWriteItem'), 'history cascades');
});

test('on-failure queues: encrypted, TLS only, 14 days', () => {
  const queues = resources('AWS::SQS::Queue');
  assert.equal(queues.length, 2);
  for (const q of queues) {
    assert.equal(q.Properties.MessageRetentionPeriod, 1209600);
    assert.equal(q.Properties.SqsManagedSseEnabled, true);
  }
  const policies = resources('AWS::SQS::QueuePolicy');
  assert.equal(policies.length, 2);
  for (const p of policies) {
    const deny = p.Properties.PolicyDocument.Statement.find((s: any) => s.Effect === 'Deny');
    assert.deepEqual(deny.Condition, { Bool: { 'aws:SecureTransport': 'false' } });
  }
});

test('alarms: iterator age, errors, throttles, on-failure depth, all notifying the topic', () => {
  const alarms = resources('AWS::CloudWatch::Alarm');
  const metrics = alarms.map((a) => a.Properties.MetricName).sort();
  assert.deepEqual(metrics, [
    'ApproximateNumberOfMessagesVisible',
    'ApproximateNumberOfMessagesVisible',
    'Errors',
    'Errors',
    'IteratorAge',
    'IteratorAge',
    'Throttles',
    'Throttles',
  ]);
  for (const a of alarms) {
    assert.equal(a.Properties.AlarmActions.length, 1);
    assert.equal(a.Properties.ComparisonOperator, 'GreaterThanThreshold');
  }
  template.hasResourceProperties('AWS::SNS::Topic', { KmsMasterKeyId: Match.anyValue() });
});

test('attaching to an existing table creates no model table and reads its stream', () => {
  const streamArn = 'arn:aws:dynamodb:eu-west-1:123456789012:table/apps/stream/2026-01-01T00:00:00.000';
  const { template: t } = synth({ existingTable: { tableName: 'apps', streamArn } });
  const tables = Object.values(t.findResources('AWS::DynamoDB::Table')) as Resource[];
  assert.equal(tables.length, 1, 'only the ledger');
  for (const m of Object.values(t.findResources('AWS::Lambda::EventSourceMapping')) as Resource[]) {
    assert.equal(m.Properties.EventSourceArn, streamArn);
  }
  const policyText = JSON.stringify(t.findResources('AWS::IAM::Policy'));
  assert.ok(policyText.includes(':table/apps'), 'policies name the existing table');
});

test('cdk-nag AwsSolutions: no unsuppressed finding', () => {
  const errors = Annotations.fromStack(stack).findError('*', Match.stringLikeRegexp('AwsSolutions-.*'));
  assert.deepEqual(errors.map((e) => e.entry.data), []);
  const warnings = Annotations.fromStack(stack).findWarning('*', Match.stringLikeRegexp('AwsSolutions-.*'));
  assert.deepEqual(warnings.map((e) => e.entry.data), []);
});

test('cdk-nag is really checking: a non-compliant queue is reported', async () => {
  const { Stack } = await import('aws-cdk-lib');
  const sqs = await import('aws-cdk-lib/aws-sqs');
  const app = new App();
  const probe = new Stack(app, 'Probe');
  new sqs.Queue(probe, 'Plain');
  Aspects.of(probe).add(new AwsSolutionsChecks());
  app.synth();
  const errors = Annotations.fromStack(probe).findError('*', Match.stringLikeRegexp('AwsSolutions-SQS4.*'));
  assert.ok(errors.length > 0, 'SQS4 (TLS) reported on a plain queue');
});

// ---- job board (seed 000) ----------------------------------------------
const board = synth({ model: 'jobboard' });

test('job board: table from tables.json with TTL, one stream consumer, two queue consumers', () => {
  board.template.hasResourceProperties('AWS::DynamoDB::Table', {
    TableName: defs.jobboard.name,
    KeySchema: [
      { AttributeName: 'pk', KeyType: 'HASH' },
      { AttributeName: 'sk', KeyType: 'RANGE' },
    ],
    TimeToLiveSpecification: { AttributeName: 'ttl', Enabled: true },
    StreamSpecification: { StreamViewType: 'NEW_AND_OLD_IMAGES' },
  });
  const mappings = Object.values(board.template.findResources('AWS::Lambda::EventSourceMapping')) as Resource[];
  const streamMappings = mappings.filter((m) => m.Properties.StartingPosition);
  const queueMappings = mappings.filter((m) => !m.Properties.StartingPosition);
  assert.equal(streamMappings.length, 1, 'at most two stream consumers; the job board needs one');
  assert.equal(queueMappings.length, 2);
  for (const m of queueMappings) {
    assert.deepEqual(m.Properties.FunctionResponseTypes, ['ReportBatchItemFailures']);
    assert.equal(m.Properties.BatchSize, 10);
  }
  const filters = streamMappings[0].Properties.FilterCriteria.Filters.map((f: { Pattern: string }) => JSON.parse(f.Pattern).dynamodb.Keys.sk.S[0]);
  assert.deepEqual(filters, [{ prefix: 'j#' }, { prefix: 'r#' }, 'profile']);
  const fns = Object.values(board.template.findResources('AWS::Lambda::Function')) as Resource[];
  assert.equal(fns.length, 3);
  for (const f of fns) {
    assert.equal(f.Properties.Environment.Variables.MODEL, 'jobboard');
  }
  const derive = fns.find((f) => f.Properties.Environment.Variables.SUGGESTIONS_QUEUE_URL);
  assert.ok(derive && derive.Properties.Environment.Variables.MATCHES_QUEUE_URL, 'derive knows both queues');
});

test('job board queues: DLQ, maxReceiveCount >= 5, visibility >= 6 x timeout, DLQ outlives the queue', () => {
  const queues = Object.entries(board.template.findResources('AWS::SQS::Queue')) as [string, Resource][];
  const work = queues.filter(([, q]) => q.Properties.RedrivePolicy);
  assert.equal(work.length, 2);
  const fns = Object.values(board.template.findResources('AWS::Lambda::Function')) as Resource[];
  const maxTimeout = Math.max(...fns.map((f) => f.Properties.Timeout));
  for (const [, q] of work) {
    assert.ok(q.Properties.RedrivePolicy.maxReceiveCount >= 5);
    assert.ok(q.Properties.VisibilityTimeout >= 6 * 30, 'visibility >= 6 x the consumer timeout');
    const dlqId = q.Properties.RedrivePolicy.deadLetterTargetArn['Fn::GetAtt'][0];
    const dlq = queues.find(([id]) => id === dlqId);
    assert.ok(dlq, 'DLQ in the stack');
    assert.ok(dlq[1].Properties.MessageRetentionPeriod > q.Properties.MessageRetentionPeriod);
  }
  assert.ok(maxTimeout <= 60);
});

test('job board least privilege: consumers only get what they use', () => {
  const policies = Object.values(board.template.findResources('AWS::IAM::Policy')) as Resource[];
  const actionsOf = (name: string): string[] => {
    const p = policies.find((x) => JSON.stringify(x.Properties.Roles).includes(`${name}Role`));
    assert.ok(p, name);
    return p.Properties.PolicyDocument.Statement.flatMap((s: any) => [s.Action].flat());
  };
  assert.ok(actionsOf('Matches').includes('dynamodb:ConditionCheckItem'));
  assert.ok(!actionsOf('Matches').includes('dynamodb:BatchWriteItem'));
  assert.ok(!actionsOf('Suggestions').includes('dynamodb:PutItem'), 'suggestions write through BatchWriteItem');
  assert.ok(actionsOf('Derive').includes('sqs:SendMessage'));
  assert.ok(!actionsOf('Derive').some((a) => a.startsWith('dynamodb:Put')), 'derive only updates');
  for (const p of policies) {
    for (const s of p.Properties.PolicyDocument.Statement) {
      for (const a of [s.Action].flat() as string[]) assert.ok(!a.includes('*'), a);
      if ([s.Resource].flat().includes('*')) assert.deepEqual([s.Action].flat(), ['dynamodb:ListStreams']);
    }
  }
  const alarms = (Object.values(board.template.findResources('AWS::CloudWatch::Alarm')) as Resource[]).map((a) => a.Properties.MetricName);
  assert.equal(alarms.filter((m) => m === 'ApproximateNumberOfMessagesVisible').length, 3, 'two DLQs and the on-failure queue');
  assert.equal(alarms.filter((m) => m === 'Errors').length, 3);
  const errors = Annotations.fromStack(board.stack).findError('*', Match.stringLikeRegexp('AwsSolutions-.*'));
  assert.deepEqual(errors.map((e) => e.entry.data), []);
});
