import { readFileSync } from 'node:fs';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';

import { CfnOutput, Duration, RemovalPolicy, Stack, type StackProps } from 'aws-cdk-lib';
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

import {
  constructName,
  loadTableDefs,
  modelDef,
  queueEnv,
  type GsiProjection,
  type ModelDef,
  type QueueConsumerDef,
  type QueueDef,
  type RunnerGrant,
  type StreamConsumerDef,
  type TableDef,
  type TableDefs,
} from './tables.ts';

/** The workspace root: RustFunction needs the workspace manifest so that `shared/` is visible. */
export const WORKSPACE_MANIFEST = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', '..', 'Cargo.toml');

export interface ExistingTable {
  /** Name of a table that already exists (with a NEW_AND_OLD_IMAGES stream). */
  readonly tableName: string;
  /** Its stream ARN. */
  readonly streamArn: string;
}

export interface JobstreamStackProps extends StackProps {
  /** The model: any name in tables.json (default: its `defaultModel`). */
  readonly model?: string;
  /** Lambda architecture; x86_64 by default (arm64 needs the aarch64 Rust target installed). */
  readonly architecture?: lambda.Architecture;
  /** Attach to this table instead of creating one. */
  readonly existingTable?: ExistingTable;
  /** Name of the table to create (default: the model's). */
  readonly tableName?: string;
  /**
   * Attach to this ledger table instead of creating one: the redeploy path
   * after `cdk destroy`, which retains the tables (a new ledger under the
   * same name would fail with "already exists").
   */
  readonly existingLedgerTableName?: string;
  /** Deletion protection of the tables created here (default true). */
  readonly deletionProtection?: boolean;
  /** Email address subscribed to the alarm topic. */
  readonly alarmEmail?: string;
  /** Workspace Cargo.toml (default: this repository's). */
  readonly manifestPath?: string;
  /** The definitions to deploy from (default: infra/tables.json); tests pass their own. */
  readonly defs?: TableDefs;
  /**
   * A model file (SPEC §8): bundled with every function as `model.yaml` and
   * named by `MODEL_FILE`; `defs` must then come from
   * `jobstream tables --model-file` (see `tableDefsOfModelFile`).
   */
  readonly modelFile?: string;
}

/** Memory of the queue consumers' functions (stream consumers' comes with their settings). */
export const QUEUE_CONSUMER_MEMORY_MB = 256;

/** Where a bundled model file is, inside the function's package. */
export const BUNDLED_MODEL_FILE = 'model.yaml';

/**
 * The bundling hooks that put a model file into a function's package as
 * `BUNDLED_MODEL_FILE`. The file's bytes travel inside the command
 * (base64), not as a host path: cargo-lambda-cdk runs the hooks on the host
 * or, without a local cargo-lambda, inside its Docker image, where only the
 * workspace is mounted (`/asset-input`) and a host path does not exist.
 */
export function modelFileHooks(modelFile: string): {
  beforeBundling: (inputDir: string, outputDir: string) => string[];
  afterBundling: (inputDir: string, outputDir: string) => string[];
} {
  const encoded = readFileSync(modelFile).toString('base64');
  return {
    beforeBundling: () => [],
    afterBundling: (_inputDir: string, outputDir: string) => [
      `printf '%s' '${encoded}' | base64 -d > ${JSON.stringify(path.posix.join(outputDir, BUNDLED_MODEL_FILE))}`,
    ],
  };
}

/** SQS's limit on a queue's name. */
export const MAX_QUEUE_NAME = 80;

/** A resource's name in stack `stack` from a `stackNames` template of tables.json (`{stack}`, `{name}`). */
export function stackResourceName(template: string, stack: string, name = ''): string {
  return template.replaceAll('{stack}', stack).replaceAll('{name}', name);
}

/** DynamoDB Streams: more than two readers per shard get throttled (SPEC §2.9). */
export const MAX_STREAM_CONSUMERS = 2;

/** A GSI's declared projection (a model file's `project:`), as the local engine creates it. */
function projectionOf(p: GsiProjection): Pick<dynamodb.GlobalSecondaryIndexProps, 'projectionType' | 'nonKeyAttributes'> {
  switch (p.projectionType) {
    case 'ALL':
      return { projectionType: dynamodb.ProjectionType.ALL };
    case 'KEYS_ONLY':
      return { projectionType: dynamodb.ProjectionType.KEYS_ONLY };
    case 'INCLUDE':
      return { projectionType: dynamodb.ProjectionType.INCLUDE, nonKeyAttributes: p.nonKeyAttributes ?? [] };
    default:
      throw new Error(`unknown GSI projection ${JSON.stringify(p)}`);
  }
}

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
      // An index keyed by its partition key alone has none.
      sortKey: gsi.sk ? { name: gsi.sk, type: dynamodb.AttributeType.STRING } : undefined,
      ...projectionOf(gsi.projection),
    });
  }
  return table;
}

/** The event filters of a stream consumer: its patterns, verbatim (the local runtime applies the same ones). */
export function streamFilters(filters: Record<string, unknown>[]): Record<string, unknown>[] {
  return filters.map((f) => lambda.FilterCriteria.filter(f));
}

/** Checks a model definition before anything is built from it (throws). */
export function validateModel(def: ModelDef): void {
  if (def.streamConsumers.length > MAX_STREAM_CONSUMERS) {
    throw new Error(`model ${def.name}: ${def.streamConsumers.length} stream consumers, at most ${MAX_STREAM_CONSUMERS} may read a stream`);
  }
  if (def.streamConsumers.length > 0 && !def.table.stream) {
    throw new Error(`model ${def.name}: stream consumers but the table has no stream`);
  }
  const ids = new Set<string>();
  for (const c of [...def.streamConsumers, ...def.queueConsumers]) {
    const id = constructName(c.name);
    if (!id || ids.has(id)) throw new Error(`model ${def.name}: consumer name '${c.name}' is empty or not unique`);
    ids.add(id);
  }
  const logicals = new Set<string>();
  for (const c of def.queueConsumers) {
    if (logicals.has(c.queue.logical)) throw new Error(`model ${def.name}: queue ${c.queue.logical} has two consumers`);
    logicals.add(c.queue.logical);
  }
  for (const c of [...def.streamConsumers, ...def.queueConsumers]) {
    for (const q of c.grant.sendsTo) {
      if (!logicals.has(q)) throw new Error(`model ${def.name}: ${c.name} sends to ${q}, which no queue consumer consumes`);
    }
  }
}

/** jobstream next to one table: ledger, the model's stream and queue consumers, their queues, alarms. */
export class JobstreamStack extends Stack {
  readonly model: ModelDef;
  readonly table: dynamodb.ITable;
  readonly ledger: dynamodb.ITable;
  /** Functions by consumer name. */
  readonly functions: Record<string, lambda.IFunction> = {};
  /** On-failure destinations by stream consumer name. */
  readonly onFailureQueues: Record<string, sqs.Queue> = {};
  /** Work queues and their DLQs by logical queue name. */
  readonly queues: Record<string, sqs.Queue> = {};
  readonly deadLetterQueues: Record<string, sqs.Queue> = {};
  readonly alarmTopic: sns.Topic;
  /** The alarm topic's key: customer managed, so that its policy can let CloudWatch publish. */
  readonly alarmKey: kms.Key;
  readonly metrics: TableDefs['metrics'];
  /** The model file bundled with the functions, if any. */
  readonly modelFile?: string;
  /** What a `jobstream run` process may do (attach to its role). */
  readonly runnerPolicy: iam.ManagedPolicy;

  constructor(scope: Construct, id: string, props: JobstreamStackProps = {}) {
    super(scope, id, props);
    const defs = props.defs ?? loadTableDefs();
    const def = modelDef(props.model ?? defs.defaultModel, defs);
    validateModel(def);
    this.model = def;
    this.modelFile = props.modelFile ? path.resolve(props.modelFile) : undefined;
    const deletionProtection = props.deletionProtection ?? true;
    const architecture = props.architecture ?? lambda.Architecture.X86_64;

    if (props.existingTable) {
      this.table = dynamodb.Table.fromTableAttributes(this, 'Table', {
        tableName: props.existingTable.tableName,
        tableStreamArn: props.existingTable.streamArn,
      });
    } else {
      this.table = createTable(this, 'Table', def.table, props.tableName ?? def.table.name, deletionProtection);
    }
    this.ledger = props.existingLedgerTableName
      ? dynamodb.Table.fromTableName(this, 'Ledger', props.existingLedgerTableName)
      : createTable(this, 'Ledger', defs.ledger, stackResourceName(defs.stackNames.ledger, Stack.of(this).stackName), deletionProtection);
    this.metrics = defs.metrics;

    // alias/aws/sns cannot be used: its key policy cannot grant CloudWatch,
    // so alarms would never reach the topic.
    this.alarmKey = new kms.Key(this, 'AlarmKey', {
      description: 'jobstream alarm topic (CloudWatch may publish)',
      enableKeyRotation: true,
    });
    const cloudwatchPrincipal = new iam.ServicePrincipal('cloudwatch.amazonaws.com');
    this.alarmKey.addToResourcePolicy(
      new iam.PolicyStatement({
        principals: [cloudwatchPrincipal],
        actions: ['kms:Decrypt', 'kms:GenerateDataKey*'],
        resources: ['*'],
        conditions: { StringEquals: { 'aws:SourceAccount': Stack.of(this).account } },
      }),
    );
    this.alarmTopic = new sns.Topic(this, 'AlarmTopic', {
      displayName: 'jobstream alarms',
      enforceSSL: true,
      masterKey: this.alarmKey,
    });
    this.alarmTopic.addToResourcePolicy(
      new iam.PolicyStatement({
        principals: [cloudwatchPrincipal],
        actions: ['sns:Publish'],
        resources: [this.alarmTopic.topicArn],
        conditions: { StringEquals: { 'aws:SourceAccount': Stack.of(this).account } },
      }),
    );
    if (props.alarmEmail) {
      this.alarmTopic.addSubscription(new subs.EmailSubscription(props.alarmEmail));
    }

    const manifestPath = props.manifestPath ?? WORKSPACE_MANIFEST;
    // Queues first: any consumer may send to any of the model's queues.
    for (const c of def.queueConsumers) {
      this.addWorkQueue(c.queue, defs.stackNames.queue);
    }
    for (const c of def.queueConsumers) {
      this.addQueueConsumer(c, architecture, manifestPath);
    }
    for (const c of def.streamConsumers) {
      this.addStreamConsumer(c, architecture, manifestPath);
    }
    this.runnerPolicy = this.addRunnerPolicy(def.runner);
  }

  /**
   * `jobstream run` outside Lambda (a container, a pod, an instance): one
   * managed policy with exactly what the process does (tables.json's
   * `runner`: the functions' grants together and the event source
   * mappings' own calls), for the operator to attach to its role.
   */
  private addRunnerPolicy(g: RunnerGrant): iam.ManagedPolicy {
    const statements: iam.PolicyStatement[] = [];
    const allow = (actions: string[], resources: string[]): void => {
      if (actions.length > 0 && resources.length > 0) {
        statements.push(new iam.PolicyStatement({ actions, resources }));
      }
    };
    allow(g.tableActions, [this.table.tableArn]);
    if (this.model.table.gsis.length > 0) {
      allow(g.indexActions, [`${this.table.tableArn}/index/*`]);
    }
    allow(g.streamActions, this.table.tableStreamArn ? [this.table.tableStreamArn] : []);
    allow(g.ledgerActions, [this.ledger.tableArn]);
    allow(g.queueActions, Object.values(this.queues).map((q) => q.queueArn));
    allow(['sqs:SendMessage'], g.sendsTo.map((logical) => this.queues[logical].queueArn));
    allow(g.deadLetterActions, Object.values(this.deadLetterQueues).map((q) => q.queueArn));
    allow(g.onFailureActions, Object.values(this.onFailureQueues).map((q) => q.queueArn));
    const policy = new iam.ManagedPolicy(this, 'RunnerPolicy', {
      description: `jobstream ${this.model.name}: what \`jobstream run\` does outside Lambda (attach to its role)`,
      statements,
    });
    if (this.model.table.gsis.length > 0 && g.indexActions.length > 0) {
      NagSuppressions.addResourceSuppressions(policy, [
        {
          id: 'AwsSolutions-IAM5',
          reason: `${g.indexActions.join(', ')} on the model table's own GSIs (index/*), the only actions granted on them.`,
          appliesTo: [{ regex: '/^Resource::.*\\/index\\/\\*$/g' }],
        },
      ]);
    }
    new CfnOutput(this, 'RunnerPolicyArn', {
      value: policy.managedPolicyArn,
      description: 'Attach to the role of a `jobstream run` process (ECS task, EKS pod, EC2 instance)',
    });
    return policy;
  }

  /**
   * A work queue and its DLQ, as tables.json defines them, named after the
   * stack (`stackNames.queue`) so that `jobstream run --stack` finds them.
   */
  private addWorkQueue(q: QueueDef, nameTemplate: string): void {
    const Name = constructName(q.logical);
    const stack = Stack.of(this).stackName;
    const [queueName, dlqName] = [q.name, q.dlqName].map((n) => stackResourceName(nameTemplate, stack, n));
    for (const n of [queueName, dlqName]) {
      if (n.length > MAX_QUEUE_NAME || !/^[A-Za-z0-9_-]+$/u.test(n)) {
        throw new Error(`queue name '${n}' (stack ${stack}, queue ${q.logical}): SQS allows 1-${MAX_QUEUE_NAME} characters of A-Z, a-z, 0-9, - and _; choose a shorter stackName`);
      }
    }
    const dlq = new sqs.Queue(this, `${Name}Dlq`, {
      queueName: dlqName,
      retentionPeriod: Duration.seconds(q.dlqRetentionSecs),
      enforceSSL: true,
      encryption: sqs.QueueEncryption.SQS_MANAGED,
    });
    NagSuppressions.addResourceSuppressions(dlq, [{ id: 'AwsSolutions-SQS3', reason: 'This queue is a dead-letter queue.' }]);
    const queue = new sqs.Queue(this, `${Name}Queue`, {
      queueName,
      visibilityTimeout: Duration.seconds(q.visibilityTimeoutSecs),
      retentionPeriod: Duration.seconds(q.retentionSecs),
      enforceSSL: true,
      encryption: sqs.QueueEncryption.SQS_MANAGED,
      deadLetterQueue: { queue: dlq, maxReceiveCount: q.maxReceiveCount },
    });
    this.queues[q.logical] = queue;
    this.deadLetterQueues[q.logical] = dlq;
    this.alarm(
      `${Name}DlqDepth`,
      dlq.metricApproximateNumberOfMessagesVisible({ statistic: 'Maximum', period: Duration.minutes(5) }),
      0,
      `${q.logical}: messages in the dead-letter queue`,
    );
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
  private addFunction(
    c: StreamConsumerDef | QueueConsumerDef,
    description: string,
    architecture: lambda.Architecture,
    manifestPath: string,
    timeout: Duration,
    memorySize: number,
    extraEnv: Record<string, string>,
  ): { fn: RustFunction; role: iam.Role } {
    const Name = constructName(c.name);
    const logGroup = new logs.LogGroup(this, `${Name}Logs`, {
      retention: logs.RetentionDays.ONE_MONTH,
      removalPolicy: RemovalPolicy.DESTROY,
    });
    // An explicit role: only what this consumer touches, no managed policies.
    const role = new iam.Role(this, `${Name}Role`, {
      assumedBy: new iam.ServicePrincipal('lambda.amazonaws.com'),
      description: `${description} (least privilege)`,
    });
    role.addToPolicy(
      new iam.PolicyStatement({
        actions: ['logs:CreateLogStream', 'logs:PutLogEvents'],
        resources: [logGroup.logGroupArn],
      }),
    );
    // Exactly the definition's grant (the local runtime enforces the same one).
    const g = c.grant;
    if (g.tableActions.length > 0) {
      role.addToPolicy(new iam.PolicyStatement({ actions: g.tableActions, resources: [this.table.tableArn] }));
    }
    if (g.indexActions.length > 0 && this.model.table.gsis.length > 0) {
      role.addToPolicy(new iam.PolicyStatement({ actions: g.indexActions, resources: [`${this.table.tableArn}/index/*`] }));
      NagSuppressions.addResourceSuppressions(
        role,
        [
          {
            id: 'AwsSolutions-IAM5',
            reason: `${g.indexActions.join(', ')} on the model table's own GSIs (index/*), the only actions granted on them.`,
            appliesTo: [{ regex: '/^Resource::.*\\/index\\/\\*$/g' }],
          },
        ],
        true,
      );
    }
    if (g.ledgerActions.length > 0) {
      role.addToPolicy(new iam.PolicyStatement({ actions: g.ledgerActions, resources: [this.ledger.tableArn] }));
    }
    const queueUrls: Record<string, string> = {};
    for (const logical of g.sendsTo) {
      this.queues[logical].grantSendMessages(role);
      queueUrls[queueEnv(logical)] = this.queues[logical].queueUrl;
    }

    const fn = new RustFunction(this, Name, {
      manifestPath,
      binaryName: c.binary,
      runtime: 'provided.al2023',
      architecture,
      description,
      role,
      logGroup,
      loggingFormat: lambda.LoggingFormat.JSON,
      timeout,
      memorySize,
      bundling: this.modelFile ? { commandHooks: modelFileHooks(this.modelFile) } : undefined,
      environment: {
        MODEL: this.model.name,
        ...(this.modelFile ? { MODEL_FILE: `/var/task/${BUNDLED_MODEL_FILE}` } : {}),
        TABLE_NAME: this.table.tableName,
        LEDGER_TABLE_NAME: this.ledger.tableName,
        ...queueUrls,
        ...extraEnv,
      },
    });
    this.alarm(`${Name}Errors`, fn.metricErrors({ period: Duration.minutes(5) }), 0, `${c.name}: function errors`);
    this.alarm(`${Name}Throttles`, fn.metricThrottles({ period: Duration.minutes(5) }), 0, `${c.name}: function throttled`);
    // Failures come back as partial batch responses, which keep Errors at
    // zero: alarm on the processors' own metric of skipped bad input.
    this.alarm(
      `${Name}BadInput`,
      new cloudwatch.Metric({
        namespace: this.metrics.namespace,
        metricName: this.metrics.badInput,
        dimensionsMap: { [this.metrics.dimension]: c.name },
        statistic: 'Sum',
        period: Duration.minutes(5),
      }),
      0,
      `${c.name}: records skipped as bad input (logged with keys and reason)`,
    );
    this.functions[c.name] = fn;
    return { fn, role };
  }

  private addQueueConsumer(c: QueueConsumerDef, architecture: lambda.Architecture, manifestPath: string): void {
    const q = c.queue;
    const { fn } = this.addFunction(
      c,
      `jobstream ${this.model.name} ${c.name}: ${c.binary} on queue ${q.logical}`,
      architecture,
      manifestPath,
      Duration.seconds(q.consumerTimeoutSecs),
      QUEUE_CONSUMER_MEMORY_MB,
      { QUEUE: q.logical },
    );
    fn.addEventSource(
      new SqsEventSource(this.queues[q.logical], {
        batchSize: q.batchSize,
        maxConcurrency: q.maxConcurrency,
        reportBatchItemFailures: true,
      }),
    );
  }

  private addStreamConsumer(c: StreamConsumerDef, architecture: lambda.Architecture, manifestPath: string): void {
    const Name = constructName(c.name);
    const { fn, role } = this.addFunction(
      c,
      `jobstream ${this.model.name} ${c.name}: ${c.binary} on the table stream`,
      architecture,
      manifestPath,
      Duration.seconds(c.settings.timeoutSecs),
      c.settings.memoryMb,
      {},
    );

    const onFailure = new sqs.Queue(this, `${Name}OnFailure`, {
      retentionPeriod: Duration.days(14),
      enforceSSL: true,
      encryption: sqs.QueueEncryption.SQS_MANAGED,
    });
    fn.addEventSource(
      new DynamoEventSource(this.table, {
        // Every setting from the definition (the local mapping is built from the same one).
        startingPosition: lambda.StartingPosition[c.settings.startingPosition],
        batchSize: c.settings.batchSize,
        maxBatchingWindow: c.settings.batchingWindowSecs > 0 ? Duration.seconds(c.settings.batchingWindowSecs) : undefined,
        bisectBatchOnError: c.settings.bisectOnError,
        retryAttempts: c.settings.maxRetries,
        maxRecordAge: Duration.seconds(c.settings.maxRecordAgeSecs),
        reportBatchItemFailures: true,
        parallelizationFactor: c.settings.parallelizationFactor,
        onFailure: new SqsDlq(onFailure),
        filters: c.filters.length > 0 ? streamFilters(c.filters) : undefined,
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
