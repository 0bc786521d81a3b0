// OneTable writes sample items of onetable-schema.json (or, with the set
// `awkward`, onetable-awkward.json), for tests/integration/import.rs (key
// equality with `jobstream import onetable`), or creates the table as
// OneTable's createTable() does (its indexes' projections, for the adoption
// check):
//   node onetable.mjs write ENDPOINT TABLE [awkward]
//   node onetable.mjs create ENDPOINT TABLE
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { Table } from 'dynamodb-onetable';
import { readFileSync } from 'node:fs';

const [cmd, endpoint, name, set] = process.argv.slice(2);
const file = set === undefined ? 'onetable-schema.json' : set === 'awkward' ? 'onetable-awkward.json' : null;
if ((cmd !== 'write' && cmd !== 'create') || !file) {
  process.stderr.write('usage: node onetable.mjs write|create ENDPOINT TABLE [awkward]\n');
  process.exit(2);
}
const schema = JSON.parse(readFileSync(new URL(`./${file}`, import.meta.url), 'utf8'));
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
if (set === 'awkward') {
  // imp11's findings 4-6: a numeric enum (stored as N), fields kept only
  // inside the key (`encode`), and the `_unique#` item of a unique field
  // (its `_type` is `_Unique`).
  const Account = table.getModel('Account');
  const Ticket = table.getModel('Ticket');
  const Note = table.getModel('Note');
  await Account.create({ id: 'a1', name: 'Acme', domain: 'acme.com' });
  await Ticket.create({ accountId: 'a1', seq: 7, severity: 2, status: 'open' });
  await Ticket.create({ accountId: 'a1', seq: 8, status: 'closed' });
  await Note.create({ accountId: 'a1', noteId: 'n1', body: 'hello' });
  process.stdout.write('written\n');
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
