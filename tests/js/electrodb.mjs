// ElectroDB entities, used by tests/integration/import.rs, in sets: `taskapp`
// (a task tracker, the default), `sparse` (indexes whose composite
// attributes are all optional, which ElectroDB's put leaves out entirely)
// and `awkward` (constant and tailed key templates, a local secondary index,
// an entity with no sort key) and `playlists` (a padded key part, and the
// history jobstream keeps, read back through ElectroDB):
//   node electrodb.mjs schema [SET]               -> the entities' schemas as JSON
//   node electrodb.mjs write ENDPOINT TABLE [SET] -> sample items, written by ElectroDB
//   node electrodb.mjs read ENDPOINT TABLE playlists -> the history's descriptions, read by ElectroDB
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
      // what a report list shows: the index carries these besides the keys
      projection: ['firstName', 'title'],
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
      pk: { field: 'gsi2pk', composite: ['project'], template: 'OPEN#${project}', casing: 'none' },
      sk: { field: 'gsi2sk', composite: ['points', 'taskId'], template: 'P#${points}#T#${taskId}', casing: 'none' },
    },
    // Written only while the condition holds (a JS function): left to
    // ElectroDB by the import.
    openByProject: {
      index: 'gsi3pk-gsi3sk-index',
      condition: (attr) => attr.status === 'open',
      pk: { field: 'gsi3pk', composite: ['project'] },
      sk: { field: 'gsi3sk', composite: ['taskId'] },
    },
  },
};

// Every index of `enrollment` but the primary one reads optional attributes
// only: a put with none of an index's attributes writes neither of its keys;
// with some, each key stops at its first absent attribute; a template key
// that comes out empty is not written.
const enrollment = {
  model: { entity: 'enrollment', version: '1', service: 'learn' },
  attributes: {
    userId: { type: 'string', required: true },
    courseId: { type: 'string', required: true },
    certificateId: { type: 'string' },
    createdAt: { type: 'string' },
    grade: { type: 'string' },
    term: { type: 'string' },
  },
  indexes: {
    primary: {
      pk: { field: 'pk', composite: ['userId'] },
      sk: { field: 'sk', composite: ['courseId'] },
    },
    byCourse: {
      index: 'gsi1',
      pk: { field: 'gsi1pk', composite: ['courseId'] },
      sk: { field: 'gsi1sk', composite: ['createdAt'] },
    },
    cert: {
      index: 'gsi2',
      pk: { field: 'gsi2pk', composite: ['certificateId'] },
      sk: { field: 'gsi2sk', composite: [] },
    },
    graded: {
      index: 'gsi3',
      pk: { field: 'gsi3pk', composite: ['grade'] },
      sk: { field: 'gsi3sk', composite: ['term'] },
    },
    byTerm: {
      index: 'gsi4',
      pk: { field: 'gsi4pk', composite: [] },
      sk: { field: 'gsi4sk', composite: ['term'] },
    },
    certByTerm: {
      index: 'gsi5',
      pk: { field: 'gsi5pk', composite: ['certificateId'], template: '${certificateId}' },
      sk: { field: 'gsi5sk', composite: ['term'], template: 'T#${term}' },
    },
  },
};

// imp11's findings 1-3: a key `template` that is a constant (`FEED`, written
// lower-cased as `feed` unless `casing: none`) or ends in text after its
// last attribute (written after it); a local secondary index (its partition
// key is the table's); an entity whose primary index has no sort key
// (`setting`: ElectroDB can write it only to a table keyed by `pk` alone, so
// it is in the schema, not written).
const post = {
  model: { entity: 'post', version: '1', service: 'blog' },
  attributes: {
    // imp11's finding 18: a `label` names the attribute in keys.
    postId: { type: 'string', required: true, label: 'pid' },
    title: { type: 'string', required: true },
    publishedAt: { type: 'string', required: true },
    severity: { type: 'number' },
  },
  indexes: {
    byId: { pk: { field: 'pk', composite: ['postId'] }, sk: { field: 'sk', composite: [] } },
    published: {
      index: 'gsi1pk-gsi1sk-index',
      pk: { field: 'gsi1pk', template: 'FEED', composite: [] },
      sk: { field: 'gsi1sk', template: 'PUB#${publishedAt}#${postId}#V1', composite: ['publishedAt', 'postId'], casing: 'upper' },
    },
    all: {
      index: 'gsi2pk-gsi2sk-index',
      pk: { field: 'gsi2pk', template: 'ALL', composite: [], casing: 'none' },
      sk: { field: 'gsi2sk', composite: ['title'] },
    },
  },
};

const tag = {
  model: { entity: 'tag', version: '1', service: 'blog' },
  attributes: {
    tag: { type: 'string', required: true },
    postId: { type: 'string', required: true },
    label: { type: 'string', required: true },
    weight: { type: 'any' },
  },
  indexes: {
    byTag: { pk: { field: 'pk', composite: ['tag'], casing: 'upper' }, sk: { field: 'sk', composite: ['postId'] } },
    byLabel: { index: 'lsi1', pk: { field: 'pk', composite: ['tag'], casing: 'upper' }, sk: { field: 'lsi1sk', composite: ['label'] } },
  },
};

const setting = {
  model: { entity: 'setting', version: '2', service: 'blog' },
  attributes: { key: { type: 'string', required: true }, value: { type: 'string' } },
  indexes: { primary: { pk: { field: 'pk', composite: ['key'], template: 'SETTING#${key}' } } },
};

// A playlist and its entries, whose sort key pads `position` (kept only in
// the key), and the history jobstream keeps of them, read back as an
// ElectroDB entity (its ownership check wants `__edb_e__` and `__edb_v__`).
const playlist = {
  model: { entity: 'playlist', version: '1', service: 'music' },
  attributes: { playlistId: { type: 'string', required: true }, name: { type: 'string' } },
  indexes: { byId: { pk: { field: 'pk', composite: ['playlistId'] }, sk: { field: 'sk', composite: [] } } },
};

const entry = {
  model: { entity: 'entry', version: '1', service: 'music' },
  attributes: {
    playlistId: { type: 'string', required: true },
    position: { type: 'number', required: true, padding: { length: 4, char: '0' } },
    trackId: { type: 'string', required: true },
  },
  indexes: { byPlaylist: { pk: { field: 'pk', composite: ['playlistId'] }, sk: { field: 'sk', composite: ['position'] } } },
};

// Not imported: the entries jobstream writes, as the application reads them.
const playlistHist = {
  model: { entity: 'playlistHist', version: '1', service: 'music' },
  attributes: { playlistId_lower: { type: 'string' }, sequence: { type: 'string' }, description: { type: 'string' } },
  indexes: {
    primary: {
      pk: { field: 'pk', composite: ['playlistId_lower'], template: '$music#playlistid_${playlistId_lower}', casing: 'none' },
      sk: { field: 'sk', composite: ['sequence'], template: 'hist#${sequence}', casing: 'none' },
    },
  },
};

const sets = {
  playlists: {
    schemas: { playlist, entry },
    async write(e) {
      await e.playlist.put({ playlistId: 'PL1', name: 'Mix' }).go();
      await e.entry.put({ playlistId: 'PL1', position: 2, trackId: 'T2' }).go();
      await e.entry.put({ playlistId: 'PL1', position: 1, trackId: 'T1' }).go();
    },
    // The history's descriptions, as ElectroDB returns them (its ownership
    // check applied), one a line.
    async read(table, client) {
      const hist = new Entity(playlistHist, { table, client });
      const r = await hist.query.primary({ playlistId_lower: 'pl1' }).go();
      return r.data.map((d) => d.description);
    },
  },
  taskapp: {
    schemas: { employee, office, task },
    async write(e) {
      await e.employee.put({ employeeId: 'E-001', firstName: 'Ann', office: 'Gw Pike', title: 'Lead Dev', team: 'development', salary: 150, manager: 'E-000', dateHired: '2020-03-01' }).go();
      await e.employee.put({ employeeId: 'E-000', firstName: 'Bo', office: 'Gw Pike', title: 'CTO', team: 'product' }).go();
      await e.office.put({ officeName: 'Gw Pike', country: 'US', state: 'WA', city: 'Seattle', zip: '98101' }).go();
      await e.task.put({ taskId: 'Tk-9', project: 'Apollo', points: 5, status: 'open', owner: 'E-001' }).go();
      await e.task.put({ taskId: 'Tk-10', project: 'Apollo', points: 13, status: 'open' }).go();
      // A negative number padded as JavaScript's padStart pads it: `0-5`.
      await e.task.put({ taskId: 'Tk-11', project: 'Apollo', points: -5, status: 'open' }).go();
      // Not open: ElectroDB leaves openByProject's keys out.
      await e.task.put({ taskId: 'Tk-12', project: 'Apollo', points: 1, status: 'done' }).go();
    },
  },
  sparse: {
    schemas: { enrollment },
    async write(e) {
      // None of the optional attributes: only the primary keys and gsi1.
      await e.enrollment.put({ userId: 'U1', courseId: 'C1' }).go();
      await e.enrollment.put({ userId: 'U2', courseId: 'C1', certificateId: 'X9', createdAt: '2026-01-02', grade: 'A', term: 'fall' }).go();
      // grade alone: gsi3 with the sort key stopped at `term`.
      await e.enrollment.put({ userId: 'U3', courseId: 'C1', grade: 'B' }).go();
      // term alone: gsi3's partition key stopped at `grade`, gsi4, and
      // gsi5's sort key without its (empty) partition key.
      await e.enrollment.put({ userId: 'U4', courseId: 'C2', term: 'spring' }).go();
      // certificateId alone: gsi2, and gsi5's partition key.
      await e.enrollment.put({ userId: 'U5', courseId: 'C2', certificateId: 'Y1' }).go();
    },
  },
  awkward: {
    schemas: { post, tag, setting },
    async write(e) {
      await e.post.put({ postId: 'P1', title: 'Hello', publishedAt: '2026-11-01T00:00:00z' }).go();
      await e.post.put({ postId: 'p2', title: 'Second', publishedAt: '2026-11-02', severity: 2 }).go();
      await e.tag.put({ tag: 'Rust', postId: 'P1', label: 'Lang', weight: [1, 'a'] }).go();
      await e.tag.put({ tag: 'Rust', postId: 'p2', label: 'Systems' }).go();
    },
  },
};

function serialise(entity) {
  return JSON.parse(
    JSON.stringify(entity.schema, (_k, v) => (typeof v === 'function' ? v.toString() : v)),
  );
}

const [cmd, ...args] = process.argv.slice(2);
const set = sets[(cmd === 'schema' ? args[0] : args[2]) ?? 'taskapp'];
if (set && cmd === 'schema') {
  const out = Object.values(set.schemas).map((s) => serialise(new Entity(s, { table: 'x' })));
  process.stdout.write(JSON.stringify(out, null, 2) + '\n');
} else if (set && (cmd === 'write' || cmd === 'read')) {
  const [endpoint, table] = args;
  const client = DynamoDBDocumentClient.from(
    new DynamoDBClient({
      endpoint,
      region: 'us-east-1',
      credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
    }),
  );
  if (cmd === 'read') {
    for (const line of await set.read(table, client)) process.stdout.write(line + '\n');
  } else {
    const e = Object.fromEntries(
      Object.entries(set.schemas).map(([n, s]) => [n, new Entity(s, { table, client })]),
    );
    await set.write(e);
    process.stdout.write('written\n');
  }
} else {
  process.stderr.write(`usage: node electrodb.mjs schema [SET] | write|read ENDPOINT TABLE [SET] (SET: ${Object.keys(sets).join(', ')})\n`);
  process.exit(2);
}
