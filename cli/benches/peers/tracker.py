"""The tracker's stream processing as a team would hand-write it in one
Python Lambda (boto3), the peer the handlers benchmark measures jobstream
against (SPEC §3: history entries with snapshots, historySequence, the GSI
projections, META/COUNT), exactly once under redelivery:

- the records of a batch are grouped by application, in stream order; each
  application's running state (its attributes and stages as of the last
  record applied, the last history number, whether it is counted, the last
  sequence number applied) is one item in a state table (no stream), read
  for the whole batch with consistent BatchGetItem;
- an application's new history entries, its state and the count's change go
  in one TransactWriteItems (up to 100 actions), the state conditioned on
  the sequence number it was read at: a redelivered record is skipped by
  that number, a lost answer fails the condition and the batch is retried;
- the projections (GSI keys, historySequence) are one guarded UpdateItem per
  application from its latest image, skipped when the image already holds
  them (no loop), a refused guard being a newer write that will fix them.

Run as a Lambda (`handler`) or, for the benchmark, `python3 tracker.py
EVENT.json [ROUNDS]`: the event is handled ROUNDS times (redeliveries after
the first), each round once a line is read on stdin, and each round prints
one JSON line with its CPU and wall time.
Environment: TABLE_NAME, STATE_TABLE_NAME, AWS_ENDPOINT_URL (local).
"""

import json
import os
import sys
import time
import uuid
from datetime import datetime, timezone

import boto3
from botocore.config import Config

TABLE = os.environ.get("TABLE_NAME", "lambda_api_applications")
STATE_TABLE = os.environ.get("STATE_TABLE_NAME", "jobstream-ledger")
ddb = boto3.client(
    "dynamodb", config=Config(retries={"mode": "standard", "max_attempts": 5})
)

ENTRY_NS = uuid.UUID("6a0b5c4e-1f7d-4c1b-9e53-7b1d2f30a8c4")
OWNED = {"GSI1PK", "GSI1SK", "GSI2PK", "GSI2SK", "historySequence"}
STAGE_FIELDS = ["id", "name", "order", "isCompleted", "completedDate", "notes",
                "performanceRating"]
LABELS = [
    ("companyName", "Company Name"), ("positionTitle", "Position Title"),
    ("dateApplied", "Date Applied"), ("status", "Status"),
    ("companyUrl", "Company URL"), ("jobPostingUrl", "Job Posting URL"),
    ("companyCareerUrl", "Career Page URL"),
    ("companyCategory", "Company Category"), ("skillsMatch", "Skills Match"),
    ("jobSource", "Job Source"), ("coverLetterRequired", "Cover Letter Required"),
    ("specialRequirements", "Special Requirements"), ("salaryMin", "Min Salary"),
    ("salaryMax", "Max Salary"), ("notes", "Notes"),
    ("offerDueDate", "Offer Due Date"),
]
MAX_ACTIONS = 100


def seq_key(sequence_number):
    return sequence_number.zfill(40)


def norm(v):
    return None if v is None or "NULL" in v else v


def archived(image):
    return image.get("isArchived", {}).get("BOOL", False)


def app_attrs(image):
    return {k: v for k, v in image.items() if k not in ("PK", "SK") and k not in OWNED}


def stage_attrs(image):
    return {f: image.get(f, {"NULL": True}) for f in STAGE_FIELDS}


def snapshot(state):
    snap = dict(state["app"])
    stages = sorted(
        state["stages"].values(),
        key=lambda s: (int(s["order"]["N"]) if "N" in s.get("order", {}) else 2**63,
                       s.get("id", {}).get("S", "")),
    )
    snap["interviewStages"] = {"L": [{"M": s} for s in stages]}
    return snap


def describe_app_modify(old, new):
    if not archived(old) and archived(new):
        return "Archived application"
    if archived(old) and not archived(new):
        return "Restored from archive"
    labels = [label for attr, label in LABELS if norm(old.get(attr)) != norm(new.get(attr))]
    return "Updated " + ", ".join(labels) if labels else None


def at_iso(record):
    t = float(record["dynamodb"]["ApproximateCreationDateTime"])
    dt = datetime.fromtimestamp(t, tz=timezone.utc)
    return dt.strftime("%Y-%m-%dT%H:%M:%S.") + f"{dt.microsecond // 1000:03d}Z"


def state_key(app_id):
    return {"pk": {"S": f"peer#tracker#{app_id}"}, "sk": {"S": "state"}}


def load_states(app_ids):
    states = {}
    pending = [state_key(a) for a in app_ids]
    while pending:
        chunk, pending = pending[:100], pending[100:]
        request = {STATE_TABLE: {"Keys": chunk, "ConsistentRead": True}}
        while request:
            out = ddb.batch_get_item(RequestItems=request)
            for item in out["Responses"].get(STATE_TABLE, []):
                app_id = item["pk"]["S"].rsplit("#", 1)[1]
                states[app_id] = {
                    "app": item["app"]["M"] if "M" in item["app"] else None,
                    "stages": {k: v["M"] for k, v in item["stages"]["M"].items()},
                    "seq": int(item["seq"]["N"]),
                    "counted": item["counted"]["BOOL"],
                    "last": item["last"]["S"],
                    "read_at": item["last"]["S"],
                }
            request = out.get("UnprocessedKeys") or None
    return states


def fresh_state():
    return {"app": None, "stages": {}, "seq": 0, "counted": False, "last": "", "read_at": None}


def state_item(app_id, state):
    return {
        **state_key(app_id),
        "app": {"M": state["app"]} if state["app"] is not None else {"NULL": True},
        "stages": {"M": {k: {"M": v} for k, v in state["stages"].items()}},
        "seq": {"N": str(state["seq"])},
        "counted": {"BOOL": state["counted"]},
        "last": {"S": state["last"]},
    }


def commit(app_id, state, actions, delta):
    """One transaction: the entries, the count's change, the state."""
    if delta:
        actions.append({"Update": {
            "TableName": TABLE,
            "Key": {"PK": {"S": "META"}, "SK": {"S": "COUNT"}},
            # The type stamp jobstream's tracker file writes on what it creates.
            "UpdateExpression": "ADD #c :d SET #t = :t",
            "ExpressionAttributeNames": {"#c": "count", "#t": "type"},
            "ExpressionAttributeValues": {":d": {"N": str(delta)}, ":t": {"S": "application_count"}},
        }})
    put = {"TableName": STATE_TABLE, "Item": state_item(app_id, state)}
    if state["read_at"] is None:
        put["ConditionExpression"] = "attribute_not_exists(pk)"
    else:
        put["ConditionExpression"] = "#l = :l"
        put["ExpressionAttributeNames"] = {"#l": "last"}
        put["ExpressionAttributeValues"] = {":l": {"S": state["read_at"]}}
    actions.append({"Put": put})
    ddb.transact_write_items(TransactItems=actions)
    state["read_at"] = state["last"]


def project(app_id, image, state):
    """The GSI keys and historySequence from the latest image, guarded."""
    status, updated = image["status"]["S"], image["updatedAt"]["S"]
    sort = f"UPDATED#{updated}#{image['id']['S']}"
    want = {"GSI1PK": {"S": f"STATUS#{status}#ARCHIVED#{int(archived(image))}"},
            "GSI1SK": {"S": sort}}
    if not archived(image):
        want.update({"GSI2PK": {"S": "ACTIVE"}, "GSI2SK": {"S": sort}})
    if state["seq"]:
        want["historySequence"] = {"N": str(state["seq"])}
    drop = [k for k in ("GSI2PK", "GSI2SK") if k not in want and k in image]
    if all(image.get(k) == v for k, v in want.items()) and not drop:
        return
    names = {"#u": "updatedAt", "#s": "status", "#a": "isArchived"}
    values = {":u": image["updatedAt"], ":s": image["status"], ":a": image["isArchived"]}
    sets = []
    for i, (k, v) in enumerate(want.items()):
        names[f"#p{i}"], values[f":p{i}"] = k, v
        sets.append(f"#p{i} = :p{i}")
    expr = "SET " + ", ".join(sets)
    if drop:
        for j, k in enumerate(drop):
            names[f"#r{j}"] = k
        expr += " REMOVE " + ", ".join(f"#r{j}" for j in range(len(drop)))
    try:
        ddb.update_item(
            TableName=TABLE,
            Key={"PK": image["PK"], "SK": image["SK"]},
            UpdateExpression=expr,
            ConditionExpression="#u = :u AND #s = :s AND #a = :a",
            ExpressionAttributeNames=names,
            ExpressionAttributeValues=values,
        )
    except ddb.exceptions.ConditionalCheckFailedException:
        pass  # a newer write won: its record fixes the projection


def process_app(app_id, records, state):
    pk = f"APP#{app_id}"
    actions, delta, latest = [], 0, None
    for record in records:
        seqnum = record["dynamodb"]["SequenceNumber"]
        if state["last"] and seq_key(seqnum) <= seq_key(state["last"]):
            continue  # applied before: a redelivery
        d = record["dynamodb"]
        new, old = d.get("NewImage"), d.get("OldImage")
        sk = d["Keys"]["SK"]["S"]
        event = record["eventName"]
        description = None
        if sk == pk:
            if event == "REMOVE":
                state["app"], state["stages"] = None, {}
            else:
                if event == "INSERT":
                    description = (f"Created application {new['companyName']['S']}"
                                   f" - {new['positionTitle']['S']}")
                else:
                    description = describe_app_modify(old or {}, new)
                state["app"] = app_attrs(new)
                latest = new
            counted = new is not None and not archived(new)
            delta += int(counted) - int(state["counted"])
            state["counted"] = counted
        elif sk.startswith("STAGE#"):
            if event == "INSERT":
                description = f'Added interview stage "{new["name"]["S"]}"'
            elif event == "MODIFY":
                if any(norm(old.get(f)) != norm(new.get(f))
                       for f in STAGE_FIELDS + ["applicationId"]):
                    description = f'Updated interview stage "{old["name"]["S"]}"'
            else:
                description = f'Removed interview stage "{old["name"]["S"]}"'
            if new is None:
                state["stages"].pop(sk, None)
            else:
                state["stages"][sk] = stage_attrs(new)
        state["last"] = seqnum
        if description and state["app"] is not None:
            state["seq"] += 1
            entry = {
                "PK": {"S": pk}, "SK": {"S": f"HIST#{state['seq']:08d}"},
                "id": {"S": str(uuid.uuid5(ENTRY_NS, record["eventID"]))},
                "applicationId": {"S": app_id},
                "sequence": {"N": str(state["seq"])},
                "description": {"S": description},
                "createdAt": {"S": at_iso(record)},
                "snapshot": {"M": snapshot(state)},
            }
            actions.append({"Put": {"TableName": TABLE, "Item": entry,
                                    "ConditionExpression": "attribute_not_exists(PK)"}})
        if len(actions) >= MAX_ACTIONS - 2:
            commit(app_id, state, actions, delta)
            actions, delta = [], 0
    if actions or delta or state["last"] != state["read_at"]:
        commit(app_id, state, actions, delta)
    if latest is not None:
        project(app_id, latest, state)


def handler(event, context=None):
    by_app = {}
    first_index = {}
    for i, record in enumerate(event["Records"]):
        keys = record["dynamodb"]["Keys"]
        pk, sk = keys["PK"]["S"], keys["SK"]["S"]
        if not pk.startswith("APP#") or sk.startswith("HIST#"):
            continue  # META/COUNT and history entries imply nothing
        app_id = pk[4:]
        by_app.setdefault(app_id, []).append(record)
        first_index.setdefault(app_id, i)
    states = load_states(list(by_app))
    failed = None
    for app_id, records in by_app.items():
        try:
            process_app(app_id, records, states.get(app_id) or fresh_state())
        except Exception as e:  # reported: Lambda retries from the first
            print(json.dumps({"error": type(e).__name__, "application": app_id}),
                  file=sys.stderr)
            i = first_index[app_id]
            failed = i if failed is None else min(failed, i)
    if failed is None:
        return {"batchItemFailures": []}
    seqnum = event["Records"][failed]["dynamodb"]["SequenceNumber"]
    return {"batchItemFailures": [{"itemIdentifier": seqnum}]}


if __name__ == "__main__":
    with open(sys.argv[1]) as f:
        event = json.load(f)
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 1
    for _ in range(rounds):
        sys.stdin.readline()  # the benchmark starts each round
        cpu, wall = time.process_time(), time.perf_counter()
        response = handler(event)
        print(json.dumps({
            "cpu": time.process_time() - cpu,
            "wall": time.perf_counter() - wall,
            "failures": len(response["batchItemFailures"]),
        }), flush=True)
