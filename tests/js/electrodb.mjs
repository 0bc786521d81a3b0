// ElectroDB entities of a task tracker, used by tests/integration/import.rs:
//   node electrodb.mjs schema               -> the entities' schemas as JSON
//   node electrodb.mjs write ENDPOINT TABLE -> sample items, written by ElectroDB
// The schemas are serialised with ElectroDB's own `entity.schema` (the model
// the entity was built from); functions (a sparse index's `condition`, a
// `default`, `get`/`set`/`validate`) become their source text, which
// `jobstream import electrodb` turns into comments.
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { Entity } from 'electrodb';

const service = 'taskapp';

const employee = {
  model: { entity: 'employee', version: '1', service },
  attributes: {
    employeeId: { type: 'string', required: true },
    firstName: { type: 'string', required: true },
    office: { type: 'string', required: true },
    title: { type: 'string', required: true },
    team: { type: ['development', 'marketing', 'finance', 'product'], required: true },
    salary: { type: 'number' },
    manager: { type: 'string' },
    dateHired: { type: 'string', default: () => '2026-01-01' },
  },
  indexes: {
    employee: {
      pk: { field: 'pk', composite: ['employeeId'] },
      sk: { field: 'sk', composite: [] },
    },
    coworkers: {
      index: 'gsi1pk-gsi1sk-index',
      collection: 'workplaces',
      pk: { field: 'gsi1pk', composite: ['office'] },
      sk: { field: 'gsi1sk', composite: ['team', 'title', 'employeeId'] },
    },
    teams: {
      index: 'gsi2pk-gsi2sk-index',
      pk: { field: 'gsi2pk', composite: ['team'], casing: 'upper' },
      sk: { field: 'gsi2sk', composite: ['dateHired', 'title'], casing: 'none' },
    },
    reports: {
      // sparse: only employees with a manager are indexed
      index: 'gsi3pk-gsi3sk-index',
      pk: { field: 'gsi3pk', composite: ['manager'] },
      sk: { field: 'gsi3sk', composite: ['employeeId'] },
    },
  },
};

const office = {
  model: { entity: 'office', version: '1', service },
  attributes: {
    officeName: { type: 'string', required: true },
    country: { type: 'string', required: true },
    state: { type: 'string', required: true },
    city: { type: 'string', required: true },
    zip: { type: 'string', required: true },
  },
  indexes: {
    locations: {
      pk: { field: 'pk', composite: ['country', 'state'] },
      sk: { field: 'sk', composite: ['city', 'zip', 'officeName'] },
    },
    office: {
      index: 'gsi1pk-gsi1sk-index',
      collection: 'workplaces',
      pk: { field: 'gsi1pk', composite: ['officeName'] },
      sk: { field: 'gsi1sk', composite: [] },
    },
  },
};

const task = {
  model: { entity: 'task', version: '2', service },
  attributes: {
    taskId: { type: 'string', required: true },
    project: { type: 'string', required: true },
    points: { type: 'number', required: true, padding: { length: 3, char: '0' } },
    status: { type: ['open', 'done'], required: true },
    owner: { type: 'string', field: 'ownerId' },
  },
  indexes: {
    task: {
      pk: { field: 'pk', composite: ['taskId'], template: 'T#${taskId}', casing: 'none' },
      sk: { field: 'sk', composite: ['project'], template: 'PROJECT#${project}', casing: 'none' },
    },
    open: {
      index: 'gsi2pk-gsi2sk-index',
      condition: (attr) => attr.status === 'open',
      pk: { field: 'gsi2pk', composite: ['project'], template: 'OPEN#${project}', casing: 'none' },
      sk: { field: 'gsi2sk', composite: ['points', 'taskId'], template: 'P#${points}#T#${taskId}', casing: 'none' },
    },
  },
};

const schemas = { employee, office, task };

function serialise(entity) {
  return JSON.parse(
    JSON.stringify(entity.schema, (_k, v) => (typeof v === 'function' ? v.toString() : v)),
  );
}

const [cmd, endpoint, table] = process.argv.slice(2);
if (cmd === 'schema') {
  const out = Object.values(schemas).map((s) => serialise(new Entity(s, { table: 'x' })));
  process.stdout.write(JSON.stringify(out, null, 2) + '\n');
} else if (cmd === 'write') {
  const client = DynamoDBDocumentClient.from(
    new DynamoDBClient({
      endpoint,
      region: 'us-east-1',
      credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
    }),
  );
  const e = Object.fromEntries(
    Object.entries(schemas).map(([n, s]) => [n, new Entity(s, { table, client })]),
  );
  await e.employee.put({ employeeId: 'E-001', firstName: 'Ann', office: 'Gw Pike', title: 'Lead Dev', team: 'development', salary: 150, manager: 'E-000', dateHired: '2020-03-01' }).go();
  await e.employee.put({ employeeId: 'E-000', firstName: 'Bo', office: 'Gw Pike', title: 'CTO', team: 'product' }).go();
  await e.office.put({ officeName: 'Gw Pike', country: 'US', state: 'WA', city: 'Seattle', zip: '98101' }).go();
  await e.task.put({ taskId: 'Tk-9', project: 'Apollo', points: 5, status: 'open', owner: 'E-001' }).go();
  await e.task.put({ taskId: 'Tk-10', project: 'Apollo', points: 13, status: 'open' }).go();
  process.stdout.write('written\n');
} else {
  process.stderr.write('usage: node electrodb.mjs schema | write ENDPOINT TABLE\n');
  process.exit(2);
}
