// The CDK app. Context parameters (cdk deploy -c key=value):
//   model=<a model in tables.json> (default: its defaultModel), architecture=x86_64|arm64, tableName=...,
//   deletionProtection=true|false, existingTableName=... existingTableStreamArn=... (attach to a table),
//   existingLedgerTableName=... (attach to a retained ledger: redeploying after `cdk destroy`),
//   alarmEmail=..., stackName=...,
//   modelFile=PATH (a model file: its definition from `jobstream tables --model-file PATH`,
//   the file bundled with every function as MODEL_FILE)
import { App, Aspects } from 'aws-cdk-lib';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import { AwsSolutionsChecks } from 'cdk-nag';

import { JobstreamStack } from '../lib/jobstream-stack.ts';
import { loadTableDefs, modelDef, tableDefsOfModelFile } from '../lib/tables.ts';

const app = new App();
const ctx = (key: string): string | undefined => app.node.tryGetContext(key) ?? undefined;

const existingName = ctx('existingTableName');
const existingStream = ctx('existingTableStreamArn');
if (Boolean(existingName) !== Boolean(existingStream)) {
  throw new Error('existingTableName and existingTableStreamArn go together');
}

// Throws listing the models tables.json defines.
const modelFile = ctx('modelFile');
const defs = modelFile ? tableDefsOfModelFile(modelFile) : loadTableDefs();
const model = modelDef(ctx('model') ?? defs.defaultModel, defs).name;
new JobstreamStack(app, ctx('stackName') ?? 'Jobstream', {
  model,
  defs,
  modelFile,
  architecture: ctx('architecture') === 'arm64' ? lambda.Architecture.ARM_64 : lambda.Architecture.X86_64,
  tableName: ctx('tableName'),
  deletionProtection: ctx('deletionProtection') !== 'false',
  existingTable: existingName && existingStream ? { tableName: existingName, streamArn: existingStream } : undefined,
  existingLedgerTableName: ctx('existingLedgerTableName'),
  alarmEmail: ctx('alarmEmail'),
});
Aspects.of(app).add(new AwsSolutionsChecks({ verbose: true }));
