// OneTable writes sample items of onetable-schema.json, for
// tests/integration/import.rs (key equality with `jobstream import onetable`),
// or creates the table as OneTable's createTable() does (its indexes'
// projections, for the adoption check):
//   node onetable.mjs write ENDPOINT TABLE
//   node onetable.mjs create ENDPOINT TABLE
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { Table } from 'dynamodb-onetable';
import { readFileSync } from 'node:fs';

const schema = JSON.parse(readFileSync(new URL('./onetable-schema.json', import.meta.url), 'utf8'));
const [cmd, endpoint, name] = process.argv.slice(2);
if (cmd !== 'write' && cmd !== 'create') {
  process.stderr.write('usage: node onetable.mjs write|create ENDPOINT TABLE\n');
  process.exit(2);
}
const client = new DynamoDBClient({
  endpoint,
  region: 'us-east-1',
  credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
});
const table = new Table({ client, name, schema, partial: false });
if (cmd === 'create') {
  await table.createTable({ StreamSpecification: { StreamEnabled: true, StreamViewType: 'NEW_AND_OLD_IMAGES' } });
  process.stdout.write('created\n');
  process.exit(0);
}
const Account = table.getModel('Account');
const Invoice = table.getModel('Invoice');
const acme = await Account.create({ name: 'Acme Corp' });
await Account.create({ name: 'Globex', plan: 'pro' });
// A `ttl: true` date: stored as epoch seconds (N), whatever isoDates says.
await Invoice.create({ accountId: acme.id, number: 42, amount: 1200, paid: false, due: new Date('2026-03-01T00:00:00Z'), region: 'eu', tags: new Set(['q1']), expiresAt: new Date('2027-03-01T00:00:00Z') });
// No region: no gs2pk (a sparse index).
await Invoice.create({ accountId: acme.id, number: 1234567, amount: 5, paid: true, due: new Date('2026-04-01T00:00:00Z') });
// A negative number padded as JavaScript's padStart pads it: `0000-5`.
await Invoice.create({ accountId: acme.id, number: -5, amount: 0, paid: true, due: new Date('2026-05-01T00:00:00Z') });
process.stdout.write('written\n');
