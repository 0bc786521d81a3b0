// Deployment definitions shared with the Rust code: infra/tables.json is
// written by `jobstream tables` from the model registry and checked against
// it by the integration test `tables::infra_tables_json_matches_the_rust_definitions`.
// The CDK app is generic over it: no model name appears in infra/.
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';

/** What a GSI projects (a model file's `project:`), as CloudFormation spells it. */
export interface GsiProjection {
  readonly projectionType: 'ALL' | 'KEYS_ONLY' | 'INCLUDE';
  /** INCLUDE only: the attributes besides the keys. */
  readonly nonKeyAttributes?: string[];
}

export interface Gsi {
  readonly name: string;
  readonly pk: string;
  /** Absent: an index keyed by its partition key alone (`jobstream tables` omits it). */
  readonly sk?: string;
  readonly projection: GsiProjection;
}

export interface TableDef {
  readonly name: string;
  readonly pk: string;
  readonly sk: string;
  readonly gsis: Gsi[];
  readonly ttlAttribute: string | null;
  readonly stream: boolean;
}

export interface QueueDef {
  readonly logical: string;
  readonly name: string;
  readonly dlqName: string;
  readonly consumer: string;
  readonly consumerTimeoutSecs: number;
  readonly visibilityTimeoutSecs: number;
  readonly maxReceiveCount: number;
  readonly retentionSecs: number;
  readonly dlqRetentionSecs: number;
  readonly batchSize: number;
  /** The SQS mapping's maximum concurrency (ScalingConfig), also the local pollers'. */
  readonly maxConcurrency: number;
}

/** One Lambda event filter pattern, deployed verbatim (FilterCriteria.Filters[].Pattern) and applied locally with Lambda's matching rules. */
export type FilterPattern = Record<string, unknown>;

/** What a processor's role may do: the function's IAM policy, and what the local runtime enforces on its calls. */
export interface Grant {
  /** DynamoDB actions on the model table, on its indexes (`index/*`), on the ledger. */
  readonly tableActions: string[];
  readonly indexActions: string[];
  readonly ledgerActions: string[];
  /** Logical queues it sends jobs to (sqs:SendMessage). */
  readonly sendsTo: string[];
}

/** A stream event source mapping's and its function's settings (SPEC §6.1), as the local runtime runs them. */
export interface StreamSettings {
  readonly batchSize: number;
  readonly batchingWindowSecs: number;
  readonly maxRetries: number;
  readonly bisectOnError: boolean;
  readonly maxRecordAgeSecs: number;
  readonly timeoutSecs: number;
  readonly parallelizationFactor: number;
  readonly startingPosition: 'TRIM_HORIZON' | 'LATEST';
  readonly memoryMb: number;
}

interface ConsumerDef {
  readonly name: string;
  /** The Rust binary (a member crate of the workspace). */
  readonly binary: string;
  readonly grant: Grant;
}

export interface StreamConsumerDef extends ConsumerDef {
  /** Event filter patterns (alternatives); empty = every record. */
  readonly filters: FilterPattern[];
  readonly settings: StreamSettings;
}

export interface QueueConsumerDef extends ConsumerDef {
  /** The queue it consumes. */
  readonly queue: QueueDef;
}

/**
 * What one process running every processor of the model and their event
 * source mappings may do (`jobstream run` outside Lambda): the processors'
 * grants together and the mappings' own calls. Deployed as the managed
 * policy `RunnerPolicy`; enforced locally on `run`'s own calls.
 */
export interface RunnerGrant extends Grant {
  /** On the model table's stream. */
  readonly streamActions: string[];
  /** On every work queue of the model. */
  readonly queueActions: string[];
  /** On every work queue's dead-letter queue. */
  readonly deadLetterActions: string[];
  /** On every stream consumer's on-failure queue. */
  readonly onFailureActions: string[];
}

export interface ModelDef {
  readonly name: string;
  readonly about: string;
  readonly table: TableDef;
  readonly streamConsumers: StreamConsumerDef[];
  readonly queueConsumers: QueueConsumerDef[];
  readonly runner: RunnerGrant;
}

/** The processors' Embedded Metric Format metrics (namespace, dimension, names). */
export interface MetricDefs {
  readonly namespace: string;
  /** The one dimension: the processor's name. */
  readonly dimension: string;
  /** Records skipped as bad input (never FailedRecord, which counts retried failures too). */
  readonly badInput: string;
}

/** Names of a stack's resources from the stack's name (`{stack}`) and a definition's name (`{name}`): `jobstream run --stack` reads the same templates. */
export interface StackNameTemplates {
  readonly ledger: string;
  /** A work queue and its DLQ. */
  readonly queue: string;
}

export interface TableDefs {
  /** The model deployed when none is named (the registry's default). */
  readonly defaultModel: string;
  readonly ledger: TableDef;
  readonly stackNames: StackNameTemplates;
  readonly metrics: MetricDefs;
  readonly models: ModelDef[];
}

export function loadTableDefs(): TableDefs {
  const url = new URL('../tables.json', import.meta.url);
  return JSON.parse(readFileSync(url, 'utf8')) as TableDefs;
}

/** The names of the models in tables.json, in its order. */
export function modelNames(defs: TableDefs = loadTableDefs()): string[] {
  return defs.models.map((m) => m.name);
}

/** One model's definition; throws listing the known names. */
export function modelDef(name: string, defs: TableDefs = loadTableDefs()): ModelDef {
  const def = defs.models.find((m) => m.name === name);
  if (!def) {
    throw new Error(`unknown model '${name}': tables.json defines ${modelNames(defs).join(', ')}`);
  }
  return def;
}

/** The environment variable holding a logical queue's URL (as `shared::lambda::queue_env`). */
export function queueEnv(logical: string): string {
  return `QUEUE_URL_${logical.replace(/[^A-Za-z0-9]/gu, '_').toUpperCase()}`;
}

/** A construct id from a consumer or queue name: `timeline-fanout` -> `TimelineFanout`. */
export function constructName(name: string): string {
  return name
    .split(/[^A-Za-z0-9]+/)
    .filter((p) => p.length > 0)
    .map((p) => p[0].toUpperCase() + p.slice(1))
    .join('');
}

/**
 * The definitions of a user's model file (SPEC §8), from the Rust side:
 * `jobstream tables --model-file PATH` (the YAML is never parsed here).
 * Runs `$JOBSTREAM_BIN` when set, else the workspace's CLI through cargo.
 */
export function tableDefsOfModelFile(modelFile: string): TableDefs {
  const file = path.resolve(modelFile);
  const bin = process.env.JOBSTREAM_BIN;
  const workspace = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
  const out = bin
    ? execFileSync(bin, ['tables', '--model-file', file], { encoding: 'utf8' })
    : execFileSync('cargo', ['run', '--quiet', '--bin', 'jobstream', '--', 'tables', '--model-file', file], {
        cwd: workspace,
        encoding: 'utf8',
      });
  return JSON.parse(out) as TableDefs;
}
