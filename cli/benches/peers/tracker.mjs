// The tracker's stream processing as a team would hand-write it in one
// Node.js Lambda (AWS SDK v3), the peer the handlers benchmark measures
// jobstream against; the same design as tracker.py (read its docstring):
// per application, its running state in a state table read with consistent
// BatchGetItem, one TransactWriteItems of its new history entries, the
// count's change and its state (conditioned on the sequence number it was
// read at), then one guarded UpdateItem of its projections.
//
// Run as a Lambda (`handler`) or, for the benchmark, `node tracker.mjs
// EVENT.json [ROUNDS]`: each round once a line is read on stdin, one JSON line
// per round with its CPU and wall time.
// Environment: TABLE_NAME, STATE_TABLE_NAME, AWS_ENDPOINT_URL (local).

import { readFileSync } from "node:fs";
import { createInterface } from "node:readline";
import {
  DynamoDBClient,
  BatchGetItemCommand,
  TransactWriteItemsCommand,
  UpdateItemCommand,
  ConditionalCheckFailedException,
} from "@aws-sdk/client-dynamodb";
import { v5 as uuidv5 } from "uuid";

const TABLE = process.env.TABLE_NAME ?? "lambda_api_applications";
const STATE_TABLE = process.env.STATE_TABLE_NAME ?? "jobstream-ledger";
const ddb = new DynamoDBClient({ maxAttempts: 5 });

const ENTRY_NS = "6a0b5c4e-1f7d-4c1b-9e53-7b1d2f30a8c4";
const OWNED = new Set(["GSI1PK", "GSI1SK", "GSI2PK", "GSI2SK", "historySequence"]);
const STAGE_FIELDS = ["id", "name", "order", "isCompleted", "completedDate", "notes",
  "performanceRating"];
const LABELS = [
  ["companyName", "Company Name"], ["positionTitle", "Position Title"],
  ["dateApplied", "Date Applied"], ["status", "Status"],
  ["companyUrl", "Company URL"], ["jobPostingUrl", "Job Posting URL"],
  ["companyCareerUrl", "Career Page URL"], ["companyCategory", "Company Category"],
  ["skillsMatch", "Skills Match"], ["jobSource", "Job Source"],
  ["coverLetterRequired", "Cover Letter Required"],
  ["specialRequirements", "Special Requirements"], ["salaryMin", "Min Salary"],
  ["salaryMax", "Max Salary"], ["notes", "Notes"], ["offerDueDate", "Offer Due Date"],
];
const MAX_ACTIONS = 100;

const seqKey = (s) => s.padStart(40, "0");
const norm = (v) => (v === undefined || v === null || "NULL" in v ? null : v);
// Attribute values compared as DynamoDB compares them (stable key order).
const same = (a, b) => canon(norm(a)) === canon(norm(b));
const canon = (v) => JSON.stringify(v, (_, x) =>
  x && typeof x === "object" && !Array.isArray(x)
    ? Object.fromEntries(Object.entries(x).sort(([p], [q]) => (p < q ? -1 : p > q ? 1 : 0)))
    : x);
const archived = (image) => image?.isArchived?.BOOL ?? false;

const appAttrs = (image) =>
  Object.fromEntries(Object.entries(image).filter(([k]) => k !== "PK" && k !== "SK" && !OWNED.has(k)));
const stageAttrs = (image) => Object.fromEntries(STAGE_FIELDS.map((f) => [f, image[f] ?? { NULL: true }]));

function snapshot(state) {
  const stages = Object.values(state.stages).sort((a, b) => {
    const oa = a.order?.N !== undefined ? Number(a.order.N) : Number.MAX_SAFE_INTEGER;
    const ob = b.order?.N !== undefined ? Number(b.order.N) : Number.MAX_SAFE_INTEGER;
    if (oa !== ob) return oa - ob;
    const ia = a.id?.S ?? "", ib = b.id?.S ?? "";
    return ia < ib ? -1 : ia > ib ? 1 : 0;
  });
  return { ...state.app, interviewStages: { L: stages.map((s) => ({ M: s })) } };
}

function describeAppModify(old, neu) {
  if (!archived(old) && archived(neu)) return "Archived application";
  if (archived(old) && !archived(neu)) return "Restored from archive";
  const labels = LABELS.filter(([attr]) => !same(old[attr], neu[attr])).map(([, l]) => l);
  return labels.length ? `Updated ${labels.join(", ")}` : null;
}

function atIso(record) {
  const ms = Math.floor(Number(record.dynamodb.ApproximateCreationDateTime) * 1000);
  return new Date(ms).toISOString();
}

const stateKey = (appId) => ({ pk: { S: `peer#tracker#${appId}` }, sk: { S: "state" } });
const freshState = () => ({ app: null, stages: {}, seq: 0, counted: false, last: "", readAt: null });

async function loadStates(appIds) {
  const states = new Map();
  for (let i = 0; i < appIds.length; i += 100) {
    let request = { [STATE_TABLE]: { Keys: appIds.slice(i, i + 100).map(stateKey), ConsistentRead: true } };
    while (request) {
      const out = await ddb.send(new BatchGetItemCommand({ RequestItems: request }));
      for (const item of out.Responses?.[STATE_TABLE] ?? []) {
        const appId = item.pk.S.slice(item.pk.S.lastIndexOf("#") + 1);
        states.set(appId, {
          app: item.app.M ?? null,
          stages: Object.fromEntries(Object.entries(item.stages.M).map(([k, v]) => [k, v.M])),
          seq: Number(item.seq.N),
          counted: item.counted.BOOL,
          last: item.last.S,
          readAt: item.last.S,
        });
      }
      request = out.UnprocessedKeys && Object.keys(out.UnprocessedKeys).length ? out.UnprocessedKeys : null;
    }
  }
  return states;
}

const stateItem = (appId, s) => ({
  ...stateKey(appId),
  app: s.app !== null ? { M: s.app } : { NULL: true },
  stages: { M: Object.fromEntries(Object.entries(s.stages).map(([k, v]) => [k, { M: v }])) },
  seq: { N: String(s.seq) },
  counted: { BOOL: s.counted },
  last: { S: s.last },
});

async function commit(appId, state, actions, delta) {
  if (delta) {
    actions.push({ Update: {
      TableName: TABLE,
      Key: { PK: { S: "META" }, SK: { S: "COUNT" } },
      // The type stamp jobstream's tracker file writes on what it creates.
      UpdateExpression: "ADD #c :d SET #t = :t",
      ExpressionAttributeNames: { "#c": "count", "#t": "type" },
      ExpressionAttributeValues: { ":d": { N: String(delta) }, ":t": { S: "application_count" } },
    } });
  }
  const put = { TableName: STATE_TABLE, Item: stateItem(appId, state) };
  if (state.readAt === null) {
    put.ConditionExpression = "attribute_not_exists(pk)";
  } else {
    put.ConditionExpression = "#l = :l";
    put.ExpressionAttributeNames = { "#l": "last" };
    put.ExpressionAttributeValues = { ":l": { S: state.readAt } };
  }
  actions.push({ Put: put });
  await ddb.send(new TransactWriteItemsCommand({ TransactItems: actions }));
  state.readAt = state.last;
}

async function project(image, state) {
  const sort = `UPDATED#${image.updatedAt.S}#${image.id.S}`;
  const want = {
    GSI1PK: { S: `STATUS#${image.status.S}#ARCHIVED#${archived(image) ? 1 : 0}` },
    GSI1SK: { S: sort },
  };
  if (!archived(image)) Object.assign(want, { GSI2PK: { S: "ACTIVE" }, GSI2SK: { S: sort } });
  if (state.seq) want.historySequence = { N: String(state.seq) };
  const drop = ["GSI2PK", "GSI2SK"].filter((k) => !(k in want) && k in image);
  if (Object.entries(want).every(([k, v]) => same(image[k], v)) && !drop.length) return;
  const names = { "#u": "updatedAt", "#s": "status", "#a": "isArchived" };
  const values = { ":u": image.updatedAt, ":s": image.status, ":a": image.isArchived };
  const sets = Object.entries(want).map(([k, v], i) => {
    names[`#p${i}`] = k;
    values[`:p${i}`] = v;
    return `#p${i} = :p${i}`;
  });
  let expr = `SET ${sets.join(", ")}`;
  if (drop.length) {
    drop.forEach((k, j) => { names[`#r${j}`] = k; });
    expr += ` REMOVE ${drop.map((_, j) => `#r${j}`).join(", ")}`;
  }
  try {
    await ddb.send(new UpdateItemCommand({
      TableName: TABLE,
      Key: { PK: image.PK, SK: image.SK },
      UpdateExpression: expr,
      ConditionExpression: "#u = :u AND #s = :s AND #a = :a",
      ExpressionAttributeNames: names,
      ExpressionAttributeValues: values,
    }));
  } catch (e) {
    if (!(e instanceof ConditionalCheckFailedException)) throw e;
    // a newer write won: its record fixes the projection
  }
}

async function processApp(appId, records, state) {
  const pk = `APP#${appId}`;
  let actions = [], delta = 0, latest = null;
  for (const record of records) {
    const d = record.dynamodb;
    const seqnum = d.SequenceNumber;
    if (state.last && seqKey(seqnum) <= seqKey(state.last)) continue; // a redelivery
    const neu = d.NewImage, old = d.OldImage;
    const sk = d.Keys.SK.S;
    const event = record.eventName;
    let description = null;
    if (sk === pk) {
      if (event === "REMOVE") {
        state.app = null;
        state.stages = {};
      } else {
        description = event === "INSERT"
          ? `Created application ${neu.companyName.S} - ${neu.positionTitle.S}`
          : describeAppModify(old ?? {}, neu);
        state.app = appAttrs(neu);
        latest = neu;
      }
      const counted = neu !== undefined && !archived(neu);
      delta += Number(counted) - Number(state.counted);
      state.counted = counted;
    } else if (sk.startsWith("STAGE#")) {
      if (event === "INSERT") description = `Added interview stage "${neu.name.S}"`;
      else if (event === "MODIFY") {
        if ([...STAGE_FIELDS, "applicationId"].some((f) => !same(old[f], neu[f]))) {
          description = `Updated interview stage "${old.name.S}"`;
        }
      } else description = `Removed interview stage "${old.name.S}"`;
      if (neu === undefined) delete state.stages[sk];
      else state.stages[sk] = stageAttrs(neu);
    }
    state.last = seqnum;
    if (description && state.app !== null) {
      state.seq += 1;
      const entry = {
        PK: { S: pk },
        SK: { S: `HIST#${String(state.seq).padStart(8, "0")}` },
        id: { S: uuidv5(record.eventID, ENTRY_NS) },
        applicationId: { S: appId },
        sequence: { N: String(state.seq) },
        description: { S: description },
        createdAt: { S: atIso(record) },
        snapshot: { M: snapshot(state) },
      };
      actions.push({ Put: { TableName: TABLE, Item: entry, ConditionExpression: "attribute_not_exists(PK)" } });
    }
    if (actions.length >= MAX_ACTIONS - 2) {
      await commit(appId, state, actions, delta);
      actions = [];
      delta = 0;
    }
  }
  if (actions.length || delta || state.last !== state.readAt) await commit(appId, state, actions, delta);
  if (latest !== null) await project(latest, state);
}

export async function handler(event) {
  const byApp = new Map();
  const firstIndex = new Map();
  event.Records.forEach((record, i) => {
    const { PK, SK } = record.dynamodb.Keys;
    if (!PK.S.startsWith("APP#") || SK.S.startsWith("HIST#")) return; // imply nothing
    const appId = PK.S.slice(4);
    if (!byApp.has(appId)) {
      byApp.set(appId, []);
      firstIndex.set(appId, i);
    }
    byApp.get(appId).push(record);
  });
  const states = await loadStates([...byApp.keys()]);
  let failed = null;
  for (const [appId, records] of byApp) {
    try {
      await processApp(appId, records, states.get(appId) ?? freshState());
    } catch (e) {
      console.error(JSON.stringify({ error: e.name, application: appId }));
      const i = firstIndex.get(appId);
      failed = failed === null ? i : Math.min(failed, i);
    }
  }
  if (failed === null) return { batchItemFailures: [] };
  return { batchItemFailures: [{ itemIdentifier: event.Records[failed].dynamodb.SequenceNumber }] };
}

if (process.argv[1] && import.meta.url === `file://${process.argv[1]}`) {
  const event = JSON.parse(readFileSync(process.argv[2], "utf8"));
  const rounds = Number(process.argv[3] ?? 1);
  const lines = createInterface({ input: process.stdin })[Symbol.asyncIterator]();
  for (let r = 0; r < rounds; r++) {
    await lines.next(); // the benchmark starts each round
    const cpu = process.cpuUsage();
    const wall = performance.now();
    const response = await handler(event);
    const used = process.cpuUsage(cpu);
    console.log(JSON.stringify({
      cpu: (used.user + used.system) / 1e6,
      wall: (performance.now() - wall) / 1e3,
      failures: response.batchItemFailures.length,
    }));
  }
  process.exit(0);
}
