// Synthesises the stack without bundling the Rust functions (no cargo-lambda
// build), for template checks such as cfn-lint: `npx tsx bin/synth-offline.ts OUTDIR`.
import { App, Aspects } from 'aws-cdk-lib';
import { AwsSolutionsChecks } from 'cdk-nag';

import { JobstreamStack } from '../lib/jobstream-stack.ts';

const outdir = process.argv[2] ?? 'cdk.out.offline';
const app = new App({ outdir, context: { 'aws:cdk:bundling-stacks': [] } });
new JobstreamStack(app, 'Jobstream');
new JobstreamStack(app, 'JobstreamJobBoard', { model: 'jobboard' });
Aspects.of(app).add(new AwsSolutionsChecks());
app.synth();
console.log(`${outdir}/Jobstream.template.json`);
