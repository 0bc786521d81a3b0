import * as path from 'node:path';
import { fileURLToPath } from 'node:url';

import { Duration, RemovalPolicy, Stack, type StackProps } from 'aws-cdk-lib';
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import * as actions from 'aws-cdk-lib/aws-cloudwatch-actions';
import * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as kms from 'aws-cdk-lib/aws-kms';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import { DynamoEventSource, SqsDlq, SqsEventSource } from 'aws-cdk-lib/aws-lambda-event-sources';
import * as logs from 'aws-cdk-lib/aws-logs';
import * as sns from 'aws-cdk-lib/aws-sns';
import * as subs from 'aws-cdk-lib/aws-sns-subscriptions';
import * as sqs from 'aws-cdk-lib/aws-sqs';
import { RustFunction } from 'cargo-lambda-cdk';
import { NagSuppressions } from 'cdk-nag';
import type { Construct } from 'constructs';

import { loadTableDefs, type QueueDef, type TableDef } from './tables.ts';

/** The workspace root: RustFunction needs the workspace manifest so that `shared/` is visible. */
export const WORKSPACE_MANIFEST = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', '..', 'Cargo.toml');

export interface ExistingTable {
  /** Name of a table that already exists (with a NEW_AND_OLD_IMAGES stream). */
  readonly tableName: string;
  /** Its stream ARN. */
  readonly streamArn: string;
}

export interface JobstreamStackProps extends StackProps {
  /** The model: `tracker` (seed 001, default) or `jobboard` (seed 000). */
  readonly model?: 'tracker' | 'jobboard';
  /** Lambda architecture; x86_64 by default (arm64 needs the aarch64 Rust target installed). */
  readonly architecture?: lambda.Architecture;
  /** Attach to this table instead of creating one. */
  readonly existingTable?: ExistingTable;
  /** Name of the table to create (default: the model's). */
  readonly tableName?: string;
  /** Deletion protection of the tables created here (default true). */
  readonly deletionProtection?: boolean;
  /** Email address subscribed to the alarm topic. */
  readonly alarmEmail?: string;
  /** Workspace Cargo.toml (default: this repository's). */
  readonly manifestPath?: string;
}

/** Settings of every stream consumer (SPEC §2.9). */
export const STREAM_CONSUMER = {
  batchSize: 100,
  retryAttempts: 10,
  maxRecordAge: Duration.hours(24),
  timeout: Duration.seconds(60),
  memorySize: 256,
} as const;

interface Consumer {
  readonly name: string;
  readonly description: string;
  /** The Rust binary (a member crate of the workspace). */
  readonly binary: string;
  /** DynamoDB actions on the model table and on the ledger. */
  readonly tableActions: string[];
  readonly ledgerActions: string[];
  /** Query on the table's GSI1. */
  readonly queryGsi1?: boolean;
}

interface StreamConsumer extends Consumer {
  /** Sort-key conditions of the items this consumer handles (event filter). */
  readonly skFilters: ({ prefix: string } | { equals: string })[];
  /** Logical queues it sends jobs to. */
  readonly sendsTo?: string[];
}

interface QueueConsumer extends Consumer {
  /** The logical queue it consumes (see tables.json `jobboardQueues`). */
  readonly queue: string;
}

const TRACKER_CONSUMERS: StreamConsumer[] = [
  {
    name: 'history',
    binary: 'history',
    description: 'jobstream history: HIST# entries, historySequence, cascade delete',
    skFilters: [{ prefix: 'APP#' }, { prefix: 'STAGE#' }],
    // PutItem: entries (in transactions); UpdateItem: historySequence;
    // Query + BatchWriteItem: cascade delete.
    tableActions: ['dynamodb:BatchWriteItem', 'dynamodb:PutItem', 'dynamodb:Query', 'dynamodb:UpdateItem'],
    // Markers and running state (put, delete parts, load).
    ledgerActions: ['dynamodb:DeleteItem', 'dynamodb:PutItem', 'dynamodb:Query'],
  },
  {
    name: 'derive',
    binary: 'derive',
    description: 'jobstream derive: GSI keys and META/COUNT',
    skFilters: [{ prefix: 'APP#' }],
    // UpdateItem: guarded projections and counter ADDs (in transactions).
    tableActions: ['dynamodb:UpdateItem'],
    ledgerActions: ['dynamodb:PutItem'],
  },
];

const JOBBOARD_STREAM: StreamConsumer[] = [
  {
    name: 'derive',
    binary: 'derive',
    description: 'jobstream derive: GSI1 keys, suggestion and match jobs',
    // jobs and matches (j#), requests (r#), seeker profiles. Suggestions are
    // written whole by their Lambda and their TTL expiry starts nothing.
    skFilters: [{ prefix: 'j#' }, { prefix: 'r#' }, { equals: 'profile' }],
    tableActions: ['dynamodb:UpdateItem'],
    ledgerActions: [],
    sendsTo: ['suggestions', 'matches'],
  },
];

const JOBBOARD_QUEUES: QueueConsumer[] = [
  {
    name: 'suggestions',
    binary: 'suggestions',
    description: 'jobstream suggestions: scores pairs, writes TTL-bound suggestions',
    queue: 'suggestions',
    tableActions: ['dynamodb:BatchWriteItem', 'dynamodb:GetItem', 'dynamodb:Query'],
    ledgerActions: [],
    queryGsi1: true,
  },
  {
    name: 'matches',
    binary: 'matches',
    description: 'jobstream matches: one match per approved pair, in a transaction',
    queue: 'matches',
    // TransactWriteItems: condition checks, the match, the suggestion delete.
    tableActions: ['dynamodb:ConditionCheckItem', 'dynamodb:DeleteItem', 'dynamodb:PutItem'],
    ledgerActions: ['dynamodb:PutItem'],
  },
];

function createTable(scope: Construct, id: string, def: TableDef, name: string, deletionProtection: boolean): dynamodb.Table {
  const table = new dynamodb.Table(scope, id, {
    tableName: name,
    partitionKey: { name: def.pk, type: dynamodb.AttributeType.STRING },
    sortKey: { name: def.sk, type: dynamodb.AttributeType.STRING },
    billingMode: dynamodb.BillingMode.PAY_PER_REQUEST,
    stream: def.stream ? dynamodb.StreamViewType.NEW_AND_OLD_IMAGES : undefined,
    timeToLiveAttribute: def.ttlAttribute ?? undefined,
    pointInTimeRecoverySpecification: { pointInTimeRecoveryEnabled: true },
    deletionProtection,
    encryption: dynamodb.TableEncryption.AWS_MANAGED,
    removalPolicy: RemovalPolicy.RETAIN,
  });
  for (const gsi of def.gsis) {
    table.addGlobalSecondaryIndex({
      indexName: gsi.name,
      partitionKey: { name: gsi.pk, type: dynamodb.AttributeType.STRING },
      sortKey: { name: gsi.sk, type: dynamodb.AttributeType.STRING },
      projectionType: dynamodb.ProjectionType.ALL,
    });
  }
  return table;
}

/** jobstream next to one table: ledger, two stream consumers, on-failure queues, alarms. */
export class JobstreamStack extends Stack {
  readonly table: dynamodb.ITable;
  readonly ledger: dynamodb.Table;
  readonly functions: Record<string, lambda.IFunction> = {};
  readonly onFailureQueues: Record<string, sqs.Queue> = {};
  readonly queues: Record<string, sqs.Queue> = {};
  readonly alarmTopic: sns.Topic;
  private readonly sortKeyName: string;

  constructor(scope: Construct, id: string, props: JobstreamStackProps = {}) {
    super(scope, id, props);
    const defs = loadTableDefs();
    const model = props.model ?? 'tracker';
    const def = model === 'jobboard' ? defs.jobboard : defs.tracker;
    this.sortKeyName = def.sk;
    const deletionProtection = props.deletionProtection ?? true;
    const architecture = props.architecture ?? lambda.Architecture.X86_64;

    if (props.existingTable) {
      this.table = dynamodb.Table.fromTableAttributes(this, 'Table', {
        tableName: props.existingTable.tableName,
        tableStreamArn: props.existingTable.streamArn,
      });
    } else {
      this.table = createTable(this, 'Table', def, props.tableName ?? def.name, deletionProtection);
    }
    this.ledger = createTable(this, 'Ledger', defs.ledger, `${Stack.of(this).stackName}-ledger`, deletionProtection);

    this.alarmTopic = new sns.Topic(this, 'AlarmTopic', {
      displayName: 'jobstream alarms',
      enforceSSL: true,
      masterKey: kms.Alias.fromAliasName(this, 'SnsKey', 'alias/aws/sns'),
    });
    if (props.alarmEmail) {
      this.alarmTopic.addSubscription(new subs.EmailSubscription(props.alarmEmail));
    }

    const manifestPath = props.manifestPath ?? WORKSPACE_MANIFEST;
    if (model === 'tracker') {
      for (const c of TRACKER_CONSUMERS) {
        this.addStreamConsumer(c, architecture, manifestPath, { MODEL: 'tracker' });
      }
    } else {
      const env: Record<string, string> = { MODEL: 'jobboard' };
      for (const q of defs.jobboardQueues) {
        const { queue, dlq } = this.addWorkQueue(q);
        env[`${q.logical.toUpperCase()}_QUEUE_URL`] = queue.queueUrl;
        const consumer = JOBBOARD_QUEUES.find((c) => c.queue === q.logical);
        if (!consumer) throw new Error(`no consumer for queue ${q.logical}`);
        this.addQueueConsumer(consumer, q, queue, architecture, manifestPath, { MODEL: 'jobboard' });
        void dlq;
      }
      for (const c of JOBBOARD_STREAM) {
        this.addStreamConsumer(c, architecture, manifestPath, env);
      }
    }
  }

  /** A work queue and its DLQ, as tables.json defines them. */
  private addWorkQueue(q: QueueDef): { queue: sqs.Queue; dlq: sqs.Queue } {
    const Name = q.logical[0].toUpperCase() + q.logical.slice(1);
    const dlq = new sqs.Queue(this, `${Name}Dlq`, {
      retentionPeriod: Duration.seconds(q.dlqRetentionSecs),
      enforceSSL: true,
      encryption: sqs.QueueEncryption.SQS_MANAGED,
    });
    NagSuppressions.addResourceSuppressions(dlq, [{ id: 'AwsSolutions-SQS3', reason: 'This queue is a dead-letter queue.' }]);
    const queue = new sqs.Queue(this, `${Name}Queue`, {
      visibilityTimeout: Duration.seconds(q.visibilityTimeoutSecs),
      retentionPeriod: Duration.seconds(q.retentionSecs),
      enforceSSL: true,
      encryption: sqs.QueueEncryption.SQS_MANAGED,
      deadLetterQueue: { queue: dlq, maxReceiveCount: q.maxReceiveCount },
    });
    this.queues[q.logical] = queue;
    this.alarm(
      `${Name}DlqDepth`,
      dlq.metricApproximateNumberOfMessagesVisible({ statistic: 'Maximum', period: Duration.minutes(5) }),
      0,
      `${q.logical}: messages in the dead-letter queue`,
    );
    return { queue, dlq };
  }

  private alarm(id: string, metric: cloudwatch.IMetric, threshold: number, description: string): void {
    const alarm = new cloudwatch.Alarm(this, id, {
      metric,
      threshold,
      evaluationPeriods: 1,
      comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
      treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
      alarmDescription: description,
    });
    alarm.addAlarmAction(new actions.SnsAction(this.alarmTopic));
  }

  /** A function with its own log group and least-privilege role. */
  private addFunction(c: Consumer, architecture: lambda.Architecture, manifestPath: string, timeout: Duration, env: Record<string, string>): { fn: RustFunction; role: iam.Role } {
    const Name = c.name[0].toUpperCase() + c.name.slice(1);
    const logGroup = new logs.LogGroup(this, `${Name}Logs`, {
      retention: logs.RetentionDays.ONE_MONTH,
      removalPolicy: RemovalPolicy.DESTROY,
    });
    // An explicit role: only what this consumer touches, no managed policies.
    const role = new iam.Role(this, `${Name}Role`, {
      assumedBy: new iam.ServicePrincipal('lambda.amazonaws.com'),
      description: `${c.description} (least privilege)`,
    });
    role.addToPolicy(
      new iam.PolicyStatement({
        actions: ['logs:CreateLogStream', 'logs:PutLogEvents'],
        resources: [logGroup.logGroupArn],
      }),
    );
    const tableResources = [this.table.tableArn];
    if (c.queryGsi1) tableResources.push(`${this.table.tableArn}/index/GSI1`);
    role.addToPolicy(new iam.PolicyStatement({ actions: c.tableActions, resources: tableResources }));
    if (c.ledgerActions.length > 0) {
      role.addToPolicy(new iam.PolicyStatement({ actions: c.ledgerActions, resources: [this.ledger.tableArn] }));
    }

    const fn = new RustFunction(this, Name, {
      manifestPath,
      binaryName: c.binary,
      runtime: 'provided.al2023',
      architecture,
      description: c.description,
      role,
      logGroup,
      loggingFormat: lambda.LoggingFormat.JSON,
      timeout,
      memorySize: STREAM_CONSUMER.memorySize,
      environment: {
        TABLE_NAME: this.table.tableName,
        LEDGER_TABLE_NAME: this.ledger.tableName,
        ...env,
      },
    });
    this.alarm(`${Name}Errors`, fn.metricErrors({ period: Duration.minutes(5) }), 0, `${c.name}: function errors`);
    this.alarm(`${Name}Throttles`, fn.metricThrottles({ period: Duration.minutes(5) }), 0, `${c.name}: function throttled`);
    this.functions[c.name] = fn;
    return { fn, role };
  }

  private addQueueConsumer(c: QueueConsumer, q: QueueDef, queue: sqs.Queue, architecture: lambda.Architecture, manifestPath: string, env: Record<string, string>): void {
    const { fn } = this.addFunction(c, architecture, manifestPath, Duration.seconds(q.consumerTimeoutSecs), env);
    fn.addEventSource(
      new SqsEventSource(queue, {
        batchSize: q.batchSize,
        reportBatchItemFailures: true,
      }),
    );
  }

  private addStreamConsumer(c: StreamConsumer, architecture: lambda.Architecture, manifestPath: string, env: Record<string, string>): void {
    const Name = c.name[0].toUpperCase() + c.name.slice(1);
    const { fn, role } = this.addFunction(c, architecture, manifestPath, STREAM_CONSUMER.timeout, env);
    for (const logical of c.sendsTo ?? []) {
      this.queues[logical].grantSendMessages(role);
    }

    const onFailure = new sqs.Queue(this, `${Name}OnFailure`, {
      retentionPeriod: Duration.days(14),
      enforceSSL: true,
      encryption: sqs.QueueEncryption.SQS_MANAGED,
    });
    fn.addEventSource(
      new DynamoEventSource(this.table, {
        startingPosition: lambda.StartingPosition.TRIM_HORIZON,
        batchSize: STREAM_CONSUMER.batchSize,
        bisectBatchOnError: true,
        retryAttempts: STREAM_CONSUMER.retryAttempts,
        maxRecordAge: STREAM_CONSUMER.maxRecordAge,
        reportBatchItemFailures: true,
        parallelizationFactor: 1,
        onFailure: new SqsDlq(onFailure),
        filters: c.skFilters.map((f) =>
          lambda.FilterCriteria.filter({
            dynamodb: { Keys: { [this.sortKeyName]: { S: 'prefix' in f ? lambda.FilterRule.beginsWith(f.prefix) : lambda.FilterRule.isEqual(f.equals) } } },
          }),
        ),
      }),
    );

    this.alarm(`${Name}IteratorAge`, fn.metric('IteratorAge', { statistic: 'Maximum', period: Duration.minutes(5) }), 60_000, `${c.name}: stream processing lags more than a minute`);
    this.alarm(
      `${Name}OnFailureDepth`,
      onFailure.metricApproximateNumberOfMessagesVisible({ statistic: 'Maximum', period: Duration.minutes(5) }),
      0,
      `${c.name}: records gave up after retries (on-failure queue not empty)`,
    );

    NagSuppressions.addResourceSuppressions(
      onFailure,
      [{ id: 'AwsSolutions-SQS3', reason: 'This queue is the on-failure destination of a stream event source mapping; it has no consumer to dead-letter from.' }],
    );
    NagSuppressions.addResourceSuppressions(
      role,
      [
        {
          id: 'AwsSolutions-IAM5',
          reason: 'dynamodb:ListStreams (added by the event source mapping) supports no resource-level permission; every other action is scoped to a named table, stream, queue or log group.',
          appliesTo: ['Resource::*'],
        },
      ],
      true,
    );
    this.onFailureQueues[c.name] = onFailure;
  }
}
