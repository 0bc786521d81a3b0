// Synthesises one stack per model in tables.json without bundling the Rust
// functions (no cargo-lambda build), for template checks such as cfn-lint:
// `npx tsx bin/synth-offline.ts OUTDIR [--model-file PATH[=DEFS]]...` writes
// OUTDIR/Jobstream-<model>.template.json for every model and prints those
// paths, one a line. Each `--model-file` adds the stack of a model file (as
// `cdk deploy -c modelFile=PATH` builds it), named after the file's model;
// DEFS, when given, is the saved output of `jobstream tables --model-file
// PATH` (else it is run, see tableDefsOfModelFile).
import { readFileSync } from 'node:fs';
import * as path from 'node:path';

import { App, Aspects } from 'aws-cdk-lib';
import { AwsSolutionsChecks } from 'cdk-nag';

import { JobstreamStack } from '../lib/jobstream-stack.ts';
import { loadTableDefs, tableDefsOfModelFile, type TableDefs } from '../lib/tables.ts';

const args = process.argv.slice(2);
const outdir = args[0] !== undefined && !args[0].startsWith('--') ? args.shift()! : 'cdk.out.offline';
const modelFiles: { file: string; defs: TableDefs }[] = [];
while (args.length > 0) {
  const flag = args.shift();
  const value = args.shift();
  if (flag !== '--model-file' || value === undefined) {
    throw new Error(`usage: synth-offline.ts [OUTDIR] [--model-file PATH[=DEFS]]... (got ${flag})`);
  }
  const [file, saved] = value.split('=', 2);
  const defs = saved ? (JSON.parse(readFileSync(saved, 'utf8')) as TableDefs) : tableDefsOfModelFile(file);
  modelFiles.push({ file, defs });
}
const app = new App({ outdir, context: { 'aws:cdk:bundling-stacks': [] } });
const stacks = loadTableDefs().models.map((m) => new JobstreamStack(app, `Jobstream-${m.name}`, { model: m.name }));
for (const { file, defs } of modelFiles) {
  const model = defs.defaultModel;
  stacks.push(new JobstreamStack(app, `Jobstream-${model}`, { model, defs, modelFile: file }));
}
Aspects.of(app).add(new AwsSolutionsChecks());
app.synth();
for (const s of stacks) {
  console.log(path.join(outdir, s.templateFile));
}
