// Table definitions shared with the Rust code: infra/tables.json is written
// by `jobstream tables` and checked against the Rust definitions by the
// integration test `tables::infra_tables_json_matches_the_rust_definitions`.
import { readFileSync } from 'node:fs';

export interface Gsi {
  readonly name: string;
  readonly pk: string;
  readonly sk: string;
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
}

export interface TableDefs {
  readonly tracker: TableDef;
  readonly jobboard: TableDef;
  readonly ledger: TableDef;
  readonly jobboardQueues: QueueDef[];
}

export function loadTableDefs(): TableDefs {
  const url = new URL('../tables.json', import.meta.url);
  return JSON.parse(readFileSync(url, 'utf8')) as TableDefs;
}
