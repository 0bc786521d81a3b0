// Synthesises one stack per model in tables.json without bundling the Rust
// functions (no cargo-lambda build), for template checks such as cfn-lint:
// `npx tsx bin/synth-offline.ts OUTDIR` writes OUTDIR/Jobstream-<model>.template.json
// for every model and prints those paths, one a line.
import * as path from 'node:path';

import { App, Aspects } from 'aws-cdk-lib';
import { AwsSolutionsChecks } from 'cdk-nag';

import { JobstreamStack } from '../lib/jobstream-stack.ts';
import { loadTableDefs } from '../lib/tables.ts';

const outdir = process.argv[2] ?? 'cdk.out.offline';
const app = new App({ outdir, context: { 'aws:cdk:bundling-stacks': [] } });
const stacks = loadTableDefs().models.map((m) => new JobstreamStack(app, `Jobstream-${m.name}`, { model: m.name }));
Aspects.of(app).add(new AwsSolutionsChecks());
app.synth();
for (const s of stacks) {
  console.log(path.join(outdir, s.templateFile));
}
